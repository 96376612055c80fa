"""`--dry-run` plans a run without asking any model: per step and role the calls a run makes (exact where
the units come from the corpus and config, an upper bound after placeholder replies), with bounds of
tokens and cost; `--limit`, `--set`, `--version` and "did you mean" in config errors."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from proctor.cli.main import app
from proctor.config import load_config
from proctor.dry_run import DryRun, dry_run
from proctor.errors import UserError
from proctor.models.scripted import register_script
from proctor.runner import run_config
from proctor.testing.mock_server import MockServer, minimal_instance

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
    "Quillan": ("What colour are Quillan lanterns?", "green"),
    "Borrow": ("Which river runs through Borrow?", "the Esk"),
}
CALLS: dict[str, int] = {"examiner": 0, "candidate": 0, "judge": 0}


def _examiner(messages, params):
    CALLS["examiner"] += 1
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def _candidate(messages, params):
    CALLS["candidate"] += 1
    # No equivalence rule decides it, and the two candidates answer differently (identical judge prompts
    # would be one call: the plan, counting after placeholders, would be an upper bound above the run).
    return f"I am not sure about that ({len(messages[-1]['content'])})."


def _judge(messages, params):
    CALLS["judge"] += 1
    return json.dumps({"reason": "checked", "verdict": "incorrect"})


register_script("dr-examiner", _examiner)
register_script("dr-candidate", _candidate)
register_script("dr-judge", _judge)


def _docs(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir(exist_ok=True)
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)


@pytest.fixture
def scripted_config(tmp_path: Path) -> Path:
    _docs(tmp_path)
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        """
protocol: qa
corpus: {path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}
models:
  ex: scripted/dr-examiner
  cand: scripted/dr-candidate
  judge: scripted/dr-judge
roles: {examiner: ex, judge: judge}
candidates:
  - {name: closed, model: cand}
  - {name: bm25, model: cand, retriever: bm25, k: 1}
qa: {num_questions: 4}
"""
    )
    return cfg


def _planned(plan: DryRun) -> dict[str, int]:
    """Planned calls by role."""
    out: dict[str, int] = {}
    for step in plan.planner.steps.values():
        for (role, _), t in step.tallies.items():
            out[role] = out.get(role, 0) + t.calls
    return out


def _sent(run_dir: Path) -> dict[str, int]:
    """Calls the run sent (not from the cache), by role."""
    con = sqlite3.connect(run_dir / "run.sqlite")
    try:
        rows = con.execute("SELECT role, COUNT(*) FROM model_calls WHERE cached = 0 GROUP BY role").fetchall()
    finally:
        con.close()
    return dict(rows)


def test_scripted_qa_plan_calls_no_model_and_matches_the_run(scripted_config: Path, tmp_path: Path) -> None:
    for k in CALLS:
        CALLS[k] = 0
    plan = dry_run(scripted_config)
    assert CALLS == {"examiner": 0, "candidate": 0, "judge": 0}  # no script was asked
    steps = plan.planner.steps
    assert steps["writing questions"].count == "exact" and steps["writing questions"].units == 4
    assert steps["answering"].count == "upper bound" and steps["answering"].units == 8
    # 4 questions, 2 candidates, 2 LLM judges (with and without reference)
    assert _planned(plan) == {"examiner": 4, "candidate": 8, "judge": 16}
    assert not list((tmp_path / "runs").glob("*"))  # nothing written where runs go

    result = run_config(scripted_config, out=tmp_path / "runs", show_progress=False)
    assert _sent(result.run_dir) == _planned(plan) == {k: v for k, v in CALLS.items()}

    # With the replies in the call cache, the plan reads them: every step exact, nothing to send.
    again = dry_run(scripted_config)
    assert all(s.count == "exact" for s in again.planner.steps.values())
    assert again.totals.calls == 0 and again.totals.cached == 28


def _mock_reply(body: dict[str, Any]) -> str:
    """Distinct questions (so none is filtered as a duplicate), judge verdicts, candidate prose."""
    rf = body.get("response_format") or {}
    schema = (rf.get("json_schema") or {}).get("schema")
    last = body["messages"][-1]["content"]
    h = hashlib.sha256(last.encode()).hexdigest()[:8]
    if schema and "question" in schema.get("properties", {}):
        return json.dumps({"question": f"What is recorded as item {h}?", "answer": f"entry {h}"})
    if schema:
        return json.dumps(minimal_instance(schema))
    return f"Perhaps it is {h}, I think."


def test_mock_server_counts_zero_requests_for_the_plan_and_the_planned_number_for_the_run(
    tmp_path: Path,
) -> None:
    _docs(tmp_path)
    with MockServer(reply=_mock_reply) as server:
        prices = "input_price_per_mtok: 1.0, output_price_per_mtok: 2.0"
        model = f'{{spec: openai/mock, base_url: "{server.base_url}", {prices}}}'
        cfg = tmp_path / "qa.yaml"
        cfg.write_text(
            f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  m: {model}
roles: {{examiner: m, judge: m}}
candidates:
  - {{name: closed, model: m, max_tokens: 64}}
  - {{name: bm25, model: m, retriever: bm25, k: 1, max_tokens: 64}}
qa: {{num_questions: 3, judges: [with_reference]}}
"""
        )
        plan = dry_run(cfg)
        assert server.count == 0
        planned = _planned(plan)
        assert planned == {"examiner": 3, "candidate": 6, "judge": 6}
        result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
        assert len(server.chat_requests()) == sum(planned.values()) == 15
    assert _sent(result.run_dir) == planned
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    prompt, completion, cost = con.execute(
        "SELECT SUM(prompt_tokens), SUM(completion_tokens), SUM(cost_usd) FROM model_calls"
    ).fetchone()
    con.close()
    t = plan.totals
    assert t.prompt_tokens >= prompt and t.completion_tokens >= completion and t.cost_usd >= cost > 0
    # the completion bound is the calls' max_tokens: qa.question_max_tokens (256) per question, the
    # candidates' 64 per answer
    steps = plan.planner.steps
    assert steps["writing questions"].tallies[("examiner", "openai/mock")].completion_tokens == 3 * 256
    assert steps["answering"].tallies[("candidate", "openai/mock")].completion_tokens == 6 * 64


def test_cli_dry_run_prints_the_plan_and_makes_no_request(tmp_path: Path) -> None:
    _docs(tmp_path)
    with MockServer(reply=_mock_reply) as server:
        cfg = tmp_path / "qa.yaml"
        cfg.write_text(
            f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  m: {{spec: openai/mock, base_url: "{server.base_url}"}}
roles: {{examiner: m, judge: m}}
candidates: [{{name: closed, model: m}}]
"""
        )
        res = CliRunner().invoke(app, ["run", str(cfg), "--dry-run", "--set", "qa.num_questions=2"])
        assert server.count == 0
    assert res.exit_code == 0, res.output
    assert "writing questions" in res.output and "no model was asked" in res.output
    assert "re-ask" in res.output
    lines = [line for line in res.output.splitlines() if "writing questions" in line]
    assert "exact" in lines[0] and " 2 " in lines[0]


def test_limit_runs_at_most_n_units_per_step(scripted_config: Path, tmp_path: Path) -> None:
    plan = dry_run(scripted_config, limit=3)
    assert {s.units for s in plan.planner.steps.values()} <= {0, 1, 2, 3}
    result = run_config(scripted_config, out=tmp_path / "runs", show_progress=False, limit=3)
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    kinds = dict(con.execute("SELECT kind, COUNT(*) FROM items GROUP BY kind").fetchall())
    judged = con.execute("SELECT judge, COUNT(*) FROM judgments GROUP BY judge").fetchall()
    con.close()
    assert kinds == {"question": 3, "answer": 3}
    assert all(n == 3 for _, n in judged)
    assert any("--limit 3" in w for w in result.summary["warnings"])
    # the first 3 answering units: the first candidate's 3 questions
    assert result.summary["candidates"]["closed"]["questions"] == 3
    assert result.summary["candidates"]["bm25"]["questions"] == 0
    # resumed without the limit, the run completes what the limit left out
    full = run_config(scripted_config, out=tmp_path / "runs", resume=True, show_progress=False)
    assert full.run_dir == result.run_dir
    assert full.summary["candidates"]["bm25"]["questions"] == 4


def test_set_overrides_validated_like_the_file(scripted_config: Path) -> None:
    cfg = load_config(
        scripted_config,
        overrides=[
            "qa.num_questions=5",
            "qa.judges=[with_reference]",
            "models.judge.max_retries=1",  # `judge: scripted/...` shorthand, then an option of it
            "candidates.1.k=2",
            "seed=7",
        ],
    )
    assert cfg.settings.num_questions == 5 and cfg.settings.judges == ["with_reference"]
    assert cfg.models["judge"].max_retries == 1 and cfg.models["judge"].spec == "scripted/dr-judge"
    assert cfg.candidates[1].k == 2 and cfg.seed == 7
    with pytest.raises(UserError) as e:
        load_config(scripted_config, overrides=["qa.num_questionz=5"])
    msg = str(e.value)
    assert "--set qa.num_questionz=5" in msg and "did you mean 'qa.num_questions'?" in msg and "\n" not in msg
    with pytest.raises(UserError, match=r"field 'qa.num_questions': Input should be greater than or equal"):
        load_config(scripted_config, overrides=["qa.num_questions=0"])
    with pytest.raises(UserError, match="expected KEY=VALUE"):
        load_config(scripted_config, overrides=["qa.num_questions"])
    with pytest.raises(UserError, match=r"candidates is a list of 2; give a position from 0 to 1"):
        load_config(scripted_config, overrides=["candidates.5.k=2"])


def test_did_you_mean_for_fields_and_protocols(tmp_path: Path) -> None:
    base = "corpus: {path: docs}\nmodels: {ex: {spec: scripted/dr-examiner, max_retriez: 1}}\n"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("protocol: qa\n" + base)
    with pytest.raises(
        UserError, match=r"unknown field 'models.ex.max_retriez' — did you mean 'models.ex.max_retries'\?"
    ):
        load_config(cfg)
    cfg.write_text("protocol: qa\ncorpus: {path: docs}\nmodels: {ex: scripted/x}\nqa: {judgez: []}\n")
    with pytest.raises(UserError, match=r"did you mean 'qa.judges'\?"):
        load_config(cfg)
    cfg.write_text("protocol: qa\ncorpus: {path: docs}\nmodels: {ex: scripted/x}\nbudget_us: 1\n")
    with pytest.raises(UserError, match=r"did you mean 'budget_usd'\?"):
        load_config(cfg)
    cfg.write_text("protocol: exma\ncorpus: {path: docs}\nmodels: {ex: scripted/x}\n")
    with pytest.raises(UserError, match=r"unknown protocol 'exma' — did you mean 'exam'\?"):
        load_config(cfg)
    cfg.write_text("protocol: qa\ncorpus: {path: docs}\nmodels: {ex: scripted/x}\nzzzz: 1\n")
    with pytest.raises(UserError, match=r"unknown field 'zzzz' — remove it or fix its spelling"):
        load_config(cfg)


def test_version() -> None:
    from proctor import __version__

    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.output.strip() == f"proctor {__version__}"
