"""Protocols are found by name: package `proctor.protocols.<name>` with `config.Config` (the pydantic
model of the config section named after the protocol) and `run.run` (`async run(ctx) -> summary`).
Adding a protocol touches no shared file."""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from proctor.protocols.base import RunContext

ProtocolFn = Callable[["RunContext"], Awaitable[dict[str, Any]]]


def protocol_names() -> list[str]:
    import proctor.protocols as pkg

    return sorted(
        m.name
        for m in pkgutil.iter_modules(pkg.__path__)
        if m.ispkg and importlib.util.find_spec(f"proctor.protocols.{m.name}.config") is not None
    )


def protocol_config_class(name: str) -> type[BaseModel]:
    if name not in protocol_names():
        raise ValueError(f"unknown protocol '{name}'; choose one of {', '.join(protocol_names())}")
    return importlib.import_module(f"proctor.protocols.{name}.config").Config  # type: ignore[no-any-return]


def get_protocol(name: str) -> ProtocolFn:
    return importlib.import_module(f"proctor.protocols.{name}.run").run  # type: ignore[no-any-return]
