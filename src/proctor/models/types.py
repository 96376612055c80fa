"""Value types shared by every model provider: messages, generation parameters, completions."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, TypedDict


class Message(TypedDict):
    role: Literal["system", "user", "assistant", "tool"]
    content: str
    # Native function calling: an assistant turn's tool calls (OpenAI form) and a tool result's call id.
    tool_calls: NotRequired[list[dict[str, Any]]]
    tool_call_id: NotRequired[str]


@dataclass(frozen=True)
class ToolCallRequest:
    """A tool call the model asked for. `arguments` is the JSON text as the server sent it; when it does not
    parse into an object, `parsed_arguments` is None and `error` says why (the workflow returns that to the
    model as an error, it never raises)."""

    id: str
    name: str
    arguments: str
    parsed_arguments: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def parse(cls, id_: str, name: str, arguments: Any) -> ToolCallRequest:
        raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
        try:
            value = json.loads(raw) if raw.strip() else {}
        except json.JSONDecodeError as e:
            return cls(id_, name, raw, None, f"arguments are not valid JSON ({e.msg} at {e.pos})")
        if not isinstance(value, dict):
            return cls(id_, name, raw, None, "arguments are not a JSON object")
        return cls(id_, name, raw, value, None)

    def as_message_entry(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": "function",
            "function": {"name": self.name, "arguments": self.arguments},
        }


@dataclass(frozen=True)
class TokenLogprob:
    """One token with its log-probability and the top alternatives at that position.

    `offset` (characters into the scored text) is set on prompt logprobs only, so a caller can tell which
    tokens belong to which part of the text; generated tokens leave it None."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)
    offset: int | None = None


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.prompt_tokens + other.prompt_tokens, self.completion_tokens + other.completion_tokens
        )


@dataclass(frozen=True)
class Completion:
    """What `Model.generate` returns. `parsed` is set only when a JSON schema was asked for."""

    text: str
    parsed: Any = None
    logprobs: list[TokenLogprob] | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str | None = None
    cost_usd: float = 0.0
    tool_calls: list[ToolCallRequest] = field(default_factory=list)


@dataclass(frozen=True)
class GenerationParams:
    """Everything besides the messages that changes a reply; all of it is part of the cache key."""

    temperature: float = 0.0
    max_tokens: int = 512
    seed: int | None = 0
    json_schema: dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int = 0
    stop: tuple[str, ...] = ()
    # Score the text of the single user message instead of chatting: a raw-text completions request with
    # echo, whose reply carries the prompt's own token logprobs (see `Model.prompt_logprobs`).
    echo_prompt: bool = False
    tools: list[dict[str, Any]] | None = None  # OpenAI `tools` entries (native function calling)
    # "auto" | "none" | "required" | {"type": "function", "function": {"name": ...}}
    tool_choice: str | dict[str, Any] | None = None

    def as_key(self) -> dict[str, Any]:
        key: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "json_schema": self.json_schema,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "stop": list(self.stop),
        }
        if self.echo_prompt:  # only when set, so the keys of every chat call cached so far stay valid
            key["echo_prompt"] = True
        if self.tools is not None:
            key["tools"] = self.tools
            key["tool_choice"] = self.tool_choice
        return key


@dataclass(frozen=True)
class RawReply:
    """One provider response before structured-output handling. For an `echo_prompt` request, `logprobs`
    are the prompt's tokens (with offsets; the first token, which has no logprob, left out)."""

    text: str
    usage: Usage
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
    tool_calls: tuple[ToolCallRequest, ...] = ()


@dataclass(frozen=True)
class ContinuationScore:
    """Log-likelihood of a continuation given a prompt (`Model.continuation_logprob`): the sum over the
    continuation's tokens, and the lengths to normalise it by."""

    logprob_sum: float
    n_tokens: int
    n_chars: int
    usage: Usage = field(default_factory=Usage)
    cached: bool = False

    @property
    def per_token(self) -> float:
        """Mean log-probability per token (the log of the geometric-mean token probability)."""
        return self.logprob_sum / max(1, self.n_tokens)

    @property
    def per_char(self) -> float:
        """Log-probability per character: comparable across tokenizers."""
        return self.logprob_sum / max(1, self.n_chars)
