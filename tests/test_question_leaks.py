"""Questions that give their answer away: the shared check, its use in qa (dropped and counted, in the
result and the report) and in the interview's extension questions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from proctor.kit.shared.questions import Question, QuestionTask, keep_questions, states_answer
from proctor.kit.steps import Outcome
from proctor.models.scripted import register_script
from proctor.runner import run_config


@pytest.mark.parametrize(
    ("question", "reference", "states"),
    [
        # The question names the answer: by stem ("Varslandic" states "Varsland"), numbers as words too.
        ("Which country is the one where the Varsland economy is based?", "Varsland", True),
        ("Where is the Varslandic salt economy based?", "Varsland", True),
        ("How many members does the Moot of Forty have?", "40", True),
        ("Which hall, the Copper Hall or the Tin Hall, hosts the Moot?", "the Copper Hall", True),
        # A shared common word, part of a multi-word reference, stop words: not stated.
        ("Which hall hosts the Moot of Forty?", "the Copper Hall", False),
        ("Who led the families that founded Kettle Point?", "Aud Tennick of Kettle Point", False),
        ("What did the Salt Charter allow?", "sell salted fish in Varsland without duty", False),
        ("How many summers did the Dry Years last?", "three", False),
        ("In which year was the charter of the town signed?", "the year 1587", False),
        ("What is it?", "the", False),  # nothing distinctive to state
    ],
)  # fmt: skip
def test_states_answer(question: str, reference: str, states: bool) -> None:
    assert states_answer(question, reference) is states


def _outcome(i: int, question: str, reference: str) -> Outcome[QuestionTask, Question]:
    q = Question(question_id=f"q{i}", question=question, reference_answer=reference, prompt_version="v")
    return Outcome(unit=QuestionTask(id=i, variables={}, seed=0), key=f"q{i}", value=q)


def test_keep_questions_drops_and_counts_questions_stating_their_answer() -> None:
    kept, stats = keep_questions(
        [
            _outcome(0, "Which country is the one where the Varsland economy is based?", "Varsland"),
            _outcome(1, "Which hall hosts the Moot of Forty?", "the Copper Hall"),
            _outcome(2, "In what year was Kettle Point founded?", "1342"),
        ]
    )
    assert [q.question_id for q in kept] == ["q1", "q2"]
    assert stats.filtered == {"states_answer": 1} and stats.kept == 2 and stats.generated == 3


FACTS = {
    "Velmora": ("Who founded the city of Velmora?", "Ostrid Kael"),
    "Tarn": ("Which canal, the Tarn canal, opened in 1742?", "the Tarn canal"),  # gives itself away
    "Quillan": ("What colour are the lanterns of Quillan?", "green"),
}


def _examiner(messages, params):
    text = messages[-1]["content"]
    return next(json.dumps({"question": q, "answer": a}) for k, (q, a) in FACTS.items() if k in text)


register_script("leak-examiner", _examiner)
register_script("leak-candidate", lambda messages, params: "It is the Tarn canal; Ostrid Kael; green.")
register_script("leak-judge", lambda messages, params: json.dumps({"reason": "r", "verdict": "correct"}))


def test_qa_drops_a_question_that_states_its_answer_and_reports_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    for key, (q, a) in FACTS.items():
        (docs / f"{key}.md").write_text(f"# {key}\n\nA fact about {key}: the answer to '{q}' is {a}. " * 3)
    cfg = tmp_path / "qa.yaml"
    cfg.write_text(
        "protocol: qa\ncorpus: {path: docs, min_chunk_chars: 10, max_chunk_chars: 2000}\n"
        "models: {ex: scripted/leak-examiner, c: scripted/leak-candidate, j: scripted/leak-judge}\n"
        "roles: {examiner: ex, judge: j}\ncandidates: [{name: closed, model: c}]\nqa: {num_questions: 3}\n"
    )
    run = run_config(cfg, out=tmp_path / "runs", show_progress=False)
    questions = run.summary["questions"]
    assert questions["kept"] == 2 and questions["filtered"] == {"states_answer": 1}
    rows = [json.loads(line) for line in (run.run_dir / "items.jsonl").read_text().splitlines()]
    leaking = {r["question_id"] for r in rows if r["kind"] == "question" and "Tarn" in r["question"]}
    answered = {r["question_id"] for r in rows if r["kind"] == "answer"}
    assert len(leaking) == 1 and len(answered) == 2 and not leaking & answered  # written, never asked
    assert "states_answer" in (run.run_dir / "report.html").read_text()
