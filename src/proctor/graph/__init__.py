"""The context graph of a corpus (entities, their chunks and documents, co-mention edges), built once per
corpus and extraction model and reused by every later run: the interview protocol's knowledge paths,
rageval's multi-hop questions, and the topics of the knowledge map."""

from proctor.graph.build import GraphBuild, assemble
from proctor.graph.model import ContextGraph, Edge, Entity, GraphStats, derive_edges
from proctor.graph.names import MERGE_THRESHOLD, fold, merge_groups
from proctor.graph.paths import LINK_THRESHOLD, KnowledgePath, PathSampler, PathStep
from proctor.graph.store import GraphStore

__all__ = [
    "LINK_THRESHOLD",
    "MERGE_THRESHOLD",
    "ContextGraph",
    "Edge",
    "Entity",
    "GraphBuild",
    "GraphStats",
    "GraphStore",
    "KnowledgePath",
    "PathSampler",
    "PathStep",
    "assemble",
    "derive_edges",
    "fold",
    "merge_groups",
]
