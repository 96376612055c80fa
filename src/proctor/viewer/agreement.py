"""Agreement statistics between two raters over the same items: accuracy, Cohen's kappa with a bootstrap
interval, and the confusion matrix. Pure numpy; labels are strings from a fixed category list."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


@dataclass
class Agreement:
    n: int
    categories: list[str]
    accuracy: float | None
    kappa: float | None
    kappa_lo: float | None
    kappa_hi: float | None
    # confusion[i][j]: items the reference (human) put in categories[i] and the rater in categories[j]
    confusion: list[list[int]]


def _confusion(ref: np.ndarray, rater: np.ndarray, k: int) -> np.ndarray:
    return np.bincount(ref * k + rater, minlength=k * k).reshape(k, k)


def kappa_from_confusion(cm: np.ndarray) -> float | None:
    """Cohen's kappa, (p_o - p_e) / (1 - p_e); None when p_e = 1 (both raters used one category only)."""
    n = cm.sum()
    if n == 0:
        return None
    po = np.trace(cm) / n
    pe = float((cm.sum(axis=1) * cm.sum(axis=0)).sum()) / float(n * n)
    if np.isclose(pe, 1.0):
        return None
    return float((po - pe) / (1.0 - pe))


def cohen_kappa(reference: Sequence[str], rater: Sequence[str], categories: Sequence[str]) -> float | None:
    idx = {c: i for i, c in enumerate(categories)}
    ref = np.array([idx[x] for x in reference], dtype=np.int64)
    rat = np.array([idx[x] for x in rater], dtype=np.int64)
    return kappa_from_confusion(_confusion(ref, rat, len(categories)))


def agreement(
    reference: Sequence[str],
    rater: Sequence[str],
    categories: Sequence[str],
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> Agreement:
    """Accuracy, kappa and its percentile bootstrap 95% interval (items resampled with replacement;
    resamples where kappa is undefined are left out), and the confusion matrix."""
    if len(reference) != len(rater):
        raise ValueError("reference and rater must label the same items")
    cats = list(categories)
    k = len(cats)
    idx = {c: i for i, c in enumerate(cats)}
    ref = np.array([idx[x] for x in reference], dtype=np.int64)
    rat = np.array([idx[x] for x in rater], dtype=np.int64)
    n = len(ref)
    cm = _confusion(ref, rat, k) if n else np.zeros((k, k), dtype=np.int64)
    kappa = kappa_from_confusion(cm)
    lo = hi = None
    if n >= 2 and kappa is not None:
        rng = np.random.default_rng(seed)
        draws = rng.integers(0, n, size=(resamples, n))
        codes = ref[draws] * k + rat[draws]
        counts = np.apply_along_axis(np.bincount, 1, codes, minlength=k * k).reshape(resamples, k, k)
        total = float(n)
        po = np.trace(counts, axis1=1, axis2=2) / total
        pe = (counts.sum(axis=2) * counts.sum(axis=1)).sum(axis=1) / (total * total)
        valid = ~np.isclose(pe, 1.0)
        if valid.any():
            ks = (po[valid] - pe[valid]) / (1.0 - pe[valid])
            lo, hi = float(np.percentile(ks, 2.5)), float(np.percentile(ks, 97.5))
    return Agreement(
        n=n,
        categories=cats,
        accuracy=float(np.mean(ref == rat)) if n else None,
        kappa=kappa,
        kappa_lo=lo,
        kappa_hi=hi,
        confusion=cm.astype(int).tolist(),
    )
