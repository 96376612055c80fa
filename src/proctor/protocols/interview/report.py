"""Report section of the interview protocol (`interview`).

Reads the run's typed result (`InterviewResult`: results per variant and candidate, graph statistics) and
its artifact `interview` (base questions, knowledge paths with their questions, feedback, rounds).
Everything a model wrote is rendered through the autoescaping template.
"""

from __future__ import annotations

from typing import Any

from proctor.kit.record import Run
from proctor.protocols.interview import plots
from proctor.protocols.interview.config import VARIANTS
from proctor.protocols.interview.result import InterviewArtifact, InterviewResult
from proctor.report._env import render_template
from proctor.report.plots import safe_plot


def interview_context(run: Run) -> dict[str, Any]:
    result = run.result if isinstance(run.result, InterviewResult) else None
    art = run.artifact("interview", InterviewArtifact)
    variants = result.variants if result is not None else {}
    first = next(iter(variants), None)
    trajectories: dict[str, dict[str, list[str]]] = {}
    by_tier: dict[str, dict[str, tuple[float, float, float]]] = {}
    if first is not None:
        for name, r in variants[first].candidates.items():
            trajectories[name] = {b: list(ts) for b, ts in r.trajectories.items()}
            by_tier[name] = {
                t: (
                    e.value,
                    e.lo if e.lo is not None else e.value,
                    e.hi if e.hi is not None else e.value,
                )
                for t, e in r.extension_by_difficulty.items()
                if e.value is not None
            }
    return {
        "variants": variants,
        "variant_help": VARIANTS,
        "first": first,
        "questions": art.questions if art else [],
        "examples": art.examples if art else [],
        "feedback": art.feedback if art else [],
        "graph": result.graph if result is not None else None,
        "trajectory_plot": safe_plot(plots.tier_trajectories, trajectories) if trajectories else None,
        "tier_plot": safe_plot(plots.accuracy_by_tier, by_tier) if any(by_tier.values()) else None,
    }


def render(run: Run) -> str:
    """HTML fragment of the interview section."""
    return render_template("interview/report.html.j2", **interview_context(run))
