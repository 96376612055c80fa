"""Report section of the rageval protocol: reads the run's typed result and its `rageval_answer` items."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from proctor.agents.trace import TOOL_SIDE
from proctor.kit.record import Run
from proctor.protocols.rageval import plots
from proctor.protocols.rageval.answers import RagAnswer
from proctor.protocols.rageval.result import NotApplicable, RagevalResult, RagSystem
from proctor.protocols.rageval.taxonomy import NOTE
from proctor.report._env import render_template
from proctor.report.plots import safe_plot

MAX_TRACES = 60
MAX_ANSWERS = 200


@dataclass(frozen=True)
class TraceRow:
    """One answer's trace as the shared traces macro shows it."""

    candidate: str
    question: str
    trace: dict[str, Any]


@dataclass(frozen=True)
class Section:
    summary: RagevalResult
    ranked: list[str]
    systems: dict[str, RagSystem | NotApplicable]
    radar: str | None
    bars: str | None
    scatter: str | None
    answers: list[RagAnswer]
    n_answers: int
    traces: list[TraceRow]
    max_traces: int = MAX_TRACES
    taxonomy_note: str = NOTE  # how ME / TE were decided where the paper is ambiguous
    tool_side: frozenset[str] = TOOL_SIDE  # interruption causes on the tool side (the rest: model side)


def rageval_section(run: Run) -> Section | None:
    """What the section shows; None while the run has no rageval result."""
    result = run.result
    if not isinstance(result, RagevalResult):
        return None
    scored: dict[str, RagSystem] = dict(result.ranked())
    ranked = list(scored)
    tasks = sorted({t for s in scored.values() for t in s.by_task})
    radar = None
    if ranked and len(tasks) >= 3:
        radar = safe_plot(
            plots.radar,
            tasks,
            {
                n: [e.value if (e := s.by_task.get(t)) is not None else None for t in tasks]
                for n, s in scored.items()
            },
        )
    bars = (
        safe_plot(plots.error_bars, ranked, {n: s.categories for n, s in scored.items()}) if ranked else None
    )
    points = {n: (s.mean_tokens or 0.0, s.f1.value or 0.0) for n, s in scored.items()}
    scatter = safe_plot(plots.deployment, points, result.pareto) if points else None
    answers = [a for _, a in run.payloads(RagAnswer)]
    traces = [
        TraceRow(a.system, f"{a.question} (gold: {a.gold}; {a.category})", a.trace)
        for a in answers
        if a.trace
    ]
    return Section(
        summary=result,
        ranked=ranked,
        systems=result.systems,
        radar=radar,
        bars=bars,
        scatter=scatter,
        answers=answers[:MAX_ANSWERS],
        n_answers=len(answers),
        traces=traces,
    )


def render(run: Run) -> str:
    section = rageval_section(run)
    if section is None:
        return '<p class="muted">The run has no result yet.</p>'
    return render_template(
        "rageval/report.html.j2", **{f.name: getattr(section, f.name) for f in fields(section)}
    )
