"""Fisher information of items and of a test: how precisely an exam measures ability at each level.

For the 3PL, I(theta) = a^2 (P - c)^2 / (1 - c)^2 * (1 - P) / P (Birnbaum); with c = 0 it reduces to
a^2 P (1 - P), so a 2PL item carries a^2 / 4 at theta = b. Test information is the sum over items and
1 / sqrt(test information) is the standard error of a maximum-likelihood ability estimate.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
from scipy.special import expit

from ._core import prob


class ItemParams(Protocol):
    """Anything carrying fitted item parameters (IRTFit, HierarchicalFit)."""

    @property
    def discrimination(self) -> np.ndarray: ...
    @property
    def difficulty(self) -> np.ndarray: ...
    @property
    def guessing(self) -> np.ndarray: ...
    @property
    def item_ids(self) -> list[Any] | None: ...


def item_arrays(fit: ItemParams) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(a, b, c or None) as float arrays; c is None when no item has a guessing floor."""
    a = np.asarray(fit.discrimination, dtype=float)
    b = np.asarray(fit.difficulty, dtype=float)
    c = np.asarray(fit.guessing, dtype=float)
    return a, b, (c if np.any(c > 0) else None)


def information_arrays(a: np.ndarray, b: np.ndarray, c: np.ndarray | None, theta: np.ndarray) -> np.ndarray:
    """Item information, items x len(theta), from raw parameter arrays."""
    pstar = expit(a[:, None] * (theta[None, :] - b[:, None]))
    if c is None:
        return a[:, None] ** 2 * pstar * (1.0 - pstar)
    cc = c[:, None]
    p = cc + (1.0 - cc) * pstar
    # a^2 P*^2 (1 - P) / P with (1 - P) = (1 - c)(1 - P*): no cancellation near P = c.
    return a[:, None] ** 2 * pstar**2 * (1.0 - cc) * (1.0 - pstar) / p


def item_characteristic(
    theta: float | Sequence[float] | np.ndarray,
    difficulty: float,
    discrimination: float = 1.0,
    guessing: float = 0.0,
) -> np.ndarray:
    """One item's characteristic curve P(correct | theta) = c + (1 - c) / (1 + exp(-a (theta - b))), from
    its stored 1PL / 2PL / 3PL parameters (a = 1 and c = 0 where the model has none)."""
    t = np.atleast_1d(np.asarray(theta, dtype=float))
    a, b, c = np.array([discrimination], float), np.array([difficulty], float), np.array([guessing], float)
    return np.asarray(prob(t, a, b, c if guessing > 0 else None)[0])


def item_information(fit: ItemParams, theta: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """Fisher information of each item at each ability: array items x len(theta)."""
    t = np.atleast_1d(np.asarray(theta, dtype=float))
    a, b, c = item_arrays(fit)
    return information_arrays(a, b, c, t)


def resolve_items(fit: ItemParams, items: Sequence[Any] | np.ndarray | None) -> np.ndarray:
    """Turn a selection (indices, boolean mask or item ids) into integer column indices."""
    n = len(np.asarray(fit.difficulty))
    if items is None:
        return np.arange(n)
    sel = np.asarray(items)
    if sel.dtype == bool:
        if sel.shape != (n,):
            raise ValueError(f"a boolean item mask needs {n} entries, got {sel.shape}")
        return np.flatnonzero(sel)
    if sel.size and np.issubdtype(sel.dtype, np.integer):
        if sel.min() < -n or sel.max() >= n:
            raise ValueError(f"item index out of range for {n} items")
        return sel.astype(int) % n
    ids = fit.item_ids
    if ids is None:
        if sel.size == 0:
            return np.zeros(0, dtype=int)
        raise ValueError("items given as labels, but the fit has no item_ids")
    pos = {k: i for i, k in enumerate(ids)}
    missing = [k for k in sel.tolist() if k not in pos]
    if missing:
        raise ValueError(f"unknown item ids: {missing[:5]}")
    return np.array([pos[k] for k in sel.tolist()], dtype=int)


def test_information(
    fit: ItemParams,
    theta: float | Sequence[float] | np.ndarray,
    items: Sequence[Any] | np.ndarray | None = None,
) -> np.ndarray:
    """Sum of item information over ``items`` (indices, mask or ids; default all), per theta."""
    idx = resolve_items(fit, items)
    return item_information(fit, theta)[idx].sum(axis=0)


# pytest would try to collect a module-level name starting with "test_" from a test's namespace.
test_information.__test__ = False  # type: ignore[attr-defined]
