"""The reckon protocol: units -> dedup -> clusters -> questions -> answers -> per-unit judging, in rounds;
then the per-unit baselines on the same units, cost accounting, metrics and meta-evaluation."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from proctor.clustering import map_2d
from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.kit.context import RunContext
from proctor.protocols.reckon.baselines import JW_OR, JW_R, BaselineOutcome, run_baselines
from proctor.protocols.reckon.candidates import build_candidates
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.cost import cost_summary
from proctor.protocols.reckon.judging import UnitVerdict
from proctor.protocols.reckon.metaeval import item_id, load_labels, meta_evaluate, resolve_labels
from proctor.protocols.reckon.rounds import STOP_REASONS, RoundsResult, run_rounds
from proctor.protocols.reckon.units import (
    KnowledgeUnit,
    attach_evidence,
    extract_units,
    load_carry_over,
    merge_duplicates,
    select_chunks,
)
from proctor.kit.steps import Payload
from proctor.store import RunStore

UNCOVERED_FILE = "reckon_uncovered_units.jsonl"
# Baseline score names (as stored in the judgments table) -> names used in summaries and metrics.
BASELINE_NAMES = {
    JW_R: "judge_with_reference",
    JW_OR: "judge_without_reference",
    "bleu": "bleu",
    "rouge_l": "rouge_l",
    "embedding": "embedding",
}
CONTINUOUS = ("bleu", "rouge_l", "embedding")


class ReckonItem(Payload):
    """One (candidate, unit): RECKON's outcome joined with the unit and the baseline's scores — the view
    every table and the meta-evaluation read. `scores` maps each method to its score (None: no score)."""

    KIND: ClassVar[str] = "reckon_item"
    item_id: str
    candidate: str
    unit_id: str
    keyword: str
    unit_type: str
    cluster: str | None
    status: str | None
    round: int | None
    times_asked: int
    history: list[str]
    question_id: str | None
    question_type: str | None
    excerpt: str | None
    sentence_ids: list[int] | None = None  # the answer sentences the excerpt is made of (1-based)
    evidence: str | None = None  # the unit's corpus sentence (what sentence labels refer to)
    reason: str | None
    baseline_answer_key: str | None
    scores: dict[str, float | None]
    stage: str | None = None  # the method that decided the verdict: "judge", "guard" or "extract"
    p_correct: float | None = None  # the judge's P(correct) from its logprobs, where the server gave them


def _metric(store: RunStore, metric: str, subject: str, e: Estimate) -> None:
    store.put_metric(metric, subject, e.value, lo=e.lo, hi=e.hi, n=e.n)


async def run(ctx: RunContext[Config]) -> dict[str, Any]:
    cfg = ctx.settings
    if not ctx.config.candidates:
        raise UserError("candidates: the reckon protocol needs at least one candidate to evaluate; add one.")
    ctx.role("examiner")
    ctx.role("judge")
    base_seed = int(ctx.rng.integers(0, 2**31 - 1))
    warnings: list[str] = []

    # 1. Knowledge units (+ carried-over units), merged duplicates, evidence sentences.
    chunks = select_chunks(ctx)
    raw_units, unit_stats = await extract_units(ctx, chunks)
    if cfg.carry_over:
        carried = load_carry_over(cfg.carry_over)
        unit_stats["carried_over"] = len(carried)
        raw_units += carried
    if unit_stats["chunks_failed"]:
        warnings.append(
            f"unit extraction failed on {unit_stats['chunks_failed']} chunk(s); see the report's errors"
        )
    if not raw_units:
        warnings.append("no knowledge unit was extracted; nothing to evaluate")
        summary = {"protocol": "reckon", "config_hash": ctx.config.config_hash(), "units": unit_stats,
                   "candidates": {}, "table": [], "warnings": warnings}  # fmt: skip
        ctx.store.put_artifact("reckon", {"units": unit_stats, "empty": True})
        return summary
    vectors = ctx.embedder.embed([u.text for u in raw_units])
    kept = merge_duplicates(raw_units, vectors, cfg.dedup_threshold)
    units = [raw_units[i] for i in kept]
    vecs = vectors[kept]
    chunk_map = {c.chunk_id: c for c in ctx.corpus.chunks}
    attach_evidence(units, vecs, chunk_map, ctx.embedder)
    unit_stats["merged_duplicates"] = len(raw_units) - len(units)
    unit_stats["units"] = len(units)
    unit_stats["by_type"] = dict(sorted(Counter(u.type for u in units).items()))
    for u in units:
        ctx.store.put_item(u.unit_id, KnowledgeUnit.KIND, u.model_dump(mode="json"))

    # 2-6. Rounds.
    rounds = await run_rounds(ctx, units, vecs, build_candidates(ctx, cfg.answer_max_tokens), base_seed)

    # Baselines on the same units and candidates.
    baseline = await run_baselines(ctx, units, build_candidates(ctx), chunk_map) if cfg.baselines else {}
    return _finish(ctx, units, vecs, unit_stats, rounds, baseline, warnings)


def question_checks(rounds: RoundsResult) -> dict[str, int]:
    """How many questions were written, re-asked (a subject left out or an answer given away), given a
    sentence naming the subjects they left out (`left_out: list`), still leaving a subject out, and asked
    with given-away values blanked out."""
    qs = list(rounds.questions.values())
    return {
        "written": len(qs),
        "reasked": sum(q.reasked for q in qs),
        "listed_subjects": sum(bool(q.listed) for q in qs),
        "missing_subjects": sum(bool(q.missing) for q in qs),
        "blanked": sum(bool(q.redacted) for q in qs),
    }


def _round1_clusters(rounds: RoundsResult) -> list[dict[str, Any]]:
    """Round-1 clusters (every candidate's first round) with the names the examiner gave them."""
    out = []
    for qk, unit_ids in rounds.round1:
        q = rounds.questions.get(qk)
        out.append(
            {
                "question_id": qk,
                "center": q.center if q is not None else "(question failed)",
                "question": q.question if q is not None else None,
                "question_type": q.question_type if q is not None else None,
                "unit_ids": unit_ids,
            }
        )
    return out


def _finish(
    ctx: RunContext[Config],
    units: list[KnowledgeUnit],
    vecs: np.ndarray,
    unit_stats: dict[str, Any],
    rounds_result: RoundsResult,
    baseline: dict[str, dict[str, BaselineOutcome]],
    warnings: list[str],
) -> dict[str, Any]:
    cfg = ctx.settings
    store = ctx.store
    n_units = len(units)
    rounds = rounds_result.candidates
    clusters = _round1_clusters(rounds_result)
    cluster_of = {uid: i for i, c in enumerate(clusters) for uid in c["unit_ids"]}
    questions = rounds_result.questions

    # Per (candidate, unit) items: the joined view every table and the meta-evaluation read.
    items: list[ReckonItem] = []
    for name, cr in rounds.items():
        for u in units:
            st = cr.states[u.unit_id]
            vd = rounds_result.verdicts.get(st.verdict_key or "")
            q = questions.get(vd.question_id) if vd is not None else None
            b = baseline.get(name, {}).get(u.unit_id) or BaselineOutcome()
            scores: dict[str, float | None] = {
                "reckon": 1.0 if st.status == "correct" else 0.0 if st.status == "incorrect" else None
            }
            for stored, label in BASELINE_NAMES.items():
                if stored in b.scores:
                    scores[label] = b.scores[stored]
            item = ReckonItem(
                item_id=item_id(name, u.unit_id),
                candidate=name,
                unit_id=u.unit_id,
                keyword=u.keyword,
                unit_type=u.type,
                cluster=clusters[cluster_of[u.unit_id]]["center"] if u.unit_id in cluster_of else None,
                status=st.status,
                round=st.round,
                times_asked=st.asked,
                history=st.history,
                question_id=vd.question_id if vd is not None else None,
                question_type=q.question_type if q is not None else None,
                excerpt=vd.excerpt if vd is not None else None,
                sentence_ids=vd.sentence_ids if vd is not None else None,
                evidence=u.evidence,
                reason=vd.reason if vd is not None else None,
                baseline_answer_key=b.answer_key,
                scores=scores,
                stage=vd.stage if vd is not None else None,
                p_correct=vd.p_correct if vd is not None else None,
            )
            items.append(item)
            store.put_item(item.item_id, ReckonItem.KIND, item.model_dump(mode="json"))
            store.put_judgment(
                item.item_id,
                "reckon",
                verdict=st.status,
                score=scores["reckon"],
                reason=item.reason,
                data={"method": vd.stage, "p_correct": vd.p_correct} if vd is not None else None,
            )

    cand_summary: dict[str, Any] = {}
    for ccfg in ctx.config.candidates:
        name = ccfg.name
        mine = [it for it in items if it.candidate == name]
        counts = Counter(it.status or "not_asked" for it in mine)
        judged = counts["correct"] + counts["incorrect"]
        cr = rounds[name]
        acc = Estimate.proportion(counts["correct"], judged)
        cov = Estimate.proportion(judged, n_units)
        _metric(store, "accuracy.reckon", name, acc)
        _metric(store, "coverage.reckon", name, cov)
        curve = [n_units] + [r.remaining_after for r in cr.rounds]
        res: dict[str, Any] = {
            "model": ctx.candidate_label(ccfg),
            "retriever": ccfg.retriever,
            "accuracy": acc.model_dump(),
            "coverage": cov.model_dump(),
            "correct": counts["correct"],
            "incorrect": counts["incorrect"],
            "uncovered": counts["uncovered"],
            "errors": counts["error"],
            "rounds": len(cr.rounds),
            "stop_reason": cr.stop_reason,
            "remaining_per_round": curve,
            "round_log": [r.model_dump() for r in cr.rounds],
            "ask_frequency": dict(
                sorted(Counter(str(it.times_asked) for it in mine).items(), key=lambda kv: int(kv[0]))
            ),
            "by_cluster": _breakdown(mine, lambda it: it.cluster),
            "by_unit_type": _breakdown(mine, lambda it: it.unit_type),
            "by_question_type": _breakdown(mine, lambda it: it.question_type),
            "baselines": {},
        }
        for label in BASELINE_NAMES.values():
            if label not in cfg.baselines:
                continue
            vals = [s for it in mine if (s := it.scores.get(label)) is not None]
            if label in CONTINUOUS:
                m = Estimate.mean(vals)
                _metric(store, f"{'embedding_similarity' if label == 'embedding' else label}.mean", name, m)
            else:
                m = Estimate.proportion(int(sum(vals)), len(vals))
                _metric(store, f"accuracy.baseline_{label}", name, m)
            res["baselines"][label] = m.model_dump()
        cand_summary[name] = res

    cost = cost_summary(store)
    if cost["token_ratio"] is not None:
        store.put_metric("cost.token_ratio", "reckon_vs_baseline", cost["token_ratio"])
        if cost["token_ratio"] >= 1.0:
            warnings.append(
                f"RECKON used {cost['token_ratio']:.2f}x the tokens of the per-unit baseline on this run "
                f"(usually when clusters are small or most units need re-asking)"
            )

    meta = None
    if cfg.human_labels:
        labels = load_labels(cfg.human_labels)
        methods: dict[str, float | None] = {"reckon": None}
        for label in BASELINE_NAMES.values():
            if label in cfg.baselines:
                methods[label] = getattr(cfg.thresholds, label) if label in CONTINUOUS else None
        resolved, label_stats = resolve_labels(labels, units, [c.name for c in ctx.config.candidates])
        meta = meta_evaluate(items, resolved, methods)
        meta["file"] = cfg.human_labels
        meta["labels"] = label_stats
        if meta["unmatched"]:
            warnings.append(
                f"{meta['unmatched']} of {label_stats['item_labels']} human labels by item id name items "
                f"this run does not have"
            )
        for row in meta["methods"]:
            store.put_metric("metaeval.accuracy", row["method"], row["accuracy"], n=row["n"])
            store.put_metric("metaeval.kappa", row["method"], row["kappa"], n=row["n"])

    # Units left uncovered (for a later run's `reckon.carry_over`), as a file and an artifact.
    uncovered_for: dict[str, list[str]] = {}
    for it in items:
        if it.status == "uncovered":
            uncovered_for.setdefault(it.unit_id, []).append(it.candidate)
    fields = {"unit_id", "type", "keyword", "description", "evidence", "chunk_ids", "source"}
    uncovered = [
        {**u.model_dump(mode="json", include=fields), "uncovered_for": uncovered_for[u.unit_id]}
        for u in units
        if u.unit_id in uncovered_for
    ]
    with open(ctx.run_dir / UNCOVERED_FILE, "w", encoding="utf-8") as f:
        for row in uncovered:
            f.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")

    xy = map_2d(vecs)
    artifact = {
        "units": unit_stats,
        "n_units": n_units,
        "config": cfg.model_dump(mode="json"),
        "cluster_cap": cfg.cluster_cap,
        "question_checks": question_checks(rounds_result),
        "candidates": cand_summary,
        "clusters": clusters,
        "map": [
            {
                "unit_id": u.unit_id,
                "keyword": u.keyword,
                "x": round(float(xy[i, 0]), 5),
                "y": round(float(xy[i, 1]), 5),
                "cluster": cluster_of.get(u.unit_id),
            }
            for i, u in enumerate(units)
        ],
        "cost": cost,
        "meta_evaluation": meta,
        "uncovered": uncovered,
        "examples": _examples(rounds_result, units, cfg.examples),
        "stop_reasons": STOP_REASONS,
    }
    store.put_artifact("reckon", artifact)
    summary = {
        "protocol": "reckon",
        "config_hash": ctx.config.config_hash(),
        "units": unit_stats,
        "candidates": {
            k: {kk: vv for kk, vv in v.items() if kk not in ("round_log", "by_cluster")}
            for k, v in cand_summary.items()
        },
        "cost": {k: v for k, v in cost.items() if k != "rows"},
        "meta_evaluation": meta,
        "uncovered_units": len(uncovered),
        "table": [_table_row(name, r, cfg) for name, r in cand_summary.items()],
        "warnings": warnings,
    }
    return summary


def _breakdown(items: list[ReckonItem], field: Callable[[ReckonItem], str | None]) -> list[dict[str, Any]]:
    groups: dict[str, Counter[str]] = {}
    for it in items:
        groups.setdefault(str(field(it) or "—"), Counter())[it.status or "not_asked"] += 1
    out = []
    for key, c in groups.items():
        judged = c["correct"] + c["incorrect"]
        total = sum(c.values())
        out.append(
            {
                "group": key,
                "units": total,
                "correct": c["correct"],
                "incorrect": c["incorrect"],
                "uncovered": c["uncovered"],
                "errors": c["error"],
                "accuracy": Estimate.proportion(c["correct"], judged).model_dump(),
                "coverage": round(judged / total, 6) if total else None,
            }
        )
    return sorted(out, key=lambda r: (-r["units"], r["group"]))


def _examples(rounds: RoundsResult, units: list[KnowledgeUnit], n: int) -> list[dict[str, Any]]:
    """Up to n judgments, taken round-robin over verdicts (incorrect, correct, uncovered) in run order."""
    by_unit = {u.unit_id: u for u in units}
    pools: dict[str, list[UnitVerdict]] = {"incorrect": [], "correct": [], "uncovered": []}
    for v in rounds.verdicts.values():
        if v.verdict in pools and v.unit_id in by_unit:
            pools[v.verdict].append(v)
    out: list[dict[str, Any]] = []
    while len(out) < n and any(pools.values()):
        for verdict in ("incorrect", "correct", "uncovered"):
            if pools[verdict] and len(out) < n:
                v = pools[verdict].pop(0)
                u = by_unit[v.unit_id]
                q = rounds.questions.get(v.question_id)
                a = rounds.answers.get(v.answer_key)
                out.append(
                    {
                        "candidate": v.candidate,
                        "round": v.round,
                        "question": q.question if q is not None else None,
                        "answer": a.answer if a is not None else None,
                        "excerpt": v.excerpt,
                        "keyword": u.keyword,
                        "description": u.description,
                        "evidence": u.evidence,
                        "verdict": v.verdict,
                        "reason": v.reason,
                        "stage": v.stage,
                        "p_correct": v.p_correct,
                    }
                )
    return out


def _table_row(name: str, r: dict[str, Any], cfg: Config) -> dict[str, str]:
    def rate(m: dict[str, Any]) -> str:
        return Estimate.model_validate(m).text()

    b = r["baselines"]
    row = {
        "candidate": name,
        "RECKON acc": rate(r["accuracy"]),
        "covered": f"{r['coverage']['k']}/{r['coverage']['n']}",
        "rounds (stop)": f"{r['rounds']} ({r['stop_reason']})",
    }
    if "judge_with_reference" in cfg.baselines:
        row["J w/R acc"] = rate(b["judge_with_reference"])
    if "judge_without_reference" in cfg.baselines:
        row["J w/oR acc"] = rate(b["judge_without_reference"])
    for label, title in (("bleu", "BLEU"), ("rouge_l", "ROUGE-L"), ("embedding", "emb sim")):
        if label in cfg.baselines:
            v = b[label]["value"]
            row[title] = "—" if v is None else f"{v:.2f}"
    return row
