"""Corpus processing on Ray Data: files -> documents -> chunks -> (embeddings) as `map_batches` stages that
write one chunk table (Parquet) into the cache folder; the driver reads it back into the very `Corpus` the
local path (`proctor.corpus.load_corpus`) builds — same chunks, same ids, same order, same load report.

Why the result is identical, by construction rather than by luck:

- the driver lists the files with the local loader's own walk (`iter_corpus_files`: sorted, depth first,
  hidden entries and unlistable folders handled the same way) and numbers them;
- each task loads and chunks its files with the local code (`load_file`, `chunk_document`), tagging every
  chunk with (file number, document number, chunk number);
- the driver sorts the table by those tags and drops repeated chunk ids keeping the first, exactly as the
  sequential `iter_chunks` does, and rebuilds the `LoadReport` from one summary row per file (skips in
  the walk's order).

Embeddings (`embedder` set and `ray.embed` on) are computed by a pool of Ray actors (`ray.embed_actors`,
each with the model loaded once, 1 CPU, 1 thread) and stored as a vector column of the same table; the
driver puts them into the run's embedding cache (`Embedder.prime`), so the protocol's later `embed` calls
on chunk texts are cache hits and the vectors are the ones the packaged model computes (equal to the
local path's within float tolerance: batch composition differs).

The table lives in `<ray.output_dir or cache_dir/corpus-ray>/<key>/` (`chunks/*.parquet` and
`manifest.json`), keyed by the corpus settings, the embedder, and every file's path, size and mtime: a
re-run on an unchanged corpus reads the table back without starting Ray. Workers write the Parquet files
themselves and return nothing through the driver; on a multi-node cluster the output folder must
therefore be a mount every node shares.

RECKON unit extraction is not a Ray stage (it needs the examiner model through the driver's call path).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from proctor.config import RayConfig, RunConfig
from proctor.corpus import Chunk, Corpus, CorpusConfig, LoadReport, chunk_document, load_corpus
from proctor.corpus.corpus import _nothing_loaded_message
from proctor.corpus.loaders import check_corpus_path, iter_corpus_files, load_file
from proctor.embeddings.config import EmbedderConfig
from proctor.errors import UserError
from proctor.models.cache import default_cache_dir

log = logging.getLogger(__name__)

_LAYOUT_VERSION = 1
# One row per chunk, plus one summary row per file (doc_seq = chunk_index = -1, `file_report` set).
_SCHEMA = pa.schema(
    [
        ("file_order", pa.int64()),
        ("doc_seq", pa.int64()),
        ("chunk_index", pa.int64()),
        ("chunk_id", pa.string()),
        ("doc_id", pa.string()),
        ("source", pa.string()),
        ("text", pa.large_string()),
        ("meta", pa.string()),  # the chunk's metadata as JSON
        ("file_report", pa.string()),  # file rows: {"documents": n, "skipped": [[path, reason], ...]}
    ]
)


@dataclass(frozen=True)
class CorpusTable:
    """What the Ray pipeline produced: the corpus, the chunk vectors (rows aligned with `corpus.chunks`;
    None without an embedder), where the table is, and whether it was reused from an earlier run."""

    corpus: Corpus
    vectors: np.ndarray | None
    table_dir: Path
    reused: bool
    seconds: float


def load_run_corpus(config: RunConfig) -> Corpus:
    """The run's corpus: the local loader with `executor: local` (the default), the Ray pipeline with
    `executor: ray` (chunks embedded there too when the config names an `embedder` and `ray.embed` is on)."""
    if config.executor != "ray":
        return load_corpus(config.corpus)
    embedder = config.embedder_config() if config.ray.embed else None
    return process_corpus(
        config.corpus, settings=config.ray, embedder=embedder, cache_dir=config.cache_dir
    ).corpus


def process_corpus(
    corpus: CorpusConfig,
    *,
    settings: RayConfig | None = None,
    embedder: EmbedderConfig | str | None = None,
    cache_dir: str | Path | None = None,
    reuse: bool = True,
) -> CorpusTable:
    """Read, chunk (and embed) `corpus` on Ray; see the module docstring. Starts or joins Ray only when the
    table is not already in the cache folder."""
    settings = settings or RayConfig()
    t0 = time.perf_counter()
    if corpus.path is None:
        load_corpus(corpus)  # raises the local path's "no corpus path" UserError
        raise AssertionError("load_corpus accepted a corpus without a path")
    root = check_corpus_path(corpus.path)
    listing = LoadReport(root=str(root))
    files: list[tuple[str, str]] = []
    walk_skips_before: list[int] = []  # walk skips recorded before file i (they precede it in the report)
    for file, rel in iter_corpus_files(root, listing):
        walk_skips_before.append(len(listing.skipped))
        files.append((str(file), rel))
    if isinstance(embedder, str):
        embedder = EmbedderConfig(spec=embedder)
    emb = embedder.build(cache_dir=cache_dir) if embedder is not None else None
    key = _table_key(root, corpus, files, emb.identity() if emb is not None else None)
    base = Path(settings.output_dir).expanduser() if settings.output_dir else _default_base(cache_dir)
    final = base / key
    reused = reuse and (final / "manifest.json").is_file()
    if not reused:
        _run_pipeline(files, corpus, embedder, settings, base, final)
    chunks, report, vectors = _load_table(final, root, listing, walk_skips_before, emb is not None)
    if not chunks:
        raise UserError(_nothing_loaded_message(root, report))
    if emb is not None and vectors is not None:
        added = emb.prime([c.text for c in chunks], vectors)
        log.info("ray corpus: %d chunk vectors put into the embedding cache", added)
    seconds = time.perf_counter() - t0
    log.info(
        "ray corpus: %d chunks from %d files in %.1fs (%s %s)",
        len(chunks), report.files_seen, seconds, "reused" if reused else "wrote", final,
    )  # fmt: skip
    return CorpusTable(Corpus(chunks=chunks, report=report), vectors, final, reused, seconds)


# ------------------------------------------------------------------------------------------ the pipeline


def _run_pipeline(
    files: list[tuple[str, str]],
    corpus: CorpusConfig,
    embedder: EmbedderConfig | None,
    settings: RayConfig,
    base: Path,
    final: Path,
) -> None:
    from proctor.scale.ray_session import ensure_ray, unwrap_user_error

    ray = ensure_ray(settings)
    try:
        import ray.data as rd
    except ImportError as e:
        raise UserError(
            f"executor: Ray is installed without Ray Data ({e}). Install it with pip install 'proctor[ray]' "
            "(which brings ray[data])."
        ) from None
    staging = base / f".tmp-{uuid.uuid4().hex[:12]}"
    try:
        if files:
            tasks = _pack(files, settings.files_per_task)
            cpus = int(ray.cluster_resources().get("CPU", 1))
            cap = max(1, min(settings.max_concurrency or cpus, len(tasks)))
            # One row per task (its files as list columns), so tasks are cut by size as well as count.
            ds: Any = rd.from_items(tasks, override_num_blocks=len(tasks))
            ds = ds.map_batches(
                _read_and_chunk,
                batch_size=1,
                batch_format="pyarrow",
                fn_kwargs={"options": _chunk_options(corpus)},
                num_cpus=1,
                compute=rd.TaskPoolStrategy(size=cap),
            )
            if embedder:
                ds = ds.map_batches(
                    _EmbedChunks,
                    batch_size=None,
                    batch_format="pyarrow",
                    fn_constructor_kwargs={"embedder": embedder.model_dump()},
                    num_cpus=1,
                    compute=rd.ActorPoolStrategy(size=settings.embed_actors),
                )
            # The last stage writes its part of the table itself and hands back only (path, rows): Ray
            # fuses it with the stage before, so the chunk text never passes through the object store
            # or the driver.
            ds = ds.map_batches(
                _write_part,
                batch_size=None,
                batch_format="pyarrow",
                fn_kwargs={"out_dir": str(staging / "chunks")},
                num_cpus=1,
                compute=rd.TaskPoolStrategy(size=cap),
            )
            written = ds.take_all()
            log.info("ray corpus: %d parts, %d rows", len(written), sum(int(r["rows"]) for r in written))
        (staging / "chunks").mkdir(parents=True, exist_ok=True)
        named = (embedder.spec if not embedder.options() else embedder.model_dump()) if embedder else None
        manifest = {"version": _LAYOUT_VERSION, "files": len(files), "embedder": named}
        (staging / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
        try:
            staging.rename(final)
        except OSError:
            if not (final / "manifest.json").is_file():
                raise
            # Another run wrote the same table first; its copy is identical, keep it.
    except Exception as e:
        user = unwrap_user_error(e)
        if user is not None:
            raise user from None
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _chunk_options(corpus: CorpusConfig) -> dict[str, Any]:
    return {
        "text_field": corpus.text_field,
        "title_field": corpus.title_field,
        "id_field": corpus.id_field,
        "extensions": corpus.extensions,
        "min_chars": corpus.min_chunk_chars,
        "max_chars": corpus.max_chunk_chars,
        "chunk_by": corpus.chunk_by,
    }


_TASK_BYTES = 32 * 2**20  # a task's files stop at this total size (or at ray.files_per_task files)


def _pack(files: list[tuple[str, str]], per_task: int) -> list[dict[str, list[Any]]]:
    """Consecutive files grouped into tasks of at most `per_task` files and about `_TASK_BYTES`: many
    small files make few tasks (scheduling costs per task), a huge file gets a task of its own."""
    tasks: list[dict[str, list[Any]]] = []
    current: dict[str, list[Any]] = {"file_order": [], "path": [], "rel": []}
    size = 0
    for i, (path, rel) in enumerate(files):
        try:
            n = os.stat(path).st_size
        except OSError:
            n = 0  # the task records why it cannot be read
        if current["path"] and (len(current["path"]) >= per_task or size + n > _TASK_BYTES):
            tasks.append(current)
            current, size = {"file_order": [], "path": [], "rel": []}, 0
        current["file_order"].append(i)
        current["path"].append(path)
        current["rel"].append(rel)
        size += n
    if current["path"]:
        tasks.append(current)
    return tasks


def _write_part(batch: pa.Table, *, out_dir: str) -> pa.Table:
    """Last stage: write this batch's rows as one Parquet file of the table; return (path, rows)."""
    os.makedirs(out_dir, exist_ok=True)
    first = min(batch.column("file_order").to_pylist(), default=0)
    path = os.path.join(out_dir, f"part-{first:09d}-{uuid.uuid4().hex[:8]}.parquet")
    pq.write_table(batch, path)
    return pa.table({"path": [path], "rows": [batch.num_rows]})


def _read_and_chunk(batch: pa.Table, *, options: dict[str, Any]) -> pa.Table:
    """Ray task: load and chunk a task's files with the local code; one row per chunk + one per file."""
    cols: dict[str, list[Any]] = {name: [] for name in _SCHEMA.names}

    def row(**values: Any) -> None:
        for name in _SCHEMA.names:
            cols[name].append(values.get(name))

    orders = [o for task in batch.column("file_order").to_pylist() for o in task]
    paths = [p for task in batch.column("path").to_pylist() for p in task]
    rels = [r for task in batch.column("rel").to_pylist() for r in task]
    for order, path, rel in zip(orders, paths, rels, strict=True):
        rep = LoadReport()
        docs = load_file(
            Path(path),
            rel,
            text_field=options["text_field"],
            title_field=options["title_field"],
            id_field=options["id_field"],
            extensions=options["extensions"],
            report=rep,
        )
        n_docs = 0
        for doc_seq, doc in enumerate(docs):
            n_docs += 1
            chunks = chunk_document(
                doc,
                min_chars=options["min_chars"],
                max_chars=options["max_chars"],
                chunk_by=options["chunk_by"],
            )
            for c in chunks:
                row(
                    file_order=order, doc_seq=doc_seq, chunk_index=c.index, chunk_id=c.chunk_id,
                    doc_id=c.doc_id, source=c.source, text=c.text,
                    meta=json.dumps(c.metadata, ensure_ascii=False, sort_keys=True),
                )  # fmt: skip
        report = {"documents": n_docs, "skipped": [list(s) for s in rep.skipped]}
        row(file_order=order, doc_seq=-1, chunk_index=-1, file_report=json.dumps(report, ensure_ascii=False))
    return pa.table(cols, schema=_SCHEMA)


class _EmbedChunks:
    """Ray actor stage: the embedder loaded once per actor (no cache: the driver owns the cache file)."""

    def __init__(self, embedder: dict[str, Any]) -> None:
        config = EmbedderConfig.model_validate(embedder)
        self.embedder = config.build(cache=False, threads=1, where="embedder (on a Ray worker)")

    def __call__(self, batch: pa.Table) -> pa.Table:
        is_chunk = np.asarray(batch.column("chunk_index").to_numpy()) >= 0
        texts = [t for t, keep in zip(batch.column("text").to_pylist(), is_chunk, strict=True) if keep]
        dim = self.embedder.dim
        vectors = np.zeros((batch.num_rows, dim), dtype=np.float32)
        if texts:
            vectors[is_chunk] = self.embedder.embed(texts)
        column = pa.FixedSizeListArray.from_arrays(pa.array(vectors.reshape(-1), pa.float32()), dim)
        return batch.append_column("vector", column)


# ------------------------------------------------------------------------------------- reading it back


def _parts(final: Path) -> list[Path]:
    return sorted((final / "chunks").glob("*.parquet"))


def _load_table(
    final: Path, root: Path, listing: LoadReport, walk_skips_before: list[int], with_vectors: bool
) -> tuple[list[Chunk], LoadReport, np.ndarray | None]:
    """Chunks in the sequential order (by file, document, chunk number), repeated ids dropped after
    their first occurrence, as `iter_chunks` does; the load report; the kept chunks' vectors.

    Memory: the parts are read one at a time and turned into Python lists at once (the strings become the
    chunks), and the rows are ordered through an index, so the peak stays near the corpus's own size
    rather than twice it."""
    cols: dict[str, list[Any]] = {n: [] for n in ("chunk_id", "doc_id", "source", "meta", "text")}
    keys: dict[str, list[np.ndarray]] = {n: [] for n in ("file_order", "doc_seq", "chunk_index")}
    file_rows: list[pa.Table] = []
    vector_parts: list[np.ndarray] = []
    for part in _parts(final):
        table = pq.read_table(part)
        file_rows.append(table.filter(pc.equal(table.column("chunk_index"), -1)))
        for name in keys:
            keys[name].append(table.column(name).to_numpy())
        for name in cols:
            cols[name].extend(table.column(name).to_pylist())
        if with_vectors and "vector" in table.column_names:
            column = table.column("vector").combine_chunks()
            flat = np.asarray(column.flatten().to_numpy(zero_copy_only=False), dtype=np.float32)
            vector_parts.append(flat.reshape(-1, column.type.list_size))
        del table
    pa.default_memory_pool().release_unused()
    report = _report(pa.concat_tables(file_rows) if file_rows else _SCHEMA.empty_table(), root, listing,
                     walk_skips_before)  # fmt: skip
    index = np.concatenate(keys["chunk_index"]) if file_rows else np.zeros(0, dtype=np.int64)
    order = (
        np.lexsort((index, np.concatenate(keys["doc_seq"]), np.concatenate(keys["file_order"])))
        if file_rows
        else np.zeros(0, dtype=np.int64)
    )
    ids, doc_ids, sources, metas, texts = (cols[n] for n in ("chunk_id", "doc_id", "source", "meta", "text"))
    chunks: list[Chunk] = []
    keep: list[int] = []
    seen: set[str] = set()
    parsed: dict[str, dict[str, Any]] = {}  # a document's chunks share their metadata JSON
    for row in order.tolist():
        i = int(index[row])
        if i < 0:
            continue
        cid = ids[row]
        if cid in seen:
            report.duplicate_chunks += 1
            continue
        seen.add(cid)
        keep.append(row)
        meta = parsed.get(metas[row])
        if meta is None:
            meta = parsed[metas[row]] = json.loads(metas[row])
        chunks.append(
            Chunk(
                chunk_id=cid, doc_id=doc_ids[row], source=sources[row], text=texts[row], index=i,
                metadata=dict(meta),  # one dict per chunk, as chunk_document makes them
            )
        )  # fmt: skip
    report.chunks = len(chunks)
    vectors = None
    if vector_parts:
        vectors = np.concatenate(vector_parts)[np.asarray(keep, dtype=np.int64)]
    return chunks, report, vectors


def _report(table: pa.Table, root: Path, listing: LoadReport, walk_skips_before: list[int]) -> LoadReport:
    """The local loader's report: walk skips and per-file skips interleaved in walk order."""
    report = LoadReport(root=str(root))
    summaries: dict[int, dict[str, Any]] = {}
    if table.num_rows:
        rows = table.filter(pc.equal(table.column("chunk_index"), -1))
        for order, blob in zip(
            rows.column("file_order").to_pylist(), rows.column("file_report").to_pylist(), strict=True
        ):
            summaries[order] = json.loads(blob)
    done = 0
    for i, before in enumerate(walk_skips_before):
        report.skipped.extend(listing.skipped[done:before])
        done = before
        summary = summaries.get(i)
        if summary is None:
            raise RuntimeError(f"ray corpus table: no summary row for file {i}; delete the table and retry")
        report.files_seen += 1
        report.documents += summary["documents"]
        report.files_loaded += summary["documents"] > 0
        report.skipped.extend((p, r) for p, r in summary["skipped"])
    report.skipped.extend(listing.skipped[done:])
    return report


# ------------------------------------------------------------------------------------------------ keys


def _default_base(cache_dir: str | Path | None) -> Path:
    return (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "corpus-ray"


def _table_key(
    root: Path, corpus: CorpusConfig, files: list[tuple[str, str]], embedder: dict[str, Any] | None
) -> str:
    """Changes when the corpus settings, the embedder or any file (path, size, mtime) changes."""
    h = hashlib.sha256()
    head = {
        "version": _LAYOUT_VERSION,
        "root": str(root.resolve()),
        "corpus": _chunk_options(corpus),
        "embedder": embedder,
    }
    h.update(json.dumps(head, sort_keys=True).encode())
    for path, rel in files:
        try:
            st = os.stat(path)
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "unreadable"
        h.update(f"\n{rel}\0{stamp}".encode())
    return h.hexdigest()[:24]
