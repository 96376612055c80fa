"""Joint MAP over abilities and item parameters, with abilities optionally tied by a design matrix.

theta = u (plain joint MAP) or theta = D u (hierarchical: D maps effect-coded factor levels to
subjects). One L-BFGS-B problem over [u, items]; gradients come from the shared kernel.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize

from ._core import ItemSpec, Priors, Responses, item_terms, items_value_grad, start_values


def initial_abilities(resp: Responses) -> np.ndarray:
    """Standardised logit of each subject's proportion correct: a sign-correct start."""
    nobs = resp.observed.sum(axis=1)
    p = (resp.correct.sum(axis=1) + 0.5) / (nobs + 1.0)
    t = np.log(p / (1 - p))
    s = t.std()
    return (t - t.mean()) / (s if s > 1e-9 else 1.0)


def joint_map(
    resp: Responses,
    spec: ItemSpec,
    pri: Priors,
    gbeta: tuple[float, float] | None,
    n_options: int | None,
    design: np.ndarray | None,
    u_prior: tuple[float, float] | None,
    max_iter: int,
    tol: float,
) -> tuple[np.ndarray, np.ndarray, float, int, bool]:
    """Maximise log lik + log priors over (u, items); returns u, packed items, data loglik, nit, ok."""
    r = np.ascontiguousarray(resp.correct.T)
    n = np.ascontiguousarray(resp.observed.T.astype(float))
    theta0 = initial_abilities(resp)
    u_bounds: list[tuple[float | None, float | None]]
    if design is None:
        u0 = theta0
        ab = spec.bounds.ability
        u_bounds = [ab] * u0.shape[0]
    else:
        u0 = np.linalg.lstsq(design, theta0, rcond=None)[0] if design.shape[1] else np.zeros(0)
        u_bounds = [(None, None)] * u0.shape[0]
    k = u0.shape[0]
    a0, b0, c0 = start_values(resp, spec, n_options)
    x0 = np.concatenate([u0, spec.pack(a0, b0, c0)])

    def objective(x: np.ndarray) -> tuple[float, np.ndarray]:
        u = x[:k]
        theta = u if design is None else design @ u
        a, b, c = spec.unpack(x[k:])
        t = item_terms(theta, a, b, c, r, n, want_c=spec.estimate_guessing, want_theta=True)
        v, g_items = items_value_grad(spec, t, a, b, c, pri, gbeta)
        assert t.grad_theta is not None
        g_u = t.grad_theta if design is None else design.T @ t.grad_theta
        if u_prior is not None:
            mu, sd = u_prior
            d = (u - mu) / sd
            v -= 0.5 * float(d @ d)
            g_u = g_u - d / sd
        return -v, -np.concatenate([g_u, g_items])

    res = minimize(
        objective,
        x0,
        jac=True,
        method="L-BFGS-B",
        bounds=u_bounds + spec.lbfgs_bounds(),
        options={"maxiter": max_iter, "ftol": 1e-13, "gtol": tol, "maxcor": 20},
    )
    u = res.x[:k]
    theta = u if design is None else design @ u
    a, b, c = spec.unpack(res.x[k:])
    ll = item_terms(theta, a, b, c, r, n).value
    return u, res.x[k:], ll, int(res.nit), bool(res.success)
