"""How much of a pipeline's score the corpus explains: its accuracy next to a closed-book baseline on the
same items, and the chance-corrected gain (acc − closed) / (1 − closed).

An exam item a model answers without the corpus measures the question's wording or world knowledge,
not the corpus. A pipeline's raw accuracy mixes both; the gain over the closed-book baseline, scaled by
what was left to gain, is the share of the not-guessed items the pipeline got from the corpus (0 = no
better than closed-book, 1 = every item closed-book missed). The baseline is, per pipeline, the grid's
closed-book pipeline of the same LLM and in-context examples when the grid has one (same model, only the
retrieval differs), else the examiner answering closed-book (the guessability measurement). Both are
read on the items both answered; the interval is a paired percentile bootstrap over those items.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from proctor.estimates import Estimate
from proctor.protocols.exam.exam_file import ExamQuestion
from proctor.protocols.exam.grading import ExamResponse, Pipeline
from proctor.protocols.exam.result import BeyondGuessing, ItemGuessability

EXAMINER_BASELINE = "examiner, closed-book"
BOOTSTRAP_DRAWS = 2000


def corrected_gain(acc: float, closed: float) -> float | None:
    """(acc − closed) / (1 − closed); None when the baseline already answers everything."""
    return None if closed >= 1.0 else (acc - closed) / (1.0 - closed)


def _paired_estimate(x: np.ndarray, c: np.ndarray, rng: np.random.Generator) -> Estimate:
    value = corrected_gain(float(x.mean()), float(c.mean()))
    if value is None:
        return Estimate(value=None, n=len(x), method="bootstrap")
    idx = rng.integers(0, len(x), size=(BOOTSTRAP_DRAWS, len(x)))
    xs, cs = x[idx].mean(axis=1), c[idx].mean(axis=1)
    ok = cs < 1.0
    draws = (xs[ok] - cs[ok]) / (1.0 - cs[ok])
    if len(draws) < BOOTSTRAP_DRAWS // 2:
        return Estimate(value=round(value, 6), n=len(x), method="none")
    lo, hi = np.percentile(draws, [2.5, 97.5])
    return Estimate(
        value=round(value, 6), lo=round(float(lo), 6), hi=round(float(hi), 6), n=len(x), method="bootstrap"
    )


def _baseline_of(p: Pipeline, pipelines: list[Pipeline]) -> Pipeline | None:
    if p.external is not None or p.retriever == "closed_book":
        return None
    return next(
        (
            b
            for b in pipelines
            if b.external is None and b.retriever == "closed_book" and b.model == p.model and b.icl == p.icl
        ),
        None,
    )


def beyond_guessing(
    pipelines: list[Pipeline],
    exam: list[ExamQuestion],
    answers: Mapping[str, Mapping[str, ExamResponse]],
    guesses: Mapping[str, ItemGuessability],
    rng: np.random.Generator,
) -> dict[str, BeyondGuessing]:
    """Per pipeline (closed-book pipelines excluded): the baseline's accuracy on the same items and the
    chance-corrected gain. `answers`: pipeline name -> question id -> scored response."""
    by_id = {q.id: q for q in exam}
    examiner_right = {
        qid: g.picked == by_id[qid].answer for qid, g in guesses.items() if g.picked and qid in by_id
    }
    out: dict[str, BeyondGuessing] = {}
    for p in pipelines:
        if p.retriever == "closed_book" and p.external is None:
            continue
        base = _baseline_of(p, pipelines)
        mine = answers.get(p.name, {})
        if base is not None:
            theirs = {qid: bool(r.correct) for qid, r in answers.get(base.name, {}).items()}
            label = base.name
        else:
            theirs, label = examiner_right, EXAMINER_BASELINE
        common = [qid for qid in by_id if qid in mine and qid in theirs]
        if not common:
            continue
        x = np.array([1.0 if mine[q].correct else 0.0 for q in common])
        c = np.array([1.0 if theirs[q] else 0.0 for q in common])
        out[p.name] = BeyondGuessing(
            baseline=label,
            accuracy=Estimate.proportion(int(x.sum()), len(x)),
            closed_book=Estimate.proportion(int(c.sum()), len(c)),
            corrected=_paired_estimate(x, c, rng),
        )
    return out
