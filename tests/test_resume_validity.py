"""A resumed run reuses a stored unit only while what it used is unchanged — decided by the kit, not by keys
a protocol builds: change one prompt file and only the steps that render it run again; change one role's
model and only that role's steps run again."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

import proctor.prompts as prompts
from proctor.models.scripted import register_script
from proctor.runner import run_config

FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("In which year was the Tarn canal opened?", "1742"),
}


def examiner(messages, params):
    text = messages[-1]["content"]
    for key, (q, a) in FACTS.items():
        if key in text:
            return json.dumps({"question": q, "answer": a})
    return "not json"


def candidate(messages, params):
    text = messages[-1]["content"]
    return "Ostrid Kael" if "Velmora" in text else "1742" if "Tarn" in text else "unknown"


register_script("rv-examiner", examiner)
register_script("rv-candidate", candidate)

JUDGE_RULES = """
rules:
  - {match: "Ostrid Kael.*Ostrid Kael|1742.*1742", json: {reason: "matches", verdict: "%s"}}
default: '{"reason": "no", "verdict": "incorrect"}'
"""


@pytest.fixture
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """A qa config whose judge is a rules file (its content is the model's identity), and a private copy
    of the prompt folders the loader reads."""
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    shared = tmp_path / "prompts"
    shutil.copytree(prompts.PROMPT_DIR, shared, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    protocols = tmp_path / "protocols"
    shutil.copytree(prompts.PROTOCOLS_DIR / "qa" / "prompts", protocols / "qa" / "prompts")
    monkeypatch.setattr(prompts, "PROMPT_DIR", shared)
    monkeypatch.setattr(prompts, "PROTOCOLS_DIR", protocols)
    docs = tmp_path / "docs"
    docs.mkdir()
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    rules = tmp_path / "judge.yaml"
    rules.write_text(JUDGE_RULES % "correct")
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(f"""
protocol: qa
corpus: {{path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}}
models:
  ex: scripted/rv-examiner
  cand: scripted/rv-candidate
  judge: scripted/{rules}
roles: {{examiner: ex, judge: judge}}
candidates: [{{name: c, model: cand}}]
qa: {{num_questions: 2, judges: [with_reference], equivalence_rules: false, guards: false}}
""")
    return cfg, rules


def _new_calls(run_dir: Path, since: int) -> Counter[str]:
    """Model calls recorded after row `since`, by role."""
    con = sqlite3.connect(run_dir / "run.sqlite")
    rows = con.execute("SELECT role FROM model_calls WHERE id > ?", (since,)).fetchall()
    con.close()
    return Counter(r[0] for r in rows)


def _last_call(run_dir: Path) -> int:
    con = sqlite3.connect(run_dir / "run.sqlite")
    n = con.execute("SELECT COALESCE(MAX(id), 0) FROM model_calls").fetchone()[0]
    con.close()
    return int(n)


def test_a_changed_prompt_file_reruns_only_the_steps_that_render_it(
    setup: tuple[Path, Path], tmp_path: Path
) -> None:
    cfg, _ = setup
    first = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert _new_calls(first.run_dir, 0) == {"examiner": 2, "candidate": 2, "judge": 2}
    # Nothing changed: a resume runs nothing.
    mark = _last_call(first.run_dir)
    run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert _new_calls(first.run_dir, mark) == {}
    # The judge's prompt changes: only the judge's steps run again (the candidates' answers are reused).
    judge_prompts = sorted((tmp_path / "prompts" / "judging").glob("with_reference.*.j2"))
    assert judge_prompts, "the judge-with-reference prompt is in the shared judging folder"
    for p in judge_prompts:
        p.write_text(p.read_text() + "\nAnswer carefully.\n")
    mark = _last_call(first.run_dir)
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert _new_calls(first.run_dir, mark) == {"judge": 2}
    assert resumed.summary["candidates"]["c"]["accuracy_with_reference"]["value"] == 1.0
    # The examiner's prompt changes: the questions are written again; they come out the same, so their
    # answers (keyed by the question's content) are reused, and so are the judgments.
    gen = tmp_path / "protocols" / "qa" / "prompts" / "generate.user.j2"
    gen.write_text(gen.read_text() + "\nKeep it short.\n")
    mark = _last_call(first.run_dir)
    run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert _new_calls(first.run_dir, mark) == {"examiner": 2}


def test_a_changed_model_reruns_only_its_role(setup: tuple[Path, Path], tmp_path: Path) -> None:
    cfg, rules = setup
    first = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    assert first.summary["candidates"]["c"]["accuracy_with_reference"]["value"] == 1.0
    # Same config, another judge model (its rules file is its identity, like a local model's weights).
    rules.write_text(JUDGE_RULES % "incorrect")
    mark = _last_call(first.run_dir)
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == first.run_dir
    assert _new_calls(first.run_dir, mark) == {"judge": 2}
    assert resumed.summary["candidates"]["c"]["accuracy_with_reference"]["value"] == 0.0
