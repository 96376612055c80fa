"""Protocol name -> run function. Each protocol is `async run(ctx) -> summary dict`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from proctor.protocols.base import RunContext

ProtocolFn = Callable[[RunContext], Awaitable[dict[str, Any]]]


def get_protocol(name: str) -> ProtocolFn:
    if name == "qa":
        from proctor.protocols.qa import run_qa

        return run_qa
    raise KeyError(name)
