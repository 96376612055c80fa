"""`proctor options <protocol>`: every option of a protocol's config section, read from its pydantic
model, so the reference can never drift from what the config accepts."""

from __future__ import annotations

import inspect
import json
import types
import typing
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def prose(text: str) -> str:
    """A docstring as flowing text: paragraphs kept, line breaks inside a paragraph joined."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n".join(" ".join(p.split()) for p in paragraphs)


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    elif info.default is PydanticUndefined:
        return "(required)"
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return ""
    text = json.dumps(value, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


def option_rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted name, type, default, description) for every field, nested sections expanded in place."""
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        nested = _nested_model(info.annotation)
        if nested is not None:
            rows.append((path, "section", "", prose(info.description or nested.__doc__ or "")))
            rows += option_rows(nested, prefix=f"{path}.")
            continue
        rows.append((path, _type_name(info.annotation), _default(info), (info.description or "").strip()))
    return rows
