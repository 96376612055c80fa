"""Models: one interface for every provider and role.

    model = get_model("openai/gpt-4o-mini", api_key_env="OPENAI_API_KEY")
    completion = await model.generate(messages, temperature=0, json_schema=schema)

Specs: `openai/<model>` (any OpenAI-compatible server via `base_url`), `local/<name>` (embedded, offline),
`scripted/<name>` (deterministic, for tests).

Replicas: `base_url=[url1, url2, ...]` (servers the user runs) or `local/<name>` with `replicas=N` (N
embedded servers) put a `ReplicaPool` in front of the servers; the `Model` and its call path are the same.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any

from proctor.errors import UserError
from proctor.models.base import Model, Prices, Provider
from proctor.models.cache import CallCache, default_cache_dir
from proctor.models.retry import RetryPolicy
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

__all__ = [
    "Completion",
    "ContinuationScore",
    "GenerationParams",
    "Message",
    "Model",
    "Prices",
    "Provider",
    "RawReply",
    "TokenLogprob",
    "ToolCallRequest",
    "Usage",
    "get_embedder",
    "get_model",
    "shared_cache",
]

_CACHES: dict[Path, CallCache] = {}


def shared_cache(cache_dir: str | Path | None = None) -> CallCache:
    """The persistent call cache in `cache_dir` (default: $PROCTOR_CACHE_DIR or ~/.cache/proctor)."""
    path = (Path(cache_dir).expanduser() if cache_dir else default_cache_dir()) / "calls.sqlite"
    if path not in _CACHES:
        _CACHES[path] = CallCache(path)
    return _CACHES[path]


def get_model(
    spec: str,
    *,
    base_url: str | list[str] | None = None,
    replicas: int | None = None,
    replica_cooldown_s: float = 5.0,
    api_key_env: str | None = None,
    max_concurrency: int | None = None,
    timeout_s: float | None = None,
    max_retries: int = 4,
    input_price_per_mtok: float = 0.0,
    output_price_per_mtok: float = 0.0,
    cache: bool | CallCache = True,
    cache_dir: str | Path | None = None,
    max_reasks: int = 2,
    retry_base_delay_s: float = 0.5,
    where: str = "model",
    **local_options: Any,
) -> Model:
    """Build a model from its spec. `where` names the config field for error messages.

    `base_url` may be a list of servers of the same model (replicas; `openai/` only) and `replicas` the
    number of embedded servers of a `local/` model; either way a `ReplicaPool` spreads the calls and
    `max_concurrency` (default: the sum of the replicas' defaults) caps them all together.
    `replica_cooldown_s`: how long a replica that failed with a connection error, timeout or 5xx is
    left out of rotation. `timeout_s`: per request; default 120 s for `openai/`, 600 s for `local/` (CPU
    generation is slow; a loaded machine needs more)."""
    provider_name, sep, name = spec.partition("/")
    if not sep or not name:
        raise UserError(
            f"{where}: model spec '{spec}' is not of the form provider/name. "
            f"Use openai/<model>, local/<name> or scripted/<name>."
        )
    urls = _replica_urls(base_url, where)
    if urls is not None and provider_name != "openai":
        raise UserError(
            f"{where}.base_url: a list of servers applies to openai/ models only ('{spec}' is not one). "
            f"For several embedded servers of a local/ model, set `replicas: N` instead."
        )
    if replicas is not None and (not isinstance(replicas, int) or replicas < 1):
        raise UserError(f"{where}.replicas must be a positive integer, got {replicas!r}.")
    provider: Any
    if provider_name == "openai":
        from proctor.models.openai_compat import DEFAULT_BASE_URL, OpenAICompatProvider

        if replicas is not None and (urls is None or replicas != len(urls)):
            raise UserError(
                f"{where}.replicas: an openai/ model's replicas are the servers it lists: give base_url "
                f"as a list of their URLs (base_url: [http://host1:8000/v1, http://host2:8000/v1]) and "
                f"remove `replicas`"
                + (f" (or make it {len(urls)}, the number of URLs listed)." if urls else ".")
            )
        servers = [
            OpenAICompatProvider(
                name, base_url=url, api_key_env=api_key_env, timeout_s=timeout_s or 120.0, where=where
            )
            for url in (urls or [base_url if isinstance(base_url, str) else DEFAULT_BASE_URL])
        ]
        provider = _pool(servers, where, replica_cooldown_s) if urls is not None else servers[0]
        concurrency = max_concurrency or 16 * len(servers)
    elif provider_name == "local":
        from proctor.models.local import local_provider

        if timeout_s is not None:
            local_options["timeout_s"] = timeout_s
        if replicas is None or replicas == 1:
            provider = local_provider(name, where=where, max_concurrency=max_concurrency, **local_options)
            concurrency = max_concurrency or provider.n_parallel
        else:
            # N servers on this machine: the cores are split between them unless `threads` says otherwise,
            # and an explicit max_concurrency is the total, each server getting its share of slots.
            threads = local_options.pop("threads", None) or max(1, (os.cpu_count() or 1) // replicas)
            per_replica = math.ceil(max_concurrency / replicas) if max_concurrency else None
            locals_ = [
                local_provider(
                    name,
                    where=where,
                    max_concurrency=per_replica,
                    threads=threads,
                    replica=i,
                    **local_options,
                )
                for i in range(replicas)
            ]
            provider = _pool(locals_, where, replica_cooldown_s)
            concurrency = max_concurrency or sum(p.n_parallel for p in locals_)
    elif provider_name == "scripted":
        from proctor.models.scripted import ScriptedProvider

        if replicas is not None and replicas != 1:
            raise UserError(f"{where}.replicas applies to local/ models only; remove it from '{spec}'.")
        provider = ScriptedProvider(name, where=where)
        concurrency = max_concurrency or 16
    else:
        raise UserError(
            f"{where}: unknown model provider '{provider_name}' in '{spec}'. "
            "Use openai/, local/ or scripted/."
        )
    call_cache: CallCache | None
    if isinstance(cache, CallCache):
        call_cache = cache
    elif cache:
        call_cache = shared_cache(cache_dir)
    else:
        call_cache = None
    return Model(
        provider,
        max_concurrency=concurrency,
        retry=RetryPolicy(max_retries=max_retries, base_delay_s=retry_base_delay_s),
        prices=Prices(input_price_per_mtok, output_price_per_mtok),
        cache=call_cache,
        max_reasks=max_reasks,
    )


def _replica_urls(base_url: str | list[str] | None, where: str) -> list[str] | None:
    """The URLs of a `base_url` list (None for a single URL or none): non-empty, distinct."""
    if base_url is None or isinstance(base_url, str):
        return None
    urls = list(base_url)
    if not urls or not all(isinstance(u, str) and u for u in urls):
        raise UserError(
            f"{where}.base_url: give one URL, or a non-empty list of the URLs of servers of the same model "
            f"(base_url: [http://host1:8000/v1, http://host2:8000/v1])."
        )
    seen: set[str] = set()
    for u in urls:
        norm = u.rstrip("/")
        if norm in seen:
            raise UserError(f"{where}.base_url lists {u} twice. List each replica's URL once.")
        seen.add(norm)
    return urls


def _pool(providers: list[Any], where: str, cooldown_s: float) -> Provider:
    from proctor.models.replicas import ReplicaPool

    return ReplicaPool(providers, where=where, cooldown_s=cooldown_s)


def get_embedder(spec: str, **options: Any) -> Any:
    """Embeddings from a packaged local model or an OpenAI-compatible /v1/embeddings endpoint."""
    from proctor.embeddings import get_embedder as _get

    return _get(spec, **options)
