"""Step 4: the systems under test (plain LLM or RAG pipeline from the core) answer the questions.

RECKON's cluster questions ask for several facts at once, so candidates answer them with RECKON's own
answer prompt and reply budget (`reckon.answer_max_tokens`); the per-unit baseline uses the core
`Candidate.answer` with the candidate's configured budget, exactly as the qa protocol does.
"""

from __future__ import annotations

from typing import Any

from proctor.candidates import Candidate
from proctor.config import CandidateConfig
from proctor.prompts import render_messages
from proctor.protocols.base import RunContext
from proctor.retrieval import make_retriever

PROMPT = "reckon/answer"


def build_candidates(
    ctx: RunContext, retrievers: dict[str, Any], max_tokens: int | None = None
) -> list[tuple[CandidateConfig, Candidate]]:
    """One Candidate per configured candidate; `retrievers` (kind -> retriever) is filled as needed and
    shared, so RECKON and the baseline search the same indexes."""
    out = []
    for c in ctx.config.candidates:
        retriever = None
        if c.retriever != "closed_book":
            if c.retriever not in retrievers:
                needs_embedder = c.retriever in ("dense", "hybrid")
                retrievers[c.retriever] = make_retriever(
                    c.retriever, ctx.corpus.chunks, embedder=ctx.embedder if needs_embedder else None
                )
            retriever = retrievers[c.retriever]
        out.append(
            (
                c,
                Candidate(
                    c.name,
                    ctx.models[c.model],
                    retriever=retriever,
                    k=c.k,
                    temperature=c.temperature,
                    max_tokens=max_tokens or c.max_tokens,
                    seed=ctx.config.seed,
                ),
            )
        )
    return out


def candidate_identity(ctx: RunContext, ccfg: CandidateConfig) -> list[Any]:
    """What makes a candidate's answers differ (part of answer keys)."""
    return [ccfg.model_dump(), ctx.models[ccfg.model].provider.identity()]


async def answer_cluster_question(cand: Candidate, question: str, gold_ids: list[str]) -> dict[str, Any]:
    """The candidate's reply to a cluster question (with retrieved passages for a RAG candidate)."""
    context = cand.context_for(question, gold_ids)
    messages = render_messages(PROMPT, question=question, context=[c.text for c in context])
    reply = await cand.reply(messages)
    return {"answer": reply["content"], "retrieved_ids": [c.chunk_id for c in context]}
