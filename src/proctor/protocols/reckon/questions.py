"""Step 3: one probing question per cluster, with the cluster's short name ("center") and question type.

The question ends with an invitation to say more, so an answer can cover units the question did not
name outright. Follow-up rounds ask about units an earlier answer left out, more directly.
"""

from __future__ import annotations

import re
from typing import Any

from proctor.errors import ModelCallError
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.base import RunContext, work_key
from proctor.protocols.reckon.config import Config

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


def question_key(ctx: RunContext, round_no: int, unit_ids: list[str]) -> str:
    examiner = ctx.role("examiner")
    return work_key(
        "rq",
        round_no,
        sorted(unit_ids),
        prompt_version(PROMPT),
        examiner.provider.identity(),
        ctx.config.seed,
    )


async def generate_questions(
    ctx: RunContext,
    cfg: Config,
    round_no: int,
    clusters: dict[str, list[dict[str, Any]]],
) -> None:
    """`clusters` maps question key -> the cluster's units; writes `reckon_question` items."""
    examiner = ctx.role("examiner")
    version = prompt_version(PROMPT)

    def make(key: str, units: list[dict[str, Any]]) -> Any:
        async def fn() -> None:
            messages = render_messages(
                PROMPT,
                units=[{"keyword": u["keyword"], "description": u["description"]} for u in units],
                followup=round_no > 1,
                invitation=INVITATION,
            )
            c = await examiner.generate(
                messages,
                json_schema=QUESTION_SCHEMA,
                temperature=0.0,
                seed=ctx.config.seed + round_no,
                max_tokens=cfg.question_max_tokens,
            )
            ctx.store.put_item(
                key,
                "reckon_question",
                {
                    "question_id": key,
                    "round": round_no,
                    "center": " ".join(str(c.parsed["center"]).split())[:120] or "(unnamed)",
                    "question_type": c.parsed["question_type"],
                    "question": with_invitation(str(c.parsed["question"])),
                    "unit_ids": [u["unit_id"] for u in units],
                    "prompt_version": version,
                    "generator": examiner.spec,
                },
            )

        return fn

    def on_error(key: str, e: ModelCallError) -> None:
        units = clusters[key]
        ctx.store.put_failed(
            key,
            "reckon_question",
            {"question_id": key, "round": round_no, "unit_ids": [u["unit_id"] for u in units]},
            e,
        )

    await ctx.run_items(
        f"reckon round {round_no}: questions",
        ((k, ROLE, make(k, units)) for k, units in clusters.items()),
        is_done=ctx.store.is_settled,
        on_error=on_error,
    )
