"""The reckon protocol: units -> dedup -> clusters -> questions -> answers -> per-unit judging, in rounds;
then the per-unit baselines on the same units, cost accounting, metrics and meta-evaluation."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

import numpy as np

from proctor.clustering import map_2d
from proctor.errors import UserError
from proctor.estimates import Estimate
from proctor.kit.context import RunContext
from proctor.kit.steps import Judgment, Payload
from proctor.protocols.reckon.baselines import JW_OR, JW_R, BaselineOutcome, run_baselines
from proctor.protocols.reckon.candidates import build_candidates
from proctor.protocols.reckon.config import Config
from proctor.protocols.reckon.cost import cost_summary
from proctor.protocols.reckon.judging import UnitVerdict
from proctor.protocols.reckon.metaeval import item_id, load_labels, meta_evaluate, resolve_labels
from proctor.protocols.reckon.result import (
    BaselineGap,
    BaselineScores,
    Breakdown,
    CandidateDetails,
    ClusterRow,
    Example,
    MapPoint,
    MethodScore,
    QuestionChecks,
    ReckonCandidate,
    ReckonDetails,
    ReckonItem,
    ReckonResult,
    UncoveredUnit,
    UnitStats,
)
from proctor.protocols.reckon.rounds import STOP_REASONS, RoundsResult, run_rounds
from proctor.protocols.reckon.units import (
    KnowledgeUnit,
    attach_evidence,
    extract_units,
    load_carry_over,
    merge_duplicates,
    select_chunks,
)

__all__ = ["ReckonItem", "run"]

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
P = TypeVar("P", bound=Payload)


async def _same(payload: P) -> P:
    """The step of a payload computed beforehand: stored as it is (under its kit-derived key)."""
    return payload


async def run(ctx: RunContext[Config]) -> ReckonResult:
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
        unit_stats.carried_over = len(carried)
        raw_units += carried
    if unit_stats.chunks_failed:
        warnings.append(
            f"unit extraction failed on {unit_stats.chunks_failed} chunk(s); see the report's errors"
        )
    if not raw_units:
        warnings.append("no knowledge unit was extracted; nothing to evaluate")
        return ReckonResult(
            units=unit_stats, warnings=warnings, details=ReckonDetails(empty=True, units=unit_stats)
        )
    vectors = ctx.embedder.embed([u.text for u in raw_units])
    kept = merge_duplicates(raw_units, vectors, cfg.dedup_threshold)
    units = [raw_units[i] for i in kept]
    vecs = vectors[kept]
    chunk_map = {c.chunk_id: c for c in ctx.corpus.chunks}
    attach_evidence(units, vecs, chunk_map, ctx.embedder)
    unit_stats.merged_duplicates = len(raw_units) - len(units)
    unit_stats.units = len(units)
    unit_stats.by_type = dict(sorted(Counter(u.type for u in units).items()))
    await ctx.map(
        "reckon: knowledge units", units, _same, unit_id=lambda u: u, role=None, output=KnowledgeUnit
    )

    # 2-6. Rounds.
    rounds = await run_rounds(ctx, units, vecs, build_candidates(ctx, cfg.answer_max_tokens), base_seed)

    # Baselines on the same units and candidates.
    baseline = await run_baselines(ctx, units, build_candidates(ctx), chunk_map) if cfg.baselines else {}
    return await _finish(ctx, units, vecs, unit_stats, rounds, baseline, warnings)


def question_checks(rounds: RoundsResult) -> QuestionChecks:
    """How many questions were written, re-asked (a subject left out or an answer given away), given a
    sentence naming the subjects they left out (`left_out: list`), still leaving a subject out, and asked
    with given-away values blanked out."""
    qs = list(rounds.questions.values())
    return QuestionChecks(
        written=len(qs),
        reasked=sum(q.reasked for q in qs),
        listed_subjects=sum(bool(q.listed) for q in qs),
        missing_subjects=sum(bool(q.missing) for q in qs),
        blanked=sum(bool(q.redacted) for q in qs),
    )


def _round1_clusters(rounds: RoundsResult) -> list[ClusterRow]:
    """Round-1 clusters (every candidate's first round) with the names the examiner gave them."""
    out = []
    for qk, unit_ids in rounds.round1:
        q = rounds.questions.get(qk)
        out.append(
            ClusterRow(
                question_id=qk,
                center=q.center if q is not None else "(question failed)",
                question=q.question if q is not None else None,
                question_type=q.question_type if q is not None else None,
                unit_ids=unit_ids,
            )
        )
    return out


def _status_score(status: str | None) -> float | None:
    return 1.0 if status == "correct" else 0.0 if status == "incorrect" else None


def baseline_gap(items: list[ReckonItem]) -> BaselineGap | None:
    """RECKON and the judge-with-reference baseline on the units both judged (None when there are none)."""
    both = [
        (it.status == "correct", bool(b))
        for it in items
        if it.status in ("correct", "incorrect") and (b := it.scores.get("judge_with_reference")) is not None
    ]
    if not both:
        return None
    reckon = Estimate.proportion(sum(r for r, _ in both), len(both))
    base = Estimate.proportion(sum(b for _, b in both), len(both))
    apart = (
        reckon.lo is not None
        and reckon.hi is not None
        and base.lo is not None
        and base.hi is not None
        and (reckon.hi < base.lo or base.hi < reckon.lo)
    )
    return BaselineGap(reckon=reckon, baseline=base, flagged=apart)


async def _finish(
    ctx: RunContext[Config],
    units: list[KnowledgeUnit],
    vecs: np.ndarray,
    unit_stats: UnitStats,
    rounds_result: RoundsResult,
    baseline: dict[str, dict[str, BaselineOutcome]],
    warnings: list[str],
) -> ReckonResult:
    cfg = ctx.settings
    n_units = len(units)
    rounds = rounds_result.candidates
    clusters = _round1_clusters(rounds_result)
    cluster_of = {uid: i for i, c in enumerate(clusters) for uid in c.unit_ids}
    questions = rounds_result.questions

    # Per (candidate, unit) items: the joined view every table and the meta-evaluation read, each with
    # RECKON's verdict on it as a judgment (judge "reckon", no model call).
    items: list[ReckonItem] = []
    verdicts: list[Judgment] = []
    for name, cr in rounds.items():
        for u in units:
            st = cr.states[u.unit_id]
            vd = rounds_result.verdicts.get(st.verdict_key or "")
            q = questions.get(vd.question_id) if vd is not None else None
            b = baseline.get(name, {}).get(u.unit_id) or BaselineOutcome()
            scores: dict[str, float | None] = {"reckon": _status_score(st.status)}
            for stored, label in BASELINE_NAMES.items():
                if stored in b.scores:
                    scores[label] = b.scores[stored]
            item = ReckonItem(
                item_id=item_id(name, u.unit_id),
                candidate=name,
                unit_id=u.unit_id,
                keyword=u.keyword,
                unit_type=u.type,
                cluster=clusters[cluster_of[u.unit_id]].center if u.unit_id in cluster_of else None,
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
            verdicts.append(
                Judgment(
                    verdict=st.status,
                    score=scores["reckon"],
                    reason=item.reason,
                    data={"method": vd.stage, "p_correct": vd.p_correct} if vd is not None else None,
                )
            )
    done = await ctx.map("reckon: items", items, _same, unit_id=lambda it: it, role=None, output=ReckonItem)
    await ctx.judge(
        "reckon: verdicts",
        [(o.key, j) for o, j in zip(done, verdicts, strict=True)],
        lambda unit: _same(unit[1]),
        item_key=lambda unit: unit[0],
        judge="reckon",
        role=None,
    )

    candidates: dict[str, ReckonCandidate] = {}
    details: dict[str, CandidateDetails] = {}
    for ccfg in ctx.config.candidates:
        name = ccfg.name
        mine = [it for it in items if it.candidate == name]
        counts = Counter(it.status or "not_asked" for it in mine)
        judged = counts["correct"] + counts["incorrect"]
        cr = rounds[name]
        baselines = BaselineScores()
        for label in BASELINE_NAMES.values():
            if label not in cfg.baselines:
                continue
            vals = [s for it in mine if (s := it.scores.get(label)) is not None]
            if label in CONTINUOUS:
                setattr(baselines, label, Estimate.mean(vals))
            else:
                setattr(baselines, label, Estimate.proportion(int(sum(vals)), len(vals)))
        candidates[name] = ReckonCandidate(
            model=ctx.candidate_label(ccfg),
            retriever=ccfg.retriever,
            accuracy=Estimate.proportion(counts["correct"], judged),
            coverage=Estimate.proportion(judged, n_units),
            correct=counts["correct"],
            incorrect=counts["incorrect"],
            uncovered=counts["uncovered"],
            errors=counts["error"],
            rounds=len(cr.rounds),
            stop_reason=cr.stop_reason,
            remaining_per_round=[n_units] + [r.remaining_after for r in cr.rounds],
            ask_frequency=dict(
                sorted(Counter(str(it.times_asked) for it in mine).items(), key=lambda kv: int(kv[0]))
            ),
            by_unit_type=_breakdown(mine, lambda it: it.unit_type),
            by_question_type=_breakdown(mine, lambda it: it.question_type),
            baselines=baselines,
            baseline_gap=baseline_gap(mine) if "judge_with_reference" in cfg.baselines else None,
        )
        gap = candidates[name].baseline_gap
        if gap is not None and gap.flagged:
            warnings.append(
                f"{name}: RECKON accuracy {gap.reckon.text()} and the per-unit judge-with-reference baseline "
                f"{gap.baseline.text()} on the same units do not overlap; compare their verdicts in the unit "
                "browser"
            )
        details[name] = CandidateDetails(
            round_log=cr.rounds, by_cluster=_breakdown(mine, lambda it: it.cluster)
        )

    # The call totals per role are the store's record of the run's calls (there is no other account of them).
    cost, cost_rows = cost_summary(ctx.store.call_totals())
    if cost.token_ratio is not None and cost.token_ratio >= 1.0:
        warnings.append(
            f"RECKON used {cost.token_ratio:.2f}x the tokens of the per-unit baseline on this run "
            f"(usually when clusters are small or most units need re-asking)"
        )

    meta = None
    metaeval_scores: dict[str, MethodScore] = {}
    if cfg.human_labels:
        labels = load_labels(cfg.human_labels)
        methods: dict[str, float | None] = {"reckon": None}
        for label in BASELINE_NAMES.values():
            if label in cfg.baselines:
                methods[label] = getattr(cfg.thresholds, label) if label in CONTINUOUS else None
        resolved, label_stats = resolve_labels(labels, units, [c.name for c in ctx.config.candidates])
        meta = meta_evaluate(items, resolved, methods)
        meta.file = cfg.human_labels
        meta.labels = label_stats
        if meta.unmatched:
            warnings.append(
                f"{meta.unmatched} of {label_stats.item_labels} human labels by item id name items "
                f"this run does not have"
            )
        for row in meta.methods:
            metaeval_scores[row.method] = MethodScore(
                accuracy=Estimate(value=row.accuracy, n=row.n),
                kappa=Estimate(value=row.kappa, lo=row.kappa_lo, hi=row.kappa_hi, n=row.n),
            )

    # Units left uncovered (for a later run's `reckon.carry_over`), as a file and in the report.
    uncovered_for: dict[str, list[str]] = {}
    for it in items:
        if it.status == "uncovered":
            uncovered_for.setdefault(it.unit_id, []).append(it.candidate)
    uncovered = [
        UncoveredUnit(
            unit_id=u.unit_id,
            type=u.type,
            keyword=u.keyword,
            description=u.description,
            evidence=u.evidence,
            chunk_ids=u.chunk_ids,
            source=u.source,
            uncovered_for=uncovered_for[u.unit_id],
        )
        for u in units
        if u.unit_id in uncovered_for
    ]
    with open(ctx.run_dir / UNCOVERED_FILE, "w", encoding="utf-8") as f:
        for unit in uncovered:
            f.write(json.dumps(unit.model_dump(mode="json"), ensure_ascii=False, sort_keys=True) + "\n")

    xy = map_2d(vecs)
    return ReckonResult(
        units=unit_stats,
        candidates=candidates,
        cost=cost,
        meta_evaluation=meta,
        uncovered_units=len(uncovered),
        table=[_table_row(name, r, cfg) for name, r in candidates.items()],
        warnings=warnings,
        metaeval_scores=metaeval_scores,
        details=ReckonDetails(
            units=unit_stats,
            n_units=n_units,
            config=cfg,
            question_checks=question_checks(rounds_result),
            candidates=details,
            clusters=clusters,
            map=[
                MapPoint(
                    unit_id=u.unit_id,
                    keyword=u.keyword,
                    x=round(float(xy[i, 0]), 5),
                    y=round(float(xy[i, 1]), 5),
                    cluster=cluster_of.get(u.unit_id),
                )
                for i, u in enumerate(units)
            ],
            cost_rows=cost_rows,
            examples=_examples(rounds_result, units, cfg.examples),
            uncovered=uncovered,
            stop_reasons=STOP_REASONS,
        ),
    )


def _breakdown(items: list[ReckonItem], field: Callable[[ReckonItem], str | None]) -> list[Breakdown]:
    groups: dict[str, Counter[str]] = {}
    for it in items:
        groups.setdefault(str(field(it) or "—"), Counter())[it.status or "not_asked"] += 1
    out = []
    for key, c in groups.items():
        judged = c["correct"] + c["incorrect"]
        total = sum(c.values())
        out.append(
            Breakdown(
                group=key,
                units=total,
                correct=c["correct"],
                incorrect=c["incorrect"],
                uncovered=c["uncovered"],
                errors=c["error"],
                accuracy=Estimate.proportion(c["correct"], judged),
                coverage=round(judged / total, 6) if total else None,
            )
        )
    return sorted(out, key=lambda r: (-r.units, r.group))


def _examples(rounds: RoundsResult, units: list[KnowledgeUnit], n: int) -> list[Example]:
    """Up to n judgments, taken round-robin over verdicts (incorrect, correct, uncovered) in run order."""
    by_unit = {u.unit_id: u for u in units}
    pools: dict[str, list[UnitVerdict]] = {"incorrect": [], "correct": [], "uncovered": []}
    for v in rounds.verdicts.values():
        if v.verdict in pools and v.unit_id in by_unit:
            pools[v.verdict].append(v)
    out: list[Example] = []
    while len(out) < n and any(pools.values()):
        for verdict in ("incorrect", "correct", "uncovered"):
            if pools[verdict] and len(out) < n:
                v = pools[verdict].pop(0)
                u = by_unit[v.unit_id]
                q = rounds.questions.get(v.question_id)
                a = rounds.answers.get(v.answer_key)
                out.append(
                    Example(
                        candidate=v.candidate,
                        round=v.round,
                        question=q.question if q is not None else None,
                        answer=a.answer if a is not None else None,
                        excerpt=v.excerpt,
                        keyword=u.keyword,
                        description=u.description,
                        evidence=u.evidence,
                        verdict=v.verdict,
                        reason=v.reason,
                        stage=v.stage,
                        p_correct=v.p_correct,
                    )
                )
    return out


def _table_row(name: str, r: ReckonCandidate, cfg: Config) -> dict[str, str]:
    b = r.baselines
    row = {
        "candidate": name,
        "RECKON acc": r.accuracy.text(),
        "covered": f"{r.coverage.k}/{r.coverage.n}",
        "rounds (stop)": f"{r.rounds} ({r.stop_reason})",
    }
    if b.judge_with_reference is not None:
        row["J w/R acc"] = b.judge_with_reference.text()
    if b.judge_without_reference is not None:
        row["J w/oR acc"] = b.judge_without_reference.text()
    for label, title in (("bleu", "BLEU"), ("rouge_l", "ROUGE-L"), ("embedding", "emb sim")):
        m = b.get(label)
        if m is not None:
            row[title] = "—" if m.value is None else f"{m.value:.2f}"
    return row
