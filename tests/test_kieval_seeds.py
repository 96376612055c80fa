"""Seed-question loading for KIEval: the common benchmark layouts out of the box, configured field
names, skipped records counted, and user errors that name the file and the fields; interactor output
clean-up."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from proctor.errors import UserError
from proctor.protocols.kieval.config import QuestionsConfig
from proctor.protocols.kieval.conversations import clean_question
from proctor.protocols.kieval.seeds import load_seed_questions


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def load(path: Path, **kw: object) -> tuple[list, dict]:
    return load_seed_questions(QuestionsConfig(path=str(path), **kw))


def test_arc_layouts(tmp_path: Path) -> None:
    hf = _jsonl(
        tmp_path / "arc.jsonl",
        [
            {
                "id": "Mercury_7175875",
                "question": "A planet rotates faster after a meteorite impact. Which quantity changes?",
                "choices": {
                    "text": ["gravity", "day length", "seasons", "orbit"],
                    "label": ["A", "B", "C", "D"],
                },
                "answerKey": "B",
            },
            {
                "id": "num_labels",
                "question": "Which is a mammal?",
                "choices": {"text": ["shark", "whale", "trout"], "label": ["1", "2", "3"]},
                "answerKey": "2",
            },
        ],
    )
    qs, stats = load(hf)
    assert [q.question_id for q in qs] == ["Mercury_7175875", "num_labels"]
    assert qs[0].answer_letter == "B" and qs[0].choices[1] == "day length"
    assert qs[1].answer_index == 1 and stats.usable == 2
    original = _jsonl(
        tmp_path / "arc_orig.jsonl",
        [
            {
                "id": "x1",
                "question": {
                    "stem": "What melts ice?",
                    "choices": [{"text": "heat", "label": "A"}, {"text": "cold", "label": "B"}],
                },
                "answerKey": "A",
            }
        ],
    )
    (q,), _ = load(original)
    assert q.question == "What melts ice?" and q.choices == ["heat", "cold"] and q.answer_index == 0


def test_mmlu_parquet_and_headerless_csv(tmp_path: Path) -> None:
    p = tmp_path / "mmlu.parquet"
    pq.write_table(
        pa.table(
            {
                "question": ["What is 2 + 2?", "Capital of Italy?"],
                "subject": ["elementary_mathematics", "geography"],
                "choices": [["3", "4", "5", "6"], ["Rome", "Milan", "Turin", "Naples"]],
                "answer": [1, 0],  # 0-based index
            }
        ),
        p,
    )
    qs, _ = load(p)
    assert [q.answer_letter for q in qs] == ["B", "A"] and qs[0].subject == "elementary_mathematics"
    c = tmp_path / "astronomy_test.csv"
    with c.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["What is the Sun?", "A planet", "A star", "A moon", "A comet", "B"])
        w.writerow(["Closest planet to the Sun?", "Venus", "Mercury", "Mars", "Earth", "B"])
    qs, stats = load(c)
    assert len(qs) == 2 and qs[0].choices == ["A planet", "A star", "A moon", "A comet"]
    assert qs[1].answer_letter == "B" and stats.read == 2


def test_medqa_and_exam_layouts(tmp_path: Path) -> None:
    med = _jsonl(
        tmp_path / "medqa.jsonl",
        [
            {
                "question": "A 23-year-old presents with ... Which is the most likely diagnosis?",
                "answer": "Asthma",
                "options": {"A": "Pneumonia", "B": "Asthma", "C": "COPD", "D": "Flu", "E": "Cold"},
                "meta_info": "step1",
                "answer_idx": "B",
            }
        ],
    )
    (q,), _ = load(med)
    assert q.answer_letter == "B" and len(q.choices) == 5 and q.choices[q.answer_index] == "Asthma"
    assert q.question_id.startswith("q")  # no id in the file: a content hash
    exam = _jsonl(
        tmp_path / "exam.jsonl",
        [
            {
                "id": "e1",
                "question": "Q?",
                "choices": ["x", "y", "z"],
                "answer": "C",
                "answer_index": 2,
                "difficulty": 0.3,
            }
        ],
    )
    (q,), _ = load(exam)
    assert q.question_id == "e1" and q.answer_letter == "C"


def test_configured_fields_and_skips(tmp_path: Path) -> None:
    c = tmp_path / "custom.csv"
    c.write_text(
        "qid,prompt_text,opt1,opt2,opt3,gold\n"
        "a,First?,red,green,blue,2\n"
        "b,Second?,one,two,,1\n"  # an empty option: skipped
        "c,Third?,x,y,z,9\n"  # answer out of range: skipped
    )
    qs, stats = load(
        c,
        question_field="prompt_text",
        option_fields=["opt1", "opt2", "opt3"],
        answer_field="gold",
        answer_index_base=1,
        id_field="qid",
    )
    assert [q.question_id for q in qs] == ["a"] and qs[0].answer_letter == "B"
    assert stats.skipped == {"answer index out of range": 1, "fewer than 2 options or an empty option": 1}


def test_user_errors_name_file_and_fields(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"kieval\.questions\.path"):
        load(tmp_path / "missing.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "ok?"}\nnot json\n')
    with pytest.raises(UserError, match="line 2"):
        load(bad)
    odd = _jsonl(tmp_path / "odd.jsonl", [{"text": "What?", "opts": ["a", "b"], "key": 0}])
    with pytest.raises(UserError) as e:
        load(odd)
    msg = str(e.value)
    assert (
        str(odd) in msg
        and "question_field" in msg
        and "answer_field" in msg
        and "no question text (1)" in msg
    )
    xlsx = tmp_path / "q.xlsx"
    xlsx.write_text("x")
    with pytest.raises(UserError, match=r"kieval\.questions\.format"):
        load(xlsx)


def test_clean_question_strips_labels_and_invented_replies() -> None:
    assert clean_question("[YOU] Why does ice float?\n[INTERVIEWEE] Because...") == "Why does ice float?"
    assert clean_question("Question: How does heat move in metal?") == "How does heat move in metal?"
    assert clean_question("  What changes at altitude?  ") == "What changes at altitude?"
