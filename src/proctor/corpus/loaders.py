"""File loaders: a file or a directory tree becomes `Document`s, one at a time, and every file, record
or line that cannot be used is recorded in a `LoadReport` with the reason, never dropped silently."""

from __future__ import annotations

import codecs
import csv
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.corpus.config import DEFAULT_TEXT_FIELD
from proctor.corpus.report import LoadReport
from proctor.corpus.types import Document, content_id
from proctor.errors import UserError
from proctor.records import BadRecord, csv_columns, read_records

SNIFF_BYTES = 8192
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_MAX_LISTED_ROWS = 10


@dataclass(frozen=True)
class _Options:
    text_field: str
    title_field: str | None
    id_field: str | None
    extensions: frozenset[str] | None


def iter_documents(
    path: str | os.PathLike[str],
    *,
    text_field: str = DEFAULT_TEXT_FIELD,
    title_field: str | None = None,
    id_field: str | None = None,
    extensions: list[str] | None = None,
    report: LoadReport | None = None,
) -> Iterator[Document]:
    """Yield the documents under `path` (a file or a directory, walked recursively in sorted order).

    Nothing is materialised: memory stays bounded by the largest single document (jsonl and csv are read
    record by record). Skips are appended to `report`, which the caller reads after exhausting the
    iterator. The path is checked now, not at the first `next()`, so a typo fails where it is made.
    """
    root = check_corpus_path(path)
    rep = report if report is not None else LoadReport()
    rep.root = str(root)
    opts = _options(text_field, title_field, id_field, extensions)
    return _generate(root, opts, rep)


def check_corpus_path(path: str | os.PathLike[str]) -> Path:
    """The corpus path as a `Path`; `UserError` naming corpus.path when it does not exist."""
    root = Path(path)
    if not root.exists():
        # Paths from a config file arrive absolute (resolved against the config's folder).
        where = (
            "a relative corpus.path in a config file is taken from the config file's folder"
            if root.is_absolute()
            else f"resolved from the current directory {Path.cwd()}"
        )
        raise UserError(
            f"Corpus path '{root}' does not exist ({where}). "
            "Check the spelling, or set corpus.path to the file or folder that holds your documents."
        )
    return root


def _options(
    text_field: str, title_field: str | None, id_field: str | None, extensions: list[str] | None
) -> _Options:
    exts = (
        None
        if extensions is None
        else frozenset(e.lower() if e.startswith(".") else "." + e.lower() for e in extensions)
    )
    return _Options(text_field=text_field, title_field=title_field, id_field=id_field, extensions=exts)


def iter_corpus_files(root: Path, report: LoadReport) -> Iterator[tuple[Path, str]]:
    """(file, path relative to the corpus root) in the order `iter_documents` reads them; entries that
    are not readable files are recorded in `report`. For executors that load files in parallel
    (proctor.scale) and must reproduce the sequential order."""
    base = root if root.is_dir() else root.parent
    for file in _walk(root, report, base, set()):
        yield file, file.relative_to(base).as_posix()


def load_file(
    file: Path,
    rel: str,
    *,
    text_field: str = DEFAULT_TEXT_FIELD,
    title_field: str | None = None,
    id_field: str | None = None,
    extensions: list[str] | None = None,
    report: LoadReport,
) -> Iterator[Document]:
    """The documents of one file (`rel` is its source name); skips go to `report`. Counters are the
    caller's: `iter_documents` is this over `iter_corpus_files` plus the counting."""
    return _load_file(file, rel, _options(text_field, title_field, id_field, extensions), report)


def _generate(root: Path, opts: _Options, report: LoadReport) -> Iterator[Document]:
    for file, rel in iter_corpus_files(root, report):
        report.files_seen += 1
        produced = 0
        for doc in _load_file(file, rel, opts, report):
            produced += 1
            report.documents += 1
            yield doc
        if produced:
            report.files_loaded += 1


def _walk(path: Path, report: LoadReport, base: Path, seen: set[str]) -> Iterator[Path]:
    """Files in sorted name order, depth first; hidden entries skipped; symlink loops followed once."""
    if not path.is_dir():
        yield path
        return
    real = os.path.realpath(path)
    if real in seen:
        return
    seen.add(real)
    try:
        entries = sorted(os.scandir(path), key=lambda e: e.name)
    except OSError as e:
        report.skip(_rel(path, base), f"cannot list directory ({e.strerror or e})")
        return
    for entry in entries:
        if entry.name.startswith("."):
            continue
        p = Path(entry.path)
        if entry.is_dir():
            yield from _walk(p, report, base, seen)
        elif entry.is_file():
            yield p
        else:
            report.skip(_rel(p, base), "not a regular file (broken link, socket or device)")


def _rel(p: Path, base: Path) -> str:
    try:
        return p.relative_to(base).as_posix() or "."
    except ValueError:
        return str(p)


def make_document(
    source: str, text: str, title: str | None = None, metadata: dict[str, Any] | None = None
) -> Document:
    """A Document whose id hashes source and text: same file content at the same place, same id."""
    return Document(
        doc_id=content_id(source + "\n" + text, "d_"),
        source=source,
        text=text,
        title=title,
        metadata=metadata or {},
    )


_Loader = Callable[[Path, str, _Options, LoadReport], Iterator[Document]]


def _load_file(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    ext = file.suffix.lower()
    if opts.extensions is not None and ext not in opts.extensions:
        report.skip(
            rel,
            f"extension '{ext or '(none)'}' is not in corpus.extensions "
            f"({', '.join(sorted(opts.extensions))})",
        )
        return
    try:
        size = file.stat().st_size
        with open(file, "rb") as f:
            head = f.read(SNIFF_BYTES)
    except OSError as e:
        report.skip(rel, f"cannot read file ({e.strerror or e})")
        return
    if size == 0:
        report.skip(rel, "empty file")
        return
    if ext == ".pdf":
        yield from _load_pdf(file, rel, opts, report)
        return
    if head.startswith(_UTF16_BOMS) and _decodes_as_utf16(head):
        report.skip(rel, "UTF-16 text; convert it to UTF-8")
        return
    if b"\x00" in head:
        report.skip(rel, "binary file (NUL bytes in the first 8 KB)")
        return
    loader = _LOADERS.get(ext)
    if loader is None:
        if opts.extensions is None:
            report.skip(
                rel,
                f"unsupported extension '{ext or '(none)'}' (supported: {', '.join(SUPPORTED_EXTENSIONS)}); "
                "list it in corpus.extensions to read it as plain text",
            )
            return
        loader = _load_text  # the user asked for this extension explicitly
    yield from loader(file, rel, opts, report)


# ---------------------------------------------------------------- text decoding


def _not_utf8(offset: int) -> str:
    return f"not UTF-8 text (decode error at byte {offset}); convert it to UTF-8"


def _read_text(file: Path, rel: str, report: LoadReport) -> str | None:
    """Whole-file strict UTF-8 (BOM allowed). Never falls back to latin-1: mojibake would be examined."""
    try:
        data = file.read_bytes()
    except OSError as e:
        report.skip(rel, f"cannot read file ({e.strerror or e})")
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        report.skip(rel, _not_utf8(e.start))
        return None
    return _normalise_newlines(text.removeprefix("\ufeff"))


def _utf8_error_offset(file: Path) -> int | None:
    """Byte offset of the first invalid UTF-8 sequence, streaming so big jsonl/csv files are not loaded.

    Checked before yielding any record so a bad file is skipped whole, not half-loaded.
    """
    dec = codecs.getincrementaldecoder("utf-8")("strict")
    consumed = 0
    with open(file, "rb") as f:
        while block := f.read(1 << 20):
            pending = len(dec.getstate()[0])
            try:
                dec.decode(block)
            except UnicodeDecodeError as e:
                return consumed - pending + e.start
            consumed += len(block)
        pending = len(dec.getstate()[0])
        try:
            dec.decode(b"", final=True)
        except UnicodeDecodeError as e:
            return consumed - pending + e.start
    return None


def _check_streamable(file: Path, rel: str, report: LoadReport) -> bool:
    try:
        offset = _utf8_error_offset(file)
    except OSError as e:
        report.skip(rel, f"cannot read file ({e.strerror or e})")
        return False
    if offset is not None:
        report.skip(rel, _not_utf8(offset))
        return False
    return True


def _decodes_as_utf16(head: bytes) -> bool:
    try:
        head[: len(head) // 2 * 2].decode("utf-16")
    except UnicodeDecodeError:
        return False
    return True


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ---------------------------------------------------------------- plain formats


def _load_text(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    text = _read_text(file, rel, report)
    if text is None:
        return
    if not text.strip():
        report.skip(rel, "empty file (whitespace only)")
        return
    yield make_document(rel, text, None, {"format": file.suffix.lower().lstrip(".") or "txt"})


_FRONT_MATTER = re.compile(r"\A---\n.*?\n---[ \t]*\n", re.DOTALL)
_MD_TITLE = re.compile(r"^#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)


def _load_markdown(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    text = _read_text(file, rel, report)
    if text is None:
        return
    text = _FRONT_MATTER.sub("", text, count=1)  # YAML front matter is site metadata, not content
    if not text.strip():
        report.skip(rel, "empty file (whitespace only)")
        return
    m = _MD_TITLE.search(text)
    yield make_document(rel, text, m.group(1) if m else None, {"format": "md"})


_LINE_BREAK = "\ue000"  # private-use marker for a hard line break that whitespace collapsing must keep
_HTML_DROP = ["script", "style", "noscript", "template", "svg", "head"]
_HTML_BLOCKS = [
    "p", "div", "section", "article", "main", "header", "footer", "nav", "aside", "h1", "h2", "h3", "h4",
    "h5", "h6", "li", "ul", "ol", "dl", "dt", "dd", "table", "tr", "pre", "blockquote", "figure",
    "figcaption", "hr", "form", "details", "summary", "address", "body", "caption",
]  # fmt: skip


def html_to_text(html: str) -> tuple[str, str | None]:
    """Visible text: block elements become paragraphs (blank lines), inline elements stay inline, table
    rows become lines with cells joined by " | " (timetables and price lists stay readable)."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(html, "html.parser")
    title_tag = soup.find("title")
    title = (title_tag.get_text(" ", strip=True) or None) if title_tag else None
    for tag in soup.find_all(_HTML_DROP):
        tag.decompose()
    for row in soup.find_all("tr"):
        cells = row.find_all(["td", "th"])
        if cells:
            row.replace_with(" | ".join(c.get_text(" ", strip=True) for c in cells) + _LINE_BREAK)
    for tag in soup.find_all("br"):
        tag.replace_with(_LINE_BREAK)
    for tag in soup.find_all(_HTML_BLOCKS):
        tag.insert_before("\n\n")
        tag.insert_after("\n\n")
    paragraphs = []
    for block in re.split(r"\n\s*\n", soup.get_text()):
        lines = (" ".join(line.split()) for line in block.split(_LINE_BREAK))
        para = "\n".join(line for line in lines if line)
        if para:
            paragraphs.append(para)
    if title is None:
        h1 = soup.find("h1")
        title = (h1.get_text(" ", strip=True) or None) if h1 else None
    return "\n\n".join(paragraphs), title


def _load_html(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    raw = _read_text(file, rel, report)
    if raw is None:
        return
    text, title = html_to_text(raw)
    if not text:
        report.skip(rel, "HTML has no visible text")
        return
    yield make_document(rel, text, title, {"format": "html"})


def _load_pdf(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    from pypdf import PdfReader

    try:
        reader = PdfReader(str(file))
        if reader.is_encrypted:
            try:
                ok = bool(reader.decrypt(""))
            except Exception:
                ok = False
            if not ok:
                report.skip(rel, "encrypted PDF; save an unencrypted copy")
                return
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        meta_title = reader.metadata.title if reader.metadata else None
    except Exception as e:  # pypdf raises many exception types on damaged files
        report.skip(rel, f"unreadable PDF ({type(e).__name__}: {str(e)[:200]})")
        return
    text = _normalise_newlines("\n\n".join(p for p in pages if p))
    if not text.strip():
        report.skip(rel, "PDF has no extractable text (scanned images?); run OCR on it first")
        return
    title = meta_title.strip() if isinstance(meta_title, str) and meta_title.strip() else None
    yield make_document(rel, text, title, {"format": "pdf", "pages": len(pages)})


# ---------------------------------------------------------------- record formats


@dataclass
class _RecordSkips:
    """Per-file tally of unusable records, reported as one line per reason (a bad export can have
    millions of identical problems; the report must stay readable)."""

    unit: str  # "line" or "row"
    by_reason: dict[str, list[int]] = field(default_factory=dict)
    detail: dict[str, str] = field(default_factory=dict)

    def add(self, reason: str, where: int, detail: str = "") -> None:
        self.by_reason.setdefault(reason, []).append(where)
        if detail:
            self.detail.setdefault(reason, detail)

    def flush(self, rel: str, report: LoadReport) -> None:
        for reason, places in self.by_reason.items():
            shown = ", ".join(str(n) for n in places[:_MAX_LISTED_ROWS])
            more = f" and {len(places) - _MAX_LISTED_ROWS} more" if len(places) > _MAX_LISTED_ROWS else ""
            unit = self.unit if len(places) == 1 else self.unit + "s"
            detail = f" ({self.detail[reason]})" if reason in self.detail else ""
            report.skip(rel, f"{unit} {shown}{more}: {reason}{detail}; skipped")


def _scalar_fields(record: dict[str, Any], exclude: set[str]) -> dict[str, Any]:
    return {
        k: v for k, v in record.items()
        if isinstance(k, str) and k not in exclude and (v is None or isinstance(v, str | int | float | bool))
    }  # fmt: skip


def _record_to_document(
    record: Any, source: str, opts: _Options, fmt: str, row: int | None
) -> Document | str:
    """A Document, or the reason the record cannot be one."""
    if isinstance(record, str):
        record = {opts.text_field: record}
    if not isinstance(record, dict):
        return f"not a JSON object (got {type(record).__name__})"
    if opts.text_field not in record:
        keys = ", ".join(str(k) for k in list(record)[:10])
        return f"no '{opts.text_field}' field (fields: {keys}); set corpus.text_field"
    text = record[opts.text_field]
    if not isinstance(text, str):
        return f"'{opts.text_field}' is not a string"
    text = _normalise_newlines(text)
    if not text.strip():
        return f"empty '{opts.text_field}'"
    title = record.get(opts.title_field) if opts.title_field else None
    meta: dict[str, Any] = {"format": fmt}
    if row is not None:
        meta["row"] = row
    if opts.id_field and record.get(opts.id_field) is not None:
        meta["record_id"] = str(record[opts.id_field])
    exclude = {opts.text_field, *(f for f in (opts.title_field, opts.id_field) if f)}
    fields = _scalar_fields(record, exclude)
    if fields:
        meta["fields"] = fields
    return make_document(source, text, str(title) if title not in (None, "") else None, meta)


def _load_jsonl(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    if not _check_streamable(file, rel, report):
        return
    skips = _RecordSkips("line")
    records = 0

    def bad(b: BadRecord) -> None:
        nonlocal records
        records += 1
        skips.add("malformed JSON", b.number, b.problem)

    try:
        for rec in read_records(file, field="corpus.path", format="jsonl", on_bad=bad):
            records += 1
            doc = _record_to_document(rec.data, f"{rel}#row-{rec.number}", opts, "jsonl", rec.number)
            if isinstance(doc, str):
                skips.add(doc, rec.number)
            else:
                yield doc
    finally:
        skips.flush(rel, report)
    if records == 0:
        report.skip(rel, "empty file (no JSON lines)")


def _load_json(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    raw = _read_text(file, rel, report)
    if raw is None:
        return
    if not raw.strip():
        report.skip(rel, "empty file (whitespace only)")
        return
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as e:
        report.skip(
            rel, f"malformed JSON ({e.msg} at line {e.lineno} column {e.colno}); fix it or use JSON Lines"
        )
        return
    del raw
    if isinstance(data, dict):
        doc = _record_to_document(data, rel, opts, "json", None)
        if isinstance(doc, str):
            report.skip(rel, doc)
        else:
            yield doc
        return
    if not isinstance(data, list):
        report.skip(
            rel, f"top-level JSON is a {type(data).__name__}; expected an object or a list of objects"
        )
        return
    if not data:
        report.skip(rel, "empty JSON list")
        return
    skips = _RecordSkips("record")
    try:
        for i, record in enumerate(data, start=1):
            doc = _record_to_document(record, f"{rel}#row-{i}", opts, "json", i)
            if isinstance(doc, str):
                skips.add(doc, i)
            else:
                yield doc
    finally:
        skips.flush(rel, report)


def _load_csv(file: Path, rel: str, opts: _Options, report: LoadReport) -> Iterator[Document]:
    if not _check_streamable(file, rel, report):
        return
    skips = _RecordSkips("row")
    try:
        try:
            columns = csv_columns(file)
        except csv.Error as e:
            report.skip(rel, f"malformed CSV header ({e})")
            return
        if not columns:
            report.skip(rel, "empty CSV (no header row)")
            return
        if opts.text_field not in columns:
            shown = ", ".join(columns[:15])
            report.skip(
                rel,
                f"no '{opts.text_field}' column (columns: {shown}); set corpus.text_field to the text column",
            )
            return
        row = 0
        try:
            for row, rec in enumerate(read_records(file, field="corpus.path", format="csv"), start=1):
                doc = _record_to_document(rec.data, f"{rel}#row-{row}", opts, "csv", row)
                if isinstance(doc, str):
                    skips.add(doc, row)
                else:
                    yield doc
        except csv.Error as e:
            report.skip(rel, f"malformed CSV after row {row} ({e}); rest of file skipped")
        if row == 0:
            report.skip(rel, "CSV has a header but no rows")
    finally:
        skips.flush(rel, report)


_LOADERS: dict[str, _Loader] = {
    ".txt": _load_text,
    ".text": _load_text,
    ".md": _load_markdown,
    ".markdown": _load_markdown,
    ".html": _load_html,
    ".htm": _load_html,
    ".jsonl": _load_jsonl,
    ".ndjson": _load_jsonl,
    ".json": _load_json,
    ".csv": _load_csv,
}
SUPPORTED_EXTENSIONS: tuple[str, ...] = (*_LOADERS, ".pdf")
