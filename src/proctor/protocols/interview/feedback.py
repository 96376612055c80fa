"""Stage 3, feedback: per batch the examiner reviews everything the candidate was asked (base and
extension questions, the correct answers, the candidate's answers) and writes structured feedback —
knowledge flaws, capability flaws, overall performance, suggestions. The direct-evaluation baseline
writes the same fields from the base questions and answers alone, with no references and no interview."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import ClassVar

from proctor.kit.context import RunContext
from proctor.kit.steps import Outcome, Payload
from proctor.prompts import render_messages
from proctor.protocols.interview.config import Config
from proctor.protocols.interview.extension import Interview

FEEDBACK_PROMPT = "interview/feedback"
DIRECT_PROMPT = "interview/direct_feedback"
FIELDS = ("flaws_knowledge", "flaws_capability", "comprehensive_performance", "suggestions")
SCHEMA = {
    "type": "object",
    "properties": {f: {"type": "string"} for f in FIELDS},
    "required": list(FIELDS),
}


class Feedback(Payload):
    KIND: ClassVar[str] = "interview_feedback"
    variant: str
    candidate: str
    batch: int
    flaws_knowledge: str
    flaws_capability: str
    comprehensive_performance: str
    suggestions: str


def _shown(variant: str, iv: Interview) -> list[dict[str, str | None]]:
    """What the examiner sees: direct — base questions and answers; otherwise every answered question
    with its correct answer (no_extension has only the base ones)."""
    rows = [t for t in iv.tested if t.answer is not None and (variant != "direct" or t.stage == "base")]
    return [
        {
            "question": t.question,
            "reference": None if variant == "direct" else t.reference,
            "answer": t.answer,
            "difficulty": t.difficulty,
        }
        for t in rows
    ]


async def write_feedback(
    ctx: RunContext[Config], variant: str, interviews: Sequence[Interview]
) -> list[Outcome[Interview, Feedback]]:
    examiner = ctx.role("examiner")
    prompt = DIRECT_PROMPT if variant == "direct" else FEEDBACK_PROMPT

    async def write(iv: Interview) -> Feedback:
        reply = await examiner.generate(
            render_messages(prompt, items=_shown(variant, iv)),
            json_schema=SCHEMA,
            temperature=0.0,
            max_tokens=ctx.settings.feedback_max_tokens,
        )
        fields = {f: " ".join(str(reply.parsed.get(f) or "").split()) for f in FIELDS}
        return Feedback(variant=variant, candidate=iv.candidate, batch=iv.batch, **fields)

    outcomes = await ctx.map(
        f"interview ({variant}): feedback",
        [iv for iv in interviews if _shown(variant, iv)],
        write,
        # The content decides: two variants that showed the examiner the same answers share the feedback.
        unit_id=lambda iv: (prompt, _shown(variant, iv)),
        role="examiner",
        output=Feedback,
        context=lambda iv: {"variant": variant, "candidate": iv.candidate, "batch": iv.batch},
    )
    # A shared feedback was stored under the interview that wrote it first: name this one's.
    return [
        o
        if o.value is None
        else replace(
            o,
            value=o.value.model_copy(
                update={"variant": variant, "candidate": o.unit.candidate, "batch": o.unit.batch}
            ),
        )
        for o in outcomes
    ]
