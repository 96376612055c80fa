"""Run a suite: each member as an ordinary run (the runner's `run_config`: own folder, store and report,
the suite's call cache), then the topic model, the knowledge map, and the suite's own folder.

Suite folder (`runs/<name>-<config hash>-<timestamp>/`): `run.sqlite` (run record, items `suite_topic`,
metrics `mastery.combined` per `candidate @ topic`, artifacts `suite` and `suite_members`),
`results.json` (identical when re-run from the cache: no run folders, no cache counts) and `report.html`.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from proctor import __version__
from proctor.config import RunConfig
from proctor.estimates import Estimate
from proctor.protocols.suite.config import Config
from proctor.protocols.suite.evidence import MemberEvidence, member_evidence
from proctor.protocols.suite.knowledge_map import KnowledgeMap, build_map
from proctor.protocols.suite.members import member_configs
from proctor.protocols.suite.topics import TopicModel, build_topics
from proctor.store import RunStore

log = logging.getLogger("proctor")
USAGE_FIELDS = ("calls", "errors", "prompt_tokens", "completion_tokens", "cost_usd")


def run_suite(cfg: RunConfig, *, out: Path, resume: bool = False, show_progress: bool = True) -> Any:
    from proctor.runner import RunResult, latest_run_dir, run_config, run_dir_for

    settings = cfg.settings
    assert isinstance(settings, Config)
    configs = member_configs(cfg)  # every member's config mistakes before anything runs
    members: list[dict[str, Any]] = []
    evidence: dict[str, MemberEvidence] = {}
    run_dirs: dict[str, Path] = {}
    for m, mcfg in zip(settings.members, configs, strict=True):
        if m.seed_from is not None:  # the earlier member's run folder feeds this one (`from_run`)
            seeded = mcfg.settings.model_copy(update={"from_run": str(run_dirs[m.seed_from])})  # type: ignore[union-attr]
            mcfg = mcfg.model_copy(update={"settings": seeded})
        again = resume and latest_run_dir(mcfg, out) is not None
        log.info("suite member %s (%s)%s", m.label, m.protocol, " resumed" if again else "")
        result = run_config(mcfg, out=out, resume=again, show_progress=show_progress)
        run_dirs[m.label] = result.run_dir
        store = RunStore(result.run_dir / "run.sqlite")
        try:
            evidence[m.label] = member_evidence(store, mcfg)
            totals = store.call_totals()
        finally:
            store.close()
        members.append(
            {
                "member": m.label,
                "protocol": m.protocol,
                "run_dir": str(result.run_dir),
                "usage": {f: _total(totals, f) for f in (*USAGE_FIELDS, "cache_hits", "spent_usd")},
                "headline": result.summary.get("table") or [],
                "warnings": result.summary.get("warnings") or [],
            }
        )
    topics = _topics(cfg, settings)
    candidates = [c.name for c in cfg.candidates]
    kmap = build_map(topics, candidates, evidence)
    summary = _summary(cfg, topics, kmap, evidence, members)
    suite_dir = latest_run_dir(cfg, out) if resume else None
    suite_dir = suite_dir or run_dir_for(cfg, out, resume=False)
    suite_dir.mkdir(parents=True, exist_ok=True)
    _write(cfg, suite_dir, summary, topics, kmap, members)
    return RunResult(suite_dir, summary)


def _total(rows: list[dict[str, Any]], name: str) -> float:
    value = sum((r[name] or 0) for r in rows)
    return round(value, 6) if isinstance(value, float) else value


def _topics(cfg: RunConfig, settings: Config) -> TopicModel:
    from proctor.embeddings import get_embedder
    from proctor.scale import load_run_corpus

    assert cfg.embedder is not None
    embedder = get_embedder(cfg.embedder, cache_dir=cfg.cache_dir)
    return build_topics(
        load_run_corpus(cfg),
        embedder,
        k=settings.topics.k,
        n_terms=settings.topics.top_terms,
        seed=cfg.seed,
    )


def _summary(
    cfg: RunConfig,
    topics: TopicModel,
    kmap: KnowledgeMap,
    evidence: dict[str, MemberEvidence],
    members: list[dict[str, Any]],
) -> dict[str, Any]:
    names = {t.topic_id: t.name for t in topics.topics}
    usage = [{"member": m["member"], **{f: m["usage"][f] for f in USAGE_FIELDS}} for m in members]
    summary: dict[str, Any] = {
        "protocol": "suite",
        "config_hash": cfg.config_hash(),
        "topics": topics.model_dump(mode="json"),
        "members": [
            {
                "member": m["member"],
                "protocol": m["protocol"],
                "measure": evidence[m["member"]].measure,
                "in_map": evidence[m["member"]].supported,
                "linkage": kmap.linkage[m["member"]].model_dump(),
                "not_mapped": evidence[m["member"]].not_mapped,
            }
            for m in members
        ],
        "map": [c.model_dump(mode="json") for c in kmap.cells],
        "disagreements": [d.model_dump(mode="json") for d in kmap.disagreements],
        "usage": {
            "members": usage,
            "total": {f: _total(usage, f) for f in USAGE_FIELDS},
        },
    }
    table = []
    for t in topics.topics:
        row = {"topic": f"{t.topic_id}: {t.name}"}
        for c in kmap.cells:
            if c.topic_id == t.topic_id:
                row[c.candidate] = c.combined.text()
        table.append(row)
    summary["table"] = table
    warnings = [
        f"{d.candidate} on {d.topic_id} ({names[d.topic_id]}): {d.lower} {d.lower_estimate.text()} is below "
        f"{d.higher} {d.higher_estimate.text()} beyond their 95% intervals"
        for d in kmap.disagreements
    ]
    warnings += [f"member {m['member']}: {w}" for m in members for w in m["warnings"]]
    if warnings:
        summary["warnings"] = warnings
    return summary


def _write(
    cfg: RunConfig,
    suite_dir: Path,
    summary: dict[str, Any],
    topics: TopicModel,
    kmap: KnowledgeMap,
    members: list[dict[str, Any]],
) -> None:
    from proctor.report import write_report

    store = RunStore(suite_dir / "run.sqlite")
    try:
        store.start_run(suite_dir.name, "suite", cfg.model_dump(mode="json"), cfg.config_hash(), __version__)
        for t in topics.topics:
            store.put_item(t.topic_id, "suite_topic", t.model_dump(mode="json"))
        names = {t.topic_id: t.name for t in topics.topics}
        for c in kmap.cells:
            e: Estimate = c.combined
            subject = f"{c.candidate} @ {c.topic_id} ({names[c.topic_id]})"
            store.put_metric("mastery.combined", subject, e.value, lo=e.lo, hi=e.hi, n=e.n)
        store.put_artifact("suite", summary)
        store.put_artifact("suite_members", members)
        store.put_artifact("summary", summary)
        (suite_dir / "results.json").write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
        store.finish_run(suite_dir.name)
        from proctor.kit.record import load_run

        with load_run(suite_dir) as run:
            write_report(run, suite_dir / "report.html")
        log.info("suite %s finished", suite_dir.name)
    finally:
        store.close()
