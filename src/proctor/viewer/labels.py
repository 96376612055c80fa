"""Human labels: an append-only SQLite database in the run folder (`labels.sqlite`), never the call cache.

Every label is a new row (annotator, time, label, note); an item's current label by an annotator is their
latest row. Labels are "correct" / "incorrect" / "unsure" for a judged item, "1".."4" for a conversation
round rated on KIEval's scale.

JSONL export/import use the format `reckon.human_labels` reads, generalised to every protocol: `item_id`
is the item's key in the run store (for a reckon item, its own id `<unit_id>@<candidate>`, which import
maps back to the item's key), and the extra fields `annotator`, `time` and `note` are kept:

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
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from typing import Literal

from pydantic import BaseModel, Field, field_validator

from proctor.store.labels import LABELS_FILE, Label, LabelStore
from proctor.store.record import RunRecord

BINARY = ("correct", "incorrect", "unsure")
RATING = ("1", "2", "3", "4")
PREFERENCE = ("a", "b", "tie")
PREFERENCE_PREFIX = "pref:"
Scale = Literal["binary", "rating", "preference"]
__all__ = ["LABELS_FILE", "Label", "LabelIn", "LabelStore", "PreferencePair"]


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


def export_lines(labels: Iterable[Label], own_ids: dict[str, str] | None = None) -> Iterator[str]:
    """JSONL lines of `labels`; `own_ids` (store key -> the payload's own `item_id`, see
    `resolve_item_ids`) writes a reckon item as `<unit_id>@<candidate>`, as `reckon.human_labels` reads."""
    for lab in labels:
        rec: dict[str, object] = {
            "item_id": (own_ids or {}).get(lab.item_key, lab.item_key),
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


def resolve_item_ids(run: RunRecord, labels: list[LabelIn]) -> list[LabelIn]:
    """Labels whose `item_id` is an item's own id (reckon's `<unit_id>@<candidate>`) rather than its store
    key, re-addressed to the store key; every other label as it is."""
    keys = run.keys_of_item_ids(lab.item_id for lab in labels)
    return [
        lab.model_copy(update={"item_id": keys[lab.item_id]}) if lab.item_id in keys else lab
        for lab in labels
    ]


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
