"""Screenshots of `proctor view` for the README: builds two small qa runs with scripted models (no model,
no network), serves them with `proctor view` and saves, at a 1280x800 viewport,

* docs/viewer-runs.png      the run list,
* docs/viewer-items.png     the item browser (filters, verdict chips, labels),
* docs/viewer-annotate.png  the annotation view (an item page just labelled with the keyboard),
* docs/viewer-transcript.png an item page's model calls: the candidate's and the judge's prompts and replies,
* docs/viewer-agent.png     an agent's item page: its steps (thought, action, observation) and its calls.

With `--exam-report RUN_DIR/report.html` (an exam run of the embedded models, e.g. `proctor demo`'s), it
saves instead docs/exam-beyond-guessing.png: that report's pipeline table, with each pipeline's closed-book
baseline on the same items and its chance-corrected gain.

Needs Debian's Chromium and Playwright (`./install.sh` installs both). Run from the repository root:

    .venv/bin/python docs/screenshots.py [--out docs]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, sync_playwright

from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.viewer.server import free_port

CHROMIUM = Path(os.environ.get("PROCTOR_CHROMIUM", "/usr/bin/chromium"))
VIEWPORT = {"width": 1280, "height": 800}
WIDE = {"width": 1480, "height": 900}  # an exam report's pipeline table
SHOTS = (
    "viewer-runs.png",
    "viewer-items.png",
    "viewer-annotate.png",
    "viewer-transcript.png",
    "viewer-agent.png",
)
# A small made-up reference corpus: topic -> (question, reference answer).
FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
    "Harrowgate": ("How many arches does the Harrowgate bridge have?", "seven"),
    "Essmoor": ("Which river drains the Essmoor fens?", "the Lisk"),
    "Corvane": ("What is the Corvane ledger written on?", "vellum"),
}
# What each candidate gets wrong: the baseline misses three facts, the tuned model one.
WRONG = {
    "baseline": {
        "Quillan": "They are red, like the harbour lamps.",
        "Essmoor": "The Essmoor fens drain into the Tarn canal.",
        "Corvane": "It is written on birch bark.",
    },
    "tuned": {"Corvane": "It is written on birch bark."},
}


def _examiner(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = messages[-1]["content"]
    for topic, (q, a) in FACTS.items():
        if topic in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def _candidate(which: str) -> Any:
    def reply(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        text = messages[-1]["content"]
        for topic, (_, a) in FACTS.items():
            if topic in text:
                return WRONG[which].get(topic, f"According to the records, {a}.")
        return "I do not know."

    return reply


def _judge(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    text = next(m["content"] for m in messages if m["role"] == "user")
    answer = re.search(r"<candidate_answer>(.*?)</candidate_answer>", text, re.DOTALL)
    got = answer.group(1).lower() if answer else ""
    for _, a in FACTS.values():
        if a in text:
            ok = a.lower() in got
            why = "names the reference answer" if ok else f"does not give the reference answer ({a})"
            return json.dumps({"reason": f"The answer {why}.", "verdict": "correct" if ok else "incorrect"})
    return json.dumps({"reason": "no reference found", "verdict": "incorrect"})


def _config(folder: Path, name: str, which: str) -> Path:
    docs = folder / "docs"
    docs.mkdir(parents=True, exist_ok=True)
    for topic, (q, a) in FACTS.items():
        (docs / f"{topic}.md").write_text(f"# {topic}\n\nAbout {topic}: the answer to '{q}' is {a}. " * 3)
    cfg = folder / f"{name}.yaml"
    cfg.write_text(
        f"""
protocol: qa
name: {name}
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: scripted/shots-examiner
  cand: scripted/shots-{which}
  judge: scripted/shots-judge
roles: {{examiner: ex, judge: judge}}
candidates:
  - {{name: {which}, model: cand}}
qa: {{num_questions: {len(FACTS)}, judges: [with_reference]}}
"""
    )
    return cfg


# A two-hop question for a ReAct agent over a document environment (the rageval protocol).
HOTPOT = [
    {
        "_id": "h1",
        "question": "Which river flows through the town where the Ambry Glassworks stands?",
        "answer": "River Ilse",
        "type": "bridge",
        "supporting_facts": [["Ambry Glassworks", 0], ["Ambry", 0]],
        "context": [
            ["Ambry Glassworks", ["The Ambry Glassworks stands in Ambry.", "It was founded in 1862."]],
            ["Ambry", ["Ambry is a town on the River Ilse."]],
        ],
    }
]


def _agent(messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
    observations = re.findall(r"^Observation: (.*)$", messages[-1]["content"], re.M)
    if not observations:
        return "Thought: I need the town of the glassworks first.\nAction: Search[Ambry Glassworks]"
    if len(observations) == 1:
        return "Thought: The glassworks is in Ambry; now the river of Ambry.\nAction: Search[Ambry]"
    return "Thought: Ambry is on the River Ilse.\nAction: Finish[River Ilse]"


def _agent_run(base: Path, root: Path) -> str:
    (base / "hotpot.json").write_text(json.dumps(HOTPOT))
    cfg = base / "agent.yaml"
    cfg.write_text(
        """
protocol: rageval
name: agent-react
corpus: {}
models: {m: scripted/shots-agent}
rageval:
  database: null
  documents: false
  hotpotqa: hotpot.json
  grid: {workflows: [react], llms: [m]}
"""
    )
    return run_config(cfg, out=root, show_progress=False).run_dir.name


def build(base: Path) -> tuple[Path, str, str]:
    register_script("shots-examiner", _examiner)
    register_script("shots-judge", _judge)
    register_script("shots-agent", _agent)
    for which in WRONG:
        register_script(f"shots-{which}", _candidate(which))
    os.environ["PROCTOR_CACHE_DIR"] = str(base / "cache")
    root = base / "runs"
    a = run_config(_config(base, "lore-baseline", "baseline"), out=root, show_progress=False).run_dir
    run_config(_config(base, "lore-tuned", "tuned"), out=root, show_progress=False)
    return root, a.name, _agent_run(base, root)


def shoot(url: str, run_a: str, agent_run: str, out: Path) -> None:
    with sync_playwright() as pw:
        browser = _browser(pw)
        try:
            page: Page = browser.new_page(viewport=VIEWPORT)
            page.goto(url + "/")
            page.fill("#annotator", "ana")
            page.locator("h1").click()  # the name is stored on change
            page.screenshot(path=str(out / "viewer-runs.png"))

            # Label the first three items in the browser with the keyboard: i, c, c.
            page.goto(f"{url}/runs/{run_a}/items?kind=answer")
            rows = page.locator("tr.item")
            rows.nth(0).locator("td").nth(2).click()
            for key in "icc":
                page.keyboard.press(key)
                page.wait_for_selector("#toast:not([hidden])")
            time.sleep(0.5)
            page.reload()
            rows = page.locator("tr.item")
            rows.nth(3).locator("td").nth(2).click()  # the selection shows where the keys go next
            page.screenshot(path=str(out / "viewer-items.png"))

            # The annotation view: an item the model got wrong, labelled with a note.
            page.goto(f"{url}/runs/{run_a}/items?kind=answer&verdict=incorrect")
            page.locator("tr.item a.open").first.click()
            page.wait_for_url("**/items/**")
            page.keyboard.press("n")
            page.keyboard.type("red is the harbour lamps, not the lanterns")
            page.keyboard.press("Escape")
            page.keyboard.press("i")
            page.wait_for_selector("#history tbody tr:nth-child(2)")
            page.screenshot(path=str(out / "viewer-annotate.png"))

            # The same item's model calls: open the messages, show the timeline from its start.
            for details in page.locator("details.call-messages").all():
                details.evaluate("d => d.open = true")
            page.evaluate("document.querySelector('#calls-head').scrollIntoView()")
            page.screenshot(path=str(out / "viewer-transcript.png"))

            # An agent's answer: its steps, then its calls.
            page.goto(f"{url}/runs/{agent_run}/items?kind=rageval_answer")
            page.locator("tr.item a.open").first.click()
            page.wait_for_url("**/items/**")
            page.evaluate("document.querySelector('#trace-head').scrollIntoView()")
            page.screenshot(path=str(out / "viewer-agent.png"))
        finally:
            browser.close()


def _browser(pw: Any) -> Any:
    return pw.chromium.launch(
        executable_path=str(CHROMIUM),
        headless=True,
        args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
    )


def shoot_exam_report(report: Path, out: Path) -> Path:
    """The pipeline table of an exam report, with its beyond-guessing columns and the sentence under it."""
    path = out / "exam-beyond-guessing.png"
    with sync_playwright() as pw:
        browser = _browser(pw)
        try:
            page: Page = browser.new_page(viewport=WIDE)
            page.goto(report.resolve().as_uri())
            table = page.locator("table", has=page.locator("th", has_text="beyond guessing")).first
            if table.count() == 0:
                sys.exit(f"{report}: no pipeline table with a 'beyond guessing' column (not an exam report?)")
            box = table.bounding_box()
            assert box is not None
            after = table.locator("xpath=following-sibling::*[1]")
            bottom = box["y"] + box["height"]
            if after.count() and (b := after.bounding_box()) is not None:
                bottom = b["y"] + b["height"]
            page.screenshot(
                path=str(path),
                full_page=True,
                clip={
                    "x": 0,
                    "y": max(0.0, box["y"] - 40),
                    "width": WIDE["width"],
                    "height": bottom - box["y"] + 56,
                },
            )
        finally:
            browser.close()
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=Path(__file__).parent)
    ap.add_argument("--exam-report", type=Path, default=None, help="an exam run's report.html to shoot")
    args = ap.parse_args()
    if not CHROMIUM.exists():
        sys.exit(
            f"Chromium not found at {CHROMIUM}: run ./install.sh (as root it installs Debian's chromium)"
        )
    if args.exam_report is not None:
        shot = shoot_exam_report(args.exam_report, args.out)
        print(f"{shot}: {shot.stat().st_size / 1024:.0f} KB")
        return
    with tempfile.TemporaryDirectory(prefix="proctor-shots-") as tmp:
        root, run_a, agent_run = build(Path(tmp))
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "proctor.cli.main", "view", str(root), "--port", str(port), "--no-open"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 90
            while True:
                try:
                    if httpx.get(url + "/", timeout=2).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    sys.exit("proctor view did not start")
                time.sleep(0.2)
            args.out.mkdir(parents=True, exist_ok=True)
            shoot(url, run_a, agent_run, args.out)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
    for name in SHOTS:
        print(f"{args.out / name}: {(args.out / name).stat().st_size / 1024:.0f} KB")


if __name__ == "__main__":
    main()
