"""The `qa:` section of a run config."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Config(BaseModel):
    """Reference-QA protocol: open questions with reference answers from chunks."""

    model_config = ConfigDict(extra="forbid")

    num_questions: int = Field(20, ge=1, le=100_000)
    judges: list[Literal["with_reference", "without_reference"]] = ["with_reference", "without_reference"]
    question_max_tokens: int = Field(256, ge=16)
