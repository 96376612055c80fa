"""The kit's contract, kept honest by a protocol that has no code of its own for resume, error records,
progress, cost accounting, metrics or its report (tests/cloze_protocol.py, at most 40 lines)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from cloze_protocol import PROTOCOL
from proctor.kit.registry import register_protocol
from proctor.runner import run_config
from proctor.testing.mock_server import MockServer

WORDS = ["lighthouses", "cartographer", "archipelago", "navigational"]


FAIL_ONCE = {"navi"}  # the server errors on this document's blank the first time it is asked


def reply(body: dict[str, Any]) -> str:
    text = body["messages"][-1]["content"]
    for hint in list(FAIL_ONCE):
        if hint in text:
            FAIL_ONCE.discard(hint)
            raise RuntimeError("server-side failure")
    # Knows the first two documents' blanked words, guesses wrong on the others.
    return next((w.capitalize() + "." for w in WORDS[:2] if w[:4] in text), "harbour")


@pytest.fixture(autouse=True)
def _registered(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    register_protocol(PROTOCOL)
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))


def write_config(tmp_path: Path, base_url: str) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for i, w in enumerate(WORDS):
        (docs / f"doc{i}.md").write_text(f"The {w} hint {w[:4]} of document {i} is here. " * 3)
    cfg = tmp_path / "cloze.yaml"
    cfg.write_text(f"""
protocol: cloze
corpus: {{path: docs, min_chunk_chars: 20, max_chunk_chars: 4000}}
models:
  m: {{spec: openai/mock, base_url: {base_url}, max_retries: 0, input_price_per_mtok: 1000,
      output_price_per_mtok: 1000}}
candidates: [{{name: a, model: m}}]
cloze: {{num_items: 4}}
""")
    return cfg


def test_example_protocol_gets_resume_errors_cost_and_report_from_the_kit(tmp_path: Path) -> None:
    assert len((Path(__file__).parent / "cloze_protocol.py").read_text().splitlines()) <= 40
    with MockServer(reply=reply) as server:
        cfg = write_config(tmp_path, server.base_url)
        first = run_config(cfg, out=tmp_path / "runs", show_progress=False)
        # One call failed (HTTP 500, no retries): recorded on its unit with its cause, not scored.
        con = sqlite3.connect(first.run_dir / "run.sqlite")
        rows = con.execute("SELECT status, error_cause, data FROM items WHERE kind='cloze_answer'").fetchall()
        assert sorted(r[0] for r in rows) == ["done", "done", "done", "error"]
        failed = next(r for r in rows if r[0] == "error")
        assert failed[1] == "http_500" and json.loads(failed[2])["candidate"] == "a"
        acc = first.summary["accuracy"]["a"]
        assert acc["n"] == 3 and first.summary["failed"]["a"] == 1
        # The kit stored the result's estimate as a metric, by candidate.
        metric = con.execute("SELECT value, n FROM metrics WHERE name='accuracy' AND subject='a'").fetchone()
        assert metric == (acc["value"], 3)
        # Cost accounting: every call is in the store with its tokens and price.
        calls, cost = con.execute("SELECT COUNT(*), SUM(cost_usd) FROM model_calls").fetchone()
        assert calls == 4 and cost > 0
        assert first.summary["usage"]["candidate:openai/mock"]["cost_usd"] > 0
        con.close()
        # Resume retries exactly the transient failure; everything else comes back from the store.
        before = server.count
        resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
        assert resumed.run_dir == first.run_dir and server.count == before + 1
        final = resumed.summary["accuracy"]["a"]
        assert final["n"] == 4 and final["value"] == 0.5 and final["method"] == "wilson"
        # A second resume has nothing left to run.
        run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
        assert server.count == before + 1
    # The default report section shows the estimate, the items and (none left) failures.
    html = (first.run_dir / "report.html").read_text()
    assert "accuracy.a" in html and "Items: cloze_answer (4)" in html
    assert "lighthouses" in html
