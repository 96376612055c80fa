"""Step 3: one probing question per cluster, with the cluster's short name ("center") and question type.

The question ends with an invitation to say more, so an answer can cover units the question did not
name outright. Follow-up rounds ask about units an earlier answer left out, more directly.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from proctor.prompts import prompt_version, render_messages
from proctor.protocols.context import RunContext, work_key
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.units import KnowledgeUnit
from proctor.protocols.steps import Payload

QUESTION_TYPES = ("who", "what", "where", "when", "how", "why", "other")
INVITATION = "Then tell me what else you know about these."
ROLE = "reckon:question"
PROMPT = "reckon/question"

QUESTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "center": {"type": "string", "description": "a short name for the cluster's common theme"},
        "question_type": {"type": "string", "enum": list(QUESTION_TYPES)},
        "question": {"type": "string", "minLength": 8},
    },
    "required": ["center", "question_type", "question"],
}


def with_invitation(question: str) -> str:
    """The question, ending with the invitation to say more (added when the examiner left it out)."""
    q = " ".join(question.split())
    if re.sub(r"\W+", " ", INVITATION.lower()).strip() in re.sub(r"\W+", " ", q.lower()):
        return q
    if q and q[-1] not in ".?!":
        q += "?"
    return f"{q} {INVITATION}"


def question_key(ctx: RunContext[Config], round_no: int, unit_ids: list[str]) -> str:
    examiner = ctx.role("examiner")
    return work_key(
        "rq",
        round_no,
        sorted(unit_ids),
        prompt_version(PROMPT),
        examiner.provider.identity(),
        ctx.config.seed,
    )


class ClusterQuestion(Payload):
    """The examiner's probing question for one cluster of units."""

    KIND: ClassVar[str] = "reckon_question"
    question_id: str
    round: int
    center: str
    question_type: str
    question: str
    unit_ids: list[str]
    prompt_version: str
    generator: str


async def generate_questions(
    ctx: RunContext[Config], round_no: int, clusters: dict[str, list[KnowledgeUnit]]
) -> dict[str, ClusterQuestion]:
    """`clusters` maps question key -> the cluster's units; returns the questions written, by key."""
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)

    async def write(cluster: tuple[str, list[KnowledgeUnit]]) -> ClusterQuestion:
        key, units = cluster
        messages = render_messages(
            PROMPT,
            units=[{"keyword": u.keyword, "description": u.description} for u in units],
            followup=round_no > 1,
            invitation=INVITATION,
        )
        c = await examiner.generate(
            messages,
            json_schema=QUESTION_SCHEMA,
            temperature=0.0,
            seed=ctx.config.seed + round_no,
            max_tokens=ctx.settings.question_max_tokens,
        )
        return ClusterQuestion(
            question_id=key,
            round=round_no,
            center=" ".join(str(c.parsed["center"]).split())[:120] or "(unnamed)",
            question_type=c.parsed["question_type"],
            question=with_invitation(str(c.parsed["question"])),
            unit_ids=[u.unit_id for u in units],
            prompt_version=version,
            generator=examiner.spec,
        )

    outcomes = await ctx.map(
        f"reckon round {round_no}: questions",
        list(clusters.items()),
        write,
        key=lambda c: c[0],
        role=ROLE,
        output=ClusterQuestion,
        context=lambda c: {"question_id": c[0], "round": round_no, "unit_ids": [u.unit_id for u in c[1]]},
    )
    return {o.key: o.value for o in outcomes if o.value is not None}
