"""Simulated response matrices with known parameters, for recovery tests and benchmarks."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._core import prob


def simulate_responses(
    ability: Sequence[float] | np.ndarray,
    discrimination: Sequence[float] | np.ndarray,
    difficulty: Sequence[float] | np.ndarray,
    guessing: Sequence[float] | np.ndarray | float | None = None,
    *,
    missing: float = 0.0,
    rng: np.random.Generator | int | None = None,
) -> np.ndarray:
    """Draw a subjects x items 0/1 matrix from the 3PL (c = 0 gives the 2PL); NaN marks missing.

    ``missing`` is the probability that a cell is missing completely at random.
    """
    gen = np.random.default_rng(rng)
    theta = np.asarray(ability, dtype=float)
    a = np.asarray(discrimination, dtype=float)
    b = np.asarray(difficulty, dtype=float)
    c = None if guessing is None else np.broadcast_to(np.asarray(guessing, dtype=float), a.shape)
    p = prob(theta, a, b, c).T
    y = (gen.random(p.shape) < p).astype(float)
    if missing > 0:
        y[gen.random(p.shape) < missing] = np.nan
    return y
