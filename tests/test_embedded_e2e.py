"""One end-to-end path on the real embedded model (offline): questions, answers, judges, report."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from proctor.config import RunConfig
from proctor.runner import run_config

pytestmark = pytest.mark.embedded


def test_qa_on_sample_corpus_with_embedded_model(tmp_path: Path) -> None:
    corpus = resources.files("proctor") / "data" / "sample_corpus"
    cfg = RunConfig.model_validate(
        {
            "protocol": "qa",
            "name": "e2e",
            "corpus": {"path": str(corpus), "min_chunk_chars": 300, "max_chunk_chars": 900},
            "models": {"q": {"spec": "local/qwen2.5-coder-0.5b"}},
            "roles": {"examiner": "q", "judge": "q"},
            "embedder": "local/all-minilm-l6-v2",
            "candidates": [
                {"name": "closed", "model": "q", "max_tokens": 48},
                {"name": "dense", "model": "q", "retriever": "dense", "k": 1, "max_tokens": 48},
            ],
            "qa": {"num_questions": 2, "judges": ["with_reference"]},
        }
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    summary = json.loads((result.run_dir / "results.json").read_text())
    assert summary["questions"]["generated"] == 2
    for name in ("closed", "dense"):
        c = summary["candidates"][name]
        assert c["answered"] + c["answer_errors"] == c["questions"] == summary["questions"]["kept"]
        acc = c["accuracy_with_reference"]
        assert acc["n"] + acc["judge_errors"] == c["answered"]
    html = (result.run_dir / "report.html").read_text()
    assert "data:image/png;base64," in html
    assert summary["usage"], "token usage recorded"
