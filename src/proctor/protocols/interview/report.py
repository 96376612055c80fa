"""Report section of the interview protocol (`interview`).

Reads only the store: artifacts `summary` (results per variant and candidate, graph statistics) and
`interview` (base questions, knowledge paths with their questions, feedback, rounds). Everything a model
wrote is rendered through the autoescaping template.
"""

from __future__ import annotations

from typing import Any

from proctor.protocols.interview import plots
from proctor.protocols.interview.config import VARIANTS
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.kit.record import Run
from proctor.store import RunStore


def interview_context(store: RunStore) -> dict[str, Any]:
    summary = store.get_artifact("summary") or {}
    art = store.get_artifact("interview") or {}
    variants: dict[str, Any] = summary.get("variants") or {}
    first = next(iter(variants), None)
    trajectories = {}
    by_tier: dict[str, dict[str, tuple[float, float, float]]] = {}
    if first is not None:
        for name, r in variants[first]["candidates"].items():
            trajectories[name] = r["trajectories"]
            by_tier[name] = {
                t: (
                    e["value"],
                    e["lo"] if e["lo"] is not None else e["value"],
                    e["hi"] if e["hi"] is not None else e["value"],
                )
                for t, e in r["extension_by_difficulty"].items()
                if e["value"] is not None
            }
    return {
        "summary": summary,
        "variants": variants,
        "variant_help": VARIANTS,
        "first": first,
        "questions": art.get("questions") or [],
        "examples": art.get("examples") or [],
        "feedback": art.get("feedback") or [],
        "graph": summary.get("graph"),
        "trajectory_plot": safe_plot(plots.tier_trajectories, trajectories) if trajectories else None,
        "tier_plot": safe_plot(plots.accuracy_by_tier, by_tier) if any(by_tier.values()) else None,
    }


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    """HTML fragment of the interview section."""
    return render_template("interview/report.html.j2", **interview_context(store))
