"""The reference-QA protocol end to end with scripted models: questions, answers, judges, metrics,
errors recorded per item, zero calls and identical results on a re-run."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest

from proctor.models.retry import RetryableError
from proctor.models.scripted import register_script
from proctor.runner import run_config

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
}


def examiner(messages, params):
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def good_candidate(messages, params):
    text = messages[-1]["content"]
    # Knows Velmora and Tarn, wrong on Quillan.
    if "Velmora" in text:
        return "It was founded by Ostrid Kael."
    if "Tarn" in text:
        return "1742"
    return "They are red."


def failing_candidate(messages, params):
    raise RetryableError("HTTP 500", cause="http_500", status=500)


def judge(messages, params):
    text = next(m["content"] for m in messages if m["role"] == "user")  # the original prompt, even in re-asks
    if "Quillan" in text and "<reference_answer>" not in text:
        return "I cannot decide"  # unparseable: the without-reference judge fails on Quillan
    answer = re.search(r"<candidate_answer>(.*?)</candidate_answer>", text, re.DOTALL)
    ok = any(
        a in text and a.lower() in (answer.group(1).lower() if answer else "") for _, a in FACTS.values()
    )
    return json.dumps({"reason": "checked", "verdict": "correct" if ok else "incorrect"})


register_script("qa-examiner", examiner)
register_script("qa-good", good_candidate)
register_script("qa-fail", failing_candidate)
register_script("qa-judge", judge)


@pytest.fixture
def qa_config(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for key in FACTS:
        q, a = FACTS[key]
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        """
protocol: qa
corpus: {path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}
models:
  ex: scripted/qa-examiner
  good: scripted/qa-good
  bad: {spec: scripted/qa-fail, max_retries: 1}
  judge: scripted/qa-judge
roles: {examiner: ex, judge: judge}
candidates:
  - {name: good-closed, model: good}
  - {name: good-bm25, model: good, retriever: bm25, k: 1}
  - {name: broken, model: bad}
qa: {num_questions: 3}
"""
    )
    return cfg


def _calls(run_dir: Path) -> tuple[int, int]:
    con = sqlite3.connect(run_dir / "run.sqlite")
    total, cached = con.execute("SELECT COUNT(*), SUM(cached) FROM model_calls").fetchone()
    return total, cached or 0


def test_qa_run_scores_and_records_errors(qa_config: Path, tmp_path: Path) -> None:
    result = run_config(qa_config, out=tmp_path / "runs", show_progress=False)
    s = result.summary
    assert s["questions"]["kept"] == 3
    good = s["candidates"]["good-closed"]
    assert good["answered"] == 3
    # with reference: Velmora + Tarn correct, Quillan incorrect
    assert good["accuracy_with_reference"]["value"] == pytest.approx(2 / 3)
    assert good["accuracy_with_reference"]["n"] == 3
    lo, hi = good["accuracy_with_reference"]["lo"], good["accuracy_with_reference"]["hi"]
    assert 0 < lo < 2 / 3 < hi < 1
    # without reference: Quillan judge reply unparseable -> recorded as error, not scored
    assert good["accuracy_without_reference"]["n"] == 2
    assert good["accuracy_without_reference"]["judge_errors"] == 1
    assert good["em"]["value"] == pytest.approx(1 / 3)  # only "1742" is an exact match
    broken = s["candidates"]["broken"]
    assert broken["answered"] == 0 and broken["answer_errors"] == 3
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    causes = {r[0] for r in con.execute("SELECT error_cause FROM items WHERE status='error'")}
    assert causes == {"http_500"}
    errs = con.execute(
        "SELECT COUNT(*) FROM judgments WHERE error_cause = 'unparseable' AND error IS NOT NULL"
    ).fetchone()[0]
    assert errs == 2  # Quillan for both good candidates
    for f in ("results.json", "report.html", "items.jsonl", "items.parquet", "run.sqlite"):
        assert (result.run_dir / f).exists(), f
    # bm25 candidate retrieved the source chunk
    rows = [json.loads(line) for line in (result.run_dir / "items.jsonl").read_text().splitlines()]
    bm25 = [r for r in rows if r.get("candidate") == "good-bm25"]
    assert bm25 and all(len(r["retrieved_ids"]) == 1 for r in bm25)


def test_rerun_makes_no_calls_and_identical_results(qa_config: Path, tmp_path: Path) -> None:
    first = run_config(qa_config, out=tmp_path / "runs", show_progress=False)
    second = run_config(qa_config, out=tmp_path / "runs", show_progress=False)
    assert first.run_dir != second.run_dir
    total, cached = _calls(second.run_dir)
    failed_calls = 3  # the broken candidate's calls are never cached, so they are tried again
    assert total - cached == failed_calls
    assert (first.run_dir / "results.json").read_bytes() == (second.run_dir / "results.json").read_bytes()


def test_resume_skips_done_items(qa_config: Path, tmp_path: Path) -> None:
    first = run_config(qa_config, out=tmp_path / "runs", show_progress=False)
    n_items = (
        sqlite3.connect(first.run_dir / "run.sqlite").execute("SELECT COUNT(*) FROM items").fetchone()[0]
    )
    resumed = run_config(qa_config, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == first.run_dir
    con = sqlite3.connect(resumed.run_dir / "run.sqlite")
    assert con.execute("SELECT COUNT(*) FROM items").fetchone()[0] == n_items
    assert resumed.summary["candidates"] == first.summary["candidates"]
