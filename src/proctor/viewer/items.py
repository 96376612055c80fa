"""The item browser's queries, paged straight from the run store: one page of rows at a time (LIMIT /
OFFSET over the `(kind, seq)` index), filters by kind, candidate, judge verdict, error cause, status and
full-text search (the side index of `proctor.viewer.search`). Nothing here reads all items into memory.
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from proctor.agents.trace import Trajectory
from proctor.viewer.rundir import has_column

PAGE_SIZE = 50
# Counting the matches of a filter that is not on the index stops here ("10,000+").
COUNT_CAP = 10_000
TITLE_FIELDS = ("question", "interactor_question", "keyword", "title", "text", "name", "task")
ANSWER_FIELDS = ("answer", "candidate_reply", "reply", "prediction", "output")
_MAX_SHORT = 240


class ItemFilter(BaseModel):
    """The browser's query string."""

    kind: str | None = None
    candidate: str | None = None
    judge: str | None = None
    verdict: str | None = None
    cause: str | None = None
    status: str | None = None
    q: str | None = None
    page: int = Field(default=1, ge=1)

    def query(self, **override: Any) -> dict[str, Any]:
        """The non-empty fields (with overrides), for building links."""
        d = {**self.model_dump(), **override}
        return {k: v for k, v in d.items() if v not in (None, "")}


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


def _where(f: ItemFilter, fts: str | None) -> tuple[str, list[Any]]:
    """Conditions over the side index's `vx.item_meta m` (see `proctor.viewer.search`)."""
    conds: list[str] = []
    args: list[Any] = []
    if f.kind:
        conds.append("m.kind = ?")
        args.append(f.kind)
    if f.status:
        conds.append("m.status = ?")
        args.append(f.status)
    if f.candidate:
        conds.append("m.candidate = ?")
        args.append(f.candidate)
    if f.verdict or f.judge:
        sub = []
        if f.verdict:
            sub.append("j.verdict = ?")
            args.append(f.verdict)
        if f.judge:
            sub.append("j.judge = ?")
            args.append(f.judge)
        conds.append(f"m.seq IN (SELECT j.seq FROM vx.item_judgment j WHERE {' AND '.join(sub)})")
    if f.cause:
        conds.append(
            "(m.error_cause = ? OR m.seq IN"
            " (SELECT j2.seq FROM vx.item_judgment j2 WHERE j2.error_cause = ?))"
        )
        args += [f.cause, f.cause]
    if fts:
        conds.append("m.seq IN (SELECT rowid FROM vx.item_fts WHERE item_fts MATCH ?)")
        args.append(fts)
    return (" WHERE " + " AND ".join(conds)) if conds else "", args


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


def _row(r: sqlite3.Row) -> ItemRow:
    data = json.loads(r["data"]) if r["data"] else None
    title = _pick(data, TITLE_FIELDS)
    if title is None and isinstance(data, dict):
        title = next((v for v in data.values() if isinstance(v, str) and v), None)
    cand = data.get("candidate") if isinstance(data, dict) else None
    return ItemRow(
        key=r["key"],
        seq=int(r["seq"] or 0),
        kind=r["kind"],
        status=r["status"],
        candidate=str(cand) if cand is not None else None,
        title=_short(title),
        answer=_short(_pick(data, ANSWER_FIELDS)),
        error_cause=r["error_cause"],
    )


def answers(conn: sqlite3.Connection, keys: list[str]) -> dict[str, str]:
    """Item key -> its answer text, shortened as in the item list (for the few items a page shows)."""
    out: dict[str, str] = {}
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        marks = ",".join("?" * len(chunk))
        for r in conn.execute(f"SELECT key, data FROM items WHERE key IN ({marks})", chunk):
            data = json.loads(r["data"]) if r["data"] else None
            out[r["key"]] = _short(_pick(data, ANSWER_FIELDS))
    return out


def _count(conn: sqlite3.Connection, where: str, args: list[Any]) -> tuple[int, bool]:
    n = conn.execute(
        f"SELECT COUNT(*) FROM (SELECT 1 FROM vx.item_meta m{where} LIMIT ?)", [*args, COUNT_CAP + 1]
    ).fetchone()[0]
    return min(int(n), COUNT_CAP), int(n) > COUNT_CAP


def page(conn: sqlite3.Connection, f: ItemFilter, fts: str | None = None, size: int = PAGE_SIZE) -> ItemPage:
    """One page of items matching `f` (`fts`: the FTS5 query). The side index must be attached."""
    where, args = _where(f, fts)
    total, capped = _count(conn, where, args)
    pages = max(1, -(-total // size))
    number = min(f.page, pages) if not capped else f.page
    keys = [
        r[0]
        for r in conn.execute(
            f"SELECT m.key FROM vx.item_meta m{where} ORDER BY m.seq LIMIT ? OFFSET ?",
            [*args, size, (number - 1) * size],
        )
    ]
    by_key = {}
    if keys:
        marks = ",".join("?" * len(keys))
        for r in conn.execute(
            f"SELECT key, seq, kind, status, data, error_cause FROM items WHERE key IN ({marks})", keys
        ):
            by_key[r["key"]] = _row(r)
    items = [by_key[k] for k in keys if k in by_key]
    _attach_judgments(conn, items)
    return ItemPage(rows=items, page=number, pages=pages, total=total, capped=capped, size=size)


def _attach_judgments(conn: sqlite3.Connection, rows: list[ItemRow]) -> None:
    if not rows:
        return
    by_key = {r.key: r for r in rows}
    marks = ",".join("?" * len(by_key))
    for j in conn.execute(
        f"SELECT item_key, judge, verdict, score, error_cause FROM judgments WHERE item_key IN ({marks})"
        " ORDER BY judge",
        list(by_key),
    ):
        by_key[j["item_key"]].judgments.append(
            JudgmentCell(j["judge"], j["verdict"], j["score"], j["error_cause"])
        )


def neighbours(
    conn: sqlite3.Connection, f: ItemFilter, seq: int, fts: str | None = None
) -> tuple[str | None, str | None]:
    """Keys of the previous and next item under the same filters (for j / k in the item view)."""
    where, args = _where(f, fts)
    glue = " AND " if where else " WHERE "
    prev = conn.execute(
        f"SELECT m.key FROM vx.item_meta m{where}{glue}m.seq < ? ORDER BY m.seq DESC LIMIT 1", [*args, seq]
    ).fetchone()
    nxt = conn.execute(
        f"SELECT m.key FROM vx.item_meta m{where}{glue}m.seq > ? ORDER BY m.seq LIMIT 1", [*args, seq]
    ).fetchone()
    return (prev[0] if prev else None), (nxt[0] if nxt else None)


@dataclass
class Facets:
    """The values the browser's filters offer."""

    kinds: list[tuple[str, int]]
    judges: list[str]
    verdicts: list[str]
    causes: list[str]
    statuses: list[str]


def facets(conn: sqlite3.Connection) -> Facets:
    """From the side index (attached as `vx`): every lookup is on an index."""
    kinds = [(r[0], int(r[1])) for r in conn.execute("SELECT kind, COUNT(*) FROM vx.item_meta GROUP BY kind")]
    judges = [r[0] for r in conn.execute("SELECT DISTINCT judge FROM vx.item_judgment ORDER BY judge")]
    verdicts = [
        r[0]
        for r in conn.execute(
            "SELECT DISTINCT verdict FROM vx.item_judgment WHERE verdict IS NOT NULL ORDER BY verdict"
        )
    ]
    causes = sorted(
        {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT error_cause FROM vx.item_meta WHERE error_cause IS NOT NULL"
                " UNION SELECT DISTINCT error_cause FROM vx.item_judgment WHERE error_cause IS NOT NULL"
            )
        }
    )
    statuses = [r[0] for r in conn.execute("SELECT DISTINCT status FROM vx.item_meta ORDER BY status")]
    return Facets(kinds=kinds, judges=judges, verdicts=verdicts, causes=causes, statuses=statuses)


def default_kind(fc: Facets, judged_kinds: list[str]) -> str | None:
    """The kind the browser opens on: the largest judged kind, else the largest kind."""
    ranked = sorted(fc.kinds, key=lambda kc: -kc[1])
    for kind, _ in ranked:
        if kind in judged_kinds:
            return kind
    return ranked[0][0] if ranked else None


def judged_kinds(conn: sqlite3.Connection) -> list[str]:
    """Kinds with at least one judgment (one index probe per kind)."""
    out = []
    for (kind,) in conn.execute("SELECT DISTINCT kind FROM vx.item_meta").fetchall():
        hit = conn.execute(
            "SELECT 1 FROM vx.item_meta m WHERE m.kind = ? AND EXISTS"
            " (SELECT 1 FROM vx.item_judgment j WHERE j.seq = m.seq) LIMIT 1",
            (kind,),
        ).fetchone()
        if hit:
            out.append(kind)
    return out


# --- one item ---------------------------------------------------------------------------------------
@dataclass
class Call:
    id: int
    role: str | None
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_s: float | None
    cached: bool
    attempts: int | None
    error: str | None
    messages: Any = None  # present when the run store records prompts
    reply: str | None = None


@dataclass
class Judgment:
    judge: str
    verdict: str | None
    score: float | None
    reason: str | None
    error: str | None
    error_cause: str | None
    data: Any


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
    judgments: list[Judgment]
    calls: list[Call]
    rounds: list[Round]
    calls_record_text: bool  # whether this store records prompts and replies
    title: str = ""  # the question (or what stands for it) and the answer, shown above the label buttons
    answer: str = ""
    trajectory: Trajectory | None = None  # an agent candidate's steps (`data.trace.trajectory`)
    contexts: list[str] = field(default_factory=list)  # a pipeline candidate's passages (`.trace.contexts`)


def _calls(conn: sqlite3.Connection, key: str) -> tuple[list[Call], bool]:
    text = has_column(conn, "model_calls", "messages") and has_column(conn, "model_calls", "reply")
    extra = ", messages, reply" if text else ""
    out = []
    for r in conn.execute(
        "SELECT id, role, provider, model, prompt_tokens, completion_tokens, cost_usd, latency_s, cached,"
        f" attempts, error{extra} FROM model_calls WHERE item_key = ? ORDER BY id",
        (key,),
    ):
        messages: Any = None
        if text and r["messages"]:
            try:
                messages = json.loads(r["messages"])
            except json.JSONDecodeError:
                messages = r["messages"]
        out.append(
            Call(
                id=int(r["id"]),
                role=r["role"],
                model=f"{r['provider']}/{r['model']}",
                prompt_tokens=r["prompt_tokens"],
                completion_tokens=r["completion_tokens"],
                cost_usd=r["cost_usd"],
                latency_s=r["latency_s"],
                cached=bool(r["cached"]),
                attempts=r["attempts"],
                error=r["error"],
                messages=messages,
                reply=r["reply"] if text else None,
            )
        )
    return out, text


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


def conversation(conn: sqlite3.Connection, key: str, kind: str, data: Any) -> list[Round]:
    """The rounds of the conversation an item belongs to (a round item) or is (a conversation item):
    items carrying the same `conversation` field and a `round` number, in round order."""
    if not isinstance(data, dict) or not data.get("conversation"):
        return []
    conv = data["conversation"]
    if "round" in data:
        kinds = [kind]
    else:
        kinds = [
            r[0] for r in conn.execute("SELECT DISTINCT kind FROM items") if str(r[0]).endswith("_round")
        ]
    rounds = []
    for k in kinds:
        for r in conn.execute(
            "SELECT key, data FROM items WHERE kind = ? AND json_extract(data, '$.conversation') = ?",
            (k, conv),
        ):
            d = json.loads(r["data"]) if r["data"] else {}
            if not isinstance(d, dict) or "round" not in d:
                continue
            stop = d.get("stop_reason")
            rounds.append(
                Round(
                    key=r["key"],
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


def detail(conn: sqlite3.Connection, key: str) -> ItemDetail | None:
    r = conn.execute("SELECT * FROM items WHERE key = ?", (key,)).fetchone()
    if r is None:
        return None
    data = json.loads(r["data"]) if r["data"] else None
    judgments = []
    for j in conn.execute("SELECT * FROM judgments WHERE item_key = ? ORDER BY judge", (key,)):
        jd = json.loads(j["data"]) if j["data"] else None
        judgments.append(
            Judgment(
                judge=j["judge"],
                verdict=j["verdict"],
                score=j["score"],
                reason=j["reason"],
                error=j["error"],
                error_cause=j["error_cause"],
                data=jd,
            )
        )
    calls, text = _calls(conn, key)
    trajectory, contexts = trace_of(data)
    return ItemDetail(
        key=r["key"],
        seq=int(r["seq"] or 0),
        kind=r["kind"],
        status=r["status"],
        error=r["error"],
        error_cause=r["error_cause"],
        data=data,
        judgments=judgments,
        calls=calls,
        rounds=conversation(conn, r["key"], r["kind"], data),
        calls_record_text=text,
        title=_text(_pick(data, TITLE_FIELDS)),
        answer=_text(_pick(data, ANSWER_FIELDS)),
        trajectory=trajectory,
        contexts=contexts,
    )
