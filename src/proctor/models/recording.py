"""Where model calls are recorded. A run binds a recorder (the run store) and the current item/role with
`call_scope`; the model-call path reads it from a context variable, so protocol code never passes it."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class CallRecord:
    provider: str
    model: str
    role: str | None
    item_key: str | None
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    latency_s: float
    cached: bool
    attempts: int
    error: str | None = None


class CallRecorder(Protocol):
    def record_call(self, record: CallRecord) -> None: ...


@dataclass
class Budget:
    """A run's spending cap (USD). Money counts only for calls a server answered (not cache hits); once
    `spent_usd` reaches `limit_usd`, new calls fail with cause "budget" instead of being sent. Calls
    already in flight finish, so the overshoot is at most the cost of the concurrent calls."""

    limit_usd: float
    spent_usd: float = 0.0

    @property
    def exhausted(self) -> bool:
        return self.spent_usd >= self.limit_usd


@dataclass(frozen=True)
class CallScope:
    recorder: CallRecorder | None = None
    role: str | None = None
    item_key: str | None = None
    budget: Budget | None = None


_NO_SCOPE = CallScope()
_scope: contextvars.ContextVar[CallScope] = contextvars.ContextVar("proctor_call_scope", default=_NO_SCOPE)


def current_scope() -> CallScope:
    return _scope.get()


@contextlib.contextmanager
def call_scope(
    *,
    recorder: CallRecorder | None = None,
    role: str | None = None,
    item_key: str | None = None,
    budget: Budget | None = None,
) -> Iterator[None]:
    """Nest freely: unset fields inherit from the enclosing scope. Safe across asyncio tasks."""
    outer = _scope.get()
    token = _scope.set(
        CallScope(
            recorder=recorder if recorder is not None else outer.recorder,
            role=role if role is not None else outer.role,
            item_key=item_key if item_key is not None else outer.item_key,
            budget=budget if budget is not None else outer.budget,
        )
    )
    try:
        yield
    finally:
        _scope.reset(token)
