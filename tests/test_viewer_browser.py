"""`proctor view` in a real browser (Playwright driving Debian's Chromium): the server runs as `proctor view`
in a subprocess over two scripted qa runs (A: wrong on Quillan, with a hostile reply; B: right).
A user opens the run list, a run, its item browser, filters it, labels three items with the keyboard
(stored in the run folder's labels.sqlite, shown again after a reload), sees kappa on the meta-evaluation
page and the flipped item on the comparison page; the hostile reply renders as text everywhere and never runs.

Skipped, saying how to install them, when Chromium or Playwright is missing."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.viewer.server import free_port

CHROMIUM = Path(os.environ.get("PROCTOR_CHROMIUM", "/usr/bin/chromium"))
HOW = (
    "install them with `./install.sh` (as root: `apt-get install chromium`; then "
    "`.venv/bin/pip install -e '.[ui]'`, no `playwright install` needed)"
)
# No quotes, so the item page's pretty JSON shows it verbatim too.
PAYLOAD = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"
QUILLAN = "What colour are Quillan lanterns?"

try:
    from playwright.sync_api import Page, sync_playwright
except ImportError:  # pragma: no cover - depends on the machine
    sync_playwright = None

pytestmark = [
    pytest.mark.skipif(sync_playwright is None, reason=f"Playwright is not installed: {HOW}"),
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Chromium not found at {CHROMIUM}: {HOW}"),
]


def _candidate_a(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = messages[-1]["content"]
    if "Velmora" in text:
        return "It was founded by Ostrid Kael."
    if "Tarn" in text:
        return "1742"
    return f"They are red. {PAYLOAD}"  # wrong, and hostile


def _candidate_b(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = messages[-1]["content"]
    return "They are green." if "Quillan" in text else _candidate_a(messages, params)


register_script("viewer-browser-a", _candidate_a)
register_script("viewer-browser-b", _candidate_b)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str, Path]]:
    """(url, run A, run B, root) with `proctor view ROOT` serving them."""
    from test_viewer import _config  # the scripted qa run of the viewer's tests

    base = tmp_path_factory.mktemp("viewer-browser")
    root = base / "runs"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROCTOR_CACHE_DIR", str(base / "cache"))
        a = run_config(_config(base, "viewer-a", "viewer-browser-a"), out=root, show_progress=False).run_dir
        b = run_config(_config(base, "viewer-b", "viewer-browser-b"), out=root, show_progress=False).run_dir
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
        yield url, a.name, b.name, root
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.fixture
def page() -> Iterator[Page]:
    """A fresh headless Chromium page; fails the test on any dialog (a hostile script that ran)."""
    assert sync_playwright is not None
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=str(CHROMIUM),
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        try:
            pg = browser.new_page(viewport={"width": 1280, "height": 800})
            dialogs: list[str] = []
            pg.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            yield pg
            assert dialogs == []
        finally:
            browser.close()


def _labels(run_dir: Path) -> list[tuple[str, str, str]]:
    con = sqlite3.connect(run_dir / "labels.sqlite")
    try:
        return con.execute("SELECT item_key, annotator, label FROM labels ORDER BY id").fetchall()
    finally:
        con.close()


def _row_keys(page: Page) -> list[str]:
    rows = page.locator("tr.item")
    return [rows.nth(i).get_attribute("data-key") or "" for i in range(rows.count())]


def test_browse_filter_label_reload_and_see_kappa(served: tuple[str, str, str, Path], page: Page) -> None:
    url, a, _, root = served
    # The run list shows both runs; open A, then its answers.
    page.goto(url + "/")
    assert page.locator("#runs tr[data-run]").count() == 2
    page.click(f'#runs a[href="/runs/{a}"]')
    page.wait_for_url(f"{url}/runs/{a}")
    assert page.locator("h1").inner_text() == a
    page.click(f'a[href="/runs/{a}/items?kind=answer"]')
    page.wait_for_url("**/items?kind=answer")
    assert page.locator("tr.item").count() == 6  # 2 candidates x 3 questions

    # Filters: the form's selects, then the search box reached with "/".
    page.select_option('select[name="verdict"]', "incorrect")
    page.click('#filters button[type="submit"]')
    page.wait_for_url("**verdict=incorrect**")
    assert page.locator("tr.item").count() == 1 and QUILLAN in page.locator("tr.item").inner_text()
    page.select_option('select[name="verdict"]', "")
    page.select_option('select[name="candidate"]', "solo")
    page.click('#filters button[type="submit"]')
    page.wait_for_url("**candidate=solo**")
    assert page.locator("tr.item").count() == 3
    page.locator("tr.item").nth(0).locator("td").nth(2).click()  # focus leaves the form
    page.keyboard.press("/")
    assert page.evaluate("document.activeElement.id") == "q"
    page.keyboard.type("Ostrid")
    page.keyboard.press("Enter")
    page.wait_for_url("**q=Ostrid**")
    rows = page.locator("tr.item")
    assert rows.count() == 1 and "Ostrid Kael" in rows.inner_text()

    # Label solo's three answers with the keyboard: c, c and i where the judge says so (kappa 1).
    page.goto(f"{url}/runs/{a}/items?kind=answer&candidate=solo")
    rows = page.locator("tr.item")
    keys = _row_keys(page)
    wanted = ["incorrect" if QUILLAN in rows.nth(i).inner_text() else "correct" for i in range(3)]
    assert sorted(wanted) == ["correct", "correct", "incorrect"]
    page.fill("#annotator", "browser-tester")
    rows.nth(0).locator("td").nth(2).click()  # select the first row (leaves the name field)
    for label in wanted:
        page.keyboard.press(label[0])  # the selection moves to the next row at once
    page.wait_for_selector("#toast:not([hidden])")
    deadline = time.monotonic() + 10
    while len(_labels(root / a)) < 3 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert sorted(_labels(root / a)) == sorted(
        (k, "browser-tester", w) for k, w in zip(keys, wanted, strict=True)
    )
    page.reload()
    cells = page.locator("td.labels")
    assert [cells.nth(i).inner_text().strip() for i in range(3)] == [f"browser-tester: {w}" for w in wanted]
    assert page.input_value("#annotator") == "browser-tester"  # remembered

    # kappa appears on the meta-evaluation page: the labels agree with the LLM judge on every item.
    page.click(f'a[href="/runs/{a}"]')
    page.click(f'a[href="/runs/{a}/metaeval"]')
    page.wait_for_url(f"**/runs/{a}/metaeval")
    judge = page.locator('#agreement tr[data-method="llm_with_reference"]')
    assert judge.locator("td").nth(2).inner_text() == "3"  # n
    assert judge.locator("td.kappa").inner_text() == "1.000"


def test_compare_two_runs_shows_the_flipped_item(served: tuple[str, str, str, Path], page: Page) -> None:
    url, a, b, _ = served
    page.goto(f"{url}/runs/{a}")
    form = page.locator('form[action="/compare"]')
    form.locator('select[name="b"]').select_option(b)
    form.locator('button[type="submit"]').click()
    page.wait_for_url("**/compare?**")
    flips = page.locator("#flips tbody tr")
    assert flips.count() == 2  # Quillan, under the LLM judge and under F1
    for i in range(2):
        row = flips.nth(i)
        assert QUILLAN in row.inner_text()
        cells = row.locator("td")
        assert cells.nth(3).locator(".chip").inner_text() == "incorrect"
        assert cells.nth(4).locator(".chip").inner_text() == "correct"
        assert cells.nth(4).locator(".answer-b").inner_text() == "They are green."
    # The A link opens the item in run A.
    flips.nth(0).locator("a", has_text="A").click()
    page.wait_for_url(f"**/runs/{a}/items/**")
    assert QUILLAN in page.locator("main").inner_text()


def test_hostile_reply_renders_as_text(served: tuple[str, str, str, Path], page: Page) -> None:
    url, a, b, _ = served

    def harmless(where: str) -> None:
        assert page.evaluate("typeof window.__pwned") == "undefined", where
        assert page.locator('img[src="x"]').count() == 0, where

    page.goto(f"{url}/runs/{a}/items?kind=answer")
    assert PAYLOAD in page.locator("#items").inner_text()
    harmless("item list")
    page.goto(f"{url}/runs/{a}/items?kind=answer&q=lanterns")
    assert PAYLOAD in page.locator("#items").inner_text()
    harmless("search results")
    row = page.locator("tr.item", has_text=PAYLOAD).first
    row.locator("a.open").click()
    page.wait_for_url(f"**/runs/{a}/items/**")
    assert PAYLOAD in page.locator("#summary").inner_text()  # the answer, above the label buttons
    assert PAYLOAD in page.locator("main pre").first.inner_text()  # the item's data
    harmless("item page")
    page.goto(f"{url}/compare?a={a}&b={b}")
    assert PAYLOAD in page.locator("#flips").inner_text()
    harmless("compare page")


def test_item_page_shows_question_reference_answer_then_each_calls_transcript(
    served: tuple[str, str, str, Path], page: Page
) -> None:
    url, a, _, root = served
    con = sqlite3.connect(root / a / "run.sqlite")
    key = next(
        k
        for k, d in con.execute("SELECT key, data FROM items WHERE kind='answer'")
        if QUILLAN in d and '"solo"' in d
    )
    n_calls = con.execute("SELECT COUNT(*) FROM model_calls WHERE item_key=?", (key,)).fetchone()[0]
    con.close()
    page.goto(f"{url}/runs/{a}/items/{key}")
    cells = page.locator("#summary > div")
    assert cells.count() == 3
    assert [cells.nth(i).locator("dt").inner_text() for i in range(3)] == ["question", "reference", "answer"]
    assert (
        cells.nth(0).locator("dd").inner_text() == QUILLAN
        and cells.nth(1).locator("dd").inner_text() == "green"
    )
    assert PAYLOAD in cells.nth(2).locator("dd").inner_text()
    calls = page.locator("#calls section.call")
    assert calls.count() == n_calls >= 2
    judge = page.locator("#calls section.call", has_text="judge").first
    prompt = judge.locator("details.call-messages")
    assert not prompt.locator(".turn").first.is_visible()  # collapsed until asked for
    prompt.locator("summary").click()
    assert "<candidate_answer>" in prompt.inner_text() and PAYLOAD in prompt.inner_text()
    assert '"verdict"' in judge.locator(".call-reply").inner_text()
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator('img[src="x"]').count() == 0


def test_compare_preference_keys_store_and_sum_up(served: tuple[str, str, str, Path], page: Page) -> None:
    url, a, b, root = served
    page.goto(f"{url}/compare?a={a}&b={b}")
    page.fill("#annotator", "pia")
    rows = page.locator("#flips tbody tr.flip")
    rows.nth(0).locator("td").nth(1).click()  # select the first row (and leave the name field)
    page.keyboard.press("b")  # B's answer is better; the selection moves on to the next row
    rows.nth(0).locator(".prefs .chip", has_text="pia: B").wait_for()
    page.keyboard.press("t")  # the same item pair under the next judge: now a tie (the latest counts)
    rows.nth(1).locator(".prefs .chip", has_text="pia: tie").wait_for()
    first = min(a, b)
    stored = [r for r in _labels(root / first) if r[0].startswith("pref:") and r[1] == "pia"]
    assert [r[2] for r in stored] == ["b" if first == a else "a", "tie"]
    page.reload()
    assert page.locator("#prefs-summary").inner_text().startswith("A preferred 0 · B preferred 0 · tie 1")
