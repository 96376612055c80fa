"""The judge card: how far the verdicts agree with human labels, and what each part of the stack is worth.

Agreement statistics come from the one implementation (`proctor.metaeval.agreement`: accuracy, Cohen's
kappa with its bootstrap interval, the confusion matrix), numbers as `proctor.estimates.Estimate`s."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel

from proctor.estimates import Estimate
from proctor.metaeval.agreement import agreement
from proctor.protocols.judge.grade import DecidedBy, JudgedAnswer
from proctor.protocols.judge.rows import Label

CATEGORIES = ["correct", "incorrect"]


class MethodPrecision(BaseModel):
    """How often a rule or guard was right when it fired (a rule says "correct", a guard "incorrect")."""

    method: str
    kind: DecidedBy
    fired: int
    right: int
    precision: Estimate


class JudgeCard(BaseModel):
    """Agreement of the verdicts with the human labels on the labelled rows."""

    n: int
    human_correct: int
    accuracy: Estimate
    kappa: Estimate
    # confusion[human][judge]: rows a human labelled `human` and the judge called `judge`.
    confusion: dict[str, dict[str, int]]
    false_correct: Estimate  # judge "correct" where the human said "incorrect", over all labelled rows
    false_incorrect: Estimate
    decided_without_call: Estimate
    methods: list[MethodPrecision]
    seconds_per_llm_judgment: float | None = None
    llm_judgments_timed: int = 0
    kappa_warning: float
    below_threshold: bool


def busy_seconds(intervals: Sequence[tuple[float, float]]) -> float:
    """Wall-clock seconds covered by the (start, end) intervals: concurrent calls count once, the gaps of an
    interrupted run not at all."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def judge_card(
    pairs: Sequence[tuple[Label, JudgedAnswer]],
    *,
    seconds_per_llm_judgment: float | None = None,
    llm_judgments_timed: int = 0,
    kappa_warning: float,
    seed: int = 0,
) -> JudgeCard | None:
    """The card for (human label, verdict) pairs; None without a labelled row. The seconds per LLM judgment
    (and how many judgments they were timed on) are measured by the caller (`busy_seconds`)."""
    if not pairs:
        return None
    human = [h for h, _ in pairs]
    judged = [v.verdict for _, v in pairs]
    ag = agreement(human, judged, categories=CATEGORIES, seed=seed)
    n = len(pairs)
    hits = [float(h == j) for h, j in zip(human, judged, strict=True)]
    false_correct = sum(1 for h, j in zip(human, judged, strict=True) if j == "correct" and h == "incorrect")
    false_incorrect = sum(
        1 for h, j in zip(human, judged, strict=True) if j == "incorrect" and h == "correct"
    )
    kappa = Estimate(
        value=None if ag.kappa is None else round(ag.kappa, 6),
        lo=None if ag.kappa_lo is None else round(ag.kappa_lo, 6),
        hi=None if ag.kappa_hi is None else round(ag.kappa_hi, 6),
        n=n,
        method="bootstrap",
    )
    fired: dict[tuple[str, DecidedBy], list[bool]] = {}
    for h, v in pairs:
        if v.decided_by != "llm":
            fired.setdefault((v.method, v.decided_by), []).append(h == v.verdict)
    methods = [
        MethodPrecision(
            method=m,
            kind=kind,
            fired=len(rights),
            right=sum(rights),
            precision=Estimate.proportion(sum(rights), len(rights)),
        )
        for (m, kind), rights in sorted(fired.items(), key=lambda kv: (kv[0][1], -len(kv[1]), kv[0][0]))
    ]
    return JudgeCard(
        n=n,
        human_correct=human.count("correct"),
        accuracy=Estimate.bootstrap(hits, np.random.default_rng(seed), bounds=(0.0, 1.0)),
        kappa=kappa,
        confusion={
            hc: {jc: ag.confusion[i][j] for j, jc in enumerate(CATEGORIES)} for i, hc in enumerate(CATEGORIES)
        },
        false_correct=Estimate.proportion(false_correct, n),
        false_incorrect=Estimate.proportion(false_incorrect, n),
        decided_without_call=Estimate.proportion(sum(1 for _, v in pairs if not v.model_call), n),
        methods=methods,
        seconds_per_llm_judgment=seconds_per_llm_judgment,
        llm_judgments_timed=llm_judgments_timed,
        kappa_warning=kappa_warning,
        below_threshold=ag.kappa is None or ag.kappa < kappa_warning,
    )
