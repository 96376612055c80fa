"""The interview protocol (JudgeAgent) with scripted models: the difficulty controller against hand-computed
sequences, ACC1/ACC2/CR/CtE on hand-made answers, the whole protocol end to end (graph reused by a second
run, each ablation switch changing only its step, unparseable replies recorded and not scored)."""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from proctor.kit.shared.question_file import BenchmarkQuestionsConfig, load_questions
from proctor.kit.shared.questions import support
from proctor.models.scripted import register_script
from proctor.protocols.interview.difficulty import next_tier, score, tier
from proctor.protocols.interview.validation import validation_rates
from proctor.runner import run_config

# --- the difficulty controller ------------------------------------------------------------------------


def test_scores_and_tiers_follow_judgeagent() -> None:
    assert [score(d, True) for d in ("easy", "medium", "hard")] == [1.0, 1.5, 2.0]
    assert [score(d, False) for d in ("easy", "medium", "hard")] == [0.0, 0.0, -0.2]
    assert [tier(x) for x in (0.0, 0.5, 0.51, 1.0, 1.01)] == ["easy", "easy", "medium", "medium", "hard"]
    assert next_tier([]) == "medium"


def test_controller_on_hand_computed_sequences() -> None:
    # Batch of 3: easy right (1), medium wrong (0), hard right (2): mean 1.0 -> medium.
    graded = [("easy", True), ("medium", False), ("hard", True)]
    assert next_tier(graded) == "medium"
    # Then a medium extension answered right: (1 + 0 + 2 + 1.5) / 4 = 1.125 -> hard.
    graded.append(("medium", True))
    assert next_tier(graded) == "hard"
    # Then a hard one answered wrong: (4.5 - 0.2) / 5 = 0.86 -> medium.
    graded.append(("hard", False))
    assert next_tier(graded) == "medium"
    # All wrong on easy: 0 -> easy; one hard wrong keeps it below zero -> easy.
    assert next_tier([("easy", False), ("easy", False), ("hard", False)]) == "easy"
    # Exactly on the boundaries: 0.5 is easy, 1.0 is medium.
    assert next_tier([("easy", True), ("easy", False)]) == "easy"
    assert next_tier([("easy", True), ("easy", True)]) == "medium"


def test_validation_rates_and_the_identity() -> None:
    # before, after for 8 questions: 3 stay right, 1 right->wrong, 2 wrong->right, 2 stay wrong.
    pairs = [(True, True)] * 3 + [(True, False)] + [(False, True)] * 2 + [(False, False)] * 2
    r = validation_rates(pairs)
    assert r.n == 8
    assert r.acc1.value == 0.5 and r.acc2.value == 0.625
    assert r.cr.value == 0.25 and r.cte.value == 0.125
    assert r.acc2.value == pytest.approx(r.acc1.value + r.cr.value - r.cte.value)
    assert r.cr_conditional.value == 0.5 and r.cte_conditional.value == 0.25
    assert r.delta == pytest.approx(0.125)
    empty = validation_rates([])
    assert empty.n == 0 and empty.acc1.value is None


def test_support_of_an_answer_in_a_text() -> None:
    text = "The Ambry Glassworks was founded in 1862 by Hollis Verrane."
    assert support("Hollis Verrane", text) == 1.0
    assert support("in 1862", text) == 1.0
    assert support("Mira Holt", text) == 0.0
    assert support("Hollis Tarn", text) == 0.5


def test_question_file_short_answers_and_difficulty(tmp_path: Path) -> None:
    f = tmp_path / "q.jsonl"
    rows = [
        {"query": "Who founded the Ambry Glassworks?", "answer": "Hollis Verrane", "difficulty": "easy"},
        {"question": "Pick one", "options": ["a", "b", "c"], "gold_label": 2, "difficult": 1},
        {"question": "No answer here"},
        {"question": "Bad level", "answer": "x", "level": "extreme"},
    ]
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    qs, stats = load_questions(BenchmarkQuestionsConfig(path=str(f)), section="interview.questions")
    assert [(q.answer, q.difficulty, q.multiple_choice) for q in qs] == [
        ("Hollis Verrane", "easy", False),
        ("b", "hard", True),
    ]
    assert qs[1].answer_letter == "B"
    assert stats["skipped"] == {"no answer": 1, "difficulty is not easy / medium / hard (or 1 / 2 / 3)": 1}


# --- the protocol end to end ---------------------------------------------------------------------------

CALLS: Counter[str] = Counter()
PROMPTS: list[str] = []
DOCS = {
    "glass.md": "The Ambry Glassworks was founded by Hollis Verrane in Ambry. "
    "Hollis Verrane trained as a glassblower in Varsland before he came to Ambry.\n\n"
    "The Ambry Glassworks stamps a tern on every piece. Mira Holt runs the Ambry Glassworks today.",
    "ferry.md": "The Tarnvik Lines ferry sails from Ambry to Port Selwick. "
    "Jon Tarn captains the Tarnvik Lines ferry.\n\n"
    "Port Selwick lies on Varsland. Jon Tarn was born in Port Selwick.",
}
BASE = [
    {
        "id": "b1",
        "question": "Who founded the Ambry Glassworks?",
        "answer": "Hollis Verrane",
        "difficulty": "easy",
    },
    {
        "id": "b2",
        "question": "Where does the Tarnvik Lines ferry sail to?",
        "choices": ["Port Selwick", "Ambry", "Varsland", "Tarnvik"],
        "answer": "A",
        "difficulty": "medium",
    },
    {
        "id": "b3",
        "question": "Who captains the Tarnvik Lines ferry?",
        "answer": "Jon Tarn",
        "difficulty": "hard",
    },
    {"id": "b4", "question": "What does the Ambry Glassworks stamp on every piece?", "answer": "a tern"},
]
NAME = re.compile(r"[A-Z][a-z]+(?: [A-Z][a-z]+)+")
BREAK: set[str] = set()  # which examiner replies are unparseable in a test: "generate", "feedback"


def examiner(messages: list[dict[str, Any]], params: Any) -> str:
    text = next(m["content"] for m in messages if m["role"] == "user")
    PROMPTS.append(text)
    if "[passage" in text:
        CALLS["entities"] += 1
        passages = re.findall(r"\[passage (\d+)\]\n(.*?)(?=\n\[passage |\Z)", text, re.S)
        return json.dumps({"passages": [{"id": p, "entities": NAME.findall(body)} for p, body in passages]})
    if text.startswith("Rate how difficult"):
        CALLS["label"] += 1
        return json.dumps({"difficulty": "easy"})
    if text.startswith("List the named entities"):
        CALLS["seeds"] += 1
        question = text.split("Question:", 1)[1].split("\n")[0]
        return json.dumps({"entities": NAME.findall(question)})
    if text.startswith("Texts:"):
        CALLS["generate"] += 1
        tier_ = re.search(r"Write \d+ (easy|medium|hard) question", text)
        assert tier_ is not None
        body = text.split('"""')[1]
        names = NAME.findall(body)
        if "generate" in BREAK and "Port Selwick" in body:
            return "not json at all"
        if tier_.group(1) == "hard":  # a question that states its own answer: dropped
            return json.dumps({"questions": [{"question": f"Is it {names[-1]}?", "answer": names[-1]}]})
        q = f"[{tier_.group(1)}] Spell backwards {names[-1][::-1]}."
        return json.dumps({"questions": [{"question": q, "answer": names[-1]}]})
    if "Evaluate the model's performance" in text:
        CALLS["feedback"] += 1
        if "feedback" in BREAK and "Who captains the Tarnvik" in text:
            return "I would rather not say."
        return json.dumps(
            {
                "flaws_knowledge": "Unsure about <ferries>.",
                "flaws_capability": "Guesses.",
                "comprehensive_performance": "Mixed.",
                "suggestions": "Read the question twice." if "Correct answer" in text else "DIRECT advice.",
            }
        )
    raise AssertionError(f"unexpected examiner prompt: {text[:200]}")


def judge(messages: list[dict[str, Any]], params: Any) -> str:
    CALLS["judge"] += 1
    text = "\n".join(m["content"] for m in messages if m["role"] == "user")
    ref = re.search(r"<reference_answer>\s*(.*?)\s*</reference_answer>", text, re.S)
    ans = re.search(r"<candidate_answer>\s*(.*?)\s*</candidate_answer>", text, re.S)
    assert ref and ans
    if "UNJUDGEABLE" in ans.group(1):
        return "the judge rambles without JSON"
    ok = ref.group(1).lower() in ans.group(1).lower()
    return json.dumps({"reason": "compared", "verdict": "correct" if ok else "incorrect"})


def candidate(messages: list[dict[str, Any]], params: Any) -> str:
    CALLS["candidate"] += 1
    text = messages[-1]["content"]
    advised = "suggestions" in text
    if "Tarnvik Lines ferry sail" in text:
        return "A"
    if "founded the Ambry" in text:
        return "It was Hollis Verrane." if advised else "I think it was Mira Holt."
    if "captains" in text:
        return "Jon Tarn" if not advised else "Someone else"
    if "stamp" in text:
        return "UNJUDGEABLE" if not advised else "A tern."
    m = re.search(r"\[(easy|medium|hard)\] Spell backwards (.*)\.", text)
    if m:
        # Right on easy extension questions, wrong on medium ones.
        return "I do not know" if m.group(1) == "medium" else m.group(2)[::-1]
    return "?"


register_script("iv-examiner", examiner)
register_script("iv-judge", judge)
register_script("iv-candidate", candidate)


@pytest.fixture
def interview_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache"))
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text)
    base = tmp_path / "base.jsonl"
    base.write_text("".join(json.dumps(r) + "\n" for r in BASE))

    def write(
        extra: str = "", candidates: str = "  - {name: c1, model: cand}", name: str = "iv.yaml"
    ) -> Path:
        cfg = tmp_path / name
        cfg.write_text(
            f"""
protocol: interview
corpus: {{path: docs, min_chunk_chars: 20, max_chunk_chars: 200}}
embedder: local/all-minilm-l6-v2
models:
  exam: scripted/iv-examiner
  judge: scripted/iv-judge
  cand: scripted/iv-candidate
roles: {{examiner: exam, judge: judge}}
candidates:
{candidates}
interview:
  questions: {{path: base.jsonl}}
  batch_size: 2
  rounds: 2
  hops: 1
{extra}
"""
        )
        return cfg

    return write


def test_interview_end_to_end(interview_config: Any, tmp_path: Path) -> None:
    CALLS.clear()
    PROMPTS.clear()
    result = run_config(interview_config(), out=tmp_path / "runs", show_progress=False)
    s = result.summary
    assert s["base_questions"]["used"] == 4 and s["base_questions"]["batches"] == 2
    assert s["base_questions"]["difficulty_sources"] == {"file": 3, "examiner": 1}
    assert CALLS["label"] == 1  # only b4 had no difficulty
    assert s["graph"]["nodes"] >= 5 and CALLS["entities"] >= 1
    full = s["variants"]["full"]["candidates"]["c1"]
    # Base: b1 wrong (Mira Holt), b2 right (A), b3 right (Jon Tarn), b4 unjudgeable (recorded, unscored).
    assert full["base_accuracy"]["k"] == 2 and full["base_accuracy"]["n"] == 3
    assert full["unscored"]["base"] == 1
    # Batch 0 = b1 (easy wrong: 0), b2 (medium right: 1.5): mean 0.75 -> medium.
    assert full["trajectories"]["0"][0] == "medium"
    # Batch 1 = b3 (hard right: 2), b4 unscored: mean 2 -> hard.
    assert full["trajectories"]["1"][0] == "hard"
    # Extension: medium answered right ("NAME" is replaced below by the judge's containment rule...).
    # Batch 0 at medium: 2 rounds x 1 question, both answered wrong -> the tier falls to easy... Batch 1 at
    # hard: the examiner's hard questions state their own answers, so they are dropped and nothing is asked.
    assert full["extension_questions"] == 2
    stats = s["variants"]["full"]["stats"]
    assert stats["dropped_answer_in_question"] == 2 and stats["rounds_without_question"] == 2
    assert full["trajectories"]["1"] == ["hard", "hard", "hard"]
    # Validation: b1 wrong -> right, b3 right -> wrong, b2 stays right; b4 has no "before" grade.
    v = full["validation"]
    assert v["n"] == 3
    assert v["acc1"]["value"] == pytest.approx(2 / 3) and v["acc2"]["value"] == pytest.approx(2 / 3)
    assert v["cr"]["k"] == 1 and v["cte"]["k"] == 1
    # The judge's unparseable reply is recorded on the answer's judgment with its cause.
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    causes = [r[0] for r in con.execute("SELECT error_cause FROM judgments WHERE error_cause IS NOT NULL")]
    assert causes and set(causes) == {"unparseable"}
    # Model text is escaped in the report.
    html = (result.run_dir / "report.html").read_text()
    assert "&lt;ferries&gt;" in html and "<ferries>" not in html
    # A second run with another candidate on the same corpus: the graph is reused (no entity extraction).
    before = CALLS["entities"]
    second = run_config(
        interview_config(candidates="  - {name: c2, model: cand, temperature: 0.1}", name="iv2.yaml"),
        out=tmp_path / "runs2",
        show_progress=False,
    )
    assert CALLS["entities"] == before
    assert second.summary["graph"]["reused"] is True


def test_each_ablation_changes_only_its_step(interview_config: Any, tmp_path: Path) -> None:
    CALLS.clear()
    PROMPTS.clear()
    cfg = interview_config("  variants: [full, no_graph, no_adaptive, no_extension, direct]")
    s = run_config(cfg, out=tmp_path / "runs", show_progress=False).summary
    v = s["variants"]
    base = {name: v[name]["candidates"]["c1"]["base_accuracy"] for name in v}
    assert len({json.dumps(b) for b in base.values()}) == 1  # one set of base answers for every variant
    # no_adaptive: every extension question at medium.
    assert all(
        t == "medium" for ts in v["no_adaptive"]["candidates"]["c1"]["trajectories"].values() for t in ts
    )
    assert v["no_adaptive"]["stats"].get("knowledge_path", 0) > 0
    # no_graph: reference text only, never a path.
    assert (
        v["no_graph"]["stats"].get("knowledge_path", 0) == 0
        and v["no_graph"]["stats"]["knowledge_reference"] > 0
    )
    # no_extension and direct: no extension question at all.
    for name in ("no_extension", "direct"):
        assert v[name]["candidates"]["c1"]["extension_questions"] == 0
    # direct: the examiner saw no reference answers (its suggestions are the DIRECT ones).
    direct_prompts = [
        p for p in PROMPTS if "Evaluate the model's performance" in p and "Correct answer" not in p
    ]
    assert direct_prompts and all("Correct answer" not in p for p in direct_prompts)
    # The same base answers: one candidate call per base question overall.
    rows = s["table"]
    assert [r["variant"] for r in rows] == ["full", "no_graph", "no_adaptive", "no_extension", "direct"]


def test_bad_source_is_a_user_error(interview_config: Any, tmp_path: Path) -> None:
    cfg = interview_config()
    text = cfg.read_text().replace("questions: {path: base.jsonl}", "from_run: nowhere")
    cfg.write_text(text)
    from proctor.errors import UserError

    with pytest.raises(UserError, match=r"interview\.from_run"):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)


def _source_run(folder: Path, protocol: str) -> Any:
    from proctor.store import RunStore

    folder.mkdir()
    store = RunStore(folder / "run.sqlite")
    store.start_run(folder.name, protocol, {"protocol": protocol}, "h", "0")
    return store


def test_from_run_reads_an_exam_with_irt_tiers_and_a_qa_run(tmp_path: Path) -> None:
    from proctor.kit.shared.questions import Question
    from proctor.protocols.interview.base import load_base
    from proctor.protocols.interview.config import Config

    exam = _source_run(tmp_path / "exam", "exam")
    bs = [0.5, -1.0, 2.0, 0.0]
    for i in range(len(bs)):
        q = {"id": str(i), "question": f"Q{i}?", "choices": ["w", "x", "y", "z"], "answer_index": i % 4,
             "answer": "ABCD"[i % 4], "source_chunk_ids": [f"c{i}"]}  # fmt: skip
        exam.put_item(f"k{i}", "exam_question", q)
    exam.put_item("old", "exam_question", {**q, "id": "gone"}, status="superseded")
    items = [{"id": str(i), "difficulty": b, "discrimination": 1.0, "guessing": None, "p_correct": 0.5}
             for i, b in enumerate(bs)]  # fmt: skip
    exam.put_artifact("exam_irt", {"theta": [0.0], "items": items})
    exam.close()
    loaded, stats = load_base(Config.model_validate({"from_run": str(tmp_path / "exam")}))
    assert [q.question_id for q in loaded] == ["0", "1", "2", "3"]
    assert [q.answer for q in loaded] == ["w", "x", "y", "z"] and loaded[2].chunk_ids == ["c2"]
    assert [q.difficulty for q in loaded] == ["medium", "easy", "hard", "easy"]
    assert {q.difficulty_source for q in loaded} == {"irt"}
    assert stats.irt_labelled == 4 and stats.read == stats.usable == 4

    qa = _source_run(tmp_path / "qa", "qa")
    for i in range(2):
        q = Question(question_id=f"q{i}", question=f"Q{i}?", reference_answer=f"A{i}", prompt_version="v",
                     source_chunk_ids=[f"c{i}"])  # fmt: skip
        qa.put_item(f"k{i}", Question.KIND, q.model_dump(mode="json"))
    qa.close()
    loaded, stats = load_base(Config.model_validate({"from_run": str(tmp_path / "qa")}))
    assert [(q.question_id, q.answer, q.choices, q.difficulty) for q in loaded] == [
        ("q0", "A0", [], None),
        ("q1", "A1", [], None),
    ]
    assert stats.irt_labelled is None and stats.read == 2


# --- crash mid-extension, then resume ------------------------------------------------------------------

RESUME_CALLS: Counter[str] = Counter()
CRASH: dict[str, int | None] = {"after": None}


class InjectedCrash(RuntimeError):
    """Not a model error: it escapes the protocol like the death of the process would."""


def _crashing(role: str, fn: Any) -> Any:
    def script(messages: list[dict[str, Any]], params: Any) -> str:
        text = next(m["content"] for m in messages if m["role"] == "user")
        extension = role == "candidate" and "Spell backwards" in text
        limit = CRASH["after"]
        if limit is not None and (
            RESUME_CALLS["crashed"] or (extension and RESUME_CALLS["extension"] >= limit)
        ):
            RESUME_CALLS["crashed"] = 1
            raise InjectedCrash("killed mid-extension")
        RESUME_CALLS[role] += 1
        RESUME_CALLS["extension"] += extension
        return str(fn(messages, params))

    return script


register_script("iv-r-examiner", _crashing("examiner", examiner))
register_script("iv-r-judge", _crashing("judge", judge))
register_script("iv-r-candidate", _crashing("candidate", candidate))


def test_crash_during_extension_then_resume_repeats_no_stored_call(
    interview_config: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = interview_config(
        "  rounds: 3", candidates="  - {name: c1, model: cand}\n  - {name: c2, model: cand, max_tokens: 64}"
    )
    text = cfg.read_text().replace("scripted/iv-", "scripted/iv-r-").replace("  rounds: 2\n", "")
    cfg.write_text(text)
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache-ref"))
    RESUME_CALLS.clear()
    CRASH["after"] = None
    reference = run_config(cfg, out=tmp_path / "ref", show_progress=False)
    ref_calls = sum(v for k, v in RESUME_CALLS.items() if k != "extension")
    assert RESUME_CALLS["extension"] >= 4

    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache-1"))
    RESUME_CALLS.clear()
    CRASH["after"] = 2
    with pytest.raises(InjectedCrash):
        run_config(cfg, out=tmp_path / "runs", show_progress=False)
    crashed_calls = sum(v for k, v in RESUME_CALLS.items() if k not in ("extension", "crashed"))
    run_dir = next((tmp_path / "runs").iterdir())

    # Resume with an EMPTY cache: only the run store can spare the calls made before the crash.
    monkeypatch.setenv("PROCTOR_CACHE_DIR", str(tmp_path / "cache-2"))
    RESUME_CALLS.clear()
    CRASH["after"] = None
    resumed = run_config(cfg, out=tmp_path / "runs", resume=True, show_progress=False)
    assert resumed.run_dir == run_dir
    resumed_calls = sum(v for k, v in RESUME_CALLS.items() if k != "extension")
    assert crashed_calls + resumed_calls == ref_calls  # every call made exactly once
    assert resumed.summary["variants"] == reference.summary["variants"]


def test_unparseable_examiner_and_feedback_replies_are_recorded_not_scored(
    interview_config: Any, tmp_path: Path
) -> None:
    BREAK.update({"generate", "feedback"})
    try:
        result = run_config(interview_config(), out=tmp_path / "runs", show_progress=False)
    finally:
        BREAK.clear()
    s = result.summary
    full = s["variants"]["full"]
    assert full["stats"]["feedback_failed"] == 1
    assert full["candidates"]["c1"]["batches_without_feedback"] == 1
    # The batch without feedback is not validated: only the other batch's two questions count.
    assert full["candidates"]["c1"]["validation"]["n"] == 2
    con = sqlite3.connect(result.run_dir / "run.sqlite")
    causes = dict(con.execute("SELECT kind, error_cause FROM items WHERE status = 'error'").fetchall())
    assert causes.get("interview_feedback") == "unparseable"
    assert (
        full["stats"]["rounds_generation_failed"] == 1 and causes.get("interview_generated") == "unparseable"
    )
