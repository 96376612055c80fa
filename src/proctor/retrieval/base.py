"""The retriever contract: one call, best-first scored chunks, uniform across all strategies."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from proctor.corpus.types import ScoredChunk


@runtime_checkable
class Retriever(Protocol):
    """`retrieve` returns at most `k` chunks, best first.

    `gold_ids` are the ids of the chunk(s) a question was generated from. Every retriever accepts them so
    callers can treat all retrievers alike; only `OracleRetriever` uses them.
    """

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]: ...


def top_k_indices(scores: np.ndarray, k: int) -> np.ndarray:
    """Indices of the `k` highest scores, best first, ties broken by lower index (deterministic).

    argpartition keeps it O(n) for large corpora; all entries tied with the k-th score are kept as
    candidates so the tie-break does not depend on the partition algorithm.
    """
    n = scores.shape[0]
    if k <= 0 or n == 0:
        return np.empty(0, dtype=np.int64)
    if k < n:
        kth = np.partition(scores, n - k)[n - k]
        candidates = np.flatnonzero(scores >= kth)
    else:
        candidates = np.arange(n)
    order = np.lexsort((candidates, -scores[candidates]))
    return candidates[order[:k]]


class ClosedBookRetriever:
    """No retrieval: the candidate answers from what it already knows (the baseline)."""

    kind = "closed_book"

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]:
        return []
