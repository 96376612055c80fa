"""Validation by re-answering: the candidate answers its batch's base questions again with the feedback's
suggestions in the prompt. ACC1 (before) and ACC2 (after); CR = questions wrong before and right after,
CtE = right before and wrong after, both over all base questions (so ACC2 = ACC1 + CR - CtE, as in
JudgeAgent's Table 1), and the conditional rates (CR over the questions first wrong, CtE over those
first right). A question counts only when both of its answers were graded."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from proctor.estimates import Estimate


class ValidationRates(BaseModel):
    n: int
    acc1: Estimate
    acc2: Estimate
    cr: Estimate
    cte: Estimate
    cr_conditional: Estimate
    cte_conditional: Estimate
    delta: float | None  # ACC2 - ACC1 = CR - CtE


def validation_rates(pairs: Sequence[tuple[bool, bool]]) -> ValidationRates:
    """Rates from (correct before, correct after) per base question."""
    n = len(pairs)
    right1 = sum(1 for a, _ in pairs if a)
    right2 = sum(1 for _, b in pairs if b)
    cr = sum(1 for a, b in pairs if not a and b)
    cte = sum(1 for a, b in pairs if a and not b)
    return ValidationRates(
        n=n,
        acc1=Estimate.proportion(right1, n),
        acc2=Estimate.proportion(right2, n),
        cr=Estimate.proportion(cr, n),
        cte=Estimate.proportion(cte, n),
        cr_conditional=Estimate.proportion(cr, n - right1),
        cte_conditional=Estimate.proportion(cte, right1),
        delta=(right2 - right1) / n if n else None,
    )
