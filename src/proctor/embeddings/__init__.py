"""Text embeddings: a packaged offline model or any OpenAI-compatible endpoint, cached persistently.

    embedder = get_embedder("local/minilm")
    vectors = embedder.embed(["first text", "second text"])   # float32, unit rows, shape (2, embedder.dim)

Specs: `local/all-minilm-l6-v2` (alias `local/minilm`), `openai/<model>` (with `base_url`, `api_key_env`).
Vectors are cached in `<cache_dir>/embeddings.sqlite`, keyed by the embedder's identity and the text.
"""

from __future__ import annotations

from pathlib import Path

from proctor.embeddings.base import Embedder, embedding_cache, normalize_rows
from proctor.errors import UserError
from proctor.models.cache import CallCache
from proctor.models.retry import RetryPolicy

__all__ = ["Embedder", "embedding_cache", "get_embedder", "normalize_rows"]


def get_embedder(
    spec: str,
    *,
    base_url: str | None = None,
    api_key_env: str | None = None,
    batch_size: int | None = None,
    dimensions: int | None = None,
    timeout_s: float = 60.0,
    max_retries: int = 4,
    retry_base_delay_s: float = 0.5,
    threads: int | None = None,
    cache: bool | CallCache = True,
    cache_dir: str | Path | None = None,
    where: str = "embedder",
) -> Embedder:
    """Build an embedder from its spec; nothing is loaded or called until the first `embed`.

    `cache` may be False (no persistence) or a `CallCache` of your own; `where` names the config field
    for error messages.
    """
    provider, sep, name = spec.partition("/")
    if not sep or not name:
        raise UserError(
            f"{where}: embedder spec '{spec}' is not of the form provider/name. "
            f"Use local/all-minilm-l6-v2 (alias local/minilm) or openai/<model> with base_url."
        )
    vec_cache: CallCache | None
    if isinstance(cache, CallCache):
        vec_cache = cache
    elif cache:
        vec_cache = embedding_cache(cache_dir)
    else:
        vec_cache = None
    if provider == "local":
        from proctor.embeddings.local import LocalEmbedder, resolve_packaged

        if base_url or api_key_env:
            raise UserError(f"{where}: base_url/api_key_env do not apply to the packaged embedder '{spec}'.")
        return LocalEmbedder(
            resolve_packaged(name, where), batch_size=batch_size or 64, cache=vec_cache, where=where,
            threads=threads,
        )  # fmt: skip
    if provider == "openai":
        from proctor.embeddings.openai_compat import OpenAIEmbedder

        return OpenAIEmbedder(
            name,
            base_url=base_url,
            api_key_env=api_key_env,
            batch_size=batch_size or 128,
            dimensions=dimensions,
            timeout_s=timeout_s,
            retry=RetryPolicy(max_retries=max_retries, base_delay_s=retry_base_delay_s),
            cache=vec_cache,
            where=where,
        )
    raise UserError(
        f"{where}: unknown embedder provider '{provider}' in '{spec}'. "
        f"Use local/all-minilm-l6-v2 (alias local/minilm) or openai/<model> with base_url."
    )
