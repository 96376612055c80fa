"""The `agent:` entry of a candidate: which workflow, over which environment, within which limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class Limits(BaseModel):
    """Per-question guards of every workflow; hitting one stops the trajectory with its reason."""

    model_config = ConfigDict(extra="forbid")

    max_steps: int = Field(10, ge=1, le=200, description="model turns per question (stop: max_steps)")
    max_tokens: int = Field(
        20_000, ge=100, description="prompt + completion tokens per question (stop: budget)"
    )
    max_cost_usd: float | None = Field(None, gt=0, description="cost per question (stop: budget)")
    max_seconds: float = Field(
        900.0, gt=0, description="wall time per question, waiting for a busy model included (stop: timeout)"
    )
    max_context_tokens: int = Field(
        7000, ge=256, description="a prompt longer than this stops the trajectory (stop: context_limit)"
    )
    repeat_limit: int = Field(
        3,
        ge=2,
        le=20,
        description="the same tool call with the same result this many times in a row stops it (stop: loop)",
    )
    max_parse_errors: int = Field(
        3, ge=1, le=20, description="consecutive replies without a valid action before stopping (parse_error)"
    )
    max_result_chars: int = Field(
        1500, ge=100, description="tool results are truncated to this many characters"
    )


class AgentConfig(BaseModel):
    """An LLM (the candidate's `model`) acting through tools."""

    model_config = ConfigDict(extra="forbid")

    workflow: Literal["react", "pal", "dfsdt", "function_calling"] = Field(
        "react", description="react, pal, dfsdt or function_calling (see the Agents section)"
    )
    environment: str = Field(
        "documents",
        description="documents (the run's corpus: Search / Lookup), database:<schema.yaml>, or a user's "
        "tools: 'mypkg.tools:TOOLS' or 'path/to/tools.py:TOOLS' (a list of typed functions)",
    )
    limits: Limits = Limits()
    action_format: Literal["json", "text"] = Field(
        "json",
        description="ReAct / DFSDT: each step as JSON under the step's schema (json; text where the provider "
        "takes no JSON schemas) or as R-Eval's 'Thought: / Action: Name[argument]' text (text)",
    )
    step_max_tokens: int = Field(256, ge=16, description="reply budget of one model turn")
    dfsdt_width: int = Field(2, ge=1, le=8, description="DFSDT: children expanded per node")
    dfsdt_depth: int = Field(12, ge=1, le=50, description="DFSDT: maximum depth of the tree")
    dfsdt_queries: int = Field(30, ge=1, description="DFSDT: model calls per question")
    sandbox: Literal["auto", "unsafe_local"] = Field(
        "auto",
        description="PAL: 'auto' runs programs under the strongest isolation the machine has (bubblewrap, "
        "else unshare with a root of its own) and refuses without one; 'unsafe_local' runs them as plain "
        "subprocesses",
    )
