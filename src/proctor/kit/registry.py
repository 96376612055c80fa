"""Protocols declare themselves; the registry finds them by name.

A protocol is the package `proctor.protocols.<name>` whose `__init__.py` defines `PROTOCOL`, a
`Protocol`: its name, the model of its config section (the YAML section named after it), the roles it
needs with one-line descriptions, `run(ctx) -> Result` and its result model. Everything else a protocol
has — prompts (`prompts/`), report section (`report.py`, `report.html.j2`), demo config (`demo.yaml`) —
sits in the same package. Adding a protocol touches no shared file.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import pkgutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from proctor.config import use_catalog
from proctor.kit.result import Result
from proctor.store.export import SampleSpec

if TYPE_CHECKING:
    from proctor.kit.context import RunContext

S = TypeVar("S", bound=BaseModel)
PROTOCOLS_DIR = Path(__file__).parent.parent / "protocols"


@dataclass(frozen=True)
class Role:
    """A model role a protocol uses; `required` roles must be filled in the config's `roles:`. An optional
    role with `needed` is required when `needed(settings)` is true (qa's examiner unless the questions come
    from a file), so the check runs before the run folder exists instead of failing mid-run."""

    name: str
    description: str
    required: bool = True
    needed: Callable[[Any], bool] | None = None

    def required_for(self, settings: Any) -> bool:
        return self.required or (self.needed is not None and settings is not None and self.needed(settings))


@dataclass(frozen=True)
class MemberPlan:
    """A member run of a composed protocol: its label and run config; `after` names the earlier member
    whose run folder it reads (it cannot be planned before that member has run)."""

    label: str
    config: Any  # a RunConfig
    after: str | None = None


@dataclass(frozen=True)
class Protocol(Generic[S]):
    name: str
    settings: type[S]
    roles: tuple[Role, ...]
    run: Callable[[RunContext[S]], Awaitable[Result]]
    # The protocol's result model (what `run` returns; `load_run` reads results.json back into it).
    result: type[Result] = Result
    # A protocol made of other runs (the suite): the runner calls `compose(config, out=, resume=,
    # show_progress=)` instead of opening a run context, and returns what it returns (a RunResult).
    compose: Callable[..., Any] | None = None
    # The item kinds that are candidate answers, for exports (`proctor export`); none declared: read
    # off the store (`proctor.store.export.guess_specs`).
    samples: tuple[SampleSpec, ...] = ()
    # With `compose`: the member runs' configs in order (`MemberPlan`), for `--dry-run` to plan each one.
    members: Callable[[Any], list[MemberPlan]] | None = None

    @property
    def package_dir(self) -> Path:
        return PROTOCOLS_DIR / self.name

    @property
    def demo_config(self) -> Path | None:
        """The protocol's full demo (`proctor demo --all`)."""
        path = self.package_dir / "demo.yaml"
        return path if path.is_file() else None

    @property
    def quick_demo_config(self) -> Path | None:
        """A smaller demo for `proctor demo`, when the full one takes too long for a first look."""
        path = self.package_dir / "demo_quick.yaml"
        return path if path.is_file() else self.demo_config

    @property
    def named_demos(self) -> dict[str, Path]:
        """Every demo the protocol ships, by the name `proctor demo --only` takes: `<protocol>` for demo.yaml,
        `<protocol>-<name>` for each extra `demo_<name>.yaml` beside it (demo_quick.yaml is the quick
        variant of the full demo, not a demo of its own)."""
        out = {self.name: p} if (p := self.demo_config) is not None else {}
        for path in sorted(self.package_dir.glob("demo_*.yaml")):
            extra = path.stem.removeprefix("demo_")
            if extra != "quick":
                out[f"{self.name}-{extra.replace('_', '-')}"] = path
        return out

    def role_help(self) -> str:
        """`examiner (writes the questions), judge (optional: ...)` — for error messages and `options`."""
        return (
            ", ".join(f"{r.name} ({'' if r.required else 'optional: '}{r.description})" for r in self.roles)
            or "none"
        )

    def unknown_role(self, roles: dict[str, str]) -> str | None:
        """A one-line problem when a config names a role this protocol does not have (checked when the
        config is read), or None."""
        unknown = sorted(set(roles) - {r.name for r in self.roles})
        if unknown:
            return (
                f"roles.{unknown[0]}: the {self.name} protocol has no role '{unknown[0]}'; "
                f"its roles are {self.role_help()}"
            )
        return None

    def missing_role(self, roles: dict[str, str], settings: Any = None) -> str | None:
        """A one-line problem when a role the run needs (given its protocol settings) is not filled
        (checked before a run starts), or None."""
        missing = [r.name for r in self.roles if r.required_for(settings) and r.name not in roles]
        if missing:
            return (
                f"roles.{missing[0]} is required by the {self.name} protocol — add "
                f"`roles: {{{missing[0]}: <a key of models>}}`; its roles are {self.role_help()}"
            )
        return None


# Protocols defined outside `proctor.protocols` (a user's package, the tests' example protocol).
_REGISTERED: dict[str, Protocol[Any]] = {}


def register_protocol(protocol: Protocol[S]) -> Protocol[S]:
    """Make a protocol defined elsewhere runnable by name (`protocol: <name>` in a config)."""
    _REGISTERED[protocol.name] = protocol
    return protocol


def protocol_names() -> list[str]:
    shipped = {
        m.name
        for m in pkgutil.iter_modules([str(PROTOCOLS_DIR)])
        if m.ispkg and (PROTOCOLS_DIR / m.name / "config.py").exists()
    }
    return sorted(shipped | set(_REGISTERED))


def get_protocol(name: str) -> Protocol[Any]:
    if name in _REGISTERED:
        return _REGISTERED[name]
    if name not in protocol_names():
        close = difflib.get_close_matches(name, protocol_names(), n=1, cutoff=0.6)
        hint = f" — did you mean '{close[0]}'?" if close else ""
        raise ValueError(f"unknown protocol '{name}'{hint}; choose one of {', '.join(protocol_names())}")
    declared = getattr(importlib.import_module(f"proctor.protocols.{name}"), "PROTOCOL", None)
    if not isinstance(declared, Protocol):
        raise TypeError(f"proctor.protocols.{name} must define PROTOCOL = Protocol(...)")
    return declared


def protocol_config_class(name: str) -> type[BaseModel]:
    return get_protocol(name).settings


class _Catalog:
    """The registry as `proctor.config` sees it (settings classes and role checks by protocol name)."""

    def settings_class(self, name: str) -> type[BaseModel]:
        return protocol_config_class(name)

    def unknown_role(self, name: str, roles: dict[str, str]) -> str | None:
        return get_protocol(name).unknown_role(roles)


use_catalog(_Catalog())
