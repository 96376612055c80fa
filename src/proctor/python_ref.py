"""A `python:` candidate as the config holds it: an import path (text, in YAML), or — in a config built in
code — the function itself or an object with an `answer()` method. What it calls (`python_target`) and
what names it in the stored config, the config hash and tables (`python_label`) are defined here."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import PlainSerializer, WithJsonSchema


@runtime_checkable
class Answerer(Protocol):
    """An object answering questions: its `answer(question, choices=None, conversation=None)` method (sync
    or async; only the parameters it declares are passed) is the candidate."""

    def answer(self, question: str, /, *args: Any, **kwargs: Any) -> Any: ...


def python_target(value: object) -> Callable[..., Any]:
    """What a `python:` candidate calls: an object's `answer` method, or the callable itself."""
    method: object = getattr(value, "answer", None)
    if callable(method) and not isinstance(value, type):
        return method
    if callable(value):
        return value
    raise TypeError(f"{type(value).__name__} is neither callable nor has an answer() method")


def python_label(value: object) -> str:
    """The import path as given, or for a candidate passed in code `module:qualified name` of what it
    calls — stable from run to run, unlike its id (a module-level function's label is its import path)."""
    if isinstance(value, str):
        return value
    fn = python_target(value)
    name = getattr(fn, "__qualname__", None) or type(fn).__qualname__
    module = getattr(fn, "__module__", None) or type(fn).__module__
    return f"{module}:{name}"


def check_python(value: Any) -> Any:
    """The `python:` field's check: text passes (imported when the run starts); anything else must be
    callable or have an `answer()` method (a class is refused: it wants an instance)."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, type):
        raise ValueError(
            f"got the class {value.__qualname__}; pass an instance of it (e.g. {value.__name__}())"
        )
    try:
        python_target(value)
    except TypeError as e:
        raise ValueError(
            f"{e}: give an import path ('mypkg.module:function' or 'path/to/file.py:function') or, in "
            "code, a function or an object with an answer() method"
        ) from None
    return value


def given(value: object) -> bool:
    """Whether a `python:` candidate is set (an empty text is not)."""
    return value is not None and not (isinstance(value, str) and not value)


# Held as given; written to JSON (the stored config, the config hash) as its label.
PythonRef = Annotated[
    str | Callable[..., Any] | Answerer,
    PlainSerializer(python_label, return_type=str, when_used="json-unless-none"),
    WithJsonSchema({"type": "string"}),
]
