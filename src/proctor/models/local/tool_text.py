"""Tool calls the packaged models write in their reply's text.

The packaged models' chat template (Qwen2.5, Hermes style) lists the offered tools in the system turn
and asks for each call as `<tool_call>{"name": <function-name>, "arguments": <args-json-object>}
</tool_call>`. llama.cpp turns such blocks into `tool_calls` only when the model writes the tags exactly;
the small models often leave them off and write the bare call object, which llama.cpp then returns as
plain content, often followed by a guess at the tool's result. This module reads the calls the template
asked for from that content: tagged blocks, or a reply that starts with call objects naming an offered
tool (the guess after them is dropped). A reply that is plainly a call — an object with a "name" and an
"arguments" object — is read as one even when the name is no offered tool (the model put the search term
where the tool's name goes): the toolbox answers "unknown tool" and the model can correct itself, as with
a server that returns such a call, instead of the call's text ending the run as its answer. Doubled braces
(`{{"name": ...}}`, the template's escaping copied) are read as single ones. Any other reply stays text.
"""

from __future__ import annotations

import json
import re
from typing import Any

from proctor.models.structured import ParseError, parse_json
from proctor.models.types import ToolCallRequest

_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*(?:```)?$", re.S)


def _value(text: str) -> Any:
    """The call object `text` holds (fences, trailing commas tolerated), closing up to two braces a reply
    cut short left open; None when there is none. (An object without a "name" is not taken: it is the
    arguments object inside a call left unclosed.)"""
    for tail in ("", "}", "}}"):
        try:
            value = parse_json(text + tail)
        except ParseError:
            continue
        if isinstance(value, dict) and "name" in value:
            return value
    return None


def _call(value: Any, offered: set[str], index: int) -> ToolCallRequest | None:
    """The call `value` is: an offered tool's name, or any name with an arguments object beside it."""
    if not isinstance(value, dict) or not isinstance(name := value.get("name"), str):
        return None
    args = value.get("arguments", value.get("parameters", {}))
    if name not in offered and not (
        ("arguments" in value or "parameters" in value) and isinstance(args, dict)
    ):
        return None
    return ToolCallRequest.parse(f"call_{index}", name, args)


def _undoubled(body: str) -> str:
    """`{{...}}` as `{...}`: a small model copying the chat template's escaped braces."""
    if body.startswith("{{"):
        body = body[1:]
        if body.rstrip().endswith("}}"):
            body = body.rstrip()[:-1]
    return body


def calls_in_text(text: str, offered: set[str]) -> tuple[tuple[ToolCallRequest, ...], str]:
    """(the calls written in `text`, the text left around them). No calls: ((), text) unchanged."""
    tagged = _TAGGED.findall(text)
    if tagged:
        calls = [_call(_value(block), offered, i) for i, block in enumerate(tagged)]
        found = tuple(c for c in calls if c is not None)
        if found:
            return found, _TAGGED.sub("", text).strip()
        return (), text
    body = text.strip()
    fenced = _FENCE.match(body)
    body = _undoubled(fenced.group(1).strip() if fenced else body)
    if not body.startswith(("{", "[")):
        return (), text
    # One call object, a list of them, or several objects one after another; what follows the last one
    # (measured: the model goes on to guess the tool's result in prose) is dropped.
    decoder = json.JSONDecoder()
    values: list[Any] = []
    rest = body
    while rest.startswith(("{", "[")):
        try:
            value, end = decoder.raw_decode(rest)
        except json.JSONDecodeError:
            value, end = _value(rest), len(rest)
            if value is None:
                break
        values += value if isinstance(value, list) else [value]
        rest = rest[end:].strip()
    calls = [_call(v, offered, i) for i, v in enumerate(values)]
    if not calls or any(c is None for c in calls):
        return (), text
    return tuple(c for c in calls if c is not None), ""
