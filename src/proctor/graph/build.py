"""Assembling a corpus's context graph from the entity names listed per chunk: names the chunk does not
contain are dropped (small models invent), names are folded and near-duplicates merged. The extraction
step that asks the examiner for the names is the kit's (`proctor.kit.shared.graph`)."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from proctor.corpus.types import Chunk
from proctor.graph.model import ContextGraph, Entity, derive_edges
from proctor.graph.names import MERGE_THRESHOLD, display_name, fold, merge_groups
from proctor.ids import content_id


class GraphBuild(BaseModel):
    """How a graph came to be: reused or built, and what extraction kept and dropped."""

    key: str
    reused: bool
    chunks: int
    chunks_failed: int = 0
    names: int = 0
    names_not_in_chunk: int = 0
    merged_by_embedding: int = 0
    entities: int = 0


def in_text(name: str, text: str) -> bool:
    words = re.findall(r"\w+", name.casefold())
    return bool(words) and re.search(r"\W+".join(map(re.escape, words)), text.casefold()) is not None


def assemble(
    key: str,
    chunks: Sequence[Chunk],
    names: dict[str, list[str]],
    embedder: Any,
    merge_threshold: float = MERGE_THRESHOLD,
) -> tuple[ContextGraph, GraphBuild]:
    """Entities from each chunk's names: keep names the chunk contains, fold, merge near-duplicates."""
    info = GraphBuild(key=key, reused=False, chunks=len(chunks))
    surface: dict[str, Counter[str]] = {}
    mentions: dict[str, list[tuple[str, str]]] = {}
    for chunk in chunks:
        for name in names.get(chunk.chunk_id, []):
            info.names += 1
            k = fold(name)
            if not k or not in_text(name, chunk.text):
                info.names_not_in_chunk += 1
                continue
            surface.setdefault(k, Counter())[name] += 1
            if (chunk.chunk_id, chunk.doc_id) not in mentions.setdefault(k, []):
                mentions[k].append((chunk.chunk_id, chunk.doc_id))
    keys = list(surface)
    vectors = embedder.embed(keys) if embedder is not None and len(keys) > 1 else None
    groups = merge_groups(keys, vectors, merge_threshold)
    info.merged_by_embedding = len(keys) - len(set(groups))
    members: dict[int, list[str]] = {}
    for i, g in enumerate(groups):
        members.setdefault(g, []).append(keys[i])
    entities = []
    for root, ks in members.items():
        forms: Counter[str] = Counter()
        seen: list[tuple[str, str]] = []
        for k in ks:
            forms.update(surface[k])
            seen += [m for m in mentions[k] if m not in seen]
        order = {c.chunk_id: i for i, c in enumerate(chunks)}
        seen.sort(key=lambda m: order[m[0]])
        entities.append(
            Entity(f"ent_{content_id(keys[root])}", display_name(forms), tuple(sorted(forms)), tuple(seen))
        )
    info.entities = len(entities)
    return ContextGraph(key, entities, derive_edges(entities)), info
