"""Iterative exam improvement: refit, drop the least discriminating items, refit on what remains.

Each step fits the model on the current columns only, ranks the items by discrimination and drops
the lowest ``drop_fraction``. The kept columns are tracked as indices into the original matrix,
so item ids and parameters always refer to the same questions (the published implementation
refit on a matrix whose columns no longer matched its item list, and dropped one item a step).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ._core import as_responses
from .information import test_information
from .irt import IRTFit, fit_irt


@dataclass(frozen=True)
class PruneStep:
    """One fit-and-drop step; information curves are on ``PruneResult.theta_grid``."""

    step: int
    item_index: np.ndarray  # columns (of the original matrix) in the exam at this step
    item_ids: list[Any]
    fit: IRTFit  # fit on exactly these columns
    dropped_index: np.ndarray
    dropped_ids: list[Any]
    dropped_discrimination: np.ndarray
    information_before: np.ndarray  # test information of this step's exam (this fit)
    information_after: np.ndarray  # test information of the remaining items after their refit
    mean_information_before: float  # mean over the grid
    mean_information_after: float
    mean_item_information_before: float  # per item: comparable across exams of different length
    mean_item_information_after: float


@dataclass(frozen=True)
class PruneResult:
    """The pruning trajectory and the final exam."""

    theta_grid: np.ndarray
    steps: list[PruneStep]
    kept_index: np.ndarray
    kept_ids: list[Any]
    final_fit: IRTFit
    information_initial: np.ndarray
    information_final: np.ndarray
    stop_reason: str
    info: dict[str, Any] = field(default_factory=dict)


def prune_items(
    responses: Any,
    *,
    model: Literal["1pl", "2pl", "3pl"] = "2pl",
    drop_fraction: float = 0.1,
    steps: int = 3,
    min_items: int = 10,
    item_ids: Sequence[Any] | None = None,
    theta_grid: Sequence[float] | np.ndarray | None = None,
    **fit_kwargs: Any,
) -> PruneResult:
    """Drop the ``drop_fraction`` lowest-discrimination items per step, refitting each time.

    At least one item is dropped per step (when allowed); the exam never shrinks below
    ``min_items``. ``fit_kwargs`` go to `fit_irt` (n_options, priors, bounds, ...). Note that with
    ``model="1pl"`` all items share one discrimination and there is nothing to rank.
    """
    if not 0 < drop_fraction < 1:
        raise ValueError(f"drop_fraction must be in (0, 1), got {drop_fraction}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    if model == "1pl":
        raise ValueError("pruning ranks items by discrimination; the 1PL has one shared value (use 2pl/3pl)")
    resp = as_responses(responses, item_ids)
    data = np.where(resp.observed, resp.correct, np.nan)
    n_items = data.shape[1]
    if min_items < 1 or min_items > n_items:
        raise ValueError(f"min_items must be in [1, {n_items}], got {min_items}")
    ids = resp.item_ids if resp.item_ids is not None else list(range(n_items))
    grid = np.linspace(-4, 4, 81) if theta_grid is None else np.asarray(theta_grid, dtype=float)

    def refit(index: np.ndarray) -> IRTFit:
        return fit_irt(data[:, index], model, item_ids=[ids[i] for i in index], **fit_kwargs)

    index = np.arange(n_items)
    fit = refit(index)
    initial = test_information(fit, grid)
    out: list[PruneStep] = []
    stop = "steps"
    for k in range(steps):
        n_now = index.shape[0]
        n_drop = min(max(1, math.floor(drop_fraction * n_now)), n_now - min_items)
        if n_drop <= 0:
            stop = "min_items"
            break
        order = np.argsort(fit.discrimination, kind="stable")  # positions within the current exam
        drop_pos = np.sort(order[:n_drop])
        keep_pos = np.sort(order[n_drop:])
        new_index = index[keep_pos]
        new_fit = refit(new_index)
        before = test_information(fit, grid)
        after = test_information(new_fit, grid)
        out.append(
            PruneStep(
                step=k + 1,
                item_index=index.copy(),
                item_ids=[ids[i] for i in index],
                fit=fit,
                dropped_index=index[drop_pos],
                dropped_ids=[ids[i] for i in index[drop_pos]],
                dropped_discrimination=fit.discrimination[drop_pos].copy(),
                information_before=before,
                information_after=after,
                mean_information_before=float(before.mean()),
                mean_information_after=float(after.mean()),
                mean_item_information_before=float(before.mean() / n_now),
                mean_item_information_after=float(after.mean() / new_index.shape[0]),
            )
        )
        index, fit = new_index, new_fit
    return PruneResult(
        theta_grid=grid,
        steps=out,
        kept_index=index,
        kept_ids=[ids[i] for i in index],
        final_fit=fit,
        information_initial=initial,
        information_final=test_information(fit, grid),
        stop_reason=stop,
        info={"model": model, "drop_fraction": drop_fraction, "min_items": min_items},
    )
