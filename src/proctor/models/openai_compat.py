"""OpenAI-compatible chat completions over HTTP (OpenAI, vLLM, Ollama, llama.cpp server, ...).

Prompt logprobs (`GenerationParams.echo_prompt`) use the legacy text endpoint instead: POST
`{base_url}/completions` with `prompt`, `echo: true`, `logprobs: N`, `max_tokens: 1`; the reply's
`choices[0].logprobs` holds `tokens`, `token_logprobs` (the first null), `top_logprobs` and `text_offset`
for the prompt followed by the generated token (vLLM, OpenAI's completion models). A server that refuses
echo (400/404/405/422/501: OpenAI's chat models, older llama.cpp) or ignores it (the embedded llama.cpp
server answers with the generated token's logprobs only) is reported as cause "unsupported", never retried.

aiohttp rather than the openai SDK: the call path sits in front of every request, and aiohttp keeps
per-call CPU low enough to stay near a bare client's throughput (see bench/README.md).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any
from urllib.parse import urlsplit

import aiohttp

from proctor.errors import ModelCallError, UserError
from proctor.models.retry import RetryableError, parse_retry_after
from proctor.models.types import GenerationParams, Message, RawReply, TokenLogprob, ToolCallRequest, Usage

DEFAULT_BASE_URL = "https://api.openai.com/v1"


def resolve_api_key(api_key_env: str | None, base_url: str, where: str) -> str | None:
    """Read the key from the named environment variable at call time; it is never stored anywhere."""
    if api_key_env is None:
        if base_url.rstrip("/") == DEFAULT_BASE_URL:
            api_key_env = "OPENAI_API_KEY"
        else:
            return None
    key = os.environ.get(api_key_env)
    if not key:
        raise UserError(
            f"{where}: the environment variable {api_key_env} that should hold the API key is not set. "
            f"Export it (export {api_key_env}=...) or point api_key_env at the variable that holds the key; "
            f"for a local server that needs no key, remove api_key_env and set base_url."
        )
    return key


def validate_base_url(base_url: str, where: str) -> str:
    """`base_url` without its trailing slash; anything but an http(s) URL with a host is a user error."""
    parts = urlsplit(base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise UserError(
            f"{where}: base_url '{base_url}' is not an http(s) URL. Write it in full, with the scheme and "
            f"the API path, e.g. http://localhost:8000/v1."
        )
    return base_url.rstrip("/")


def _bad_url(where: str, url: str) -> UserError:
    return UserError(
        f"{where}: '{url}' is not a valid URL. Correct base_url in the config, e.g. http://localhost:8000/v1."
    )


class OpenAICompatProvider:
    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        base_url: str = DEFAULT_BASE_URL,
        api_key_env: str | None = None,
        timeout_s: float = 120.0,
        where: str = "model",
        identity_override: dict[str, Any] | None = None,
        provider_name: str = "openai",
    ) -> None:
        self.model = model
        self.base_url = validate_base_url(base_url, where)
        self.timeout_s = timeout_s
        self.where = where
        self.provider = provider_name
        self._api_key = resolve_api_key(api_key_env, self.base_url, where)
        self._identity_override = identity_override
        self.supports_json_schema = True
        self.supports_prompt_logprobs: bool | None = None  # unknown: `Model.supports_prompt_logprobs` probes
        self._sessions: dict[int, aiohttp.ClientSession] = {}

    def identity(self) -> dict[str, Any]:
        if self._identity_override is not None:
            return self._identity_override
        return {"provider": self.provider, "model": self.model, "base_url": self.base_url}

    def _session(self) -> aiohttp.ClientSession:
        loop = asyncio.get_running_loop()
        s = self._sessions.get(id(loop))
        if s is None or s.closed:
            headers = {"Content-Type": "application/json"}
            if self._api_key:
                headers["Authorization"] = f"Bearer {self._api_key}"
            s = aiohttp.ClientSession(
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self.timeout_s),
                connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
            )
            self._sessions[id(loop)] = s
        return s

    def _body(self, messages: list[Message], params: GenerationParams, with_schema: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": params.temperature,
            "max_tokens": params.max_tokens,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if params.logprobs:
            body["logprobs"] = True
            if params.top_logprobs:
                body["top_logprobs"] = params.top_logprobs
        if params.tools is not None:
            body["tools"] = params.tools
            if params.tool_choice is not None:
                body["tool_choice"] = params.tool_choice
        if params.json_schema is not None and with_schema:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "reply", "schema": params.json_schema, "strict": False},
            }
        return body

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply:
        if params.echo_prompt:
            return await self._complete_echo(messages, params)
        with_schema = self.supports_json_schema
        status, text, headers = await self._post(self._body(messages, params, with_schema))
        if (
            status == 400
            and with_schema
            and params.json_schema is not None
            and ("response_format" in text or "schema" in text.lower())
        ):
            # The server does not take JSON schemas: fall back to tolerant parsing and re-asks.
            self.supports_json_schema = False
            status, text, headers = await self._post(self._body(messages, params, False))
        self._raise_for_status(status, text, headers)
        try:
            data = json.loads(text)
            choice = data["choices"][0]
            content = choice["message"].get("content") or ""
            calls = _parse_tool_calls(choice["message"].get("tool_calls"))
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError) as e:
            raise RetryableError(f"malformed response body: {e}", cause="bad_response") from None
        u = data.get("usage") or {}
        return RawReply(
            text=content,
            usage=Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0)),
            logprobs=_parse_logprobs(choice.get("logprobs")),
            finish_reason=choice.get("finish_reason"),
            tool_calls=calls,
        )

    def _raise_for_status(self, status: int, text: str, headers: Any) -> None:
        """HTTP errors of either endpoint: bad credentials are the user's to fix, 408/429/5xx are retried,
        any other 4xx fails the call with its status as the cause."""
        if status in (401, 403):
            raise UserError(
                f"{self.where}: {self.base_url} refused the credentials (HTTP {status}). "
                f"Check the API key in the variable named by api_key_env."
            )
        if status == 429 or status == 408 or status >= 500:
            raise RetryableError(
                f"HTTP {status}",
                cause=f"http_{status}",
                status=status,
                retry_after=parse_retry_after(headers.get("Retry-After")),
            )
        if status >= 400:
            raise ModelCallError(
                f"{self.where}: HTTP {status}: {text[:300]}", cause=f"http_{status}", status=status
            )

    async def _complete_echo(self, messages: list[Message], params: GenerationParams) -> RawReply:
        if len(messages) != 1 or messages[0]["role"] != "user":
            raise ValueError("an echo_prompt request carries its text as one user message")
        text = messages[0]["content"]
        body: dict[str, Any] = {
            "model": self.model,
            "prompt": text,
            "echo": True,
            "logprobs": max(1, params.top_logprobs),
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        status, reply_text, headers = await self._post(body, "/completions")
        if status in _ECHO_REFUSED:
            raise ModelCallError(
                f"{self.where}: {self.base_url}/completions gives no prompt logprobs (HTTP {status}: "
                f"{reply_text[:200]})",
                cause="unsupported",
                status=status,
            )
        self._raise_for_status(status, reply_text, headers)
        try:
            data = json.loads(reply_text)
            choice = data["choices"][0]
            echoed = str(choice.get("text") or "")
            u = data.get("usage") or {}
            usage = Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0))
        except (json.JSONDecodeError, KeyError, IndexError, TypeError, AttributeError, ValueError) as e:
            raise RetryableError(f"malformed response body: {e}", cause="bad_response") from None
        tokens = _parse_echo_logprobs(choice.get("logprobs"), text, usage.prompt_tokens)
        if tokens is None:
            raise ModelCallError(
                f"{self.where}: {self.base_url}/completions ignored echo (no prompt logprobs in the reply)",
                cause="unsupported",
            )
        return RawReply(text=echoed, usage=usage, logprobs=tokens, finish_reason=choice.get("finish_reason"))

    async def _post(self, body: dict[str, Any], path: str = "/chat/completions") -> tuple[int, str, Any]:
        try:
            async with self._session().post(f"{self.base_url}{path}", json=body) as resp:
                text = await resp.text()
                return resp.status, text, resp.headers
        except TimeoutError:
            raise RetryableError(f"no reply within {self.timeout_s}s", cause="timeout") from None
        except aiohttp.ClientPayloadError as e:
            raise RetryableError(f"truncated body: {e}", cause="truncated") from None
        except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError):
            raise _bad_url(self.where, self.base_url) from None
        except (aiohttp.ClientConnectionError, aiohttp.ClientResponseError, OSError) as e:
            raise RetryableError(f"connection error: {type(e).__name__}", cause="connection") from None

    async def aclose(self) -> None:
        for s in self._sessions.values():
            if not s.closed:
                await s.close()
        self._sessions.clear()


def _parse_tool_calls(raw: Any) -> tuple[ToolCallRequest, ...]:
    """`choices[0].message.tool_calls`. Whatever the model wrote never raises: arguments that are not a JSON
    object, or a call without a function name, give that call an `error` for the workflow to return."""
    out = []
    for i, c in enumerate(raw if isinstance(raw, list) else []):
        c = c if isinstance(c, dict) else {}
        fn: dict[str, Any] = c["function"] if isinstance(c.get("function"), dict) else {}
        args = fn.get("arguments")
        call = ToolCallRequest.parse(str(c.get("id") or f"call_{i}"), str(fn.get("name") or ""), args or "")
        if not call.name:
            call = ToolCallRequest(call.id, "", call.arguments, None, "the tool call names no function")
        out.append(call)
    return tuple(out)


def _parse_logprobs(lp: Any) -> list[TokenLogprob] | None:
    if not lp or not isinstance(lp, dict) or not lp.get("content"):
        return None
    out = []
    for t in lp["content"]:
        top = {a["token"]: float(a["logprob"]) for a in (t.get("top_logprobs") or [])}
        out.append(TokenLogprob(token=t["token"], logprob=float(t["logprob"]), top=top))
    return out


# Statuses meaning "this server or model does not do echo": bad request (echo or logprobs rejected), no
# such endpoint or model (chat-only servers and models), unprocessable, not implemented.
_ECHO_REFUSED = (400, 404, 405, 422, 501)


def _parse_echo_logprobs(lp: Any, text: str, n_prompt: int) -> list[TokenLogprob] | None:
    """The prompt's scored tokens from an echo reply (legacy or chat-style logprobs), or None when the
    reply does not cover the prompt (the server ignored echo)."""
    if not isinstance(lp, dict):
        return None
    try:
        if isinstance(lp.get("tokens"), list):  # legacy completions format
            toks = [str(t) for t in lp["tokens"]]
            lps = list(lp.get("token_logprobs") or [None] * len(toks))
            tops = list(lp.get("top_logprobs") or [None] * len(toks))
            offsets = lp.get("text_offset")
        elif isinstance(lp.get("content"), list):  # chat-style entries on a completions endpoint
            toks = [str(t["token"]) for t in lp["content"]]
            lps = [t.get("logprob") for t in lp["content"]]
            tops = [{a["token"]: a["logprob"] for a in t.get("top_logprobs") or []} for t in lp["content"]]
            offsets = None
        else:
            return None
    except (KeyError, TypeError, AttributeError):
        return None
    if not toks or len(lps) != len(toks):
        return None
    if not (
        isinstance(offsets, list) and len(offsets) == len(toks) and all(isinstance(o, int) for o in offsets)
    ):
        offsets, pos = [], 0
        for t in toks:
            offsets.append(pos)
            pos += len(t)
    # Echo honoured: at least as many entries as the server counted prompt tokens, or (no count) the tokens
    # spell the prompt. The embedded llama.cpp server sends the one generated token only.
    if n_prompt > 0:
        if len(toks) < n_prompt:
            return None
        idx = [i for i in range(n_prompt) if offsets[i] < len(text)]
    else:
        if not "".join(toks).startswith(text):
            return None
        idx = [i for i, o in enumerate(offsets) if o < len(text)]
    out = []
    try:
        for i in idx:
            if lps[i] is None:
                continue  # the first token: nothing to condition on
            top = tops[i] if i < len(tops) and isinstance(tops[i], dict) else {}
            out.append(
                TokenLogprob(
                    token=toks[i],
                    logprob=float(lps[i]),
                    top={str(k): float(v) for k, v in top.items()},
                    offset=int(offsets[i]),
                )
            )
    except (TypeError, ValueError):
        return None
    return out


async def check_reachable(base_url: str, where: str, timeout_s: float = 5.0) -> None:
    """Any HTTP answer from the server counts; a refused connection, DNS failure or malformed URL is a
    user error."""
    base_url = validate_base_url(base_url, where)
    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout_s)) as s,
            s.get(f"{base_url}/models") as resp,
        ):
            await resp.read()
    except (aiohttp.InvalidURL, aiohttp.NonHttpUrlClientError):
        raise _bad_url(where, base_url) from None
    except (TimeoutError, aiohttp.ClientConnectionError, OSError) as e:
        raise UserError(
            f"{where}: cannot reach the model server at {base_url} ({type(e).__name__}). "
            f"Start the server or correct base_url in the config."
        ) from None
