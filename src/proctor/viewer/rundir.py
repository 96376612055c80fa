"""Run folders under the viewer's root: safe resolution of a run id to its folder, read-only access to its
run store, and the one-line summary the runs list shows.

Only direct children of the root that hold a `run.sqlite` are runs; a run id is a folder name, never a
path, so nothing outside the root is ever opened.
"""

from __future__ import annotations

import json
import re
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

RUN_FILE = "run.sqlite"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class RunNotFound(LookupError):
    """The id names no run folder under the root (or is not a plain folder name)."""


def resolve_run(root: Path, run_id: str) -> Path:
    """The folder of run `run_id` under `root`; RunNotFound for anything else (`..`, `/`, links out)."""
    if not _RUN_ID.match(run_id) or run_id in (".", ".."):
        raise RunNotFound(run_id)
    root = root.resolve()
    folder = (root / run_id).resolve()
    if folder.parent != root or not (folder / RUN_FILE).is_file():
        raise RunNotFound(run_id)
    return folder


def connect_run(folder: Path) -> sqlite3.Connection:
    """A read-only connection to a run store (the viewer never writes to it)."""
    uri = f"{(folder / RUN_FILE).resolve().as_uri()}?mode=ro"
    conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA query_only=1")
    return conn


def store_stamp(folder: Path) -> str:
    """Changes whenever the run store (or its write-ahead log) is written."""
    parts = []
    for name in (RUN_FILE, f"{RUN_FILE}-wal"):
        p = folder / name
        if p.exists():
            st = p.stat()
            parts.append(f"{name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


def has_column(conn: sqlite3.Connection, table: str, column: str) -> bool:
    return column in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}


@dataclass
class Headline:
    """One headline estimate: a metric for one subject (usually a candidate)."""

    name: str
    subject: str
    value: float | None
    lo: float | None
    hi: float | None
    n: int | None


@dataclass
class RunSummary:
    run_id: str
    protocol: str | None
    name: str | None
    status: str | None
    started: float | None
    finished: float | None
    config_hash: str | None
    calls: int
    cached_calls: int
    cost_usd: float
    items: int
    candidates: list[str] = field(default_factory=list)
    headlines: list[Headline] = field(default_factory=list)
    has_report: bool = False


HEADLINE_LIMIT = 8


def _headlines(conn: sqlite3.Connection) -> list[Headline]:
    """Accuracy-like metrics first (the ones a report plots), then the others, at most HEADLINE_LIMIT."""
    rows = conn.execute(
        "SELECT name, subject, value, lo, hi, n FROM metrics ORDER BY"
        " CASE WHEN name LIKE 'accuracy%' THEN 0 WHEN name LIKE 'f1%' THEN 1 ELSE 2 END, name, subject"
        " LIMIT ?",
        (HEADLINE_LIMIT,),
    )
    return [Headline(**dict(r)) for r in rows]


def config_of(conn: sqlite3.Connection) -> dict[str, Any]:
    row = conn.execute("SELECT config_json FROM runs ORDER BY started DESC LIMIT 1").fetchone()
    if row is None or not row[0]:
        return {}
    try:
        cfg = json.loads(row[0])
    except json.JSONDecodeError:
        return {}
    return cfg if isinstance(cfg, dict) else {}


def candidate_names(conn: sqlite3.Connection) -> list[str]:
    cands = config_of(conn).get("candidates") or []
    return [str(c["name"]) for c in cands if isinstance(c, dict) and c.get("name")]


def summarize(folder: Path) -> RunSummary:
    conn = connect_run(folder)
    try:
        run = conn.execute("SELECT * FROM runs ORDER BY started DESC LIMIT 1").fetchone()
        calls = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(cached), 0),"
            " COALESCE(SUM(CASE WHEN cached=0 THEN cost_usd ELSE 0 END), 0) FROM model_calls"
        ).fetchone()
        n_items = conn.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        cfg = config_of(conn)
        return RunSummary(
            run_id=folder.name,
            protocol=run["protocol"] if run else None,
            name=cfg.get("name") if isinstance(cfg.get("name"), str) else None,
            status=run["status"] if run else None,
            started=run["started"] if run else None,
            finished=run["finished"] if run else None,
            config_hash=run["config_hash"] if run else None,
            calls=int(calls[0]),
            cached_calls=int(calls[1]),
            cost_usd=float(calls[2]),
            items=int(n_items),
            candidates=candidate_names(conn),
            headlines=_headlines(conn),
            has_report=(folder / "report.html").is_file(),
        )
    finally:
        conn.close()


def list_runs(root: Path) -> list[RunSummary]:
    """Every run folder directly under `root`, newest first; a folder whose store cannot be read is left
    out (a run being created has no tables yet)."""
    out: list[RunSummary] = []
    if not root.is_dir():
        return out
    for folder in root.iterdir():
        if not (folder / RUN_FILE).is_file() or not _RUN_ID.match(folder.name):
            continue
        try:
            out.append(summarize(folder))
        except sqlite3.Error:
            continue
    out.sort(key=lambda r: r.started or 0.0, reverse=True)
    return out
