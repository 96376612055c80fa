"""A run's side index for browsing: `viewer.sqlite` in the run folder (never the run store), so a browser
filters and pages over indexed columns whatever the run's size (`RunRecord.attach_index` and the paged
queries after it read it).

* `item_meta` — one row per item (seq, key, kind, status, candidate, error cause), indexed per filter,
  with the sort keys of the item list's columns (`title_key`, `answer_key`: the start of the item's title
  and answer, lower-cased; `verdicts`: its judgments' verdicts in judge order; `label_key`: its latest
  human label, from the folder's `labels.sqlite`, applied as labels are added), indexed per kind so a
  sorted list pages without sorting the run;
* `item_judgment` — one row per judgment (seq, judge, verdict, error cause), indexed by verdict and cause;
* `outcome` — one row per judgment with a binary outcome, keyed by what matches its item across runs, so
  comparing two runs is one indexed join of two small tables (`paired_outcomes`), not a re-read of both;
* `item_fts` — an FTS5 index of each item's key, data strings and error (rowid = seq), built on the
  first search only.

Everything is built in SQL with the run store attached read-only (no item is loaded into Python), on the
first visit, and refreshed when the run store has changed since (a running run): items updated since the
last refresh are re-indexed, judgments (which carry no time) are re-read whole.
"""

from __future__ import annotations

import sqlite3
import threading
from dataclasses import dataclass, field
from pathlib import Path

from proctor.store.labels import LABELS_FILE
from proctor.store.record import RUN_FILE, store_files
from proctor.store.safe_files import check_sqlite

INDEX_FILE = "viewer.sqlite"
VERSION = "6"
_locks: dict[Path, threading.Lock] = {}
_locks_guard = threading.Lock()

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT);
CREATE TABLE IF NOT EXISTS item_meta (
  seq INTEGER PRIMARY KEY, key TEXT NOT NULL, kind TEXT, status TEXT, candidate TEXT NOT NULL DEFAULT '',
  error_cause TEXT, title_key TEXT NOT NULL DEFAULT '', answer_key TEXT NOT NULL DEFAULT '',
  verdicts TEXT NOT NULL DEFAULT '', label_key TEXT NOT NULL DEFAULT '');
CREATE INDEX IF NOT EXISTS item_meta_kind ON item_meta(kind, seq);
CREATE INDEX IF NOT EXISTS item_meta_cand ON item_meta(kind, candidate, seq);
CREATE INDEX IF NOT EXISTS item_meta_status ON item_meta(kind, status, seq);
CREATE INDEX IF NOT EXISTS item_meta_cause ON item_meta(error_cause, seq);
CREATE INDEX IF NOT EXISTS item_meta_title ON item_meta(kind, title_key, seq);
CREATE INDEX IF NOT EXISTS item_meta_answer ON item_meta(kind, answer_key, seq);
CREATE INDEX IF NOT EXISTS item_meta_verdicts ON item_meta(kind, verdicts, seq);
CREATE INDEX IF NOT EXISTS item_meta_label ON item_meta(kind, label_key, seq);
CREATE TABLE IF NOT EXISTS item_judgment (seq INTEGER, judge TEXT, verdict TEXT, error_cause TEXT);
CREATE INDEX IF NOT EXISTS item_judgment_seq ON item_judgment(seq, judge);
CREATE INDEX IF NOT EXISTS item_judgment_verdict ON item_judgment(verdict, judge, seq);
CREATE INDEX IF NOT EXISTS item_judgment_judge ON item_judgment(judge, seq);
CREATE INDEX IF NOT EXISTS item_judgment_cause ON item_judgment(error_cause, seq);
CREATE TABLE IF NOT EXISTS outcome (
  match TEXT NOT NULL, judge TEXT NOT NULL, candidate TEXT NOT NULL, correct INTEGER NOT NULL,
  item_key TEXT NOT NULL, PRIMARY KEY (match, judge)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS outcome_group ON outcome(candidate, judge, match, correct);
"""
# The threshold a numeric score is cut at for a binary outcome (the meta-evaluation's rule).
SCORE_THRESHOLD = 0.5
# One row per judgment without an error that has a binary outcome: what identifies its item across runs
# (`kind|candidate|question_id` when the item names both, else its content-derived key) and the outcome (a
# verdict correct/incorrect, else the score cut at SCORE_THRESHOLD). Two runs are compared by joining these.
_OUTCOMES = f"""
INSERT OR REPLACE INTO main.outcome (match, judge, candidate, correct, item_key)
SELECT CASE WHEN o.candidate IS NOT NULL AND o.qid IS NOT NULL
            THEN o.kind || '|' || o.candidate || '|' || o.qid ELSE o.item_key END,
       o.judge, COALESCE(o.candidate, ''),
       CASE WHEN o.verdict IN ('correct', 'incorrect') THEN o.verdict = 'correct'
            ELSE o.score >= {SCORE_THRESHOLD} END,
       o.item_key
FROM (SELECT j.item_key, j.judge, j.verdict, j.score, i.kind,
             json_extract(i.data, '$.candidate') AS candidate, json_extract(i.data, '$.question_id') AS qid
      FROM run.judgments j JOIN run.items i ON i.key = j.item_key
      WHERE j.error IS NULL
        AND (j.verdict IN ('correct', 'incorrect') OR typeof(j.score) IN ('integer', 'real'))
      ORDER BY j.rowid) o
"""
# The payload fields that stand for an item's title (the question, or what takes its place) and its answer,
# first non-empty one wins: the item list shows them and sorts by them.
TITLE_FIELDS = ("question", "interactor_question", "keyword", "title", "text", "name", "task")
ANSWER_FIELDS = ("answer", "candidate_reply", "reply", "prediction", "output")
# How many characters of a title or answer its sort key keeps (enough to order what a page shows).
SORT_KEY_CHARS = 48


def _first_field(names: tuple[str, ...]) -> str:
    picks = ", ".join(f"NULLIF(CAST(json_extract(data, '$.{n}') AS TEXT), '')" for n in names)
    return f"lower(substr(COALESCE({picks}, ''), 1, {SORT_KEY_CHARS}))"


# Every string in an item's data, its key and its error: what a search matches.
_ITEM_TEXT = (
    "r.key || ' ' || COALESCE((SELECT group_concat(t.value, ' ') FROM json_tree(r.data) t"
    " WHERE t.type = 'text'), '') || ' ' || COALESCE(r.error, '')"
)


def _lock(folder: Path) -> threading.Lock:
    with _locks_guard:
        return _locks.setdefault(folder, threading.Lock())


def _side(folder: Path) -> sqlite3.Connection:
    # Both databases (and their side files) must be the folder's own plain files: SQLite follows links.
    check_sqlite(folder / RUN_FILE, must_exist=True)
    check_sqlite(folder / INDEX_FILE, must_exist=False)
    side = sqlite3.connect(folder / INDEX_FILE, timeout=30, isolation_level=None)
    side.execute("PRAGMA journal_mode=WAL")
    side.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT)")  # the rest: ensure_index
    side.execute("ATTACH DATABASE ? AS run", (f"{(folder / RUN_FILE).resolve().as_uri()}?mode=ro",))
    return side


def _meta(side: sqlite3.Connection) -> dict[str, str]:
    return dict(side.execute("SELECT k, v FROM main.meta").fetchall())


def _set(side: sqlite3.Connection, **values: str) -> None:
    side.executemany("INSERT OR REPLACE INTO main.meta (k, v) VALUES (?, ?)", list(values.items()))


def ensure_index(folder: Path, *, search: bool = False) -> Path:
    """Build or refresh the run's side index (with the full-text index when `search`); returns its path."""
    path = folder / INDEX_FILE
    with _lock(folder):
        side = _side(folder)
        try:
            meta = _meta(side)
            stamp = store_stamp(folder)
            if meta.get("version") != VERSION:
                side.execute("BEGIN")
                # Tables (and their columns) change shape between versions: rebuilt whole.
                side.execute("DROP TABLE IF EXISTS main.item_meta")
                side.execute("DROP TABLE IF EXISTS main.item_judgment")
                side.execute("DROP TABLE IF EXISTS main.outcome")
                side.execute("DROP TABLE IF EXISTS main.item_fts")
                side.execute("DELETE FROM main.meta")
                _set(side, version=VERSION)
                side.execute("COMMIT")
                meta = {"version": VERSION}
            side.executescript(SCHEMA)  # after the version check: an older shape is dropped first
            if meta.get("stamp") != stamp:
                _refresh(side, meta, stamp)
                _set(side, labels_id="-1")  # re-indexed rows lost their label key: apply every label again
                meta = _meta(side)
            _refresh_labels(side, folder, meta)
            if search and meta.get("fts_stamp") != stamp:
                _refresh_fts(side, meta, stamp)
        finally:
            side.close()
    return path


def _refresh(side: sqlite3.Connection, meta: dict[str, str], stamp: str) -> None:
    since = float(meta.get("updated", "-1"))
    side.execute("BEGIN")
    if since >= 0:
        side.execute(
            "DELETE FROM main.item_meta WHERE seq IN (SELECT seq FROM run.items WHERE updated >= ?)", (since,)
        )
    side.execute(
        "INSERT OR REPLACE INTO main.item_meta"
        " (seq, key, kind, status, candidate, error_cause, title_key, answer_key)"
        " SELECT seq, key, kind, status, COALESCE(CAST(json_extract(data, '$.candidate') AS TEXT), ''),"
        f" error_cause, {_first_field(TITLE_FIELDS)}, {_first_field(ANSWER_FIELDS)} FROM run.items"
        " WHERE updated >= ?",
        (since,),
    )
    side.execute("DELETE FROM main.item_judgment")
    side.execute(
        "INSERT INTO main.item_judgment (seq, judge, verdict, error_cause)"
        " SELECT i.seq, j.judge, j.verdict, j.error_cause FROM run.judgments j JOIN run.items i"
        " ON i.key = j.item_key"
    )
    # Judgments carry no time: every item's verdicts key is recomputed with them.
    side.execute(
        "UPDATE main.item_meta SET verdicts = g.vs FROM (SELECT seq, group_concat(v, ' ') AS vs FROM"
        " (SELECT j.seq, COALESCE(j.verdict, j.error_cause, '') AS v FROM main.item_judgment j"
        " ORDER BY j.seq, j.judge, j.rowid) GROUP BY seq) g"
        " WHERE g.seq = item_meta.seq AND item_meta.verdicts != g.vs"
    )
    side.execute(
        "UPDATE main.item_meta SET verdicts = '' WHERE verdicts != ''"
        " AND seq NOT IN (SELECT seq FROM main.item_judgment)"
    )
    side.execute("DELETE FROM main.outcome")
    side.execute(_OUTCOMES)
    newest = side.execute("SELECT MAX(updated) FROM run.items").fetchone()[0]
    _set(side, stamp=stamp, updated=repr(float(newest)) if newest is not None else "-1")
    side.execute("COMMIT")


def _refresh_labels(side: sqlite3.Connection, folder: Path, meta: dict[str, str]) -> None:
    """Each item's latest label into `label_key`, for the labels added since the last time (labels are
    append-only, so the highest label id seen is enough to know which)."""
    path = folder / LABELS_FILE
    check_sqlite(path, must_exist=False)
    if not path.is_file():
        return
    side.execute("ATTACH DATABASE ? AS lb", (f"{path.resolve().as_uri()}?mode=ro",))
    try:
        known = "SELECT 1 FROM lb.sqlite_master WHERE type='table' AND name='labels'"
        if side.execute(known).fetchone() is None:
            return
        since = int(meta.get("labels_id", "-1"))
        newest = side.execute("SELECT MAX(id) FROM lb.labels").fetchone()[0]
        if newest is None or int(newest) <= since:
            return
        side.execute("BEGIN")
        side.execute(
            "UPDATE main.item_meta SET label_key = COALESCE((SELECT l.label FROM lb.labels l"
            " WHERE l.item_key = item_meta.key ORDER BY l.id DESC LIMIT 1), '')"
            " WHERE key IN (SELECT item_key FROM lb.labels WHERE id > ?)",
            (since,),
        )
        _set(side, labels_id=str(int(newest)))
        side.execute("COMMIT")
    finally:
        if side.in_transaction:
            side.execute("ROLLBACK")
        side.execute("DETACH DATABASE lb")


def _refresh_fts(side: sqlite3.Connection, meta: dict[str, str], stamp: str) -> None:
    since = float(meta.get("fts_updated", "-1"))
    side.execute("BEGIN")
    side.execute("CREATE VIRTUAL TABLE IF NOT EXISTS main.item_fts USING fts5(text, tokenize='unicode61')")
    if since >= 0:
        side.execute(
            "DELETE FROM main.item_fts WHERE rowid IN (SELECT seq FROM run.items WHERE updated >= ?)",
            (since,),
        )
    side.execute(
        f"INSERT INTO main.item_fts (rowid, text) SELECT r.seq, {_ITEM_TEXT} FROM run.items r"
        " WHERE r.updated >= ?",
        (since,),
    )
    newest = side.execute("SELECT MAX(updated) FROM run.items").fetchone()[0]
    _set(side, fts_stamp=stamp, fts_updated=repr(float(newest)) if newest is not None else "-1")
    side.execute("COMMIT")


def store_stamp(folder: Path) -> str:
    """Changes whenever the run store (or its write-ahead log) is written."""
    parts = []
    for p in store_files(folder):
        if p.exists():
            st = p.stat()
            parts.append(f"{p.name}:{st.st_size}:{st.st_mtime_ns}")
    return "|".join(parts)


@dataclass(frozen=True)
class OutcomeGroup:
    """One (candidate, judge) of two runs' matched outcomes: how many, correct in A, in B, and the
    discordant pairs (gained: wrong in A and right in B; lost: the other way)."""

    candidate: str
    judge: str
    n: int
    correct_a: int
    correct_b: int
    gained: int
    lost: int


@dataclass(frozen=True)
class OutcomeFlip:
    candidate: str
    judge: str
    key_a: str
    key_b: str
    a: bool
    b: bool


@dataclass
class PairedOutcomes:
    matched: int
    only_a: int
    only_b: int
    groups: list[OutcomeGroup] = field(default_factory=list)
    flips: list[OutcomeFlip] = field(default_factory=list)  # the first `flips_limit`, by match key
    flips_total: int = 0


def paired_outcomes(folder_a: Path, folder_b: Path, flips_limit: int) -> PairedOutcomes:
    """Two runs' outcomes matched by item and judge, from their side indexes (built by `ensure_index`):
    counts per group and the first flipped items, all in SQL over indexes (memory stays flat)."""
    for folder in (folder_a, folder_b):
        check_sqlite(folder / INDEX_FILE, must_exist=True)
    conn = sqlite3.connect("file::memory:", uri=True)
    try:
        for alias, folder in (("a", folder_a), ("b", folder_b)):
            conn.execute(
                f"ATTACH DATABASE ? AS {alias}", (f"{(folder / INDEX_FILE).resolve().as_uri()}?mode=ro",)
            )
        conn.execute("BEGIN")  # one snapshot of both
        n_a = int(conn.execute("SELECT COUNT(*) FROM a.outcome").fetchone()[0])
        n_b = int(conn.execute("SELECT COUNT(*) FROM b.outcome").fetchone()[0])
        join = "FROM a.outcome x JOIN b.outcome y ON y.match = x.match AND y.judge = x.judge"
        groups = [
            OutcomeGroup(str(r[0]), str(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]), int(r[6]))
            for r in conn.execute(
                "SELECT x.candidate, x.judge, COUNT(*), SUM(x.correct), SUM(y.correct),"
                f" SUM(y.correct > x.correct), SUM(x.correct > y.correct) {join}"
                " GROUP BY x.candidate, x.judge ORDER BY x.candidate, x.judge"
            )
        ]
        flips = [
            OutcomeFlip(str(r[0]), str(r[1]), str(r[2]), str(r[3]), bool(r[4]), bool(r[5]))
            for r in conn.execute(
                f"SELECT x.candidate, x.judge, x.item_key, y.item_key, x.correct, y.correct {join}"
                " WHERE x.correct != y.correct ORDER BY x.match, x.judge LIMIT ?",
                (flips_limit,),
            )
        ]
        conn.execute("COMMIT")
    finally:
        conn.close()
    matched = sum(g.n for g in groups)
    return PairedOutcomes(
        matched=matched,
        only_a=n_a - matched,
        only_b=n_b - matched,
        groups=groups,
        flips=flips,
        flips_total=sum(g.gained + g.lost for g in groups),
    )
