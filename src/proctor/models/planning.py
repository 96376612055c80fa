"""Planning (a dry run): the model-call path records what each call would send and answers with a
placeholder instead of asking the server.

While a `Planner` is active (`planning(planner)`), `Model` sends nothing: a call the call cache already
answers gets its cached reply (a real reply, counted as cached); any other call is tallied — prompt tokens
by a simple estimate, `max_tokens` as the bound of its completion, cost at the model's prices — and gets a
placeholder reply that every caller can read: JSON matching the request's schema (every string distinct,
arrays at their `maxItems`), an option letter's logprobs where logprobs are asked for, prompt logprobs for
echo requests. Nothing is written to the call cache. Calls are tallied by step (`planning_step`, set by
the kit's step runner) and role.

Counts that depend on placeholders are not exact: a step that starts after a placeholder reply was given
is an upper bound (every unit kept), or an estimate when a placeholder filled a list without `maxItems`
with one entry (a real reply may hold more)."""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from proctor.models.types import GenerationParams, Message, RawReply, TokenLogprob, Usage

CHARS_PER_TOKEN = 3  # prompt tokens are estimated high: English text runs about 4 characters per token
MESSAGE_OVERHEAD_TOKENS = 4  # the chat template's tokens around each message
OUTSIDE_STEPS = "(outside steps)"
LETTERS = "ABCDEFGHIJ"
_RANK = {"exact": 0, "upper bound": 1, "estimate": 2}


def estimate_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def prompt_tokens(messages: list[Message], params: GenerationParams) -> int:
    """The estimated prompt of a request: its messages (and tool definitions, and a JSON schema sent as
    response format)."""
    n = sum(estimate_tokens(str(m.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS for m in messages)
    if params.tools:
        n += estimate_tokens(json.dumps(params.tools))
    if params.json_schema is not None:
        n += estimate_tokens(json.dumps(params.json_schema))
    return n


@dataclass
class Tally:
    """Calls of one role and model within one step."""

    calls: int = 0  # requests a real run would send (placeholders)
    cached: int = 0  # answered by the call cache now (or a repeat of a request planned before)
    prompt_tokens: int = 0
    completion_tokens: int = 0  # bound: the calls' max_tokens
    cost_usd: float = 0.0  # bound, at the model's prices
    reasks: int = 0  # most extra calls re-asks for replies that do not parse could add


@dataclass
class StepPlan:
    name: str
    units: int = 0  # units the step runs (not already stored)
    count: str = "exact"  # exact | upper bound | estimate
    tallies: dict[tuple[str, str], Tally] = field(default_factory=dict)  # (role, model) -> tally


@dataclass
class Planner:
    """What a dry run found: per step, the units and the calls by role and model."""

    steps: dict[str, StepPlan] = field(default_factory=dict)
    placeholders: int = 0
    guessed: bool = False  # a placeholder filled an unbounded list (later counts are estimates)
    _answered: dict[str, RawReply] = field(default_factory=dict)

    def begin_step(self, name: str, units: int) -> None:
        """A step starts with `units` to run; its count is exact unless placeholders came before."""
        step = self.steps.get(name)
        if step is None:
            step = self.steps[name] = StepPlan(name)
        step.units += units
        if self.placeholders:
            worse = "estimate" if self.guessed else "upper bound"
            if _RANK[worse] > _RANK[step.count]:
                step.count = worse

    def tally(self, role: str | None, model: str) -> Tally:
        name = _step.get()
        step = self.steps.get(name)
        if step is None:
            step = self.steps[name] = StepPlan(
                name, count="exact" if not self.placeholders else "upper bound"
            )
        return step.tallies.setdefault((role or "-", model), Tally())

    def repeat(self, key: str) -> RawReply | None:
        """The placeholder given earlier to the same request (a real run would have it from the cache) —
        within steps whose count is exact only: after placeholders, requests may be alike only because
        placeholders are (e.g. a placeholder question retrieves no passage), so each counts as a call."""
        step = self.steps.get(_step.get())
        exact = step.count == "exact" if step is not None else not self.placeholders
        return self._answered.get(key) if exact else None

    def placeholder(self, key: str, messages: list[Message], params: GenerationParams) -> RawReply:
        """A reply callers can read, with the request's estimated usage (completion: its max_tokens)."""
        self.placeholders += 1
        n = self.placeholders
        usage = Usage(prompt_tokens(messages, params), params.max_tokens)
        if params.echo_prompt:
            text = str(messages[-1].get("content") or "")
            reply = RawReply(text=text, usage=Usage(usage.prompt_tokens, 1), logprobs=_prompt_logprobs(text))
        elif params.json_schema is not None:
            filler = _Filler(n)
            text = json.dumps(filler.instance(params.json_schema))
            self.guessed = self.guessed or filler.unbounded
            reply = RawReply(text=text, usage=usage, finish_reason="stop", logprobs=_letters(params))
        else:
            reply = RawReply(
                text=f"dry-run reply {n}", usage=usage, finish_reason="stop", logprobs=_letters(params)
            )
        self._answered[key] = reply
        return reply

    def totals(self) -> Tally:
        out = Tally()
        for step in self.steps.values():
            for t in step.tallies.values():
                out.calls += t.calls
                out.cached += t.cached
                out.prompt_tokens += t.prompt_tokens
                out.completion_tokens += t.completion_tokens
                out.cost_usd += t.cost_usd
                out.reasks += t.reasks
        return out


def _letters(params: GenerationParams) -> list[TokenLogprob] | None:
    """Logprobs where they are asked for: option A most likely, the other letters behind it."""
    if not params.logprobs:
        return None
    top = {letter: -1.0 - i for i, letter in enumerate(LETTERS[: max(2, params.top_logprobs or 2)])}
    return [TokenLogprob("A", -1.0, top)]


def _prompt_logprobs(text: str) -> list[TokenLogprob]:
    """Prompt logprobs for an echo request: one per whitespace-led word, with offsets; the first has none."""
    tokens = [(m.start(), m.group()) for m in re.finditer(r"\s*\S+", text)]
    return [TokenLogprob(tok, -1.0, offset=at) for at, tok in tokens[1:]]


class _Filler:
    """A value matching a JSON schema, every string distinct (filters that drop duplicates keep them)."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.strings = 0
        self.unbounded = False

    def text(self, schema: dict[str, Any]) -> str:
        """Three made-up words no other placeholder string shares (option filters compare words)."""
        self.strings += 1
        seed = f"{self.n}.{self.strings}"
        s = " ".join("z" + hashlib.sha256(f"{seed}.{j}".encode()).hexdigest()[:7] for j in range(3))
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        s = s.ljust(lo, ".")
        return s[: int(hi)] if hi is not None else s

    def instance(self, schema: dict[str, Any]) -> Any:
        if "const" in schema:
            return schema["const"]
        if schema.get("enum"):
            return schema["enum"][0]
        for key in ("anyOf", "oneOf", "allOf"):
            if schema.get(key):
                return self.instance(schema[key][0])
        kind = schema.get("type", "object" if "properties" in schema else "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object":
            props = schema.get("properties") or {}
            return {name: self.instance(sub) for name, sub in props.items()}
        if kind == "array":
            if "maxItems" in schema:
                count = int(schema["maxItems"])
            else:
                count = max(1, int(schema.get("minItems", 0)))
                self.unbounded = True
            return [self.instance(schema.get("items") or {"type": "string"}) for _ in range(count)]
        if kind == "integer":
            return math.ceil(schema.get("minimum", 1))
        if kind == "number":
            return float(schema.get("minimum", 0.5))
        if kind == "boolean":
            return True
        if kind == "null":
            return None
        return self.text(schema)


_planner: contextvars.ContextVar[Planner | None] = contextvars.ContextVar("proctor_planner", default=None)
_step: contextvars.ContextVar[str] = contextvars.ContextVar("proctor_planning_step", default=OUTSIDE_STEPS)


def active_planner() -> Planner | None:
    """The planner of the dry run in progress, or None (calls are sent)."""
    return _planner.get()


@contextlib.contextmanager
def planning(planner: Planner) -> Iterator[Planner]:
    """Within: no model call is sent; each is tallied in `planner` and answered by a placeholder."""
    token = _planner.set(planner)
    try:
        yield planner
    finally:
        _planner.reset(token)


@contextlib.contextmanager
def planning_step(name: str) -> Iterator[None]:
    """Calls made within are tallied under step `name` (set by the kit's step runner for each unit)."""
    token = _step.set(name)
    try:
        yield
    finally:
        _step.reset(token)
