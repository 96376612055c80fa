"""Human labels of a run: an append-only SQLite database in the run folder (`labels.sqlite`), never the run
store nor the call cache. Every label is a new row (item key, annotator, label, note, time); an item's
current label by an annotator is their latest row. What a label may say is the viewer's business
(`proctor.viewer.labels`); this module only stores and reads rows.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from proctor.store.safe_files import check_sqlite

LABELS_FILE = "labels.sqlite"

SCHEMA = """
CREATE TABLE IF NOT EXISTS labels (
  id INTEGER PRIMARY KEY AUTOINCREMENT, item_key TEXT NOT NULL, annotator TEXT NOT NULL,
  label TEXT NOT NULL, note TEXT NOT NULL DEFAULT '', created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS labels_item ON labels(item_key, annotator, id);
CREATE TRIGGER IF NOT EXISTS labels_no_update BEFORE UPDATE ON labels
  BEGIN SELECT RAISE(ABORT, 'labels are append-only'); END;
CREATE TRIGGER IF NOT EXISTS labels_no_delete BEFORE DELETE ON labels
  BEGIN SELECT RAISE(ABORT, 'labels are append-only'); END;
"""


class NewLabel(Protocol):
    """A label to store (the viewer's `LabelIn`): `time` None means now."""

    @property
    def item_id(self) -> str: ...
    @property
    def label(self) -> str: ...
    @property
    def annotator(self) -> str: ...
    @property
    def note(self) -> str: ...
    @property
    def time(self) -> float | None: ...


@dataclass(frozen=True)
class Label:
    id: int
    item_key: str
    annotator: str
    label: str
    note: str
    created: float


class LabelStore:
    """The run folder's labels database. Opened per request; every write commits at once. The database and
    its side files must be plain files of the folder (`proctor.store.safe_files`: UnsafeStoreFile else)."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LABELS_FILE
        check_sqlite(self.path, must_exist=False)  # never a link out of the run folder, nor its side files
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, label: NewLabel) -> Label:
        created = label.time if label.time is not None else time.time()
        cur = self._conn.execute(
            "INSERT INTO labels (item_key, annotator, label, note, created) VALUES (?, ?, ?, ?, ?)",
            (label.item_id, label.annotator, label.label, label.note, created),
        )
        return Label(
            int(cur.lastrowid or 0), label.item_id, label.annotator, label.label, label.note, created
        )

    def history(self, item_key: str) -> list[Label]:
        rows = self._conn.execute(
            "SELECT id, item_key, annotator, label, note, created FROM labels WHERE item_key = ? ORDER BY id",
            (item_key,),
        )
        return [Label(*r) for r in rows]

    def current(self, keys: Iterable[str] | None = None, annotator: str | None = None) -> list[Label]:
        """Each (item, annotator)'s latest label; restricted to `keys` / `annotator` when given."""
        conds, args = [], []
        if annotator:
            conds.append("annotator = ?")
            args.append(annotator)
        key_list = list(keys) if keys is not None else None
        if key_list is not None:
            if not key_list:
                return []
            conds.append(f"item_key IN ({','.join('?' * len(key_list))})")
            args += key_list
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        rows = self._conn.execute(
            "SELECT id, item_key, annotator, label, note, created FROM labels WHERE id IN"
            f" (SELECT MAX(id) FROM labels{where} GROUP BY item_key, annotator) ORDER BY id",
            args,
        )
        return [Label(*r) for r in rows]

    def annotators(self) -> list[str]:
        return [r[0] for r in self._conn.execute("SELECT DISTINCT annotator FROM labels ORDER BY annotator")]

    def count(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM labels").fetchone()[0])

    def _exists(self, label: NewLabel) -> bool:
        return (
            self._conn.execute(
                "SELECT 1 FROM labels WHERE item_key=? AND annotator=? AND label=? AND note=? AND created=?",
                (label.item_id, label.annotator, label.label, label.note, label.time),
            ).fetchone()
            is not None
        )

    def import_labels(self, labels: Iterable[NewLabel]) -> tuple[int, int]:
        """Append labels; one identical to a stored row (same time too) is skipped, so importing a file
        twice adds nothing. Returns (added, skipped)."""
        added = skipped = 0
        self._conn.execute("BEGIN")
        try:
            for lab in labels:
                if lab.time is not None and self._exists(lab):
                    skipped += 1
                    continue
                self.add(lab)
                added += 1
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        return added, skipped
