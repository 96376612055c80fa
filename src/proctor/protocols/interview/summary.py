"""The interview's results: per variant and candidate the JudgeAgent score, base accuracy, extension
accuracy by difficulty, the tier trajectory per batch, the validation rates, and what went unscored; the
ablation table across variants; the artifact the report reads."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any

from proctor.estimates import Estimate
from proctor.graph import ContextGraph, GraphBuild
from proctor.kit.context import RunContext
from proctor.protocols.interview.base import BaseQuestion
from proctor.protocols.interview.config import VARIANTS, Config
from proctor.protocols.interview.difficulty import CORRECT, WRONG, score
from proctor.protocols.interview.extension import Interview
from proctor.protocols.interview.feedback import Feedback
from proctor.protocols.interview.paths import KnowledgeText
from proctor.protocols.interview.validation import validation_rates
from proctor.kit.shared.question_file import DIFFICULTIES

SNIPPET = 320  # characters of each path chunk shown in the report


@dataclass
class VariantResult:
    variant: str
    interviews: dict[tuple[str, int], Interview]
    feedback: dict[tuple[str, int], Feedback]
    after: dict[tuple[str, str], bool | None]  # (candidate, base question id) -> correct after feedback
    stats: Counter[str]
    knowledge: dict[str, KnowledgeText]


def _candidate(ctx: RunContext[Config], res: VariantResult, name: str) -> dict[str, Any]:
    mine = [iv for (c, _), iv in sorted(res.interviews.items()) if c == name]
    tested = [t for iv in mine for t in iv.tested]
    graded = [t for t in tested if t.correct is not None]
    base = [t for t in tested if t.stage == "base"]
    ext = [t for t in tested if t.stage == "extension"]
    pairs = [
        (bool(t.correct), bool(res.after[(name, t.question_id)]))
        for t in base
        if t.correct is not None and res.after.get((name, t.question_id)) is not None
    ]
    rates = validation_rates(pairs)
    by_tier = {
        d: Estimate.proportion(sum(1 for t in ext if t.difficulty == d and t.correct), n).model_dump()
        for d in DIFFICULTIES
        if (n := sum(1 for t in ext if t.difficulty == d and t.correct is not None))
    }
    return {
        "score": Estimate.mean(
            [score(t.difficulty, bool(t.correct)) for t in graded], bounds=(WRONG["hard"], CORRECT["hard"])
        ).model_dump(),
        "base_accuracy": Estimate.proportion(
            sum(1 for t in base if t.correct), sum(1 for t in base if t.correct is not None)
        ).model_dump(),
        "extension_accuracy": Estimate.proportion(
            sum(1 for t in ext if t.correct), sum(1 for t in ext if t.correct is not None)
        ).model_dump(),
        "extension_by_difficulty": by_tier,
        "extension_questions": len(ext),
        "unscored": {
            "base": sum(1 for t in base if t.correct is None),
            "extension": sum(1 for t in ext if t.correct is None),
            "validation": sum(
                1
                for t in base
                if (name, t.question_id) in res.after and res.after[(name, t.question_id)] is None
            ),
        },
        "validation": rates.model_dump(),
        "trajectories": {str(iv.batch): list(iv.tiers) for iv in mine},
        "batches_without_feedback": sum(1 for iv in mine if (name, iv.batch) not in res.feedback),
    }


def summarise(
    ctx: RunContext[Config],
    questions: list[BaseQuestion],
    base_stats: dict[str, Any],
    results: dict[str, VariantResult],
    graph: ContextGraph | None,
    graph_info: GraphBuild,
) -> dict[str, Any]:
    cfg = ctx.settings
    names = [c.name for c in ctx.config.candidates]
    variants: dict[str, Any] = {}
    table: list[dict[str, str]] = []
    for variant, res in results.items():
        per = {n: _candidate(ctx, res, n) for n in names}
        variants[variant] = {"description": VARIANTS[variant], "stats": dict(res.stats), "candidates": per}
        for n, r in per.items():
            subject = n if len(results) == 1 else f"{n} [{variant}]"
            v = r["validation"]
            for metric in ("acc1", "acc2", "cr", "cte"):
                e = Estimate.model_validate(v[metric])
                ctx.store.put_metric(f"interview.{metric}", subject, e.value, lo=e.lo, hi=e.hi, n=e.n)
            s = Estimate.model_validate(r["score"])
            ctx.store.put_metric("interview.score", subject, s.value, lo=s.lo, hi=s.hi, n=s.n)
            table.append(
                {
                    "candidate": n,
                    "variant": variant,
                    "score": s.text(),
                    "ACC1": Estimate.model_validate(v["acc1"]).text(),
                    "ACC2": Estimate.model_validate(v["acc2"]).text(),
                    "CR": Estimate.model_validate(v["cr"]).text(),
                    "CtE": Estimate.model_validate(v["cte"]).text(),
                }
            )
    warnings = []
    unscored = sum(
        r["unscored"]["base"] + r["unscored"]["extension"] + r["unscored"]["validation"]
        for v in variants.values()
        for r in v["candidates"].values()
    )
    if unscored:
        warnings.append(f"{unscored} answers could not be graded (failures recorded on their items)")
    summary: dict[str, Any] = {
        "protocol": "interview",
        "config_hash": ctx.config.config_hash(),
        "base_questions": base_stats | {"used": len(questions), "batches": len({q.batch for q in questions})},
        "graph": None if graph is None else {**graph_info.model_dump(), **graph.stats().model_dump()},
        "variants": variants,
        "table": table,
    }
    if warnings:
        summary["warnings"] = warnings
    ctx.store.put_artifact(
        "interview",
        {
            "questions": [q.model_dump(mode="json") for q in questions],
            "examples": _examples(results, cfg.examples, graph),
            "feedback": [
                fb.model_dump(mode="json")
                for res in results.values()
                for _, fb in sorted(res.feedback.items())
            ],
            "rounds": {
                variant: {
                    f"{c}|{b}": {"tiers": iv.tiers, "rounds": iv.rounds}
                    for (c, b), iv in sorted(res.interviews.items())
                }
                for variant, res in results.items()
            },
        },
    )
    return summary


def _examples(results: dict[str, VariantResult], n: int, graph: ContextGraph | None) -> list[dict[str, Any]]:
    """Up to n knowledge texts (paths first) with the questions written from them."""
    seen: dict[str, dict[str, Any]] = {}
    for res in results.values():
        for iv in res.interviews.values():
            for info in iv.rounds:
                know = res.knowledge.get(info["knowledge_key"])
                if know is None:
                    continue
                ex = seen.setdefault(
                    info["knowledge_key"],
                    {
                        "batch": know.batch,
                        "round": know.round,
                        "source": know.source,
                        "seed_name": know.seed_name,
                        "stopped": know.stopped,
                        "steps": [
                            {
                                "entity": s.entity,
                                "chunk_id": s.chunk_id,
                                "candidates": [
                                    graph.entities[e].name
                                    for e in s.drawn_from
                                    if graph is not None and e in graph.entities
                                ],
                            }
                            for s in know.steps
                        ],
                        "snippets": [t[:SNIPPET] for t in know.text.split("\n\n")],
                        "questions": {},
                    },
                )
                for q in info.get("generated", []):
                    ex["questions"].setdefault(q["question"], {**q, "tier": info["tier"]})
    ordered = sorted(seen.values(), key=lambda e: (e["source"] != "path", e["batch"], e["round"]))
    return [{**e, "questions": list(e["questions"].values())} for e in ordered[:n]]
