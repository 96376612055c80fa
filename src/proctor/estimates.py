"""The one estimate type: a value with its 95 % interval, the number of observations, and how the
interval was made. results.json, the store's metrics table and every report table show `Estimate`s, so
a number never appears without its interval and rounding is the same everywhere (6 decimals).

One constructor per interval kind:

* `Estimate.proportion(k, n)` — Wilson score interval (binary verdicts: accuracy, coverage);
* `Estimate.mean(values, bounds=...)` — Student-t interval of a mean (F1, scores), clipped to `bounds`;
* `Estimate.bootstrap(values, rng)` — percentile bootstrap of a mean with the run's seeded generator.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from proctor.judging.stats import mean_ci, wilson_interval

DIGITS = 6
Method = Literal["wilson", "t", "bootstrap", "none"]


def _round(x: float | None) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return round(float(x), DIGITS)


class Estimate(BaseModel):
    """A value with its interval; `value` is None when there was nothing to estimate from (n = 0)."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0
    method: Method = "none"
    k: int | None = None  # successes, for a proportion

    @model_serializer(mode="wrap")
    def _without_empty_k(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """`k` is shown for proportions only."""
        data: dict[str, Any] = handler(self)
        if data.get("k") is None:
            data.pop("k", None)
        return data

    @classmethod
    def proportion(cls, successes: int, n: int) -> Estimate:
        """Share of successes, Wilson interval; no value (and no interval) when n == 0."""
        if n == 0:
            return cls(value=None, n=0, method="wilson", k=0)
        lo, hi = wilson_interval(successes, n)
        return cls(
            value=_round(successes / n), lo=_round(lo), hi=_round(hi), n=n, method="wilson", k=successes
        )

    @classmethod
    def mean(cls, values: Iterable[float], *, bounds: tuple[float, float] | None = None) -> Estimate:
        """Mean with a Student-t interval; `bounds` clips the interval to the metric's range (a t-interval
        on few items can spill over, e.g. below 0 for F1). One value has no interval."""
        xs = [float(v) for v in values]
        if not xs:
            return cls(value=None, n=0, method="t")
        m, lo, hi = mean_ci(xs)
        return cls._make(m, lo, hi, len(xs), "t", bounds)

    @classmethod
    def bootstrap(
        cls, values: Iterable[float], rng: np.random.Generator, *, bounds: tuple[float, float] | None = None
    ) -> Estimate:
        """Mean with a percentile-bootstrap interval drawn with the run's seeded generator."""
        xs = [float(v) for v in values]
        if not xs:
            return cls(value=None, n=0, method="bootstrap")
        m, lo, hi = mean_ci(xs, method="bootstrap", rng=rng)
        return cls._make(m, lo, hi, len(xs), "bootstrap", bounds)

    @classmethod
    def point(cls, value: float | None, n: int = 0) -> Estimate:
        """A value without an interval (e.g. a ratio of totals)."""
        return cls(value=_round(value), n=n, method="none")

    @classmethod
    def _make(
        cls, m: float, lo: float, hi: float, n: int, method: Method, bounds: tuple[float, float] | None
    ) -> Estimate:
        if bounds is not None:
            lo = lo if not math.isfinite(lo) else max(bounds[0], lo)
            hi = hi if not math.isfinite(hi) else min(bounds[1], hi)
        return cls(value=_round(m), lo=_round(lo), hi=_round(hi), n=n, method=method)

    def text(self, digits: int = 2) -> str:
        """`0.83 [0.55, 0.95] n=12`, or a dash without a value: the one console/table rendering."""
        if self.value is None:
            return "—"
        if self.lo is None or self.hi is None:
            return f"{self.value:.{digits}f} n={self.n}"
        return f"{self.value:.{digits}f} [{self.lo:.{digits}f}, {self.hi:.{digits}f}] n={self.n}"
