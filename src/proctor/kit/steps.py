"""The one step runner: keyed, resumable, concurrent units of work with typed results.

A protocol calls `ctx.map(...)` (items) or `ctx.judge(...)` (judgments); both come here. For each unit
the runner derives its key (`proctor.kit.keys`), hands back what the store already holds for it (done,
or failed for good) while what it depended on is unchanged, runs the rest under the models' limiters
inside a call scope (so every model call is recorded against its unit and role, and the budget applies)
while collecting what each unit depends on, stores each success as its typed payload and each failure
with its cause, advances progress, and returns one `Outcome` per unit. Protocol code therefore holds
no keys, no resume predicates, no error-recording closures and no store re-reads of what it just ran.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from proctor.dependencies import collecting
from proctor.errors import StepError, is_final
from proctor.kit.keys import still_valid
from proctor.kit.progress import ProgressReporter
from proctor.models.planning import active_planner, planning_step
from proctor.models.recording import Budget, call_scope, current_scope
from proctor.store import RunStore

U = TypeVar("U")
T = TypeVar("T", bound="Payload")


class Payload(BaseModel):
    """The typed data of a stored item. `KIND` is the item kind in the store; reports read items back
    with `Run.payloads(Model)` (`proctor.load_run`), so renaming a field is a type error, not a silently
    empty table."""

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


def _stored(
    store: RunStore, key: str, output: type[T], judge: str | None, models: set[str]
) -> tuple[T | None, Failure | None, dict[str, Any] | None]:
    """What the store already settled for `key`: (value, None, None), (None, final failure, None) or
    (None, None, partial) when the unit must run (new, transiently failed, stored under an older payload
    shape, or produced with a prompt file or a model that has changed since); `partial` is the data a
    transient failure stored while what the unit depended on is unchanged (see `resumed_partial`)."""
    if judge is None:
        it = store.get_item(key)
        row = None if it is None else (it["status"] == "done", it["data"], it["error"], it["error_cause"], it)
    else:
        j = store.get_judgment(key, judge)
        row = None if j is None else (j["error"] is None, j, j["error"], j["error_cause"], j)
    if row is None:
        return None, None, None
    done, data, error, cause, record = row
    if not still_valid(record["deps"], models):
        return None, None, None
    if done:
        try:
            return output.model_validate(data), None, None
        except ValidationError:
            return None, None, None
    if is_final(cause):
        return None, Failure(cause or "error", error or ""), None
    partial = record["data"]  # a judgment's own data; an item's payload
    return None, None, partial if isinstance(partial, dict) and partial else None


def _record(
    store: RunStore,
    key: str,
    output: type[T],
    judge: str | None,
    value: T | None,
    failure: Failure | None,
    context: dict[str, Any] | None,
    deps: dict[str, object],
) -> None:
    if judge is not None:
        if value is not None:
            assert isinstance(value, Judgment)
            store.put_judgment(
                key,
                judge,
                verdict=value.verdict,
                score=value.score,
                reason=value.reason,
                data=value.data,
                deps=deps,
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
                data=context,
                deps=deps,
            )
        return
    if value is not None:
        store.put_item(key, output.KIND, value.model_dump(mode="json"), deps=deps)
    else:
        assert failure is not None
        store.put_item(
            key,
            output.KIND,
            context or {},
            status="error",
            error=failure.message,
            error_cause=failure.cause,
            deps=deps,
        )


@dataclass(frozen=True)
class StepHost:
    """What the runner needs of a run: where results go, progress, the budget, and the identity hashes
    of the run's models as they are now (stored units are checked against them)."""

    store: RunStore
    progress: ProgressReporter
    budget: Budget | None
    models: frozenset[str]
    limit: int | None = None  # `--limit N`: a step runs at most its first N distinct units


async def run_steps(
    ctx: StepHost,
    description: str,
    units: list[U],
    step: Callable[[U], Awaitable[T]],
    key: Callable[[U], str],
    role: str | Callable[[U], str] | None,
    output: type[T],
    context: Callable[[U], dict[str, Any]] | None,
    *,
    judge: str | None,
) -> list[Outcome[U, T]]:
    if judge is None and not output.KIND:
        raise TypeError(f"{output.__name__} needs a KIND (the item kind it is stored as)")
    keys = [key(u) for u in units]
    if ctx.limit is not None:
        units, keys = _first_distinct(units, keys, ctx.limit)
    models = set(ctx.models)
    settled: dict[str, tuple[T | None, Failure | None]] = {}
    todo: dict[str, U] = {}
    partials: dict[str, dict[str, Any]] = {}
    for u, k in zip(units, keys, strict=True):
        if k in settled or k in todo:
            continue
        value, failure, partial = _stored(ctx.store, k, output, judge, models)
        if value is not None or failure is not None:
            settled[k] = (value, failure)
        else:
            todo[k] = u
            if partial is not None:
                partials[k] = partial
    stage = ctx.progress.stage(description, len(todo))
    planner = active_planner()
    if planner is not None:
        planner.begin_step(description, len(todo))

    async def one(k: str, u: U) -> None:
        unit_role = role(u) if callable(role) else role
        with (
            collecting() as deps,
            call_scope(recorder=ctx.store, role=unit_role, item_key=k, budget=ctx.budget, step=description),
            planning_step(description),
        ):
            partial: dict[str, Any] | None = None

            def save(data: dict[str, Any]) -> None:
                if judge is not None:
                    raise RuntimeError("checkpoint() is for steps run by ctx.map, not ctx.judge")
                ctx.store.put_item(k, output.KIND, data, status="pending", deps=deps.as_json())

            token = _resumed.set(partials.get(k))
            saver = _checkpoint.set(save)
            try:
                value: T | None = await step(u)
                failure = None
            except StepError as e:
                value, failure, partial = None, Failure(e.cause, str(e)), e.partial
            finally:
                _resumed.reset(token)
                _checkpoint.reset(saver)
        data = partial if partial is not None else (context(u) if context and failure else None)
        _record(ctx.store, k, output, judge, value, failure, data, deps.as_json())
        settled[k] = (value, failure)
        stage.advance()

    await asyncio.gather(*(one(k, u) for k, u in todo.items()))
    stage.finish()
    return [Outcome(u, k, *settled[k]) for u, k in zip(units, keys, strict=True)]


def _first_distinct(units: list[U], keys: list[str], limit: int) -> tuple[list[U], list[str]]:
    """The units whose keys are among the first `limit` distinct keys, in order (`--limit`)."""
    allowed: set[str] = set()
    for k in keys:
        if len(allowed) >= limit:
            break
        allowed.add(k)
    kept = [(u, k) for u, k in zip(units, keys, strict=True) if k in allowed]
    return [u for u, _ in kept], [k for _, k in kept]


# What the running unit stored when it last failed transiently (see `resumed_partial`).
_resumed: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "proctor_resumed_partial", default=None
)


_checkpoint: contextvars.ContextVar[Callable[[dict[str, Any]], None] | None] = contextvars.ContextVar(
    "proctor_checkpoint", default=None
)


def resumed_partial() -> dict[str, Any] | None:
    """Inside a step: the data the running unit stored when it last failed with a transient cause (its
    `StepError.partial`, or the `context` the step was mapped with) or was stopped after a `checkpoint`,
    while the prompt files and models it used are unchanged; None for a unit that runs for the first time.
    A step that does several things (e.g. a conversation round: a question, then a reply) continues from
    there instead of repeating them."""
    return _resumed.get()


def checkpoint(partial: dict[str, Any]) -> None:
    """Inside a step run by `ctx.map`: store what the unit got done so far (an item with status
    `pending`, and what it depended on so far), so that a run killed before the unit ends hands it back
    to the re-run step through `resumed_partial()` — at most the calls in flight are repeated."""
    save = _checkpoint.get()
    if save is None:
        raise RuntimeError("checkpoint() is only known inside a step run by ctx.map")
    save(partial)


def current_key() -> str:
    """The key of the unit the calling step is running (for a payload that carries its own id)."""
    key = current_scope().item_key
    if key is None:
        raise RuntimeError("current_key() is only known inside a step run by ctx.map or ctx.judge")
    return key
