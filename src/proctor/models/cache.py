"""Persistent call cache (SQLite, WAL). Keys hash provider identity, messages and generation params —
never credentials — so a re-run of a finished config makes zero calls."""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from proctor.sqlite_db import ThreadLocalDB


def default_cache_dir() -> Path:
    env = os.environ.get("PROCTOR_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "proctor"


def cache_key(identity: dict[str, Any], payload: dict[str, Any]) -> str:
    blob = json.dumps({"identity": identity, "payload": payload}, sort_keys=True, ensure_ascii=False)
    return hashlib.sha256(blob.encode()).hexdigest()


class CallCache:
    """Key -> JSON value. One connection per thread; commits after every put so a kill -9 loses nothing
    that had returned."""

    def __init__(self, path: Path, table: str = "calls") -> None:
        self.path = Path(path)
        self.table = table
        self._db = ThreadLocalDB(self.path)
        conn = self._conn()
        conn.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT PRIMARY KEY, value TEXT, created REAL)")
        conn.commit()

    def _conn(self) -> sqlite3.Connection:
        return self._db.conn()

    def get(self, key: str) -> Any | None:
        row = self._conn().execute(f"SELECT value FROM {self.table} WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: Any) -> None:
        self._conn().execute(
            f"INSERT OR REPLACE INTO {self.table} (key, value, created) VALUES (?, ?, ?)",
            (key, json.dumps(value, ensure_ascii=False), time.time()),
        )

    def get_many(self, keys: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        conn = self._conn()
        for i in range(0, len(keys), 500):
            chunk = keys[i : i + 500]
            q = f"SELECT key, value FROM {self.table} WHERE key IN ({','.join('?' * len(chunk))})"
            for k, v in conn.execute(q, chunk):
                out[k] = json.loads(v)
        return out

    def put_many(self, items: dict[str, Any]) -> None:
        conn = self._conn()
        now = time.time()
        conn.execute("BEGIN")
        conn.executemany(
            f"INSERT OR REPLACE INTO {self.table} (key, value, created) VALUES (?, ?, ?)",
            [(k, json.dumps(v, ensure_ascii=False), now) for k, v in items.items()],
        )
        conn.execute("COMMIT")
