"""Confidence intervals for reported scores.

* `wilson_interval` — for a proportion (accuracy from binary verdicts). Unlike the normal
  approximation it stays inside [0, 1] and behaves at 0 and n successes.
* `mean_ci` — for the mean of per-item scores (e.g. F1). The default is the Student-t interval
  (deterministic, no randomness needed). ``method="bootstrap"`` gives a percentile bootstrap; it
  needs the run's seeded ``numpy.random.Generator`` so results stay reproducible.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Literal

import numpy as np
from scipy import stats as _st


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for `successes` out of `n` trials; (0.0, 1.0) when n == 0."""
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = (z / denom) * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    lo = 0.0 if successes == 0 else max(0.0, centre - half)
    hi = 1.0 if successes == n else min(1.0, centre + half)
    return lo, hi


def mean_ci(
    values: Iterable[float],
    *,
    confidence: float = 0.95,
    method: Literal["t", "bootstrap"] = "t",
    rng: np.random.Generator | None = None,
    n_boot: int = 2000,
) -> tuple[float, float, float]:
    """(mean, lo, hi) of `values` at the given confidence level.

    Empty input gives (nan, nan, nan); a single value gives (value, nan, nan) because one
    observation says nothing about spread. Non-finite values raise ValueError.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    x = np.asarray(list(values), dtype=float)
    if not np.all(np.isfinite(x)):
        raise ValueError("mean_ci: values must be finite numbers")
    n = x.size
    if n == 0:
        return math.nan, math.nan, math.nan
    mean = float(x.mean())
    if n == 1:
        return mean, math.nan, math.nan
    alpha = 1.0 - confidence
    if method == "t":
        sem = float(x.std(ddof=1)) / math.sqrt(n)
        if sem == 0.0:
            return mean, mean, mean
        half = float(_st.t.ppf(1.0 - alpha / 2, df=n - 1)) * sem
        return mean, mean - half, mean + half
    if method == "bootstrap":
        if rng is None:
            raise ValueError("mean_ci(method='bootstrap') needs rng=<the run's numpy Generator>")
        block = max(1, 2_000_000 // n)  # bound memory of the resample index matrix
        boot = np.concatenate(
            [
                x[rng.integers(0, n, size=(min(block, n_boot - i), n))].mean(axis=1)
                for i in range(0, n_boot, block)
            ]
        )
        lo, hi = np.quantile(boot, [alpha / 2, 1.0 - alpha / 2])
        return mean, float(lo), float(hi)
    raise ValueError(f"mean_ci: unknown method {method!r}; use 't' or 'bootstrap'")
