"""The one JSON-output helper: tolerant parsing of model replies, validated against a JSON schema."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

import jsonschema

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


class ParseError(ValueError):
    """Why a reply did not parse; the message is shown to the model in the re-ask."""


def _candidates(text: str) -> list[str]:
    out = [m.group(1) for m in _FENCE.finditer(text)]
    out.append(text)
    return out


def _first_json_value(text: str) -> Any:
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            for variant in (text[i:], _TRAILING_COMMA.sub(r"\1", text[i:])):
                try:
                    value, _ = decoder.raw_decode(variant)
                    return value
                except json.JSONDecodeError:
                    continue
            # Python-literal style ({'a': True}) from small models.
            end = text.rfind("}" if ch == "{" else "]")
            if end > i:
                try:
                    literal = ast.literal_eval(text[i : end + 1])
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    # TypeError: a set of dicts (`{{"a": 1}}`), which Python cannot even build.
                    continue
                if isinstance(literal, (dict, list)):
                    return literal
    raise ParseError("no JSON object found in the reply")


def parse_json(text: str, schema: dict[str, Any] | None = None) -> Any:
    """Extract the first JSON value from `text` (code fences, trailing commas, python literals tolerated)
    and validate it against `schema`. Raises ParseError with a message fit for a re-ask."""
    last: Exception | None = None
    for cand in _candidates(text):
        try:
            value = _first_json_value(cand)
        except ParseError as e:
            last = e
            continue
        if schema is not None:
            try:
                jsonschema.validate(value, schema)
            except jsonschema.ValidationError as e:
                path = "/".join(str(p) for p in e.absolute_path) or "(root)"
                last = ParseError(f"JSON does not match the schema at {path}: {e.message}")
                continue
        return value
    raise last if isinstance(last, ParseError) else ParseError("no JSON object found in the reply")


def reask_message(error: str, schema: dict[str, Any]) -> str:
    """The user turn appended when a reply did not parse."""
    from proctor.prompts import render_text

    return render_text("common/reask_json.user.j2", error=error, schema=json.dumps(schema))
