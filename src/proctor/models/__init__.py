"""Models: one interface for every provider and role.

    model = get_model("openai/gpt-4o-mini", api_key_env="OPENAI_API_KEY")
    completion = await model.generate(messages, temperature=0, json_schema=schema)

Specs: `openai/<model>` (any OpenAI-compatible server via `base_url`), `local/<name>` (embedded, offline),
`scripted/<name>` (deterministic, for tests).
"""

from __future__ import annotations

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
    base_url: str | None = None,
    api_key_env: str | None = None,
    max_concurrency: int | None = None,
    timeout_s: float = 120.0,
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
    """Build a model from its spec. `where` names the config field for error messages."""
    provider_name, sep, name = spec.partition("/")
    if not sep or not name:
        raise UserError(
            f"{where}: model spec '{spec}' is not of the form provider/name. "
            f"Use openai/<model>, local/<name> or scripted/<name>."
        )
    provider: Any
    if provider_name == "openai":
        from proctor.models.openai_compat import DEFAULT_BASE_URL, OpenAICompatProvider

        provider = OpenAICompatProvider(
            name,
            base_url=base_url or DEFAULT_BASE_URL,
            api_key_env=api_key_env,
            timeout_s=timeout_s,
            where=where,
        )
        concurrency = max_concurrency or 16
    elif provider_name == "local":
        from proctor.models.local import local_provider

        provider = local_provider(name, where=where, max_concurrency=max_concurrency, **local_options)
        concurrency = max_concurrency or provider.n_parallel
    elif provider_name == "scripted":
        from proctor.models.scripted import ScriptedProvider

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


def get_embedder(spec: str, **options: Any) -> Any:
    """Embeddings from a packaged local model or an OpenAI-compatible /v1/embeddings endpoint."""
    from proctor.embeddings import get_embedder as _get

    return _get(spec, **options)
