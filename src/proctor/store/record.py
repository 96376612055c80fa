"""The typed record of a run, read from its run store: what reports, the viewer, suites and users' code read.

`RunRecord` opens `run.sqlite` read-only and hands back typed rows — the run's info, its resolved config,
items (with `payloads(Model)` for typed payloads), judgments, model calls, metrics and artifacts. The
protocol's result model is attached by `proctor.load_run` (`proctor.kit.record`), which knows the
protocols; this module knows only the store's tables. No other module reads `run.sqlite`.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict

RUN_FILE = "run.sqlite"
P = TypeVar("P", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)


class RunInfo(BaseModel):
    run_id: str
    protocol: str
    config_hash: str
    status: str
    started: float | None = None
    finished: float | None = None
    proctor_version: str | None = None


class ItemRecord(BaseModel):
    """One stored unit of work: its key, kind, status (`done`, `error`, `pending`), its payload as stored
    (read it typed with `payload(Model)`), and for a failure the message and cause."""

    model_config = ConfigDict(frozen=True)

    key: str
    kind: str
    status: str
    data: Any = None
    error: str | None = None
    error_cause: str | None = None
    seq: int | None = None

    def payload(self, model: type[P]) -> P:
        return model.model_validate(self.data)


class JudgmentRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    item_key: str
    judge: str
    verdict: str | None = None
    score: float | None = None
    reason: str | None = None
    error: str | None = None
    error_cause: str | None = None
    data: Any = None


class CallRow(BaseModel):
    """One model call as recorded: who made it for which item, tokens, cost, latency, cache, error."""

    model_config = ConfigDict(frozen=True)

    id: int
    provider: str | None = None
    model: str | None = None
    role: str | None = None
    item_key: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost_usd: float | None = None
    latency_s: float | None = None
    cached: bool = False
    attempts: int | None = None
    error: str | None = None
    created: float | None = None


class MetricRecord(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    subject: str
    value: float | None = None
    lo: float | None = None
    hi: float | None = None
    n: int | None = None
    data: Any = None


class RunRecord:
    """Read-only typed access to one run folder's store."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        path = self.folder / RUN_FILE
        if not path.is_file():
            raise FileNotFoundError(path)
        uri = f"{path.resolve().as_uri()}?mode=ro"
        self._conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA query_only=1")

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> RunRecord:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def connection(self) -> sqlite3.Connection:
        """The read-only connection, for paged queries over very large runs (the viewer's item lists)."""
        return self._conn

    def has_column(self, table: str, column: str) -> bool:
        return column in {r[1] for r in self._conn.execute(f"PRAGMA table_info({table})")}

    # --- the run ------------------------------------------------------------------------------------
    def info(self) -> RunInfo | None:
        row = self._conn.execute("SELECT * FROM runs ORDER BY started DESC LIMIT 1").fetchone()
        if row is None:
            return None
        d = dict(row)
        d.pop("config_json", None)
        return RunInfo.model_validate({k: ("" if v is None and k in ("protocol", "config_hash") else v)
                                       for k, v in d.items()})  # fmt: skip

    def config_data(self) -> dict[str, Any] | None:
        """The resolved config as stored when the run started (validate it with `RunConfig`)."""
        row = self._conn.execute("SELECT config_json FROM runs ORDER BY started DESC LIMIT 1").fetchone()
        return json.loads(row[0]) if row and row[0] else None

    # --- items and judgments ----------------------------------------------------------------------
    def items(self, kind: str | None = None, status: str | None = None) -> list[ItemRecord]:
        return list(self.iter_items(kind, status))

    def iter_items(self, kind: str | None = None, status: str | None = None) -> Iterator[ItemRecord]:
        q, args, conds = "SELECT key, kind, status, data, error, error_cause, seq FROM items", [], []
        if kind is not None:
            conds.append("kind=?")
            args.append(kind)
        if status is not None:
            conds.append("status=?")
            args.append(status)
        if conds:
            q += " WHERE " + " AND ".join(conds)
        for r in self._conn.execute(q + " ORDER BY seq", args):
            yield _item(r)

    def item(self, key: str) -> ItemRecord | None:
        row = self._conn.execute(
            "SELECT key, kind, status, data, error, error_cause, seq FROM items WHERE key=?", (key,)
        ).fetchone()
        return _item(row) if row else None

    def payloads(self, model: type[P], kind: str | None = None) -> list[tuple[str, P]]:
        """Every done item of `kind` (default: the model's `KIND`), typed, in insertion order."""
        kind = kind or str(getattr(model, "KIND", "")) or None
        return [(it.key, it.payload(model)) for it in self.iter_items(kind, "done")]

    def kinds(self) -> dict[str, int]:
        return {
            r[0]: r[1]
            for r in self._conn.execute("SELECT kind, COUNT(*) FROM items GROUP BY kind ORDER BY kind")
        }

    def judgments(self, item_key: str | None = None) -> list[JudgmentRecord]:
        cols = "item_key, judge, verdict, score, reason, error, error_cause, data"
        if item_key is None:
            rows = self._conn.execute(f"SELECT {cols} FROM judgments ORDER BY item_key, judge")
        else:
            rows = self._conn.execute(
                f"SELECT {cols} FROM judgments WHERE item_key=? ORDER BY judge", (item_key,)
            )
        return [JudgmentRecord.model_validate({**dict(r), "data": _json(r["data"])}) for r in rows]

    # --- calls, metrics, artifacts -----------------------------------------------------------------
    def calls(self, item_key: str | None = None) -> list[CallRow]:
        if item_key is None:
            rows = self._conn.execute("SELECT * FROM model_calls ORDER BY id")
        else:
            rows = self._conn.execute("SELECT * FROM model_calls WHERE item_key=? ORDER BY id", (item_key,))
        return [CallRow.model_validate({**dict(r), "cached": bool(r["cached"])}) for r in rows]

    def call_totals(self) -> list[dict[str, Any]]:
        """Per role and model: calls, cache hits, errors, tokens, nominal cost, and cost actually spent."""
        return call_totals(self._conn)

    def metrics(self) -> list[MetricRecord]:
        rows = self._conn.execute("SELECT * FROM metrics ORDER BY name, subject")
        return [MetricRecord.model_validate({**dict(r), "data": _json(r["data"])}) for r in rows]

    def artifact_data(self, name: str) -> Any:
        row = self._conn.execute("SELECT data FROM artifacts WHERE name=?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    def artifact(self, name: str, model: type[M]) -> M | None:
        """A named artifact read into its typed model (None when the run has none of that name)."""
        data = self.artifact_data(name)
        return None if data is None else model.model_validate(data)


def call_totals(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT role, provider || '/' || model AS model, COUNT(*) AS calls, SUM(cached) AS cache_hits,"
        " SUM(error IS NOT NULL) AS errors, SUM(prompt_tokens) AS prompt_tokens,"
        " SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd,"
        " SUM(CASE WHEN cached=0 THEN cost_usd ELSE 0 END) AS spent_usd, AVG(latency_s) AS mean_latency_s"
        " FROM model_calls GROUP BY role, model ORDER BY role, model"
    )
    return [dict(r) for r in rows]


def _json(text: str | None) -> Any:
    return json.loads(text) if text else None


def _item(row: sqlite3.Row) -> ItemRecord:
    return ItemRecord(
        key=row["key"],
        kind=row["kind"],
        status=row["status"],
        data=_json(row["data"]),
        error=row["error"],
        error_cause=row["error_cause"],
        seq=row["seq"],
    )
