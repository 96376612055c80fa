"""The one way proctor opens SQLite: WAL, autocommit, one connection per thread.

Autocommit with synchronous=NORMAL means every write is durable against a killed process (not power
loss) without an fsync per call, which keeps the call path cheap.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path


class ThreadLocalDB:
    def __init__(self, path: Path, *, row_factory: type | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._row_factory = row_factory
        self._local = threading.local()

    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if self._row_factory is not None:
                conn.row_factory = self._row_factory
            self._local.conn = conn
        return conn

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
