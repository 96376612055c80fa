"""`proctor view` in a real browser (Playwright driving Debian's Chromium): the server runs as
`proctor view` in a subprocess; the item browser is labelled with the keyboard, the labels are stored in
the run folder's labels.sqlite and shown again after a reload, and a hostile model reply renders as text.

Skipped, saying how to install them, when Chromium or Playwright is missing."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from proctor.runner import run_config
from proctor.viewer.server import free_port

CHROMIUM = Path(os.environ.get("PROCTOR_CHROMIUM", "/usr/bin/chromium"))
HOW = "install them with `apt-get install chromium` and `.venv/bin/pip install playwright`"

try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

pytestmark = [
    pytest.mark.skipif(sync_playwright is None, reason=f"Playwright is not installed: {HOW}"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium not found at {CHROMIUM}: {HOW}"),
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    from test_viewer import _config  # the scripted qa run of the viewer's tests

    root = tmp_path / "runs"
    run_dir = run_config(
        _config(tmp_path, "viewer-a", "viewer-cand-a"), out=root, show_progress=False
    ).run_dir
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor.cli.main", "view", str(root), "--port", str(port), "--no-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"proctor view did not start: {proc.stdout.read() if proc.stdout else ''}")
            time.sleep(0.2)
        yield url, run_dir
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _labels(run_dir: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(run_dir / "labels.sqlite")
    try:
        return con.execute("SELECT item_key, annotator, label FROM labels ORDER BY id").fetchall()
    finally:
        con.close()


def test_label_items_with_the_keyboard_and_see_them_after_reload(served: tuple[str, Path]) -> None:
    url, run_dir = served
    assert sync_playwright is not None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            page = browser.new_page()
            dialogs: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(f"{url}/runs/{run_dir.name}/items?kind=answer")
            rows = page.locator("tr.item")
            assert rows.count() == 6
            keys = [rows.nth(i).get_attribute("data-key") for i in range(3)]
            page.fill("#annotator", "browser-tester")
            rows.nth(0).locator("td").nth(2).click()  # select the first row (leaves the name field)
            page.keyboard.press("c")
            page.wait_for_selector("#toast:not([hidden])")
            page.keyboard.press("i")  # the selection moved to the second row
            page.keyboard.press("u")
            deadline = time.monotonic() + 10
            while len(_labels(run_dir)) < 3 and time.monotonic() < deadline:
                time.sleep(0.1)
            assert _labels(run_dir) == [
                (keys[0], "browser-tester", "correct"),
                (keys[1], "browser-tester", "incorrect"),
                (keys[2], "browser-tester", "unsure"),
            ]
            page.reload()
            labels = page.locator("td.labels")
            assert labels.nth(0).inner_text().strip() == "browser-tester: correct"
            assert labels.nth(1).inner_text().strip() == "browser-tester: incorrect"
            assert page.input_value("#annotator") == "browser-tester"  # remembered
            # The hostile reply is shown as text and never runs.
            assert '<script>alert("pwned")</script>' in page.locator("#items").inner_text()
            # kappa appears on the meta-evaluation page once labels exist.
            page.goto(f"{url}/runs/{run_dir.name}/metaeval")
            assert re.search(r"llm_with_reference", page.locator("#agreement").inner_text())
            assert dialogs == []
        finally:
            browser.close()
