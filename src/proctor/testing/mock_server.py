"""A mock OpenAI-compatible server for tests and benchmarks (aiohttp.web on 127.0.0.1).

In-process (tests)::

    with MockServer(latency_ms=50, fault_rate=1.0, fault_kinds=("429",), fault_first_n=1) as server:
        model = get_model("openai/mock", base_url=server.base_url)
        ...
        assert server.count == 2 and server.requests[0].fault == "429"

As a separate process (benchmarks, kill -9 tests); the base URL is the first stdout line::

    python -m proctor.testing.mock_server --port 0 --latency-ms 200 [--slots 2]

`slots` caps how many requests are processed at once, like a llama.cpp server started with n_parallel
slots: a request waits for a free slot, then takes `latency_ms` (default: unlimited slots). Without a cap
a fixed-latency mock serves any concurrency in parallel, so spreading calls over replicas would not show.

Endpoints: POST /v1/chat/completions, POST /v1/completions, POST /v1/embeddings, GET /v1/models, plus
GET /_mock/stats and POST /_mock/reset for a server running in another process.

/v1/completions answers in the legacy format. With `echo` and `logprobs` it returns prompt logprobs like
vLLM: `choices[0].logprobs` = {tokens, token_logprobs (first null), top_logprobs, text_offset} for the
prompt's tokens (whitespace-led words) followed by the generated ones; each prompt token is scored
`prompt_logprob(text_before_it, token)` (default: a hash-derived value). `echo_mode` emulates servers
without prompt logprobs: "reject" answers echo with HTTP 400 (OpenAI's chat models, older llama.cpp),
"ignore" returns the generated token's logprobs only (the embedded llama.cpp server).

Replies, in order of precedence: `reply(body) -> str | dict`; with `tools` and a `tool_choice` that forces a
call ("required", or {"type": "function", "function": {"name": ...}}), a call to the first (or the named)
tool with minimal arguments satisfying its parameters schema; the first of `rules` (regex searched in the last
user message -> reply); a minimal JSON object satisfying the request's `response_format` json_schema;
otherwise a deterministic echo derived from a hash of the messages (distinct requests, distinct replies).

Native function calling: a `reply` callback answers with tool calls by returning
`{"content": str | None, "tool_calls": [{"name": ..., "arguments": str | dict, "id"?: ...}]}` (arguments given
as text are sent as they are, so a test can send malformed JSON); the reply then has
`choices[0].message.tool_calls` and finish_reason "tool_calls". Like OpenAI, the server answers HTTP 400 when
a `tool` message does not answer a tool call of the assistant message before it, or an assistant's tool call
is left unanswered. `tools_mode` emulates servers without function calling: "reject" answers any request
carrying `tools` with HTTP 400 (vLLM without --enable-auto-tool-choice), "ignore" accepts `tools` but never
returns `tool_calls` — a call the reply asks for is written into the content as JSON text, which is what the
embedded llama.cpp server does with the packaged Qwen2.5-Coder models.

Faults (`fault_rate` in 0..1, `fault_kinds` drawn by a seeded RNG; with `fault_first_n` only the first N
attempts of each distinct request body can fault): "429" (with Retry-After), "500", "hang" (sleep
`hang_s`, longer than the client timeout), "malformed" (200, non-JSON body), "truncated" (Content-Length
larger than the body sent, then the connection is closed).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import math
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from multidict import CIMultiDict

FAULT_KINDS = ("429", "500", "hang", "malformed", "truncated")
ECHO_MODES = ("supported", "reject", "ignore")
TOOLS_MODES = ("supported", "reject", "ignore")
ReplyFn = Callable[[dict[str, Any]], "str | dict[str, Any]"]  # a dict: content + tool_calls
TokenScoreFn = Callable[[str, str], float]  # (text before the token, token) -> logprob


@dataclass
class RecordedRequest:
    """One request the server received, with the fault (if any) it injected."""

    path: str
    body: dict[str, Any] | None
    headers: Mapping[str, str]  # case-insensitive
    fault: str | None
    attempt: int
    started: float
    finished: float | None = None


@dataclass
class MockConfig:
    """Everything that shapes the server's behaviour; read on every request, so it may change mid-test."""

    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    reply: ReplyFn | None = None
    rules: Sequence[tuple[str, str]] = ()
    fault_rate: float = 0.0
    fault_kinds: Sequence[str] = ("500",)
    fault_first_n: int | None = None
    retry_after_s: float | None = 0.0
    hang_s: float = 30.0
    reject_response_format: bool = False
    echo_mode: str = "supported"
    tools_mode: str = "supported"
    prompt_logprob: TokenScoreFn | None = None
    embedding_dim: int = 64
    models: Sequence[str] = ("mock",)
    seed: int = 0
    record_bodies: bool = True
    slots: int | None = None  # requests processed at once (the rest queue); None: no limit

    def validate(self) -> None:
        if self.slots is not None and self.slots < 1:
            raise ValueError(f"slots must be >= 1 or None, got {self.slots}")
        if not 0.0 <= self.fault_rate <= 1.0:
            raise ValueError(f"fault_rate must be in 0..1, got {self.fault_rate}")
        bad = [k for k in self.fault_kinds if k not in FAULT_KINDS]
        if bad:
            raise ValueError(f"unknown fault kinds {bad}; choose from {FAULT_KINDS}")
        if self.echo_mode not in ECHO_MODES:
            raise ValueError(f"unknown echo_mode {self.echo_mode!r}; choose from {ECHO_MODES}")
        if self.tools_mode not in TOOLS_MODES:
            raise ValueError(f"unknown tools_mode {self.tools_mode!r}; choose from {TOOLS_MODES}")


@dataclass
class _State:
    config: MockConfig
    rng: random.Random
    requests: list[RecordedRequest] = field(default_factory=list)
    attempts: dict[str, int] = field(default_factory=dict)
    faults: dict[str, int] = field(default_factory=dict)
    count: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    busy: int = 0  # requests holding a slot (being "processed")
    max_busy: int = 0
    _slot_sem: asyncio.Semaphore | None = None
    _slot_sem_size: int | None = None

    def slot(self) -> contextlib.AbstractAsyncContextManager[Any]:
        """A processing slot when `config.slots` caps them (created in the serving loop, on first use)."""
        n = self.config.slots
        if n is None:
            return contextlib.nullcontext()
        if self._slot_sem is None or self._slot_sem_size != n:
            self._slot_sem, self._slot_sem_size = asyncio.Semaphore(n), n
        return self._slot_sem


# --- reply content ---------------------------------------------------------------------------------


def _digest(obj: Any) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _last_user(messages: list[dict[str, Any]]) -> str:
    for m in reversed(messages):
        if m.get("role") == "user":
            content = m.get("content")
            return content if isinstance(content, str) else json.dumps(content)
    return ""


def _words(text: str) -> int:
    return len(text.split())


def minimal_instance(schema: dict[str, Any]) -> Any:
    """A small value satisfying simple JSON schemas (objects of string/number/integer/boolean/enum/array)."""
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf", "allOf"):
        if schema.get(key):
            return minimal_instance(schema[key][0])
    kind = schema.get("type", "object" if "properties" in schema else "string")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object":
        return {name: minimal_instance(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        item = minimal_instance(schema.get("items") or {"type": "string"})
        return [item] * int(schema.get("minItems", 0))
    if kind == "integer":
        return math.ceil(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 0.5))
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "x" * max(1, int(schema.get("minLength", 1)))


def _schema_of(body: dict[str, Any]) -> dict[str, Any] | None:
    rf = body.get("response_format")
    if isinstance(rf, dict) and rf.get("type") == "json_schema":
        js = rf.get("json_schema") or {}
        schema = js.get("schema")
        return schema if isinstance(schema, dict) else {}
    return None


def reply_text(body: dict[str, Any], config: MockConfig) -> str | dict[str, Any]:
    """The reply content for a chat request (see the module docstring for precedence)."""
    if config.reply is not None:
        return config.reply(body)
    forced = _forced_tool_call(body)
    if forced is not None:
        return {"content": None, "tool_calls": [forced]}
    messages = body.get("messages") or []
    last = _last_user(messages)
    for pattern, reply in config.rules:
        if re.search(pattern, last, re.IGNORECASE | re.DOTALL):
            return reply
    schema = _schema_of(body)
    if schema is not None:
        return json.dumps(minimal_instance(schema))
    h = _digest(messages)[:12]
    return f"Mock reply {h} to: {' '.join(last.split()[:12])}"


def _forced_tool_call(body: dict[str, Any]) -> dict[str, Any] | None:
    """The call a server must make when `tool_choice` forces one: the named tool, or ("required") the first,
    with minimal arguments for its parameters schema; None when the model may answer in text."""
    offered = body.get("tools") or []
    tools = [t for t in offered if isinstance(t, dict) and isinstance(t.get("function"), dict)]
    choice = body.get("tool_choice")
    if not tools or choice in (None, "auto", "none"):
        return None
    fn = tools[0]["function"]
    if isinstance(choice, dict):
        name = (choice.get("function") or {}).get("name")
        fn = next((t["function"] for t in tools if t["function"].get("name") == name), fn)
    params = fn.get("parameters")
    args = minimal_instance(params) if isinstance(params, dict) else {}
    return {"name": str(fn.get("name", "")), "arguments": json.dumps(args)}


def _tool_message_problem(messages: list[Any]) -> str | None:
    """What OpenAI rejects in a conversation with tool calls: a `tool` message that answers no tool call of
    the assistant message before it, a tool call left unanswered, or a malformed assistant tool call."""
    pending: dict[str, int] = {}  # tool call id -> index of the assistant message that made it

    def unanswered() -> str:
        ids = ", ".join(sorted(pending))
        return (
            f"an assistant message with 'tool_calls' must be followed by tool messages responding to each "
            f"'tool_call_id' (unanswered: {ids}) (mock)"
        )

    for i, m in enumerate(messages):
        role = m.get("role") if isinstance(m, dict) else None
        if role == "tool":
            call_id = m.get("tool_call_id")
            if not isinstance(call_id, str) or call_id not in pending:
                return (
                    f"messages[{i}]: a message with role 'tool' must be a response to a preceding message "
                    f"with 'tool_calls' (tool_call_id {call_id!r} is not pending) (mock)"
                )
            del pending[call_id]
            continue
        if pending:
            return unanswered()
        if role == "assistant":
            for j, c in enumerate(m.get("tool_calls") or []):
                fn = c.get("function") if isinstance(c, dict) else None
                if (
                    not isinstance(c.get("id"), str)
                    or not isinstance(fn, dict)
                    or not isinstance(fn.get("name"), str)
                    or not isinstance(fn.get("arguments"), str)
                ):
                    return (
                        f"messages[{i}].tool_calls[{j}]: a tool call needs an id and a function with a name "
                        f"and its arguments as a string (mock)"
                    )
                pending[c["id"]] = i
    return unanswered() if pending else None


def _logprobs(text: str, top_n: int) -> dict[str, Any]:
    """Deterministic per-token logprobs: whitespace-split tokens, alternatives ranked below the token."""
    tokens = re.findall(r"\s*\S+", text) or [text]
    content = []
    for i, tok in enumerate(tokens):
        u = int(hashlib.sha256(f"{i}:{tok}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
        lp = -0.01 - 2.0 * u
        top = [{"token": tok, "logprob": lp, "bytes": list(tok.encode())}]
        for j in range(1, top_n):
            alt = f" alt{j}"
            top.append({"token": alt, "logprob": lp - j, "bytes": list(alt.encode())})
        content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": top})
    return {"content": content}


def _hash_logprob(prefix: str, token: str) -> float:
    u = int(hashlib.sha256(f"{len(prefix)}:{token}".encode()).hexdigest()[:8], 16) / 0xFFFFFFFF
    return -0.01 - 4.0 * u


def _text_logprobs(
    text: str, start: int, score: TokenScoreFn, top_n: int, first_unscored: bool
) -> dict[str, list[Any]]:
    """Legacy-format logprobs for `text` placed at character `start` of the echoed text."""
    out: dict[str, list[Any]] = {"tokens": [], "token_logprobs": [], "top_logprobs": [], "text_offset": []}
    for k, m in enumerate(re.finditer(r"\s*\S+", text)):
        tok = m.group()
        lp = None if first_unscored and k == 0 else score(text[: m.start()], tok)
        out["tokens"].append(tok)
        out["token_logprobs"].append(lp)
        out["top_logprobs"].append(
            None if lp is None else {tok: lp, **{f" alt{j}": lp - j for j in range(1, top_n)}}
        )
        out["text_offset"].append(start + m.start())
    return out


def embedding(text: str, dim: int) -> list[float]:
    """A deterministic unit vector from a hash of `text`."""
    rng = random.Random(hashlib.sha256(text.encode()).digest())
    v = [rng.gauss(0.0, 1.0) for _ in range(dim)]
    norm = math.sqrt(sum(x * x for x in v)) or 1.0
    return [x / norm for x in v]


# --- the app ---------------------------------------------------------------------------------------


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        text=json.dumps(data), status=status, content_type="application/json", headers=headers
    )


def _error(status: int, message: str, kind: str, headers: dict[str, str] | None = None) -> web.Response:
    return _json(
        {"error": {"message": message, "type": kind, "code": status}}, status=status, headers=headers
    )


async def _latency(config: MockConfig, rng: random.Random) -> None:
    delay = config.latency_ms + (
        rng.uniform(-config.jitter_ms, config.jitter_ms) if config.jitter_ms else 0.0
    )
    if delay > 0:
        await asyncio.sleep(delay / 1000.0)


async def _inject(kind: str, request: web.Request, config: MockConfig) -> web.StreamResponse:
    if kind == "429":
        headers = {}
        if config.retry_after_s is not None:
            ra = config.retry_after_s
            headers["Retry-After"] = str(int(ra)) if float(ra).is_integer() else str(ra)
        return _error(429, "rate limited (mock)", "rate_limit_exceeded", headers)
    if kind == "500":
        return _error(500, "internal error (mock)", "server_error")
    if kind == "hang":
        await asyncio.sleep(config.hang_s)
        return _error(504, "hung (mock)", "timeout")
    if kind == "malformed":
        return web.Response(
            text="<html>upstream proxy error: not json", status=200, content_type="application/json"
        )
    # truncated: promise more bytes than are sent, then drop the connection.
    payload = b'{"id": "chatcmpl-mock", "choices": [{"message": {"content": "cut o'
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.content_length = len(payload) + 200
    await resp.prepare(request)
    await resp.write(payload)
    if request.transport is not None:
        request.transport.close()
    return resp


def build_app(state: _State) -> web.Application:
    """The aiohttp application serving `state` (shared with the owner for assertions)."""

    async def handle_post(request: web.Request) -> web.StreamResponse:
        config = state.config
        raw = await request.read()
        try:
            body = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            return _error(400, "request body is not JSON", "invalid_request_error")
        if not isinstance(body, dict):
            return _error(400, "request body must be a JSON object", "invalid_request_error")
        key = request.path + _digest(body)
        attempt = state.attempts.get(key, 0)
        state.attempts[key] = attempt + 1
        fault: str | None = None
        may_fault = config.fault_first_n is None or attempt < config.fault_first_n
        if may_fault and config.fault_rate > 0 and state.rng.random() < config.fault_rate:
            fault = state.rng.choice(list(config.fault_kinds))
        rec = RecordedRequest(
            path=request.path,
            body=body if config.record_bodies else None,
            headers=CIMultiDict(request.headers),
            fault=fault,
            attempt=attempt,
            started=time.monotonic(),
        )
        state.requests.append(rec)
        state.count += 1
        if fault:
            state.faults[fault] = state.faults.get(fault, 0) + 1
        state.in_flight += 1
        state.max_in_flight = max(state.max_in_flight, state.in_flight)
        try:
            async with state.slot():
                state.busy += 1
                state.max_busy = max(state.max_busy, state.busy)
                try:
                    await _latency(config, state.rng)
                finally:
                    state.busy -= 1
            if fault is not None:
                return await _inject(fault, request, config)
            if request.path.endswith("/embeddings"):
                return _embeddings(body, config)
            if request.path.endswith("/chat/completions"):
                return _chat(body, config)
            return _completions(body, config)
        finally:
            state.in_flight -= 1
            rec.finished = time.monotonic()

    async def handle_models(request: web.Request) -> web.Response:
        data = [
            {"id": m, "object": "model", "created": 0, "owned_by": "proctor-mock"}
            for m in state.config.models
        ]
        return _json({"object": "list", "data": data})

    async def handle_stats(request: web.Request) -> web.Response:
        return _json(
            {
                "count": state.count,
                "in_flight": state.in_flight,
                "max_in_flight": state.max_in_flight,
                "max_busy": state.max_busy,
                "faults": state.faults,
            }
        )

    async def handle_reset(request: web.Request) -> web.Response:
        _reset(state)
        return _json({"ok": True})

    app = web.Application(client_max_size=64 * 1024**2)
    app.router.add_post("/v1/chat/completions", handle_post)
    app.router.add_post("/v1/completions", handle_post)
    app.router.add_post("/v1/embeddings", handle_post)
    app.router.add_get("/v1/models", handle_models)
    app.router.add_get("/_mock/stats", handle_stats)
    app.router.add_post("/_mock/reset", handle_reset)
    return app


def _reset(state: _State) -> None:
    state.requests.clear()
    state.attempts.clear()
    state.faults.clear()
    state.count = 0
    state.max_in_flight = state.in_flight
    state.max_busy = state.busy
    state.rng.seed(state.config.seed)


def _chat(body: dict[str, Any], config: MockConfig) -> web.Response:
    if config.reject_response_format and "response_format" in body:
        return _error(400, "response_format is not supported by this server (mock)", "invalid_request_error")
    has_tools = body.get("tools") is not None
    if has_tools and config.tools_mode == "reject":
        return _error(400, "tools are not supported by this server (mock)", "invalid_request_error")
    if not has_tools and body.get("tool_choice") is not None:
        return _error(400, "tool_choice is only allowed with tools (mock)", "invalid_request_error")
    messages = body.get("messages") or []
    if not isinstance(messages, list):
        return _error(400, "messages must be a list (mock)", "invalid_request_error")
    problem = _tool_message_problem(messages)
    if problem is not None:
        return _error(400, problem, "invalid_request_error")
    out: Any = reply_text(body, config)
    message: dict[str, Any] = {"role": "assistant", "content": out}
    finish = "stop"
    extra_tokens = 0
    if isinstance(out, dict):  # {"content", "tool_calls"}: a reply callback's or a forced tool call
        calls: list[dict[str, Any]] = [
            {
                "id": str(c.get("id") or f"call_{i}"),
                "type": "function",
                "function": {
                    "name": str(c["name"]),
                    "arguments": c["arguments"] if isinstance(c.get("arguments"), str)
                    else json.dumps(c.get("arguments") or {}),
                },
            }
            for i, c in enumerate(out.get("tool_calls") or [])
        ]  # fmt: skip
        content = out.get("content")
        if calls and not has_tools:
            return _error(400, "tool calls without `tools` in the request (mock)", "invalid_request_error")
        if calls and config.tools_mode == "ignore":  # the calls come back as text, never as tool_calls
            written = [json.dumps({"name": c["function"]["name"], "arguments": c["function"]["arguments"]})
                       for c in calls]  # fmt: skip
            content, calls = "\n".join(filter(None, [content, *written])), []
        message = {"role": "assistant", "content": content}
        if calls:
            message["tool_calls"] = calls
            finish = "tool_calls"
            extra_tokens = sum(_words(c["function"]["arguments"]) + 1 for c in calls)
        out = str(content or "")
    text = str(out)
    prompt_tokens = sum(_words(str(m.get("content") or "")) for m in messages if isinstance(m, dict))
    choice: dict[str, Any] = {"index": 0, "message": message, "finish_reason": finish, "logprobs": None}
    if body.get("logprobs"):
        choice["logprobs"] = _logprobs(text, int(body.get("top_logprobs") or 0))
    return _json(
        {
            "id": "chatcmpl-" + _digest(body)[:16],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "mock"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": _words(text) + extra_tokens,
                "total_tokens": prompt_tokens + _words(text) + extra_tokens,
            },
        }
    )


def _completions(body: dict[str, Any], config: MockConfig) -> web.Response:
    prompt = body.get("prompt", "")
    if not isinstance(prompt, str):
        return _error(400, "prompt must be a string (mock)", "invalid_request_error")
    echo = bool(body.get("echo"))
    if echo and config.echo_mode == "reject":
        return _error(400, "echo is not supported by this server (mock)", "invalid_request_error")
    echo = echo and config.echo_mode == "supported"
    n_gen = max(0, int(body.get("max_tokens", 16)))
    generated = " ".join(f"w{_digest([prompt, i])[:4]}" for i in range(n_gen))
    generated = " " + generated if generated else ""
    text = (prompt + generated) if echo else generated
    choice: dict[str, Any] = {"text": text, "index": 0, "logprobs": None, "finish_reason": "length"}
    top_n = body.get("logprobs")
    if top_n is not None and top_n is not False:
        top_n = int(top_n)
        gen = _text_logprobs(generated, len(prompt) if echo else 0, _hash_logprob, top_n, False)
        if echo:
            lp = _text_logprobs(prompt, 0, config.prompt_logprob or _hash_logprob, top_n, True)
            for k in lp:
                lp[k] += gen[k]
        else:
            lp = gen
        choice["logprobs"] = lp
    prompt_tokens = len(re.findall(r"\s*\S+", prompt))
    return _json(
        {
            "id": "cmpl-" + _digest(body)[:16],
            "object": "text_completion",
            "created": int(time.time()),
            "model": body.get("model", "mock"),
            "choices": [choice],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": n_gen,
                "total_tokens": prompt_tokens + n_gen,
            },
        }
    )


def _embeddings(body: dict[str, Any], config: MockConfig) -> web.Response:
    inputs = body.get("input", "")
    texts = [inputs] if isinstance(inputs, str) else [str(t) for t in inputs]
    dim = int(body.get("dimensions") or config.embedding_dim)
    data = [{"object": "embedding", "index": i, "embedding": embedding(t, dim)} for i, t in enumerate(texts)]
    tokens = sum(_words(t) for t in texts)
    return _json(
        {
            "object": "list",
            "data": data,
            "model": body.get("model", "mock"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }
    )


# --- in-process server -----------------------------------------------------------------------------


class MockServer:
    """The mock served from a background thread with its own event loop, on an ephemeral port.

    Use as a context manager (or `start()` / `stop()`). `base_url` ends in /v1. `requests`, `count` and
    `max_in_flight` are for assertions; `configure(**fields)` changes behaviour, `reset()` forgets history.
    """

    def __init__(self, config: MockConfig | None = None, **fields: Any) -> None:
        config = config or MockConfig()
        for k, v in fields.items():
            if not hasattr(config, k):
                raise TypeError(f"unknown mock option {k!r}")
            setattr(config, k, v)
        config.validate()
        self._state = _State(config=config, rng=random.Random(config.seed))
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def config(self) -> MockConfig:
        return self._state.config

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._state.requests

    @property
    def count(self) -> int:
        return self._state.count

    @property
    def max_in_flight(self) -> int:
        return self._state.max_in_flight

    @property
    def max_busy(self) -> int:
        """Most requests processed at once (at most `slots` when slots are capped)."""
        return self._state.max_busy

    def chat_requests(self) -> list[RecordedRequest]:
        return [r for r in self._state.requests if r.path.endswith("/chat/completions")]

    def completion_requests(self) -> list[RecordedRequest]:
        """Requests to the legacy text endpoint (/v1/completions: prompt logprobs)."""
        return [r for r in self._state.requests if r.path.endswith("/v1/completions")]

    def configure(self, **fields: Any) -> None:
        """Change options for the following requests (e.g. `configure(fault_rate=0)`)."""
        for k, v in fields.items():
            if not hasattr(self._state.config, k):
                raise TypeError(f"unknown mock option {k!r}")
            setattr(self._state.config, k, v)
        self._state.config.validate()

    def reset(self) -> None:
        """Forget recorded requests, per-request attempt counts and fault counts; reseed the RNG."""
        assert self._loop is not None, "start the server first"

        async def do_reset() -> None:
            _reset(self._state)

        asyncio.run_coroutine_threadsafe(do_reset(), self._loop).result(5)

    def start(self) -> MockServer:
        ready = threading.Event()
        errors: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(self._serve_start())
            except BaseException as e:  # report startup failures to the caller
                errors.append(e)
                ready.set()
                return
            ready.set()
            loop.run_forever()
            loop.run_until_complete(self._serve_stop())
            loop.close()

        self._thread = threading.Thread(target=run, name="proctor-mock-server", daemon=True)
        self._thread.start()
        if not ready.wait(10):
            raise RuntimeError("mock server did not start within 10 s")
        if errors:
            raise errors[0]
        return self

    async def _serve_start(self) -> None:
        self._runner = web.AppRunner(
            build_app(self._state),
            handle_signals=False,
            access_log=None,
            handler_cancellation=True,
            shutdown_timeout=0.5,
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None
        self.port = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]

    async def _serve_stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def stop(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._thread = None
        self._loop = None

    def __enter__(self) -> MockServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextlib.contextmanager
def serve_mock(**fields: Any) -> Iterator[MockServer]:
    """`with serve_mock(latency_ms=10) as server: ...` — a started `MockServer`."""
    server = MockServer(**fields)
    with server:
        yield server


def spawn_mock_process(*args: str) -> tuple[subprocess.Popen[str], str]:
    """The mock in a process of its own (benchmarks: its event loop must not share the client's core),
    started with these command-line options and `--port 0 --no-record-bodies`; returns the process and its
    base URL. Stop it with `proc.terminate()`."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "proctor.testing.mock_server", "--port", "0", "--no-record-bodies", *args],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("http"):
        proc.kill()
        raise RuntimeError(f"mock server did not start (got {line!r})")
    return proc, line


# --- subprocess entry point ------------------------------------------------------------------------


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m proctor.testing.mock_server",
        description="Mock OpenAI-compatible server; prints its base URL on the first stdout line.",
    )
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--jitter-ms", type=float, default=0.0)
    p.add_argument("--fault-rate", type=float, default=0.0)
    p.add_argument("--fault-kinds", default="500", help=f"comma-separated, from {','.join(FAULT_KINDS)}")
    p.add_argument(
        "--fault-first-n", type=int, default=None, help="fault only the first N attempts per request"
    )
    p.add_argument(
        "--retry-after", type=float, default=0.0, help="Retry-After seconds sent with 429 (-1: none)"
    )
    p.add_argument("--hang-s", type=float, default=30.0)
    p.add_argument("--reject-response-format", action="store_true")
    p.add_argument(
        "--echo", choices=ECHO_MODES, default="supported", help="prompt logprobs on /v1/completions"
    )
    p.add_argument(
        "--tools", choices=TOOLS_MODES, default="supported", help="native function calling (`tools`)"
    )
    p.add_argument("--embedding-dim", type=int, default=64)
    p.add_argument("--rule", action="append", default=[], metavar="REGEX=REPLY", help="scripted reply rule")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-record-bodies", action="store_true", help="keep counts only (long benchmarks)")
    p.add_argument(
        "--slots", type=int, default=None, help="requests processed at once, like llama.cpp's n_parallel"
    )
    return p.parse_args(argv)


async def _serve_forever(args: argparse.Namespace) -> None:
    rules = []
    for r in args.rule:
        pattern, sep, reply = r.partition("=")
        if not sep:
            raise SystemExit(f"--rule {r!r}: expected REGEX=REPLY")
        rules.append((pattern, reply))
    config = MockConfig(
        latency_ms=args.latency_ms,
        jitter_ms=args.jitter_ms,
        rules=rules,
        fault_rate=args.fault_rate,
        fault_kinds=[k.strip() for k in args.fault_kinds.split(",") if k.strip()],
        fault_first_n=args.fault_first_n,
        retry_after_s=None if args.retry_after < 0 else args.retry_after,
        hang_s=args.hang_s,
        reject_response_format=args.reject_response_format,
        echo_mode=args.echo,
        tools_mode=args.tools,
        embedding_dim=args.embedding_dim,
        seed=args.seed,
        record_bodies=not args.no_record_bodies,
        slots=args.slots,
    )
    config.validate()
    state = _State(config=config, rng=random.Random(config.seed))
    runner = web.AppRunner(
        build_app(state),
        handle_signals=False,
        access_log=None,
        handler_cancellation=True,
        shutdown_timeout=0.5,
    )
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=1024)
    await site.start()
    assert site._server is not None
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]
    print(f"http://{args.host}:{port}/v1", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await runner.cleanup()


def main(argv: Sequence[str] | None = None) -> None:
    """Run the mock until SIGINT/SIGTERM."""
    args = _parse_args(argv)
    try:
        asyncio.run(_serve_forever(args))
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    main()
