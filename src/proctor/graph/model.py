"""The context graph of a corpus: one node per entity (with its aliases, chunks and documents), an edge
between two entities that share a chunk (strong, weight = chunks shared) or only a document (weak).
networkx holds the structure for the algorithms (neighbours, components, paths)."""

from __future__ import annotations

import itertools
from collections import Counter
from dataclasses import dataclass
from typing import Literal

import networkx as nx
from pydantic import BaseModel

from proctor.graph.names import fold

EdgeKind = Literal["strong", "weak"]


@dataclass(frozen=True)
class Entity:
    entity_id: str
    name: str
    aliases: tuple[str, ...]  # every surface form seen, the display name included
    mentions: tuple[tuple[str, str], ...]  # (chunk id, document id), in corpus order

    @property
    def chunk_ids(self) -> tuple[str, ...]:
        return tuple(c for c, _ in self.mentions)

    @property
    def doc_ids(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(d for _, d in self.mentions))


@dataclass(frozen=True)
class Edge:
    a: str
    b: str
    kind: EdgeKind
    weight: int


class GraphStats(BaseModel):
    nodes: int
    strong_edges: int
    weak_edges: int
    components: int
    largest_component: int
    degree_histogram: dict[int, int]
    hubs: list[tuple[str, int]]  # (entity name, degree), the ten largest


def derive_edges(entities: list[Entity]) -> list[Edge]:
    """Strong edges between entities mentioned in the same chunk, weak ones between entities of the same
    document that share no chunk; in a deterministic order."""
    by_chunk: dict[str, list[str]] = {}
    by_doc: dict[str, list[str]] = {}
    for e in entities:
        for c in e.chunk_ids:
            by_chunk.setdefault(c, []).append(e.entity_id)
        for d in e.doc_ids:
            by_doc.setdefault(d, []).append(e.entity_id)
    strong: Counter[tuple[str, str]] = Counter()
    for ids in by_chunk.values():
        for a, b in itertools.combinations(sorted(set(ids)), 2):
            strong[(a, b)] += 1
    weak: Counter[tuple[str, str]] = Counter()
    for ids in by_doc.values():
        for a, b in itertools.combinations(sorted(set(ids)), 2):
            if (a, b) not in strong:
                weak[(a, b)] += 1
    return [Edge(a, b, "strong", n) for (a, b), n in sorted(strong.items())] + [
        Edge(a, b, "weak", n) for (a, b), n in sorted(weak.items())
    ]


class ContextGraph:
    def __init__(self, key: str, entities: list[Entity], edges: list[Edge]) -> None:
        self.key = key
        self.entities = {e.entity_id: e for e in entities}
        self._by_alias = {fold(a): e.entity_id for e in entities for a in e.aliases}
        self.graph = nx.Graph()
        self.graph.add_nodes_from(self.entities)
        for edge in edges:
            self.graph.add_edge(edge.a, edge.b, kind=edge.kind, weight=edge.weight)

    @property
    def edges(self) -> list[Edge]:
        return [Edge(a, b, d["kind"], d["weight"]) for a, b, d in self.graph.edges(data=True)]

    def find(self, name: str) -> Entity | None:
        """The entity a name or alias denotes (case, spacing and a leading article ignored), or None."""
        found = self._by_alias.get(fold(name))
        return None if found is None else self.entities[found]

    def neighbours(self, entity_id: str, kind: EdgeKind | None = None) -> list[str]:
        """Adjacent entity ids (of one edge kind, or any), sorted for determinism."""
        adj = self.graph.adj[entity_id]
        return sorted(n for n, d in adj.items() if kind is None or d["kind"] == kind)

    def stats(self) -> GraphStats:
        degrees = dict(self.graph.degree())
        components = [len(c) for c in nx.connected_components(self.graph)]
        kinds = Counter(d["kind"] for _, _, d in self.graph.edges(data=True))
        hubs = sorted(degrees.items(), key=lambda kv: (-kv[1], self.entities[kv[0]].name))[:10]
        return GraphStats(
            nodes=self.graph.number_of_nodes(),
            strong_edges=kinds["strong"],
            weak_edges=kinds["weak"],
            components=len(components),
            largest_component=max(components, default=0),
            degree_histogram=dict(sorted(Counter(degrees.values()).items())),
            hubs=[(self.entities[e].name, d) for e, d in hubs],
        )
