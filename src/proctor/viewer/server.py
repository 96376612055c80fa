"""Serving the viewer: uvicorn on loopback only, the URL printed, a browser opened unless told not to."""

from __future__ import annotations

import socket
import threading
import webbrowser
from collections.abc import Callable
from pathlib import Path

from proctor.errors import UserError

HOST = "127.0.0.1"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def serve(
    root: Path,
    *,
    port: int = 8765,
    open_browser: bool = True,
    announce: Callable[[str], None] = print,
) -> None:
    """Serve the runs under `root` at http://127.0.0.1:PORT/ until interrupted (port 0: any free port)."""
    import uvicorn

    from proctor.viewer.app import create_app

    root = Path(root)
    if not root.is_dir():
        raise UserError(
            f"proctor view: '{root}' is not a folder. Give the folder that holds run directories "
            "(default: runs/, where `proctor run` writes them)."
        )
    if port == 0:
        port = free_port()
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((HOST, port))
    except OSError:
        raise UserError(
            f"proctor view: port {port} on {HOST} is in use. Pick another with --port N (or --port 0 "
            "for any free port)."
        ) from None
    url = f"http://{HOST}:{port}/"
    announce(url)
    if open_browser:
        threading.Timer(0.8, lambda: webbrowser.open(url)).start()
    uvicorn.run(create_app(root), host=HOST, port=port, log_level="warning")
