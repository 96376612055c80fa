"""Value types shared by every model provider: messages, generation parameters, completions."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict


class Message(TypedDict):
    role: Literal["system", "user", "assistant"]
    content: str


@dataclass(frozen=True)
class TokenLogprob:
    """One generated token with its log-probability and the top alternatives at that position."""

    token: str
    logprob: float
    top: dict[str, float] = field(default_factory=dict)


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

    def as_key(self) -> dict[str, Any]:
        return {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "json_schema": self.json_schema,
            "logprobs": self.logprobs,
            "top_logprobs": self.top_logprobs,
            "stop": list(self.stop),
        }


@dataclass(frozen=True)
class RawReply:
    """One provider response before structured-output handling."""

    text: str
    usage: Usage
    logprobs: list[TokenLogprob] | None = None
    finish_reason: str | None = None
