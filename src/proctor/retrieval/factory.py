"""`make_retriever`: a retriever from its config name, with errors a user can act on."""

from __future__ import annotations

from collections.abc import Iterable

from proctor.corpus.types import Chunk
from proctor.errors import UserError
from proctor.retrieval.base import ClosedBookRetriever, Retriever
from proctor.retrieval.bm25 import BM25Retriever
from proctor.retrieval.dense import DenseRetriever, Embedder
from proctor.retrieval.hybrid import HybridRetriever
from proctor.retrieval.oracle import OracleRetriever

RETRIEVER_KINDS: tuple[str, ...] = ("closed_book", "bm25", "dense", "hybrid", "oracle")


def make_retriever(kind: str, chunks: Iterable[Chunk], *, embedder: Embedder | None = None) -> Retriever:
    """Build the named retriever over `chunks`; "hybrid" fuses BM25 and dense with RRF."""
    name = kind.strip().lower().replace("-", "_")
    if name not in RETRIEVER_KINDS:
        raise UserError(
            f"Unknown retriever kind '{kind}'. Valid kinds: {', '.join(RETRIEVER_KINDS)}. "
            "Set the retriever field in your config to one of them."
        )
    chunk_list = list(chunks)
    if name in ("dense", "hybrid") and embedder is None:
        raise UserError(
            f"Retriever '{name}' needs an embedding model, but none is configured. Configure the `embedder` "
            "model role in your config, or use retriever 'bm25' (no embeddings needed)."
        )
    if name == "closed_book":
        return ClosedBookRetriever()
    if name == "bm25":
        return BM25Retriever(chunk_list)
    if name == "oracle":
        return OracleRetriever(chunk_list)
    assert embedder is not None
    dense = DenseRetriever(chunk_list, embedder)
    if name == "dense":
        return dense
    return HybridRetriever([BM25Retriever(chunk_list), dense])
