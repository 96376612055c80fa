"""Template questions over a domain database, with gold answers computed from the database (exact, no LLM).

A template names its level, a question text with typed slots, and how to compute the answer from the slot's
entity — a short list of steps, never code:

    - name: interests
      level: KS
      text: "What are the research interests of {person}?"
      slot: person                     # an entity type; filled by sampling rows with the run's generator
      answer: [{related: interested_in}, {field: name}, {join: true}]

Steps: `related: <relation>` (the linked rows, either direction), `field: <attribute>` (each row's value;
`name` is the display name), `argmax: <attribute>` (the one row with the largest value; a tie is
ambiguous), `count: true` (the number of rows), `join: true` (several values as one answer, sorted,
comma-separated). Without `join` or `count`, a template must end with exactly one value: more is
"ambiguous", none is "empty" — such instances are rejected and counted by reason.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from proctor.agents.environments.database import DatabaseEnvironment, Row
from proctor.errors import UserError
from proctor.protocols.rageval.config import Level

SHIPPED = Path(__file__).parent / "data" / "academic_templates.yaml"


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid")
    related: str | None = None
    field: str | None = None
    argmax: str | None = None
    count: bool = False
    join: bool = False


class Template(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str
    level: Level
    text: str
    slot: str
    answer: list[Step] = Field(min_length=1)
    origin: str = "seed"  # seed | expansion


class Rejected(Exception):
    """An instance (or a template) that cannot give one exact answer; the message is the counted reason."""


def load_templates(path: str | Path, where: str) -> list[Template]:
    p = Path(path)
    if not p.is_file():
        raise UserError(f"{where}: {p} does not exist. Give a YAML list of templates (see the README).")
    try:
        raw = yaml.safe_load(p.read_text(encoding="utf-8"))
        return [Template.model_validate(t) for t in raw]
    except (ValidationError, yaml.YAMLError, TypeError) as e:
        raise UserError(f"{where}: {p} is not a valid template list ({str(e).splitlines()[0]}).") from e


def check(template: Template, db: DatabaseEnvironment) -> None:
    """A template that names an unknown entity type, relation or slot is rejected before sampling."""
    if template.slot not in db.schema.entities:
        raise Rejected("unknown_slot_type")
    if "{" + template.slot + "}" not in template.text:
        raise Rejected("slot_not_in_text")
    if any(s.related is not None and s.related not in db.schema.relations for s in template.answer):
        raise Rejected("unknown_relation")


def answer(template: Template, db: DatabaseEnvironment, start: Row) -> str:
    """The exact answer for one entity, or Rejected("empty" | "ambiguous" | "unknown_field")."""
    rows: list[Row] = [start]
    values: list[Any] | None = None
    for step in template.answer:
        if step.related is not None:
            rows = [r for row in rows for r in db.related(row.id, step.related)]
            rows = list({r.id: r for r in rows}.values())
        elif step.argmax is not None:
            if not rows:
                raise Rejected("empty")
            if any(step.argmax not in r.attributes for r in rows):
                raise Rejected("unknown_field")
            best = max(r.attributes[step.argmax] for r in rows)
            top = [r for r in rows if r.attributes[step.argmax] == best]
            if len(top) > 1:
                raise Rejected("ambiguous")
            rows = top
        elif step.field is not None:
            if any(step.field != "name" and step.field not in r.attributes for r in rows):
                raise Rejected("unknown_field")
            values = [r.name if step.field == "name" else r.attributes[step.field] for r in rows]
        elif step.count:
            return str(len(rows))
        elif step.join:
            got = values if values is not None else [r.name for r in rows]
            if not got:
                raise Rejected("empty")
            return ", ".join(sorted(str(v) for v in got))
    got = values if values is not None else [r.name for r in rows]
    if not got:
        raise Rejected("empty")
    if len(set(map(str, got))) > 1:
        raise Rejected("ambiguous")
    return str(got[0])


class Instance(BaseModel):
    template: str
    level: Level
    question: str
    gold: str
    entity_id: str
    origin: str


def instantiate(
    templates: list[Template], db: DatabaseEnvironment, rng: np.random.Generator, per_template: int
) -> tuple[list[Instance], Counter[str]]:
    """Up to `per_template` instances of each template, entities sampled with `rng`; rejections counted
    as `<template>: <reason>`."""
    out: list[Instance] = []
    rejected: Counter[str] = Counter()
    for t in templates:
        try:
            check(t, db)
        except Rejected as e:
            rejected[f"{t.name}: {e}"] += 1
            continue
        pool = db.entities(t.slot)
        kept = 0
        for i in rng.permutation(len(pool)):
            if kept >= per_template:
                break
            row = pool[int(i)]
            try:
                gold = answer(t, db, row)
            except Rejected as e:
                rejected[f"{t.name}: {e}"] += 1
                continue
            out.append(
                Instance(
                    template=t.name,
                    level=t.level,
                    question=t.text.replace("{" + t.slot + "}", row.name),
                    gold=gold,
                    entity_id=row.id,
                    origin=t.origin,
                )
            )
            kept += 1
    return out, rejected
