"""Oracle retrieval: hands over the chunk(s) a question was written from — the upper bound for RAG."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from proctor.corpus.types import Chunk, ScoredChunk


class OracleRetriever:
    """Returns the gold chunks in the order given. Missing or unknown gold ids raise, because silently
    returning nothing would make the "oracle" score a closed-book score."""

    kind = "oracle"

    def __init__(self, chunks: Iterable[Chunk]) -> None:
        self._by_id: dict[str, Chunk] = {}
        for c in chunks:
            self._by_id.setdefault(c.chunk_id, c)

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]:
        if gold_ids is None:
            raise ValueError("OracleRetriever.retrieve needs gold_ids (the question's source chunk ids)")
        if isinstance(gold_ids, str):
            gold_ids = [gold_ids]
        missing = [g for g in gold_ids if g not in self._by_id]
        if missing:
            raise KeyError(f"gold chunk id(s) not in the retriever's chunks: {', '.join(missing[:5])}")
        unique = list(dict.fromkeys(gold_ids))
        return [ScoredChunk(self._by_id[g], 1.0) for g in unique[: max(k, 0)]]
