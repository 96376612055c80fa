"""The conversation engine: resumable multi-round conversations between roles (KIEval's interactor,
candidate and evaluators; the interview protocol's examiner and candidate).

A conversation is a sequence of rounds; a round is one stored item whose data fields are filled by the
round's turns in order (e.g. the interactor's question, then the candidate's reply), each under its own
role, the item stored after every turn. A round may end with a panel: several voters (evaluators) score it
in parallel, each voter's reply stored at once as a judgment on the round — with its cause when it fails —
and the valid replies are combined (voting). A stop rule on the finished round ends the conversation early.

Resume: a done round is handed back as it was; a round stored half-way continues at its first missing
field; a panel asks only the voters without a stored reply. A final failure (`proctor.errors.is_final`)
ends the conversation where it happened; a transient one ends it too, and `--resume` retries that round.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from proctor.errors import StepError, is_final
from proctor.kit.context import RunContext
from proctor.kit.steps import Failure
from proctor.models.recording import call_scope

RoundData = dict[str, Any]
Transcript = list[RoundData]


class EndConversation(Exception):
    """Raised by a turn to end the conversation here without an error (its round is not kept)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Turn:
    """One step of a round: `run(round, transcript)` fills `round[field]`, its calls recorded as `role`."""

    field: str
    role: str
    run: Callable[[RoundData, Transcript], Awaitable[Any]]


@dataclass(frozen=True)
class Panel:
    """The round's scoring: each voter's `ask(voter, round, transcript)` reply is stored as the judgment
    `f"{judge}:{voter}"` on the round; `combine(valid replies, voters that failed for good)` gives the
    fields merged into the round. A round none of whose voters gave a valid reply is an error with the
    voters' cause."""

    judge: str
    role: str
    voters: Sequence[str]
    ask: Callable[[str, RoundData, Transcript], Awaitable[dict[str, Any]]]
    combine: Callable[[dict[str, dict[str, Any]], list[str]], dict[str, Any]]


@dataclass
class Conversation:
    """What became of one conversation: its finished rounds, why it ended, and the failure if any."""

    rounds: Transcript = field(default_factory=list)
    end: str = "completed"
    failure: Failure | None = None


async def converse(
    ctx: RunContext[Any],
    *,
    base: RoundData,
    round_key: Callable[[int], str],
    kind: str,
    max_rounds: int,
    turns: Sequence[Turn],
    panel: Panel | None = None,
    stop: Callable[[RoundData], str | None] = lambda r: None,
    on_round: Callable[[RoundData], None] = lambda r: None,
) -> Conversation:
    """Run (or resume) one conversation of up to `max_rounds` rounds. Each round's item starts as
    `{**base, "round": i}`; `stop(round)` names the reason to end after a finished round, or None;
    `on_round(round)` sees every finished round in order (e.g. to extend the candidate's history)."""
    store = ctx.store
    out = Conversation()
    for i in range(max_rounds):
        rk = round_key(i)
        stored = store.get_item(rk)
        data: RoundData = dict(stored["data"]) if stored else {**base, "round": i}
        if stored is not None and stored["status"] == "done":
            pass
        elif stored is not None and stored["status"] == "error" and is_final(stored["error_cause"]):
            if panel is not None and all(data.get(t.field) is not None for t in turns):
                out.end = "evaluator_error"  # the panel failed for good (see _PanelFailed)
            else:
                out.end = "error"
                out.failure = Failure(stored["error_cause"], stored["error"] or "")
            return out
        else:
            try:
                for turn in turns:
                    if data.get(turn.field) is None:
                        with call_scope(recorder=store, role=turn.role, item_key=rk, budget=ctx.budget):
                            data[turn.field] = await turn.run(data, out.rounds)
                        store.put_item(rk, kind, data, status="pending")
                if panel is not None:
                    await _vote(ctx, panel, rk, data, out.rounds)
                store.put_item(rk, kind, data)
            except EndConversation as e:
                out.end = e.reason
                return out
            except StepError as e:
                store.put_item(rk, kind, data, status="error", error=str(e), error_cause=e.cause)
                out.end = "evaluator_error" if isinstance(e, _PanelFailed) else "error"
                out.failure = None if isinstance(e, _PanelFailed) else Failure(e.cause, str(e))
                return out
        out.rounds.append(data)
        on_round(data)
        reason = stop(data)
        if reason is not None:
            out.end = reason
            return out
    return out


class _PanelFailed(StepError):
    """No voter gave a valid reply: the round cannot be scored (final when the replies were final)."""


async def _vote(ctx: RunContext[Any], panel: Panel, rk: str, data: RoundData, transcript: Transcript) -> None:
    store = ctx.store
    replies: dict[str, dict[str, Any]] = {}
    failures: dict[str, Failure] = {}
    for voter in panel.voters:
        j = store.get_judgment(rk, f"{panel.judge}:{voter}")
        if j is None:
            continue
        if j["error"] is None:
            replies[voter] = j["data"]
        elif is_final(j["error_cause"]):
            failures[voter] = Failure(j["error_cause"], j["error"])

    async def one(voter: str) -> None:
        name = f"{panel.judge}:{voter}"
        with call_scope(recorder=store, role=panel.role, item_key=rk, budget=ctx.budget):
            try:
                reply = await panel.ask(voter, data, transcript)
            except StepError as e:
                failures[voter] = Failure(e.cause, str(e))
                raw = getattr(e, "raw", None)  # an unparseable reply is kept for the report
                store.put_judgment(
                    rk,
                    name,
                    verdict=None,
                    score=None,
                    reason=None,
                    error=str(e),
                    error_cause=e.cause,
                    data={"raw": raw[:4000]} if raw else None,
                )
                return
        replies[voter] = reply
        store.put_judgment(rk, name, verdict=None, score=None, reason=None, data=reply)

    await asyncio.gather(*(one(v) for v in panel.voters if v not in replies and v not in failures))
    transient = [f for v, f in failures.items() if not f.final]
    if transient:  # retried by --resume; the voters that answered are kept
        raise StepError(transient[0].message, cause=transient[0].cause)
    valid = {v: replies[v] for v in panel.voters if v in replies}
    if not valid:
        messages = "; ".join(failures[v].message for v in panel.voters if v in failures)
        raise _PanelFailed(messages, cause=next(iter(failures.values())).cause)
    data.update(panel.combine(valid, sorted(failures)))
