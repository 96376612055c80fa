"""Cost accounting per step, from the run store's call records (grouped by the role each call ran under).

Compared: RECKON (cluster questions, candidates' answers to them, extraction + judging) against
the per-unit baseline that judges every unit with its own question (per-unit questions, answers, judge
with reference). Unit extraction is shared by both and shown apart; the judge without reference is an
extra baseline, shown but not part of the comparison. Numbers are nominal: cached calls count with their
recorded tokens and price, so a re-run from the cache reports the same cost as the first run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from proctor.protocols.reckon.result import CostRow, CostSummary, CostTotals

STEPS = ("questions", "answers", "judging")
RECKON_ROLES = {
    "questions": ("reckon:question",),
    "answers": ("reckon:answer",),
    "judging": ("reckon:extract", "reckon:judge"),
}
BASELINE_ROLES = {
    "questions": ("baseline:question",),
    "answers": ("baseline:answer",),
    "judging": ("baseline:judge",),
}
SHARED_ROLES = ("reckon:units",)
EXTRA_ROLES = ("baseline:judge_noref",)


def _add(acc: CostTotals, calls: int, errors: int, prompt: int, completion: int, cost: float) -> None:
    acc.calls += calls
    acc.errors += errors
    acc.prompt_tokens += prompt
    acc.completion_tokens += completion
    acc.tokens = acc.prompt_tokens + acc.completion_tokens
    acc.cost_usd = round(acc.cost_usd + cost, 8)


def _plus(acc: CostTotals, t: CostTotals) -> None:
    _add(acc, t.calls, t.errors, t.prompt_tokens, t.completion_tokens, t.cost_usd)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def cost_summary(call_totals: Iterable[Mapping[str, Any]]) -> tuple[CostSummary, list[CostRow]]:
    """The comparison from the run's call totals (`call_totals()` rows: per role and model), and its rows
    per method and step."""
    by_role: dict[str, CostTotals] = {}
    for row in call_totals:
        _add(
            by_role.setdefault(row["role"] or "other", CostTotals()),
            row["calls"] or 0,
            row["errors"] or 0,
            row["prompt_tokens"] or 0,
            row["completion_tokens"] or 0,
            row["cost_usd"] or 0.0,
        )

    def total(roles: tuple[str, ...]) -> CostTotals:
        acc = CostTotals()
        for r in roles:
            if r in by_role:
                _plus(acc, by_role[r])
        return acc

    rows: list[CostRow] = []
    sums = {"reckon": CostTotals(), "baseline": CostTotals()}
    for step in STEPS:
        for method, roles in (("reckon", RECKON_ROLES[step]), ("baseline", BASELINE_ROLES[step])):
            t = total(roles)
            rows.append(CostRow(method=method, step=step, roles=list(roles), **t.model_dump()))
            _plus(sums[method], t)
    r, b = sums["reckon"], sums["baseline"]

    # The paper's Table 4 scope: examiner and judge calls only (questions + judging).
    def examiner_judge(method: str) -> CostTotals:
        return CostTotals(
            calls=sum(x.calls for x in rows if x.method == method and x.step != "answers"),
            tokens=sum(x.tokens for x in rows if x.method == method and x.step != "answers"),
        )

    r_ej, b_ej = examiner_judge("reckon"), examiner_judge("baseline")
    has_baseline = b.calls > 0
    token_ratio = _ratio(r.tokens, b.tokens) if has_baseline else None
    summary = CostSummary(
        reckon=r,
        baseline=b,
        has_baseline=has_baseline,
        token_ratio=token_ratio,
        saving=None if token_ratio is None else round(1.0 - token_ratio, 4),
        call_ratio=_ratio(r.calls, b.calls) if has_baseline else None,
        cost_ratio=_ratio(r.cost_usd, b.cost_usd) if has_baseline and b.cost_usd else None,
        examiner_judge_token_ratio=_ratio(r_ej.tokens, b_ej.tokens) if has_baseline else None,
        examiner_judge_call_ratio=_ratio(r_ej.calls, b_ej.calls) if has_baseline else None,
        shared_units=total(SHARED_ROLES),
        judge_without_reference=total(EXTRA_ROLES),
    )
    return summary, rows
