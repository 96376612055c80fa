"""SQLite run store (WAL): runs, items, model calls, judgments, metrics; JSONL/Parquet export.

Items are keyed by content-derived keys, so a killed run resumes by skipping keys already `done`,
and a re-run never duplicates an item.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from proctor.models.recording import CallRecord
from proctor.sqlite_db import ThreadLocalDB
from proctor.store.process import ARTIFACT as PROCESS_ARTIFACT
from proctor.store.process import this_process
from proctor.store.record import call_totals
from proctor.store.transcripts import (
    CALL_COLUMNS,
    TEXTS_SCHEMA,
    pack,
    params_summary,
    summarize_logprobs,
    text_hash,
    tool_calls_json,
)

SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
  run_id TEXT PRIMARY KEY, protocol TEXT, config_json TEXT, config_hash TEXT,
  status TEXT, started REAL, finished REAL, proctor_version TEXT);
CREATE TABLE IF NOT EXISTS items (
  key TEXT PRIMARY KEY, kind TEXT NOT NULL, status TEXT NOT NULL, data TEXT, error TEXT,
  error_cause TEXT, seq INTEGER, updated REAL);
CREATE INDEX IF NOT EXISTS items_kind ON items(kind, seq);
CREATE TABLE IF NOT EXISTS model_calls (
  id INTEGER PRIMARY KEY AUTOINCREMENT, provider TEXT, model TEXT, role TEXT, item_key TEXT,
  prompt_tokens INTEGER, completion_tokens INTEGER, cost_usd REAL, latency_s REAL,
  cached INTEGER, attempts INTEGER, error TEXT, created REAL);
CREATE INDEX IF NOT EXISTS model_calls_item ON model_calls(item_key, id);
CREATE TABLE IF NOT EXISTS judgments (
  item_key TEXT NOT NULL, judge TEXT NOT NULL, verdict TEXT, score REAL, reason TEXT, error TEXT,
  data TEXT, error_cause TEXT, PRIMARY KEY (item_key, judge));
CREATE TABLE IF NOT EXISTS metrics (
  name TEXT NOT NULL, subject TEXT NOT NULL, value REAL, lo REAL, hi REAL, n INTEGER, data TEXT,
  PRIMARY KEY (name, subject));
CREATE TABLE IF NOT EXISTS artifacts (name TEXT PRIMARY KEY, data TEXT);
"""


class RunStore:
    """Thin, explicit access to the run's SQLite file. Writes commit immediately (autocommit), so a
    kill -9 keeps everything that had been written.

    `store_text=False` (a run's `store_text: false`): calls are recorded without their messages, reply or
    tool-call text — parameters, tokens, latency and logprob numbers only."""

    def __init__(self, path: str | Path, *, store_text: bool = True) -> None:
        self.path = Path(path)
        self.store_text = store_text
        self._known_texts: set[str] = set()  # hashes this process has written (saves a lookup per text)
        self._texts_lock = threading.Lock()
        self._db = ThreadLocalDB(self.path, row_factory=sqlite3.Row)
        self._seq_lock = threading.Lock()
        conn = self._conn()
        conn.executescript(SCHEMA)
        conn.execute(TEXTS_SCHEMA)
        # Stores written before transcripts gain their columns (NULL for old rows: no transcript stored).
        have = {r[1] for r in conn.execute("PRAGMA table_info(model_calls)")}
        for column, sql_type in CALL_COLUMNS.items():
            if column not in have:
                conn.execute(f"ALTER TABLE model_calls ADD COLUMN {column} {sql_type}")
        # Stores written before judgments had a cause column gain it (NULL for old rows).
        if "error_cause" not in {r[1] for r in conn.execute("PRAGMA table_info(judgments)")}:
            conn.execute("ALTER TABLE judgments ADD COLUMN error_cause TEXT")
        # ... and a deps column: what the unit depended on (`proctor.dependencies`; NULL for old rows).
        for table in ("items", "judgments"):
            if "deps" not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN deps TEXT")
        row = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM items").fetchone()
        self._seq = int(row[0])
        # Live counters for progress display (this process's calls only).
        self.live: dict[str, Any] = {"calls": 0, "cached": 0, "errors": 0, "tokens": 0, "cost_usd": 0.0}

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def close(self) -> None:
        """Checkpoint the WAL into run.sqlite and close: the run folder's run.sqlite alone is complete."""
        self._db.close()

    # --- runs -------------------------------------------------------------------------------------
    def start_run(
        self, run_id: str, protocol: str, config: dict[str, Any], config_hash: str, version: str
    ) -> None:
        self._conn().execute(
            "INSERT INTO runs (run_id, protocol, config_json, config_hash, status, started, proctor_version) "
            "VALUES (?, ?, ?, ?, 'running', ?, ?) ON CONFLICT(run_id) DO UPDATE SET status='running'",
            (run_id, protocol, json.dumps(config, sort_keys=True), config_hash, time.time(), version),
        )
        # Which process runs it, so a run left `running` by a killed process reads as `interrupted`.
        self.put_artifact(PROCESS_ARTIFACT, this_process().model_dump())

    def finish_run(self, run_id: str, status: str = "finished") -> None:
        self._conn().execute(
            "UPDATE runs SET status=?, finished=? WHERE run_id=?", (status, time.time(), run_id)
        )

    def run_info(self) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM runs ORDER BY started DESC LIMIT 1").fetchone()
        return dict(row) if row else None

    # --- items ------------------------------------------------------------------------------------
    def _next_seq(self) -> int:
        with self._seq_lock:
            self._seq += 1
            return self._seq

    def put_item(
        self,
        key: str,
        kind: str,
        data: Any,
        *,
        status: str = "done",
        error: str | None = None,
        error_cause: str | None = None,
        deps: Any = None,
    ) -> None:
        """Insert or replace an item; its first insertion order (`seq`) is kept for stable exports.
        `deps`: what producing it depended on (prompt versions, model identities), for resume checks."""
        conn = self._conn()
        row = conn.execute("SELECT seq FROM items WHERE key=?", (key,)).fetchone()
        seq = row[0] if row else self._next_seq()
        conn.execute(
            "INSERT OR REPLACE INTO items (key, kind, status, data, error, error_cause, seq, updated, deps) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                key,
                kind,
                status,
                json.dumps(data, ensure_ascii=False, sort_keys=True),
                error,
                error_cause,
                seq,
                time.time(),
                None if deps is None else json.dumps(deps, sort_keys=True),
            ),
        )

    def get_item(self, key: str) -> dict[str, Any] | None:
        row = self._conn().execute("SELECT * FROM items WHERE key=?", (key,)).fetchone()
        return _item(row) if row else None

    def items(self, kind: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        q, args = "SELECT * FROM items", []
        conds = []
        if kind is not None:
            conds.append("kind=?")
            args.append(kind)
        if status is not None:
            conds.append("status=?")
            args.append(status)
        if conds:
            q += " WHERE " + " AND ".join(conds)
        q += " ORDER BY seq"
        return [_item(r) for r in self._conn().execute(q, args)]

    # --- model calls (implements proctor.models.recording.CallRecorder) ---------------------------
    def record_call(self, record: CallRecord) -> None:
        live = self.live
        live["calls"] += 1
        live["cached"] += int(record.cached)
        live["errors"] += int(record.error is not None)
        live["tokens"] += record.prompt_tokens + record.completion_tokens
        if not record.cached:
            live["cost_usd"] += record.cost_usd
        messages_ref, reply_ref, reply_tools = None, None, None
        if self.store_text:
            messages_ref = json.dumps([self._message_ref(m) for m in record.messages or []])
            reply_ref = None if record.reply is None else self._put_text(record.reply)
            if record.reply_tool_calls:
                reply_tools = json.dumps(tool_calls_json(record.reply_tool_calls), ensure_ascii=False)
        lps = summarize_logprobs(record.logprobs)
        self._conn().execute(
            "INSERT INTO model_calls (provider, model, role, item_key, prompt_tokens, completion_tokens,"
            " cost_usd, latency_s, cached, attempts, error, created, step, messages_ref, params, reply_ref,"
            " reply_tool_calls, logprobs, text_stored) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                record.provider,
                record.model,
                record.role,
                record.item_key,
                record.prompt_tokens,
                record.completion_tokens,
                record.cost_usd,
                record.latency_s,
                int(record.cached),
                record.attempts,
                record.error,
                time.time(),
                record.step,
                messages_ref,
                json.dumps(params_summary(record.params), ensure_ascii=False, sort_keys=True),
                reply_ref,
                reply_tools,
                None if lps is None else json.dumps(asdict(lps)),
                int(self.store_text),
            ),
        )

    def _put_text(self, text: str) -> str:
        """Store `text` once (content-addressed, compressed); its hash."""
        h = text_hash(text)
        with self._texts_lock:
            if h in self._known_texts:
                return h
            self._known_texts.add(h)
        conn = self._conn()
        if conn.execute("SELECT 1 FROM texts WHERE hash=?", (h,)).fetchone() is None:
            conn.execute("INSERT OR IGNORE INTO texts (hash, z) VALUES (?, ?)", (h, pack(text)))
        return h

    def _message_ref(self, m: Any) -> dict[str, Any]:
        ref: dict[str, Any] = {
            "role": str(m.get("role", "")),
            "h": self._put_text(str(m.get("content") or "")),
        }
        if m.get("tool_calls"):
            ref["tool_calls"] = tool_calls_json(m["tool_calls"])
        if m.get("tool_call_id") is not None:
            ref["tool_call_id"] = str(m["tool_call_id"])
        return ref

    def spent_usd(self) -> float:
        """Money actually spent by this run so far (calls a server answered; cache hits cost nothing)."""
        row = self._conn().execute("SELECT SUM(cost_usd) FROM model_calls WHERE cached=0").fetchone()
        return float(row[0] or 0.0)

    def call_totals(self) -> list[dict[str, Any]]:
        """Per role and model: calls, cache hits, errors, tokens, nominal cost, and cost actually spent."""
        return call_totals(self._conn())

    def call_intervals(self, role: str) -> dict[str, list[tuple[float, float]]]:
        """Per item key, (start, end) times of its calls under `role` that a server answered (cache hits and
        failed calls left out): when the model was busy for an item, for `proctor judge`'s card."""
        rows = self._conn().execute(
            "SELECT item_key, created - latency_s, created FROM model_calls WHERE role=? AND cached=0"
            " AND error IS NULL AND item_key IS NOT NULL AND latency_s IS NOT NULL ORDER BY id",
            (role,),
        )
        out: dict[str, list[tuple[float, float]]] = {}
        for key, start, end in rows:
            out.setdefault(str(key), []).append((float(start), float(end)))
        return out

    # --- judgments --------------------------------------------------------------------------------
    def put_judgment(
        self,
        item_key: str,
        judge: str,
        *,
        verdict: str | None,
        score: float | None,
        reason: str | None,
        error: str | None = None,
        error_cause: str | None = None,
        data: Any = None,
        deps: Any = None,
    ) -> None:
        """Insert or replace one judge's decision on an item; a failed judgment carries `error` and its
        `error_cause` from the one cause vocabulary (`proctor.errors`), as items do."""
        self._conn().execute(
            "INSERT OR REPLACE INTO judgments (item_key, judge, verdict, score, reason, error, error_cause,"
            " data, deps) VALUES (?,?,?,?,?,?,?,?,?)",
            (
                item_key,
                judge,
                verdict,
                score,
                reason,
                error,
                error_cause,
                json.dumps(data, ensure_ascii=False),
                None if deps is None else json.dumps(deps, sort_keys=True),
            ),
        )

    def get_judgment(self, item_key: str, judge: str) -> dict[str, Any] | None:
        row = (
            self._conn()
            .execute("SELECT * FROM judgments WHERE item_key=? AND judge=?", (item_key, judge))
            .fetchone()
        )
        return _judgment(row) if row else None

    def judgments(self, item_key: str | None = None) -> list[dict[str, Any]]:
        if item_key is None:
            rows = self._conn().execute("SELECT * FROM judgments ORDER BY item_key, judge")
        else:
            rows = self._conn().execute(
                "SELECT * FROM judgments WHERE item_key=? ORDER BY judge", (item_key,)
            )
        return [_judgment(r) for r in rows]

    # --- metrics and artifacts --------------------------------------------------------------------
    def put_metric(
        self,
        name: str,
        subject: str,
        value: float | None,
        *,
        lo: float | None = None,
        hi: float | None = None,
        n: int | None = None,
        data: Any = None,
    ) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO metrics (name, subject, value, lo, hi, n, data) VALUES (?,?,?,?,?,?,?)",
            (name, subject, value, lo, hi, n, json.dumps(data, ensure_ascii=False)),
        )

    def drop_metrics(self, prefix: str) -> int:
        """Delete the metrics whose name starts with `prefix` (a result that is recomputed as a whole, such
        as a meta-evaluation, replaces its old rows). Returns how many were deleted."""
        if not prefix:
            raise ValueError("drop_metrics needs a non-empty prefix")
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        cur = self._conn().execute("DELETE FROM metrics WHERE name LIKE ? ESCAPE '\\'", (pattern,))
        return int(cur.rowcount)

    def metrics(self) -> list[dict[str, Any]]:
        return [dict(r) for r in self._conn().execute("SELECT * FROM metrics ORDER BY name, subject")]

    def put_artifact(self, name: str, data: Any) -> None:
        self._conn().execute(
            "INSERT OR REPLACE INTO artifacts (name, data) VALUES (?, ?)",
            (name, json.dumps(data, ensure_ascii=False)),
        )

    def get_artifact(self, name: str) -> Any:
        row = self._conn().execute("SELECT data FROM artifacts WHERE name=?", (name,)).fetchone()
        return json.loads(row[0]) if row else None

    # --- export -----------------------------------------------------------------------------------
    def iter_export_rows(self, kind: str | None = None) -> Iterator[dict[str, Any]]:
        judg: dict[str, list[dict[str, Any]]] = {}
        for j in self.judgments():
            judg.setdefault(j["item_key"], []).append(j)
        for it in self.items(kind):
            row = {
                "key": it["key"],
                "kind": it["kind"],
                "status": it["status"],
                "error": it["error"],
                "error_cause": it["error_cause"],
                **(it["data"] if isinstance(it["data"], dict) else {}),
            }
            for j in judg.get(it["key"], []):
                row[f"judge.{j['judge']}.verdict"] = j["verdict"]
                row[f"judge.{j['judge']}.score"] = j["score"]
                row[f"judge.{j['judge']}.error"] = j["error"]
                if j["error_cause"]:
                    row[f"judge.{j['judge']}.cause"] = j["error_cause"]
                if isinstance(j["data"], dict) and j["data"].get("method"):
                    row[f"judge.{j['judge']}.method"] = j["data"]["method"]
            yield row

    def export_jsonl(self, path: str | Path, kind: str | None = None) -> int:
        n = 0
        with open(path, "w", encoding="utf-8") as f:
            for row in self.iter_export_rows(kind):
                f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")
                n += 1
        return n

    def export_parquet(self, path: str | Path, kind: str | None = None) -> int:
        import pyarrow as pa
        import pyarrow.parquet as pq

        rows = [
            {
                k: (json.dumps(v, ensure_ascii=False) if isinstance(v, dict | list) else v)
                for k, v in r.items()
            }
            for r in self.iter_export_rows(kind)
        ]
        cols = sorted({k for r in rows for k in r})
        table = pa.table({c: _column([r.get(c) for r in rows]) for c in cols}) if rows else pa.table({})
        pq.write_table(table, path)
        return len(rows)


def _column(values: list[Any]) -> list[Any]:
    """Parquet columns need one type: numbers stay numbers, mixed columns become text."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float} or len(kinds) <= 1:
        return values
    return [None if v is None else str(v) for v in values]


def _judgment(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    d["data"] = json.loads(d["data"]) if d.get("data") else None
    d["deps"] = json.loads(d["deps"]) if d.get("deps") else None
    return d


def _item(row: sqlite3.Row) -> dict[str, Any]:
    d = dict(row)
    d["data"] = json.loads(d["data"]) if d.get("data") else None
    d["deps"] = json.loads(d["deps"]) if d.get("deps") else None
    return d
