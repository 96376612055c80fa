"""Hierarchical IRT: a subject's ability is the sum of the abilities of its components.

A RAG pipeline is a combination of factor levels (LLM, retriever, in-context examples); its
ability is theta_s = sum_f eta[f, level_f(s)]. The item side is an ordinary 1PL/2PL/3PL.

Identification. Adding a constant to every level of one factor and subtracting it from
another leaves every theta unchanged, and a common shift of all thetas can be absorbed by the
difficulties; a common scale by the discriminations. So:

* every factor's level effects sum to zero (effects coding; enforced exactly by parametrising each
  factor with an orthonormal basis of the sum-to-zero subspace), so the overall location lives in
  the item difficulties and there is no free intercept;
* with ``identify="standardize"`` the subject abilities are scaled to sd 1 (items rescaled so that
  all predictions are unchanged); ``"none"`` keeps the scale set by the N(0, sd) prior on the effects.

Estimation is joint MAP over the effects and the items (one L-BFGS-B problem with analytic
gradients; the effects are few, so the joint problem is small and well conditioned).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np

from ._core import (
    Bounds,
    ItemSpec,
    Priors,
    as_responses,
    resolve_guessing,
    resolve_priors,
    single_blas_thread,
)
from ._joint import joint_map
from .information import information_arrays
from .irt import IRTFit, _check_common


@dataclass(frozen=True)
class HierarchicalFit:
    """Component abilities per factor level, subject abilities (their sums) and item parameters."""

    model: str
    factors: list[str]
    levels: dict[str, list[Any]]
    components: dict[str, dict[Any, float]]
    component_se: dict[str, dict[Any, float]]
    ability: np.ndarray
    discrimination: np.ndarray
    difficulty: np.ndarray
    guessing: np.ndarray
    loglik: float
    n_iter: int
    converged: bool
    item_ids: list[Any] | None = None
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def n_items(self) -> int:
        return int(self.difficulty.shape[0])

    def ability_of(self, **levels: Any) -> float:
        """Ability of any combination of levels, e.g. ``ability_of(llm="a", retriever="bm25")``."""
        missing = [f for f in self.factors if f not in levels]
        if missing:
            raise ValueError(f"give a level for every factor; missing {missing}")
        return float(sum(self.components[f][levels[f]] for f in self.factors))

    def predict_proba(self, ability: float | Sequence[float] | np.ndarray | None = None) -> np.ndarray:
        """P(correct), subjects x items."""
        return self.as_irt().predict_proba(ability)

    def as_irt(self) -> IRTFit:
        """The fit seen as a plain IRTFit (subject abilities + items), for information and CAT."""
        return IRTFit(
            model=self.model,
            method="hierarchical",
            discrimination=self.discrimination,
            difficulty=self.difficulty,
            guessing=self.guessing,
            ability=self.ability,
            ability_se=np.full_like(self.ability, np.nan),
            loglik=self.loglik,
            n_iter=self.n_iter,
            converged=self.converged,
            item_ids=self.item_ids,
        )


def _contrasts(n_levels: int) -> np.ndarray:
    """Orthonormal basis (L x L-1) of {x : sum(x) = 0}: effects built from it sum to zero exactly."""
    if n_levels < 2:
        return np.zeros((n_levels, 0))
    centred = np.eye(n_levels) - 1.0 / n_levels
    u, _, _ = np.linalg.svd(centred)
    return u[:, : n_levels - 1]


def _design(
    factors: Mapping[str, Sequence[Any]], n_subjects: int
) -> tuple[np.ndarray, list[str], dict[str, list[Any]], list[tuple[str, np.ndarray, slice]]]:
    names = list(factors)
    if not names:
        raise ValueError("factors is empty: give at least one factor (name -> level per subject)")
    blocks, levels, parts = [], {}, []
    col = 0
    for name in names:
        labels = list(factors[name])
        if len(labels) != n_subjects:
            raise ValueError(f"factor {name!r} has {len(labels)} entries; responses has {n_subjects} rows")
        lv = list(dict.fromkeys(labels))
        index = {v: i for i, v in enumerate(lv)}
        onehot = np.zeros((n_subjects, len(lv)))
        onehot[np.arange(n_subjects), [index[v] for v in labels]] = 1.0
        contrast = _contrasts(len(lv))
        blocks.append(onehot @ contrast)
        levels[name] = lv
        parts.append((name, contrast, slice(col, col + contrast.shape[1])))
        col += contrast.shape[1]
    return np.hstack(blocks), names, levels, parts


@single_blas_thread
def fit_hierarchical(
    responses: Any,
    factors: Mapping[str, Sequence[Any]],
    *,
    model: Literal["1pl", "2pl", "3pl"] = "2pl",
    n_options: int | None = None,
    guessing: Literal["fixed", "estimate"] | None = None,
    bounds: Bounds | None = None,
    priors: Priors | Literal["default", "none"] | None = None,
    identify: Literal["standardize", "none"] = "standardize",
    max_iter: int = 5000,
    tol: float = 1e-5,
    item_ids: Sequence[Any] | None = None,
) -> HierarchicalFit:
    """Fit theta_s = sum_f eta[f, level_f(s)] jointly with the item parameters.

    ``factors`` maps a factor name to one level label per subject row. ``priors.ability`` gives
    the N(0, sd) prior of each level effect (its mean is ignored: effects are centred).
    Component SEs treat the items as known (test information at each subject's ability).
    """
    _check_common(identify, max_iter, tol)
    resp = as_responses(responses, item_ids)
    n_sub, n_items = resp.shape
    design, names, levels, parts = _design(factors, n_sub)
    pri = resolve_priors(priors)
    fixed_c, est_c = resolve_guessing(model, n_items, n_options, guessing)
    spec = ItemSpec(model, n_items, bounds or Bounds(), fixed_c, est_c)
    gbeta = pri.guessing_beta(n_options) if est_c else None
    u_prior = None if pri.ability is None else (0.0, pri.ability[1])
    u, x, loglik, nit, ok = joint_map(resp, spec, pri, gbeta, n_options, design, u_prior, max_iter, tol)
    a, b, c = spec.unpack(x)
    theta = design @ u
    if identify == "standardize":
        s = float(theta.std())
        if np.isfinite(s) and s > 1e-9:
            u, theta, a, b = u / s, theta / s, a * s, b / s
    # Component SEs: Cov(u) = (D' diag(I_s) D + prior)^-1, items held at their estimates.
    obs_t = resp.observed.T.astype(float)
    info_s = (information_arrays(a, b, c, theta) * obs_t).sum(axis=0)
    prec = design.T @ (design * info_s[:, None])
    if u_prior is not None:
        prec += np.eye(prec.shape[0]) / u_prior[1] ** 2
    cov = np.linalg.pinv(prec) if prec.size else prec
    components: dict[str, dict[Any, float]] = {}
    comp_se: dict[str, dict[Any, float]] = {}
    for name, contrast, sl in parts:
        eta = contrast @ u[sl]
        var = np.einsum("ij,jk,ik->i", contrast, cov[sl, sl], contrast) if contrast.size else np.zeros(1)
        components[name] = {lv: float(e) for lv, e in zip(levels[name], eta, strict=True)}
        comp_se[name] = {lv: float(np.sqrt(max(v, 0.0))) for lv, v in zip(levels[name], var, strict=True)}
    return HierarchicalFit(
        model=model,
        factors=names,
        levels=levels,
        components=components,
        component_se=comp_se,
        ability=theta,
        discrimination=np.asarray(a, dtype=float).copy(),
        difficulty=np.asarray(b, dtype=float).copy(),
        guessing=np.zeros(n_items) if c is None else np.asarray(c, dtype=float).copy(),
        loglik=loglik,
        n_iter=nit,
        converged=ok,
        item_ids=resp.item_ids,
        info={"estimator": "joint MAP (L-BFGS-B), effects coding", "identify": identify},
    )
