"""Seed questions for KIEval: multiple-choice records from JSONL/JSON, Parquet or CSV/TSV.

Recognised per record without configuration (explicit field names in `kieval.questions` win):

* ARC (Hugging Face): `question`, `choices: {text: [...], label: [...]}`, `answerKey` (a label);
  ARC original: `question: {stem, choices: [{text, label}]}`, `answerKey`.
* MMLU (Hugging Face): `question`, `choices: [...]`, `answer` (0-based index), `subject`;
  MMLU original CSV (no header): question, A, B, C, D, answer letter (`csv_header: auto` detects it);
  columns `input, A, B, C, D, target` also work.
* MedQA: `question`, `options: {A: ..., B: ...}`, `answer_idx` (letter), `answer` (the option text).
* proctor's `exam` protocol: `id`, `question`, `choices: [...]`, `answer` ("A"...), `answer_index`.

Records that cannot be read (no question, fewer than 2 options, an answer that names no option) are
skipped and counted by reason; a file with no usable record is a UserError naming the fields looked for.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from proctor.constants import LETTERS
from proctor.errors import UserError
from proctor.protocols.kieval.config import QuestionsConfig
from proctor.records import read_records

MAX_CHOICES = 10

QUESTION_FIELDS = ("question", "Question", "input", "prompt", "query", "stem", "sent1")
CHOICES_FIELDS = ("choices", "options", "Choices", "Options", "endings")
ANSWER_FIELDS = ("answer_idx", "answerKey", "answer_key", "answer_index", "answer", "label", "target", "gold")
ID_FIELDS = ("id", "question_id", "qid", "ID", "uid")
SUBJECT_FIELDS = ("subject", "category", "meta_info", "task", "domain")


@dataclass(frozen=True)
class SeedQuestion:
    """One multiple-choice question, normalised: options in file order, the key as a 0-based index."""

    question_id: str
    question: str
    choices: list[str]
    answer_index: int
    subject: str | None = None
    source: str = ""

    @property
    def answer_letter(self) -> str:
        return LETTERS[self.answer_index]

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "answer_letter": self.answer_letter}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SeedQuestion:
        return cls(
            question_id=d["question_id"],
            question=d["question"],
            choices=list(d["choices"]),
            answer_index=int(d["answer_index"]),
            subject=d.get("subject"),
            source=d.get("source", ""),
        )


class _Skip(Exception):
    """A record that cannot become a question; the message is the counted reason."""


def _records(path: Path, cfg: QuestionsConfig) -> Iterator[tuple[str, Any]]:
    """(where, record) through the one records reader; a headerless CSV row in MMLU's original layout
    (question, option columns..., answer letter) becomes a record."""
    known = set(QUESTION_FIELDS) | set(ANSWER_FIELDS) | set(CHOICES_FIELDS) | set(ID_FIELDS)
    for rec in read_records(
        path,
        field="kieval.questions.path",
        format=cfg.format,
        format_field="kieval.questions.format",
        csv_header=cfg.csv_header,
        is_header=lambda names: any(c in known for c in names),
    ):
        data = rec.data
        if isinstance(data, list):  # a CSV row without a header
            data = {"question": data[0], "choices": data[1:-1], "answer": data[-1]} if len(data) >= 4 else {}
        yield rec.where, data


def _first(rec: dict[str, Any], configured: str | None, candidates: tuple[str, ...]) -> tuple[str, Any]:
    if configured is not None:
        if configured not in rec:
            raise _Skip(f"no field '{configured}'")
        return configured, rec[configured]
    for name in candidates:
        if name in rec and rec[name] not in (None, ""):
            return name, rec[name]
    return "", None


def _text(v: Any) -> str:
    return " ".join(str(v).split()) if v is not None else ""


def _choices(
    rec: dict[str, Any], cfg: QuestionsConfig, question_value: Any
) -> tuple[list[str], list[str] | None]:
    """Option texts in order, and their labels when the file gives labels (ARC, MedQA)."""
    if cfg.option_fields:
        missing = [f for f in cfg.option_fields if f not in rec]
        if missing:
            raise _Skip(f"no option field '{missing[0]}'")
        return [_text(rec[f]) for f in cfg.option_fields], None
    value: Any = None
    if cfg.choices_field is None and isinstance(question_value, dict) and "choices" in question_value:
        value = question_value["choices"]  # ARC original: question.choices
    else:
        _, value = _first(rec, cfg.choices_field, CHOICES_FIELDS)
    if value is None and cfg.choices_field is None:
        letters = [c for c in LETTERS[:MAX_CHOICES] if c in rec and rec[c] not in (None, "")]
        if len(letters) >= 2 and letters == list(LETTERS[: len(letters)]):
            return [_text(rec[c]) for c in letters], letters
    if value is None:
        raise _Skip("no options")
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, str):
        try:
            value = json.loads(value)  # a list stored as text in a CSV cell
        except json.JSONDecodeError:
            raise _Skip("options are text, not a list") from None
    if isinstance(value, dict) and "text" in value:
        texts = list(value["text"])
        labels = [str(x) for x in value.get("label") or []] or None
        return [_text(t) for t in texts], labels
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: str(kv[0]))
        return [_text(v) for _, v in items], [str(k) for k, _ in items]
    if isinstance(value, list):
        if value and all(isinstance(v, dict) and "text" in v for v in value):
            labels = [str(v.get("label", "")) for v in value]
            return [_text(v["text"]) for v in value], labels if all(labels) else None
        return [_text(v) for v in value], None
    raise _Skip("options are neither a list nor a map")


def _answer_index(value: Any, choices: list[str], labels: list[str] | None, base: int) -> int:
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, bool) or value is None:
        raise _Skip("no answer")
    if isinstance(value, int | float) and float(value).is_integer():
        idx = int(value) - base
        if 0 <= idx < len(choices):
            return idx
        raise _Skip("answer index out of range")
    s = str(value).strip()
    if labels and s in labels:
        return labels.index(s)
    if len(s) == 1 and s.upper() in LETTERS[: len(choices)]:
        return LETTERS.index(s.upper())
    if s.isdigit():
        idx = int(s) - base
        if 0 <= idx < len(choices):
            return idx
    norm = [c.lower() for c in choices]
    if s.lower() in norm:
        return norm.index(s.lower())
    raise _Skip("answer index out of range" if s.isdigit() else "answer names no option")


def _record_to_question(rec: Any, where: str, path: Path, cfg: QuestionsConfig) -> SeedQuestion:
    if not isinstance(rec, dict):
        raise _Skip("record is not an object")
    _, qv = _first(rec, cfg.question_field, QUESTION_FIELDS)
    question = _text(qv.get("stem") if isinstance(qv, dict) else qv)
    if not question:
        raise _Skip("no question text")
    choices, labels = _choices(rec, cfg, qv)
    if len(choices) < 2 or any(not c for c in choices):
        raise _Skip("fewer than 2 options or an empty option")
    if len(choices) > MAX_CHOICES:
        raise _Skip(f"more than {MAX_CHOICES} options")
    answer_value: Any = None
    if cfg.answer_field is not None:
        _, answer_value = _first(rec, cfg.answer_field, ())
    else:
        for name in ANSWER_FIELDS:
            if name in rec and rec[name] not in (None, ""):
                answer_value = rec[name]
                break
    idx = _answer_index(answer_value, choices, labels, cfg.answer_index_base)
    _, rid = _first(rec, cfg.id_field, ID_FIELDS)
    _, subject = _first(rec, cfg.subject_field, SUBJECT_FIELDS)
    if rid in (None, ""):
        blob = json.dumps([question, choices, idx], ensure_ascii=False)
        rid = "q" + hashlib.sha256(blob.encode()).hexdigest()[:12]
    return SeedQuestion(
        question_id=str(rid),
        question=question,
        choices=choices,
        answer_index=idx,
        subject=None if isinstance(subject, dict) else (_text(subject) or None),
        source=f"{path.name}:{where}",
    )


def load_seed_questions(cfg: QuestionsConfig) -> tuple[list[SeedQuestion], dict[str, Any]]:
    """Every usable question in file order, plus counts (read, usable, skipped by reason)."""
    path = Path(cfg.path).expanduser()
    if not path.is_file():
        raise UserError(
            f"kieval.questions.path: {path} is not a file. Give the path (absolute, or relative to the "
            f"config file's folder) of a JSONL, Parquet or CSV multiple-choice file."
        )
    questions: list[SeedQuestion] = []
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    read = 0
    for where, rec in _records(path, cfg):
        read += 1
        try:
            q = _record_to_question(rec, where, path, cfg)
        except _Skip as e:
            skipped[str(e)] += 1
            continue
        if q.question_id in seen:
            skipped["duplicate id"] += 1
            continue
        seen.add(q.question_id)
        questions.append(q)
    if not questions:
        reasons = ", ".join(f"{r} ({n})" for r, n in skipped.most_common()) or "the file is empty"
        fields = (
            f"question field {cfg.question_field or '/'.join(QUESTION_FIELDS[:3])}, options "
            f"{cfg.option_fields or cfg.choices_field or '/'.join(CHOICES_FIELDS[:2])}, answer "
            f"{cfg.answer_field or '/'.join(ANSWER_FIELDS[:5])}"
        )
        raise UserError(
            f"{path}: no usable multiple-choice question among {read} records ({reasons}). proctor looked "
            f"for {fields}. Set kieval.questions.question_field / choices_field (or option_fields) / "
            f"answer_field to the names your file uses."
        )
    stats = {
        "file": str(path),
        "read": read,
        "usable": len(questions),
        "skipped": dict(sorted(skipped.items())),
    }
    return questions, stats
