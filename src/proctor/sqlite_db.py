"""The one way proctor opens SQLite: WAL, autocommit, one connection per thread.

Autocommit with synchronous=NORMAL means every write is durable against a killed process (not power
loss) without an fsync per call, which keeps the call path cheap.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path


class ThreadLocalDB:
    def __init__(self, path: Path, *, row_factory: type | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._row_factory = row_factory
        self._local = threading.local()
        self._lock = threading.Lock()
        self._all: list[sqlite3.Connection] = []  # every thread's connection, so close() reaches them all

    def conn(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            # Each connection is used by its own thread only; check_same_thread is off so that close()
            # can close the others' connections too.
            conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            if self._row_factory is not None:
                conn.row_factory = self._row_factory
            self._local.conn = conn
            with self._lock:
                self._all.append(conn)
        return conn

    def close(self) -> None:
        """Close every thread's connection; the last one out checkpoints the WAL into the main file, so
        the database file alone holds everything. A later `conn()` opens a new connection."""
        with self._lock:
            conns, self._all = self._all, []
        self._local = threading.local()
        for conn in conns:
            # Fails only while another connection still reads; closing the last one checkpoints anyway.
            with contextlib.suppress(sqlite3.Error):
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            conn.close()
