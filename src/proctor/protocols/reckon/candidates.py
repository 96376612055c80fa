"""Step 4: the systems under test (plain LLM or RAG pipeline from the core) answer the questions.

RECKON's cluster questions ask for several facts at once, so candidates answer them with RECKON's own
answer prompt and reply budget (`reckon.answer_max_tokens`); the per-unit baseline uses the core
`SystemUnderTest.answer` with the candidate's configured budget, exactly as the qa protocol does.
"""

from __future__ import annotations

from proctor.candidates import SystemUnderTest
from proctor.config import CandidateConfig
from proctor.kit.context import RunContext
from proctor.prompts import render_messages
from proctor.protocols.reckon.config import Config

PROMPT = "reckon/answer"


def build_candidates(
    ctx: RunContext[Config], max_tokens: int | None = None
) -> list[tuple[CandidateConfig, SystemUnderTest]]:
    """One SystemUnderTest per configured candidate; retrievers are the run's shared ones, so RECKON and the
    baseline search the same indexes."""
    return [(c, ctx.candidate(c, max_tokens=max_tokens)) for c in ctx.config.candidates]


async def answer_cluster_question(
    cand: SystemUnderTest, question: str, gold_ids: list[str]
) -> tuple[str, list[str]]:
    """The candidate's reply to a cluster question, and the passages a RAG candidate retrieved for it."""
    context = cand.context_for(question, gold_ids)
    messages = render_messages(PROMPT, question=question, context=[c.text for c in context])
    reply = await cand.reply(messages)
    return reply["content"], [c.chunk_id for c in context]
