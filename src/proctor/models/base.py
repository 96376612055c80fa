"""The one model-call path: cache -> concurrency limit -> retries -> structured output -> usage and cost.

Providers only know how to make one request (`Provider.complete`); everything else lives here so that
every provider and every role behaves the same. Prompt logprobs (`Model.prompt_logprobs`, used to score
multiple-choice options) take the same path: they are a request with `GenerationParams.echo_prompt`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from proctor.dependencies import note_model
from proctor.errors import ModelCallError, StructuredOutputError
from proctor.models.cache import CallCache, cache_key
from proctor.models.planning import active_planner
from proctor.models.recording import CallRecord, current_scope
from proctor.models.retry import RetryableError, RetryPolicy
from proctor.models.structured import ParseError, parse_json, reask_message
from proctor.models.types import (
    Completion,
    ContinuationScore,
    GenerationParams,
    Message,
    RawReply,
    TokenLogprob,
    ToolCallRequest,
    Usage,
)

log = logging.getLogger("proctor.models")

# Scored once per model (per cache) to learn whether its server returns prompt logprobs.
PROBE_TEXT = "Question: What is the capital of France?\nAnswer: Paris"
_PROBE_VERSION = 1
# Version 2: a tool call is required of the probe's reply (version 1 took any 200 as a yes).
_TOOLS_PROBE_VERSION = 2
PROBE_TOOL_PROMPT = "Call the ping tool."
PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "ping",
        "description": "Answer pong.",
        "parameters": {"type": "object", "properties": {}},
    },
}


class Provider(Protocol):
    """One request to one backend. Raise `RetryableError` for transient failures, `ModelCallError` or
    `UserError` for permanent ones.

    A provider may declare `supports_prompt_logprobs` (True/False; absent or None: unknown, probed once).
    For a request with `params.echo_prompt` it scores the text of the single user message and returns
    its token logprobs, or raises `ModelCallError` with cause "unsupported".

    Likewise `supports_tools` (native function calling; absent or None: probed once), with an optional
    `tools_note` saying why. A request with `params.tools` sends them to the server and returns the reply's
    tool calls in `RawReply.tool_calls` (arguments kept as the raw text; see `ToolCallRequest.parse`)."""

    provider: str
    model: str
    supports_json_schema: bool

    def identity(self) -> dict[str, Any]:
        """What makes replies differ across backends (cache key part). Never includes credentials."""
        ...

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class Prices:
    """US dollars per one million tokens."""

    input_per_mtok: float = 0.0
    output_per_mtok: float = 0.0

    def cost(self, usage: Usage) -> float:
        return (
            usage.prompt_tokens * self.input_per_mtok + usage.completion_tokens * self.output_per_mtok
        ) / 1e6


def _reply_to_json(reply: RawReply) -> dict[str, Any]:
    return {
        "text": reply.text,
        "usage": [reply.usage.prompt_tokens, reply.usage.completion_tokens],
        "finish_reason": reply.finish_reason,
        "logprobs": None if reply.logprobs is None else [asdict(t) for t in reply.logprobs],
        **({"tool_calls": [asdict(c) for c in reply.tool_calls]} if reply.tool_calls else {}),
    }


def _reply_from_json(d: dict[str, Any]) -> RawReply:
    lps = d.get("logprobs")
    return RawReply(
        text=d["text"],
        usage=Usage(*d["usage"]),
        finish_reason=d.get("finish_reason"),
        logprobs=None if lps is None else [TokenLogprob(**t) for t in lps],
        tool_calls=tuple(ToolCallRequest(**c) for c in d.get("tool_calls") or []),
    )


def _where(scope: Any) -> str:
    """The unit a call belonged to, for a log line: " (role judge, item <key>)"."""
    parts = [f"role {scope.role}"] if scope.role else []
    if scope.item_key:
        parts.append(f"item {scope.item_key}")
    return f" ({', '.join(parts)})" if parts else ""


def _log_retry(spec: str, scope: Any, e: RetryableError, attempt: int, attempts: int, wait: float) -> None:
    """One line per retry; a rate limit says so, with the wait the server asked for. Messages are the
    provider's (status and body excerpt) — never request headers, so no API key."""
    if e.status == 429:
        asked = f"Retry-After {e.retry_after:g}s, " if e.retry_after is not None else ""
        log.warning(
            "%s: rate limited (HTTP 429)%s; attempt %d of %d failed, %swaiting %.1fs",
            spec, _where(scope), attempt, attempts, asked, wait,
        )  # fmt: skip
    else:
        log.warning(
            "%s: %s%s; attempt %d of %d failed, retrying in %.1fs: %s",
            spec, e.cause, _where(scope), attempt, attempts, wait, e,
        )  # fmt: skip


class Model:
    """A provider wrapped in proctor's call path. Create with `proctor.models.get_model`."""

    def __init__(
        self,
        provider: Provider,
        *,
        max_concurrency: int = 8,
        retry: RetryPolicy | None = None,
        prices: Prices | None = None,
        cache: CallCache | None = None,
        max_reasks: int = 2,
    ) -> None:
        self.provider = provider
        self.spec = f"{provider.provider}/{provider.model}"
        self.max_concurrency = max_concurrency
        self.retry = retry or RetryPolicy()
        self.prices = prices or Prices()
        self.cache = cache
        self.max_reasks = max_reasks
        self._semaphores: dict[int, asyncio.Semaphore] = {}
        self._inflight: dict[int, dict[str, asyncio.Future[RawReply]]] = {}
        self._prompt_logprobs_ok: bool | None = None
        self._tools_ok: bool | None = None
        # Why `supports_tools` answered as it did (declared, or what the probe saw); None until asked.
        self.tools_note: str | None = None
        self._identity_hash: str | None = None

    def __repr__(self) -> str:
        return f"Model({self.spec})"

    def identity_hash(self) -> str:
        """A short hash of what makes this model's replies differ (its provider identity): how a stored
        result names the model it came from (`proctor.dependencies`)."""
        if self._identity_hash is None:
            self._identity_hash = cache_key(self.provider.identity(), {})[:16]
        return self._identity_hash

    def _semaphore(self) -> asyncio.Semaphore:
        # One limiter per event loop: a Semaphore is bound to the loop that first awaits it.
        loop_id = id(asyncio.get_running_loop())
        sem = self._semaphores.get(loop_id)
        if sem is None:
            sem = self._semaphores[loop_id] = asyncio.Semaphore(self.max_concurrency)
        return sem

    async def generate(
        self,
        messages: list[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 512,
        seed: int | None = 0,
        json_schema: dict[str, Any] | None = None,
        logprobs: bool = False,
        top_logprobs: int = 0,
        stop: tuple[str, ...] | list[str] = (),
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> Completion:
        """One completion through the call path.

        `tools` are OpenAI `tools` entries ({"type": "function", "function": {name, description, parameters}})
        and `tool_choice` "auto", "none", "required" or {"type": "function", "function": {"name": ...}}; both
        are part of the cache key. The model's tool calls come back in `Completion.tool_calls`; arguments
        that are not a JSON object give the call an `error`, never an exception. A reply with tool calls is
        not parsed against `json_schema` (it is a step, not the answer). Ask `supports_tools()` first."""
        if tool_choice is not None and tools is None:
            raise ValueError(f"{self.spec}: tool_choice={tool_choice!r} needs tools")
        params = GenerationParams(
            temperature=temperature,
            max_tokens=max_tokens,
            seed=seed,
            json_schema=json_schema,
            logprobs=logprobs or top_logprobs > 0,
            top_logprobs=top_logprobs,
            stop=tuple(stop),
            tools=tools,
            tool_choice=tool_choice,
        )
        convo: list[Message] = list(messages)
        usage = Usage()
        latency = 0.0
        cost = 0.0
        all_cached = True
        for attempt in range(self.max_reasks + 1):
            reply, cached, took = await self._call(convo, params)
            usage = usage + reply.usage
            latency += took
            cost += self.prices.cost(reply.usage)
            all_cached = all_cached and cached
            parsed = None
            if json_schema is not None and not reply.tool_calls:
                try:
                    parsed = parse_json(reply.text, json_schema)
                except ParseError as e:
                    if attempt == self.max_reasks:
                        log.warning(
                            "%s: reply did not match the JSON schema after %d tries%s: %s",
                            self.spec, attempt + 1, _where(current_scope()), e,
                        )  # fmt: skip
                        raise StructuredOutputError(
                            f"{self.spec}: reply did not match the JSON schema after {attempt + 1} tries: "
                            f"{e}",
                            raw=reply.text,
                        ) from None
                    log.info(
                        "%s: reply did not match the JSON schema%s; re-asking (%d of %d): %s",
                        self.spec, _where(current_scope()), attempt + 1, self.max_reasks, e,
                    )  # fmt: skip
                    convo = [
                        *convo,
                        {"role": "assistant", "content": reply.text},
                        {"role": "user", "content": reask_message(str(e), json_schema)},
                    ]
                    continue
            return Completion(
                text=reply.text,
                parsed=parsed,
                logprobs=reply.logprobs,
                usage=usage,
                latency_s=latency,
                cached=all_cached,
                finish_reason=reply.finish_reason,
                cost_usd=cost,
                tool_calls=list(reply.tool_calls),
            )
        raise AssertionError("unreachable")

    async def prompt_logprobs(self, text: str) -> list[TokenLogprob]:
        """The log-probability of each token of `text` given the text before it, with its character offset.

        Sent as a raw-text completions request with echo (the text travels as the single user message of
        an `echo_prompt` request), so it is cached, retried, budgeted and recorded like any call. The first
        token has no logprob and is left out. Raises `ModelCallError` with cause "unsupported" when the
        server returns no prompt logprobs (refuses or ignores echo)."""
        reply, _ = await self._echo(text)
        return list(reply.logprobs or [])

    async def continuation_logprob(self, prompt: str, continuation: str) -> ContinuationScore:
        """Log-likelihood of `continuation` right after `prompt`, scored as one text (prompt + continuation).

        A token belongs to the continuation when it ends after the prompt does, so a token spanning the
        boundary counts (start continuations with a space, as after "Answer:", and none does)."""
        text = prompt + continuation
        reply, cached = await self._echo(text)
        tokens = sorted(reply.logprobs or [], key=lambda t: t.offset or 0)
        if any(t.offset is None for t in tokens):
            raise ModelCallError(f"{self.spec}: prompt logprobs came without offsets", cause="unsupported")
        ends = [t.offset for t in tokens[1:]] + [len(text)]
        picked = [t for t, end in zip(tokens, ends, strict=True) if end is not None and end > len(prompt)]
        if not picked:
            raise ModelCallError(
                f"{self.spec}: the server scored no token of the continuation {continuation[:40]!r}",
                cause="unsupported",
            )
        return ContinuationScore(
            logprob_sum=sum(t.logprob for t in picked),
            n_tokens=len(picked),
            n_chars=len(continuation),
            usage=reply.usage,
            cached=cached,
        )

    async def supports_prompt_logprobs(self) -> bool:
        """Whether this model's server returns prompt logprobs: declared by the provider, else probed with
        one short request. The answer is kept on the model and in the call cache (a refusal too, so a
        cached re-run never asks again, nor starts a local server to find out); transient failures raise."""
        declared = getattr(self.provider, "supports_prompt_logprobs", None)
        if declared is not None:
            return bool(declared)
        if self._prompt_logprobs_ok is not None:
            return self._prompt_logprobs_ok
        key = cache_key(self.provider.identity(), {"probe": "prompt_logprobs", "version": _PROBE_VERSION})
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            ok = bool(hit["supported"])
        else:
            try:
                ok = bool(await self.prompt_logprobs(PROBE_TEXT))
            except ModelCallError as e:
                if e.cause != "unsupported":
                    raise
                ok = False
            if self.cache is not None and active_planner() is None:
                self.cache.put(key, {"supported": ok})
        self._prompt_logprobs_ok = ok
        return ok

    async def supports_tools(self) -> bool:
        """Whether this model's server does native function calling (OpenAI `tools` in, `tool_calls` out).

        Declared by the provider (scripted: yes; the embedded llama.cpp server: no), else probed once with
        a tiny request offering one tool with `tool_choice="required"` (again without `tool_choice` if the
        server refuses that): yes only when the reply carries a tool call. A server that rejects `tools`
        (HTTP 400/404/422) or accepts them but answers in text says no. The answer and its reason
        (`tools_note`) are kept on the model and in the call cache, so a cached re-run never asks again;
        transient failures raise."""
        declared = getattr(self.provider, "supports_tools", None)
        if declared is not None:
            note = getattr(self.provider, "tools_note", None)
            self.tools_note = note or f"declared by the {self.provider.provider} provider"
            return bool(declared)
        if self._tools_ok is not None:
            return self._tools_ok
        key = cache_key(self.provider.identity(), {"probe": "tools", "version": _TOOLS_PROBE_VERSION})
        hit = self.cache.get(key) if self.cache is not None else None
        if hit is not None:
            ok, note = bool(hit["supported"]), str(hit.get("note") or "")
        else:
            ok, note = await self._probe_tools()
            if self.cache is not None and active_planner() is None:
                self.cache.put(key, {"supported": ok, "note": note})
        self._tools_ok, self.tools_note = ok, note
        return ok

    async def _probe_tools(self) -> tuple[bool, str]:
        refused: ModelCallError | None = None
        for choice in ("required", None):
            try:
                c = await self.generate(
                    [{"role": "user", "content": PROBE_TOOL_PROMPT}],
                    max_tokens=64,
                    tools=[PROBE_TOOL],
                    tool_choice=choice,
                )
            except ModelCallError as e:
                if e.cause not in ("http_400", "http_404", "http_422", "unsupported"):
                    raise
                refused = e
                continue  # some servers refuse tool_choice="required" only: ask once more without it
            how = 'with tool_choice="required"' if choice else "without tool_choice"
            if c.tool_calls:
                return True, f"probe: the server answered a request offering one tool {how} with a tool call"
            return False, (
                f"probe: the server accepted `tools` {how} but answered in text, without `tool_calls` "
                f"(reply: {c.text[:80]!r})"
            )
        assert refused is not None
        return False, (
            f"probe: the server refused a request with `tools` ({refused.cause}: {str(refused)[:160]})"
        )

    async def _echo(self, text: str) -> tuple[RawReply, bool]:
        if getattr(self.provider, "supports_prompt_logprobs", None) is False:
            raise ModelCallError(f"{self.spec}: the server returns no prompt logprobs", cause="unsupported")
        # One generated token: servers that reject max_tokens=0 are common; the provider drops it.
        params = GenerationParams(
            temperature=0.0, max_tokens=1, seed=None, logprobs=True, top_logprobs=1, echo_prompt=True
        )
        reply, cached, _ = await self._call([{"role": "user", "content": text}], params)
        return reply, cached

    async def _call(self, messages: list[Message], params: GenerationParams) -> tuple[RawReply, bool, float]:
        """One request through cache, limiter and retries; recorded in the scope's recorder.

        Identical requests in flight at the same time share one server call (single flight): they get the
        same reply, as they would from the cache, and the server is asked once.
        """
        scope = current_scope()
        note_model(self.identity_hash())
        key = cache_key(self.provider.identity(), {"messages": messages, "params": params.as_key()})
        if self.cache is not None:
            hit = self.cache.get(key)
            if hit is not None:
                reply = _reply_from_json(hit)
                self._record(scope, reply.usage, 0.0, cached=True, attempts=0, sent=(messages, params, reply))
                return reply, True, 0.0
        inflight = self._inflight.setdefault(id(asyncio.get_running_loop()), {})
        pending = inflight.get(key)
        if pending is not None:
            reply = await asyncio.shield(pending)
            self._record(scope, reply.usage, 0.0, cached=True, attempts=0, sent=(messages, params, reply))
            return reply, True, 0.0
        future: asyncio.Future[RawReply] = asyncio.get_running_loop().create_future()
        inflight[key] = future
        try:
            reply, cached, took = await self._request(key, scope, messages, params)
        except asyncio.CancelledError:
            future.cancel()
            raise
        except BaseException as e:
            future.set_exception(e)
            future.exception()  # mark retrieved: no "never retrieved" warning when nobody else waited
            raise
        else:
            future.set_result(reply)
            return reply, cached, took
        finally:
            inflight.pop(key, None)

    async def _request(
        self, key: str, scope: Any, messages: list[Message], params: GenerationParams
    ) -> tuple[RawReply, bool, float]:
        planner = active_planner()
        if planner is not None:  # a dry run: tallied and answered by a placeholder, nothing sent or cached
            repeat = planner.repeat(key)
            reply = repeat or planner.placeholder(key, messages, params)
            self._record(
                scope, reply.usage, 0.0, cached=repeat is not None, attempts=0, sent=(messages, params, reply)
            )
            if repeat is None and params.json_schema is not None:
                planner.tally(scope.role, self.spec).reasks += self.max_reasks
            return reply, repeat is not None, 0.0
        attempts = 0
        last: RetryableError | None = None
        started = time.perf_counter()
        while attempts <= self.retry.max_retries:
            attempts += 1
            try:
                async with self._semaphore():
                    # Checked once a slot is free, so at most the calls in flight overshoot the budget.
                    if scope.budget is not None and scope.budget.exhausted:
                        raise ModelCallError(
                            f"{self.spec}: not sent — the run's budget_usd (${scope.budget.limit_usd:g}) "
                            "is spent",
                            cause="budget",
                        )
                    t0 = time.perf_counter()
                    reply = await self.provider.complete(messages, params)
                    took = time.perf_counter() - t0
            except RetryableError as e:
                last = e
                if attempts > self.retry.max_retries:
                    break
                wait = self.retry.delay(attempts - 1, e.retry_after)
                _log_retry(self.spec, scope, e, attempts, self.retry.max_retries + 1, wait)
                await asyncio.sleep(wait)
                continue
            except ModelCallError as e:
                self._record(
                    scope, Usage(), time.perf_counter() - started, False, attempts, error=e.cause,
                    sent=(messages, params, None),
                )  # fmt: skip
                if e.cause not in ("unsupported", "budget"):  # a probe's "no" is an answer; budget: said once
                    log.warning("%s: call failed (%s)%s: %s", self.spec, e.cause, _where(scope), e)
                raise
            if self.cache is not None:
                self.cache.put(key, _reply_to_json(reply))
            self._record(
                scope, reply.usage, took, cached=False, attempts=attempts, sent=(messages, params, reply)
            )
            return reply, False, took
        assert last is not None
        self._record(
            scope, Usage(), time.perf_counter() - started, False, attempts, error=last.cause,
            sent=(messages, params, None),
        )  # fmt: skip
        log.error(
            "%s: gave up after %d attempts (%s)%s: %s", self.spec, attempts, last.cause, _where(scope), last
        )
        raise ModelCallError(
            f"{self.spec}: gave up after {attempts} attempts ({last.cause}): {last}",
            cause=last.cause,
            status=last.status,
        )

    def _record(
        self,
        scope: Any,
        usage: Usage,
        latency: float,
        cached: bool,
        attempts: int,
        error: str | None = None,
        *,
        sent: tuple[list[Message], GenerationParams, RawReply | None],
    ) -> None:
        """Account for one call (budget, dry-run tally) and hand it to the scope's recorder with its
        exchange: the messages and parameters sent (`sent`) and the reply, None when none came back."""
        messages, params, reply = sent
        cost = self.prices.cost(usage)
        planner = active_planner()
        if planner is not None:
            tally = planner.tally(scope.role, self.spec)
            if cached:
                tally.cached += 1
            else:
                tally.calls += 1
                tally.prompt_tokens += usage.prompt_tokens
                tally.completion_tokens += usage.completion_tokens
                tally.cost_usd += cost
        if scope.budget is not None and not cached:
            scope.budget.spent_usd += cost
        if scope.recorder is None:
            return
        scope.recorder.record_call(
            CallRecord(
                provider=self.provider.provider,
                model=self.provider.model,
                role=scope.role,
                item_key=scope.item_key,
                prompt_tokens=usage.prompt_tokens,
                completion_tokens=usage.completion_tokens,
                cost_usd=cost,
                latency_s=latency,
                cached=cached,
                attempts=attempts,
                error=error,
                step=scope.step,
                messages=list(messages),
                params=params.as_key(),
                reply=None if reply is None else reply.text,
                reply_tool_calls=() if reply is None else reply.tool_calls,
                logprobs=None if reply is None else reply.logprobs,
            )
        )

    async def aclose(self) -> None:
        await self.provider.aclose()

    async def __aenter__(self) -> Model:
        """`async with get_model(...) as model:` closes the model's HTTP session on the way out."""
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
