"""What rageval asks and scores: the systems under test (a workflow x LLM agent from the grid, or a
configured candidate) and one system's scored answer to one task (a stored item)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from proctor.agents.trace import Interruption
from proctor.candidates import SystemUnderTest
from proctor.kit.steps import Payload


class RagAnswer(Payload):
    KIND: ClassVar[str] = "rageval_answer"
    system: str
    workflow: str | None
    llm: str | None
    task_id: str
    task: str
    level: str
    domain: str
    difficulty: str | None = None  # HotpotQA's level (easy / medium / hard), when the task has one
    question: str
    gold: str
    answer: str
    f1: float
    em: float
    # The deterministic equivalence rule that is sure the answer states the gold answer (the same date,
    # quantity or phrase in other words: "It opened in 1887." for "1887"), else None — F1 undercounts these.
    equivalent: str | None = None
    category: str  # the error taxonomy's class (`taxonomy.CATEGORIES`)
    stop: str  # the trajectory's stop reason; `finished` / `no_answer` for a system without a trajectory
    # Why the process was cut off before its own end (cause and side), None when it ran to its end.
    interruption: Interruption | None = None
    steps: int = 0
    # How the agent wrote its actions: json / text (ReAct, DFSDT), code (PAL), tool_calls (function calling);
    # None for a system without a trajectory.
    action_format: str | None = None
    parse_errors: int = 0  # steps whose reply held no valid action
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float = 0.0
    latency_s: float = 0.0
    trace: dict[str, Any] | None = None


@dataclass(frozen=True)
class System:
    """A system under test, named (`workflow:llm` for the grid, the candidate's name otherwise)."""

    name: str
    workflow: str | None
    llm: str | None
    make: Callable[[str], SystemUnderTest]  # environment (a domain's) -> the system acting in it
    not_applicable: str | None = None
