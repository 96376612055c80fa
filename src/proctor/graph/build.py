"""Building a corpus's context graph: the examiner lists each chunk's named entities (a few chunks per
call, JSON schema), names the chunk does not contain are dropped (small models invent), names are folded
and near-duplicates merged, and the graph is saved for every later run on the same corpus."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel

from proctor.corpus.types import Chunk
from proctor.graph.model import ContextGraph, Entity, derive_edges
from proctor.graph.names import MERGE_THRESHOLD, display_name, fold, merge_groups
from proctor.graph.store import GraphStore
from proctor.models.cache import default_cache_dir
from proctor.prompts import prompt_version, render_messages
from proctor.protocols.context import RunContext, work_key
from proctor.protocols.steps import Payload

PROMPT = "graph/entities"
EXTRACTION_VERSION = 2  # bump when reading the replies changes: a stored graph is then rebuilt
MAX_NAME = 80  # characters; longer "names" are sentences a small model copied, not entities


class EntityBatch(Payload):
    """The entity names the examiner gave for a batch of chunks, by chunk id, as written."""

    KIND: ClassVar[str] = "graph_entities"
    entities: dict[str, list[str]]


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


def _schema(max_entities: int) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {
            "passages": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "entities": {"type": "array", "items": {"type": "string"}, "maxItems": max_entities},
                    },
                    "required": ["id", "entities"],
                },
            }
        },
        "required": ["passages"],
    }


def _in_text(name: str, text: str) -> bool:
    words = re.findall(r"\w+", name.casefold())
    return bool(words) and re.search(r"\W+".join(map(re.escape, words)), text.casefold()) is not None


async def build_context_graph(
    ctx: RunContext[Any],
    *,
    role: str = "examiner",
    batch_size: int = 4,
    max_entities: int = 8,
    merge_threshold: float = MERGE_THRESHOLD,
    store_path: Path | None = None,
) -> tuple[ContextGraph, GraphBuild]:
    """The graph of the run's corpus: loaded when a graph with the same key was built before (no model
    call), else extracted (failed batches are recorded on their items and leave their chunks without
    entities; such a partial graph is not saved, so a later run completes it)."""
    chunks = ctx.corpus.chunks
    model = ctx.role(role)
    embedder = ctx.embedder if ctx.config.embedder else None
    key = work_key(
        "graph",
        EXTRACTION_VERSION,
        ctx.corpus.fingerprint,
        model.provider.identity(),
        prompt_version(PROMPT),
        batch_size,
        max_entities,
        merge_threshold,
        embedder.identity() if embedder is not None else None,
    )
    store = GraphStore(store_path or Path(ctx.config.cache_dir or default_cache_dir()) / "graphs.sqlite")
    try:
        found = store.load(key)
        if found is not None:
            info = GraphBuild.model_validate({**(store.info(key) or {}), "reused": True})
            return found, info
        batches = [list(chunks[i : i + batch_size]) for i in range(0, len(chunks), batch_size)]

        async def extract(batch: list[Chunk]) -> EntityBatch:
            passages = [{"id": str(i + 1), "text": c.text} for i, c in enumerate(batch)]
            reply = await model.generate(
                render_messages(PROMPT, passages=passages, max_entities=max_entities),
                json_schema=_schema(max_entities),
                temperature=0.0,
                max_tokens=24 * max_entities * len(batch) + 32,
            )
            found_names: dict[str, list[str]] = {c.chunk_id: [] for c in batch}
            entries = [p for p in reply.parsed["passages"] if isinstance(p, dict)]
            for pos, p in enumerate(entries):
                # Small models write the id as "1", "[1]", "passage1" or "passage 1"; take its number, and
                # fall back to the position when the entries line up one per passage.
                digits = re.search(r"\d+", str(p.get("id", "")))
                ref = int(digits.group()) if digits else (pos + 1 if len(entries) == len(batch) else 0)
                if 1 <= ref <= len(batch):
                    names = [" ".join(str(n).split()) for n in p.get("entities") or []]
                    found_names[batch[ref - 1].chunk_id] += [n for n in names if n and len(n) <= MAX_NAME]
            return EntityBatch(entities=found_names)

        outcomes = await ctx.map(
            "graph: extracting entities",
            batches,
            extract,
            key=lambda b: work_key("ge", key, [c.chunk_id for c in b]),
            role=role,
            output=EntityBatch,
            context=lambda b: {"chunk_ids": [c.chunk_id for c in b]},
        )
        names = {cid: ns for o in outcomes if o.value is not None for cid, ns in o.value.entities.items()}
        failed = sum(len(o.unit) for o in outcomes if o.value is None)
        graph, info = assemble(key, chunks, names, embedder, merge_threshold)
        info.chunks_failed = failed
        if not failed:
            store.save(graph, info.model_dump())
        return graph, info
    finally:
        store.close()


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
            if not k or not _in_text(name, chunk.text):
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
            Entity(work_key("ent", keys[root]), display_name(forms), tuple(sorted(forms)), tuple(seen))
        )
    info.entities = len(entities)
    return ContextGraph(key, entities, derive_edges(entities)), info
