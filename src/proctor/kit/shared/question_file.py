"""Benchmark question files: multiple-choice or short-answer records from JSONL/JSON, Parquet or CSV/TSV.

Used by every protocol that starts from an existing question set (KIEval's seeds, the interview's base
questions). Recognised per record without configuration (explicit field names in the config win):

* ARC (Hugging Face): `question`, `choices: {text: [...], label: [...]}`, `answerKey` (a label);
  ARC original: `question: {stem, choices: [{text, label}]}`, `answerKey`.
* MMLU (Hugging Face): `question`, `choices: [...]`, `answer` (0-based index), `subject`;
  MMLU original CSV (no header): question, A, B, C, D, answer letter (`csv_header: auto` detects it);
  columns `input, A, B, C, D, target` also work.
* MedQA: `question`, `options: {A: ..., B: ...}`, `answer_idx` (letter), `answer` (the option text).
* QuALITY (flattened): `question`, `options`, `gold_label` (1-based), `difficult` (0/1 -> easy/hard).
* proctor's `exam` protocol: `id`, `question`, `choices: [...]`, `answer` ("A"...), `answer_index`.
* Short answers (MultiHop-RAG and the like), where the reader allows them: `query`/`question` and a
  phrase `answer`; no options.

A difficulty label (`difficulty`, `level`: easy / medium / hard, or 1 / 2 / 3) and a reference text
(`context`, `passage`, `evidence`...) are kept when present. Records that cannot be read (no question,
fewer than 2 options, an answer that names no option) are skipped and counted by reason; a file with no
usable record is a UserError naming the fields looked for.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from proctor.config_paths import ConfigFile
from proctor.constants import LETTERS
from proctor.errors import UserError
from proctor.records import read_records

MAX_CHOICES = 10
Difficulty = Literal["easy", "medium", "hard"]
DIFFICULTIES: tuple[Difficulty, ...] = ("easy", "medium", "hard")

QUESTION_FIELDS = ("question", "Question", "input", "prompt", "query", "stem", "sent1")
CHOICES_FIELDS = ("choices", "options", "Choices", "Options", "endings")
ANSWER_FIELDS = (
    "answer_idx",
    "answerKey",
    "answer_key",
    "answer_index",
    "gold_label",
    "answer",
    "label",
    "target",
    "gold",
)
ID_FIELDS = ("id", "question_id", "qid", "ID", "uid")
SUBJECT_FIELDS = ("subject", "category", "meta_info", "task", "domain")
DIFFICULTY_FIELDS = ("difficulty", "level", "difficulty_level", "difficult")
CONTEXT_FIELDS = ("context", "passage", "reference", "evidence", "article", "evidence_list")


class QuestionsConfig(BaseModel):
    """Where the questions are and which fields hold what. Every field name is optional: left unset, the
    common layouts (ARC, MMLU, MedQA, QuALITY, the `exam` protocol's JSONL, plain
    `question`/`choices`/`answer`) are recognised per record; unreadable records are skipped and counted."""

    model_config = ConfigDict(extra="forbid")

    path: ConfigFile = Field(
        description="JSONL/JSON, Parquet or CSV/TSV file; a relative path is relative to the config file"
    )
    format: Literal["auto", "jsonl", "json", "parquet", "csv", "tsv"] = Field(
        "auto",
        description="file format; auto: from the extension (.jsonl/.ndjson, .json, .parquet, .csv, .tsv)",
    )
    question_field: str | None = Field(
        None, description="field with the question text; default: question, input, prompt, query, stem, ..."
    )
    choices_field: str | None = Field(
        None,
        description="a list, a {label: text} map or ARC's {text, label}; default: choices, options, "
        "endings, ..., else columns A, B, C, ...",
    )
    option_fields: list[str] | None = Field(None, description="one column per option, e.g. [A, B, C, D]")
    answer_field: str | None = Field(
        None,
        description="a letter, a label, an index or the option's text; default: answer_idx, answerKey, "
        "answer_index, answer, label, target, ...",
    )
    answer_index_base: Literal[0, 1] = Field(0, description="integer answers count from 0 (MMLU) or 1")
    id_field: str | None = Field(
        None,
        description="field with a question id; default: id, question_id, qid, ...; none = a hash of the "
        "question, options and answer",
    )
    subject_field: str | None = Field(
        None,
        description="field with the question's subject, kept with it; default: subject, category, task, ...",
    )
    csv_header: Literal["auto", "yes", "no"] = Field(
        "auto",
        description="'yes': the first row names the columns; 'no': columns are question, options..., answer "
        "(MMLU's original CSVs); 'auto': a header when the first row names a known field",
    )


class BenchmarkQuestionsConfig(QuestionsConfig):
    """A question file that may also hold short-answer questions, difficulty labels and reference texts."""

    difficulty_field: str | None = Field(
        None,
        description="field with easy / medium / hard (or 1 / 2 / 3; QuALITY's `difficult` 0/1 = easy/hard); "
        "default: difficulty, level, difficult; questions without one are labelled by the examiner",
    )
    context_field: str | None = Field(
        None,
        description="field with the question's reference text (a string, or a list of strings or of "
        "{fact|text} objects); default: context, passage, reference, evidence, article, evidence_list",
    )


@dataclass(frozen=True)
class BenchmarkQuestion:
    """One question, normalised: options in file order and the key as a 0-based index (multiple choice),
    or no options and the reference phrase in `answer` (short answer)."""

    question_id: str
    question: str
    choices: tuple[str, ...]
    answer_index: int | None
    answer: str
    difficulty: Difficulty | None = None
    subject: str | None = None
    context: str | None = None
    source: str = ""

    @property
    def multiple_choice(self) -> bool:
        return bool(self.choices)

    @property
    def answer_letter(self) -> str | None:
        return None if self.answer_index is None else LETTERS[self.answer_index]


class _Skip(Exception):
    """A record that cannot become a question; the message is the counted reason."""


def _records(path: Path, cfg: QuestionsConfig, section: str) -> Iterator[tuple[str, Any]]:
    """(where, record) through the one records reader; a headerless CSV row in MMLU's original layout
    (question, option columns..., answer letter) becomes a record."""
    known = set(QUESTION_FIELDS) | set(ANSWER_FIELDS) | set(CHOICES_FIELDS) | set(ID_FIELDS)
    for rec in read_records(
        path,
        field=f"{section}.path",
        format=cfg.format,
        format_field=f"{section}.format",
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
    """Option texts in order, and their labels when the file gives labels (ARC, MedQA); no options: []."""
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
        return [], None
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


def _difficulty(value: Any, field: str) -> Difficulty | None:
    if value is None or value == "":
        return None
    if hasattr(value, "item"):
        value = value.item()
    if field == "difficult":  # QuALITY: 1 = hard subset
        return "hard" if bool(value) else "easy"
    s = str(value).strip().lower()
    if s in DIFFICULTIES:
        return DIFFICULTIES[DIFFICULTIES.index(s)]
    if s in ("1", "2", "3"):
        return DIFFICULTIES[int(s) - 1]
    raise _Skip("difficulty is not easy / medium / hard (or 1 / 2 / 3)")


def _context(value: Any) -> str | None:
    if value is None:
        return None
    if hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, list):
        parts = [str(v.get("fact") or v.get("text") or "") if isinstance(v, dict) else str(v) for v in value]
        return "\n".join(p for p in parts if p.strip()) or None
    return str(value).strip() or None


def _answer_value(rec: dict[str, Any], cfg: QuestionsConfig, multiple_choice: bool) -> Any:
    if cfg.answer_field is not None:
        return _first(rec, cfg.answer_field, ())[1]
    # gold_label is QuALITY's 1-based option number; only meaningful with options.
    names = ANSWER_FIELDS if multiple_choice else ("answer", "answers", "target", "gold", "label")
    for name in names:
        if name in rec and rec[name] not in (None, ""):
            return rec[name]
    return None


def _record_to_question(
    rec: Any, where: str, path: Path, cfg: QuestionsConfig, multiple_choice_only: bool
) -> BenchmarkQuestion:
    if not isinstance(rec, dict):
        raise _Skip("record is not an object")
    _, qv = _first(rec, cfg.question_field, QUESTION_FIELDS)
    question = _text(qv.get("stem") if isinstance(qv, dict) else qv)
    if not question:
        raise _Skip("no question text")
    choices, labels = _choices(rec, cfg, qv)
    if not choices and multiple_choice_only:
        raise _Skip("no options")
    if choices and (len(choices) < 2 or any(not c for c in choices)):
        raise _Skip("fewer than 2 options or an empty option")
    if len(choices) > MAX_CHOICES:
        raise _Skip(f"more than {MAX_CHOICES} options")
    value = _answer_value(rec, cfg, bool(choices))
    idx: int | None = None
    if choices:
        base = 1 if "gold_label" in rec and cfg.answer_field is None else cfg.answer_index_base
        idx = _answer_index(value, choices, labels, base)
        answer = choices[idx]
    else:
        if isinstance(value, list):
            value = value[0] if value else None
        answer = _text(value)
        if not answer:
            raise _Skip("no answer")
    _, rid = _first(rec, cfg.id_field, ID_FIELDS)
    _, subject = _first(rec, cfg.subject_field, SUBJECT_FIELDS)
    difficulty: Difficulty | None = None
    context: str | None = None
    if isinstance(cfg, BenchmarkQuestionsConfig):
        dname, dvalue = _first(rec, cfg.difficulty_field, DIFFICULTY_FIELDS)
        difficulty = _difficulty(dvalue, dname)
        context = _context(_first(rec, cfg.context_field, CONTEXT_FIELDS)[1])
    if rid in (None, ""):
        blob = json.dumps([question, choices, idx if choices else answer], ensure_ascii=False)
        rid = "q" + hashlib.sha256(blob.encode()).hexdigest()[:12]
    return BenchmarkQuestion(
        question_id=str(rid),
        question=question,
        choices=tuple(choices),
        answer_index=idx,
        answer=answer,
        difficulty=difficulty,
        subject=None if isinstance(subject, dict) else (_text(subject) or None),
        context=context,
        source=f"{path.name}:{where}",
    )


def load_questions(
    cfg: QuestionsConfig, *, section: str, multiple_choice_only: bool = False
) -> tuple[list[BenchmarkQuestion], dict[str, Any]]:
    """Every usable question in file order, plus counts (read, usable, skipped by reason). `section` is
    the config path of `cfg` (e.g. `kieval.questions`), named in error messages."""
    path = Path(cfg.path).expanduser()
    kind = "multiple-choice" if multiple_choice_only else "multiple-choice or short-answer"
    if not path.is_file():
        raise UserError(
            f"{section}.path: {path} is not a file. Give the path (absolute, or relative to the config "
            f"file's folder) of a JSONL, Parquet or CSV {kind} question file."
        )
    questions: list[BenchmarkQuestion] = []
    skipped: Counter[str] = Counter()
    seen: set[str] = set()
    read = 0
    for where, rec in _records(path, cfg, section):
        read += 1
        try:
            q = _record_to_question(rec, where, path, cfg, multiple_choice_only)
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
            f"{cfg.answer_field or '/'.join(ANSWER_FIELDS[:6])}"
        )
        raise UserError(
            f"{path}: no usable {kind} question among {read} records ({reasons}). proctor looked "
            f"for {fields}. Set {section}.question_field / choices_field (or option_fields) / "
            f"answer_field to the names your file uses."
        )
    stats = {
        "file": str(path),
        "read": read,
        "usable": len(questions),
        "skipped": dict(sorted(skipped.items())),
    }
    return questions, stats
