"""What an agent did for one question: its steps and why it stopped.

Stop reasons are one vocabulary across workflows, because R-Eval's error taxonomy needs "halted with an
error / halted without error / not halted": `finished` is the only halted one; a finished trajectory
with a tool or parse error on the way counts as halted with an error.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from proctor.agents.tools import ToolCall

StopReason = Literal[
    "finished",
    "max_steps",
    "context_limit",
    "loop",
    "budget",
    "timeout",
    "tool_error",
    "parse_error",
    "gave_up",
]
STOP_REASONS: tuple[str, ...] = StopReason.__args__  # type: ignore[attr-defined]


class AgentStep(BaseModel):
    """One model turn and what followed: the thought, the action with its arguments, the observation."""

    index: int
    thought: str | None = None
    action: str | None = None
    arguments: dict[str, Any] = Field(default_factory=dict)
    observation: str | None = None
    raw: str = ""  # the model's output as written
    error: str | None = None  # parse_error / tool error text, when the step had one
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    cached: bool = False
    node: str | None = None  # DFSDT: the tree node this step expanded
    tool_calls: list[ToolCall] = Field(default_factory=list)  # PAL: the calls its program made


class Trajectory(BaseModel):
    workflow: str
    answer: str | None = None
    stop: StopReason
    steps: list[AgentStep] = Field(default_factory=list)
    detail: str | None = None  # what triggered the stop, for the report
    settings: dict[str, Any] = Field(default_factory=dict)  # the workflow's parameters, recorded

    @property
    def halted(self) -> bool:
        return self.stop == "finished"

    @property
    def had_error(self) -> bool:
        return any(s.error for s in self.steps)

    @property
    def scratchpad(self) -> str:
        """Everything the agent wrote and saw, for "gold answer appears in the scratchpad" checks."""
        parts = []
        for s in self.steps:
            parts += [s.raw, s.observation or "", *(c.observation for c in s.tool_calls)]
        return "\n".join(p for p in parts if p)

    def totals(self) -> dict[str, float]:
        return {
            "steps": len(self.steps),
            "prompt_tokens": sum(s.prompt_tokens for s in self.steps),
            "completion_tokens": sum(s.completion_tokens for s in self.steps),
            "cost_usd": round(sum(s.cost_usd for s in self.steps), 8),
            "latency_s": round(sum(s.latency_s for s in self.steps), 4),
        }
