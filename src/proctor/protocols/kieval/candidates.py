"""The systems under test and the evaluators of a KIEval run."""

from __future__ import annotations

from dataclasses import dataclass

from proctor.candidates import SystemUnderTest
from proctor.config import CandidateConfig
from proctor.errors import UserError
from proctor.kit.context import RunContext
from proctor.protocols.kieval.config import Config


@dataclass
class KCandidate:
    cfg: CandidateConfig
    candidate: SystemUnderTest
    chunks: dict[str, str]  # chunk id -> text, to rebuild a RAG candidate's earlier turns on resume

    def texts(self, ids: list[str]) -> list[str]:
        return [self.chunks[i] for i in ids if i in self.chunks]

    def context(self, query: str) -> tuple[list[str], list[str]]:
        """Retrieved passages (texts, chunk ids) for a query; empty for a closed-book candidate."""
        chunks = self.candidate.context_for(query)
        return [c.text for c in chunks], [c.chunk_id for c in chunks]


def build_candidates(ctx: RunContext[Config]) -> list[KCandidate]:
    if not ctx.config.candidates:
        raise UserError(
            "candidates: the kieval protocol needs at least one candidate (the system under test). Add "
            "`candidates: [{name: my-model, model: <a key of models>}]` to the config."
        )
    out = []
    chunks: dict[str, str] = {}
    for i, c in enumerate(ctx.config.candidates):
        if c.retriever == "oracle":
            raise UserError(
                f"candidates[{i}].retriever: 'oracle' needs gold passages, which benchmark questions do not "
                f"have. Use closed_book, bm25, dense or hybrid."
            )
        cand = ctx.candidate(c, max_tokens=ctx.settings.candidate_max_tokens)
        if cand.retriever is not None and not chunks:
            chunks.update((ch.chunk_id, ch.text) for ch in ctx.corpus.chunks)
        out.append(KCandidate(c, cand, chunks))
    return out


def evaluator_names(ctx: RunContext[Config]) -> list[str]:
    """`kieval.evaluators` (a panel), else the model of the `evaluator` role."""
    evaluators = ctx.settings.evaluators
    if evaluators is None:
        return [ctx.role_model_name("evaluator")]
    for i, name in enumerate(evaluators):
        if name not in ctx.models:
            raise UserError(
                f"kieval.evaluators[{i}] refers to model '{name}', which is not a key of `models` "
                f"{sorted(ctx.models)}. Use the names under `models:`."
            )
    return list(evaluators)
