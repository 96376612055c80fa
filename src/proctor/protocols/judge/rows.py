"""The rows of an answers file (question, reference, answer, optional id and human label), read through
the one records reader; a file or field that cannot give them is a UserError naming the field and the fix."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from proctor.errors import UserError
from proctor.protocols.judge.config import AnswersFile, Config
from proctor.records import read_records

Label = Literal["correct", "incorrect"]
LABEL_VALUES: dict[str, Label] = {
    "correct": "correct",
    "incorrect": "incorrect",
    "true": "correct",
    "false": "incorrect",
    "1": "correct",
    "0": "incorrect",
    "yes": "correct",
    "no": "incorrect",
}
SECTION = "judge.answers"


@dataclass(frozen=True)
class Row:
    id: str
    question: str
    reference: str
    answer: str
    label: Label | None = None


def _text(v: Any) -> str:
    return "" if v is None else str(v).strip()


def parse_label(value: Any, where: str) -> Label | None:
    """A human label as `correct` / `incorrect`; None for an empty one; anything else is a UserError."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    key = str(value).strip().lower()
    if isinstance(value, bool):
        key = "true" if value else "false"
    elif isinstance(value, int | float) and not isinstance(value, bool) and float(value) in (0.0, 1.0):
        key = str(int(value))
    label = LABEL_VALUES.get(key)
    if label is None:
        raise UserError(
            f"{where}: label {value!r} is not one of {', '.join(LABEL_VALUES)}. Write correct or incorrect "
            "(or leave it empty for an unlabelled record)."
        )
    return label


def _field(rec: dict[str, Any], name: str, option: str, path: Path, where: str) -> str:
    if name not in rec:
        known = ", ".join(sorted(map(str, rec))) or "none"
        raise UserError(
            f"{path}, {where}: no field '{name}' (the record's fields: {known}). Name the field that holds "
            f"the {option}: `--field {option}=COLUMN` on the command line, or `{SECTION}.{option}_field` in "
            "the config."
        )
    return _text(rec[name])


def read_rows(cfg: Config) -> list[Row]:
    """Every record of the answers file as a Row, in file order, with labels from `cfg.labels` if given."""
    a: AnswersFile = cfg.answers
    path = Path(a.path)
    rows: list[Row] = []
    seen: set[str] = set()
    for rec in read_records(path, field=f"{SECTION}.path", format=a.format, format_field=f"{SECTION}.format"):
        if not isinstance(rec.data, dict):
            raise UserError(
                f"{SECTION}.path: {path}, {rec.where}: a record must be an object with fields "
                f"{a.question_field}, {a.reference_field} and {a.answer_field}. Fix the file."
            )
        data = rec.data
        rid = _text(data.get(a.id_field)) or str(rec.number)
        if rid in seen:
            raise UserError(
                f"{path}, {rec.where}: id '{rid}' (field '{a.id_field}') is used twice. Give every record "
                f"its own id, or name another id field (`--field id=COLUMN` / `{SECTION}.id_field`)."
            )
        seen.add(rid)
        rows.append(
            Row(
                id=rid,
                question=_field(data, a.question_field, "question", path, rec.where),
                reference=_field(data, a.reference_field, "reference", path, rec.where),
                answer=_field(data, a.answer_field, "answer", path, rec.where),
                label=parse_label(data.get(a.label_field), f"{path}, {rec.where}, field '{a.label_field}'"),
            )
        )
    if not rows:
        raise UserError(f"{SECTION}.path: {path} holds no record. Give a file with one answer per record.")
    if cfg.labels is not None:
        rows = _with_labels(rows, Path(cfg.labels), a)
    return rows


def _with_labels(rows: list[Row], path: Path, a: AnswersFile) -> list[Row]:
    """Labels from a separate file, matched by id (they win over the answers file's own)."""
    labels: dict[str, Label | None] = {}
    for rec in read_records(path, field="judge.labels"):
        data = rec.data if isinstance(rec.data, dict) else {}
        where = f"{path}, {rec.where}"
        rid = _text(data.get(a.id_field))
        if not rid or a.label_field not in data:
            raise UserError(
                f"{where}: a label record needs the fields '{a.id_field}' and '{a.label_field}'. Fix the "
                f"record, or name the fields (`--field id=COLUMN --field label=COLUMN`)."
            )
        labels[rid] = parse_label(data[a.label_field], f"{where}, field '{a.label_field}'")
    ids = {r.id for r in rows}
    unknown = sorted(set(labels) - ids)
    if unknown:
        raise UserError(
            f"judge.labels: {path} labels id '{unknown[0]}' ({len(unknown)} unknown in all), which is not an "
            f"id of the answers file. Label the answers file's ids (field '{a.id_field}')."
        )
    return [Row(r.id, r.question, r.reference, r.answer, labels.get(r.id, r.label)) for r in rows]
