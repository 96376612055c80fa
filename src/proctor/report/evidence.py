"""The evidence behind a report's failed or surprising items: the prompts and replies of the model calls
made for them (`RunRecord.transcripts`), shortened, for the report to embed in a collapsible block.

The report is one offline file, so the evidence is embedded, for a bounded number of items (`MAX_ITEMS`,
in the order the report lists them) and with each text cut in the middle to `MAX_CHARS` (a RAG prompt's
question is at its end, an instruction at its start). Every other item names where the whole transcript
is: its page in `proctor view`. The template escapes all of it (model text is untrusted).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import quote

from proctor.store.record import RunRecord

# Items whose calls a report embeds; the rest link to the viewer only.
MAX_ITEMS = 40
# Characters of one message or reply a report keeps (start and end, the middle cut out).
MAX_CHARS = 1500
# Calls shown per item (an agent's loop can make hundreds: the first ones and the viewer for the rest).
MAX_CALLS = 8


@dataclass(frozen=True)
class EvidenceMessage:
    role: str
    text: str
    cut: int  # characters left out of the middle (0: whole)


@dataclass(frozen=True)
class EvidenceCall:
    role: str
    model: str
    messages: list[EvidenceMessage]
    reply: EvidenceMessage | None
    error: str | None


@dataclass(frozen=True)
class ItemEvidence:
    """An item's calls as a report shows them, and where the viewer shows them whole."""

    key: str
    view_path: str  # `proctor view <runs folder>` serves the item here
    calls: list[EvidenceCall] = field(default_factory=list)
    calls_total: int = 0
    text_stored: bool = True  # False: the run kept no call text (store_text: false, or an older run)
    embedded: bool = False  # False: past MAX_ITEMS, only the viewer path is given


def shorten(text: str, limit: int = MAX_CHARS) -> EvidenceMessage:
    """`text` cut in the middle to `limit` characters (role left empty)."""
    if len(text) <= limit:
        return EvidenceMessage("", text, 0)
    head = limit * 2 // 5
    tail = limit - head
    return EvidenceMessage("", f"{text[:head]}\n…\n{text[-tail:]}", len(text) - limit)


def view_path(run_id: str, key: str) -> str:
    return f"/runs/{quote(run_id, safe='')}/items/{quote(key, safe='')}"


def evidence(run: RunRecord, keys: Iterable[str], max_items: int = MAX_ITEMS) -> dict[str, ItemEvidence]:
    """Evidence for `keys` (in report order, duplicates ignored): the first `max_items` embedded, every
    one with its viewer path."""
    info = run.info()
    run_id = info.run_id if info else run.folder.name
    out: dict[str, ItemEvidence] = {}
    for key in keys:
        if key in out:
            continue
        path = view_path(run_id, key)
        if len(out) >= max_items:
            out[key] = ItemEvidence(key, path)
            continue
        total = run.call_count(key)
        calls = run.transcripts(key, limit=MAX_CALLS)
        shown = [
            EvidenceCall(
                role=c.role or "",
                model=f"{c.provider}/{c.model}",
                messages=[
                    EvidenceMessage(m.role, s.text, s.cut)
                    for m in c.messages or []
                    for s in [shorten(m.content)]
                ],
                reply=None if c.reply is None else shorten(c.reply),
                error=c.error,
            )
            for c in calls
        ]
        stored = any(c.text_stored for c in calls) or not calls
        out[key] = ItemEvidence(key, path, shown, total, stored, embedded=True)
    return out
