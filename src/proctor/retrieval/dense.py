"""Dense retrieval: cosine similarity between embedded query and embedded chunks."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

import numpy as np

from proctor.corpus.types import Chunk, ScoredChunk
from proctor.retrieval.base import top_k_indices


class Embedder(Protocol):
    """Anything that maps texts to a (len(texts), dim) float32 array with L2-normalised rows."""

    def embed(self, texts: list[str]) -> np.ndarray: ...


def _normalise(m: np.ndarray) -> np.ndarray:
    """Re-normalise rows: cheap insurance against an embedder that forgets to; zero rows stay zero."""
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    return m / np.where(norms > 0, norms, 1.0)


class DenseRetriever:
    """Embeds all chunks once (in batches) and ranks by dot product, i.e. cosine similarity."""

    kind = "dense"

    def __init__(self, chunks: Iterable[Chunk], embedder: Embedder, *, batch_size: int = 64) -> None:
        self.chunks: list[Chunk] = list(chunks)
        self.embedder = embedder
        blocks = []
        for start in range(0, len(self.chunks), batch_size):
            texts = [c.text for c in self.chunks[start : start + batch_size]]
            block = np.asarray(embedder.embed(texts))
            if block.ndim != 2 or block.shape[0] != len(texts):
                raise ValueError(
                    f"embedder returned shape {block.shape} for {len(texts)} texts; "
                    f"expected ({len(texts)}, dim)"
                )
            blocks.append(block)
        self.matrix: np.ndarray = (
            _normalise(np.concatenate(blocks)) if blocks else np.zeros((0, 0), dtype=np.float32)
        )

    def scores(self, query: str) -> np.ndarray:
        """Cosine similarity of every chunk to `query`."""
        if not self.chunks:
            return np.zeros(0, dtype=np.float32)
        q = _normalise(np.asarray(self.embedder.embed([query])).reshape(1, -1))[0]
        if q.shape[0] != self.matrix.shape[1]:
            raise ValueError(f"query embedding has dim {q.shape[0]}, chunk embeddings {self.matrix.shape[1]}")
        return self.matrix @ q

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]:
        scores = self.scores(query)
        return [ScoredChunk(self.chunks[i], float(scores[i])) for i in top_k_indices(scores, k)]
