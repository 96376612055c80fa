"""Lexical retrieval with BM25 (bm25s): strong on rare terms, names and identifiers."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from proctor.corpus.types import Chunk, ScoredChunk
from proctor.retrieval.base import top_k_indices


class BM25Retriever:
    """BM25 over chunk texts. English stopwords, no stemming (keeps the dependency set small).

    Chunks that share no term with the query are never returned, so fewer than `k` results is normal.
    """

    kind = "bm25"

    def __init__(
        self, chunks: Iterable[Chunk], *, k1: float = 1.5, b: float = 0.75, stopwords: str = "en"
    ) -> None:
        import bm25s  # imported lazily: it costs ~1 s and most commands never retrieve

        self.chunks: list[Chunk] = list(chunks)
        self._stopwords = stopwords
        self._index: bm25s.BM25 | None = None
        if self.chunks:
            tokens = self._tokenize([c.text for c in self.chunks])
            self._index = bm25s.BM25(k1=k1, b=b)
            self._index.index(tokens, show_progress=False)

    def _tokenize(self, texts: list[str]) -> list[list[str]]:
        import bm25s

        return bm25s.tokenize(texts, stopwords=self._stopwords, return_ids=False, show_progress=False)

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every chunk for `query` (zeros if no query term is in the index)."""
        if self._index is None:
            return np.zeros(0, dtype=np.float32)
        vocab = self._index.vocab_dict
        terms = [t for t in self._tokenize([query])[0] if t and t in vocab]
        if not terms:
            return np.zeros(len(self.chunks), dtype=np.float32)
        return np.asarray(self._index.get_scores(terms), dtype=np.float32)

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]:
        scores = self.scores(query)
        return [
            ScoredChunk(self.chunks[i], float(scores[i])) for i in top_k_indices(scores, k) if scores[i] > 0
        ]
