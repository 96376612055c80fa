"""Human labels: an append-only SQLite database in the run folder (`labels.sqlite`), never the call cache.

Every label is a new row (annotator, time, label, note); an item's current label by an annotator is their
latest row. Labels are "correct" / "incorrect" / "unsure" for a judged item, "1".."4" for a conversation
round rated on KIEval's scale.

JSONL export/import use the format `reckon.human_labels` reads, generalised to every protocol: `item_id`
is the item's key in the run store (for reckon, `<unit_id>@<candidate>`, its `reckon_item` key), and the
extra fields `annotator`, `time` and `note` are kept:

    {"item_id": "a_9db537926e961d737c9e", "label": "correct", "annotator": "ana", "time": 1795496174.9,
     "note": ""}    (one line in the file)

Import also accepts reckon's `{"candidate": ..., "unit_id": ..., "label": ...}` form.

A pairwise preference between two runs' answers to the same item (the compare page) is a label too: its
`item_id` is `pref:["<run A>","<item key in A>","<run B>","<item key in B>"]` with the pair in canonical
order (run ids sorted, so comparing B with A names the same pair), its label `a`, `b` or `tie` for that
order, and it is stored in the labels of the pair's first run. Its export line also carries `run_a`,
`item_a`, `run_b`, `item_b` and `preferred` (the run id, or "tie").
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, field_validator

LABELS_FILE = "labels.sqlite"
BINARY = ("correct", "incorrect", "unsure")
RATING = ("1", "2", "3", "4")
PREFERENCE = ("a", "b", "tie")
PREFERENCE_PREFIX = "pref:"
Scale = Literal["binary", "rating", "preference"]

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


def scale_for(kind: str) -> Scale:
    """Conversation rounds are rated 1-4 (KIEval's scale); every other item is correct/incorrect/unsure."""
    return "rating" if kind.endswith("_round") else "binary"


def allowed(scale: Scale) -> tuple[str, ...]:
    return {"rating": RATING, "preference": PREFERENCE}.get(scale, BINARY)


@dataclass(frozen=True)
class PreferencePair:
    """Two runs' items compared by a human: the label key of a preference between them."""

    run_a: str
    item_a: str
    run_b: str
    item_b: str

    @property
    def key(self) -> str:
        parts = [self.run_a, self.item_a, self.run_b, self.item_b]
        return PREFERENCE_PREFIX + json.dumps(parts, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def parse(cls, key: str) -> PreferencePair | None:
        if not key.startswith(PREFERENCE_PREFIX):
            return None
        try:
            parts = json.loads(key[len(PREFERENCE_PREFIX) :])
        except json.JSONDecodeError:
            return None
        if not (isinstance(parts, list) and len(parts) == 4 and all(isinstance(p, str) for p in parts)):
            return None
        return cls(*parts)

    def canonical(self) -> tuple[PreferencePair, bool]:
        """The pair in stored order (by run id, then item key), and whether that swapped A and B."""
        if (self.run_a, self.item_a) <= (self.run_b, self.item_b):
            return self, False
        return PreferencePair(self.run_b, self.item_b, self.run_a, self.item_a), True


def swap_preference(label: str) -> str:
    """The same preference seen with A and B swapped."""
    return {"a": "b", "b": "a"}.get(label, label)


class LabelIn(BaseModel):
    """One label as posted by the viewer or read from a JSONL line."""

    item_id: str = Field(min_length=1, max_length=500)
    label: str
    annotator: str = Field(min_length=1, max_length=100)
    note: str = Field(default="", max_length=10_000)
    time: float | None = None

    @field_validator("label", mode="before")
    @classmethod
    def _normalise(cls, v: object) -> str:
        text = str(v).strip().lower()
        if text not in BINARY + RATING + PREFERENCE:
            raise ValueError(f"label must be one of {', '.join(BINARY + RATING + PREFERENCE)}, not {v!r}")
        return text

    @field_validator("annotator", mode="before")
    @classmethod
    def _strip(cls, v: object) -> str:
        return str(v).strip()


@dataclass(frozen=True)
class Label:
    id: int
    item_key: str
    annotator: str
    label: str
    note: str
    created: float


class LabelStore:
    """The run folder's labels database. Opened per request; every write commits at once."""

    def __init__(self, folder: Path) -> None:
        self.path = folder / LABELS_FILE
        self._conn = sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(SCHEMA)

    def close(self) -> None:
        self._conn.close()

    def __enter__(self) -> LabelStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(self, label: LabelIn) -> Label:
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

    def _exists(self, label: LabelIn) -> bool:
        return (
            self._conn.execute(
                "SELECT 1 FROM labels WHERE item_key=? AND annotator=? AND label=? AND note=? AND created=?",
                (label.item_id, label.annotator, label.label, label.note, label.time),
            ).fetchone()
            is not None
        )

    def import_labels(self, labels: Iterable[LabelIn]) -> tuple[int, int]:
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


def export_lines(labels: Iterable[Label]) -> Iterator[str]:
    for lab in labels:
        rec: dict[str, object] = {
            "item_id": lab.item_key,
            "label": lab.label,
            "annotator": lab.annotator,
            "time": lab.created,
            "note": lab.note,
        }
        pair = PreferencePair.parse(lab.item_key)
        if pair is not None:
            preferred = {"a": pair.run_a, "b": pair.run_b}.get(lab.label, lab.label)
            rec |= {**asdict(pair), "preferred": preferred}
        yield json.dumps(rec, ensure_ascii=False) + "\n"


class LabelFileError(ValueError):
    """A JSONL line that is not a label; the message names the line."""


def parse_lines(text: str, default_annotator: str) -> list[LabelIn]:
    """Labels from JSONL text (blank lines and `#` comments ignored); the whole file is checked before
    anything is stored, and the first bad line raises LabelFileError naming it."""
    out = []
    for n, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise LabelFileError(f"line {n}: not JSON ({e.msg})") from None
        if not isinstance(rec, dict):
            raise LabelFileError(
                f'line {n}: expected an object like {{"item_id": "...", "label": "correct"}}'
            )
        item = rec.get("item_id")
        if not item and rec.get("candidate") and rec.get("unit_id"):
            item = f"{rec['unit_id']}@{rec['candidate']}"
        if not item:
            raise LabelFileError(f'line {n}: give "item_id", or both "candidate" and "unit_id"')
        try:
            out.append(
                LabelIn(
                    item_id=str(item),
                    label=rec.get("label", ""),
                    annotator=str(rec.get("annotator") or default_annotator),
                    note=str(rec.get("note") or ""),
                    time=float(rec["time"]) if rec.get("time") is not None else None,
                )
            )
        except (ValueError, TypeError) as e:
            raise LabelFileError(f"line {n}: {e}") from None
    return out
