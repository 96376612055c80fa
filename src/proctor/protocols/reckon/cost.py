"""Cost accounting per step, from the run store's call records (grouped by the role each call ran under).

Compared: RECKON (cluster questions, candidates' answers to them, extraction + judging) against
the per-unit baseline that judges every unit with its own question (per-unit questions, answers, judge
with reference). Unit extraction is shared by both and shown apart; the judge without reference is an
extra baseline, shown but not part of the comparison. Numbers are nominal: cached calls count with their
recorded tokens and price, so a re-run from the cache reports the same cost as the first run.
"""

from __future__ import annotations

from typing import Any

from proctor.store import RunStore

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
FIELDS = ("calls", "errors", "prompt_tokens", "completion_tokens", "tokens", "cost_usd")


def _zero() -> dict[str, Any]:
    return {f: 0 for f in FIELDS} | {"cost_usd": 0.0}


def _add(acc: dict[str, Any], row: dict[str, Any]) -> None:
    acc["calls"] += row["calls"] or 0
    acc["errors"] += row["errors"] or 0
    acc["prompt_tokens"] += row["prompt_tokens"] or 0
    acc["completion_tokens"] += row["completion_tokens"] or 0
    acc["tokens"] = acc["prompt_tokens"] + acc["completion_tokens"]
    acc["cost_usd"] = round(acc["cost_usd"] + (row["cost_usd"] or 0.0), 8)


def _ratio(a: float, b: float) -> float | None:
    return round(a / b, 4) if b else None


def cost_summary(store: RunStore) -> dict[str, Any]:
    by_role: dict[str, dict[str, Any]] = {}
    for row in store.call_totals():
        _add(by_role.setdefault(row["role"] or "other", _zero()), row)

    def total(roles: tuple[str, ...]) -> dict[str, Any]:
        acc = _zero()
        for r in roles:
            if r in by_role:
                _add(acc, by_role[r])
        return acc

    rows = []
    sums = {"reckon": _zero(), "baseline": _zero()}
    for step in STEPS:
        for method, roles in (("reckon", RECKON_ROLES[step]), ("baseline", BASELINE_ROLES[step])):
            t = total(roles)
            rows.append({"method": method, "step": step, "roles": list(roles), **t})
            _add(sums[method], t)
    r, b = sums["reckon"], sums["baseline"]
    # The paper's Table 4 scope: examiner and judge calls only (questions + judging).
    r_ej = {f: sum(x[f] for x in rows if x["method"] == "reckon" and x["step"] != "answers") for f in FIELDS}
    b_ej = {
        f: sum(x[f] for x in rows if x["method"] == "baseline" and x["step"] != "answers") for f in FIELDS
    }
    has_baseline = b["calls"] > 0
    token_ratio = _ratio(r["tokens"], b["tokens"]) if has_baseline else None
    return {
        "rows": rows,
        "reckon": r,
        "baseline": b,
        "has_baseline": has_baseline,
        "token_ratio": token_ratio,
        "saving": None if token_ratio is None else round(1.0 - token_ratio, 4),
        "call_ratio": _ratio(r["calls"], b["calls"]) if has_baseline else None,
        "cost_ratio": _ratio(r["cost_usd"], b["cost_usd"]) if has_baseline and b["cost_usd"] else None,
        "examiner_judge_token_ratio": _ratio(r_ej["tokens"], b_ej["tokens"]) if has_baseline else None,
        "examiner_judge_call_ratio": _ratio(r_ej["calls"], b_ej["calls"]) if has_baseline else None,
        "shared_units": total(SHARED_ROLES),
        "judge_without_reference": total(EXTRA_ROLES),
    }
