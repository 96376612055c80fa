"""Tools an agent can call: typed Python functions whose JSON schema comes from their type hints and
docstring. A call is validated against the schema; a bad call or an exception inside the tool becomes an
observation the model reads ("invalid arguments: ...", with the expected form) — never a crash of the
run. A tool tells a call it cannot serve as asked (the caller's mistake) from its own failure by raising
`ToolRefusal`: the call then has an error (`refused: ...`), not a result. Results are truncated to a
configurable size, and every call is recorded (name, arguments, result, latency, error).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

MAX_RESULT_CHARS = 2000
REFUSED = "refused: "  # the error prefix of a call a tool refused (`ToolRefusal`)


class ToolRefusal(Exception):
    """Raised by a tool for a call it cannot serve as asked — the caller's mistake, not a fault of the tool:
    Lookup before any Search, a name that matches no document, an id that does not exist. The message is
    what the model reads, and says what to do instead (which tool gives what to pass).

    Why a type and not a text: the call then has an error (`refused: <message>`) instead of a result, so a
    PAL program sees a failed call (`ToolError`) rather than taking the hint as data (and as its answer),
    the hint is never counted as retrieved information (the scratchpad), and the taxonomy reads it as an
    improper use of the tool (model side), not as a tool fault."""


class ToolCall(BaseModel):
    """One call as it happened: what was asked, what came back (or the error), how long it took."""

    name: str
    arguments: dict[str, Any]
    result: str | None = None
    # unknown_tool | invalid_arguments | refused (ToolRefusal: the caller's mistake) | tool_exception (the
    # tool's own failure), with the message
    error: str | None = None
    latency_s: float = 0.0
    truncated: bool = False

    @property
    def observation(self) -> str:
        """What the model is shown: the result; a refusal's own message (written for the model, as R-Eval's
        environments word it: "Could not find [x]. Similar: [...]"); else the error."""
        if self.error is not None and self.error.startswith(REFUSED):
            return self.error.removeprefix(REFUSED)
        return f"Error: {self.error}" if self.error is not None else (self.result or "")


def _doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    """The docstring's first paragraph, and `name: description` lines of an Args section, if any."""
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    in_args = False
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped.lower() in ("args:", "arguments:", "parameters:"):
            in_args = True
            continue
        if in_args:
            if not stripped:
                break
            name, sep, desc = stripped.partition(":")
            if sep:
                params[name.split(" ")[0].strip()] = desc.strip()
    return summary, params


@dataclass(frozen=True)
class Tool:
    """A callable the agent may use. Build one with `tool(fn)`."""

    name: str
    description: str
    fn: Callable[..., Any]
    arguments: type[BaseModel]

    def schema(self) -> dict[str, Any]:
        """The OpenAI `tools` entry for this tool."""
        params = self.arguments.model_json_schema()
        params.pop("title", None)
        for p in params.get("properties", {}).values():
            p.pop("title", None)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }

    def signature(self) -> str:
        """The expected form, for error observations and text prompts: `name(a: str, b: int = 3)`."""
        parts = []
        for pname, f in self.arguments.model_fields.items():
            ann = getattr(f.annotation, "__name__", str(f.annotation)).replace("typing.", "")
            parts.append(f"{pname}: {ann}" + ("" if f.is_required() else f" = {f.default!r}"))
        return f"{self.name}({', '.join(parts)})"


def tool(
    fn: Callable[..., Any] | None = None, *, name: str | None = None, description: str | None = None
) -> Any:
    """Make a `Tool` from a typed function (use as `tool(fn)` or `@tool(name=...)`)."""

    def build(f: Callable[..., Any]) -> Tool:
        hints = get_type_hints(f)
        summary, param_docs = _doc_parts(f)
        fields: dict[str, Any] = {}
        for pname, p in inspect.signature(f).parameters.items():
            if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
                continue
            ann = hints.get(pname, Any)
            default = ... if p.default is p.empty else p.default
            from pydantic import Field

            fields[pname] = (ann, Field(default, description=param_docs.get(pname)))
        model = create_model(f"{f.__name__}_arguments", __config__=ConfigDict(extra="forbid"), **fields)
        return Tool(name or f.__name__, description or summary or f.__name__, f, model)

    return build(fn) if fn is not None else build


class Toolbox:
    """A set of tools with one `call` that never raises for the model's mistakes."""

    def __init__(self, tools: Sequence[Tool], *, max_result_chars: int = MAX_RESULT_CHARS) -> None:
        self.tools = {t.name: t for t in tools}
        if len(self.tools) != len(tools):
            raise ValueError("two tools share a name")
        self.max_result_chars = max_result_chars

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def describe(self) -> str:
        """One line per tool: its expected form and description (for text-protocol prompts)."""
        return "\n".join(f"- {t.signature()}: {t.description}" for t in self.tools.values())

    async def call(self, name: str, arguments: dict[str, Any] | str | None) -> ToolCall:
        start = time.perf_counter()
        args: Any = arguments if arguments is not None else {}
        if isinstance(args, str):
            try:
                args = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError as e:
                return ToolCall(
                    name=name, arguments={"_raw": args}, error=f"invalid_arguments: not JSON ({e.msg})"
                )
        if not isinstance(args, dict):
            return ToolCall(
                name=name, arguments={"_raw": args}, error="invalid_arguments: arguments must be an object"
            )
        t = self.tools.get(name)
        if t is None:
            known = ", ".join(self.tools) or "none"
            return ToolCall(
                name=name, arguments=args, error=f"unknown_tool: no tool '{name}'; the tools are {known}"
            )
        try:
            parsed = t.arguments.model_validate(args)
        except ValidationError as e:
            problems = "; ".join(
                f"{'.'.join(map(str, x['loc'])) or 'arguments'}: {x['msg']}" for x in e.errors()
            )
            return ToolCall(
                name=name, arguments=args, error=f"invalid_arguments: {problems}. Expected {t.signature()}"
            )
        try:
            kwargs = {k: getattr(parsed, k) for k in t.arguments.model_fields}
            out = t.fn(**kwargs)
            if inspect.isawaitable(out):
                out = await out
        except asyncio.CancelledError:
            raise
        except ToolRefusal as e:  # the caller's mistake: an error the model reads, not a result
            return ToolCall(
                name=name, arguments=args, error=f"{REFUSED}{e}", latency_s=time.perf_counter() - start
            )
        except Exception as e:  # a tool's own failure is the model's observation, not the run's crash
            return ToolCall(
                name=name,
                arguments=args,
                error=f"tool_exception: {type(e).__name__}: {e}",
                latency_s=time.perf_counter() - start,
            )
        text = out if isinstance(out, str) else json.dumps(out, ensure_ascii=False, default=str)
        truncated = len(text) > self.max_result_chars
        if truncated:
            text = text[: self.max_result_chars] + f" …[truncated {len(text) - self.max_result_chars} chars]"
        return ToolCall(
            name=name,
            arguments=args,
            result=text,
            latency_s=round(time.perf_counter() - start, 6),
            truncated=truncated,
        )
