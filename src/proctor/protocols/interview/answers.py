"""Asking a candidate one question and grading the answer — the same two steps for base questions,
extension questions and the validation re-answers.

Grading: a multiple-choice answer is right when the letter it names is the key (a reply naming no option is
an error on its item, cause `unparseable`, never a silently wrong answer); a short answer is decided by
exact match / the deterministic equivalence rules when they are sure, else by the LLM judge with the
reference, whose "correct" the guards may overrule (`proctor.kit.shared.judges`). A failed answer or
judgment leaves the question unscored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from pydantic import Field

from proctor.candidates import SystemUnderTest
from proctor.candidates.multiple_choice import parse_letter
from proctor.constants import LETTERS
from proctor.errors import StepError
from proctor.judging import exact_match, f1
from proctor.models.base import Model
from proctor.kit.context import RunContext
from proctor.protocols.interview.config import Config
from proctor.kit.shared.answers import AnswerItem
from proctor.kit.shared.judges import JUDGE_NAMES, judge_answers
from proctor.kit.shared.question_file import Difficulty
from proctor.kit.steps import Outcome

Stage = Literal["base", "extension", "validation"]
JUDGE = JUDGE_NAMES["with_reference"]


class InterviewAnswer(AnswerItem):
    """A candidate's answer to one interview question, where it was asked, and (multiple choice) the
    option it named. `correct` is set for multiple choice; short answers are decided by a judgment."""

    KIND: ClassVar[str] = "interview_answer"
    stage: Stage
    variant: str | None  # None for base answers (shared by every variant)
    batch: int
    round: int  # 0 = base question
    difficulty: Difficulty
    choices: list[str] = Field(default_factory=list)
    correct_letter: str | None = None
    choice: str | None = None
    correct: bool | None = None


@dataclass(frozen=True)
class Ask:
    """One question put to one candidate."""

    key: str
    candidate: SystemUnderTest
    stage: Stage
    variant: str | None
    batch: int
    round: int
    question_id: str
    question: str  # as asked (the validation prompt wraps it with the suggestions)
    reference: str
    difficulty: Difficulty
    choices: tuple[str, ...] = ()
    answer_index: int | None = None
    gold_ids: tuple[str, ...] = field(default=())


async def ask(
    ctx: RunContext[Config], asks: Sequence[Ask], description: str
) -> list[Outcome[Ask, InterviewAnswer]]:
    async def answer(a: Ask) -> InterviewAnswer:
        reply = await a.candidate.answer(a.question, list(a.choices) or None, gold_ids=list(a.gold_ids))
        letter = parse_letter(reply.text, list(a.choices)) if a.choices else None
        if a.choices and letter is None:
            raise StepError(
                f"the answer names no option (A-{LETTERS[len(a.choices) - 1]}): {reply.text[:200]!r}",
                cause="unparseable",
            )
        key_letter = LETTERS[a.answer_index] if a.answer_index is not None else None
        return InterviewAnswer(
            candidate=a.candidate.name,
            question_id=a.question_id,
            question=a.question,
            reference_answer=a.reference,
            answer=reply.text,
            retrieved_ids=reply.context_ids,
            trace=reply.trace if reply.trace.get("kind") else None,
            em=exact_match(reply.text, a.reference),
            f1=f1(reply.text, a.reference),
            stage=a.stage,
            variant=a.variant,
            batch=a.batch,
            round=a.round,
            difficulty=a.difficulty,
            choices=list(a.choices),
            correct_letter=key_letter,
            choice=letter,
            correct=(letter == key_letter) if a.choices else None,
        )

    return await ctx.map(
        description,
        asks,
        answer,
        key=lambda a: a.key,
        role="candidate",
        output=InterviewAnswer,
        context=lambda a: {
            "candidate": a.candidate.name,
            "stage": a.stage,
            "variant": a.variant,
            "batch": a.batch,
            "round": a.round,
            "question_id": a.question_id,
            "question": a.question,
            "reference_answer": a.reference,
        },
    )


async def grade(
    ctx: RunContext[Config],
    outcomes: Sequence[Outcome[Ask, InterviewAnswer]],
    judge: Model,
    *,
    role: str = "judge",
) -> dict[str, bool]:
    """answer key -> correct, for every answer that could be graded (multiple choice by letter, short
    answers by rules or the judge); judge failures are recorded on their answers and left out."""
    verdict: dict[str, bool] = {}
    open_answers: list[tuple[str, AnswerItem]] = []
    for o in outcomes:
        if o.value is None:
            continue
        if o.value.correct is not None:
            verdict[o.key] = o.value.correct
            ctx.store.put_judgment(
                o.key,
                "option_letter",
                verdict="correct" if o.value.correct else "incorrect",
                score=1.0 if o.value.correct else 0.0,
                reason=f"named {o.value.choice}, key {o.value.correct_letter}",
            )
        else:
            open_answers.append((o.key, o.value))
    if open_answers:
        judged = await judge_answers(
            ctx,
            open_answers,
            kind="with_reference",
            model=judge,
            rules=True,
            guards=True,
            description="interview: judging",
        )
        for j in judged:
            if j.value is not None and j.value.score is not None:
                verdict[j.key] = j.value.score >= 1.0
    return verdict
