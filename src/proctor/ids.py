"""Content-derived ids: the same content gives the same id in every run and on every machine."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any

from pydantic import BaseModel

ID_HASH = 20


def _plain(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, set | frozenset):
        return sorted(value, key=str)
    raise TypeError(
        f"an id may be made of JSON values, pydantic models, dataclasses and sets, not "
        f"{type(value).__name__}; name the object (e.g. a candidate by its name) instead"
    )


def content_id(*parts: Any) -> str:
    """A stable hash of JSON-able content (pydantic models and dataclasses count by their content)."""
    blob = json.dumps(parts, sort_keys=True, ensure_ascii=False, default=_plain)
    return hashlib.sha256(blob.encode()).hexdigest()[:ID_HASH]
