"""Report section of the judge protocol: the judge card (when rows carry labels), the methods that decided,
the disagreements with the labels and the first rows. Everything from the answers file or a model is
rendered through the autoescaping template."""

from __future__ import annotations

from typing import Any

from proctor.kit.record import Run
from proctor.protocols.judge.result import JudgeResult
from proctor.protocols.judge.run import JudgedRow
from proctor.report._env import render_template

MAX_ROWS = 50


def judge_context(run: Run) -> dict[str, Any]:
    result = run.result if isinstance(run.result, JudgeResult) else None
    rows = [r for _, r in run.payloads(JudgedRow)]
    disagreements = [
        r for r in rows if r.label is not None and r.verdict is not None and r.label != r.verdict
    ]
    return {
        "result": result,
        "card": result.card if result is not None else None,
        "disagreements": disagreements[:MAX_ROWS],
        "n_disagreements": len(disagreements),
        "rows": rows[:MAX_ROWS],
        "n_rows": len(rows),
        "max_rows": MAX_ROWS,
    }


def render(run: Run) -> str:
    """HTML fragment of the judge section."""
    return render_template("judge/report.html.j2", **judge_context(run))
