"""Knowledge paths on a context graph (JudgeAgent's sampling, also rageval's multi-hop questions).

A question's seed entity is linked to a graph entity — by name or alias first, else the entity whose name
embedding is nearest, if at least `LINK_THRESHOLD` cosine-similar; never an arbitrary fallback node (an
unlinkable seed gives no path and the caller counts it). The path starts at that entity and its chunk most
relevant to the question; each hop moves to a neighbour not yet visited, drawn with the run's generator
from the `top_k` neighbours whose names are most similar to the current entity's, and takes that
entity's chunk most relevant to the previous chunk. Every step records what it was drawn from.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from proctor.graph.model import ContextGraph, Entity

LINK_THRESHOLD = 0.8  # cosine between a question's entity and a graph entity's name (unit vectors)
TOP_K = 5


@dataclass(frozen=True)
class PathStep:
    entity_id: str
    entity: str
    chunk_id: str
    drawn_from: tuple[str, ...]  # the candidate entity ids of this hop (empty for the start)


@dataclass(frozen=True)
class KnowledgePath:
    steps: tuple[PathStep, ...]
    stopped: str  # "hops" (all hops made) or "dead_end" (no unvisited neighbour left)

    @property
    def chunk_ids(self) -> list[str]:
        return [s.chunk_id for s in self.steps]


class PathSampler:
    """Embeds entity names and chunk texts once; then links names and samples paths."""

    def __init__(
        self,
        graph: ContextGraph,
        embedder: Any,
        chunk_texts: Mapping[str, str],
        *,
        top_k: int = TOP_K,
        link_threshold: float = LINK_THRESHOLD,
    ) -> None:
        self.graph = graph
        self.embedder = embedder
        self.top_k = top_k
        self.link_threshold = link_threshold
        self._ids = list(graph.entities)
        self._row = {e: i for i, e in enumerate(self._ids)}
        names = [graph.entities[e].name for e in self._ids]
        self._names = np.asarray(embedder.embed(names)) if names else np.zeros((0, 1))
        chunk_ids = sorted({c for e in graph.entities.values() for c in e.chunk_ids})
        self._chunk_row = {c: i for i, c in enumerate(chunk_ids)}
        texts = [chunk_texts[c] for c in chunk_ids]
        self._chunks = np.asarray(embedder.embed(texts)) if texts else np.zeros((0, 1))

    def link(self, name: str) -> Entity | None:
        """The graph entity a name denotes: exact name or alias, else the nearest above the threshold."""
        found = self.graph.find(name)
        if found is not None or not self._ids:
            return found
        sims = self._names @ np.asarray(self.embedder.embed([name]))[0]
        best = int(np.argmax(sims))
        return self.graph.entities[self._ids[best]] if sims[best] >= self.link_threshold else None

    def _best_chunk(self, entity: Entity, target: np.ndarray) -> str:
        rows = [self._chunk_row[c] for c in entity.chunk_ids]
        sims = self._chunks[rows] @ target
        return entity.chunk_ids[int(np.argmax(sims))]  # first of equals: chunk_ids are in corpus order

    def sample(self, seed: Entity, question: str, hops: int, rng: np.random.Generator) -> KnowledgePath:
        """A path of up to `hops` moves from `seed` (see the module docstring)."""
        q = np.asarray(self.embedder.embed([question]))[0]
        chunk = self._best_chunk(seed, q)
        steps = [PathStep(seed.entity_id, seed.name, chunk, ())]
        visited = {seed.entity_id}
        current = seed.entity_id
        for _ in range(hops):
            options = [n for n in self.graph.neighbours(current) if n not in visited]
            if not options:
                return KnowledgePath(tuple(steps), "dead_end")
            here = self._names[self._row[current]]
            sims = np.array([self._names[self._row[n]] @ here for n in options])
            # Most similar first; equal similarity keeps the sorted-id order (stable), so draws reproduce.
            top = [options[i] for i in np.argsort(-sims, kind="stable")[: self.top_k]]
            current = top[int(rng.integers(len(top)))]
            entity = self.graph.entities[current]
            chunk = self._best_chunk(entity, self._chunks[self._chunk_row[chunk]])
            steps.append(PathStep(current, entity.name, chunk, tuple(top)))
            visited.add(current)
        return KnowledgePath(tuple(steps), "hops")
