"""The item browser, paged straight from the run record (`RunRecord` with its side index attached, see
`proctor.store.index`): one page of rows at a time (LIMIT / OFFSET over the `(kind, seq)` index), filters
by kind, candidate, judge verdict, error cause, status and full-text search. Nothing here reads all items
into memory.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from proctor.agents.trace import Trajectory
from proctor.store.index import ANSWER_FIELDS, TITLE_FIELDS
from proctor.store.record import IndexFacets, ItemQuery, ItemRecord, JudgmentRecord, RunRecord
from proctor.store.transcripts import CallTranscript, LogprobSummary, ToolCallText

PAGE_SIZE = 50
# Counting the matches of a filter that is not on the index stops here ("10,000+").
COUNT_CAP = 10_000
REFERENCE_FIELDS = (
    "reference_answer",
    "reference",
    "gold_answer",
    "gold",
    "expected_answer",
    "expected",
    "correct_answer",
    "target",
)
_MAX_SHORT = 240
# A call's message longer than this shows its start, with the whole text one click away.
MESSAGE_PREVIEW = 1200
# An item page shows this many of its model calls at a time ("more" pages on): an agent's long
# transcript is read and rendered a page at a time.
CALLS_PAGE = 50


class ItemFilter(BaseModel):
    """The browser's query string."""

    kind: str | None = None
    candidate: str | None = None
    judge: str | None = None
    verdict: str | None = None
    cause: str | None = None
    status: str | None = None
    q: str | None = None
    # The column the list is sorted by (a name of `proctor.store.record.SORT_KEYS`: nothing else passes).
    sort: Literal["seq", "item", "candidate", "answer", "judgments", "status", "labels"] | None = None
    order: Literal["asc", "desc"] | None = None
    page: int = Field(default=1, ge=1)

    def sort_link(self, column: str) -> dict[str, Any]:
        """The query of the list sorted by `column`: ascending first, descending on a second click."""
        descending = (self.sort or "seq") == column and self.order != "desc"
        return self.query(sort=column, order="desc" if descending else None, page=None)

    def sorted_by(self, column: str) -> str | None:
        """ "ascending" / "descending" for the column the list is sorted by (aria-sort), else None."""
        if (self.sort or "seq") != column:
            return None
        return "descending" if self.order == "desc" else "ascending"

    def query(self, **override: Any) -> dict[str, Any]:
        """The non-empty fields (with overrides), for building links."""
        d = {**self.model_dump(), **override}
        return {k: v for k, v in d.items() if v not in (None, "")}

    def store_query(self, fts: str | None = None) -> ItemQuery:
        """The filter as the run record's query (`fts`: the FTS5 query made of `q`)."""
        return ItemQuery(
            kind=self.kind,
            status=self.status,
            candidate=self.candidate,
            judge=self.judge,
            verdict=self.verdict,
            cause=self.cause,
            fts=fts,
            sort=self.sort or "seq",
            descending=self.order == "desc",
        )


@dataclass
class JudgmentCell:
    judge: str
    verdict: str | None
    score: float | None
    error_cause: str | None


@dataclass
class ItemRow:
    key: str
    seq: int
    kind: str
    status: str
    candidate: str | None
    title: str
    answer: str
    error_cause: str | None
    judgments: list[JudgmentCell] = field(default_factory=list)


@dataclass
class ItemPage:
    rows: list[ItemRow]
    page: int
    pages: int
    total: int
    capped: bool  # total is a lower bound (COUNT_CAP reached)
    size: int = PAGE_SIZE


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _short(value: Any) -> str:
    text = _text(value)
    return text if len(text) <= _MAX_SHORT else text[: _MAX_SHORT - 1] + "…"


def _pick(data: Any, names: tuple[str, ...]) -> Any:
    if not isinstance(data, dict):
        return None
    return next((data[n] for n in names if data.get(n) not in (None, "")), None)


def _row(r: ItemRecord) -> ItemRow:
    data = r.data
    title = _pick(data, TITLE_FIELDS)
    if title is None and isinstance(data, dict):
        title = next((v for v in data.values() if isinstance(v, str) and v), None)
    cand = data.get("candidate") if isinstance(data, dict) else None
    return ItemRow(
        key=r.key,
        seq=int(r.seq or 0),
        kind=r.kind,
        status=r.status,
        candidate=str(cand) if cand is not None else None,
        title=_short(title),
        answer=_short(_pick(data, ANSWER_FIELDS)),
        error_cause=r.error_cause,
    )


def answers(run: RunRecord, keys: list[str]) -> dict[str, str]:
    """Item key -> its answer text, shortened as in the item list (for the few items a page shows)."""
    return {k: _short(_pick(it.data, ANSWER_FIELDS)) for k, it in run.items_by_key(keys).items()}


def page(run: RunRecord, f: ItemFilter, fts: str | None = None, size: int = PAGE_SIZE) -> ItemPage:
    """One page of items matching `f` (`fts`: the FTS5 query). The side index must be attached."""
    q = f.store_query(fts)
    total, capped = run.count_matching(q, COUNT_CAP)
    pages = max(1, -(-total // size))
    number = min(f.page, pages) if not capped else f.page
    keys = run.matching_keys(q, size, (number - 1) * size)
    by_key = run.items_by_key(keys)
    items = [_row(by_key[k]) for k in keys if k in by_key]
    judged = run.judgments_of([r.key for r in items])
    for row in items:
        row.judgments = [
            JudgmentCell(j.judge, j.verdict, j.score, j.error_cause) for j in judged.get(row.key, [])
        ]
    return ItemPage(rows=items, page=number, pages=pages, total=total, capped=capped, size=size)


def neighbours(
    run: RunRecord, f: ItemFilter, seq: int, fts: str | None = None
) -> tuple[str | None, str | None]:
    """Keys of the previous and next item under the same filters (for j / k in the item view)."""
    return run.neighbours(f.store_query(fts), seq)


Facets = IndexFacets  # the values the browser's filters offer


def facets(run: RunRecord) -> Facets:
    """From the side index (attached): every lookup is on an index."""
    return run.facets()


def default_kind(fc: Facets, judged_kinds: list[str]) -> str | None:
    """The kind the browser opens on: the largest judged kind, else the largest kind."""
    ranked = sorted(fc.kinds, key=lambda kc: -kc[1])
    for kind, _ in ranked:
        if kind in judged_kinds:
            return kind
    return ranked[0][0] if ranked else None


def judged_kinds(run: RunRecord) -> list[str]:
    """Kinds with at least one judgment (one index probe per kind)."""
    return run.judged_kinds()


# --- one item ---------------------------------------------------------------------------------------
@dataclass
class Shown:
    """A text as the timeline shows it: whole when short, else its start and the whole behind "show all"."""

    text: str
    preview: str
    truncated: bool


def shown(text: str, limit: int = MESSAGE_PREVIEW) -> Shown:
    if len(text) <= limit:
        return Shown(text, text, False)
    return Shown(text, text[:limit] + "…", True)


@dataclass
class CallMessage:
    role: str
    content: Shown
    tool_calls: list[ToolCallText] = field(default_factory=list)
    tool_call_id: str | None = None


@dataclass
class Call:
    """One model call of the item's timeline, with its transcript when the run stored text."""

    id: int
    role: str | None
    model: str
    step: str | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    attempts: int
    error: str | None
    params: dict[str, object]
    text_stored: bool
    messages: list[CallMessage] = field(default_factory=list)
    reply: Shown | None = None
    reply_tool_calls: list[ToolCallText] = field(default_factory=list)
    logprobs: LogprobSummary | None = None


@dataclass
class Turn:
    role: str
    text: str


@dataclass
class Round:
    key: str
    index: int
    turns: list[Turn]
    score: Any
    stop: str | None


@dataclass
class ItemDetail:
    key: str
    seq: int
    kind: str
    status: str
    error: str | None
    error_cause: str | None
    data: Any
    judgments: list[JudgmentRecord]
    calls: list[Call]  # one page of them (CALLS_PAGE, from call number `calls_from`)
    rounds: list[Round]
    # Why the calls have no text: None when they have it (or there are none), else what to say.
    no_text: str | None
    title: str = ""  # the question (or what stands for it), reference and answer, shown side by side on top
    reference: str = ""
    answer: str = ""
    trajectory: Trajectory | None = None  # an agent candidate's steps (`data.trace.trajectory`)
    contexts: list[str] = field(default_factory=list)  # a pipeline candidate's passages (`.trace.contexts`)
    calls_total: int = 0  # every call made for the item
    calls_page: int = 1
    calls_pages: int = 1
    calls_size: int = CALLS_PAGE


def _call(c: CallTranscript) -> Call:
    return Call(
        id=c.id,
        role=c.role,
        model=f"{c.provider}/{c.model}",
        step=c.step,
        prompt_tokens=c.prompt_tokens,
        completion_tokens=c.completion_tokens,
        latency_s=c.latency_s,
        cached=c.cached,
        attempts=c.attempts,
        error=c.error,
        params=c.params,
        text_stored=c.text_stored,
        messages=[
            CallMessage(m.role, shown(m.content), list(m.tool_calls or []), m.tool_call_id)
            for m in c.messages or []
        ],
        reply=None if c.reply is None else shown(c.reply),
        reply_tool_calls=list(c.reply_tool_calls or []),
        logprobs=c.logprobs,
    )


def _no_text(run: RunRecord, calls: list[CallTranscript]) -> str | None:
    if not calls or any(c.text_stored for c in calls):
        return None
    if not run.records_transcripts():
        return "no transcript stored (this run was recorded by a proctor that did not keep call text)"
    return "no transcript stored (store_text: false)"


# A round's turn fields, in conversation order: the asking side first, then the answering side.
_ASKING = ("question", "interactor_question", "examiner_question", "follow_up")
_ANSWERING = ("answer", "candidate_reply", "reply")


def _turns(data: dict[str, Any]) -> list[Turn]:
    names = [n for n in _ASKING if n in data] + [n for n in _ANSWERING if n in data]
    names += sorted(
        n
        for n, v in data.items()
        if n not in names and isinstance(v, str) and n.endswith(("_question", "_reply", "_answer"))
    )
    return [Turn(role=n, text=str(data[n])) for n in names if data.get(n) is not None]


def conversation(run: RunRecord, key: str, kind: str, data: Any) -> list[Round]:
    """The rounds of the conversation an item belongs to (a round item) or is (a conversation item):
    items carrying the same `conversation` field and a `round` number, in round order."""
    if not isinstance(data, dict) or not data.get("conversation"):
        return []
    conv = data["conversation"]
    kinds = [kind] if "round" in data else [k for k in run.kinds() if k.endswith("_round")]
    rounds = []
    for k in kinds:
        for it in run.items_where(k, "conversation", conv):
            d = it.data
            if not isinstance(d, dict) or "round" not in d:
                continue
            stop = d.get("stop_reason")
            rounds.append(
                Round(
                    key=it.key,
                    index=int(d["round"]),
                    turns=_turns(d),
                    score=d.get("overall_score"),
                    stop=str(stop) if stop not in (None, "none") else None,
                )
            )
    rounds.sort(key=lambda rd: rd.index)
    return rounds


def trace_of(data: Any) -> tuple[Trajectory | None, list[str]]:
    """An answer's trace as candidates record it (`{"kind": "agent", "trajectory": ...}` or
    `{"kind": "pipeline", "contexts": [...]}`): the typed trajectory and the passages, when present."""
    trace = data.get("trace") if isinstance(data, dict) else None
    if not isinstance(trace, dict):
        return None, []
    trajectory = None
    if isinstance(trace.get("trajectory"), dict):
        try:
            trajectory = Trajectory.model_validate(trace["trajectory"])
        except ValidationError:
            trajectory = None  # not one this version reads: the raw data below still shows it
    contexts = trace.get("contexts")
    return trajectory, [_text(c) for c in contexts] if isinstance(contexts, list) else []


def detail(run: RunRecord, key: str, calls_page: int = 1, calls_size: int = CALLS_PAGE) -> ItemDetail | None:
    """One item with page `calls_page` of its model calls (`calls_size` a page)."""
    it = run.item(key)
    if it is None:
        return None
    data = it.data
    total = run.call_count(key)
    pages = max(1, -(-total // calls_size))
    number = min(max(1, calls_page), pages)
    calls = run.transcripts(key, limit=calls_size, offset=(number - 1) * calls_size)
    trajectory, contexts = trace_of(data)
    return ItemDetail(
        key=it.key,
        seq=int(it.seq or 0),
        kind=it.kind,
        status=it.status,
        error=it.error,
        error_cause=it.error_cause,
        data=data,
        judgments=run.judgments(key),
        calls=[_call(c) for c in calls],
        rounds=conversation(run, it.key, it.kind, data),
        no_text=_no_text(run, calls),
        title=_text(_pick(data, TITLE_FIELDS)),
        reference=_text(_pick(data, REFERENCE_FIELDS)),
        answer=_text(_pick(data, ANSWER_FIELDS)),
        trajectory=trajectory,
        contexts=contexts,
        calls_total=total,
        calls_page=number,
        calls_pages=pages,
        calls_size=calls_size,
    )
