"""HotpotQA-format records: their context paragraphs as chunks, one per title, so a protocol can answer
over them (rageval's document environments, qa's retrieval corpus). A record's `context` is HotpotQA's
`[[title, [sentences]]]` or the `[{title, sentences}]` of the shipped file
(`proctor/data/hotpotqa/r_eval_hotpotqa.jsonl`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal, TypeVar

from proctor.corpus.types import Chunk
from proctor.ids import content_id
from proctor.records import read_records

Paragraph = tuple[str, list[str]]  # title, sentences
T = TypeVar("T")


def first_per_level(items: list[T], n: int, level: Callable[[T], str | None]) -> list[T]:
    """The first `n` items of each level, in file order: the same slice in every protocol that reads the
    file (rageval's HotpotQA questions, qa's questions file), whatever the run's seed."""
    taken: dict[str | None, int] = {}
    out = []
    for item in items:
        lv = level(item)
        if taken.get(lv, 0) < n:
            taken[lv] = taken.get(lv, 0) + 1
            out.append(item)
    return out


def paragraphs(context: Any) -> list[Paragraph]:
    """A record's context as (title, sentences); TypeError / ValueError when it is neither layout."""
    out: list[Paragraph] = []
    for para in context:
        if isinstance(para, dict):
            title, sents = para["title"], para["sentences"]
        else:
            title, sents = para
        if isinstance(sents, str):
            raise TypeError("sentences must be a list")
        out.append((str(title), [str(s) for s in sents or []]))
    return out


def paragraph_chunk(source: str, title: str, sentences: list[str]) -> Chunk:
    """One paragraph as a chunk: its sentences joined, its title as the document's title (ids by title)."""
    text = " ".join(s.strip() for s in sentences)
    return Chunk(
        f"hc_{content_id(title)}", f"hd_{content_id(title)}", f"{source}#{title}", text, 0, {"title": title}
    )


def file_format(path: Path) -> Literal["jsonl", "json"]:
    return "jsonl" if path.suffix in (".jsonl", ".ndjson") else "json"


def file_records(path: Path, field: str) -> Iterable[dict[str, Any]]:
    """The file's usable records (an object with a question, an answer and a context)."""
    for rec in read_records(path, field=field, format=file_format(path)):
        d = rec.data
        if isinstance(d, dict) and d.get("question") and d.get("answer") and d.get("context"):
            yield d


def corpus_chunks(path: Path, field: str) -> list[Chunk]:
    """Every paragraph of the file once (the first text seen for a title), in file order."""
    seen: dict[str, Chunk] = {}
    for d in file_records(path, field):
        try:
            for title, sents in paragraphs(d["context"]):
                if title not in seen:
                    seen[title] = paragraph_chunk(path.name, title, sents)
        except (KeyError, TypeError, ValueError):
            continue
    return list(seen.values())
