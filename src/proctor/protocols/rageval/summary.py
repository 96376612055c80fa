"""rageval's results: per system F1 (bootstrap interval) and EM (Wilson), by level, task and domain; the rank
table sorted by F1; the error taxonomy per system; deployment cost (tokens, cost, latency per question)
against F1 with the Pareto front; the systems marked not applicable, with the reason."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from proctor.estimates import Estimate
from proctor.kit.context import RunContext
from proctor.protocols.rageval.config import LEVELS, Config
from proctor.protocols.rageval.taxonomy import CATEGORIES

if TYPE_CHECKING:
    from proctor.protocols.rageval.run import RagAnswer, System
    from proctor.protocols.rageval.tasks import RagTask, TaskStats


def _f1(ctx: RunContext[Config], values: list[float]) -> dict[str, Any]:
    return Estimate.bootstrap(values, ctx.rng, bounds=(0.0, 1.0)).model_dump()


def _level_text(e: dict[str, Any] | None) -> str:
    return Estimate.model_validate(e).text(digits=2) if e else "—"


def pareto(points: dict[str, tuple[float, float]]) -> list[str]:
    """Systems no other system beats on both cost (lower) and F1 (higher), cheapest first."""
    front = [
        name
        for name, (c, f) in points.items()
        if not any(
            (c2 <= c and f2 >= f) and (c2 < c or f2 > f) for n2, (c2, f2) in points.items() if n2 != name
        )
    ]
    return sorted(front, key=lambda n: points[n])


def summarise(
    ctx: RunContext[Config],
    tasks: list[RagTask],
    systems: list[System],
    answers: list[RagAnswer],
    failed: dict[str, dict[str, int]],
    stats: TaskStats,
) -> dict[str, Any]:
    per: dict[str, Any] = {}
    for s in systems:
        if s.not_applicable is not None:
            per[s.name] = {"workflow": s.workflow, "llm": s.llm, "not_applicable": s.not_applicable}
            continue
        mine = [a for a in answers if a.system == s.name]
        n = len(mine)

        def group(key: str, mine: list[RagAnswer] = mine) -> dict[str, Any]:
            return {
                k: _f1(ctx, [a.f1 for a in mine if getattr(a, key) == k])
                for k in sorted({getattr(a, key) for a in mine})
            }

        cats = Counter(a.category for a in mine)
        res = {
            "workflow": s.workflow,
            "llm": s.llm,
            "not_applicable": None,
            "answered": n,
            "failed": failed.get(s.name, {}),
            "f1": _f1(ctx, [a.f1 for a in mine]),
            "em": Estimate.proportion(int(sum(a.em for a in mine)), n).model_dump(),
            "equivalent": Estimate.proportion(sum(a.equivalent is not None for a in mine), n).model_dump(),
            "by_level": group("level"),
            "by_task": group("task"),
            "by_domain": group("domain"),
            "categories": {c: cats.get(c, 0) for c in CATEGORIES},
            "stops": dict(sorted(Counter(a.stop for a in mine).items())),
            "mean_steps": round(sum(a.steps for a in mine) / n, 3) if n else None,
            "mean_tokens": round(sum(a.prompt_tokens + a.completion_tokens for a in mine) / n, 1)
            if n
            else None,
            "mean_cost_usd": round(sum(a.cost_usd for a in mine) / n, 8) if n else None,
            "mean_latency_s": round(sum(a.latency_s for a in mine) / n, 3) if n else None,
        }
        f1 = Estimate.model_validate(res["f1"])
        ctx.store.put_metric("rageval.f1", s.name, f1.value, lo=f1.lo, hi=f1.hi, n=f1.n)
        em = Estimate.model_validate(res["em"])
        ctx.store.put_metric("rageval.em", s.name, em.value, lo=em.lo, hi=em.hi, n=em.n)
        eq = Estimate.model_validate(res["equivalent"])
        ctx.store.put_metric("rageval.equivalent", s.name, eq.value, lo=eq.lo, hi=eq.hi, n=eq.n)
        per[s.name] = res
    ranked = sorted(
        (name for name, r in per.items() if r["not_applicable"] is None and r["f1"]["value"] is not None),
        key=lambda name: (-per[name]["f1"]["value"], name),
    )
    points = {name: (per[name]["mean_tokens"] or 0.0, per[name]["f1"]["value"]) for name in ranked}
    table = [
        {
            "rank": str(i + 1),
            "system": name,
            "F1": Estimate.model_validate(per[name]["f1"]).text(),
            "EM": Estimate.model_validate(per[name]["em"]).text(),
            "equivalent": Estimate.model_validate(per[name]["equivalent"]).text(),
            **{lv: _level_text(per[name]["by_level"].get(lv)) for lv in ctx.settings.levels},
            "tokens/q": f"{per[name]['mean_tokens']:.0f}",
        }
        for i, name in enumerate(ranked)
    ]
    table += [
        {"rank": "n/a", "system": name, "F1": "not applicable", "EM": r["not_applicable"][:60]}
        for name, r in per.items()
        if r["not_applicable"] is not None
    ]
    summary: dict[str, Any] = {
        "protocol": "rageval",
        "config_hash": ctx.config.config_hash(),
        "tasks": {
            "total": len(tasks),
            "by_level": dict(sorted(Counter(t.level for t in tasks).items())),
            "by_domain": dict(sorted(Counter(t.domain for t in tasks).items())),
            "by_task": dict(sorted(Counter(t.task for t in tasks).items())),
            **stats.model_dump(),
        },
        "systems": per,
        "ranking": ranked,
        "pareto": pareto(points),
        "levels": {lv: LEVELS[lv] for lv in ctx.settings.levels},
        "categories": CATEGORIES,
        "table": table,
    }
    if not tasks:
        summary["warnings"] = ["no task was generated; see the task statistics in the report"]
    return summary
