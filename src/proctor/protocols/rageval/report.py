"""Report section of the rageval protocol: reads the `summary` artifact and the `rageval_answer` items."""

from __future__ import annotations

from typing import Any

from proctor.protocols.rageval import plots
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.kit.record import Run
from proctor.store import RunStore

MAX_TRACES = 60


def rageval_context(store: RunStore) -> dict[str, Any]:
    summary = store.get_artifact("summary") or {}
    systems: dict[str, Any] = summary.get("systems") or {}
    ranked = summary.get("ranking") or []
    tasks = sorted({t for s in ranked for t in systems[s]["by_task"]})
    radar = None
    if ranked and len(tasks) >= 3:
        radar = safe_plot(
            plots.radar,
            tasks,
            {s: [(systems[s]["by_task"].get(t) or {}).get("value") for t in tasks] for s in ranked},
        )
    bars = (
        safe_plot(plots.error_bars, ranked, {s: systems[s]["categories"] for s in ranked}) if ranked else None
    )
    points = {s: (systems[s]["mean_tokens"] or 0.0, systems[s]["f1"]["value"]) for s in ranked}
    scatter = safe_plot(plots.deployment, points, summary.get("pareto") or []) if points else None
    answers = [it["data"] for it in store.items(kind="rageval_answer", status="done")]
    traces = [
        {
            "candidate": a["system"],
            "question": f"{a['question']} (gold: {a['gold']}; {a['category']})",
            "trace": a["trace"],
        }
        for a in answers
        if a.get("trace")
    ]
    return {
        "summary": summary,
        "systems": systems,
        "ranked": ranked,
        "radar": radar,
        "bars": bars,
        "scatter": scatter,
        "answers": answers[:200],
        "n_answers": len(answers),
        "traces": traces,
        "max_traces": MAX_TRACES,
    }


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    return render_template("rageval/report.html.j2", **rageval_context(store))
