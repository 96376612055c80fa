"""Keys and validity of stored units, derived by the kit — never built by a protocol.

A unit's key is its step's label (the item kind it is stored as) plus a hash of the unit's own id, which
the protocol supplies: whatever identifies the unit's inputs (a chunk id, a candidate's name and the
question it answers...). Put upstream payloads themselves in the id, not only their ids: the hash covers
their content, so a re-generated question gives its answers new keys.

Whether a stored unit is still valid is not in the key: the runner records what the unit depended on
while it ran (the prompt files it rendered, the models it called; `proctor.dependencies`) and reuses it
on `--resume` only while those are unchanged. A protocol cannot forget a field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from proctor.dependencies import Dependencies
from proctor.ids import content_id
from proctor.prompts import file_version


def unit_key(label: str, unit_id: Any) -> str:
    """The store key of the unit of step `label` whose own id is `unit_id`."""
    return f"{label}_{content_id(unit_id)}"


def still_valid(stored: Any, models: Iterable[str]) -> bool:
    """Whether what a stored unit depended on is unchanged: every prompt file it rendered has the same
    version now, and every model it called is one of the run's models as they are now (`models`: their
    identity hashes). A unit stored without a record of its dependencies (an older run) is kept."""
    deps = Dependencies.from_json(stored)
    if deps is None:
        return True
    if not deps.models <= set(models):
        return False
    for template, version in deps.prompts.items():
        try:
            if file_version(template) != version:
                return False
        except OSError:  # the prompt file is gone
            return False
    return True
