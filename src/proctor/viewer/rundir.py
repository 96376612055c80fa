"""Run folders under the viewer's root: safe resolution of a run id to its folder, its run record opened
read-only (`proctor.store.record.RunRecord`), and the one-line summary the runs list shows.

Only direct children of the root that hold a run store are runs; a run id is a folder name, never a
path, so nothing outside the root is ever opened. No link is followed: a run folder that is a symbolic
link, or whose run store (or one of SQLite's side files) is a link or hard-linked, is a broken run — listed
with the reason, its pages an error page — and so is a store SQLite cannot read or that is not a proctor
run store. The runs list reuses each run's summary while its store is unchanged (`SummaryCache`).
"""

from __future__ import annotations

import os
import re
import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.store.index import store_stamp
from proctor.store.record import RUN_FILE, MetricRecord, RunRecord
from proctor.store.safe_files import (
    UnsafeStoreFile,
    check_folder,
    check_plain,
    check_sqlite,
    check_sqlite_header,
)

__all__ = [
    "BrokenRun",
    "RunNotFound",
    "RunSummary",
    "SummaryCache",
    "list_runs",
    "open_run",
    "resolve_run",
    "store_stamp",
    "summarize",
]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class RunNotFound(LookupError):
    """The id names no run folder under the root (or is not a plain folder name)."""


class BrokenRun(Exception):
    """A run folder the viewer refuses or cannot read; `reason` says why, for the user."""

    def __init__(self, run_id: str, reason: str) -> None:
        super().__init__(f"{run_id}: {reason}")
        self.run_id = run_id
        self.reason = reason


def resolve_run(root: Path, run_id: str) -> Path:
    """The folder of run `run_id` under `root`; RunNotFound for anything that is not a run folder's name
    (`..`, `/`, a missing folder), BrokenRun for a folder that is a link or holds a linked store."""
    if not _RUN_ID.match(run_id) or run_id in (".", ".."):
        raise RunNotFound(run_id)
    folder = root.resolve() / run_id
    if not os.path.lexists(folder / RUN_FILE) and not os.path.islink(folder):
        raise RunNotFound(run_id)
    try:
        check_folder(folder)
        check_sqlite(folder / RUN_FILE, must_exist=True)
    except UnsafeStoreFile as e:
        raise BrokenRun(run_id, str(e)) from None
    return folder


def open_run(folder: Path) -> RunRecord:
    """The run's record, read-only (the viewer never writes to the run store); its store and side files
    are checked to be the folder's own plain files first (UnsafeStoreFile else)."""
    check_sqlite(folder / RUN_FILE, must_exist=True)
    return RunRecord(folder)


def probe(folder: Path) -> None:
    """Raise what reading the run's store raises (`READ_ERRORS`) when it is not a readable proctor run
    store: a cheap look at its header and its runs table, not a count of its items."""
    check_sqlite_header(folder / RUN_FILE)
    with open_run(folder) as run:
        run.info()


def broken_reason(error: BaseException) -> str:
    """What to tell the user about a run store that could not be read."""
    if isinstance(error, UnsafeStoreFile):
        return f"refused: {error}"
    text = str(error)
    if isinstance(error, sqlite3.Error):
        if "no such table" in text or "no such column" in text:
            return f"{RUN_FILE} is not a proctor run store, or an empty one ({text})"
        return f"{RUN_FILE} cannot be read: {text}"
    return f"{RUN_FILE} holds data proctor cannot read ({type(error).__name__})"


# What reading a broken store can raise: SQLite's errors, undecodable JSON and rows that fail validation
# (ValueError), and the refusals of `proctor.store.safe_files`.
READ_ERRORS = (sqlite3.Error, ValueError, UnsafeStoreFile)


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
    headlines: list[MetricRecord] = field(default_factory=list)
    has_report: bool = False
    failure: str | None = None  # why a failed (or interrupted) run stopped
    broken: str | None = None  # why the run cannot be shown (the other fields are then empty)

    @classmethod
    def of_broken(cls, run_id: str, reason: str) -> RunSummary:
        return cls(run_id, None, None, None, None, None, None, 0, 0, 0.0, 0, broken=reason)


HEADLINE_LIMIT = 8


def config_of(run: RunRecord) -> dict[str, Any]:
    """The stored config as it was written (a summary shows runs whose config no longer validates too)."""
    try:
        cfg = run.config_data()
    except ValueError:  # not JSON
        return {}
    return cfg if isinstance(cfg, dict) else {}


def candidate_names(run: RunRecord) -> list[str]:
    cands = config_of(run).get("candidates") or []
    return [str(c["name"]) for c in cands if isinstance(c, dict) and c.get("name")]


def summarize(folder: Path) -> RunSummary:
    """The runs list's line for a run; raises what reading a broken store raises (`READ_ERRORS`)."""
    check_sqlite_header(folder / RUN_FILE)
    with open_run(folder) as run:
        info = run.info()
        totals = run.totals()
        cfg = config_of(run)
        return RunSummary(
            run_id=folder.name,
            protocol=(info.protocol or None) if info else None,
            name=cfg.get("name") if isinstance(cfg.get("name"), str) else None,
            status=info.status if info else None,
            started=info.started if info else None,
            finished=info.finished if info else None,
            config_hash=(info.config_hash or None) if info else None,
            calls=totals.calls,
            cached_calls=totals.cached_calls,
            cost_usd=totals.spent_usd,
            items=totals.items,
            candidates=candidate_names(run),
            headlines=run.headline_metrics(HEADLINE_LIMIT),
            has_report=has_report(folder),
            failure=_failure(run) if info and info.status in ("failed", "interrupted") else None,
        )


def _failure(run: RunRecord) -> str | None:
    """The message the runner stored when the run stopped on an error."""
    data = run.artifact_data("failure")
    if not isinstance(data, dict):
        if run.process_gone():
            return "its process ended without marking it (killed?); continue it with --resume"
        return None
    return str(data.get("message") or data.get("error") or "") or None


def has_report(folder: Path) -> bool:
    """Whether the run folder holds its own report.html (a link to one does not count)."""
    try:
        return check_plain(folder / REPORT_FILE)
    except UnsafeStoreFile:
        return False


REPORT_FILE = "report.html"


class SummaryCache:
    """Run summaries by run id, each kept while its store's stamp (size and modification time of the store
    and its write-ahead log) is unchanged, so a visit of the runs list does not recount every run."""

    def __init__(self) -> None:
        self._by_run: dict[str, tuple[str, RunSummary]] = {}
        self._guard = threading.Lock()

    def get(self, folder: Path) -> RunSummary:
        stamp = store_stamp(folder)
        with self._guard:
            hit = self._by_run.get(folder.name)
        if hit is not None and hit[0] == stamp:
            return hit[1]
        summary = summarize(folder)
        with self._guard:
            self._by_run[folder.name] = (stamp, summary)
        return summary

    def is_current(self, folder: Path) -> bool:
        """Whether the run's summary was read from its store as it is now (so the store reads)."""
        with self._guard:
            hit = self._by_run.get(folder.name)
        return hit is not None and hit[0] == store_stamp(folder)

    def forget_except(self, run_ids: set[str]) -> None:
        with self._guard:
            self._by_run = {k: v for k, v in self._by_run.items() if k in run_ids}


def list_runs(root: Path, cache: SummaryCache | None = None) -> list[RunSummary]:
    """Every run folder directly under `root`, newest first, broken ones (refused or unreadable, with the
    reason) last. A folder entry that is a symbolic link is listed as broken, never followed."""
    out: list[RunSummary] = []
    root = root.resolve()
    if not root.is_dir():
        return out
    for folder in sorted(root.iterdir()):
        if not _RUN_ID.match(folder.name):
            continue
        if not folder.is_symlink() and not (folder.is_dir() and os.path.lexists(folder / RUN_FILE)):
            continue  # not a run folder (no link is followed to find out)
        try:
            check_folder(folder)
            check_sqlite(folder / RUN_FILE, must_exist=True)
            summary = cache.get(folder) if cache is not None else summarize(folder)
        except READ_ERRORS as e:
            summary = RunSummary.of_broken(folder.name, broken_reason(e))
        out.append(summary)
    if cache is not None:
        cache.forget_except({r.run_id for r in out})
    out.sort(key=lambda r: (r.broken is None, r.started or 0.0), reverse=True)
    return out
