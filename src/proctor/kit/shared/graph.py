"""Building the run corpus's context graph: the examiner lists each chunk's named entities (a few chunks
per call, JSON schema), `proctor.graph.assemble` keeps, folds and merges them, and the graph is saved for
every later run on the same corpus, extraction model and prompt (`graphs.sqlite` in the cache folder)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

from proctor.corpus.types import Chunk
from proctor.graph import MERGE_THRESHOLD, ContextGraph, GraphBuild, GraphStore, assemble
from proctor.ids import content_id
from proctor.kit.context import RunContext
from proctor.kit.steps import Payload
from proctor.models.cache import default_cache_dir
from proctor.prompts import prompt_version, render_messages

PROMPT = "graph/entities"
EXTRACTION_VERSION = 2  # bump when reading the replies changes: a stored graph is then rebuilt
MAX_NAME = 80  # characters; longer "names" are sentences a small model copied, not entities


class EntityBatch(Payload):
    """The entity names the examiner gave for a batch of chunks, by chunk id, as written."""

    KIND: ClassVar[str] = "graph_entities"
    entities: dict[str, list[str]]


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
    key = "graph_" + content_id(
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
            unit_id=lambda b: (key, [c.chunk_id for c in b]),
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
