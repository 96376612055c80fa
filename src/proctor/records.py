"""The one records reader: JSONL, JSON, CSV/TSV and Parquet files as a stream of records.

Every file of records a user hands proctor — a corpus in JSONL/CSV, KIEval seed questions, RECKON
labels and carried-over units, an exam file — is read here, so they all accept the same formats, skip a
UTF-8 BOM, blank lines (and, where asked, `#` comment lines) the same way, and report a malformed record
the same way: either a one-paragraph `UserError` naming the config field, the file, the line and the fix,
or, for readers that count and skip (the corpus), a call to `on_bad`. JSONL and CSV are streamed (memory
bounded by one record), Parquet is read in batches.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from proctor.errors import UserError

Format = Literal["auto", "jsonl", "json", "csv", "tsv", "parquet"]
Header = Literal["yes", "no", "auto"]
EXTENSIONS: dict[str, Format] = {
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".tsv": "tsv",
    ".tab": "tsv",
    ".parquet": "parquet",
}
# Lists a JSON file may wrap its records in.
JSON_CONTAINERS = ("data", "questions", "rows", "examples", "test")
_CSV_FIELD_LIMIT = 2**31 - 1  # a cell may hold a whole document; fits a C long everywhere


@dataclass(frozen=True)
class Record:
    """One record and where it stands: `number` is the line (JSONL, CSV) or position (JSON, Parquet)."""

    number: int
    where: str
    data: Any


@dataclass(frozen=True)
class BadRecord:
    number: int
    where: str
    problem: str


def format_of(path: Path, fmt: Format, *, field: str, format_field: str | None = None) -> Format:
    """The file's format: `fmt` unless "auto", else from the extension (a UserError naming `field`)."""
    if fmt != "auto":
        return fmt
    found = EXTENSIONS.get(path.suffix.lower())
    if found is None:
        how = f"set {format_field}" if format_field else "convert it"
        raise UserError(
            f"{field}: cannot tell the format of {path} from its extension '{path.suffix}'. Use a "
            f"{', '.join(EXTENSIONS)} file, or {how}."
        )
    return found


def read_records(
    path: str | Path,
    *,
    field: str,
    format: Format = "auto",
    format_field: str | None = None,
    comments: bool = False,
    csv_header: Header = "yes",
    is_header: Callable[[list[str]], bool] | None = None,
    on_bad: Callable[[BadRecord], None] | None = None,
) -> Iterator[Record]:
    """Records of the file at `path`, in order. `field` names the config field for messages (and
    `format_field` the one that sets the format, if any).

    CSV/TSV: with a header (`csv_header: yes`, or `auto` and `is_header(first row)`) each record is a
    dict of column -> text, else a list of cells. JSON: a list of records, an object wrapping one
    (`data`, `questions`, ...), or a single object (one record). A malformed record goes to `on_bad`
    when given (and is skipped), else raises a UserError.
    """
    p = Path(path).expanduser()
    if not p.is_file():
        raise UserError(
            f"{field}: file '{p}' not found. Give the path (absolute, or relative to the config "
            f"file's folder)."
        )
    fmt = format_of(p, format, field=field, format_field=format_field)

    def bad(number: int, where: str, problem: str) -> None:
        if on_bad is None:
            raise UserError(f"{field}: {p}, {where}: {problem}. Fix or remove that record.")
        on_bad(BadRecord(number, where, problem))

    if fmt == "jsonl":
        yield from _jsonl(p, comments, bad)
    elif fmt == "json":
        yield from _json(p, bad)
    elif fmt == "parquet":
        yield from _parquet(p, field)
    else:
        yield from _csv(p, "\t" if fmt == "tsv" else ",", csv_header, is_header)


def _jsonl(path: Path, comments: bool, bad: Callable[[int, str, str], None]) -> Iterator[Record]:
    with open(path, encoding="utf-8-sig") as f:
        for n, line in enumerate(f, 1):
            text = line.strip()
            if not text or (comments and text.startswith("#")):
                continue
            try:
                data = json.loads(text)
            except json.JSONDecodeError as e:
                bad(n, f"line {n}", f"not valid JSON ({e.msg} at column {e.colno})")
                continue
            yield Record(n, f"line {n}", data)


def _json(path: Path, bad: Callable[[int, str, str], None]) -> Iterator[Record]:
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except json.JSONDecodeError as e:
        bad(0, f"line {e.lineno}", f"not valid JSON ({e.msg} at column {e.colno})")
        return
    if isinstance(data, dict):
        wrapped = next((data[k] for k in JSON_CONTAINERS if isinstance(data.get(k), list)), None)
        data = wrapped if wrapped is not None else [data]
    if not isinstance(data, list):
        bad(0, "top level", f"a JSON {type(data).__name__}, not an object or a list of objects")
        return
    for i, rec in enumerate(data):
        yield Record(i + 1, f"record {i + 1}", rec)


def _parquet(path: Path, field: str) -> Iterator[Record]:
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except Exception as e:
        raise UserError(f"{field}: cannot read {path} as Parquet ({e}). Check the file.") from None
    n = 0
    for batch in pf.iter_batches(batch_size=1024):
        for rec in batch.to_pylist():
            n += 1
            yield Record(n, f"row {n}", rec)


def _csv(
    path: Path, delimiter: str, header: Header, is_header: Callable[[list[str]], bool] | None
) -> Iterator[Record]:
    if csv.field_size_limit() < _CSV_FIELD_LIMIT:
        # Process-wide and raised only (never restored): lowering it could break another open reader.
        csv.field_size_limit(_CSV_FIELD_LIMIT)
    with open(path, encoding="utf-8-sig", newline="") as f:
        rows = (r for r in csv.reader(f, delimiter=delimiter) if any(c.strip() for c in r))
        first = next(rows, None)
        if first is None:
            return
        names = [c.strip() for c in first]
        with_header = header == "yes" or (header == "auto" and is_header is not None and is_header(names))
        if not with_header:
            yield Record(1, "line 1", first)
        for n, r in enumerate(rows, 2):
            yield Record(n, f"line {n}", dict(zip(names, r, strict=False)) if with_header else r)


def csv_columns(path: Path, delimiter: str = ",") -> list[str] | None:
    """The header row of a CSV file (None when the file is empty)."""
    with open(path, encoding="utf-8-sig", newline="") as f:
        first = next(csv.reader(f, delimiter=delimiter), None)
    return None if first is None else [c.strip() for c in first]
