"""Report section of a suite: the knowledge-map heatmap, the topics, where members disagree, each topic's
table of member estimates, and each member's run, evidence and spend.

Reads the suite's result (`run.result`: topics, map, disagreements, members) and its artifact
`suite_members` (run folders, usage with cache hits)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from proctor.estimates import Estimate
from proctor.kit.record import Run
from proctor.protocols.suite.knowledge_map import Disagreement
from proctor.protocols.suite.plots import mastery_heatmap
from proctor.protocols.suite.result import MemberEntry, MemberRun, MemberRuns, MemberUsage, SuiteResult
from proctor.protocols.suite.topics import Topic
from proctor.report._env import render_template
from proctor.report.plots import safe_plot


@dataclass(frozen=True)
class _Row:
    candidate: str
    combined: Estimate
    members: list[Estimate | None]


@dataclass(frozen=True)
class _TopicTable:
    topic: Topic
    rows: list[_Row]
    disagreements: list[Disagreement]


@dataclass(frozen=True)
class _Member:
    entry: MemberEntry
    run: MemberRun | None
    link: str | None


def _link(suite_dir: Path, run_dir: str) -> str:
    """The member's report, relative to the suite folder (both sit under the same runs folder)."""
    return Path(os.path.relpath(Path(run_dir) / "report.html", suite_dir)).as_posix()


def render(run: Run) -> str:
    suite = run.result
    if not isinstance(suite, SuiteResult):
        return render_template("suite/report.html.j2", suite=None)
    runs = (run.artifact("suite_members", MemberRuns) or MemberRuns()).by_member()
    topics = suite.topics.topics
    candidates = suite.candidates()
    member_names = [m.member for m in suite.members if m.in_map]
    heatmap = None
    if topics and candidates:
        cells = [[suite.cell(c, t.topic_id).combined for c in candidates] for t in topics]
        heatmap = safe_plot(
            mastery_heatmap,
            [f"{t.topic_id}: {t.name}" for t in topics],
            candidates,
            [[e.value for e in row] for row in cells],
            [[e.n for e in row] for row in cells],
        )
    per_topic = [
        _TopicTable(
            topic=t,
            rows=[
                _Row(
                    candidate=c,
                    combined=(cell := suite.cell(c, t.topic_id)).combined,
                    members=[cell.members.get(m) for m in member_names],
                )
                for c in candidates
            ],
            disagreements=[d for d in suite.disagreements if d.topic_id == t.topic_id],
        )
        for t in topics
    ]
    members = [
        _Member(
            m, runs.get(m.member), _link(run.folder, runs[m.member].run_dir) if m.member in runs else None
        )
        for m in suite.members
    ]
    totals = MemberUsage(
        calls=sum(r.usage.calls for r in runs.values()),
        cache_hits=sum(r.usage.cache_hits for r in runs.values()),
        errors=sum(r.usage.errors for r in runs.values()),
        prompt_tokens=sum(r.usage.prompt_tokens for r in runs.values()),
        completion_tokens=sum(r.usage.completion_tokens for r in runs.values()),
        cost_usd=sum(r.usage.cost_usd for r in runs.values()),
        spent_usd=sum(r.usage.spent_usd for r in runs.values()),
    )
    return render_template(
        "suite/report.html.j2",
        suite=suite,
        heatmap=heatmap,
        topics=topics,
        topic_names=suite.topic_names(),
        member_names=member_names,
        per_topic=per_topic,
        members=members,
        totals=totals,
    )
