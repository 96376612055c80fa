"""Report section of a suite: the knowledge-map heatmap, the topics, where members disagree, each topic's
table of member estimates, and each member's run, evidence and spend.

Reads the artifacts `suite` (the summary) and `suite_members` (run folders, usage with cache hits)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from proctor.protocols.suite.plots import mastery_heatmap
from proctor.report._env import render_template
from proctor.report.plots import safe_plot
from proctor.kit.record import Run
from proctor.store import RunStore


def _link(store: RunStore, run_dir: str) -> str:
    """The member's report, relative to the suite folder (both sit under the same runs folder)."""
    return Path(os.path.relpath(Path(run_dir) / "report.html", store.path.parent)).as_posix()


def render(run: Run) -> str:
    # Kit 2 transition: this section still reads the store directly; it is to read `run` (typed).
    return _render_store(RunStore(run.folder / "run.sqlite"))


def _render_store(store: RunStore) -> str:
    suite: dict[str, Any] | None = store.get_artifact("suite")
    runs: list[dict[str, Any]] = store.get_artifact("suite_members") or []
    if not suite:
        return render_template("suite/report.html.j2", suite=None)
    topics = suite["topics"]["topics"]
    candidates = list(dict.fromkeys(c["candidate"] for c in suite["map"]))
    cell = {(c["candidate"], c["topic_id"]): c for c in suite["map"]}
    member_names = [m["member"] for m in suite["members"] if m["in_map"]]
    heatmap = None
    if topics and candidates:
        heatmap = safe_plot(
            mastery_heatmap,
            [f"{t['topic_id']}: {t['name']}" for t in topics],
            candidates,
            [[cell[(c, t["topic_id"])]["combined"]["value"] for c in candidates] for t in topics],
            [[cell[(c, t["topic_id"])]["combined"]["n"] for c in candidates] for t in topics],
        )
    per_topic = [
        {
            "topic": t,
            "rows": [
                {
                    "candidate": c,
                    "combined": cell[(c, t["topic_id"])]["combined"],
                    "members": [cell[(c, t["topic_id"])]["members"].get(m) for m in member_names],
                }
                for c in candidates
            ],
            "disagreements": [d for d in suite["disagreements"] if d["topic_id"] == t["topic_id"]],
        }
        for t in topics
    ]
    by_member = {r["member"]: r for r in runs}
    members = [
        {**m, "run": by_member.get(m["member"]), "link": _link(store, by_member[m["member"]]["run_dir"])}
        if m["member"] in by_member
        else {**m, "run": None, "link": None}
        for m in suite["members"]
    ]
    usage_keys = (
        "calls",
        "cache_hits",
        "errors",
        "prompt_tokens",
        "completion_tokens",
        "cost_usd",
        "spent_usd",
    )
    totals = {k: sum((r["usage"].get(k) or 0) for r in runs) for k in usage_keys}
    names = {t["topic_id"]: t["name"] for t in topics}
    return render_template(
        "suite/report.html.j2",
        suite=suite,
        heatmap=heatmap,
        topics=topics,
        topic_names=names,
        member_names=member_names,
        per_topic=per_topic,
        members=members,
        totals=totals,
    )
