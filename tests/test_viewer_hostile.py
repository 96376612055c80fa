"""Hostile run folders and requests against `proctor view`: links of every kind (a run folder that is a
link, links from every file the viewer opens — run store, its SQLite side files, report, label store, side
index — to a folder outside the runs folder, dangling links, hard links), corrupt stores (random bytes,
truncated, empty, a SQLite file that is not a proctor store), oversized and deeply nested bodies,
cross-origin and origin-less writes, and path traversal in every path parameter. Each is refused or shown as
an error (never a bare 500), the good runs keep working, and no file outside the runs folder is read into a
page, created or changed (a snapshot of the sibling folder's tree, sizes and times before and after each
test). The suite runs as root and, re-run by `test_suite_passes_as_an_ordinary_user`, as an ordinary user.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from ordinary_user import USER, ordinary_user
from proctor.store import RunStore
from proctor.viewer import create_app

CSRF = "csrf-token"
ORIGIN = "http://127.0.0.1"
SECRET = "OUTSIDE-SECRET-7f3a"  # in every file outside the runs folder; must never reach a page
HOSTILE_ENV = "PROCTOR_HOSTILE_AS_USER"  # set when this suite is the re-run as the ordinary user

GOOD = ("good-a", "good-b")
# run id -> a word the runs list and the run's pages must give as the reason
LINKED = {
    "run-dir-link": "symbolic link",
    "run-dir-dangling": "symbolic link",
    "store-link": "symbolic link",
    "store-dangling": "symbolic link",
    "store-hardlink": "hard link",
    "wal-link": "symbolic link",
    "shm-link": "symbolic link",
    "journal-link": "symbolic link",
    "store-fifo": "not a regular file",
}
CORRUPT = {
    "random-bytes": "cannot be read",
    "truncated": "cannot be read",
    "empty": "not a proctor run store",
    "foreign": "not a proctor run store",
}
# Runs whose store is fine but another file the viewer opens links out: (run id, file, link target exists)
SIDE_LINKS = [
    ("labels-link", "labels.sqlite", True),
    ("labels-dangling", "labels.sqlite", False),
    ("labels-wal-link", "labels.sqlite-wal", False),
    ("labels-shm-link", "labels.sqlite-shm", True),
    ("labels-hardlink", "labels.sqlite", None),  # None: a hard link
    ("index-link", "viewer.sqlite", True),
    ("index-dangling", "viewer.sqlite", False),
    ("index-wal-link", "viewer.sqlite-wal", False),
]
REPORT_LINKS = [("report-link", True), ("report-dangling", False), ("report-hardlink", None)]


def _make_run(folder: Path, name: str, *, flip: bool = False) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    store = RunStore(folder / "run.sqlite")
    store.start_run(folder.name, "qa", {"name": name, "candidates": [{"name": "solo"}]}, "h", "0")
    for i in range(40):
        key = f"a{i}"
        store.put_item(key, "answer", {"candidate": "solo", "question_id": f"q{i}", "question": f"Q{i}?",
                                       "answer": f"{name} answer {i}"})  # fmt: skip
        verdict = "correct" if (i % 2 == 0) != (flip and i % 5 == 0) else "incorrect"
        store.put_judgment(
            key, "llm_with_reference", verdict=verdict, score=float(verdict == "correct"), reason="r"
        )
    store.finish_run(folder.name)
    store.close()


def _link(path: Path, target: Path | None, outside: Path, *, exists: bool | None) -> None:
    """`path` as a symbolic link to `target` (made first when `exists`), or a hard link to it (None)."""
    if target is None:
        target = outside / f"target-of-{path.parent.name}-{path.name}"
    if exists is None:
        target.write_bytes(SECRET.encode())
        os.link(target, path)
        return
    if exists and not target.exists():
        target.write_bytes(SECRET.encode())
    path.symlink_to(target)


def _build_world(base: Path) -> tuple[Path, Path]:
    runs, outside = base / "runs", base / "outside"
    runs.mkdir()
    outside.mkdir()
    for run_id in GOOD:
        _make_run(runs / run_id, run_id, flip=run_id == "good-b")
    (runs / "good-a" / "report.html").write_text("<p>the good report</p>")
    # outside: a real run (its config names the secret), files holding the secret, a labels database
    _make_run(outside / "real-run", SECRET)
    (outside / "secret.html").write_text(f"<p>{SECRET}</p>")
    with sqlite3.connect(outside / "labels.sqlite") as conn:
        conn.execute("CREATE TABLE secret (v TEXT)")
        conn.execute("INSERT INTO secret VALUES (?)", (SECRET,))
    conn.close()
    # links in place of a run folder or its store
    (runs / "run-dir-link").symlink_to(outside / "real-run")
    (runs / "run-dir-dangling").symlink_to(outside / "no-such-run")
    (runs / "store-link").mkdir()
    (runs / "store-link" / "run.sqlite").symlink_to(outside / "real-run" / "run.sqlite")
    (runs / "store-dangling").mkdir()
    (runs / "store-dangling" / "run.sqlite").symlink_to(outside / "created-by-viewer.sqlite")
    (runs / "store-hardlink").mkdir()
    shutil.copy(outside / "real-run" / "run.sqlite", outside / "hard.sqlite")
    os.link(outside / "hard.sqlite", runs / "store-hardlink" / "run.sqlite")
    for run_id, suffix in (("wal-link", "-wal"), ("shm-link", "-shm"), ("journal-link", "-journal")):
        _make_run(runs / run_id, run_id)
        (runs / run_id / f"run.sqlite{suffix}").symlink_to(outside / f"side{suffix}")
    (runs / "store-fifo").mkdir()
    os.mkfifo(runs / "store-fifo" / "run.sqlite")
    # corrupt stores
    (runs / "random-bytes").mkdir()
    (runs / "random-bytes" / "run.sqlite").write_bytes(os.urandom(16384))
    _make_run(runs / "truncated", "truncated")
    with (runs / "truncated" / "run.sqlite").open("r+b") as fh:
        size = fh.seek(0, 2)
        fh.truncate(size // 3)
    (runs / "empty").mkdir()
    (runs / "empty" / "run.sqlite").touch()
    (runs / "foreign").mkdir()
    with sqlite3.connect(runs / "foreign" / "run.sqlite") as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    conn.close()
    # good stores whose other files link out
    for run_id, name, exists in SIDE_LINKS:
        _make_run(runs / run_id, run_id)
        target = outside / "labels.sqlite" if (name == "labels.sqlite" and exists) else None
        _link(runs / run_id / name, target, outside, exists=exists)
    for run_id, exists in REPORT_LINKS:
        _make_run(runs / run_id, run_id)
        target = outside / "secret.html" if exists else None
        _link(runs / run_id / "report.html", target, outside, exists=exists)
    return runs, outside


def _snapshot(folder: Path) -> dict[str, tuple[int, int, int, int]]:
    """Every entry under `folder` (links not followed): mode, size, modification and change times."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            p = os.path.join(dirpath, name)
            st = os.lstat(p)
            out[os.path.relpath(p, folder)] = (st.st_mode, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    return out


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _build_world(tmp_path_factory.mktemp("hostile-viewer"))


@pytest.fixture(autouse=True)
def outside_untouched(world: tuple[Path, Path]) -> Iterator[None]:
    """Nothing outside the runs folder is created or changed by a test."""
    outside = world[1]
    before = _snapshot(outside)
    yield
    assert _snapshot(outside) == before


@pytest.fixture
def client(world: tuple[Path, Path]) -> TestClient:
    app = create_app(world[0], csrf_token=CSRF, max_body=4096, max_import_body=8192)
    return TestClient(app, base_url="http://127.0.0.1", headers={"Origin": ORIGIN, "X-CSRF-Token": CSRF})


def _no_secret(r: object) -> None:
    text = getattr(r, "text", "")
    assert SECRET not in text
    assert getattr(r, "status_code", 0) != 500


# --- hostile run folders -----------------------------------------------------------------------------
def test_runs_list_shows_every_hostile_run_as_broken_with_its_reason(client: TestClient) -> None:
    r = client.get("/")
    assert r.status_code == 200
    _no_secret(r)
    html = r.text
    for run_id in GOOD + tuple(rid for rid, _, _ in SIDE_LINKS) + tuple(rid for rid, _ in REPORT_LINKS):
        assert f'<a href="/runs/{run_id}">' in html, run_id  # a working run
    for run_id, reason in (LINKED | CORRUPT).items():
        row = html.split(f'data-run="{run_id}"', 1)[1].split("</tr>", 1)[0]
        assert "broken" in row and reason in row, (run_id, row)
        assert f'<a href="/runs/{run_id}">' not in html
    compare_form = html.split("Compare two runs", 1)[1]
    assert "random-bytes" not in compare_form and "good-b" in compare_form


@pytest.mark.parametrize("run_id", sorted(LINKED | CORRUPT))
def test_pages_of_a_broken_run_are_error_pages_with_the_reason(client: TestClient, run_id: str) -> None:
    reason = (LINKED | CORRUPT)[run_id]
    for path in ("", "/items", "/items/a1", "/metaeval", "/report", "/labels", "/labels.jsonl"):
        r = client.get(f"/runs/{run_id}{path}")
        _no_secret(r)
        assert r.status_code == 422, (path, r.status_code, r.text[:300])
        assert reason in r.text, (path, r.text[:300])
    r = client.get("/compare", params={"a": "good-a", "b": run_id})
    _no_secret(r)
    assert r.status_code == 422 and reason in r.text
    body = {"item_id": "a1", "label": "correct", "annotator": "ana"}
    assert client.post(f"/runs/{run_id}/labels", json=body).status_code == 422
    assert (
        client.post(
            f"/runs/{run_id}/labels/import", content=b'{"item_id": "a1", "label": "correct"}'
        ).status_code
        == 422
    )
    # the good runs are unaffected
    assert client.get("/runs/good-a/items").status_code == 200


@pytest.mark.parametrize(("run_id", "name", "exists"), SIDE_LINKS)
def test_a_linked_label_store_or_index_is_refused_never_followed(
    client: TestClient, run_id: str, name: str, exists: bool | None
) -> None:
    label_pages = ("/labels", "/labels.jsonl", "/metaeval", "/items", "/items/a1", "")
    index_pages = ("/items", "/items/a1?q=answer", "")
    for path in label_pages if name.startswith("labels") else index_pages:
        r = client.get(f"/runs/{run_id}{path}")
        _no_secret(r)
        assert r.status_code == 422, (path, r.status_code)
        assert "refused" in r.text and name in r.text
    if name.startswith("labels"):
        body = {"item_id": "a1", "label": "correct", "annotator": "ana"}
        r = client.post(f"/runs/{run_id}/labels", json=body)
        assert r.status_code == 422 and name in r.json()["error"]
        r = client.post(f"/runs/{run_id}/labels/import", content=b'{"item_id": "a1", "label": "correct"}')
        assert r.status_code == 422
        pref = {
            "run_a": run_id,
            "item_a": "a1",
            "run_b": "zz-none",
            "item_b": "a1",
            "label": "a",
            "annotator": "x",
        }
        assert client.post("/compare/preferences", json=pref).status_code in (404, 422)
    else:
        assert client.get("/compare", params={"a": "good-a", "b": run_id}).status_code == 422


@pytest.mark.parametrize(("run_id", "exists"), REPORT_LINKS)
def test_a_linked_report_is_not_served(client: TestClient, run_id: str, exists: bool | None) -> None:
    r = client.get(f"/runs/{run_id}/report")
    _no_secret(r)
    assert r.status_code == 404
    page = client.get(f"/runs/{run_id}")
    assert page.status_code == 200  # the run itself is fine; it just has no report to show
    _no_secret(page)
    good = client.get("/runs/good-a/report")
    assert good.status_code == 200 and "the good report" in good.text


def test_good_runs_keep_working_beside_the_hostile_ones(client: TestClient) -> None:
    for url in ("/runs/good-a", "/runs/good-a/items", "/runs/good-a/items/a1", "/runs/good-a/metaeval"):
        assert client.get(url).status_code == 200, url
    r = client.get("/compare", params={"a": "good-a", "b": "good-b"})
    assert r.status_code == 200 and "a0" in r.text  # item a0 flipped between the two runs
    body = {"item_id": "a1", "label": "correct", "annotator": "ana"}
    assert client.post("/runs/good-a/labels", json=body).status_code == 200
    assert client.get("/runs/good-a/labels").json()[-1]["label"] == "correct"


def test_no_side_file_is_created_beside_a_link_target(world: tuple[Path, Path], client: TestClient) -> None:
    """SQLite creates -wal/-shm/-journal next to the file it opens: after visiting every run, none exists
    outside (the autouse snapshot checks too) and no run folder gained a link."""
    runs, outside = world
    for run_id in sorted(LINKED | CORRUPT):
        client.get(f"/runs/{run_id}/items")
    made_here = [
        p.name
        for p in outside.iterdir()
        if p.name.endswith(("-wal", "-shm", "-journal")) and not p.name.startswith("target-of-")
    ]
    assert made_here == []  # (the `target-of-*` files are this suite's own link targets)
    assert not (outside / "created-by-viewer.sqlite").exists()
    for folder in runs.iterdir():
        if folder.is_dir() and not folder.is_symlink():
            for f in folder.iterdir():
                if f.is_symlink():
                    assert folder.name in {
                        *LINKED,
                        *(r for r, _, _ in SIDE_LINKS),
                        *(r for r, _ in REPORT_LINKS),
                    }


# --- requests ------------------------------------------------------------------------------------
WRITES = [
    ("/runs/good-a/labels", "json"),
    ("/compare/preferences", "json"),
    ("/runs/good-a/labels/import", "jsonl"),
]


def _deep(depth: int) -> bytes:
    return (
        b'{"item_id": "a1", "label": "correct", "annotator": "ana", "note": '
        + b"[" * depth
        + b"]" * depth
        + b"}"
    )


@pytest.mark.parametrize(("url", "kind"), WRITES)
def test_oversized_bodies_get_413(client: TestClient, url: str, kind: str) -> None:
    limit = 8192 if kind == "jsonl" else 4096
    big = b'{"item_id": "a1", "label": "correct", "annotator": "ana", "note": "' + b"x" * limit + b'"}'
    r = client.post(url, content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted as it streams
        yield big[:100]
        for i in range(100, len(big), 1000):
            yield big[i : i + 1000]

    r = client.post(url, content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 413


@pytest.mark.parametrize(("url", "kind"), WRITES)
def test_deeply_nested_json_gets_400(client: TestClient, url: str, kind: str) -> None:
    for depth in (50, 1000):
        r = client.post(url, content=_deep(depth)[:4000] if depth > 50 else _deep(depth))
        assert r.status_code == 400, (depth, r.status_code, r.text[:200])
    # brackets inside strings are text, not nesting
    ok = b'{"item_id": "a1", "label": "correct", "annotator": "ana", "note": "' + b"[[[[" * 30 + b'"}'
    assert client.post("/runs/good-a/labels", content=ok).status_code == 200


@pytest.mark.parametrize(("url", "kind"), WRITES)
@pytest.mark.parametrize(
    "headers",
    [
        {},  # neither Origin nor Referer
        {"Origin": "http://127.0.0.1:9999"},  # another local port: same site, not same origin
        {"Origin": "http://evil.example"},
        {"Origin": "null"},
        {"Origin": "file://"},
        {"Referer": "http://127.0.0.1:8080/runs/good-a"},
        {"Origin": "http://127.0.0.1.evil.example"},
    ],
    ids=["none", "other-port", "other-host", "null", "file", "referer-other-port", "suffix-host"],
)
def test_cross_origin_and_origin_less_writes_get_403(
    world: tuple[Path, Path], url: str, kind: str, headers: dict[str, str]
) -> None:
    app = create_app(world[0], csrf_token=CSRF)
    c = TestClient(app, base_url="http://127.0.0.1", headers={"X-CSRF-Token": CSRF, **headers})
    body = {"item_id": "a1", "label": "correct", "annotator": "ana"}
    r = c.post(url, json=body)
    assert r.status_code == 403, r.text
    assert "origin" in r.json()["error"].lower()


def test_same_origin_writes_pass_by_origin_or_referer(world: tuple[Path, Path]) -> None:
    app = create_app(world[0], csrf_token=CSRF)
    body = {"item_id": "a1", "label": "unsure", "annotator": "ori"}
    for base, headers in (
        ("http://127.0.0.1", {"Origin": "http://127.0.0.1"}),
        ("http://127.0.0.1:8765", {"Origin": "http://127.0.0.1:8765"}),
        ("http://localhost:8765", {"Referer": "http://localhost:8765/runs/good-a/items?kind=answer"}),
    ):
        c = TestClient(app, base_url=base, headers={"X-CSRF-Token": CSRF, **headers})
        assert c.post("/runs/good-a/labels", json=body).status_code == 200, (base, headers)
    wrong_port = TestClient(
        app, base_url="http://127.0.0.1:8765", headers={"X-CSRF-Token": CSRF, "Origin": ORIGIN}
    )
    assert wrong_port.post("/runs/good-a/labels", json=body).status_code == 403
    no_csrf = TestClient(app, base_url="http://127.0.0.1", headers={"Origin": ORIGIN})
    assert no_csrf.post("/runs/good-a/labels", json=body).status_code == 403  # the CSRF token still counts


# (a bare ".." never reaches the server: clients resolve it in the URL before sending)
TRAVERSALS = [
    "%2e%2e",
    "..%2F..%2Foutside%2Freal-run",
    "%2E%2E%2Foutside",
    "..%5C..%5Coutside",
    "good-a%2F..%2F..%2Foutside%2Freal-run",
    "%2Fetc%2Fpasswd",
    "good-a%00",
    ".hidden",
    "~",
]


@pytest.mark.parametrize("bad", TRAVERSALS)
def test_path_traversal_in_every_path_parameter(client: TestClient, bad: str) -> None:
    for url in (
        f"/runs/{bad}",
        f"/runs/{bad}/items",
        f"/runs/{bad}/items/a1",
        f"/runs/{bad}/report",
        f"/runs/{bad}/metaeval",
        f"/runs/{bad}/labels",
        f"/runs/{bad}/labels.jsonl",
        f"/runs/good-a/items/{bad}",
        f"/static/{bad}",
        f"/static/{bad}%2F..%2Fapp.py",
        f"/compare?a=good-a&b={bad}",
        f"/compare?a={bad}&b=good-a",
        f"/runs/good-a/labels?item={bad}",
    ):
        r = client.get(url)
        _no_secret(r)
        assert r.status_code in (200, 400, 404), (url, r.status_code)
        if r.status_code == 200:  # only a query that found nothing (labels of an unknown item)
            assert url.startswith("/runs/good-a/labels?") and r.json() == []
    for url in (f"/runs/{bad}/labels", f"/runs/{bad}/labels/import"):
        r = client.post(url, content=b'{"item_id": "a1", "label": "correct", "annotator": "x"}')
        assert r.status_code in (400, 404, 405), (url, r.status_code)
    from urllib.parse import unquote

    raw = unquote(bad)
    pref = {"run_a": raw, "item_a": "a1", "run_b": "good-a", "item_b": "a1", "label": "a", "annotator": "x"}
    assert client.post("/compare/preferences", json=pref).status_code == 404
    pref = {"run_a": "good-a", "item_a": "a1", "run_b": "../outside/real-run", "item_b": "a1", "label": "a",
            "annotator": "x"}  # fmt: skip
    assert client.post("/compare/preferences", json=pref).status_code == 404


# --- as an ordinary user ---------------------------------------------------------------------------
def _user_python(user: str) -> list[str] | None:
    """A command line that starts this project's Python as `user`: the same interpreter when the user may
    run it, else the system's Python of the same version over the same site-packages."""
    src = str(Path(__file__).resolve().parents[1] / "src")
    site = next((p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()), None)
    same = subprocess.run(["runuser", "-u", user, "--", sys.executable, "-c", "import proctor"],
                          capture_output=True, env={**os.environ, "PYTHONPATH": src})  # fmt: skip
    if same.returncode == 0:
        return [sys.executable]
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin:/bin")
    if system is None or site is None:
        return None
    boot = (f"import site, sys; site.addsitedir({site!r}); sys.path.insert(0, {src!r}); import pytest; "
            "sys.exit(pytest.main(sys.argv[1:]))")  # fmt: skip
    return [system, "-c", boot]


@pytest.mark.skipif(os.environ.get(HOSTILE_ENV) == "1", reason="this is the re-run as the ordinary user")
def test_suite_passes_as_an_ordinary_user() -> None:
    """Re-run this file as an ordinary user (most people run proctor unprivileged): hostile folders owned by
    that user must be refused the same way."""
    if os.geteuid() != 0:
        pytest.skip(f"already running as an ordinary user (uid {os.geteuid()}): this run is that check")
    if shutil.which("runuser") is None:
        pytest.skip("runuser is not installed, so the suite cannot be re-run as an ordinary user")
    entry = ordinary_user(USER)
    if entry is None:
        pytest.skip(f"no user {USER!r} to re-run the suite as, and useradd could not create one")
    python = _user_python(USER)
    if python is None:
        pytest.skip(f"user {USER!r} cannot start this project's Python, and no system Python of its version")
    base = Path(tempfile.mkdtemp(prefix="proctor-hostile-viewer-"))  # pytest's own are private to root
    os.chown(base, entry.pw_uid, entry.pw_gid)
    run = python + (["-m", "pytest"] if len(python) == 1 else [])
    cmd = ["runuser", "-u", USER, "--", *run, str(Path(__file__).resolve()), "-q", "-x",
           "-p", "no:cacheprovider", f"--basetemp={base / 'pytest'}", "-k", "not ordinary_user"]  # fmt: skip
    env = {
        **os.environ,
        HOSTILE_ENV: "1",
        "HOME": entry.pw_dir,
        "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
    }
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=str(base), timeout=900)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert " passed" in done.stdout and "failed" not in done.stdout


def test_metaeval_cli_refuses_a_linked_label_store(world: tuple[Path, Path]) -> None:
    """`proctor metaeval RUN_DIR` opens the same label store: a link there is a user error naming it."""
    from proctor.errors import UserError
    from proctor.viewer.metaeval_run import run_metaeval

    for run_id in ("labels-link", "labels-dangling", "labels-wal-link"):
        with pytest.raises(UserError, match=r"labels\.sqlite"):
            run_metaeval(world[0] / run_id, report=False)
