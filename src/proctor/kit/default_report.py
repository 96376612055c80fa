"""The default report section: what any protocol's run shows before the protocol writes report code.

It reads the run record only: headline estimates (every `Estimate` in the protocol's result model, named
by its path), one table per item kind with the payload's fields as columns, and failures by kind and
cause (items and judgments). A failed or surprising row (an item error, a judgment error, a verdict other
than correct, judges that disagree) carries the prompts and replies behind it (`proctor.report.evidence`).
Long text is shortened for the table; all of it is escaped by the template.

A run whose result cannot be read typed — its results no longer fit the protocol's result model — still
shows its estimates: the stored results are read openly (`OpenResult`), as for a protocol not installed.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import BaseModel, ValidationError

from proctor.kit.record import Run
from proctor.kit.result import OpenResult, named_estimates
from proctor.report._env import render_template
from proctor.report.evidence import ItemEvidence, evidence
from proctor.store.record import ItemRecord, JudgmentRecord, RunRecord

MAX_ROWS = 50
MAX_CELL = 160
MAX_COLUMNS = 12


def _cell(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _item_tables(run: RunRecord) -> list[dict[str, Any]]:
    by_kind: dict[str, list[ItemRecord]] = {}
    for it in run.iter_items():
        by_kind.setdefault(it.kind, []).append(it)
    tables = []
    all_rows: list[dict[str, Any]] = []
    for kind, items in by_kind.items():
        fields: dict[str, None] = {}
        for it in items[:MAX_ROWS]:
            if isinstance(it.data, dict):
                fields.update(dict.fromkeys(it.data))
        columns = list(fields)[:MAX_COLUMNS]
        rows = [
            {
                "key": it.key,
                "status": it.status,
                "cause": it.error_cause,
                "cells": [_cell((it.data if isinstance(it.data, dict) else {}).get(c)) for c in columns],
                "evidence": None,
            }
            for it in items[:MAX_ROWS]
        ]
        tables.append({"kind": kind, "total": len(items), "columns": columns, "rows": rows})
        all_rows += rows
    _attach_evidence(run, all_rows)
    return tables


def _surprising(item_failed: bool, judgments: list[JudgmentRecord]) -> bool:
    verdicts = {j.verdict for j in judgments if j.verdict is not None}
    return item_failed or any(j.error for j in judgments) or bool(verdicts - {"correct"}) or len(verdicts) > 1


def _attach_evidence(run: RunRecord, rows: list[dict[str, Any]]) -> None:
    """The rows' failed or surprising items get their evidence, embedded for the first ones."""
    judged = run.judgments_of([r["key"] for r in rows])
    wanted = [r for r in rows if _surprising(r["status"] == "error", judged.get(r["key"], []))]
    found: dict[str, ItemEvidence] = evidence(run, [r["key"] for r in wanted])
    for r in wanted:
        r["evidence"] = found.get(r["key"])


def _failures(run: RunRecord) -> list[dict[str, Any]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    for it in run.iter_items(status="error"):
        counts[("item", it.kind, it.error_cause or "error")] += 1
    for j in run.judgments():
        if j.error:
            counts[("judgment", j.judge, j.error_cause or "error")] += 1
    return [
        {"what": what, "kind": kind, "cause": cause, "count": n}
        for (what, kind, cause), n in sorted(counts.items())
    ]


def _estimates(run: RunRecord, result: BaseModel | None) -> list[dict[str, Any]]:
    """The result's estimates by path; for results that do not fit the protocol's model (another version
    of it, or a protocol not installed here) the stored results read openly."""
    if result is None:
        try:
            result = OpenResult.model_validate(run.artifact_data("summary") or {})
        except ValidationError:
            return []
    return [{"name": name, **e.model_dump()} for name, e in named_estimates(result)]


def default_context(run: RunRecord, result: BaseModel | None) -> dict[str, Any]:
    """`result`: the run's typed result, or None when it could not be read typed."""
    return {
        "estimates": _estimates(run, result),
        "tables": _item_tables(run),
        "failures": _failures(run),
        "max_rows": MAX_ROWS,
    }


def render_default_section(run: Run) -> str:
    try:
        result = run.result
    except ValidationError:  # results written by another version of the protocol
        result = None
    return render_template("templates/default_section.html.j2", **default_context(run, result))
