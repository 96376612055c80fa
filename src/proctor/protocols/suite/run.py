"""Run a suite: each member as an ordinary run (the runner's `run_config`: own folder, store and report,
the suite's call cache), read back through `load_run`; then the topic model, the knowledge map, and the
suite's own folder, written by the kit from the suite's result (`proctor.runner.record_composed_run`).

Suite folder (`runs/<name>-<config hash>-<timestamp>/`): `run.sqlite` (run record, metrics
`mastery.combined` per `candidate @ topic (name)`, artifact `suite_members`), `results.json` (identical
when re-run from the cache: no run folders, no cache counts) and `report.html`.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from proctor.config import RunConfig
from proctor.kit.record import Run, load_run
from proctor.protocols.suite.config import Config
from proctor.protocols.suite.evidence import MemberEvidence, member_evidence
from proctor.protocols.suite.knowledge_map import KnowledgeMap, build_map
from proctor.protocols.suite.members import check_members
from proctor.protocols.suite.result import (
    MemberEntry,
    MemberRun,
    MemberRuns,
    MemberSpend,
    MemberUsage,
    Spend,
    SuiteResult,
    SuiteUsage,
)
from proctor.protocols.suite.topics import TopicModel, build_topics

if TYPE_CHECKING:
    from proctor.runner import RunResult

log = logging.getLogger("proctor")


def run_suite(cfg: RunConfig, *, out: Path, resume: bool = False, show_progress: bool = True) -> RunResult:
    from proctor.runner import latest_run_dir, record_composed_run, run_config, run_dir_for

    settings = cfg.settings
    assert isinstance(settings, Config)
    configs = check_members(cfg)  # every member's mistakes (config, inputs) before anything runs
    runs: list[MemberRun] = []
    evidence: dict[str, MemberEvidence] = {}
    run_dirs: dict[str, Path] = {}
    for m, mcfg in zip(settings.members, configs, strict=True):
        if m.seed_from is not None:  # the earlier member's run folder feeds this one (`from_run`)
            seeded = mcfg.settings.model_copy(update={"from_run": str(run_dirs[m.seed_from])})  # type: ignore[union-attr]
            mcfg = mcfg.model_copy(update={"settings": seeded})
        again = resume and latest_run_dir(mcfg, out) is not None
        log.info("suite member %s (%s)%s", m.label, m.protocol, " resumed" if again else "")
        done = run_config(mcfg, out=out, resume=again, show_progress=show_progress)
        run_dirs[m.label] = done.run_dir
        with load_run(done.run_dir) as run:
            evidence[m.label] = member_evidence(run)
            runs.append(_member_run(m.label, run))
    topics = _topics(cfg, settings)
    kmap = build_map(topics, [c.name for c in cfg.candidates], evidence)
    result = _result(topics, kmap, evidence, runs)
    suite_dir = latest_run_dir(cfg, out) if resume else None
    suite_dir = suite_dir or run_dir_for(cfg, out, resume=False)
    recorded = record_composed_run(cfg, suite_dir, result)
    log.info("suite %s finished", suite_dir.name)
    return recorded


def _member_run(label: str, run: Run) -> MemberRun:
    """A member's folder, its calls (nominal and spent cost), and its headline table and warnings."""
    calls = run.calls()
    usage = MemberUsage(
        calls=len(calls),
        cache_hits=sum(1 for c in calls if c.cached),
        errors=sum(1 for c in calls if c.error is not None),
        prompt_tokens=sum(c.prompt_tokens or 0 for c in calls),
        completion_tokens=sum(c.completion_tokens or 0 for c in calls),
        cost_usd=round(sum(c.cost_usd or 0.0 for c in calls), 6),
        spent_usd=round(sum(c.cost_usd or 0.0 for c in calls if not c.cached), 6),
    )
    result = run.result
    return MemberRun(
        member=label,
        protocol=run.protocol,
        run_dir=str(run.folder),
        usage=usage,
        headline=result.table if result is not None else [],
        warnings=result.warnings if result is not None else [],
    )


def _topics(cfg: RunConfig, settings: Config) -> TopicModel:
    from proctor.scale import load_run_corpus

    ec = cfg.embedder_config()
    assert ec is not None
    embedder = ec.build(cache_dir=cfg.cache_dir)
    return build_topics(
        load_run_corpus(cfg),
        embedder,
        k=settings.topics.k,
        n_terms=settings.topics.top_terms,
        seed=cfg.seed,
    )


def _result(
    topics: TopicModel,
    kmap: KnowledgeMap,
    evidence: dict[str, MemberEvidence],
    runs: list[MemberRun],
) -> SuiteResult:
    names = {t.topic_id: t.name for t in topics.topics}
    nominal = set(Spend.model_fields)  # results.json leaves out cache hits and spent cost
    spend = [MemberSpend(member=r.member, **r.usage.model_dump(include=nominal)) for r in runs]
    total = Spend(
        calls=sum(s.calls for s in spend),
        errors=sum(s.errors for s in spend),
        prompt_tokens=sum(s.prompt_tokens for s in spend),
        completion_tokens=sum(s.completion_tokens for s in spend),
        cost_usd=round(sum(s.cost_usd for s in spend), 6),
    )
    table = []
    for t in topics.topics:
        row = {"topic": f"{t.topic_id}: {t.name}"}
        for c in kmap.cells:
            if c.topic_id == t.topic_id:
                row[c.candidate] = c.combined.text()
        table.append(row)
    warnings = [
        f"{d.candidate} on {d.topic_id} ({names[d.topic_id]}): {d.lower} {d.lower_estimate.text()} is below "
        f"{d.higher} {d.higher_estimate.text()} beyond their 95% intervals"
        for d in kmap.disagreements
    ]
    warnings += [f"member {r.member}: {w}" for r in runs for w in r.warnings]
    return SuiteResult(
        topics=topics,
        members=[
            MemberEntry(
                member=r.member,
                protocol=r.protocol,
                measure=evidence[r.member].measure,
                in_map=evidence[r.member].supported,
                linkage=kmap.linkage[r.member],
                not_mapped=evidence[r.member].not_mapped,
            )
            for r in runs
        ],
        map=kmap.cells,
        disagreements=kmap.disagreements,
        member_usage=SuiteUsage(members=spend, total=total),
        runs=MemberRuns(runs=runs),
        table=table,
        warnings=warnings,
    )
