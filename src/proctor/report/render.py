"""Build the report from a run record (`proctor.load_run`): generic sections plus the protocol's section."""

from __future__ import annotations

import logging
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

from markupsafe import Markup

from proctor import __version__
from proctor.kit.record import Run
from proctor.report import plots
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.report.sections import section_for
from proctor.store.record import MetricRecord

log = logging.getLogger(__name__)

PLOTTED_PREFIXES = ("accuracy.", "f1.", "em.")


def is_plotted_metric(name: str) -> bool:
    """Accuracy-like metrics (rates in [0, 1] with intervals) get a bar chart per metric name."""
    return name.startswith(PLOTTED_PREFIXES) or name in ("accuracy", "f1", "em")


def _run_context(run: Run) -> dict[str, Any]:
    info = run.run_info
    started, finished = info.started, info.finished
    duration = finished - started if started is not None and finished is not None else None
    return {**info.model_dump(), "config": run.config_data(), "duration": duration}


def _metric_groups(run: Run) -> list[dict[str, Any]]:
    groups: dict[str, list[MetricRecord]] = {}
    for m in run.metrics():
        groups.setdefault(m.name, []).append(m)
    out = []
    for name, rows in groups.items():
        plot = None
        if is_plotted_metric(name) and any(r.value is not None for r in rows):
            plot = safe_plot(
                plots.metric_bars,
                name,
                [r.subject for r in rows],
                [r.value for r in rows],
                [r.lo for r in rows],
                [r.hi for r in rows],
                xlabel=f"{name.split('.', 1)[0]} — whiskers: 95% interval",
            )
        out.append({"name": name, "rows": rows, "plot": plot})
    return out


def _call_context(run: Run) -> dict[str, Any]:
    rows = run.call_totals()
    for r in rows:
        r["tokens"] = (r["prompt_tokens"] or 0) + (r["completion_tokens"] or 0)
    calls = sum(r["calls"] or 0 for r in rows)
    latency_weight = sum((r["mean_latency_s"] or 0.0) * (r["calls"] or 0) for r in rows)
    totals = {
        "calls": calls,
        "cache_hits": sum(r["cache_hits"] or 0 for r in rows),
        "errors": sum(r["errors"] or 0 for r in rows),
        "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in rows),
        "completion_tokens": sum(r["completion_tokens"] or 0 for r in rows),
        "tokens": sum(r["tokens"] for r in rows),
        "cost_usd": _sum_or_none(r["cost_usd"] for r in rows),
        "spent_usd": _sum_or_none(r["spent_usd"] for r in rows),
        "mean_latency_s": latency_weight / calls if calls else None,
    }
    return {"rows": rows, "totals": totals}


def _sum_or_none(values: Any) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) if present else None


def _error_context(run: Run) -> dict[str, Any]:
    items = run.items(status="error")
    judge_errors = [j for j in run.judgments() if j.error]
    return {
        "items": items,
        "by_cause": Counter(it.error_cause or "(no cause recorded)" for it in items).most_common(),
        "judge_errors": judge_errors,
        "judge_errors_by_judge": Counter(j.judge for j in judge_errors).most_common(),
    }


def _item_counts(run: Run) -> list[dict[str, Any]]:
    counts: dict[str, Counter[str]] = {}
    for it in run.iter_items():
        counts.setdefault(it.kind, Counter())[it.status] += 1
    return [{"kind": k, "total": sum(c.values()), "by_status": sorted(c.items())} for k, c in counts.items()]


def _protocol_section(run: Run) -> dict[str, Any] | None:
    if not run.protocol:
        return None
    renderer = section_for(run.protocol)
    try:
        # Each renderer returns a fragment rendered by its own autoescaping template.
        return {"protocol": run.protocol, "html": Markup(renderer(run)), "error": None}
    except Exception as exc:
        log.exception("report section %r failed", run.protocol)
        return {"protocol": run.protocol, "html": None, "error": f"{type(exc).__name__}: {exc}"}


def render_report_html(run: Run) -> str:
    """The whole report as one self-contained HTML string (inline CSS, inline base64 PNG plots)."""
    return render_template(
        "report.html.j2",
        run=_run_context(run),
        generator_version=__version__,
        generated_at=time.time(),
        item_counts=_item_counts(run),
        metric_groups=_metric_groups(run),
        calls=_call_context(run),
        errors=_error_context(run),
        section=_protocol_section(run),
    )


def write_report(run: Run, path: Path) -> Path:
    """Write the report to `path` (atomically: a temporary file is renamed into place) and return it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    html = render_report_html(run)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(html, encoding="utf-8")
    tmp.replace(path)
    return path
