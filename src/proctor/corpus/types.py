"""Documents and chunks: the unit every protocol draws questions from."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any


def content_id(text: str, prefix: str = "") -> str:
    """Stable id from content: the same text always gets the same id, wherever it sits."""
    return prefix + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class Document:
    doc_id: str
    source: str  # path of the file it came from (plus "#row" for jsonl/csv rows)
    text: str
    title: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Chunk:
    chunk_id: str  # content hash of the text
    doc_id: str
    source: str
    text: str
    index: int = 0  # position within its document
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoredChunk:
    chunk: Chunk
    score: float
