"""What an agent did for one question: its steps, why it stopped, and — when it did not run to its end —
why it was interrupted.

Stop reasons are one vocabulary across workflows (what ended the trajectory). R-Eval's error taxonomy
asks a different question: was the process *interrupted*, and by what? `finished` (a final answer) and
`gave_up` (DFSDT's search tree exhausted: the search ran to its end) are not interruptions; every other
stop is, and `Trajectory.interruption` records its cause in one small vocabulary (`InterruptionReason`),
each reason on one side: `tool` (the tool itself failed on a call it accepted) or `model` (the system's own
use of the tools: an improper call, an unparseable action, a program that failed, a loop, a limit).
A limit that cuts off a step which had just failed on a tool call is charged to that failure (the agent
was still recovering from it), so a PAL program failing on its tool calls until `max_steps` reads as
what it is. Errors on steps the agent recovered from are not interruptions.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field, computed_field, model_validator

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

InterruptionReason = Literal[
    "tool_fault",  # a tool raised on a call that passed its schema (tool_exception)
    "invalid_call",  # unknown tool, invalid arguments, a refused call, a PAL program faking a tool
    "unparseable_action",  # replies without a valid action, `max_parse_errors` in a row
    "program_error",  # PAL: the program failed on its own (exception, sandbox limit, no `answer`)
    "step_limit",  # max_steps, or DFSDT's model-call budget (`queries`)
    "context_limit",  # the prompt outgrew max_context_tokens
    "loop",  # the same call repeat_limit times in a row
    "timeout",  # the trajectory's wall-time limit
    "budget",  # the trajectory's token / cost allowance, or the run's budget refused a call
]
INTERRUPTION_REASONS: tuple[str, ...] = InterruptionReason.__args__  # type: ignore[attr-defined]
InterruptionSide = Literal["model", "tool"]
TOOL_SIDE: frozenset[str] = frozenset({"tool_fault"})  # every other reason is model-side

# What each interrupting stop means when the cut-off step had no tool failure of its own.
_STOP_REASON: dict[str, InterruptionReason] = {
    "max_steps": "step_limit",
    "context_limit": "context_limit",
    "loop": "loop",
    "budget": "budget",
    "timeout": "timeout",
    "tool_error": "tool_fault",
    "parse_error": "unparseable_action",
}
NOT_INTERRUPTED: frozenset[str] = frozenset({"finished", "gave_up"})
# Call errors that are the system's improper use of a tool (`ToolCall.error` prefixes): an unknown tool,
# arguments off the schema, a call the tool refused as asked (`ToolRefusal`: an unknown id, Lookup first).
IMPROPER_CALL: tuple[str, ...] = ("unknown_tool", "invalid_arguments", "refused")


class Interruption(BaseModel):
    """Why a trajectory did not run to its end: the cause and the stop's detail."""

    reason: InterruptionReason
    detail: str | None = None

    @computed_field  # type: ignore[prop-decorator]
    @property
    def side(self) -> InterruptionSide:
        return "tool" if self.reason in TOOL_SIDE else "model"


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
    # what the workflow changed: a repaired reply (PAL), a re-ask, a repeated call answered with a note
    note: str | None = None
    # the calls the step made: a PAL program's, a native function-calling turn's, a ReAct / DFSDT action's
    tool_calls: list[ToolCall] = Field(default_factory=list)


def step_failure(step: AgentStep) -> InterruptionReason | None:
    """What went wrong on one step, in the interruption vocabulary (None for a step without an error)."""
    calls = [c.error for c in step.tool_calls if c.error]
    if any(e.startswith("tool_exception") for e in calls):
        return "tool_fault"
    if any(e.startswith(IMPROPER_CALL) for e in calls):
        return "invalid_call"
    err = step.error
    if not err:
        return None
    if err.startswith("parse_error"):
        return "unparseable_action"
    if err.startswith("tool_exception"):
        return "tool_fault"
    if err.startswith(IMPROPER_CALL) or "instead of calling the tool" in err:
        return "invalid_call"
    if err.startswith("program_"):
        return "program_error"
    return None


def interruption_of(
    stop: StopReason, steps: list[AgentStep], detail: str | None = None
) -> Interruption | None:
    """The interruption a stop means: None for `finished` / `gave_up`; else the failure of the step the
    stop cut off when it had one (a tool fault, an improper call, a failed program), else the stop's own
    reason."""
    if stop in NOT_INTERRUPTED:
        return None
    failed = step_failure(steps[-1]) if steps else None
    if stop == "parse_error" or failed is None:
        return Interruption(reason=_STOP_REASON[stop], detail=detail)
    return Interruption(reason=failed, detail=detail)


class Trajectory(BaseModel):
    workflow: str
    answer: str | None = None
    stop: StopReason
    steps: list[AgentStep] = Field(default_factory=list)
    detail: str | None = None  # what triggered the stop, for the report
    settings: dict[str, Any] = Field(default_factory=dict)  # the workflow's parameters, recorded
    # Why it did not run to its end (None when it did); derived from `stop` and the last step unless the
    # workflow names it (DFSDT's model-call budget is a step limit).
    interruption: Interruption | None = None

    @model_validator(mode="after")
    def _interruption(self) -> Trajectory:
        if self.stop in NOT_INTERRUPTED:
            self.interruption = None
        elif self.interruption is None:
            self.interruption = interruption_of(self.stop, self.steps, self.detail)
        return self

    @property
    def finished(self) -> bool:
        """The agent gave its final answer (`Finish`, a program's `answer`, a reply without tool calls)."""
        return self.stop == "finished"

    @property
    def had_error(self) -> bool:
        """Some step had an error (recovered from or not) — a fact about the steps, not the taxonomy's
        input: see `interruption`."""
        return any(s.error for s in self.steps)

    @property
    def scratchpad(self) -> str:
        """What the agent retrieved: the results of its successful tool calls (R-Eval's "information
        retrieved (scratchpad)"). Never its own thoughts, actions or final answer, and never error
        observations — so "the gold answer appears in the scratchpad" means a tool gave it."""
        parts: list[str] = []
        for s in self.steps:
            if s.tool_calls:  # every call the step made (a program, a function-calling turn, an action)
                parts += [c.result for c in s.tool_calls if c.error is None and c.result]
            elif s.action not in (None, "Finish", "GiveUp", "program") and s.error is None and s.observation:
                parts.append(s.observation)
        return "\n".join(parts)

    def totals(self) -> dict[str, float]:
        return {
            "steps": len(self.steps),
            "prompt_tokens": sum(s.prompt_tokens for s in self.steps),
            "completion_tokens": sum(s.completion_tokens for s in self.steps),
            "cost_usd": round(sum(s.cost_usd for s in self.steps), 8),
            "latency_s": round(sum(s.latency_s for s in self.steps), 4),
        }
