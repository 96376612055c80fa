"""`EmbedderConfig`: the run's embedder as the `embedder:` field gives it — a spec, the name of a key of
`models:` (its spec, base_url and api_key_env), or `{spec, base_url, api_key_env}` for an OpenAI-compatible
`/embeddings` endpoint. Keys are read from the environment variable named, never written in the config."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from proctor.embeddings.base import Embedder


def env_var_name(v: str | None) -> str | None:
    """An `api_key_env` value: the NAME of an environment variable, never a key pasted in its place (the
    config is stored with the run; the key must not be)."""
    if v is not None and (not v or not v.replace("_", "").isalnum() or len(v) > 100):
        raise ValueError(
            "must be the NAME of an environment variable (like OPENAI_API_KEY), not the key itself"
        )
    return v


class EmbedderConfig(BaseModel):
    """One embedder: `local/all-minilm-l6-v2` (packaged, offline) or `openai/<model>` with `base_url`."""

    model_config = ConfigDict(extra="forbid")

    spec: str = Field(description="local/all-minilm-l6-v2 (alias local/minilm) or openai/<model>")
    base_url: str | None = Field(None, description="openai/ only: the server's URL, e.g. http://host:8000/v1")
    api_key_env: str | None = Field(
        None, description="openai/ only: name of the environment variable holding the key"
    )
    timeout_s: float = Field(60.0, gt=0, description="openai/ only: seconds before a request is retried")
    max_retries: int = Field(
        4, ge=0, le=20, description="openai/ only: retries on 429, 5xx, timeouts and connection errors"
    )

    @field_validator("spec")
    @classmethod
    def _spec_form(cls, v: str) -> str:
        provider, sep, name = v.partition("/")
        if provider not in {"openai", "local"} or not sep or not name:
            raise ValueError("must be local/all-minilm-l6-v2 (alias local/minilm) or openai/<model>")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        return env_var_name(v)

    def options(self) -> dict[str, Any]:
        """Keyword arguments of `get_embedder` besides the spec."""
        return self.model_dump(exclude={"spec"}, exclude_none=True)

    def build(
        self, *, cache_dir: str | Path | None = None, where: str = "embedder", **extra: Any
    ) -> Embedder:
        """The embedder itself (nothing loaded or called until its first `embed`)."""
        from proctor.embeddings import get_embedder

        return get_embedder(self.spec, cache_dir=cache_dir, where=where, **self.options(), **extra)
