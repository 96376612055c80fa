"""The static benchmark score: each candidate answers each seed question as multiple choice once. The
conversation then opens with this exchange, and the contamination analysis compares the two scores."""

from __future__ import annotations

from typing import ClassVar

from proctor.candidates.multiple_choice import parse_letter
from proctor.constants import LETTERS
from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload
from proctor.models.types import Message
from proctor.prompts import render_messages
from proctor.protocols.kieval.candidates import KCandidate
from proctor.protocols.kieval.config import Config
from proctor.protocols.kieval.seeds import SeedQuestion


class MCAnswer(Payload):
    KIND: ClassVar[str] = "kieval_mc_answer"
    candidate: str
    question_id: str
    answer: str
    choice: str | None
    correct_letter: str
    correct: bool
    context_ids: list[str]


def mc_messages(q: SeedQuestion, context: list[str]) -> list[Message]:
    return render_messages(
        "kieval/candidate", question=q.question, choices=q.choices, letters=LETTERS, context=context
    )


async def answer_multiple_choice(
    ctx: RunContext[Config], cands: list[KCandidate], questions: list[SeedQuestion]
) -> list[Outcome[tuple[KCandidate, SeedQuestion], MCAnswer]]:
    async def answer(unit: tuple[KCandidate, SeedQuestion]) -> MCAnswer:
        cand, q = unit
        texts, ids = cand.context(q.question)
        reply = await cand.candidate.reply(mc_messages(q, texts))
        letter = parse_letter(reply["content"], q.choices)
        return MCAnswer(
            candidate=cand.cfg.name,
            question_id=q.question_id,
            answer=reply["content"],
            choice=letter,
            correct_letter=q.answer_letter,
            correct=letter == q.answer_letter,
            context_ids=ids,
        )

    return await ctx.map(
        "kieval: multiple-choice answers",
        [(c, q) for c in cands for q in questions],
        answer,
        unit_id=lambda u: (u[0].cfg.name, u[1]),
        role="candidate",
        output=MCAnswer,
        context=lambda u: {
            "candidate": u[0].cfg.name,
            "question_id": u[1].question_id,
            "correct_letter": u[1].answer_letter,
        },
    )
