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
from pathlib import Path
from typing import Any

from proctor.constants import LETTERS
from proctor.errors import UserError
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


def exam_record(q: dict[str, Any]) -> dict[str, Any]:
    """The file's view of an exam question: the required keys first, then the extras present."""
    return {k: q.get(k) for k in REQUIRED} | {k: q[k] for k in EXTRA if k in q}


def write_exam(path: Path, exam: list[dict[str, Any]]) -> Path:
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
