"""KIEval on the embedded 0.5B model in every role (offline): one seed question, one round."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from proctor.config import RunConfig
from proctor.runner import run_config

pytestmark = pytest.mark.embedded


def test_kieval_one_round_on_embedded_model(tmp_path: Path) -> None:
    seed = resources.files("proctor") / "protocols" / "kieval" / "data" / "general_science.jsonl"
    cfg = RunConfig.model_validate(
        {
            "protocol": "kieval",
            "name": "e2e-kieval",
            "corpus": {},
            "models": {"q": {"spec": "local/qwen2.5-coder-0.5b"}},
            "roles": {"interactor": "q", "evaluator": "q"},
            "candidates": [{"name": "small", "model": "q", "max_tokens": 48}],
            "kieval": {
                "questions": {"path": str(seed)},
                "num_questions": 1,
                "max_rounds": 1,
                "interactor_max_tokens": 40,
                "evaluator_max_tokens": 400,
                "comment_max_chars": 60,
            },
        }
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    summary = json.loads((result.run_dir / "results.json").read_text())
    c = summary["candidates"]["small"]
    assert c["static_accuracy"]["n"] == 1 and c["finished"] == 1
    # The grammar-constrained evaluator reply parses: the round is scored on the 1-4 scale.
    assert c["kieval"]["n"] == 1 and 10.0 <= c["kieval"]["value"] <= 100.0
    html = (result.run_dir / "report.html").read_text()
    assert "Conversations (1)" in html and "Round 1</strong>" in html
