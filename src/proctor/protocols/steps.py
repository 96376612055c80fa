"""The one step runner: keyed, resumable, concurrent units of work with typed results.

A protocol calls `ctx.map(...)` (items) or `ctx.judge(...)` (judgments); both come here. For each unit
the runner derives its key, hands back what the store already holds for it (done, or failed for good),
runs the rest under the models' limiters inside a call scope (so every model call is recorded against
its unit and role, and the budget applies), stores each success as its typed payload and each failure
with its cause, advances progress, and returns one `Outcome` per unit. Protocol code therefore holds
no resume predicates, no error-recording closures and no store re-reads of what it just ran.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from proctor.errors import StepError, is_final
from proctor.models.recording import call_scope
from proctor.store import RunStore

if TYPE_CHECKING:
    from proctor.protocols.context import RunContext

U = TypeVar("U")
T = TypeVar("T", bound="Payload")


class Payload(BaseModel):
    """The typed data of a stored item. `KIND` is the item kind in the store; reports read items back
    with `read_items(store, Model)`, so renaming a field is a type error, not a silently empty table."""

    model_config = ConfigDict(extra="ignore")
    KIND: ClassVar[str] = ""


class Judgment(Payload):
    """A judge's decision on one item: verdict text, numeric score, the judge's reason, extra data."""

    KIND: ClassVar[str] = "judgment"
    verdict: str | None = None
    score: float | None = None
    reason: str | None = None
    data: dict[str, Any] | None = None


@dataclass(frozen=True)
class Failure:
    """Why a unit has no result: a cause from the one vocabulary (`proctor.errors`) and the message."""

    cause: str
    message: str

    @property
    def final(self) -> bool:
        return is_final(self.cause)


@dataclass(frozen=True)
class Outcome(Generic[U, T]):
    """What became of one unit: its value, or the failure recorded for it."""

    unit: U
    key: str
    value: T | None = None
    failure: Failure | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


def _stored(store: RunStore, key: str, output: type[T], judge: str | None) -> tuple[T | None, Failure | None]:
    """What the store already settled for `key`: (value, None), (None, final failure) or (None, None)
    when the unit must run (new, transiently failed, or stored under an older payload shape)."""
    if judge is None:
        it = store.get_item(key)
        row = None if it is None else (it["status"] == "done", it["data"], it["error"], it["error_cause"])
    else:
        j = store.get_judgment(key, judge)
        row = None if j is None else (j["error"] is None, j, j["error"], j["error_cause"])
    if row is None:
        return None, None
    done, data, error, cause = row
    if done:
        try:
            return output.model_validate(data), None
        except ValidationError:
            return None, None
    if is_final(cause):
        return None, Failure(cause or "error", error or "")
    return None, None


def _record(
    store: RunStore,
    key: str,
    output: type[T],
    judge: str | None,
    value: T | None,
    failure: Failure | None,
    context: dict[str, Any] | None,
) -> None:
    if judge is not None:
        if value is not None:
            assert isinstance(value, Judgment)
            store.put_judgment(
                key, judge, verdict=value.verdict, score=value.score, reason=value.reason, data=value.data
            )
        else:
            assert failure is not None
            store.put_judgment(
                key,
                judge,
                verdict=None,
                score=None,
                reason=None,
                error=failure.message,
                error_cause=failure.cause,
            )
        return
    if value is not None:
        store.put_item(key, output.KIND, value.model_dump(mode="json"))
    else:
        assert failure is not None
        store.put_item(
            key, output.KIND, context or {}, status="error", error=failure.message, error_cause=failure.cause
        )


async def run_steps(
    ctx: RunContext[Any],
    description: str,
    units: list[U],
    step: Callable[[U], Awaitable[T]],
    key: Callable[[U], str],
    role: str | Callable[[U], str],
    output: type[T],
    context: Callable[[U], dict[str, Any]] | None,
    *,
    judge: str | None,
) -> list[Outcome[U, T]]:
    if judge is None and not output.KIND:
        raise TypeError(f"{output.__name__} needs a KIND (the item kind it is stored as)")
    keys = [key(u) for u in units]
    settled: dict[str, tuple[T | None, Failure | None]] = {}
    todo: dict[str, U] = {}
    for u, k in zip(units, keys, strict=True):
        if k in settled or k in todo:
            continue
        value, failure = _stored(ctx.store, k, output, judge)
        if value is not None or failure is not None:
            settled[k] = (value, failure)
        else:
            todo[k] = u
    stage = ctx.progress.stage(description, len(todo))

    async def one(k: str, u: U) -> None:
        unit_role = role(u) if callable(role) else role
        with call_scope(recorder=ctx.store, role=unit_role, item_key=k, budget=ctx.budget):
            partial: dict[str, Any] | None = None
            try:
                value: T | None = await step(u)
                failure = None
            except StepError as e:
                value, failure, partial = None, Failure(e.cause, str(e)), e.partial
        data = partial if partial is not None else (context(u) if context and failure else None)
        _record(ctx.store, k, output, judge, value, failure, data)
        settled[k] = (value, failure)
        stage.advance()

    await asyncio.gather(*(one(k, u) for k, u in todo.items()))
    stage.finish()
    return [Outcome(u, k, *settled[k]) for u, k in zip(units, keys, strict=True)]


def read_items(store: RunStore, output: type[T]) -> list[tuple[str, T]]:
    """Every done item of `output.KIND`, typed, in insertion order (for reports and later stages)."""
    out = []
    for it in store.items(output.KIND, status="done"):
        out.append((it["key"], output.model_validate(it["data"])))
    return out
