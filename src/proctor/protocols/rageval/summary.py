"""rageval's results: per system F1 (bootstrap interval) and EM (Wilson), by level, task and domain; the rank
table sorted by F1; the error taxonomy per system; deployment cost (tokens, cost, latency per question)
against F1 with the Pareto front; the systems marked not applicable, with the reason."""

from __future__ import annotations

from collections import Counter

from proctor.estimates import Estimate
from proctor.kit.context import RunContext
from proctor.protocols.rageval.answers import RagAnswer, System
from proctor.protocols.rageval.config import LEVELS, Config
from proctor.protocols.rageval.result import (
    NotApplicable,
    RagevalResult,
    RagSystem,
    Score,
    TaskCounts,
    TaskStats,
)
from proctor.protocols.rageval.tasks import RagTask
from proctor.protocols.rageval.taxonomy import CATEGORIES


def _f1(ctx: RunContext[Config], values: list[float]) -> Estimate:
    return Estimate.bootstrap(values, ctx.rng, bounds=(0.0, 1.0))


def _level_text(e: Estimate | None) -> str:
    return e.text(digits=2) if e is not None else "—"


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


def hotpotqa_breakdown(ctx: RunContext[Config], answers: list[RagAnswer]) -> dict[str, Score]:
    """HotpotQA answers grouped by setting (the domain) and HotpotQA level, then by setting and question
    type (bridge / comparison): F1 with a bootstrap interval, EM with a Wilson interval."""
    groups: dict[str, list[RagAnswer]] = {}
    hp = [a for a in answers if a.domain.startswith("hotpotqa")]
    for a in hp:
        if a.difficulty:
            groups.setdefault(f"{a.domain}/{a.difficulty}", []).append(a)
    for a in hp:
        groups.setdefault(f"{a.domain}/{a.task.split('/', 1)[-1]}", []).append(a)
    order = {"easy": 0, "medium": 1, "hard": 2}
    out: dict[str, Score] = {}
    for key in sorted(groups, key=lambda k: (k.rsplit("/", 1)[0], order.get(k.rsplit("/", 1)[1], 3), k)):
        g = groups[key]
        out[key] = Score(
            n=len(g),
            f1=_f1(ctx, [a.f1 for a in g]),
            em=Estimate.proportion(int(sum(a.em for a in g)), len(g)),
        )
    return out


def _system(ctx: RunContext[Config], s: System, mine: list[RagAnswer], failed: dict[str, int]) -> RagSystem:
    n = len(mine)

    def group(key: str) -> dict[str, Estimate]:
        return {
            k: _f1(ctx, [a.f1 for a in mine if getattr(a, key) == k])
            for k in sorted({getattr(a, key) for a in mine})
        }

    cats = Counter(a.category for a in mine)
    f1 = _f1(ctx, [a.f1 for a in mine])  # the bootstrap draws from the run's generator: keep this order
    return RagSystem(
        workflow=s.workflow,
        llm=s.llm,
        answered=n,
        failed=failed,
        f1=f1,
        em=Estimate.proportion(int(sum(a.em for a in mine)), n),
        equivalent=Estimate.proportion(sum(a.equivalent is not None for a in mine), n),
        by_level=group("level"),
        by_task=group("task"),
        by_domain=group("domain"),
        by_hotpotqa=hotpotqa_breakdown(ctx, mine),
        categories={c: cats.get(c, 0) for c in CATEGORIES},
        stops=dict(sorted(Counter(a.stop for a in mine).items())),
        interruptions=dict(
            sorted(Counter(a.interruption.reason for a in mine if a.interruption is not None).items())
        ),
        action_formats=dict(sorted(Counter(a.action_format for a in mine if a.action_format).items())),
        parse_error_steps=sum(a.parse_errors for a in mine),
        mean_steps=round(sum(a.steps for a in mine) / n, 3) if n else None,
        mean_tokens=round(sum(a.prompt_tokens + a.completion_tokens for a in mine) / n, 1) if n else None,
        mean_cost_usd=round(sum(a.cost_usd for a in mine) / n, 8) if n else None,
        mean_latency_s=round(sum(a.latency_s for a in mine) / n, 3) if n else None,
    )


def summarise(
    ctx: RunContext[Config],
    tasks: list[RagTask],
    systems: list[System],
    answers: list[RagAnswer],
    failed: dict[str, dict[str, int]],
    stats: TaskStats,
) -> RagevalResult:
    per: dict[str, RagSystem | NotApplicable] = {}
    scored: dict[str, RagSystem] = {}
    for s in systems:
        if s.not_applicable is not None:
            per[s.name] = NotApplicable(workflow=s.workflow, llm=s.llm, not_applicable=s.not_applicable)
            continue
        res = _system(ctx, s, [a for a in answers if a.system == s.name], failed.get(s.name, {}))
        per[s.name] = scored[s.name] = res
    ranked = sorted(
        (name for name, r in scored.items() if r.f1.value is not None),
        key=lambda name: (-(scored[name].f1.value or 0.0), name),
    )
    points = {name: (scored[name].mean_tokens or 0.0, scored[name].f1.value or 0.0) for name in ranked}
    table = [
        {
            "rank": str(i + 1),
            "system": name,
            "F1": scored[name].f1.text(),
            "EM": scored[name].em.text(),
            "equivalent": scored[name].equivalent.text(),
            **{lv: _level_text(scored[name].by_level.get(lv)) for lv in ctx.settings.levels},
            "tokens/q": f"{scored[name].mean_tokens:.0f}",
            "actions": ", ".join(scored[name].action_formats) or "—",
        }
        for i, name in enumerate(ranked)
    ]
    table += [
        {"rank": "n/a", "system": name, "F1": "not applicable", "EM": r.not_applicable[:60]}
        for name, r in per.items()
        if isinstance(r, NotApplicable)
    ]
    counts = TaskCounts(
        total=len(tasks),
        by_level=dict(sorted(Counter(t.level for t in tasks).items())),
        by_domain=dict(sorted(Counter(t.domain for t in tasks).items())),
        by_task=dict(sorted(Counter(t.task for t in tasks).items())),
        **dict(stats),
    )
    return RagevalResult(
        tasks=counts,
        systems=per,
        ranking=ranked,
        pareto=pareto(points),
        levels={lv: LEVELS[lv] for lv in ctx.settings.levels},
        categories=CATEGORIES,
        table=table,
        warnings=["no task was generated; see the task statistics in the report"] if not tasks else [],
    )
