"""The KIEval report section: per-candidate tables, plots, contamination with a flagged candidate, the
conversation viewer — and every piece of model text escaped."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from proctor.kit.record import load_run
from proctor.models.scripted import register_script
from proctor.report import render_report_html
from proctor.runner import run_config
from proctor.store import RunStore

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
QUESTIONS = [
    {"id": f"q{i}", "question": f"Question {i} {HOSTILE}?", "choices": ["w", "x", "y", "z"], "answer": "A"}
    for i in range(3)
]
# How each candidate answers the multiple-choice question (index -> letter) and its round quality (1-4).
PROFILES = {
    "good": ("AAA", 4),
    "mid": ("AAB", 3),
    "low": ("ABB", 2),
    "poor": ("BBB", 1),
    "cheat": ("AAA", 1),  # right on the static test, weak in conversation
}


def make_candidate(profile: str) -> Any:
    letters, quality = PROFILES[profile]

    def fn(messages: list[dict[str, str]], params: Any) -> str:
        i = int(re.search(r"Question (\d)", messages[1]["content"]).group(1))
        if len(messages) == 2:
            return f"{letters[i]}. {HOSTILE}"
        return f"[quality={quality}] reply {HOSTILE}"

    return fn


def interactor(messages: list[dict[str, str]], params: Any) -> str:
    return f"Follow-up {HOSTILE}"


def evaluator(messages: list[dict[str, str]], params: Any) -> str:
    last = messages[-1]["content"] if len(messages) == 2 else messages[1]["content"]
    q = int(re.findall(r"\[quality=(\d)\]", last)[-1])
    aspect = {"comment": f"comment {HOSTILE}", "score": q}
    return json.dumps(
        {
            **{a: aspect for a in ("accuracy", "logic", "relevance", "coherence", "conciseness")},
            "overall_comment": f"overall {HOSTILE}",
            "overall_score": q,
            "stop_conversation": False,
            "stop_reason": "none",
        }
    )


for _p in PROFILES:
    register_script(f"kv-rep-{_p}", make_candidate(_p))
register_script("kv-rep-int", interactor)
register_script("kv-rep-eval", evaluator)


def test_report_section_escapes_model_text_and_flags_contamination(tmp_path: Path) -> None:
    seed = tmp_path / "seed.jsonl"
    seed.write_text("".join(json.dumps(r) + "\n" for r in QUESTIONS))
    models = "\n".join(f"  {p}: scripted/kv-rep-{p}" for p in PROFILES)
    cands = "\n".join(f"  - {{name: {p}, model: {p}}}" for p in PROFILES)
    cfg = tmp_path / "k.yaml"
    cfg.write_text(
        f"""
protocol: kieval
corpus: {{}}
models:
{models}
  int: scripted/kv-rep-int
  ev: scripted/kv-rep-eval
roles: {{interactor: int, evaluator: ev}}
candidates:
{cands}
kieval:
  questions: {{path: {seed}}}
  max_rounds: 2
"""
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    s = result.summary
    assert s["candidates"]["cheat"]["static_accuracy"]["value"] == 1.0
    assert s["candidates"]["cheat"]["kieval"]["value"] == pytest.approx(10.0)
    assert s["contamination"]["flagged"] == ["cheat"]
    assert any("possible contamination" in w for w in s["warnings"])

    with load_run(result.run_dir) as run:
        html = render_report_html(run)
    assert "<script>alert" not in html and "<img src=x" not in html
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in html
    section = html.split('<section id="protocol">', 1)[1]
    for heading in (
        "Seed questions",
        "Candidates",
        "Scores per aspect",
        "Contamination analysis",
        "Conversations (15)",
    ):
        assert heading in section
    assert section.count("data:image/png;base64,") == 3  # aspects, how conversations ended, scatter
    assert "Possibly contaminated" in section and "flagged" in section
    # The viewer shows every round's interviewer question, candidate reply and evaluator comments.
    assert section.count("Round 2</strong>") == 15
    assert "comment &lt;script&gt;" in section and "Follow-up &lt;script&gt;" in section
    assert (result.run_dir / "report.html").read_text().count("kv-conv") >= 15


def test_report_of_an_interrupted_run_shows_unfinished_conversations(tmp_path: Path) -> None:
    store = RunStore(tmp_path / "run.sqlite")
    store.start_run("r", "kieval", {}, "h", "0")
    store.put_item(
        "kvr_x",
        "kieval_round",
        {
            "conversation": "kvc_x",
            "candidate": "c",
            "question_id": "q",
            "mc_key": "kvm_x",
            "round": 0,
            "interactor_question": "Why?",
        },
        # A round that failed half-way (the candidate's reply did not come) keeps the question it got.
        status="error",
        error="HTTP 503",
        error_cause="http_503",
    )
    store.close()
    with load_run(tmp_path) as run:
        html = render_report_html(run)
    section = html.split('<section id="protocol">', 1)[1]
    assert "unfinished" in section and "Why?" in section and "could not be rendered" not in section
