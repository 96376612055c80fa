"""`proctor options <protocol>`: every option of a protocol's config section, read from its pydantic
model, so the reference can never drift from what the config accepts."""

from __future__ import annotations

import collections.abc
import inspect
import json
import types
import typing
from pathlib import PurePath
from typing import Any

from pydantic import AfterValidator, BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined


def prose(text: str) -> str:
    """A docstring as flowing text: paragraphs kept, line breaks inside a paragraph joined."""
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n".join(" ".join(p.split()) for p in paragraphs)


def _is_config_path(meta: Any) -> bool:
    """A `ConfigPath` / `ConfigFile` marker: the value is a file path resolved against the config's folder."""
    from proctor.config_paths import _resolve, _resolve_str

    return isinstance(meta, AfterValidator) and meta.func in (_resolve, _resolve_str)


def _type_name(annotation: Any) -> str:
    """A type as a user reads it: `int | null`, `list[str]`, `path`, `"bm25" | "dense"` — never a repr."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        base, *meta = typing.get_args(annotation)
        return "path" if any(_is_config_path(m) for m in meta) else _type_name(base)
    if origin is typing.Literal:
        return " | ".join(json.dumps(a) for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin in (collections.abc.Callable, typing.Callable):
        return "callable"
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation) if a is not Ellipsis)
        name = getattr(origin, "__name__", None) or str(origin).removeprefix("typing.")
        return f"{name}[{args}]" if args else name
    if annotation is type(None):
        return "null"
    if annotation is Any:
        return "any"
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "path"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if getattr(annotation, "_is_protocol", False):
        return "object"  # a typing.Protocol: any object with its methods (e.g. one with `answer()`)
    return getattr(annotation, "__name__", None) or str(annotation).removeprefix("typing.")


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


def _is_model(arg: Any) -> bool:
    return isinstance(arg, type) and issubclass(arg, BaseModel) and arg is not BaseModel


def _nested_model(annotation: Any) -> tuple[type[BaseModel], str] | None:
    """The section model a field holds, with how its options are named below the field: `.` for a section
    (`ray.address`), `.<name>.` for a mapping of sections (`models.<name>.spec`), `[i].` for a list of them
    (`candidates[i].name`)."""
    if _is_model(annotation):
        return annotation, "."
    origin = typing.get_origin(annotation)
    for arg in typing.get_args(annotation):
        if _is_model(arg):
            return arg, ".<name>." if origin is dict else "[i]." if origin is list else "."
        if typing.get_origin(arg) in (dict, list):
            found = _nested_model(arg)
            if found is not None:
                return found
    return None


def _any_section(annotation: Any) -> bool:
    """A field typed as any pydantic model: the section named after a protocol (`qa:`, a suite member's
    `exam:`), validated by that protocol's own settings model."""
    if typing.get_origin(annotation) is typing.Annotated:
        return _any_section(typing.get_args(annotation)[0])
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return any(_any_section(a) for a in typing.get_args(annotation))
    return annotation is BaseModel


def option_rows(model: type[BaseModel], prefix: str = "") -> list[tuple[str, str, str, str]]:
    """(dotted name, type, default, description) for every field, nested sections expanded in place."""
    rows = []
    for name, info in model.model_fields.items():
        path = f"{prefix}{name}"
        if _any_section(info.annotation):
            what = (
                "the section named after the protocol (`exam: {...}`), validated by that protocol's own "
                "settings model; `proctor options <protocol>` lists its options"
            )
            rows.append((f"{prefix}<protocol>", "section", "", what))
            continue
        nested = _nested_model(info.annotation)
        if nested is not None:
            cls, sep = nested
            rows.append((path + sep.rstrip("."), "section", "", prose(info.description or cls.__doc__ or "")))
            rows += option_rows(cls, prefix=f"{path}{sep}")
            continue
        kind = "path" if any(_is_config_path(m) for m in info.metadata) else _type_name(info.annotation)
        rows.append((path, kind, _default(info), (info.description or "").strip()))
    return rows
