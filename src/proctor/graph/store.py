"""Built graphs, kept across runs: one SQLite file (default `<cache dir>/graphs.sqlite`) with entities,
aliases, mentions and edges per build key (corpus fingerprint + extraction model + prompt version +
settings), so a later run on the same corpus reuses the graph without a single extraction call."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from proctor.graph.model import ContextGraph, Edge, Entity
from proctor.sqlite_db import ThreadLocalDB

SCHEMA = """
CREATE TABLE IF NOT EXISTS builds (key TEXT PRIMARY KEY, created REAL, info TEXT);
CREATE TABLE IF NOT EXISTS entities (key TEXT, entity_id TEXT, name TEXT, PRIMARY KEY (key, entity_id));
CREATE TABLE IF NOT EXISTS aliases (key TEXT, entity_id TEXT, alias TEXT);
CREATE TABLE IF NOT EXISTS mentions (key TEXT, entity_id TEXT, chunk_id TEXT, doc_id TEXT);
CREATE TABLE IF NOT EXISTS edges (key TEXT, a TEXT, b TEXT, kind TEXT, weight INTEGER);
CREATE INDEX IF NOT EXISTS aliases_key ON aliases(key);
CREATE INDEX IF NOT EXISTS mentions_key ON mentions(key);
CREATE INDEX IF NOT EXISTS edges_key ON edges(key);
"""


class GraphStore:
    def __init__(self, path: str | Path) -> None:
        self._db = ThreadLocalDB(Path(path))
        self._db.conn().executescript(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def info(self, key: str) -> dict[str, Any] | None:
        row = self._db.conn().execute("SELECT info FROM builds WHERE key=?", (key,)).fetchone()
        return None if row is None else dict(json.loads(row[0]))

    def save(self, graph: ContextGraph, info: dict[str, Any]) -> None:
        """Replace whatever the store held under the graph's key, in one transaction."""
        conn = self._db.conn()
        k = graph.key
        conn.execute("BEGIN")
        try:
            for table in ("builds", "entities", "aliases", "mentions", "edges"):
                conn.execute(f"DELETE FROM {table} WHERE key=?", (k,))
            for e in graph.entities.values():
                conn.execute("INSERT INTO entities VALUES (?,?,?)", (k, e.entity_id, e.name))
                conn.executemany(
                    "INSERT INTO aliases VALUES (?,?,?)", [(k, e.entity_id, a) for a in e.aliases]
                )
                conn.executemany(
                    "INSERT INTO mentions VALUES (?,?,?,?)", [(k, e.entity_id, c, d) for c, d in e.mentions]
                )
            conn.executemany(
                "INSERT INTO edges VALUES (?,?,?,?,?)", [(k, x.a, x.b, x.kind, x.weight) for x in graph.edges]
            )
            conn.execute(
                "INSERT INTO builds VALUES (?,?,?)", (k, time.time(), json.dumps(info, sort_keys=True))
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def load(self, key: str) -> ContextGraph | None:
        conn = self._db.conn()
        if conn.execute("SELECT 1 FROM builds WHERE key=?", (key,)).fetchone() is None:
            return None
        aliases: dict[str, list[str]] = {}
        for eid, alias in conn.execute(
            "SELECT entity_id, alias FROM aliases WHERE key=? ORDER BY rowid", (key,)
        ):
            aliases.setdefault(eid, []).append(alias)
        mentions: dict[str, list[tuple[str, str]]] = {}
        q = "SELECT entity_id, chunk_id, doc_id FROM mentions WHERE key=? ORDER BY rowid"
        for eid, chunk, doc in conn.execute(q, (key,)):
            mentions.setdefault(eid, []).append((chunk, doc))
        entities = [
            Entity(eid, name, tuple(aliases.get(eid, [])), tuple(mentions.get(eid, [])))
            for eid, name in conn.execute(
                "SELECT entity_id, name FROM entities WHERE key=? ORDER BY rowid", (key,)
            )
        ]
        edges = [
            Edge(a, b, kind, weight)
            for a, b, kind, weight in conn.execute(
                "SELECT a, b, kind, weight FROM edges WHERE key=? ORDER BY rowid", (key,)
            )
        ]
        return ContextGraph(key, entities, edges)
