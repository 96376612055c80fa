"""The exam as a JSONL file: one question per line, readable by pandas and `datasets`.

    import pandas as pd; pd.read_json("exam.jsonl", lines=True)
    datasets.load_dataset("json", data_files="exam.jsonl")

Required keys (other protocols rely on them): id, question, choices (4 strings), answer ("A".."D"),
answer_index, rationale, source_chunk_ids, bloom, question_word, generator, prompt_version. Extra keys
written by proctor: topic (the source document), source, bloom_source, question_word_source, guessability
(closed-book answerability).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field, ValidationError

from proctor.constants import LETTERS
from proctor.errors import UserError
from proctor.kit.steps import Payload
from proctor.records import read_records

REQUIRED = (
    "id",
    "question",
    "choices",
    "answer",
    "answer_index",
    "rationale",
    "source_chunk_ids",
    "bloom",
    "question_word",
    "generator",
    "prompt_version",
)
EXTRA = ("topic", "source", "bloom_source", "question_word_source", "guessability")


class ExamQuestion(Payload):
    """One exam question (item `exam_question`, one line of exam.jsonl). The extras (`topic`, `source`,
    the labels' sources, `guessability`) are written to the file when they were set."""

    KIND: ClassVar[str] = "exam_question"
    id: str
    question: str
    choices: list[str]
    answer: str
    answer_index: int
    rationale: str | None = None
    source_chunk_ids: list[str] = Field(default_factory=list)
    bloom: str | None = None
    question_word: str | None = None
    generator: str | None = None
    prompt_version: str | None = None
    topic: str | None = None
    source: str | None = None
    bloom_source: str | None = None
    question_word_source: str | None = None
    guessability: float | None = None
    draft_key: str | None = None  # the examiner call's key and the question's place in its reply

    @property
    def correct_option(self) -> str:
        return self.choices[self.answer_index]


def exam_record(q: ExamQuestion) -> dict[str, Any]:
    """The file's view of an exam question: the required keys first, then the extras set."""
    data = q.model_dump(mode="json")
    return {k: data[k] for k in REQUIRED} | {k: data[k] for k in EXTRA if k in q.model_fields_set}


def write_exam(path: Path, exam: Sequence[ExamQuestion]) -> Path:
    """Write atomically (a temporary file renamed into place) so a killed run never leaves half a file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for q in exam:
            f.write(json.dumps(exam_record(q), ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def _bad(path: Path, line: int, problem: str) -> UserError:
    return UserError(
        f"{path}, line {line}: {problem}. Each line must be a JSON object with {', '.join(REQUIRED)} "
        f"(choices: a list of 2-10 strings; answer: the correct letter; answer_index: its 0-based index). "
        f"Fix the line or regenerate the exam with `proctor run` on an exam config."
    )


def read_exam(path: str | Path) -> list[dict[str, Any]]:
    """Read and validate an exam file; any defect is a user error naming the line and field."""
    p = Path(path)
    if not p.is_file():
        raise UserError(f"exam.exam_file: {p} does not exist. Give the path of an exam JSONL file.")
    exam: list[dict[str, Any]] = []
    seen: set[str] = set()
    for rec in read_records(p, field="exam.exam_file", format="jsonl"):
        no, q = rec.number, rec.data
        if not isinstance(q, dict):
            raise _bad(p, no, "not a JSON object")
        missing = [k for k in REQUIRED if k not in q]
        if missing:
            raise _bad(p, no, f"missing field(s) {', '.join(missing)}")
        choices = q["choices"]
        if not (
            isinstance(choices, list) and 2 <= len(choices) <= 10 and all(isinstance(c, str) for c in choices)
        ):
            raise _bad(p, no, "field 'choices' must be a list of 2-10 strings")
        idx = q["answer_index"]
        if not isinstance(idx, int) or not 0 <= idx < len(choices):
            raise _bad(p, no, f"field 'answer_index' must be an integer in 0..{len(choices) - 1}")
        if q["answer"] != LETTERS[idx]:
            raise _bad(p, no, f"field 'answer' is {q['answer']!r} but answer_index {idx} is {LETTERS[idx]!r}")
        if not isinstance(q["question"], str) or not q["question"].strip():
            raise _bad(p, no, "field 'question' must be a non-empty string")
        if not isinstance(q["source_chunk_ids"], list):
            raise _bad(p, no, "field 'source_chunk_ids' must be a list (possibly empty)")
        qid = str(q["id"])
        if qid in seen:
            raise _bad(p, no, f"id {qid!r} is used twice")
        seen.add(qid)
        q["id"] = qid
        exam.append(q)
    if not exam:
        raise UserError(f"exam.exam_file: {p} holds no questions. Give a non-empty exam JSONL file.")
    return exam


def load_exam(path: str | Path) -> list[ExamQuestion]:
    """`read_exam` as typed questions; a value of the wrong type is a user error naming the question."""
    out = []
    for q in read_exam(path):
        try:
            out.append(ExamQuestion.model_validate(q))
        except ValidationError as e:
            raise UserError(
                f"exam.exam_file: {path}, question {q['id']!r}: {e.errors()[0]['loc']} "
                f"{e.errors()[0]['msg']}. Fix the question (see the keys above) or regenerate the exam."
            ) from None
    return out
