"""Serving the viewer: uvicorn on loopback by default, the URL printed, a browser opened unless told not to.

Another address (`--host 0.0.0.0`, a LAN address, a host name) is served only with an access token
(`--token`, or the environment variable PROCTOR_VIEW_TOKEN): then every request must carry it, and the
printed URL holds it once (`?token=...`), which the viewer swaps for an HttpOnly, SameSite=Strict cookie.
The viewer speaks plain HTTP: on an untrusted network put it behind a TLS proxy (or an SSH tunnel).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path
from urllib.parse import quote

from proctor.errors import UserError

HOST = "127.0.0.1"
MIN_TOKEN_CHARS = 16
UNSPECIFIED = ("0.0.0.0", "::", "")
TOKEN_HINT = "python -c 'import secrets; print(secrets.token_urlsafe(24))'"


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1 and `localhost` (a name that may resolve elsewhere counts as not loopback)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _family(host: str, port: int) -> socket.AddressFamily:
    try:
        return socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except (socket.gaierror, UnicodeError):
        raise UserError(
            f"proctor view: --host '{host}' is neither an IP address nor a name this machine resolves. "
            "Give an address of this machine (e.g. 0.0.0.0 for every interface, or its LAN address)."
        ) from None


def free_port(host: str = HOST) -> int:
    with socket.socket(_family(host, 0), socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def allowed_hosts(host: str) -> list[str]:
    """Host header values the app accepts besides loopback for a server bound to `host`."""
    if is_loopback(host):
        return []
    if host in UNSPECIFIED:
        return ["*"]  # every interface: any name may reach it; the token is what guards it
    bare = host.strip("[]")
    return [bare, f"[{bare}]"] if ":" in bare else [bare]


def check_options(host: str, token: str | None) -> None:
    """The security rules of `proctor view`, as UserErrors naming the fix."""
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise UserError(
            f"proctor view: --token is too short ({len(token)} characters); use at least {MIN_TOKEN_CHARS} "
            f"random characters, e.g. from `{TOKEN_HINT}`."
        )
    if token is None and not is_loopback(host):
        raise UserError(
            f"proctor view: --host {host} would let other machines read your runs and labels, so it needs "
            f"an access token. Add --token TOKEN (or set PROCTOR_VIEW_TOKEN; make one with `{TOKEN_HINT}`) "
            "and open the printed URL, which carries the token once; or leave out --host to serve on "
            "127.0.0.1 only."
        )


def serve(
    root: Path,
    *,
    host: str = HOST,
    port: int = 8765,
    token: str | None = None,
    open_browser: bool = True,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the runs under `root` at http://HOST:PORT/ until interrupted (port 0: any free port)."""
    import uvicorn

    from proctor.viewer.app import create_app

    root = Path(root)
    check_options(host, token)
    if not root.is_dir():
        raise UserError(
            f"proctor view: '{root}' is not a folder. Give the folder that holds run directories "
            "(default: runs/, where `proctor run` writes them)."
        )
    bind = host.strip("[]")
    if port == 0:
        port = free_port(bind)
    try:
        with socket.socket(_family(bind, port), socket.SOCK_STREAM) as s:
            s.bind((bind, port))
    except OSError as e:
        raise UserError(
            f"proctor view: cannot listen on {host} port {port} ({e.strerror or e}). Pick another port "
            "with --port N (or --port 0 for any free port), or an address of this machine with --host."
        ) from None
    shown = socket.gethostname() if bind in UNSPECIFIED else bind
    if ":" in shown:
        shown = f"[{shown}]"
    url = f"http://{shown}:{port}/" + (f"?token={quote(token, safe='')}" if token else "")
    announce(url)
    if open_browser:
        threading.Timer(0.8, lambda: webbrowser.open(url)).start()
    app = create_app(root, token=token, hosts=allowed_hosts(bind))
    uvicorn.run(app, host=bind, port=port, log_level="warning")
