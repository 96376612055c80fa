"""The exam protocol's answer selection on the real embedded model: letter probabilities from the top
logprobs of a one-token answer (the llama.cpp server returns generation logprobs, not prompt logprobs)."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from proctor.config import RunConfig
from proctor.protocols.exam.exam_file import ExamQuestion, write_exam
from proctor.runner import run_config

pytestmark = pytest.mark.embedded


def _question(i: int, question: str, choices: list[str], answer_index: int) -> ExamQuestion:
    return ExamQuestion(
        id=f"q{i}",
        question=question,
        choices=choices,
        answer="ABCD"[answer_index],
        answer_index=answer_index,
        rationale="",
        source_chunk_ids=[],
        bloom="remember",
        question_word="what",
        generator="hand-written",
        prompt_version="test",
    )


def test_letter_logprobs_on_embedded_model(tmp_path: Path) -> None:
    exam = [
        _question(1, "What is the capital city of France?", ["Berlin", "Madrid", "Paris", "Rome"], 2),
        _question(2, "What is 2 + 3?", ["5", "6", "4", "7"], 0),
    ]
    path = write_exam(tmp_path / "exam.jsonl", exam)
    corpus = resources.files("proctor") / "data" / "sample_corpus"
    cfg = RunConfig.model_validate(
        {
            "protocol": "exam",
            "corpus": {"path": str(corpus), "min_chunk_chars": 200, "max_chunk_chars": 600},
            "models": {"q": {"spec": "local/qwen2.5-coder-0.5b"}},
            "exam": {
                "exam_file": str(path),
                "grid": {"llms": ["q"], "retrievers": ["closed_book"], "icl_shots": [0, 1]},
                "selection": "letter_logprobs",
                "irt": {"enabled": False},
            },
        }
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    rows = [json.loads(line) for line in (result.run_dir / "items.jsonl").read_text().splitlines()]
    answers = [r for r in rows if r["kind"] == "exam_response"]
    assert len(answers) == 4 and all(r["status"] == "done" for r in answers)
    for r in answers:
        assert r["method"] == "letter_logprobs"
        assert sum(r["probs"].values()) == pytest.approx(1.0)
        assert r["letter_mass"] > 0.5  # the model answers with a letter, as the prompt asks
    assert result.summary["pipelines"]["q/closed_book/icl0"]["accuracy"]["n"] == 2
    assert (result.run_dir / "report.html").exists()
