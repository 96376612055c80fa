"""Chunking: cut a document into passages no longer than `max_chars`, at the most natural boundary
available (paragraph, then sentence, then whitespace, then raw characters), and avoid passages shorter
than `min_chars` where the neighbours leave room. Everything is linear in the text length, so a 50 MB
single-line file chunks in seconds."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from proctor.corpus.config import DEFAULT_MAX_CHUNK_CHARS, DEFAULT_MIN_CHUNK_CHARS, ChunkBy
from proctor.corpus.types import Chunk, Document, content_id

_PARAGRAPH_BREAK = re.compile(r"\n(?:[ \t\f\v]*\n)+")
_SENTENCE_END = re.compile(r"[.!?…][\"'”’)\]]*\s+|[。！？]")
_PARA_SEP = "\n\n"
_WORD_SEP = " "


@dataclass
class _Piece:
    text: str
    sep: str  # what joins it to the piece before it in the same chunk ("\n\n", " " or "" after a raw cut)


def _length(pieces: list[_Piece]) -> int:
    return sum(len(p.text) for p in pieces) + sum(len(p.sep) for p in pieces[1:])


def _render(pieces: list[_Piece]) -> str:
    return pieces[0].text + "".join(p.sep + p.text for p in pieces[1:])


def split_paragraphs(text: str) -> list[str]:
    """Paragraphs are separated by blank lines; single newlines stay inside a paragraph."""
    return [p for p in (s.strip() for s in _PARAGRAPH_BREAK.split(text)) if p]


def split_sentences(text: str) -> list[str]:
    """Split after . ! ? … (plus closing quotes/brackets) followed by whitespace, and after CJK stops.

    Deliberately simple: sentence boundaries only decide where an over-long passage is cut.
    """
    out: list[str] = []
    start = 0
    for m in _SENTENCE_END.finditer(text):
        s = text[start : m.end()].strip()
        if s:
            out.append(s)
        start = m.end()
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def _last_space(text: str, lo: int, hi: int) -> int:
    return max(text.rfind(" ", lo, hi), text.rfind("\n", lo, hi), text.rfind("\t", lo, hi))


def _hard_split(text: str, max_chars: int, first_sep: str) -> list[_Piece]:
    """Cut into near-equal pieces of at most `max_chars`, at whitespace in the back half of each window,
    else at a raw character position. Equal targets keep the last piece longer than max_chars / 2."""
    pieces: list[_Piece] = []
    sep = first_sep
    start, n = 0, len(text)
    while n - start > max_chars:
        remaining = n - start
        parts = -(-remaining // max_chars)
        target = -(-remaining // parts)
        end = start + target
        cut = _last_space(text, start + target // 2, end + 1)
        if cut > start:
            pieces.append(_Piece(text[start:cut].rstrip(), sep))
            start = cut + 1
            while start < n and text[start].isspace():
                start += 1
            sep = _WORD_SEP
        else:
            pieces.append(_Piece(text[start:end], sep))
            start = end
            sep = ""
    if start < n:
        pieces.append(_Piece(text[start:], sep))
    return pieces


def _units(text: str, max_chars: int, chunk_by: ChunkBy) -> list[_Piece]:
    """The smallest pieces packing works with; each is at most `max_chars` long."""
    units: list[_Piece] = []
    for para in split_paragraphs(text):
        if chunk_by == "paragraph" and len(para) <= max_chars:
            units.append(_Piece(para, _PARA_SEP))
            continue
        sep = _PARA_SEP
        for sentence in split_sentences(para):
            if len(sentence) <= max_chars:
                units.append(_Piece(sentence, sep))
            else:
                units.extend(_hard_split(sentence, max_chars, sep))
            sep = _WORD_SEP
    return units


def _pack(units: list[_Piece], max_chars: int) -> list[list[_Piece]]:
    """Greedy: append units to the current chunk while it stays within `max_chars`."""
    drafts: list[list[_Piece]] = []
    current: list[_Piece] = []
    size = 0
    for u in units:
        add = len(u.text) + (len(u.sep) if current else 0)
        if current and size + add > max_chars:
            drafts.append(current)
            current, size, add = [], 0, len(u.text)
        current.append(u)
        size += add
    if current:
        drafts.append(current)
    return drafts


def _fix_short(drafts: list[list[_Piece]], min_chars: int, max_chars: int) -> None:
    """Merge a too-short chunk into a neighbour if the result fits, else borrow pieces from neighbours
    as long as both stay within bounds. Greedy packing alone leaves e.g. [1150][100] at a document end."""
    i = 0
    while i < len(drafts):
        d = drafts[i]
        size = _length(d)
        if size >= min_chars:
            i += 1
            continue
        prev = drafts[i - 1] if i > 0 else None
        nxt = drafts[i + 1] if i + 1 < len(drafts) else None
        with_prev = _length(prev) + len(d[0].sep) + size if prev else max_chars + 1
        with_next = size + len(nxt[0].sep) + _length(nxt) if nxt else max_chars + 1
        if prev and with_prev <= max_chars and with_prev <= with_next:
            prev.extend(d)
            del drafts[i]
            continue
        if nxt and with_next <= max_chars:
            d.extend(nxt)
            del drafts[i + 1]
            continue  # re-check the merged chunk
        while prev and len(prev) > 1 and size < min_chars:
            p = prev[-1]
            grown = len(p.text) + len(d[0].sep) + size
            if grown > max_chars or _length(prev) - len(p.text) - len(p.sep) < min_chars:
                break
            d.insert(0, prev.pop())
            size = grown
        while nxt and len(nxt) > 1 and size < min_chars:
            p = nxt[0]
            grown = size + len(p.sep) + len(p.text)
            if grown > max_chars or _length(nxt) - len(p.text) - len(nxt[1].sep) < min_chars:
                break
            d.append(nxt.pop(0))
            size = grown
        i += 1


def chunk_text(
    text: str,
    *,
    min_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    max_chars: int = DEFAULT_MAX_CHUNK_CHARS,
    chunk_by: ChunkBy = "paragraph",
) -> list[str]:
    """Passages of at most `max_chars`; shorter than `min_chars` only when no neighbour has room
    (or the whole text is that short)."""
    if max_chars < 1 or min_chars > max_chars:
        raise ValueError(f"need 0 <= min_chars <= max_chars and max_chars >= 1, got {min_chars}, {max_chars}")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    drafts = _pack(_units(text, max_chars, chunk_by), max_chars)
    _fix_short(drafts, min_chars, max_chars)
    return [_render(d) for d in drafts]


def chunk_document(
    doc: Document,
    *,
    min_chars: int = DEFAULT_MIN_CHUNK_CHARS,
    max_chars: int = DEFAULT_MAX_CHUNK_CHARS,
    chunk_by: ChunkBy = "paragraph",
) -> list[Chunk]:
    """Chunks of one document, ids from content only (the same passage anywhere gets the same id)."""
    meta: dict[str, Any] = {}
    if doc.title:
        meta["title"] = doc.title
    if "record_id" in doc.metadata:
        meta["record_id"] = doc.metadata["record_id"]
    return [
        Chunk(
            chunk_id=content_id(text, "c_"),
            doc_id=doc.doc_id,
            source=doc.source,
            text=text,
            index=i,
            metadata=dict(meta),
        )
        for i, text in enumerate(
            chunk_text(doc.text, min_chars=min_chars, max_chars=max_chars, chunk_by=chunk_by)
        )
    ]
