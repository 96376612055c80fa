"""`local/<name>` models: the ordinary OpenAI-compatible provider talking to the embedded server. The
cache key names the weights' digest, never the server's ephemeral port, so cached runs never start it."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import replace
from typing import Any

from proctor.errors import ModelCallError, UserError
from proctor.models.local.server import (
    _MAX_AUTO_PARALLEL,
    DEFAULT_CTX_PER_SLOT,
    DEFAULT_PARALLEL,
    LocalServer,
    ServerSettings,
    get_server,
)
from proctor.models.local.tool_text import calls_in_text
from proctor.models.local.weights import PackagedModel, ensure_weights, resolve_model
from proctor.models.openai_compat import OpenAICompatProvider
from proctor.models.types import GenerationParams, Message, RawReply

log = logging.getLogger(__name__)

TOOLS_NOTE = (
    "declared by the local provider: llama.cpp renders `tools` through the packaged model's chat template "
    "(Hermes-style <tool_call> blocks); calls the model writes without the tags are read from the reply's "
    "text (`proctor.models.local.tool_text`)"
)


class LocalProvider(OpenAICompatProvider):
    """OpenAI-compatible provider whose server (and weights) are prepared at the first real request."""

    def __init__(
        self,
        model: PackagedModel,
        settings: ServerSettings,
        *,
        timeout_s: float,
        startup_timeout_s: float = 300.0,
        where: str,
        replica: int = 0,
    ) -> None:
        super().__init__(
            model.name,
            base_url="http://127.0.0.1:0/v1",  # placeholder until the server is up
            api_key_env=None,
            timeout_s=timeout_s,
            where=where,
            identity_override={"provider": "local", "model": model.name, "weights_sha256": model.sha256},
            provider_name="local",
        )
        self.packaged = model
        self.settings = settings
        # Probed on xllamacpp 2026.10: /v1/completions with echo answers 200 with the generated token's
        # logprobs only (no prompt logprobs), so option log-likelihood is off and nothing is sent to ask.
        self.supports_prompt_logprobs = False
        # Measured on xllamacpp 2026.10.11549 (Jinja templates on, its default) with the packaged
        # Qwen2.5-Coder 0.5B and 1.5B: a request with `tools` is rendered through the model's chat template,
        # which asks for `<tool_call>` blocks, but the models mostly write the bare call object, which
        # llama.cpp returns as content. `complete` reads those calls from the content, so function calling
        # works (see `tool_text`).
        self.supports_tools = True
        self.tools_note = TOOLS_NOTE
        self.n_parallel = settings.n_parallel  # the default concurrency (read by get_model)
        self.startup_timeout_s = startup_timeout_s
        self.replica = replica  # which of a model's `replicas` servers this provider starts and talks to
        self.server: LocalServer | None = None
        self._prepare_lock = threading.Lock()

    def ensure_server(self) -> str:
        """Assemble the weights and start the server if needed (blocking); returns the base URL."""
        with self._prepare_lock:
            if self.server is None:
                weights = ensure_weights(self.packaged.name, where=self.where)
                self.server = get_server(weights, self.settings, self.replica)
                self.server.startup_timeout_s = self.startup_timeout_s
        self.base_url = self.server.base_url
        return self.base_url

    async def complete(self, messages: list[Message], params: GenerationParams) -> RawReply:
        if params.echo_prompt and not self.supports_prompt_logprobs:
            raise ModelCallError(
                f"{self.where}: the embedded llama.cpp server returns no prompt logprobs", cause="unsupported"
            )
        if self.server is None or not self.server.running:
            await asyncio.to_thread(self.ensure_server)
        reply = await super().complete(messages, params)
        if params.tools and not reply.tool_calls and params.tool_choice != "none":
            offered = {str(t.get("function", {}).get("name")) for t in params.tools}
            calls, text = calls_in_text(reply.text, offered)
            if calls:
                return replace(reply, text=text, tool_calls=calls, finish_reason="tool_calls")
        return reply

    def close(self) -> None:
        """Stop this provider's server now rather than at interpreter exit."""
        if self.server is not None:
            self.server.close()


def local_provider(
    name: str,
    *,
    where: str = "model",
    max_concurrency: int | None = None,
    n_parallel: int | None = None,
    n_ctx: int | None = None,
    threads: int | None = None,
    prompt_cache: bool = True,
    timeout_s: float = 600.0,
    startup_timeout_s: float = 300.0,
    replica: int = 0,
    **unknown: Any,
) -> LocalProvider:
    """Provider for `local/<name>`. Nothing is loaded here; the first uncached request starts the server.

    n_parallel: server slots (default: max_concurrency capped at 8, else 2); also the default concurrency.
    n_ctx: context tokens per slot (default 4096); the server gets n_ctx * n_parallel.
    threads: CPU threads for llama.cpp (default: all cores).
    prompt_cache: reuse shared prompt prefixes (default); False gives bit-identical logprobs, slower.
    timeout_s: per request (generous: CPU generation is slow); startup_timeout_s: model load.
    replica: index of this server among a model's replicas (each replica is its own server process).
    """
    if unknown:
        raise UserError(
            f"{where}: unknown option(s) for a local model: {', '.join(sorted(unknown))}. "
            f"Local models take n_parallel, n_ctx, threads, prompt_cache, timeout_s and startup_timeout_s."
        )
    model = resolve_model(name, where)
    if n_parallel is None:
        n_parallel = min(max_concurrency, _MAX_AUTO_PARALLEL) if max_concurrency else DEFAULT_PARALLEL
    for option, value in (("n_parallel", n_parallel), ("n_ctx", n_ctx), ("threads", threads)):
        if value is not None and (not isinstance(value, int) or value < 1):
            raise UserError(f"{where}: {option} for a local model must be a positive integer, got {value!r}.")
    settings = ServerSettings(
        n_parallel=n_parallel,
        ctx_per_slot=n_ctx or DEFAULT_CTX_PER_SLOT,
        threads=threads or os.cpu_count() or 1,
        prompt_cache=bool(prompt_cache),
    )
    return LocalProvider(
        model,
        settings,
        timeout_s=timeout_s,
        startup_timeout_s=startup_timeout_s,
        where=where,
        replica=replica,
    )
