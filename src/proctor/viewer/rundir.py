"""Run folders under the viewer's root: safe resolution of a run id to its folder, its run record opened
read-only (`proctor.store.record.RunRecord`), and the one-line summary the runs list shows.

Only direct children of the root that hold a run store are runs; a run id is a folder name, never a
path, so nothing outside the root is ever opened.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from proctor.store.index import store_stamp
from proctor.store.record import MetricRecord, RunRecord, StoreError, is_run_folder

__all__ = ["RunNotFound", "RunSummary", "list_runs", "open_run", "resolve_run", "store_stamp", "summarize"]

_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,199}$")


class RunNotFound(LookupError):
    """The id names no run folder under the root (or is not a plain folder name)."""


def resolve_run(root: Path, run_id: str) -> Path:
    """The folder of run `run_id` under `root`; RunNotFound for anything else (`..`, `/`, links out)."""
    if not _RUN_ID.match(run_id) or run_id in (".", ".."):
        raise RunNotFound(run_id)
    root = root.resolve()
    folder = (root / run_id).resolve()
    if folder.parent != root or not is_run_folder(folder):
        raise RunNotFound(run_id)
    return folder


def open_run(folder: Path) -> RunRecord:
    """The run's record, read-only (the viewer never writes to the run store)."""
    return RunRecord(folder)


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
            has_report=(folder / "report.html").is_file(),
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


def list_runs(root: Path) -> list[RunSummary]:
    """Every run folder directly under `root`, newest first; a folder whose store cannot be read is left
    out (a run being created has no tables yet)."""
    out: list[RunSummary] = []
    if not root.is_dir():
        return out
    for folder in root.iterdir():
        if not is_run_folder(folder) or not _RUN_ID.match(folder.name):
            continue
        try:
            out.append(summarize(folder))
        except StoreError:
            continue
    out.sort(key=lambda r: r.started or 0.0, reverse=True)
    return out
