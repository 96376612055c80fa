"""rageval's result: the tasks asked (by level, domain and task; what the sources gave and dropped), per
system F1 (bootstrap interval), EM and the share of equivalent answers (Wilson), F1 by level, task and
domain, the error taxonomy, stop reasons, interruptions by cause and deployment cost per question — or why
the system is not applicable; the ranking by F1 and the Pareto front of tokens against F1."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from proctor.agents.trace import InterruptionReason
from proctor.estimates import Estimate
from proctor.kit.result import Metric, OmitNone, Part, Result
from proctor.kit.shared.questions import GenerationStats


class DocumentStats(Part):
    """Questions written from the corpus: generation, what the support checks dropped, what was kept by
    level. Empty (`{}`) when no document questions were asked."""

    generation: Annotated[GenerationStats | None, OmitNone()] = None
    dropped: Annotated[dict[str, int] | None, OmitNone()] = None
    kept: Annotated[dict[str, int] | None, OmitNone()] = None


class TaskStats(Part):
    """What each task source gave: database instances by level, rejected template instances by reason,
    the template expansion's counts, document questions, the HotpotQA file's counts."""

    database: dict[str, int] = Field(default_factory=dict)
    rejected: dict[str, int] = Field(default_factory=dict)
    expansion: dict[str, int] = Field(default_factory=dict)
    documents: DocumentStats = Field(default_factory=DocumentStats)
    hotpotqa: dict[str, int] = Field(default_factory=dict)


class TaskCounts(TaskStats):
    """The run's tasks: how many, by level, domain and task, and the statistics of their sources."""

    total: int
    by_level: dict[str, int]
    by_domain: dict[str, int]
    by_task: dict[str, int]


class NotApplicable(Part):
    """A system of the grid that cannot run here (PAL without a sandbox, ...), with the reason."""

    workflow: str | None
    llm: str | None
    not_applicable: str


class Score(Part):
    """F1 (bootstrap interval) and EM (Wilson) over a group of answers."""

    n: int
    f1: Estimate
    em: Estimate


class RagSystem(Part):
    """One system's answers, scored."""

    workflow: str | None
    llm: str | None
    not_applicable: None = None
    answered: int
    failed: dict[str, int]  # failed answers by cause
    f1: Annotated[Estimate, Metric("rageval.f1")]
    em: Annotated[Estimate, Metric("rageval.em")]
    equivalent: Annotated[Estimate, Metric("rageval.equivalent")]
    by_level: dict[str, Estimate]  # mean F1
    by_task: dict[str, Estimate]
    by_domain: dict[str, Estimate]
    # HotpotQA answers by setting and level or type: `hotpotqa-distractor/easy`, `hotpotqa/comparison`, ...
    by_hotpotqa: dict[str, Score] = Field(default_factory=dict)
    categories: dict[str, int]  # the error taxonomy's classes
    stops: dict[str, int]
    # Interrupted answers by cause (each cause is model- or tool-side: `agents.trace.TOOL_SIDE`).
    interruptions: dict[InterruptionReason, int] = Field(default_factory=dict)
    # Answers by the action format their trajectory used (json, text, code, tool_calls), and the steps
    # whose reply held no valid action.
    action_formats: dict[str, int] = Field(default_factory=dict)
    parse_error_steps: int = 0
    mean_steps: float | None
    mean_tokens: float | None
    mean_cost_usd: float | None
    mean_latency_s: float | None


class RagevalResult(Result):
    tasks: TaskCounts
    systems: dict[str, RagSystem | NotApplicable]
    ranking: list[str]  # applicable systems with an F1, best first
    pareto: list[str]  # tokens per question against F1, cheapest first
    levels: dict[str, str]
    categories: dict[str, str]

    def ranked(self) -> list[tuple[str, RagSystem]]:
        """The ranked systems with their results, best first."""
        out: list[tuple[str, RagSystem]] = []
        for name in self.ranking:
            s = self.systems[name]
            if isinstance(s, RagSystem):
                out.append((name, s))
        return out
