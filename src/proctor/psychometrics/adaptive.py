"""Computerised adaptive testing on a calibrated exam.

Each step asks the unused item with the largest Fisher information at the current ability
estimate, then re-estimates ability by EAP under a N(0, 1) prior (finite from the first answer on,
unlike maximum likelihood after all-correct starts) and stops once the posterior SD reaches
``se_target`` or the item budget is spent. The posterior is kept on a fixed grid and updated in
place, so one step costs O(items + grid).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ._core import log_probs
from .information import ItemParams, information_arrays, item_arrays

AnswerFn = Callable[[int], "bool | int | float | None"]


@dataclass(frozen=True)
class AdaptiveResult:
    """Items asked (column indices, in order), answers, and the ability trajectory."""

    items: list[int]
    item_ids: list[Any]
    responses: list[int]
    theta: float
    se: float
    theta_path: list[float]  # estimate after each answer
    se_path: list[float]
    stop_reason: str  # "se_target", "max_items" or "exhausted"

    @property
    def n_items(self) -> int:
        return len(self.items)


@dataclass(frozen=True)
class AdaptiveSimulation:
    """An adaptive run replayed from a full response row, compared with the full-exam estimate."""

    result: AdaptiveResult
    full_theta: float
    full_se: float
    n_available: int
    fraction_items: float
    abs_diff: float
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def within_se(self) -> bool:
        """|adaptive - full| <= the adaptive estimate's SE."""
        return self.abs_diff <= self.result.se

    @property
    def within_full_se(self) -> bool:
        """|adaptive - full| <= the full exam's SE (a much stricter bar)."""
        return self.abs_diff <= self.full_se


def _grid(prior: tuple[float, float], n: int = 401) -> np.ndarray:
    mu, sd = prior
    return mu + sd * np.linspace(-7.0, 7.0, n)


def _eap(logpost: np.ndarray, grid: np.ndarray) -> tuple[float, float]:
    w = np.exp(logpost - logpost.max())
    w /= w.sum()
    m = float(w @ grid)
    return m, float(np.sqrt(max(float(w @ grid**2) - m * m, 0.0)))


def adaptive_test(
    fit: ItemParams,
    answer_fn: AnswerFn,
    *,
    start_theta: float = 0.0,
    se_target: float = 0.3,
    max_items: int | None = None,
    min_items: int = 1,
    prior: tuple[float, float] = (0.0, 1.0),
    available: Sequence[int] | np.ndarray | None = None,
) -> AdaptiveResult:
    """Run one adaptive test. ``answer_fn(item_index)`` returns 1/0 (True/False), or None to skip.

    ``start_theta`` is where the first item is chosen; ``available`` restricts the item pool.
    """
    if se_target <= 0:
        raise ValueError(f"se_target must be > 0, got {se_target}")
    if prior[1] <= 0:
        raise ValueError("prior sd must be > 0")
    a, b, c = item_arrays(fit)
    n_items = a.shape[0]
    pool = np.zeros(n_items, dtype=bool)
    pool[np.arange(n_items) if available is None else np.asarray(available, dtype=int)] = True
    budget = int(pool.sum()) if max_items is None else min(int(max_items), int(pool.sum()))
    if min_items < 0:
        raise ValueError(f"min_items must be >= 0, got {min_items}")
    grid = _grid(prior)
    logp, log1mp = log_probs(grid, a, b, c)
    logpost = -0.5 * ((grid - prior[0]) / prior[1]) ** 2
    theta, se = float(start_theta), float(prior[1])
    ids = fit.item_ids if fit.item_ids is not None else list(range(n_items))
    items: list[int] = []
    answers: list[int] = []
    theta_path: list[float] = []
    se_path: list[float] = []
    stop = "exhausted"
    while pool.any():
        if len(items) >= budget:
            stop = "max_items"
            break
        info = information_arrays(a, b, c, np.array([theta]))[:, 0]
        info[~pool] = -np.inf
        j = int(np.argmax(info))
        pool[j] = False
        ans = answer_fn(j)
        if ans is None or (isinstance(ans, float) and np.isnan(ans)):
            continue
        y = int(bool(ans))
        logpost = logpost + (logp[j] if y else log1mp[j])
        theta, se = _eap(logpost, grid)
        items.append(j)
        answers.append(y)
        theta_path.append(theta)
        se_path.append(se)
        if se <= se_target and len(items) >= min_items:
            stop = "se_target"
            break
    return AdaptiveResult(
        items=items,
        item_ids=[ids[i] for i in items],
        responses=answers,
        theta=theta,
        se=se,
        theta_path=theta_path,
        se_path=se_path,
        stop_reason=stop,
    )


def simulate_adaptive(
    fit: ItemParams,
    responses_row: Sequence[float] | np.ndarray,
    *,
    start_theta: float = 0.0,
    se_target: float = 0.3,
    max_items: int | None = None,
    min_items: int = 1,
    prior: tuple[float, float] = (0.0, 1.0),
) -> AdaptiveSimulation:
    """Replay an adaptive test from one subject's full response row (NaN = item not available).

    The full-exam estimate uses the same EAP and prior on every answered item, so the difference
    measures only what the adaptive stopping rule gives up.
    """
    row = np.asarray(responses_row, dtype=float)
    a, b, c = item_arrays(fit)
    if row.shape != a.shape:
        raise ValueError(f"responses_row has {row.shape} entries, the fit has {a.shape[0]} items")
    observed = ~np.isnan(row)
    grid = _grid(prior)
    logp, log1mp = log_probs(grid, a, b, c)
    y = np.where(observed, row, 0.0)
    logpost = -0.5 * ((grid - prior[0]) / prior[1]) ** 2 + y @ logp + (observed - y) @ log1mp
    full_theta, full_se = _eap(logpost, grid)
    res = adaptive_test(
        fit,
        lambda j: float(row[j]),
        start_theta=start_theta,
        se_target=se_target,
        max_items=max_items,
        min_items=min_items,
        prior=prior,
        available=np.flatnonzero(observed),
    )
    n_av = int(observed.sum())
    return AdaptiveSimulation(
        result=res,
        full_theta=full_theta,
        full_se=full_se,
        n_available=n_av,
        fraction_items=res.n_items / n_av if n_av else 0.0,
        abs_diff=abs(res.theta - full_theta),
    )
