"""The default report section: what any protocol's run shows before the protocol writes report code.

It reads the store only: headline estimates (every `{value, lo, hi, n}` in the run's summary, with its
path), one table per item kind with the payload's fields as columns, and failures by kind and cause
(items and judgments). Long text is shortened for the table; all of it is escaped by the template.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from proctor.report._env import render_template
from proctor.store import RunStore

MAX_ROWS = 50
MAX_CELL = 160
MAX_COLUMNS = 12


def _estimates(node: Any, path: str = "") -> list[dict[str, Any]]:
    """Every estimate-shaped mapping in the summary, depth first, named by its path."""
    if isinstance(node, dict):
        if {"value", "lo", "hi", "n"} <= set(node):
            return [{"name": path or "(summary)", **node}]
        out: list[dict[str, Any]] = []
        for k, v in node.items():
            if k in ("usage", "table"):
                continue
            out.extend(_estimates(v, f"{path}.{k}" if path else str(k)))
        return out
    return []


def _cell(v: Any) -> str:
    text = v if isinstance(v, str) else json.dumps(v, ensure_ascii=False, default=str)
    return text if len(text) <= MAX_CELL else text[: MAX_CELL - 1] + "…"


def _item_tables(store: RunStore) -> list[dict[str, Any]]:
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for it in store.items():
        by_kind.setdefault(it["kind"], []).append(it)
    tables = []
    for kind, items in by_kind.items():
        fields: dict[str, None] = {}
        for it in items[:MAX_ROWS]:
            if isinstance(it["data"], dict):
                fields.update(dict.fromkeys(it["data"]))
        columns = list(fields)[:MAX_COLUMNS]
        rows = [
            {
                "key": it["key"],
                "status": it["status"],
                "cause": it["error_cause"],
                "cells": [_cell((it["data"] or {}).get(c)) for c in columns],
            }
            for it in items[:MAX_ROWS]
        ]
        tables.append({"kind": kind, "total": len(items), "columns": columns, "rows": rows})
    return tables


def _failures(store: RunStore) -> list[dict[str, Any]]:
    counts: Counter[tuple[str, str, str]] = Counter()
    for it in store.items(status="error"):
        counts[("item", it["kind"], it["error_cause"] or "error")] += 1
    for j in store.judgments():
        if j["error"]:
            counts[("judgment", j["judge"], j["error_cause"] or "error")] += 1
    return [
        {"what": what, "kind": kind, "cause": cause, "count": n}
        for (what, kind, cause), n in sorted(counts.items())
    ]


def default_context(store: RunStore) -> dict[str, Any]:
    summary = store.get_artifact("summary") or {}
    return {
        "estimates": _estimates(summary),
        "tables": _item_tables(store),
        "failures": _failures(store),
        "max_rows": MAX_ROWS,
    }


def render_default_section(store: RunStore) -> str:
    return render_template("templates/default_section.html.j2", **default_context(store))
