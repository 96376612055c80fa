"""`budget_usd`: the run stops sending paid calls at the cap, records what it held back, and `--resume`
with a raised cap finishes exactly the held-back work."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from proctor.runner import run_config
from proctor.store import RunStore
from proctor.testing.mock_server import MockServer

PRICE = 1000.0  # USD per 1M tokens, so that a call of ~100 tokens costs ~$0.1


def reply(body: dict[str, Any]) -> str:
    text = next(m["content"] for m in body["messages"] if m["role"] == "user")
    tag = abs(hash(text)) % 10_000
    if "Reference text" in text:
        # The answer shares no word or number with the question (a question stating it would be dropped).
        return json.dumps(
            {"question": f"What is listed under key {tag}?", "answer": f"value {tag * 7919 % 10007}"}
        )
    if "<candidate_answer>" in text:
        return json.dumps({"reason": "compared", "verdict": "correct"})
    return f"The answer is fact {tag}."


def write_config(tmp_path: Path, base_url: str, budget: float | None) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for i in range(6):
        (docs / f"doc{i}.md").write_text(f"# Topic {i}\n\n" + f"Statement {i} about the topic. " * 12)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 50, max_chunk_chars: 4000}}
models:
  m: {{spec: openai/mock, base_url: {base_url}, max_concurrency: 2,
      input_price_per_mtok: {PRICE}, output_price_per_mtok: {PRICE}}}
roles: {{examiner: m, judge: m}}
candidates: [{{name: a, model: m}}]
qa: {{num_questions: 6, judges: [with_reference]}}
{f"budget_usd: {budget}" if budget is not None else ""}
""")
    return cfg


def test_budget_caps_spending_and_resume_finishes_the_held_back_items(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    with MockServer(reply=reply) as server:
        first = run_config(
            write_config(tmp_path, server.base_url, 0.5), out=tmp_path / "runs", show_progress=False
        )
        store = RunStore(first.run_dir / "run.sqlite")
        sent = server.chat_requests()
        con = sqlite3.connect(first.run_dir / "run.sqlite")
        costs = [
            c for (c,) in con.execute("SELECT cost_usd FROM model_calls WHERE cached=0 AND error IS NULL")
        ]
        # Spending stops at the cap; only calls already in flight (max_concurrency=2) may pass it.
        assert 0.5 <= store.spent_usd() <= 0.5 + 2 * max(costs)
        assert len(sent) == len(costs)
        held = [it for it in store.items(status="error") if it["error_cause"] == "budget"]
        assert held, "some work must have been held back"
        assert first.summary["budget"]["held"] == len(held)
        assert any("budget_usd reached" in w for w in first.summary["warnings"])
        first_bodies = {json.dumps(r.body, sort_keys=True) for r in sent}

        # The budget is not part of the run's identity: --resume with a raised cap continues this run.
        second = run_config(
            write_config(tmp_path, server.base_url, 100.0),
            out=tmp_path / "runs",
            resume=True,
            show_progress=False,
        )
        assert second.run_dir == first.run_dir
        sent_again = server.chat_requests()[len(sent) :]
        assert sent_again and not first_bodies & {json.dumps(r.body, sort_keys=True) for r in sent_again}
        assert store.items(status="error") == []
        assert "budget" not in second.summary
        assert len(store.items(kind="answer")) == 6
