"""One topic model of the corpus: k-means on the chunk embeddings, each topic named by its top TF-IDF
terms. Items of every member link to topics through their source chunk ids."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel
from sklearn.feature_extraction.text import TfidfVectorizer

from proctor.clustering import cluster
from proctor.corpus import Corpus
from proctor.embeddings import Embedder


class Topic(BaseModel):
    """A topic: its id (`t1`, `t2`, ... in order of first chunk), name, top terms and chunks."""

    topic_id: str
    name: str
    terms: list[str]
    chunk_ids: list[str]
    sources: list[str]


class TopicModel(BaseModel):
    k: int
    k_rule: str
    topics: list[Topic]

    def of_chunks(self) -> dict[str, str]:
        """chunk id -> topic id."""
        return {cid: t.topic_id for t in self.topics for cid in t.chunk_ids}


def default_k(n_chunks: int) -> int:
    """round(sqrt(chunks / 2)), at least 1 and at most the number of chunks."""
    return max(1, min(n_chunks, round(math.sqrt(n_chunks / 2))))


def top_terms(texts: Sequence[str], groups: Sequence[Sequence[int]], n_terms: int) -> list[list[str]]:
    """Per group of texts, the terms with the highest mean TF-IDF weight (English stop words removed;
    words of 3+ letters). Ties break alphabetically, so names are deterministic."""
    vec = TfidfVectorizer(stop_words="english", token_pattern=r"(?u)\b[^\W\d_]{3,}\b", sublinear_tf=True)
    try:
        weights = vec.fit_transform(texts)
    except ValueError:  # no term at all (e.g. only numbers)
        return [[] for _ in groups]
    vocab = np.asarray(vec.get_feature_names_out())
    out = []
    for g in groups:
        mean = np.asarray(weights[list(g)].mean(axis=0)).ravel()
        order = sorted(range(len(vocab)), key=lambda j: (-mean[j], vocab[j]))
        out.append([str(vocab[j]) for j in order[:n_terms] if mean[j] > 0])
    return out


def build_topics(corpus: Corpus, embedder: Embedder, *, k: int | None, n_terms: int, seed: int) -> TopicModel:
    chunks = corpus.chunks
    n = len(chunks)
    if n == 0:
        return TopicModel(k=0, k_rule="no chunks", topics=[])
    k_used = min(k, n) if k is not None else default_k(n)
    rule = f"k = {k} (topics.k)" if k is not None else f"k = round(sqrt({n} chunks / 2)) = {k_used}"
    vectors = embedder.embed([c.text for c in chunks])
    groups = cluster(vectors, target=n / k_used, cap=n, method="kmeans", seed=seed)
    terms = top_terms([c.text for c in chunks], groups, n_terms)
    topics = []
    for i, (g, words) in enumerate(zip(groups, terms, strict=True), start=1):
        topics.append(
            Topic(
                topic_id=f"t{i}",
                name=", ".join(words) or f"topic {i}",
                terms=words,
                chunk_ids=[chunks[j].chunk_id for j in g],
                sources=sorted({str(chunks[j].source) for j in g}),
            )
        )
    return TopicModel(k=len(topics), k_rule=rule, topics=topics)
