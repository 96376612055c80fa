"""Hybrid retrieval by reciprocal-rank fusion: combines rankings without calibrating their scores."""

from __future__ import annotations

from collections.abc import Sequence

from proctor.corpus.types import Chunk, ScoredChunk
from proctor.retrieval.base import Retriever


class HybridRetriever:
    """RRF: score(chunk) = sum over retrievers of weight / (k_rrf + rank), rank starting at 1.

    Each retriever is asked for a deeper list (max(4k, 20)) so a chunk ranked modestly by both can win.
    Ties are broken by first appearance (retriever order, then rank), so results are deterministic.
    """

    kind = "hybrid"

    def __init__(
        self, retrievers: Sequence[Retriever], k_rrf: float = 60, weights: Sequence[float] | None = None
    ) -> None:
        if not retrievers:
            raise ValueError("HybridRetriever needs at least one retriever")
        if k_rrf < 0:
            raise ValueError(f"k_rrf must be >= 0, got {k_rrf}")
        if weights is not None and len(weights) != len(retrievers):
            raise ValueError(f"{len(weights)} weights for {len(retrievers)} retrievers")
        self.retrievers = list(retrievers)
        self.k_rrf = k_rrf
        self.weights = list(weights) if weights is not None else [1.0] * len(self.retrievers)

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]:
        if k <= 0:
            return []
        depth = max(k * 4, 20)
        fused: dict[str, float] = {}
        chunks: dict[str, Chunk] = {}
        for retriever, weight in zip(self.retrievers, self.weights, strict=True):
            for rank, hit in enumerate(retriever.retrieve(query, depth, gold_ids=gold_ids), start=1):
                cid = hit.chunk.chunk_id
                chunks.setdefault(cid, hit.chunk)
                fused[cid] = fused.get(cid, 0.0) + weight / (self.k_rrf + rank)
        order = sorted(fused, key=lambda cid: -fused[cid])  # stable: first appearance wins ties
        return [ScoredChunk(chunks[cid], fused[cid]) for cid in order[:k]]
