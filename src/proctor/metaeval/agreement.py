"""Agreement statistics, the one implementation behind every meta-evaluation (`proctor view`,
`proctor metaeval RUN_DIR`, reckon's report): between two raters over the same items, accuracy, Cohen's
kappa with a bootstrap interval and the confusion matrix; among many raters, Fleiss' kappa and
Krippendorff's alpha; between a method's scores and the labels as numbers, Pearson, Spearman and Kendall.
Labels are strings from a fixed category list."""

from __future__ import annotations

import warnings
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
    """Cohen's kappa, (p_o - p_e) / (1 - p_e); None without items or when neither rater varies (each used
    one category only: one non-zero cell, which includes p_e = 1)."""
    n = cm.sum()
    if np.count_nonzero(cm) <= 1:
        return None
    po = np.trace(cm) / n
    pe = float((cm.sum(axis=1) * cm.sum(axis=0)).sum()) / float(n * n)
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
    resamples where kappa is undefined are left out), and the confusion matrix (rows: `reference`)."""
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
        valid = np.count_nonzero(counts.reshape(resamples, k * k), axis=1) > 1
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


# --- many raters -------------------------------------------------------------------------------------
@dataclass
class GroupAgreement:
    """Agreement among all annotators on the items at least two of them labelled."""

    annotators: int
    items: int  # items with >= 2 labels
    labels: int  # labels on those items
    categories: list[str]
    fleiss_kappa: float | None
    krippendorff_alpha: float | None


def rating_counts(ratings: Sequence[Sequence[str]], categories: Sequence[str]) -> np.ndarray:
    """items x categories: how many raters put each item in each category (one list of labels per item;
    labels outside `categories` are ignored)."""
    idx = {c: i for i, c in enumerate(categories)}
    counts = np.zeros((len(ratings), len(categories)), dtype=np.int64)
    for row, labels in zip(counts, ratings, strict=True):
        for lab in labels:
            if lab in idx:
                row[idx[lab]] += 1
    return counts


def fleiss_kappa(counts: np.ndarray) -> float | None:
    """Fleiss' kappa from an items x categories count matrix; items rated by fewer than two raters are
    left out, and items may have different numbers of raters (per-item agreement
    P_i = (sum_j n_ij^2 - n_i) / (n_i (n_i - 1)), P = mean P_i, P_e = sum_j p_j^2 with p_j the share of all
    ratings in category j; kappa = (P - P_e) / (1 - P_e)). None without items or when P_e = 1."""
    counts = np.asarray(counts, dtype=float)
    n_i = counts.sum(axis=1)
    counts, n_i = counts[n_i >= 2], n_i[n_i >= 2]
    if len(n_i) == 0:
        return None
    p_item = ((counts**2).sum(axis=1) - n_i) / (n_i * (n_i - 1))
    p_cat = counts.sum(axis=0) / n_i.sum()
    pe = float((p_cat**2).sum())
    if np.isclose(pe, 1.0):
        return None
    return float((p_item.mean() - pe) / (1.0 - pe))


def krippendorff_alpha(counts: np.ndarray) -> float | None:
    """Krippendorff's alpha for nominal data from an items x categories count matrix (missing ratings are
    simply absent from a row; items with fewer than two ratings are not pairable and left out).
    Coincidences o_ck = sum_u n_uc (n_uk - [c = k]) / (m_u - 1); alpha = 1 - D_o / D_e with
    D_o = sum_{c != k} o_ck and D_e = sum_{c != k} n_c n_k / (n - 1). None when D_e = 0 (one category)."""
    counts = np.asarray(counts, dtype=float)
    m = counts.sum(axis=1)
    counts, m = counts[m >= 2], m[m >= 2]
    if len(m) == 0:
        return None
    weighted = counts / (m - 1)[:, None]
    coincidence = weighted.T @ counts - np.diag(weighted.sum(axis=0))
    n_c = coincidence.sum(axis=0)
    n = n_c.sum()
    observed = coincidence.sum() - np.trace(coincidence)
    expected = (n**2 - (n_c**2).sum()) / (n - 1)
    if np.isclose(expected, 0.0):
        return None
    return float(1.0 - observed / expected)


def group_agreement(per_rater: dict[str, dict[str, str]], categories: Sequence[str]) -> GroupAgreement:
    """Fleiss' kappa and Krippendorff's alpha among raters ({rater: {item: label}}) over the items two or
    more of them put in `categories`."""
    items: dict[str, list[str]] = {}
    for labels in per_rater.values():
        for item, lab in labels.items():
            if lab in categories:
                items.setdefault(item, []).append(lab)
    shared = [labs for labs in items.values() if len(labs) >= 2]
    counts = rating_counts(shared, categories)
    return GroupAgreement(
        annotators=len(per_rater),
        items=len(shared),
        labels=int(counts.sum()),
        categories=list(categories),
        fleiss_kappa=fleiss_kappa(counts),
        krippendorff_alpha=krippendorff_alpha(counts),
    )


# --- scores against labels -----------------------------------------------------------------------------
@dataclass
class Correlation:
    """Spearman's rank correlation between a method's numeric score and the human label as a number."""

    n: int
    rho: float | None
    p: float | None


@dataclass
class Correlations:
    """Pearson's r, Spearman's rho and Kendall's tau-b between two paired series."""

    n: int
    pearson: float | None
    spearman: float | None
    kendall: float | None


def _pairs(scores: Sequence[float], labels: Sequence[float]) -> tuple[np.ndarray, np.ndarray] | None:
    """The two series as arrays, or None when a correlation is undefined: below three pairs or either side
    constant."""
    x, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=float)
    if len(x) != len(y):
        raise ValueError("scores and labels must pair up")
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return x, y


def _finite(value: float) -> float | None:
    return None if np.isnan(value) else float(value)


def spearman(scores: Sequence[float], labels: Sequence[float]) -> Correlation:
    """rho and its p-value (scipy); undefined (None) below three pairs or when either side is constant."""
    from scipy.stats import spearmanr

    xy = _pairs(scores, labels)
    if xy is None:
        return Correlation(len(scores), None, None)
    res = spearmanr(*xy)
    return Correlation(len(scores), _finite(float(res.statistic)), _finite(float(res.pvalue)))


def correlations(scores: Sequence[float], labels: Sequence[float]) -> Correlations:
    """Pearson, Spearman and Kendall (tau-b) coefficients (scipy); each undefined (None) below three pairs
    or when either side is constant."""
    from scipy.stats import kendalltau, pearsonr

    xy = _pairs(scores, labels)
    if xy is None:
        return Correlations(len(scores), None, None, None)
    with warnings.catch_warnings():  # near-constant input: the coefficient is still returned
        warnings.simplefilter("ignore")
        return Correlations(
            len(scores),
            pearson=_finite(float(pearsonr(*xy).statistic)),
            spearman=spearman(scores, labels).rho,
            kendall=_finite(float(kendalltau(*xy).statistic)),
        )
