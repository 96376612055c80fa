"""Clustering embedded texts into thematic groups (scikit-learn): RECKON's knowledge units, the exam's
chunk sampling by topic.

Number of clusters. With `k_selection: target_size` (default), k = max(1, round(n / target_cluster_size)),
so clusters hold about `target_cluster_size` units and one question never has to cover too many facts.
With `k_selection: silhouette`, every k from 2 to min(n - 1, max(2 * that k, sqrt(n) + 1)) is tried (at most
30 more than 2 * that k) and the k with the best mean silhouette (cosine; on a sample of 2,000 units for
large inputs) wins — a quality criterion for corpora whose topics are very uneven.
Either way, a cluster larger than `max_cluster_size` (default 2 x target) is split in two (2-means)
until it fits.

Methods. `kmeans` (k-means++, 10 restarts); `minibatch` (MiniBatchKMeans, for large inputs); `agglomerative`
(hierarchical, Ward linkage on the unit-normalised vectors, deterministic); `auto` = kmeans below
`minibatch_above` units, MiniBatchKMeans from there on. Random states derive from the run's seed.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.cluster import AgglomerativeClustering, KMeans, MiniBatchKMeans
from sklearn.decomposition import PCA
from sklearn.metrics import silhouette_score


def k_from_target(n: int, target: float) -> int:
    """k = max(1, round(n / target)), never more than n (half-up rounding)."""
    return max(1, min(n, int(n / target + 0.5)))


def _labels(x: np.ndarray, k: int, method: str, seed: int) -> np.ndarray:
    if k <= 1 or len(x) <= 1:
        return np.zeros(len(x), dtype=int)
    if len(np.unique(x, axis=0)) < k:  # fewer distinct points than clusters: k-means would warn and fail
        k = len(np.unique(x, axis=0))
        if k <= 1:
            return np.zeros(len(x), dtype=int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if method == "agglomerative":
            return AgglomerativeClustering(n_clusters=k, linkage="ward").fit_predict(x)
        if method == "minibatch":
            return MiniBatchKMeans(n_clusters=k, random_state=seed, n_init=3, batch_size=1024).fit_predict(x)
        return KMeans(n_clusters=k, random_state=seed, n_init=10).fit_predict(x)


def _method(method: str, n: int, minibatch_above: int) -> str:
    if method == "auto":
        return "minibatch" if n >= minibatch_above else "kmeans"
    return method


def choose_k(x: np.ndarray, target: float, selection: str, method: str, seed: int) -> int:
    n = len(x)
    k0 = k_from_target(n, target)
    if selection != "silhouette" or n < 4:
        return k0
    best_k, best = k0, -2.0
    top = min(n - 1, max(2 * k0, int(math.sqrt(n)) + 1), 2 * k0 + 30)
    for k in range(2, max(2, top) + 1):
        labels = _labels(x, k, method, seed)
        if len(set(labels.tolist())) < 2:
            continue
        score = float(
            silhouette_score(x, labels, metric="cosine", sample_size=min(n, 2000), random_state=seed)
        )
        if score > best + 1e-9:
            best_k, best = k, score
    return best_k


def cluster(
    x: np.ndarray,
    *,
    target: float,
    cap: int,
    method: str = "auto",
    selection: str = "target_size",
    minibatch_above: int = 2000,
    seed: int = 0,
) -> list[list[int]]:
    """Row indices of `x` grouped into clusters, ordered by each cluster's first index (deterministic)."""
    n = len(x)
    if n == 0:
        return []
    m = _method(method, n, minibatch_above)
    k = choose_k(x, target, selection, m, seed)
    labels = _labels(x, k, m, seed)
    groups: dict[int, list[int]] = {}
    for i, lab in enumerate(labels.tolist()):
        groups.setdefault(int(lab), []).append(i)
    out: list[list[int]] = []
    todo = sorted(groups.values(), key=lambda g: g[0])
    while todo:
        g = todo.pop(0)
        if len(g) <= cap:
            out.append(g)
            continue
        sub = _labels(x[g], 2, "kmeans" if m != "agglomerative" else m, seed)
        halves = [[g[i] for i in range(len(g)) if sub[i] == lab] for lab in (0, 1)]
        if min(len(h) for h in halves) == 0:  # identical points: split by position
            halves = [g[: len(g) // 2], g[len(g) // 2 :]]
        todo.extend(halves)
    return sorted(out, key=lambda g: g[0])


def map_2d(x: np.ndarray) -> np.ndarray:
    """PCA projection of the unit vectors for the report's map (n x 2; zeros when n < 2)."""
    if len(x) < 2:
        return np.zeros((len(x), 2))
    comps = min(2, len(x), x.shape[1])
    xy = PCA(n_components=comps, svd_solver="full").fit_transform(x)
    if comps < 2:
        xy = np.hstack([xy, np.zeros((len(x), 2 - comps))])
    return xy
