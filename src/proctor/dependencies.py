"""What a unit of work depended on: the prompt files it rendered and the models it called.

The step runner opens `collecting()` around each unit; the prompt loader and the model-call path note
what they use with `note_prompt` / `note_model`. The runner stores the result with the unit, and on
`--resume` reuses a stored unit only while every prompt file still has the version it had and every
model it called is still one of the run's models. No protocol names its prompts or models in a key:
whatever a step actually used is what decides whether its stored result is still valid.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Dependencies:
    """Prompt template -> version of its file; identity hashes of the models called."""

    prompts: dict[str, str] = field(default_factory=dict)
    models: set[str] = field(default_factory=set)

    def as_json(self) -> dict[str, object]:
        return {"prompts": dict(sorted(self.prompts.items())), "models": sorted(self.models)}

    @classmethod
    def from_json(cls, data: object) -> Dependencies | None:
        if not isinstance(data, dict):
            return None
        prompts = data.get("prompts") or {}
        models = data.get("models") or []
        return cls({str(k): str(v) for k, v in dict(prompts).items()}, {str(m) for m in models})


_current: contextvars.ContextVar[Dependencies | None] = contextvars.ContextVar(
    "proctor_dependencies", default=None
)


@contextlib.contextmanager
def collecting() -> Iterator[Dependencies]:
    """Collect what the code inside uses (across the asyncio tasks it awaits, not sibling tasks)."""
    deps = Dependencies()
    token = _current.set(deps)
    try:
        yield deps
    finally:
        _current.reset(token)


def note_prompt(template: str, version: str) -> None:
    deps = _current.get()
    if deps is not None:
        deps.prompts[template] = version


def note_model(identity_hash: str) -> None:
    deps = _current.get()
    if deps is not None:
        deps.models.add(identity_hash)
