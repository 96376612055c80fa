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
from proctor.kit.context import RunContext
from proctor.kit.shared.answers import AnswerItem
from proctor.kit.shared.judges import JUDGE_NAMES, judge_answers
from proctor.kit.shared.question_file import Difficulty
from proctor.kit.steps import Judgment, Outcome
from proctor.models.base import Model
from proctor.protocols.interview.config import Config

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
    """One question put to one candidate (its unit id: everything below but the candidate object, which is
    named)."""

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
    slot: int = 0  # position among the questions of one round (two identical questions are two asks)

    def unit_id(self) -> tuple[object, ...]:
        """Who is asked what: where it is asked (batch, round, tier) is context, so the same extension
        question put to the same candidate again in a later round is the same answer (as its call is)."""
        return (
            self.candidate.name,
            self.stage,
            self.variant,
            self.question_id,
            self.question,
            self.choices,
            self.answer_index,
            self.reference,
            self.slot,
        )


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
        unit_id=Ask.unit_id,
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
    lettered = [o for o in outcomes if o.value is not None and o.value.correct is not None]
    for letter in await ctx.judge(
        "interview: option letters",
        lettered,
        _letter,
        item_key=lambda o: o.key,
        judge="option_letter",
        role=None,
    ):
        if letter.value is not None and letter.value.score is not None:
            verdict[letter.key] = letter.value.score >= 1.0
    open_answers = [(o.key, o.value) for o in outcomes if o.value is not None and o.value.correct is None]
    if open_answers:
        judged = await judge_answers(
            ctx,
            open_answers,
            kind="with_reference",
            model=judge,
            role=role,
            rules=True,
            guards=True,
            description="interview: judging",
        )
        for j in judged:
            if j.value is not None and j.value.score is not None:
                verdict[j.key] = j.value.score >= 1.0
    return verdict


async def _letter(o: Outcome[Ask, InterviewAnswer]) -> Judgment:
    """A multiple-choice answer's verdict, from the letter it named (decided when the answer was stored)."""
    a = o.value
    assert a is not None and a.correct is not None
    return Judgment(
        verdict="correct" if a.correct else "incorrect",
        score=1.0 if a.correct else 0.0,
        reason=f"named {a.choice}, key {a.correct_letter}",
    )
