"""`Corpus` (the chunks every protocol draws from), the streaming `iter_chunks`, and `load_corpus`."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import overload

from proctor.corpus.chunking import chunk_document
from proctor.corpus.config import (
    DEFAULT_MAX_CHUNK_CHARS,
    DEFAULT_MIN_CHUNK_CHARS,
    DEFAULT_TEXT_FIELD,
    ChunkBy,
    CorpusConfig,
)
from proctor.corpus.loaders import SUPPORTED_EXTENSIONS, iter_documents
from proctor.corpus.report import LoadReport
from proctor.corpus.types import Chunk, Document
from proctor.errors import UserError


def iter_chunks(
    path: str | os.PathLike[str],
    *,
    text_field: str = DEFAULT_TEXT_FIELD,
    title_field: str | None = None,
    id_field: str | None = None,
    min_chunk_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    max_chunk_chars: int = DEFAULT_MAX_CHUNK_CHARS,
    chunk_by: ChunkBy = "paragraph",
    extensions: list[str] | None = None,
    report: LoadReport | None = None,
) -> Iterator[Chunk]:
    """Yield unique chunks of every document under `path`, one document in memory at a time.

    Identical chunks (same text, hence same id) are yielded once, the first time they occur; the set of
    seen ids (16-hex strings) is the only state that grows with the corpus.
    """
    rep = report if report is not None else LoadReport()
    docs = iter_documents(
        path,
        text_field=text_field,
        title_field=title_field,
        id_field=id_field,
        extensions=extensions,
        report=rep,
    )
    return _unique_chunks(docs, rep, min_chunk_chars, max_chunk_chars, chunk_by)


def _unique_chunks(
    docs: Iterator[Document], rep: LoadReport, min_chars: int, max_chars: int, chunk_by: ChunkBy
) -> Iterator[Chunk]:
    seen: set[str] = set()
    for doc in docs:
        for chunk in chunk_document(doc, min_chars=min_chars, max_chars=max_chars, chunk_by=chunk_by):
            if chunk.chunk_id in seen:
                rep.duplicate_chunks += 1
                continue
            seen.add(chunk.chunk_id)
            rep.chunks += 1
            yield chunk


def fingerprint_chunks(chunk_ids: Sequence[str]) -> str:
    """sha256 over chunk ids in order: changes iff the chunks or their order change."""
    h = hashlib.sha256()
    for cid in chunk_ids:
        h.update(cid.encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()


@dataclass
class Corpus:
    """Materialised chunks plus the load report. Indexable and iterable like a list of chunks."""

    chunks: list[Chunk]
    report: LoadReport = field(default_factory=LoadReport)
    _by_id: dict[str, Chunk] | None = field(default=None, init=False, repr=False, compare=False)
    _fingerprint: str | None = field(default=None, init=False, repr=False, compare=False)

    @property
    def fingerprint(self) -> str:
        """Stable identity of the corpus content (for run resume keys and cache invalidation)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint_chunks([c.chunk_id for c in self.chunks])
        return self._fingerprint

    def by_id(self, chunk_id: str) -> Chunk:
        """The chunk with this id; KeyError if it is not in this corpus."""
        if self._by_id is None:
            self._by_id = {c.chunk_id: c for c in self.chunks}
        try:
            return self._by_id[chunk_id]
        except KeyError:
            raise KeyError(
                f"chunk {chunk_id!r} is not in this corpus (fingerprint {self.fingerprint[:12]})"
            ) from None

    def __contains__(self, chunk_id: object) -> bool:
        if self._by_id is None:
            self._by_id = {c.chunk_id: c for c in self.chunks}
        return chunk_id in self._by_id

    def __len__(self) -> int:
        return len(self.chunks)

    def __iter__(self) -> Iterator[Chunk]:
        return iter(self.chunks)

    @overload
    def __getitem__(self, i: int) -> Chunk: ...
    @overload
    def __getitem__(self, i: slice) -> list[Chunk]: ...
    def __getitem__(self, i: int | slice) -> Chunk | list[Chunk]:
        return self.chunks[i]


def load_corpus(
    path: str | os.PathLike[str] | CorpusConfig | None = None, config: CorpusConfig | None = None
) -> Corpus:
    """Load and chunk everything under the corpus path; raise `UserError` if nothing is usable.

    Call as `load_corpus(config)`, `load_corpus(path)` or `load_corpus(path, config)`; an explicit path
    wins over `config.path`.
    """
    if isinstance(path, CorpusConfig):
        if config is not None:
            raise TypeError("load_corpus: pass one CorpusConfig, not two")
        path, config = None, path
    cfg = config if config is not None else CorpusConfig()
    target = Path(path) if path is not None else cfg.path
    if target is None:
        raise UserError(
            "No corpus path given. Pass the file or folder with your documents (e.g. `proctor ingest docs/`) "
            "or set corpus.path in your config."
        )
    report = LoadReport()
    chunks = list(
        iter_chunks(
            target,
            text_field=cfg.text_field,
            title_field=cfg.title_field,
            id_field=cfg.id_field,
            min_chunk_chars=cfg.min_chunk_chars,
            max_chunk_chars=cfg.max_chunk_chars,
            chunk_by=cfg.chunk_by,
            extensions=cfg.extensions,
            report=report,
        )
    )
    if not chunks:
        raise UserError(_nothing_loaded_message(target, report))
    return Corpus(chunks=chunks, report=report)


def _nothing_loaded_message(target: Path, report: LoadReport) -> str:
    kinds = ", ".join(SUPPORTED_EXTENSIONS)
    if report.files_seen == 0 and not report.skipped:
        return (
            f"Corpus folder '{target}' contains no files (hidden files and folders are ignored). "
            f"Put your documents ({kinds}) in it, or set corpus.path to the folder that holds them."
        )
    shown = "; ".join(f"{p}: {r}" for p, r in report.skipped[:5])
    more = f"; and {len(report.skipped) - 5} more" if len(report.skipped) > 5 else ""
    what = "file" if target.is_file() else "folder"
    return (
        f"No loadable documents in corpus {what} '{target}': {report.files_seen} file(s) seen, all skipped "
        f"({shown}{more}). Fix or convert those files (proctor reads UTF-8 {kinds}), "
        "or set corpus.path to the folder that holds your documents."
    )
