"""Where model calls are recorded. A run binds a recorder (the run store) and the current item/role with
`call_scope`; the model-call path reads it from a context variable, so protocol code never passes it."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol


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
    # The exchange (the recorder stores it as the call's transcript, `proctor.store.transcripts`): the
    # request's messages and generation parameters (`GenerationParams.as_key()`), the reply's text, tool
    # calls (`ToolCallRequest`s) and token logprobs (`TokenLogprob`s); None/empty when there was none.
    step: str | None = None
    messages: list[Any] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    reply: str | None = None
    reply_tool_calls: tuple[Any, ...] = ()
    logprobs: list[Any] | None = None


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
    step: str | None = None  # the kit step (its description) whose unit is running


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
    step: str | None = None,
) -> Iterator[None]:
    """Nest freely: unset fields inherit from the enclosing scope. Safe across asyncio tasks."""
    outer = _scope.get()
    token = _scope.set(
        CallScope(
            recorder=recorder if recorder is not None else outer.recorder,
            role=role if role is not None else outer.role,
            item_key=item_key if item_key is not None else outer.item_key,
            budget=budget if budget is not None else outer.budget,
            step=step if step is not None else outer.step,
        )
    )
    try:
        yield
    finally:
        _scope.reset(token)
