"""`CorpusConfig`: how a corpus is read and cut into chunks (the `corpus:` section of a run config)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from proctor.config_paths import ConfigPath

DEFAULT_TEXT_FIELD = "text"
DEFAULT_MIN_CHUNK_CHARS = 200
DEFAULT_MAX_CHUNK_CHARS = 1200

ChunkBy = Literal["paragraph", "sentence"]


class CorpusConfig(BaseModel):
    """Where the documents are and how to chunk them; unknown keys are rejected so typos surface."""

    model_config = ConfigDict(extra="forbid")

    path: ConfigPath | None = None
    text_field: str = DEFAULT_TEXT_FIELD  # jsonl/json key or csv column holding the text
    title_field: str | None = None  # jsonl/json key or csv column holding a title
    id_field: str | None = None  # jsonl/json key or csv column kept as metadata["record_id"]
    min_chunk_chars: int = Field(default=DEFAULT_MIN_CHUNK_CHARS, ge=0)
    max_chunk_chars: int = Field(default=DEFAULT_MAX_CHUNK_CHARS, ge=20)
    chunk_by: ChunkBy = "paragraph"
    # Only these extensions are loaded; an extension proctor has no loader for is read as plain text.
    extensions: list[str] | None = None

    @field_validator("extensions")
    @classmethod
    def _normalise_extensions(cls, v: list[str] | None) -> list[str] | None:
        """Accept "md", ".MD" and ".md" alike."""
        if v is None:
            return None
        out = []
        for ext in v:
            e = ext.strip().lower()
            if not e or e == ".":
                raise ValueError("extensions must be non-empty, e.g. ['.md', '.txt']")
            out.append(e if e.startswith(".") else "." + e)
        return out

    @model_validator(mode="after")
    def _check_sizes(self) -> CorpusConfig:
        if self.min_chunk_chars > self.max_chunk_chars:
            raise ValueError(
                f"min_chunk_chars ({self.min_chunk_chars}) must not exceed "
                f"max_chunk_chars ({self.max_chunk_chars})"
            )
        return self
