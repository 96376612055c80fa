"""A run's scored items as samples for other tools: one typed `ExportSample` per candidate answer.

A *sample* is the thing a run scores — a qa answer, an exam response, a RECKON answer, a KIEval round:
the item, the question it answers, the reference, the candidate's answer, every judgment of it and the
model calls made for it (with their messages and replies where the store holds them). Which item kinds
are samples, and which payload fields hold the question, reference, answer and candidate, is declared
by each protocol as `SampleSpec`s (on its `Protocol`); for a protocol that declares none, `guess_specs`
reads it off the store (kinds with candidate calls or judgments, the usual field names).

The JSONL writer is here; the inspect_ai writer is `proctor.store.inspect_log`. Nothing secret is in a
sample: it is made of what the store holds (`RunRecord.transcripts`), which never holds keys or headers.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from proctor.store.record import ItemRecord, JudgmentRecord, RunRecord
from proctor.store.transcripts import CallTranscript, ToolCallText, TranscriptMessage

# Field names tried, in order, when a protocol declares no spec for a kind (`guess_specs`).
QUESTION_FIELDS = ("question", "interactor_question", "task", "keyword")
REFERENCE_FIELDS = ("reference_answer", "reference", "gold", "correct_letter", "center")
ANSWER_FIELDS = ("answer", "candidate_reply", "reply", "excerpt")
CANDIDATE_FIELDS = ("candidate", "pipeline", "system")
# Items are read this many at a time (their judgments in one query per chunk).
_CHUNK = 500


@dataclass(frozen=True)
class Lookup:
    """Where a sample's question and reference live when they are not on the sample's own item: the
    item of kind `kind` whose payload field `id_field` equals the sample's field `by` (an exam response's
    `question_id` -> the `exam_question` whose `id` it is)."""

    kind: str
    by: str
    id_field: str


@dataclass(frozen=True)
class SampleSpec:
    """An item kind that is a candidate answer, and the payload fields that hold its parts (None: it has
    none). `question` and `reference` are read from the `lookup` item when one is given."""

    kind: str
    question: str | None = "question"
    reference: str | None = "reference_answer"
    answer: str | None = "answer"
    candidate: str | None = "candidate"
    lookup: Lookup | None = None
    # Multiple choice: the options (read where the question is read; the reference is then its letter).
    choices: str | None = None
    # A protocol that grades on the item itself (an exam response's `correct`, a rageval answer's `em` and
    # `f1`): those fields, each exported as a judgment named after it (1.0 / 0.0 for a bool, else its value).
    grades: tuple[str, ...] = ()


class ExportToolCall(BaseModel):
    """A tool call as the model wrote it (`arguments`: the raw JSON text)."""

    id: str | None = None
    name: str
    arguments: str


class ExportMessage(BaseModel):
    """One message of a call's prompt."""

    role: str
    content: str | None = None
    tool_calls: list[ExportToolCall] | None = None
    tool_call_id: str | None = None


class ExportCall(BaseModel):
    """One model call made for the sample: who, what it was asked (None where the store holds no text)
    and what it replied, with tokens, latency, cache and errors."""

    id: int
    role: str | None = None
    provider: str | None = None
    model: str | None = None
    step: str | None = None
    messages: list[ExportMessage] | None = None
    params: dict[str, Any] = {}
    reply: str | None = None
    reply_tool_calls: list[ExportToolCall] | None = None
    logprobs: dict[str, float] | None = None  # a summary: n_tokens, sum, mean and min logprob
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float | None = None
    cached: bool = False
    attempts: int | None = None
    error: str | None = None
    created: float | None = None
    text_stored: bool = False


class ExportSample(BaseModel):
    """One candidate answer with everything about it (the JSONL line; see docs/export.md)."""

    key: str
    kind: str
    status: str
    error: str | None = None
    error_cause: str | None = None
    candidate: str | None = None
    question: str | None = None
    reference: str | None = None
    answer: str | None = None
    choices: list[str] | None = None
    payload: dict[str, Any] = {}
    judgments: list[JudgmentRecord] = []
    calls: list[ExportCall] = []


def iter_samples(record: RunRecord, specs: Sequence[SampleSpec]) -> Iterator[ExportSample]:
    """Every item of the specs' kinds (done or failed; not pending), in insertion order per kind."""
    for spec in specs:
        lookup = _lookup_table(record, spec.lookup) if spec.lookup else {}
        chunk: list[ItemRecord] = []
        for item in record.iter_items(spec.kind):
            if item.status == "pending":
                continue
            chunk.append(item)
            if len(chunk) >= _CHUNK:
                yield from _samples(record, spec, chunk, lookup)
                chunk = []
        yield from _samples(record, spec, chunk, lookup)


def guess_specs(record: RunRecord) -> list[SampleSpec]:
    """For a protocol that declares no samples: the kinds whose items have calls of the `candidate` role
    or judgments, each with the first of the usual field names its first item has."""
    conn = record.connection
    kinds = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT i.kind FROM items i WHERE i.key IN"
            " (SELECT item_key FROM model_calls WHERE role = 'candidate'"
            " UNION SELECT item_key FROM judgments)"
            " ORDER BY i.kind"
        )
    ]
    specs = []
    for kind in kinds:
        first = next(record.iter_items(kind), None)
        data = first.data if first is not None and isinstance(first.data, dict) else {}
        specs.append(
            SampleSpec(
                kind=kind,
                question=_first_field(data, QUESTION_FIELDS),
                reference=_first_field(data, REFERENCE_FIELDS),
                answer=_first_field(data, ANSWER_FIELDS),
                candidate=_first_field(data, CANDIDATE_FIELDS),
            )
        )
    return specs


def write_jsonl(record: RunRecord, specs: Sequence[SampleSpec], path: Path) -> int:
    """One `ExportSample` per line; returns how many were written."""
    n = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for sample in iter_samples(record, specs):
            f.write(sample.model_dump_json() + "\n")
            n += 1
    return n


def read_jsonl(path: Path) -> list[ExportSample]:
    """The samples of a JSONL export, typed (for users' code and tests)."""
    with path.open(encoding="utf-8") as f:
        return [ExportSample.model_validate_json(line) for line in f if line.strip()]


def export_call(t: CallTranscript) -> ExportCall:
    """A stored call as exported (the store's transcript, as plain data)."""
    return ExportCall(
        id=t.id,
        role=t.role,
        provider=t.provider,
        model=t.model,
        step=t.step,
        messages=None if t.messages is None else [_message(m) for m in t.messages],
        params=dict(t.params),
        reply=t.reply,
        reply_tool_calls=_tool_calls(t.reply_tool_calls),
        logprobs=None if t.logprobs is None else asdict(t.logprobs),
        prompt_tokens=t.prompt_tokens,
        completion_tokens=t.completion_tokens,
        latency_s=t.latency_s,
        cached=t.cached,
        attempts=t.attempts,
        error=t.error,
        created=t.created,
        text_stored=t.text_stored,
    )


def _samples(
    record: RunRecord, spec: SampleSpec, items: list[ItemRecord], lookup: dict[str, dict[str, Any]]
) -> Iterator[ExportSample]:
    if not items:
        return
    judgments = record.judgments_of(it.key for it in items)
    for it in items:
        data = it.data if isinstance(it.data, dict) else {}
        source = data
        if spec.lookup is not None:
            source = lookup.get(str(data.get(spec.lookup.by)), {})
        yield ExportSample(
            key=it.key,
            kind=it.kind,
            status=it.status,
            error=it.error,
            error_cause=it.error_cause,
            candidate=_text(data, spec.candidate),
            question=_text(source, spec.question),
            reference=_text(source, spec.reference),
            answer=_text(data, spec.answer),
            choices=_choices(source, spec.choices),
            payload=data,
            judgments=[*judgments.get(it.key, []), *_grades(it.key, data, spec.grades)],
            calls=[export_call(c) for c in record.transcripts(it.key)],
        )


def _lookup_table(record: RunRecord, lookup: Lookup) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for it in record.iter_items(lookup.kind, "done"):
        if isinstance(it.data, dict) and it.data.get(lookup.id_field) is not None:
            out[str(it.data[lookup.id_field])] = it.data
    return out


def _text(data: dict[str, Any], field: str | None) -> str | None:
    if field is None:
        return None
    value = data.get(field)
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _choices(data: dict[str, Any], field: str | None) -> list[str] | None:
    value = data.get(field) if field else None
    return [str(v) for v in value] if isinstance(value, list) else None


def _grades(key: str, data: dict[str, Any], fields: Sequence[str]) -> list[JudgmentRecord]:
    """The item's own grades as judgments (a field the item does not have, or has as None, gives none)."""
    out = []
    for field in fields:
        value = data.get(field)
        if isinstance(value, bool):
            verdict, score = ("correct" if value else "incorrect"), float(value)
        elif isinstance(value, int | float):
            verdict, score = None, float(value)
        else:
            continue
        out.append(
            JudgmentRecord(item_key=key, judge=field, verdict=verdict, score=score, data={"source": "item"})
        )
    return out


def _first_field(data: dict[str, Any], names: Sequence[str]) -> str | None:
    return next((n for n in names if n in data), None)


def _message(m: TranscriptMessage) -> ExportMessage:
    return ExportMessage(
        role=m.role, content=m.content, tool_calls=_tool_calls(m.tool_calls), tool_call_id=m.tool_call_id
    )


def _tool_calls(calls: list[ToolCallText] | None) -> list[ExportToolCall] | None:
    if calls is None:
        return None
    return [ExportToolCall(id=c.id, name=c.name, arguments=c.arguments) for c in calls]
