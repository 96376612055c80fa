"""`proctor view` security options: the loopback default is unchanged; another --host needs --token (the
CLI refuses without one); with a token every request carries it (query once -> HttpOnly SameSite=Strict
cookie, the cookie, or a Bearer header), its host passes the Host check; run ids never leave the root."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from starlette.testclient import TestClient
from typer.testing import CliRunner

from proctor.cli.main import app as cli_app
from proctor.errors import UserError
from proctor.store import RunStore
from proctor.viewer import create_app, serve
from proctor.viewer.app import TOKEN_COOKIE
from proctor.viewer.server import allowed_hosts, check_options, is_loopback

TOKEN = "s3cret-token-0123456789abcdef"
LAN = "192.168.7.20"


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A root with one tiny run folder (a store with one judged answer) and a secret file beside it."""
    base = tmp_path_factory.mktemp("viewer-sec")
    root = base / "runs"
    (root / "run-1").mkdir(parents=True)
    store = RunStore(root / "run-1" / "run.sqlite")
    store.start_run("run-1", "qa", {"name": "tiny", "candidates": [{"name": "solo"}]}, "h", "0")
    store.put_item("a1", "answer", {"candidate": "solo", "question": "Q?", "answer": "A."})
    store.put_judgment("a1", "llm_with_reference", verdict="correct", score=1.0, reason="ok")
    store.finish_run("run-1")
    store.close()
    (base / "secret.txt").write_text("top secret")
    return root


def _lan_app(root: Path):
    return create_app(root, csrf_token="csrf", token=TOKEN, hosts=allowed_hosts(LAN))


def test_loopback_default_needs_no_token(root: Path) -> None:
    client = TestClient(create_app(root), base_url="http://127.0.0.1")
    assert client.get("/").status_code == 200
    assert client.get("/runs/run-1").status_code == 200
    assert TestClient(client.app, base_url=f"http://{LAN}").get("/").status_code == 400  # Host check kept
    check_options("127.0.0.1", None)  # no error
    check_options("localhost", None)
    check_options("::1", None)
    assert is_loopback("127.0.0.2") and not is_loopback("0.0.0.0") and not is_loopback("example.org")


def test_no_token_is_refused(root: Path) -> None:
    client = TestClient(_lan_app(root), base_url=f"http://{LAN}")
    for url in ("/", "/runs/run-1", "/runs/run-1/items", "/runs/run-1/labels.jsonl", "/static/viewer.css"):
        r = client.get(url)
        assert r.status_code == 401, url
        assert "run-1" not in r.text and r.headers["www-authenticate"] == "Bearer"
    assert client.get("/", params={"token": "wrong" + TOKEN}).status_code == 401
    assert client.get("/", headers={"Authorization": "Bearer nope"}).status_code == 401
    client.cookies.set(TOKEN_COOKIE, "nope")
    assert client.get("/").status_code == 401
    r = client.post("/runs/run-1/labels", json={}, headers={"X-CSRF-Token": "csrf"})
    assert r.status_code == 401  # a write without the token is refused before the CSRF check


def test_query_token_once_sets_a_strict_httponly_cookie(root: Path) -> None:
    client = TestClient(_lan_app(root), base_url=f"http://{LAN}")
    first = client.get("/runs/run-1", params={"token": TOKEN, "x": "1"}, follow_redirects=False)
    assert first.status_code == 303
    assert first.headers["location"] == "/runs/run-1?x=1"  # the token leaves the address bar
    cookie = first.headers["set-cookie"]
    assert f"{TOKEN_COOKIE}={TOKEN}" in cookie
    assert "httponly" in cookie.lower() and "samesite=strict" in cookie.lower()
    # The client keeps the cookie: every later request passes without the query parameter.
    assert client.get("/runs/run-1").status_code == 200
    assert client.get("/runs/run-1/items").status_code == 200
    assert client.get("/").status_code == 200
    fresh = TestClient(client.app, base_url=f"http://{LAN}")
    assert fresh.get("/", params={"token": TOKEN}).status_code == 200  # follows the redirect


def test_bearer_header_and_the_hosts_allowed(root: Path) -> None:
    app = _lan_app(root)
    auth = {"Authorization": f"Bearer {TOKEN}"}
    assert TestClient(app, base_url=f"http://{LAN}:8765").get("/", headers=auth).status_code == 200
    assert TestClient(app, base_url="http://127.0.0.1").get("/", headers=auth).status_code == 200
    assert TestClient(app, base_url="http://evil.example").get("/", headers=auth).status_code == 400
    # Bound to every interface, any Host passes the Host check and the token does the guarding.
    wide = create_app(root, token=TOKEN, hosts=allowed_hosts("0.0.0.0"))
    assert TestClient(wide, base_url="http://myhost.lan").get("/", headers=auth).status_code == 200
    assert TestClient(wide, base_url="http://myhost.lan").get("/").status_code == 401
    with pytest.raises(ValueError):
        create_app(root, hosts=[LAN])  # another Host without a token is a programming error


def test_writes_still_need_the_csrf_token(root: Path) -> None:
    client = TestClient(
        _lan_app(root),
        base_url=f"http://{LAN}",
        headers={"Authorization": f"Bearer {TOKEN}", "Origin": f"http://{LAN}"},
    )
    body = {"item_id": "a1", "label": "correct", "annotator": "ana"}
    assert client.post("/runs/run-1/labels", json=body).status_code == 403
    assert client.post("/runs/run-1/labels", json=body, headers={"X-CSRF-Token": "csrf"}).status_code == 200


@pytest.mark.parametrize(
    "url",
    [
        "/runs/../items",
        "/runs/%2e%2e/items",
        "/runs/%2E%2E",
        "/runs/..%2F..%2Fetc/items",
        "/runs/%2e%2e%2fsecret.txt",
        "/runs/%2Fetc%2Fpasswd",
        "/runs//etc/passwd",
        "/runs/%2Fetc/labels.jsonl",
        "/runs/run-1%2F..%2F..%2Fsecret.txt/report",
        "/runs/nope/items",
        "/compare?a=..&b=run-1",
        "/compare?a=/etc&b=run-1",
        "/compare?a=%2e%2e%2fruns&b=run-1",
    ],
)
def test_path_traversal_in_run_ids_is_404(root: Path, url: str) -> None:
    auth = {"Authorization": f"Bearer {TOKEN}"}
    for client in (
        TestClient(create_app(root), base_url="http://127.0.0.1"),
        TestClient(_lan_app(root), base_url=f"http://{LAN}", headers=auth),
    ):
        r = client.get(url)
        assert r.status_code == 404, (url, r.status_code)
        assert "top secret" not in r.text


def test_cli_refuses_another_host_without_a_token(root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROCTOR_VIEW_TOKEN", raising=False)
    result = CliRunner().invoke(cli_app, ["view", str(root), "--host", "0.0.0.0", "--no-open"])
    assert isinstance(result.exception, UserError)
    message = str(result.exception)
    assert "--token" in message and "0.0.0.0" in message and "127.0.0.1" in message
    with pytest.raises(UserError, match="--token"):
        serve(root, host=LAN, open_browser=False)
    with pytest.raises(UserError, match="too short"):
        serve(root, host=LAN, token="short", open_browser=False)
    # Through the console script: one paragraph on stderr, exit code 2, no traceback.
    env = {k: v for k, v in os.environ.items() if k != "PROCTOR_VIEW_TOKEN"}
    r = subprocess.run(
        [sys.executable, "-m", "proctor.cli.main", "view", str(root), "--host", "0.0.0.0", "--no-open"],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr and "--token" in r.stderr
