"""The shipped HotpotQA slice: it loads and validates (counts per level and type); rageval answers its
questions in the distractor setting (each question's own paragraphs) and over the shared corpus, and
breaks F1 / EM down by level and type; qa asks it as a questions file, retrieves over its paragraphs and
reports where the judge with reference and F1 >= 0.5 disagree; the named demos."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from proctor.agents.environments.documents import DocumentEnvironment
from proctor.config import RunConfig
from proctor.config_paths import config_dir
from proctor.kit.registry import get_protocol
from proctor.kit.shared.hotpotqa import (
    corpus_chunks,
    file_records,
    first_per_level,
    paragraph_chunk,
    paragraphs,
)
from proctor.models.scripted import register_script
from proctor.protocols.qa.run import judge_f1_disagreement
from proctor.runner import run_config

DATA = Path(str(resources.files("proctor") / "data" / "hotpotqa"))
SLICE = DATA / "r_eval_hotpotqa.jsonl"
ROWS = list(file_records(SLICE, "test"))
BY_QUESTION = {r["question"]: r for r in ROWS}


def test_shipped_slice_loads_and_validates() -> None:
    assert len(ROWS) == 300 and len({r["id"] for r in ROWS}) == 300
    assert Counter(r["level"] for r in ROWS) == {"easy": 100, "medium": 100, "hard": 100}
    assert Counter(r["type"] for r in ROWS) == {"bridge": 247, "comparison": 53}
    for r in ROWS:
        paras = dict(paragraphs(r["context"]))
        assert 2 <= len(paras) <= 10
        for title, i in r["supporting_facts"]:
            assert 0 <= i < len(paras[title]), (r["id"], title, i)
    licence = (DATA / "LICENSE").read_text()
    assert "CC BY-SA 4.0" in licence and "Yang" in licence and "THU-KEG/R-Eval" in licence
    assert len(corpus_chunks(SLICE, "test")) == 2958  # distinct titles, each once


def test_first_per_level_keeps_file_order() -> None:
    picked = first_per_level(ROWS, 2, lambda r: r["level"])
    assert [r["level"] for r in picked] == ["easy", "easy", "medium", "medium", "hard", "hard"]
    assert picked[0] is ROWS[0] and picked[2] is ROWS[100]


def test_environment_from_a_row_holds_its_supporting_paragraphs() -> None:
    for r in (ROWS[0], ROWS[150], ROWS[299]):
        env = DocumentEnvironment([paragraph_chunk("f", t, s) for t, s in paragraphs(r["context"])])
        search = env.session().tools["Search"]
        paras = dict(paragraphs(r["context"]))
        for title, i in r["supporting_facts"]:
            assert paras[title][i].strip() in search.fn(entity=title)


def _hotpot_agent(messages: list[dict[str, Any]], params: Any) -> str:
    """ReAct: Search the first supporting title; Finish with the gold answer when the observation holds its
    supporting sentence, except on hard questions (a wrong answer there)."""
    text = "\n".join(str(m["content"]) for m in messages)
    row = next(r for q, r in BY_QUESTION.items() if q in text)
    title, i = row["supporting_facts"][0]
    sentence = dict(paragraphs(row["context"]))[title][i].strip()
    observations = re.findall(r"^Observation(?: \d+)?: (.*)$", text, re.M)
    if not observations:
        return f"Thought: look it up\nAction: Search[{title}]"
    if row["level"] == "hard":
        return "Thought: guess\nAction: Finish[no idea at all]"
    found = any(sentence[:40] in o for o in observations)
    return f"Thought: done\nAction: Finish[{row['answer'] if found else 'not found'}]"


register_script("hp-react", _hotpot_agent)


def test_rageval_settings_and_breakdown_by_level_and_type(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tmp_path / "rageval.yaml"
    cfg.write_text(
        f"""
protocol: rageval
corpus: {{}}
models: {{m: scripted/hp-react}}
rageval:
  database: null
  documents: false
  hotpotqa: {SLICE}
  hotpotqa_per_level: 2
  hotpotqa_settings: [distractor, shared]
  grid: {{workflows: [react], llms: [m]}}
"""
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    s = result.summary
    picked = first_per_level(ROWS, 2, lambda r: r["level"])
    assert s["tasks"]["hotpotqa"] == {
        "questions": 6, "paragraphs": 2958, "skipped": 0, "level easy": 2, "level hard": 2, "level medium": 2,
    }  # fmt: skip
    assert s["tasks"]["by_domain"] == {"hotpotqa": 6, "hotpotqa-distractor": 6}
    react = s["systems"]["react:m"]
    hp = react["by_hotpotqa"]
    for setting in ("hotpotqa", "hotpotqa-distractor"):
        # The supporting paragraph is found in both environments: right on easy and medium, wrong on hard.
        for level, want in (("easy", 1.0), ("medium", 1.0), ("hard", 0.0)):
            g = hp[f"{setting}/{level}"]
            assert g["n"] == 2 and g["f1"]["value"] == want and g["em"]["value"] == want
        for kind, n in Counter(r["type"] for r in picked).items():
            right = sum(r["level"] != "hard" for r in picked if r["type"] == kind)
            g = hp[f"{setting}/{kind}"]
            assert g["n"] == n and g["em"]["value"] == pytest.approx(right / n)
    assert list(hp)[:3] == ["hotpotqa/easy", "hotpotqa/medium", "hotpotqa/hard"]
    assert react["categories"]["EM"] + react["categories"]["AM"] == 8
    html = (result.run_dir / "report.html").read_text()
    assert "HotpotQA by level and type" in html and "hotpotqa-distractor/medium" in html


def test_judge_f1_disagreement_on_a_hand_made_case() -> None:
    pairs = [
        (1.0, 1.0),  # agree: right
        (0.0, 0.0),  # agree: wrong
        (1.0, 0.2),  # the judge accepts an answer F1 rejects (other words)
        (0.0, 0.5),  # F1 at the cut counts as right; the judge rejects: disagree
        (0.0, 0.49),  # agree: both wrong
    ]
    e = judge_f1_disagreement(pairs)
    assert e.value == pytest.approx(2 / 5) and e.n == 5
    assert judge_f1_disagreement([]).value is None


def _qa_candidate(messages: list[dict[str, Any]], params: Any) -> str:
    """Exact on easy, the answer inside a long sentence on medium (judge yes, F1 low), wrong on hard."""
    text = "\n".join(str(m["content"]) for m in messages)
    row = next(r for q, r in BY_QUESTION.items() if q in text)
    if row["level"] == "easy":
        return str(row["answer"])
    if row["level"] == "medium":
        return f"After reading many pages about this question, I am quite sure it is {row['answer']}, yes."
    return "Nobody knows that."


def _qa_judge(messages: list[dict[str, Any]], params: Any) -> str:
    text = next(m["content"] for m in messages if m["role"] == "user")
    ref = re.search(r"<reference_answer>(.*?)</reference_answer>", text, re.DOTALL)
    ans = re.search(r"<candidate_answer>(.*?)</candidate_answer>", text, re.DOTALL)
    ok = bool(ref and ans and ref.group(1).strip().lower() in ans.group(1).lower())
    return json.dumps({"reason": "checked", "verdict": "correct" if ok else "incorrect"})


register_script("hp-qa-candidate", _qa_candidate)
register_script("hp-qa-judge", _qa_judge)


def test_qa_on_the_slice_reports_judge_f1_disagreement(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        f"""
protocol: qa
corpus: {{}}
models: {{c: scripted/hp-qa-candidate, j: scripted/hp-qa-judge}}
roles: {{judge: j}}
candidates:
  - {{name: closed, model: c}}
  - {{name: bm25, model: c, retriever: bm25, k: 2}}
qa:
  questions: {{path: {SLICE}}}
  questions_per_level: 1
  judges: [with_reference]
  equivalence_rules: false
"""
    )
    result = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    s = result.summary
    assert s["questions"]["kept"] == 3 and s["questions"]["filtered"] == {"not in the slice": 297}
    for name in ("closed", "bm25"):
        c = s["candidates"][name]
        assert c["accuracy_with_reference"]["value"] == pytest.approx(2 / 3)
        assert c["judge_f1_disagreement"]["value"] == pytest.approx(1 / 3)  # the medium answer
    examples = s["disagreements"]
    assert len(examples) == 2 and all(e["verdict"] == "correct" and e["f1"] < 0.5 for e in examples)
    assert {e["reference"] for e in examples} == {ROWS[100]["answer"]}
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    retrieved = [
        json.loads(d)["retrieved_ids"]
        for (d,) in con.execute("SELECT data FROM items WHERE kind = 'answer' AND status = 'done'")
    ]
    assert any(ids and all(i.startswith("hc_") for i in ids) for ids in retrieved)  # the paragraphs
    html = (result.run_dir / "report.html").read_text()
    assert "Judge with reference against F1" in html


def test_named_demos_validate_and_stay_out_of_all() -> None:
    demos = get_protocol("rageval").named_demos
    assert set(demos) == {"rageval", "rageval-hotpotqa"}
    assert set(get_protocol("qa").named_demos) == {"qa", "qa-hotpotqa"}  # demo_quick is not a demo of its own
    data = str(resources.files("proctor") / "data")
    for path in (demos["rageval-hotpotqa"], get_protocol("qa").named_demos["qa-hotpotqa"]):
        raw = yaml.safe_load(path.read_text().replace("${PROCTOR_DATA}", data))
        with config_dir(path.parent):
            cfg = RunConfig.model_validate(raw)
        assert cfg.name.endswith("hotpotqa")
