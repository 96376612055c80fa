"""Writing open questions with short reference answers from passages, and the filters every protocol
applies to them (not self-contained, duplicate, stating its own answer)."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from pydantic import BaseModel, Field

from proctor.judging.equivalence import states_reference
from proctor.judging.metrics import normalize_answer
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload, current_key
from proctor.models.base import Model
from proctor.prompts import render_messages

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "question": {"type": "string", "minLength": 8},
        "answer": {"type": "string", "minLength": 1},
    },
    "required": ["question", "answer"],
}

NOT_SELF_CONTAINED = re.compile(
    r"\b(according to|in|from|based on) (the|this) (text|passage|document|article|excerpt|reference)\b"
    r"|\bthe (text|passage|excerpt) (says|states|mentions)\b",
    re.IGNORECASE,
)


class Question(Payload):
    """A question with its reference answer, and where it came from."""

    KIND: ClassVar[str] = "question"
    question_id: str
    question: str
    reference_answer: str
    prompt_version: str
    source_chunk_ids: list[str] = Field(default_factory=list)
    source: str | None = None
    unit_id: str | None = None
    generator: str | None = None


Q = TypeVar("Q", bound=Question)


@dataclass(frozen=True)
class QuestionTask:
    """One question to write: what identifies it (`id`, e.g. its chunk and variant; the kit derives the
    key from it), the prompt's variables, the seed of the call, and provenance."""

    id: Any
    variables: dict[str, Any]
    seed: int
    source_chunk_ids: list[str] = field(default_factory=list)
    source: str | None = None
    unit_id: str | None = None


class GenerationStats(BaseModel):
    planned: int = 0
    generated: int = 0
    failed: int = 0
    filtered: dict[str, int] = Field(default_factory=dict)
    kept: int = 0


def strip(text: str) -> str:
    return text.strip()


async def write_questions(
    ctx: RunContext[Any],
    tasks: Sequence[QuestionTask],
    *,
    model: Model,
    prompt: str,
    prompt_version: str,
    max_tokens: int,
    output: type[Q],
    role: str = "examiner",
    description: str = "writing questions",
    tidy: Callable[[str], str] = strip,
    finish: Callable[[QuestionTask, Q], Q] | None = None,
) -> list[Outcome[QuestionTask, Q]]:
    """Ask `model` (as `role`) for one question + reference answer per task with the JSON schema;
    `finish` may amend each question before it is stored (a protocol's own check)."""

    async def write(t: QuestionTask) -> Q:
        c = await model.generate(
            render_messages(prompt, **t.variables),
            json_schema=QUESTION_SCHEMA,
            temperature=0.0,
            seed=t.seed,
            max_tokens=max_tokens,
        )
        q = output(
            question_id=current_key(),
            question=tidy(str(c.parsed["question"])),
            reference_answer=tidy(str(c.parsed["answer"])),
            source_chunk_ids=t.source_chunk_ids,
            source=t.source,
            unit_id=t.unit_id,
            generator=model.spec,
            prompt_version=prompt_version,
        )
        return finish(t, q) if finish is not None else q

    return await ctx.map(
        description,
        tasks,
        write,
        unit_id=lambda t: t.id,
        role=role,
        output=output,
        context=lambda t: {"unit_id": t.unit_id},
    )


def states_answer(question: str, reference: str) -> bool:
    """Whether a question gives its reference answer away: every distinctive word of the reference (stop
    and function words aside, compared by stem: "the Varslandic economy" states "Varsland") and every
    number it states stand in the question ("... the country where the Varsland economy is based?" for
    "Varsland"). A closed-book candidate scores on such a question by repeating it, so it measures
    nothing. A word in common is not enough ("Which hall ...?" does not state "the Copper Hall"); a
    reference of several words is stated only when all of them are."""
    return states_reference(question, reference)


def _normalise(q: str) -> str:
    return re.sub(r"\W+", " ", q.lower()).strip()


def keep_questions(outcomes: Sequence[Outcome[QuestionTask, Q]]) -> tuple[list[Q], GenerationStats]:
    """The questions that pass the filters, in task order (so the kept set is deterministic)."""
    stats = GenerationStats(planned=len(outcomes))
    kept: list[Q] = []
    seen: set[str] = set()
    for o in outcomes:
        if o.value is None:
            stats.failed += 1
            continue
        stats.generated += 1
        q = o.value
        reason = None
        if NOT_SELF_CONTAINED.search(q.question):
            reason = "not_self_contained"
        elif _normalise(q.question) in seen:
            reason = "duplicate"
        elif states_answer(q.question, q.reference_answer):
            reason = "states_answer"
        if reason:
            stats.filtered[reason] = stats.filtered.get(reason, 0) + 1
            continue
        seen.add(_normalise(q.question))
        kept.append(q)
    stats.kept = len(kept)
    return kept, stats


_STOP = frozenset(
    [
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "by",
        "with",
        "from",
        "and",
        "or",
        "is",
        "are",
        "was",
        "were",
        "be",
        "it",
        "its",
        "this",
        "that",
        "as",
    ]
)


def support(answer: str, text: str) -> float:
    """Share of the answer's content words (normalised as for F1, stop words out) present in the text — how
    far a generated answer is supported by the text it was written from."""
    all_words = normalize_answer(answer).split()
    words = [w for w in all_words if w not in _STOP] or all_words
    if not words:
        return 0.0
    vocab = set(normalize_answer(text).split())
    return sum(1 for w in words if w in vocab) / len(words)
