"""KIEval scores: the decaying-weight conversation score (reference and paper forms), evaluator voting,
and the contamination analysis (static accuracy vs. KIEval score).

Reference form (`mode="reference"`, the default; matches the authors' released scorer so numbers are
comparable): a round score 0, 1, 2, 3, 4 is mapped to 0, 1, 3, 7, 10; round i (0-based) gets weight
exp(-0.2 i); the score is the weighted mean of the mapped values times 10, on 0-100. An early-stopped
conversation keeps the stopping round's score and ends there: no padding of the missing rounds.

Paper form (`mode="paper"`, section 3.3 of the paper): round scores are normalised to [0, 1] by
(s - 1) / 3 (so 1 "poor" -> 0 and 4 "good" -> 1; a 0 stays 0); round i of the conversation's n rounds gets
weight exp(-i / n); the weighted mean is reported times 100 so both forms share the 0-100 scale.

Fractional round scores (from mean voting over several evaluators) are mapped by linear interpolation
between the integer points in the reference form.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

REFERENCE_MAP: dict[int, float] = {0: 0.0, 1: 1.0, 2: 3.0, 3: 7.0, 4: 10.0}
REFERENCE_DECAY = 0.2
ASPECTS: tuple[str, ...] = ("accuracy", "logic", "relevance", "coherence", "conciseness")
STOP_REASONS: tuple[str, ...] = (
    "off_topic",
    "empty_response",
    "rule_violation",
    "repetition",
    "unpermitted_role_shift",
)

ScoreMode = Literal["reference", "paper"]


def _checked(round_scores: Sequence[float]) -> list[float]:
    out = []
    for i, s in enumerate(round_scores):
        if isinstance(s, bool) or not isinstance(s, int | float) or not math.isfinite(s) or not 0 <= s <= 4:
            raise ValueError(f"round {i}: score must be a number in [0, 4], got {s!r}")
        out.append(float(s))
    return out


def reference_value(s: float) -> float:
    """A round score on the reference scorer's 0-10 scale (linear between the integer points)."""
    lo = math.floor(s)
    if lo == s:
        return REFERENCE_MAP[int(s)]
    frac = s - lo
    return REFERENCE_MAP[lo] * (1 - frac) + REFERENCE_MAP[lo + 1] * frac


def score(round_scores: Sequence[float], mode: ScoreMode = "reference") -> float | None:
    """The KIEval score (0-100) of one conversation from its scored rounds, in order; None if none.

    Pass only the rounds that were scored, up to and including the round where the evaluator stopped
    the conversation.
    """
    values = _checked(round_scores)
    if not values:
        return None
    n = len(values)
    if mode == "reference":
        weights = [math.exp(-REFERENCE_DECAY * i) for i in range(n)]
        mapped = [reference_value(s) for s in values]
        return 10.0 * sum(w * m for w, m in zip(weights, mapped, strict=True)) / sum(weights)
    if mode == "paper":
        weights = [math.exp(-i / n) for i in range(n)]
        normed = [max(0.0, (s - 1.0) / 3.0) for s in values]
        return 100.0 * sum(w * m for w, m in zip(weights, normed, strict=True)) / sum(weights)
    raise ValueError(f"score: unknown mode {mode!r}; use 'reference' or 'paper'")


def vote_scores(values: Sequence[int], method: Literal["majority", "mean"]) -> float:
    """Combine several evaluators' scores for one aspect.

    majority: the most frequent score; a tie goes to the lowest of the tied scores (the cautious
    reading). mean: the arithmetic mean (a fractional score).
    """
    if not values:
        raise ValueError("vote_scores: no scores to combine")
    if method == "mean":
        return float(sum(values)) / len(values)
    counts = Counter(values)
    top = max(counts.values())
    return float(min(v for v, c in counts.items() if c == top))


def vote_stop(decisions: Sequence[tuple[bool, str]]) -> tuple[bool, str]:
    """Stop when more than half of the evaluators say so; the reason is the most common among them
    (ties: alphabetical)."""
    stops = [reason for stop, reason in decisions if stop]
    if 2 * len(stops) <= len(decisions):
        return False, "none"
    counts = Counter(stops)
    top = max(counts.values())
    return True, min(r for r, c in counts.items() if c == top)


def contamination(
    names: Sequence[str],
    static_accuracy: Sequence[float],
    kieval: Sequence[float],
    *,
    z: float = 1.5,
) -> dict[str, Any]:
    """Regress KIEval score (0-100) on static multiple-choice accuracy (0-1, fitted as 0-100) across
    candidates and flag those far below the line ("high static accuracy, weak conversation").

    Rule: ordinary least squares over all candidates; each candidate's residual is divided by the
    residual SD of the fit WITHOUT that candidate and by sqrt(1 - leverage) (the externally studentised
    residual). A candidate is flagged when that value is below -z. Leaving the candidate out matters: a
    contaminated model sits at high static accuracy, where it pulls an all-candidate line towards itself
    and would hide. The line needs >= 3 candidates with both numbers and static accuracies that are not
    all equal; the studentised residuals, and so any flag, need >= 4. Values are capped at +-999 (the
    other candidates lie exactly on a line).
    """
    rule = (
        f"OLS of KIEval score on static accuracy (%); flagged when the externally studentised residual "
        f"(residual / (residual SD without the candidate x sqrt(1 - leverage))) is below -{z:g}"
    )
    n = len(names)
    if not (n == len(static_accuracy) == len(kieval)):
        raise ValueError("contamination: names, static_accuracy and kieval must have the same length")
    base: dict[str, Any] = {"applicable": False, "n": n, "rule": rule, "z": z, "flagged": []}
    if n < 3:
        return {**base, "reason": f"needs at least 3 candidates with both scores, have {n}"}
    x = 100.0 * np.asarray(static_accuracy, dtype=float)
    y = np.asarray(kieval, dtype=float)
    if float(np.ptp(x)) == 0.0:
        return {**base, "reason": "every candidate has the same static accuracy; no line can be fitted"}
    xm, ym = float(x.mean()), float(y.mean())
    sxx = float(((x - xm) ** 2).sum())
    slope = float(((x - xm) * (y - ym)).sum() / sxx)
    intercept = ym - slope * xm
    predicted = intercept + slope * x
    resid = y - predicted
    sse = float((resid**2).sum())
    leverage = 1.0 / n + (x - xm) ** 2 / sxx
    ss_tot = float(((y - ym) ** 2).sum())
    points = []
    for i, name in enumerate(names):
        zi: float | None = None
        if n >= 4:
            one_minus_h = max(1e-12, 1.0 - float(leverage[i]))
            sse_without = sse - float(resid[i]) ** 2 / one_minus_h
            var_without = max(0.0, sse_without) / (n - 3)
            denom = math.sqrt(var_without * one_minus_h)
            if denom > 1e-9:
                zi = max(-999.0, min(999.0, float(resid[i]) / denom))
            else:
                zi = 0.0 if abs(float(resid[i])) < 1e-9 else math.copysign(999.0, float(resid[i]))
        points.append(
            {
                "candidate": name,
                "static_accuracy": float(static_accuracy[i]),
                "kieval": float(y[i]),
                "predicted": float(predicted[i]),
                "residual": float(resid[i]),
                "leverage": float(leverage[i]),
                "z": zi,
                "flagged": bool(zi is not None and zi < -z),
            }
        )
    return {
        **base,
        "applicable": True,
        "slope": slope,
        "intercept": intercept,
        "r2": 1.0 - sse / ss_tot if ss_tot > 0 else None,
        "residual_sd": math.sqrt(sse / (n - 2)),
        "points": points,
        "flagged": [p["candidate"] for p in points if p["flagged"]],
        "note": None
        if n >= 4
        else "flags need at least 4 candidates (the residual SD without one candidate)",
    }
