"""Model-call transcripts: what each call sent (messages, generation parameters) and got back (reply, tool
calls, a logprobs summary), stored so that any verdict can be traced to what the model saw and said.

Text is content-addressed and compressed: every message content and reply is one row of `texts`
(hash -> zlib blob), so a judge template, a RAG context shared by candidates or a corpus chunk sent a
thousand times is stored once; a call row holds only hashes. The writer is `RunStore.record_call`, the
reader `RunRecord.transcripts`. A run with `store_text: false` keeps the parameters and the numbers, no
text. Credentials never get here: a call's record is built from its messages and parameters, never from
request headers (see `proctor.models.base`).
"""

from __future__ import annotations

import hashlib
import json
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TEXTS_SCHEMA = "CREATE TABLE IF NOT EXISTS texts (hash TEXT PRIMARY KEY, z BLOB NOT NULL)"
# The columns transcripts add to `model_calls` (stores written before them lack them: no transcript stored).
CALL_COLUMNS = {
    "step": "TEXT",
    "messages_ref": "TEXT",  # JSON list: {"role", "h": content hash, "tool_calls"?, "tool_call_id"?}
    "params": "TEXT",  # JSON object of generation parameters (`params_summary`)
    "reply_ref": "TEXT",  # hash of the reply text
    "reply_tool_calls": "TEXT",  # JSON list of {"id", "name", "arguments"}
    "logprobs": "TEXT",  # JSON `LogprobSummary`
    "text_stored": "INTEGER",
}
_HASH_CHARS = 32  # 128 bits of sha256: collisions are not a concern at any run's size


@dataclass(frozen=True)
class ToolCallText:
    """A tool call as the model wrote it (arguments: the raw JSON text)."""

    id: str | None
    name: str
    arguments: str


@dataclass(frozen=True)
class TranscriptMessage:
    role: str
    content: str
    tool_calls: list[ToolCallText] | None = None
    tool_call_id: str | None = None


@dataclass(frozen=True)
class LogprobSummary:
    """What a reply's token logprobs say in four numbers (the tokens themselves are not kept)."""

    n_tokens: int
    sum_logprob: float
    mean_logprob: float
    min_logprob: float


@dataclass(frozen=True)
class CallTranscript:
    """One model call with its text. `messages` and `reply` are None when the run stored no text
    (`store_text: false`, or a store written before transcripts): then `text_stored` is False."""

    id: int
    provider: str
    model: str
    role: str | None
    item_key: str | None
    step: str | None
    messages: list[TranscriptMessage] | None
    params: dict[str, object]
    reply: str | None
    reply_tool_calls: list[ToolCallText] | None
    logprobs: LogprobSummary | None
    prompt_tokens: int
    completion_tokens: int
    latency_s: float
    cached: bool
    attempts: int
    error: str | None
    created: float
    text_stored: bool


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_CHARS]


def pack(text: str) -> bytes:
    return zlib.compress(text.encode("utf-8"), 6)


def unpack(blob: bytes) -> str:
    return zlib.decompress(blob).decode("utf-8")


def params_summary(params: Mapping[str, Any]) -> dict[str, object]:
    """The generation parameters worth showing, from `GenerationParams.as_key()`: the response schema by
    its name (title) and the tools by their names, not whole."""
    out: dict[str, object] = {}
    for name in ("temperature", "max_tokens", "seed"):
        if name in params:
            out[name] = params[name]
    for name in ("logprobs", "top_logprobs", "echo_prompt"):  # shown when asked for
        if params.get(name):
            out[name] = params[name]
    if params.get("stop"):
        out["stop"] = list(params["stop"])
    schema = params.get("json_schema")
    if isinstance(schema, Mapping):
        out["response_schema"] = str(schema.get("title") or "json")
    tools = params.get("tools")
    if isinstance(tools, list):
        out["tools"] = [str((t.get("function") or {}).get("name", "?")) for t in tools if isinstance(t, dict)]
        if params.get("tool_choice") is not None:
            out["tool_choice"] = params["tool_choice"]
    return out


def summarize_logprobs(logprobs: Sequence[Any] | None) -> LogprobSummary | None:
    """Four numbers from a reply's `TokenLogprob`s (anything with a float `logprob`); None without any."""
    if not logprobs:
        return None
    values = [float(t.logprob) for t in logprobs]
    total = sum(values)
    return LogprobSummary(len(values), total, total / len(values), min(values))


def tool_calls_json(calls: Iterable[Any]) -> list[dict[str, Any]]:
    """Tool calls (`ToolCallRequest`, or OpenAI message entries) as `{"id", "name", "arguments"}`."""
    out = []
    for c in calls:
        if isinstance(c, Mapping):
            fn = c.get("function") or {}
            args = fn.get("arguments", "")
            out.append(
                {
                    "id": c.get("id"),
                    "name": str(fn.get("name", "")),
                    "arguments": args if isinstance(args, str) else json.dumps(args),
                }
            )
        else:
            out.append({"id": c.id, "name": c.name, "arguments": c.arguments})
    return out


def tool_calls_of(data: Any) -> list[ToolCallText] | None:
    if not isinstance(data, list):
        return None
    return [ToolCallText(d.get("id"), str(d.get("name", "")), str(d.get("arguments", ""))) for d in data]


def logprobs_of(data: Any) -> LogprobSummary | None:
    if not isinstance(data, dict):
        return None
    return LogprobSummary(
        int(data["n_tokens"]),
        float(data["sum_logprob"]),
        float(data["mean_logprob"]),
        float(data["min_logprob"]),
    )
