"""The conversation engine: multi-round conversations between roles (KIEval's interactor, candidate and
evaluators), run through the kit's one step runner — it holds no keys, no store and no error records.

Conversations advance together, round by round. A round is one unit of `ctx.map` (stored as an item of
kind `output.KIND`; its id is the conversation's id and the round's index): its turns fill the round's
fields in order (e.g. the interactor's question, then the candidate's reply), each turn's model calls
recorded under the turn's role. A panel then scores the round: each voter's reply is a judgment on the
round (`ctx.judge`, judge `f"{panel.judge}:{voter}"`) and the valid replies are combined into the round
(`ctx.revise`). A stop rule on the scored round ends its conversation early.

Resume is the runner's: a done round is handed back; a round that failed or was killed half-way stored
the fields its turns had filled (`StepError.partial`, `checkpoint` after every turn) and continues at its
first missing field (`resumed_partial`); the panel asks only the voters without a stored reply. A final
failure (`proctor.errors.is_final`) ends the conversation where it happened; a transient one ends it too,
and `--resume` retries that round. A round none of whose voters gave a valid reply (each failed for good)
ends the conversation as `evaluator_error`: the round keeps its turns, the voters' failures are their
judgments.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from proctor.errors import StepError
from proctor.kit.context import RunContext
from proctor.kit.steps import Failure, Judgment, Outcome, Payload, checkpoint, resumed_partial
from proctor.models.recording import call_scope

C = TypeVar("C")  # what one conversation is about (the protocol's own unit)
R = TypeVar("R", bound=Payload)  # a round, as stored
V = TypeVar("V", bound=BaseModel)  # one voter's reply on a round

RoundData = dict[str, Any]  # a round being played: the fields its turns filled so far


@dataclass(frozen=True)
class Turn(Generic[C, R]):
    """One step of a round: `run(conversation, round, transcript)` fills `round[field]`; its model calls
    are recorded as `role`. `transcript` holds the conversation's finished rounds."""

    field: str
    role: str
    run: Callable[[C, RoundData, Sequence[R]], Awaitable[Any]]


@dataclass(frozen=True)
class Panel(Generic[C, R, V]):
    """The round's scoring: each voter's `ask(conversation, voter, round, transcript)` reply (a `reply`)
    is stored as the data of the judgment `f"{judge}:{voter}"` on the round; `combine(round, valid replies
    by voter in panel order, voters that failed for good)` gives the scored round."""

    judge: str
    role: str
    voters: Sequence[str]
    reply: type[V]
    ask: Callable[[C, str, R, Sequence[R]], Awaitable[V]]
    combine: Callable[[R, dict[str, V], list[str]], R]


@dataclass
class Conversation(Generic[C, R]):
    """What became of one conversation: its finished (scored) rounds and their keys, why it ended
    (`completed`, a stop reason, `evaluator_error` or `error`), and for `error` the failure."""

    conversation: C
    rounds: list[R] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)
    end: str | None = None  # None while it goes on
    failure: Failure | None = None


async def converse(
    ctx: RunContext[Any],
    description: str,
    conversations: Sequence[C],
    *,
    conversation_id: Callable[[C], Any],
    start: Callable[[C, int], RoundData],
    output: type[R],
    max_rounds: int,
    turns: Sequence[Turn[C, R]],
    panel: Panel[C, R, Any] | None = None,
    stop: Callable[[R], str | None] = lambda r: None,
) -> list[Conversation[C, R]]:
    """Run (or resume) conversations of up to `max_rounds` rounds each, in order. `conversation_id(c)`
    identifies a conversation's inputs (as `ctx.map`'s `unit_id`); round i of it starts as `start(c, i)`;
    `stop(round)` names the reason to end after a scored round, or None."""
    talks = [Conversation[C, R](c) for c in conversations]
    for i in range(max_rounds):
        playing = [t for t in talks if t.end is None]
        if not playing:
            break
        label = f"{description}: round {i + 1}"

        async def play(talk: Conversation[C, R], i: int = i) -> R:
            data: RoundData = {**start(talk.conversation, i), **(resumed_partial() or {})}
            for turn in turns:
                if data.get(turn.field) is None:
                    try:
                        with call_scope(role=turn.role):
                            data[turn.field] = await turn.run(talk.conversation, data, talk.rounds)
                    except StepError as e:  # keep what the turns before it did
                        raise StepError(str(e), cause=e.cause, partial=data) from e
                    if turn is not turns[-1]:
                        checkpoint(data)  # a killed run does not ask this turn again
            return output.model_validate(data)

        def round_id(talk: Conversation[C, R], i: int = i) -> tuple[Any, int]:
            # Earlier rounds are units of their own: what they depended on is checked with them.
            return (conversation_id(talk.conversation), i)

        played = await ctx.map(
            label,
            playing,
            play,
            unit_id=round_id,
            role=turns[0].role if turns else None,
            output=output,
        )
        scored: list[tuple[Conversation[C, R], Outcome[Conversation[C, R], R]]] = []
        for o in played:
            if o.value is None:
                o.unit.end, o.unit.failure = "error", o.failure
            else:
                scored.append((o.unit, o))
        if panel is not None and scored:
            scored = await _vote(ctx, label, panel, scored)
        for talk, o in scored:
            assert o.value is not None
            talk.rounds.append(o.value)
            talk.keys.append(o.key)
            reason = stop(o.value)
            if reason is not None:
                talk.end = reason
    for talk in talks:
        if talk.end is None:
            talk.end = "completed"
    return talks


async def _vote(
    ctx: RunContext[Any],
    label: str,
    panel: Panel[C, R, V],
    rounds: list[tuple[Conversation[C, R], Outcome[Conversation[C, R], R]]],
) -> list[tuple[Conversation[C, R], Outcome[Conversation[C, R], R]]]:
    """The panel's judgments of the played rounds, combined into them; the rounds that could be scored."""

    def asker(
        voter: str,
    ) -> Callable[[tuple[Conversation[C, R], Outcome[Conversation[C, R], R]]], Awaitable[Judgment]]:
        async def ask(u: tuple[Conversation[C, R], Outcome[Conversation[C, R], R]]) -> Judgment:
            talk, o = u
            assert o.value is not None
            try:
                reply = await panel.ask(talk.conversation, voter, o.value, talk.rounds)
            except StepError as e:
                raw = getattr(e, "raw", None)  # an unparseable reply is kept for the report
                raise StepError(str(e), cause=e.cause, partial={"raw": raw[:4000]} if raw else None) from e
            return Judgment(data=reply.model_dump(mode="json"))

        return ask

    votes = await asyncio.gather(
        *(
            ctx.judge(
                f"{label}, {panel.role} {voter}" if len(panel.voters) > 1 else f"{label}, {panel.role}",
                rounds,
                asker(voter),
                item_key=lambda u: u[1].key,
                judge=f"{panel.judge}:{voter}",
                role=panel.role,
            )
            for voter in panel.voters
        )
    )
    kept: list[tuple[Conversation[C, R], Outcome[Conversation[C, R], R]]] = []
    combined: dict[str, R] = {}
    for j, (talk, o) in enumerate(rounds):
        assert o.value is not None
        valid: dict[str, V] = {}
        failed: list[str] = []
        transient: Failure | None = None
        for voter, outcomes in zip(panel.voters, votes, strict=True):
            v = outcomes[j]
            if v.value is not None:
                valid[voter] = panel.reply.model_validate(v.value.data or {})
            elif v.failure is not None and v.failure.final:
                failed.append(voter)
            elif transient is None:
                transient = v.failure
        if transient is not None:  # retried by --resume; the voters that answered are kept
            talk.end, talk.failure = "error", transient
        elif not valid:  # every voter failed for good: the round cannot be scored
            talk.end = "evaluator_error"
        else:
            combined[o.key] = panel.combine(o.value, valid, sorted(failed))
            kept.append((talk, Outcome(o.unit, o.key, combined[o.key])))
    await ctx.revise([o for _, o in rounds if o.key in combined], lambda o: combined[o.key])
    return kept
