"""The typed record of a run, read from its run store: what reports, the viewer, suites and users' code read.

`RunRecord` opens `run.sqlite` read-only and hands back typed rows — the run's info, its resolved config,
items (with `payloads(Model)` for typed payloads), judgments, model calls (`transcripts()`: with the
messages and replies, `proctor.store.transcripts`), metrics and artifacts. The
protocol's result model is attached by `proctor.load_run` (`proctor.kit.record`), which knows the
protocols; this module knows only the store's tables. No other module reads `run.sqlite` (besides the
store package's own: the writer `run_store`, the browser's side index `index`, and `writes`).

The viewer's queries are here too, typed and paged: counts and headline metrics for a runs list, items
and judgments looked up by key in chunks, and — with the side index attached (`attach_index`) — pages of
matching keys (LIMIT / OFFSET on indexes), neighbours and facets, so a browser stays fast and
memory-flat on big runs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self, TypeVar

from pydantic import BaseModel, ConfigDict

from proctor.store.transcripts import (
    CallTranscript,
    TranscriptMessage,
    logprobs_of,
    tool_calls_of,
    unpack,
)

RUN_FILE = "run.sqlite"
P = TypeVar("P", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)
# What reading a store raises when it cannot be read (a run being created has no tables yet).
StoreError = sqlite3.Error
# `IN (...)` lists are sent in chunks of this many keys.
_CHUNK = 500
# The side index's schema name while attached (`attach_index`; built by `proctor.store.index`).
INDEX_ALIAS = "vx"
# The item list's sortable columns: name -> SQL expression over the side index's `item_meta m` (never a
# string from the request). Each is non-NULL, and the insertion number breaks ties, so a sorted list is
# one total order: it pages stably and an item's neighbours are its rows above and below.
SORT_KEYS: dict[str, str] = {
    "seq": "m.seq",
    "item": "m.title_key",
    "candidate": "m.candidate",
    "answer": "m.answer_key",
    "judgments": "m.verdicts",
    "status": "m.status",
    "labels": "m.label_key",
}


def is_run_folder(folder: Path) -> bool:
    """Whether `folder` holds a run store."""
    return (folder / RUN_FILE).is_file()


def store_files(folder: Path) -> list[Path]:
    """The run store's files (the store and its write-ahead log), for change stamps."""
    return [folder / RUN_FILE, folder / f"{RUN_FILE}-wal"]


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


class RunTotals(BaseModel):
    """Counts for a runs list: model calls (and how many came from the cache), money actually spent, items."""

    calls: int = 0
    cached_calls: int = 0
    spent_usd: float = 0.0
    items: int = 0


class JudgedOutcome(BaseModel):
    """One judgment without an error, with what identifies its item across runs (for comparing runs)."""

    model_config = ConfigDict(frozen=True)

    item_key: str
    judge: str
    verdict: str | None = None
    score: float | None = None
    kind: str
    candidate: str | None = None
    question_id: str | None = None
    title: str = ""


@dataclass(frozen=True)
class ItemQuery:
    """A filter over the items of a run with its side index attached (`attach_index`): kind, status,
    candidate, a judge and/or verdict, an error cause (of the item or of a judgment), and an FTS5 query."""

    kind: str | None = None
    status: str | None = None
    candidate: str | None = None
    judge: str | None = None
    verdict: str | None = None
    cause: str | None = None
    fts: str | None = None
    sort: str = "seq"  # a name of SORT_KEYS
    descending: bool = False

    def order(self) -> tuple[str, str]:
        """The sort key's SQL expression and the ORDER BY clause that pages by it."""
        expr = SORT_KEYS.get(self.sort, "m.seq")
        way = " DESC" if self.descending else ""
        return expr, f" ORDER BY {expr}{way}, m.seq{way}"

    def where(self) -> tuple[str, list[Any]]:
        """SQL conditions over the side index's `item_meta m`, and their parameters."""
        conds: list[str] = []
        args: list[Any] = []
        for column, value in (("kind", self.kind), ("status", self.status), ("candidate", self.candidate)):
            if value:
                conds.append(f"m.{column} = ?")
                args.append(value)
        if self.verdict or self.judge:
            sub = []
            if self.verdict:
                sub.append("j.verdict = ?")
                args.append(self.verdict)
            if self.judge:
                sub.append("j.judge = ?")
                args.append(self.judge)
            conds.append(
                f"m.seq IN (SELECT j.seq FROM {INDEX_ALIAS}.item_judgment j WHERE {' AND '.join(sub)})"
            )
        if self.cause:
            conds.append(
                f"(m.error_cause = ? OR m.seq IN (SELECT j2.seq FROM {INDEX_ALIAS}.item_judgment j2"
                " WHERE j2.error_cause = ?))"
            )
            args += [self.cause, self.cause]
        if self.fts:
            conds.append(f"m.seq IN (SELECT rowid FROM {INDEX_ALIAS}.item_fts WHERE item_fts MATCH ?)")
            args.append(self.fts)
        return (" WHERE " + " AND ".join(conds)) if conds else "", args


class IndexFacets(BaseModel):
    """The values a run's items take, from the side index: kinds with counts, judges, verdicts, error
    causes (of items and judgments), statuses."""

    kinds: list[tuple[str, int]]
    judges: list[str]
    verdicts: list[str]
    causes: list[str]
    statuses: list[str]


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

    def __enter__(self) -> Self:
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
        if d.get("status") == "running" and self.process_gone():
            d["status"] = "interrupted"
        return RunInfo.model_validate({k: ("" if v is None and k in ("protocol", "config_hash") else v)
                                       for k, v in d.items()})  # fmt: skip

    def process_gone(self) -> bool:
        """Whether the process that ran this run has ended (a run it left `running` was killed); False
        when unknown (no process recorded, or another host)."""
        from proctor.store.process import ARTIFACT, ProcessMark, is_gone

        data = self.artifact_data(ARTIFACT)
        return isinstance(data, dict) and is_gone(ProcessMark.model_validate(data))

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

    def has_item(self, key: str) -> bool:
        return self._conn.execute("SELECT 1 FROM items WHERE key=?", (key,)).fetchone() is not None

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

    # --- the viewer's queries: a few rows at a time, on indexes ------------------------------------
    def totals(self) -> RunTotals:
        calls = self._conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(cached), 0),"
            " COALESCE(SUM(CASE WHEN cached=0 THEN cost_usd ELSE 0 END), 0) FROM model_calls"
        ).fetchone()
        n_items = self._conn.execute("SELECT COUNT(*) FROM items").fetchone()[0]
        return RunTotals(
            calls=int(calls[0]), cached_calls=int(calls[1]), spent_usd=float(calls[2]), items=int(n_items)
        )

    def headline_metrics(self, limit: int) -> list[MetricRecord]:
        """Accuracy-like metrics first (the ones a report plots), then the others, at most `limit`."""
        rows = self._conn.execute(
            "SELECT * FROM metrics ORDER BY"
            " CASE WHEN name LIKE 'accuracy%' THEN 0 WHEN name LIKE 'f1%' THEN 1 ELSE 2 END, name, subject"
            " LIMIT ?",
            (limit,),
        )
        return [MetricRecord.model_validate({**dict(r), "data": _json(r["data"])}) for r in rows]

    def items_by_key(self, keys: Iterable[str]) -> dict[str, ItemRecord]:
        """The items among `keys` the run has (looked up on the primary key, in chunks)."""
        out: dict[str, ItemRecord] = {}
        for chunk in _chunks(list(keys)):
            marks = ",".join("?" * len(chunk))
            for r in self._conn.execute(
                f"SELECT key, kind, status, data, error, error_cause, seq FROM items WHERE key IN ({marks})",
                chunk,
            ):
                out[r["key"]] = _item(r)
        return out

    def judgments_of(self, keys: Iterable[str]) -> dict[str, list[JudgmentRecord]]:
        """The judgments of the items among `keys`, per item key, each item's in judge order."""
        out: dict[str, list[JudgmentRecord]] = {}
        cols = "item_key, judge, verdict, score, reason, error, error_cause, data"
        for chunk in _chunks(list(keys)):
            marks = ",".join("?" * len(chunk))
            for r in self._conn.execute(
                f"SELECT {cols} FROM judgments WHERE item_key IN ({marks}) ORDER BY item_key, judge", chunk
            ):
                out.setdefault(r["item_key"], []).append(
                    JudgmentRecord.model_validate({**dict(r), "data": _json(r["data"])})
                )
        return out

    def records_transcripts(self) -> bool:
        """Whether this store was written by a version that records call transcripts (a run with
        `store_text: false` still records them, without text: see `CallTranscript.text_stored`)."""
        return self.has_column("model_calls", "messages_ref") and self._has_table("texts")

    def _has_table(self, name: str) -> bool:
        q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
        return self._conn.execute(q, (name,)).fetchone() is not None

    def call_count(self, item_key: str) -> int:
        """How many model calls were made for `item_key` (an index probe on a store that has
        `model_calls_item`, a scan on an older one)."""
        q = "SELECT COUNT(*) FROM model_calls WHERE item_key=?"
        return int(self._conn.execute(q, (item_key,)).fetchone()[0])

    def transcripts(
        self, item_key: str | None = None, *, limit: int | None = None, offset: int = 0
    ) -> list[CallTranscript]:
        """The model calls made for `item_key` (None: every call of the run), in call order, each with the
        messages it sent and the reply it got when the run stored text; `limit` / `offset`: one page of
        them (a long agent transcript is read a page at a time). A store written before transcripts
        gives every call with `text_stored=False`."""
        new = self.records_transcripts()
        cols = "id, provider, model, role, item_key, prompt_tokens, completion_tokens, latency_s, cached,"
        cols += " attempts, error, created"
        if new:
            cols += ", step, messages_ref, params, reply_ref, reply_tool_calls, logprobs, text_stored"
        q = f"SELECT {cols} FROM model_calls"
        args: list[Any] = []
        if item_key is not None:
            q += " WHERE item_key=?"
            args.append(item_key)
        q += " ORDER BY id"
        if limit is not None:
            q += " LIMIT ? OFFSET ?"
            args += [limit, offset]
        rows = self._conn.execute(q, args).fetchall()
        refs: list[tuple[Any, list[dict[str, Any]] | None]] = []
        wanted: set[str] = set()
        for r in rows:
            stored = bool(new and r["text_stored"])
            skeleton = _json(r["messages_ref"]) if stored else None
            if isinstance(skeleton, list):
                wanted.update(str(m.get("h")) for m in skeleton if isinstance(m, dict))
            if stored and r["reply_ref"]:
                wanted.add(str(r["reply_ref"]))
            refs.append((r, skeleton if isinstance(skeleton, list) else None))
        texts = self.texts(wanted)
        return [_transcript(r, skeleton, texts, new) for r, skeleton in refs]

    def texts(self, hashes: Iterable[str]) -> dict[str, str]:
        """Stored texts by their hash (`proctor.store.transcripts`), decompressed; unknown hashes left out."""
        out: dict[str, str] = {}
        if not self._has_table("texts"):
            return out
        for chunk in _chunks(list(hashes)):
            marks = ",".join("?" * len(chunk))
            for h, z in self._conn.execute(f"SELECT hash, z FROM texts WHERE hash IN ({marks})", chunk):
                out[str(h)] = unpack(z)
        return out

    def keys_of_item_ids(self, ids: Iterable[str]) -> dict[str, str]:
        """Store keys of the items whose payload names itself with an `item_id` (reckon's
        `<unit_id>@<candidate>`, the form label files use), by that id."""
        out: dict[str, str] = {}
        wanted = list(dict.fromkeys(ids))
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                "SELECT key, json_extract(data, '$.item_id') FROM items"
                f" WHERE json_extract(data, '$.item_id') IN ({marks})",
                chunk,
            )
            out.update({str(r[1]): str(r[0]) for r in rows})
        return out

    def item_ids_of_keys(self, keys: Iterable[str]) -> dict[str, str]:
        """The payload's own `item_id` of the items that have one, by store key (see `keys_of_item_ids`)."""
        out: dict[str, str] = {}
        wanted = list(dict.fromkeys(keys))
        for i in range(0, len(wanted), 500):
            chunk = wanted[i : i + 500]
            marks = ",".join("?" * len(chunk))
            rows = self._conn.execute(
                f"SELECT key, json_extract(data, '$.item_id') FROM items WHERE key IN ({marks})"
                " AND json_extract(data, '$.item_id') IS NOT NULL",
                chunk,
            )
            out.update({str(r[0]): str(r[1]) for r in rows})
        return out

    def items_where(
        self, kind: str, field: str, value: Any, *, exclude_status: str | None = None
    ) -> list[ItemRecord]:
        """The items of `kind` whose payload's top-level `field` equals `value` (a conversation's rounds,
        a question's responses), in insertion order."""
        if not field.isidentifier():
            raise ValueError(f"not a payload field name: {field!r}")
        q = (
            "SELECT key, kind, status, data, error, error_cause, seq FROM items"
            f" WHERE kind = ? AND json_extract(data, '$.{field}') = ?"
        )
        args: list[Any] = [kind, value]
        if exclude_status is not None:
            q += " AND status != ?"
            args.append(exclude_status)
        return [_item(r) for r in self._conn.execute(q + " ORDER BY seq", args)]

    def judged_outcomes(self) -> Iterator[JudgedOutcome]:
        """Every judgment without an error, with its item's kind, candidate, question id and title (the
        question, else the keyword), streamed."""
        cur = self._conn.execute(
            "SELECT j.item_key, j.judge, j.verdict, j.score, i.kind,"
            " json_extract(i.data, '$.candidate') AS candidate,"
            " json_extract(i.data, '$.question_id') AS question_id,"
            " COALESCE(json_extract(i.data, '$.question'), json_extract(i.data, '$.keyword'), '') AS title"
            " FROM judgments j JOIN items i ON i.key = j.item_key WHERE j.error IS NULL"
        )
        for r in cur:
            score = r["score"]
            yield JudgedOutcome(
                item_key=r["item_key"],
                judge=r["judge"],
                verdict=r["verdict"],
                score=score if isinstance(score, int | float) else None,
                kind=r["kind"],
                candidate=None if r["candidate"] is None else str(r["candidate"]),
                question_id=None if r["question_id"] is None else str(r["question_id"]),
                title=str(r["title"]),
            )

    # --- paging over the side index (`proctor.store.index`) -----------------------------------------
    def attach_index(self, index_path: Path) -> None:
        """Make the run's side index visible to this connection, read-only, for the queries below."""
        attached = {r[1] for r in self._conn.execute("PRAGMA database_list")}
        if INDEX_ALIAS not in attached:
            uri = f"{Path(index_path).resolve().as_uri()}?mode=ro"
            self._conn.execute(f"ATTACH DATABASE ? AS {INDEX_ALIAS}", (uri,))

    def count_matching(self, q: ItemQuery, cap: int) -> tuple[int, bool]:
        """How many items match `q`, counting at most `cap` (and whether there are more)."""
        where, args = q.where()
        n = self._conn.execute(
            f"SELECT COUNT(*) FROM (SELECT 1 FROM {INDEX_ALIAS}.item_meta m{where} LIMIT ?)", [*args, cap + 1]
        ).fetchone()[0]
        return min(int(n), cap), int(n) > cap

    def matching_keys(self, q: ItemQuery, limit: int, offset: int) -> list[str]:
        """One page of the keys of the items matching `q`, in its sort order (insertion order by default)."""
        where, args = q.where()
        _, order = q.order()
        return [
            r[0]
            for r in self._conn.execute(
                f"SELECT m.key FROM {INDEX_ALIAS}.item_meta m{where}{order} LIMIT ? OFFSET ?",
                [*args, limit, offset],
            )
        ]

    def neighbours(self, q: ItemQuery, seq: int) -> tuple[str | None, str | None]:
        """Keys of the items matching `q` just before and just after insertion number `seq`, in `q`'s
        sort order."""
        where, args = q.where()
        expr, _ = q.order()
        row = self._conn.execute(f"SELECT {expr} FROM {INDEX_ALIAS}.item_meta m WHERE m.seq = ?", (seq,))
        found = row.fetchone()
        if found is None:
            return None, None
        glue = " AND " if where else " WHERE "
        base = f"SELECT m.key FROM {INDEX_ALIAS}.item_meta m{where}{glue}"
        before, after = (">", "<") if q.descending else ("<", ">")
        out: list[str | None] = []
        for op, descending in ((before, not q.descending), (after, q.descending)):
            way = " DESC" if descending else ""
            hit = self._conn.execute(
                f"{base}({expr}, m.seq) {op} (?, ?) ORDER BY {expr}{way}, m.seq{way} LIMIT 1",
                [*args, found[0], seq],
            ).fetchone()
            out.append(hit[0] if hit else None)
        return out[0], out[1]

    def facets(self) -> IndexFacets:
        """From the side index: every lookup is on an index."""
        x = INDEX_ALIAS
        conn = self._conn
        kinds = [
            (r[0], int(r[1])) for r in conn.execute(f"SELECT kind, COUNT(*) FROM {x}.item_meta GROUP BY kind")
        ]
        judges = [r[0] for r in conn.execute(f"SELECT DISTINCT judge FROM {x}.item_judgment ORDER BY judge")]
        verdicts = [
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT verdict FROM {x}.item_judgment WHERE verdict IS NOT NULL ORDER BY verdict"
            )
        ]
        causes = sorted(
            {
                r[0]
                for r in conn.execute(
                    f"SELECT DISTINCT error_cause FROM {x}.item_meta WHERE error_cause IS NOT NULL"
                    f" UNION SELECT DISTINCT error_cause FROM {x}.item_judgment WHERE error_cause IS NOT NULL"
                )
            }
        )
        statuses = [r[0] for r in conn.execute(f"SELECT DISTINCT status FROM {x}.item_meta ORDER BY status")]
        return IndexFacets(kinds=kinds, judges=judges, verdicts=verdicts, causes=causes, statuses=statuses)

    def judged_kinds(self) -> list[str]:
        """Kinds with at least one judgment, from the side index (one index probe per kind)."""
        x = INDEX_ALIAS
        out = []
        for (kind,) in self._conn.execute(f"SELECT DISTINCT kind FROM {x}.item_meta").fetchall():
            hit = self._conn.execute(
                f"SELECT 1 FROM {x}.item_meta m WHERE m.kind = ? AND EXISTS"
                f" (SELECT 1 FROM {x}.item_judgment j WHERE j.seq = m.seq) LIMIT 1",
                (kind,),
            ).fetchone()
            if hit:
                out.append(kind)
        return out


def call_totals(conn: sqlite3.Connection) -> list[dict[str, Any]]:
    rows = conn.execute(
        "SELECT role, provider || '/' || model AS model, COUNT(*) AS calls, SUM(cached) AS cache_hits,"
        " SUM(error IS NOT NULL) AS errors, SUM(prompt_tokens) AS prompt_tokens,"
        " SUM(completion_tokens) AS completion_tokens, SUM(cost_usd) AS cost_usd,"
        " SUM(CASE WHEN cached=0 THEN cost_usd ELSE 0 END) AS spent_usd, AVG(latency_s) AS mean_latency_s"
        " FROM model_calls GROUP BY role, model ORDER BY role, model"
    )
    return [dict(r) for r in rows]


def _transcript(
    r: sqlite3.Row, skeleton: list[dict[str, Any]] | None, texts: dict[str, str], new: bool
) -> CallTranscript:
    stored = bool(new and r["text_stored"])
    messages = None
    if stored and skeleton is not None:
        messages = [
            TranscriptMessage(
                role=str(m.get("role", "")),
                content=texts.get(str(m.get("h")), ""),
                tool_calls=tool_calls_of(m.get("tool_calls")),
                tool_call_id=m.get("tool_call_id"),
            )
            for m in skeleton
        ]
    params = _json(r["params"]) if new else None
    reply_ref = r["reply_ref"] if stored else None
    return CallTranscript(
        id=int(r["id"]),
        provider=str(r["provider"] or ""),
        model=str(r["model"] or ""),
        role=r["role"],
        item_key=r["item_key"],
        step=r["step"] if new else None,
        messages=messages,
        params=params if isinstance(params, dict) else {},
        reply=texts.get(str(reply_ref)) if reply_ref else None,
        reply_tool_calls=tool_calls_of(_json(r["reply_tool_calls"])) if stored else None,
        logprobs=logprobs_of(_json(r["logprobs"])) if new else None,
        prompt_tokens=int(r["prompt_tokens"] or 0),
        completion_tokens=int(r["completion_tokens"] or 0),
        latency_s=float(r["latency_s"] or 0.0),
        cached=bool(r["cached"]),
        attempts=int(r["attempts"] or 0),
        error=r["error"],
        created=float(r["created"] or 0.0),
        text_stored=stored,
    )


def _chunks(keys: list[str]) -> Iterator[list[str]]:
    for i in range(0, len(keys), _CHUNK):
        yield keys[i : i + _CHUNK]


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
