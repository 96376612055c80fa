"""Item response theory on the graded exam (via `proctor.psychometrics`), stored for the report.

The response matrix has one row per pipeline and one column per question (1 correct, 0 wrong, NaN
when the answer failed or could not be parsed). Choice of model (`exam.irt.model: auto`): with fewer
than `min_subjects_2pl` pipelines a per-item slope rests on a handful of 0/1 answers and is not
identified, so the 1PL (one shared discrimination) is fitted; with more, a 3PL with the guessing floor
fixed at 1/options (two free parameters per item, like a 2PL, but it knows that a 4-option question is
answered correctly a quarter of the time by chance). Pruning ranks items by discrimination, so it always
uses a model with per-item slopes (`prune_model`), regularised by the package's default priors.

Everything the report draws (curves on a theta grid) is computed here and stored as the artifact
`exam_irt` (`ExamIrt`): the report only reads it back.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any, Literal

import numpy as np

from proctor.protocols.exam.config import IRTConfig
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import ExamResponse, Pipeline
from proctor.protocols.exam.result import (
    AdaptiveRow,
    ExamIrt,
    InformationGroup,
    IrtAbility,
    IrtAdaptive,
    IrtCurve,
    IrtHierarchical,
    IrtItem,
    IrtPrune,
    PruneStep,
)

THETA = np.linspace(-4.0, 4.0, 81)


def response_matrix(
    pipelines: list[Pipeline], exam: list[ExamQuestion], responses: list[ExamResponse]
) -> np.ndarray:
    """Pipelines x questions: 1.0 correct, 0.0 wrong, NaN when there is no scored answer."""
    row = {p.name: i for i, p in enumerate(pipelines)}
    col = {q.id: j for j, q in enumerate(exam)}
    m = np.full((len(pipelines), len(exam)), np.nan)
    for r in responses:
        i, j = row.get(r.pipeline), col.get(r.question_id)
        if i is not None and j is not None and r.correct is not None:
            m[i, j] = 1.0 if r.correct else 0.0
    return m


def choose_model(cfg: IRTConfig, n_subjects: int) -> tuple[Literal["1pl", "2pl", "3pl"], str]:
    """(model, why) for the main fit."""
    if cfg.model != "auto":
        return cfg.model, "set in exam.irt.model"
    if n_subjects < cfg.min_subjects_2pl:
        return "1pl", (
            f"{n_subjects} pipelines < min_subjects_2pl={cfg.min_subjects_2pl}: per-item slopes would "
            f"rest on {n_subjects} answers each, so one discrimination is shared by all items (1PL)"
        )
    return "3pl", (
        f"{n_subjects} pipelines: 2PL slopes with the guessing floor fixed at 1/options (3PL, fixed c)"
    )


def _fit_kwargs(model: str, cfg: IRTConfig, n_options: int) -> dict[str, Any]:
    return {"n_options": n_options, "guessing": cfg.guessing} if model == "3pl" else {}


def _f(x: Any) -> float | None:
    x = float(x)
    return x if math.isfinite(x) else None


def _curve(values: np.ndarray) -> list[float]:
    return [round(float(v), 5) for v in values]


def analyse(
    cfg: IRTConfig,
    pipelines: list[Pipeline],
    exam: list[ExamQuestion],
    matrix: np.ndarray,
    n_options: int,
    rng: np.random.Generator,
) -> ExamIrt:
    """Fit, hierarchical fit, information by category, pruning and adaptive replay."""
    from proctor.psychometrics import (
        fit_hierarchical,
        fit_irt,
        item_information,
        prune_items,
        simulate_adaptive,
        test_information,
    )

    out = ExamIrt(theta=_curve(THETA))
    answered = ~np.isnan(matrix)
    rows = np.flatnonzero(answered.any(axis=1))
    cols = np.flatnonzero(answered.any(axis=0))
    if len(rows) < 2 or len(cols) < 2:
        out.skipped = (
            f"too little data for IRT ({len(rows)} pipelines and {len(cols)} questions with answers)"
        )
        return out
    subjects = [pipelines[i] for i in rows]
    items = [exam[j] for j in cols]
    m = matrix[np.ix_(rows, cols)]
    ids = [q.id for q in items]
    p_correct = np.nanmean(m, axis=0)
    out.items_all_correct = int(np.sum(p_correct == 1.0))
    out.items_all_wrong = int(np.sum(p_correct == 0.0))
    model, why = choose_model(cfg, len(subjects))
    fit = fit_irt(m, model, item_ids=ids, **_fit_kwargs(model, cfg, n_options))
    out.model, out.model_reason = model, why
    out.n_subjects, out.n_items = len(subjects), len(items)
    out.loglik, out.converged = _f(fit.loglik), bool(fit.converged)
    out.abilities = [
        IrtAbility(pipeline=p.name, ability=_f(a), se=_f(s), accuracy=_f(np.nanmean(m[i])))
        for i, (p, a, s) in enumerate(zip(subjects, fit.ability, fit.ability_se, strict=True))
    ]
    out.items = [
        IrtItem(
            id=q.id,
            difficulty=_f(b),
            discrimination=_f(a),
            guessing=_f(c),
            p_correct=_f(pc),
            bloom=q.bloom,
            question_word=q.question_word,
            topic=q.topic,
        )
        for q, a, b, c, pc in zip(
            items, fit.discrimination, fit.difficulty, fit.guessing, p_correct, strict=True
        )
    ]
    info = item_information(fit, THETA)
    out.test_information = _curve(test_information(fit, THETA))
    # Item characteristic curves for a seeded sample of items.
    n_icc = min(cfg.icc_items, len(items))
    sample = sorted(int(i) for i in rng.choice(len(items), size=n_icc, replace=False))
    probs = fit.predict_proba(THETA)  # theta x items
    position = {q.id: i for i, q in enumerate(exam)}
    out.icc = [
        IrtCurve(
            id=ids[j],
            label=f"Q{position[ids[j]] + 1} (b={fit.difficulty[j]:+.1f}, a={fit.discrimination[j]:.1f})",
            p=_curve(probs[:, j]),
        )
        for j in sample
    ]
    # Mean item information by Bloom level and by question word.
    for key in ("bloom", "question_word"):
        groups: dict[str, list[int]] = defaultdict(list)
        for j, q in enumerate(items):
            groups[str(getattr(q, key) or "unknown")].append(j)
        by = {
            g: InformationGroup(n=len(idx), mean_item_information=_curve(info[idx].mean(axis=0)))
            for g, idx in sorted(groups.items())
        }
        if key == "bloom":
            out.information_by_bloom = by
        else:
            out.information_by_question_word = by
    # Hierarchical: component abilities of the factors that vary across pipelines.
    if cfg.hierarchical:
        factors = {
            f: [p.factors[f] for p in subjects]
            for f in ("llm", "retriever", "icl")
            if len({p.factors[f] for p in subjects}) > 1
        }
        if factors:
            try:
                h = fit_hierarchical(
                    m, factors, model=model, item_ids=ids, **_fit_kwargs(model, cfg, n_options)
                )
                out.hierarchical = IrtHierarchical(
                    model=model,
                    factors=list(factors),
                    components={f: {str(k): _f(v) for k, v in c.items()} for f, c in h.components.items()},
                    component_se={
                        f: {str(k): _f(v) for k, v in c.items()} for f, c in h.component_se.items()
                    },
                    ability={p.name: _f(a) for p, a in zip(subjects, h.ability, strict=True)},
                    converged=bool(h.converged),
                    constraint="the levels of each factor sum to zero; abilities scaled to sd 1",
                )
            except (ValueError, np.linalg.LinAlgError) as e:
                out.warnings.append(f"hierarchical fit failed: {e}")
    # Pruning: drop the least discriminating items, refit on the rest, information before/after.
    if cfg.prune and len(items) <= cfg.prune_min_items:
        out.warnings.append(
            f"pruning skipped: the exam has {len(items)} items, not more than irt.prune_min_items "
            f"({cfg.prune_min_items})"
        )
    elif cfg.prune:
        try:
            pr = prune_items(
                m,
                model=cfg.prune_model,
                drop_fraction=cfg.prune_fraction,
                steps=cfg.prune_steps,
                min_items=cfg.prune_min_items,
                item_ids=ids,
                theta_grid=THETA,
                **_fit_kwargs(cfg.prune_model, cfg, n_options),
            )
            out.prune = IrtPrune(
                model=cfg.prune_model,
                drop_fraction=cfg.prune_fraction,
                stop_reason=pr.stop_reason,
                information_initial=_curve(pr.information_initial),
                information_final=_curve(pr.information_final),
                kept_ids=list(pr.kept_ids),
                steps=[
                    PruneStep(
                        step=s.step,
                        n_items=len(s.item_ids),
                        n_after=len(s.item_ids) - len(s.dropped_ids),
                        dropped_ids=list(s.dropped_ids),
                        dropped_discrimination=[_f(x) for x in s.dropped_discrimination],
                        information_before=_curve(s.information_before),
                        information_after=_curve(s.information_after),
                        mean_information_before=_f(s.mean_information_before),
                        mean_information_after=_f(s.mean_information_after),
                        mean_item_information_before=_f(s.mean_item_information_before),
                        mean_item_information_after=_f(s.mean_item_information_after),
                    )
                    for s in pr.steps
                ],
            )
        except ValueError as e:
            out.warnings.append(f"pruning skipped: {e}")
    # Adaptive testing replayed on each pipeline's answers, against its full-exam estimate.
    if cfg.adaptive:
        rows_out: list[AdaptiveRow] = []
        for i, p in enumerate(subjects):
            sim = simulate_adaptive(
                fit, m[i], se_target=cfg.adaptive_target_se, max_items=cfg.adaptive_max_items
            )
            r = sim.result
            rows_out.append(
                AdaptiveRow(
                    pipeline=p.name,
                    items_used=r.n_items,
                    items_available=sim.n_available,
                    fraction=_f(sim.fraction_items),
                    theta_adaptive=_f(r.theta),
                    se_adaptive=_f(r.se),
                    theta_full=_f(sim.full_theta),
                    se_full=_f(sim.full_se),
                    abs_diff=_f(sim.abs_diff),
                    within_se=bool(sim.within_se),
                    stop_reason=r.stop_reason,
                )
            )
        used = sum(r.items_used for r in rows_out)
        avail = sum(r.items_available for r in rows_out)
        out.adaptive = IrtAdaptive(
            target_se=cfg.adaptive_target_se,
            max_items=cfg.adaptive_max_items,
            rows=rows_out,
            mean_fraction=used / avail if avail else None,
            share_within_se=sum(r.within_se for r in rows_out) / len(rows_out),
        )
    return out
