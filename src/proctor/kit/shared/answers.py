"""Candidates answering open questions (closed-book or with their retriever), scored by EM and F1."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from pydantic import Field

from proctor.candidates import SystemUnderTest
from proctor.judging import exact_match, f1
from proctor.kit.context import RunContext
from proctor.kit.shared.questions import Question
from proctor.kit.steps import Outcome, Payload


class AnswerItem(Payload):
    """A candidate's answer to a question, with the reference and the lexical scores."""

    KIND: ClassVar[str] = "answer"
    candidate: str
    question_id: str
    question: str
    reference_answer: str
    answer: str
    retrieved_ids: list[str] = Field(default_factory=list)
    unit_id: str | None = None
    em: float
    f1: float
    # How a non-LLM candidate got its answer: an agent's trajectory, a pipeline's contexts and trace.
    trace: dict[str, Any] | None = None


A = TypeVar("A", bound=AnswerItem)


@dataclass(frozen=True)
class AnswerTask:
    """A candidate to answer a question; the unit's id is the candidate's name and the question itself."""

    candidate: SystemUnderTest
    question: Question


async def answer_questions(
    ctx: RunContext[Any],
    tasks: Sequence[AnswerTask],
    *,
    output: type[A],
    role: str = "candidate",
    description: str = "answering",
) -> list[Outcome[AnswerTask, A]]:
    """Each task's candidate answers its question; the question's source chunks are the gold passages
    (used by the oracle retriever only)."""

    async def answer(t: AnswerTask) -> A:
        q = t.question
        ans = await t.candidate.answer(q.question, gold_ids=q.source_chunk_ids)
        return output(
            candidate=t.candidate.name,
            question_id=q.question_id,
            question=q.question,
            reference_answer=q.reference_answer,
            answer=ans.text,
            retrieved_ids=ans.context_ids,
            unit_id=q.unit_id,
            em=exact_match(ans.text, q.reference_answer),
            f1=f1(ans.text, q.reference_answer),
            trace=ans.trace if ans.trace.get("kind") else None,
        )

    return await ctx.map(
        description,
        tasks,
        answer,
        unit_id=lambda t: (t.candidate.name, t.question),
        role=role,
        output=output,
        context=lambda t: {
            "candidate": t.candidate.name,
            "question_id": t.question.question_id,
            "question": t.question.question,
            "reference_answer": t.question.reference_answer,
            "unit_id": t.question.unit_id,
        },
    )
