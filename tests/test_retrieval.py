"""Retrievers: BM25, dense, hybrid fusion, oracle, closed book and the factory."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np
import pytest

from proctor.corpus.types import Chunk, ScoredChunk, content_id
from proctor.errors import UserError
from proctor.retrieval import (
    RETRIEVER_KINDS,
    BM25Retriever,
    ClosedBookRetriever,
    DenseRetriever,
    HybridRetriever,
    OracleRetriever,
    Retriever,
    make_retriever,
    top_k_indices,
)

TEXTS = [
    "The mitochondria is the powerhouse of the cell and produces ATP through respiration.",
    "Photosynthesis in chloroplasts converts sunlight, water and carbon dioxide into glucose.",
    "The Krebs cycle oxidises acetyl-CoA; it is also called the citric acid cycle.",
    "Ribosomes translate messenger RNA into proteins using transfer RNA adapters.",
    "The quokka is a small marsupial found on Rottnest Island near Perth.",
    "Osmosis moves water across a semipermeable membrane toward higher solute concentration.",
]


def _chunk(text: str, i: int = 0) -> Chunk:
    return Chunk(chunk_id=content_id(text, "c_"), doc_id="d_test", source=f"doc{i}.txt", text=text, index=i)


CHUNKS = [_chunk(t, i) for i, t in enumerate(TEXTS)]


class HashEmbedder:
    """Deterministic bag-of-words embedder: each word hashed (sha1) to one of `dim` buckets."""

    def __init__(self, dim: int = 512) -> None:
        self.dim = dim
        self.calls: list[int] = []

    def embed(self, texts: list[str]) -> np.ndarray:
        self.calls.append(len(texts))
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in re.findall(r"\w+", text.lower()):
                out[row, int(hashlib.sha1(word.encode()).hexdigest()[:8], 16) % self.dim] += 1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms > 0, norms, 1.0)


class FixedRetriever:
    """Returns a fixed ranking and records the depth it was asked for."""

    def __init__(self, ranking: list[Chunk]) -> None:
        self.ranking = ranking
        self.asked: list[tuple[int, Sequence[str] | None]] = []

    def retrieve(self, query: str, k: int, *, gold_ids: Sequence[str] | None = None) -> list[ScoredChunk]:
        self.asked.append((k, gold_ids))
        return [ScoredChunk(c, 1.0 / (i + 1)) for i, c in enumerate(self.ranking[:k])]


def _ids(hits: list[ScoredChunk]) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


def test_top_k_indices_best_first_with_deterministic_ties() -> None:
    scores = np.array([0.5, 0.9, 0.5, 0.1, 0.9, 0.5], dtype=np.float32)
    assert top_k_indices(scores, 3).tolist() == [1, 4, 0]
    assert top_k_indices(scores, 4).tolist() == [1, 4, 0, 2]
    assert top_k_indices(scores, 100).tolist() == [1, 4, 0, 2, 5, 3]
    assert top_k_indices(scores, 0).tolist() == []
    big = np.random.default_rng(0).random(10_000)
    assert top_k_indices(big, 10).tolist() == np.argsort(-big)[:10].tolist()


def test_bm25_finds_chunk_with_rare_words() -> None:
    r = BM25Retriever(CHUNKS)
    hits = r.retrieve("Where do quokka marsupials live?", k=3)
    assert hits[0].chunk is CHUNKS[4]
    assert all(hits[i].score >= hits[i + 1].score for i in range(len(hits) - 1))
    assert r.retrieve("citric acid", k=1)[0].chunk is CHUNKS[2]
    assert len(r.retrieve("water", k=10)) == 2  # only chunks that share a term
    assert r.retrieve("the of and", k=5) == []  # stopwords only
    assert r.retrieve("zebra unicorn", k=5) == []  # out of vocabulary
    assert BM25Retriever([]).retrieve("anything", k=3) == []


def test_dense_retriever_with_test_embedder() -> None:
    emb = HashEmbedder()
    r = DenseRetriever(CHUNKS, emb, batch_size=4)
    assert emb.calls == [4, 2]  # chunks embedded in batches, once
    hits = r.retrieve("ribosomes translate messenger rna into proteins", k=2)
    assert hits[0].chunk is CHUNKS[3]
    assert len(hits) == 2 and hits[0].score > hits[1].score
    assert hits[0].score == pytest.approx(
        float(r.matrix[3] @ emb.embed(["ribosomes translate messenger rna into proteins"])[0])
    )
    assert len(r.retrieve("cell", k=100)) == len(CHUNKS)
    assert r.retrieve("cell", k=0) == []
    assert DenseRetriever([], emb).retrieve("x", k=3) == []


def test_dense_rejects_bad_embedder_output() -> None:
    class Broken:
        def embed(self, texts: list[str]) -> np.ndarray:
            return np.zeros((len(texts) + 1, 8), dtype=np.float32)

    with pytest.raises(ValueError, match="shape"):
        DenseRetriever(CHUNKS, Broken())


def test_hybrid_reciprocal_rank_fusion_order() -> None:
    c1, c2, c3, c4 = CHUNKS[:4]
    a = FixedRetriever([c1, c2, c3])
    b = FixedRetriever([c3, c2, c4])
    hybrid = HybridRetriever([a, b], k_rrf=60)
    hits = hybrid.retrieve("q", k=3, gold_ids=["g"])
    # c3: 1/63 + 1/61 = 0.032266 > c2: 2/62 = 0.032258 > c1: 1/61 > c4: 1/63
    assert _ids(hits) == [c3.chunk_id, c2.chunk_id, c1.chunk_id]
    assert hits[0].score == pytest.approx(1 / 63 + 1 / 61)
    assert hits[1].score == pytest.approx(2 / 62)
    assert a.asked == [(20, ["g"])] and b.asked == [(20, ["g"])]  # deeper lists; gold_ids passed through
    hybrid.retrieve("q", k=10)
    assert a.asked[-1][0] == 40
    # with k_rrf=0 rank 1 dominates: c1 (1/1) and c3 (1/3 + 1/1) beat c2 (1/2 + 1/2)
    assert _ids(HybridRetriever([a, b], k_rrf=0).retrieve("q", k=4)) == [
        c3.chunk_id, c1.chunk_id, c2.chunk_id, c4.chunk_id,
    ]  # fmt: skip
    with pytest.raises(ValueError):
        HybridRetriever([])


def test_hybrid_over_real_retrievers() -> None:
    r = HybridRetriever([BM25Retriever(CHUNKS), DenseRetriever(CHUNKS, HashEmbedder())])
    hits = r.retrieve("quokka on Rottnest Island", k=3)
    assert hits[0].chunk is CHUNKS[4] and len(hits) == 3
    assert len(set(_ids(hits))) == 3


def test_oracle_returns_gold_chunks() -> None:
    r = OracleRetriever(CHUNKS)
    gold = [CHUNKS[2].chunk_id, CHUNKS[0].chunk_id, CHUNKS[2].chunk_id]
    hits = r.retrieve("anything", k=5, gold_ids=gold)
    assert _ids(hits) == [CHUNKS[2].chunk_id, CHUNKS[0].chunk_id]
    assert _ids(r.retrieve("anything", k=1, gold_ids=gold)) == [CHUNKS[2].chunk_id]
    with pytest.raises(ValueError, match="gold_ids"):
        r.retrieve("anything", k=3)
    with pytest.raises(KeyError):
        r.retrieve("anything", k=3, gold_ids=["c_unknown"])


def test_closed_book_returns_nothing() -> None:
    assert ClosedBookRetriever().retrieve("anything", k=5, gold_ids=[CHUNKS[0].chunk_id]) == []


def test_factory_builds_every_kind_and_all_accept_gold_ids() -> None:
    expected = {
        "closed_book": ClosedBookRetriever,
        "bm25": BM25Retriever,
        "dense": DenseRetriever,
        "hybrid": HybridRetriever,
        "oracle": OracleRetriever,
    }
    assert set(RETRIEVER_KINDS) == set(expected)
    gold = [CHUNKS[4].chunk_id]
    for kind, cls in expected.items():
        r = make_retriever(kind, CHUNKS, embedder=HashEmbedder())
        assert isinstance(r, cls) and isinstance(r, Retriever)
        hits = r.retrieve("quokka", 2, gold_ids=gold)  # uniform call for every kind
        if kind != "closed_book":
            assert hits[0].chunk is CHUNKS[4]
    assert isinstance(make_retriever("Closed-Book", CHUNKS), ClosedBookRetriever)


def test_factory_errors() -> None:
    with pytest.raises(UserError) as e:
        make_retriever("colbert", CHUNKS)
    assert "colbert" in str(e.value)
    assert all(kind in str(e.value) for kind in RETRIEVER_KINDS)
    for kind in ("dense", "hybrid"):
        with pytest.raises(UserError, match="embed"):
            make_retriever(kind, CHUNKS)
