"""Entity names to graph nodes: fold case and whitespace, then merge near-duplicate names whose
embeddings are at least `MERGE_THRESHOLD` cosine-similar ("Orrinsford Institute" / "the Orrinsford
Institute"). The threshold is high on purpose: merging two different entities corrupts every path through
them, while an unmerged alias only splits a node."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import numpy as np

MERGE_THRESHOLD = 0.92  # cosine, on unit-normalised sentence embeddings (MiniLM: aliases 0.93-0.99)
_EDGE_PUNCT = re.compile(r"^[\W_]+|[\W_]+$")
_ARTICLE = re.compile(r"^(the|a|an)\s+")


def fold(name: str) -> str:
    """The name's key: case-folded, whitespace collapsed, edge punctuation and a leading article dropped."""
    key = " ".join(name.casefold().split())
    key = _EDGE_PUNCT.sub("", key)
    return _ARTICLE.sub("", key)


def merge_groups(
    keys: Sequence[str], vectors: np.ndarray | None, threshold: float = MERGE_THRESHOLD
) -> list[int]:
    """For each folded key, the index of the key it merges into (itself when none): union-find over pairs
    at or above `threshold`, each group represented by its first key in `keys` order (deterministic)."""
    parent = list(range(len(keys)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    if vectors is not None and len(keys) > 1:
        sims = vectors @ vectors.T
        for i, j in zip(*np.nonzero(np.triu(sims >= threshold, k=1)), strict=True):
            a, b = root(int(i)), root(int(j))
            if a != b:
                parent[max(a, b)] = min(a, b)
    return [root(i) for i in range(len(keys))]


def display_name(surface_forms: Counter[str]) -> str:
    """The most frequent way the corpus writes an entity (ties: the first in sorted order)."""
    return sorted(surface_forms.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
