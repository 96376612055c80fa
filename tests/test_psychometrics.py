"""proctor.psychometrics: likelihood gradients, recovery, NaN handling, hierarchy, information,
pruning and adaptive testing. Sizes are small (the full-size recovery study is bench/irt_recovery.py)
but the thresholds are real."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from scipy.optimize import approx_fprime, minimize
from scipy.stats import spearmanr

from proctor.psychometrics import (
    Priors,
    adaptive_test,
    fit_hierarchical,
    fit_irt,
    fit_items,
    item_information,
    prune_items,
    score_abilities,
    simulate_adaptive,
    simulate_responses,
    test_information,
)
from proctor.psychometrics._core import Bounds, ItemSpec, item_objective, item_terms, prob
from proctor.psychometrics._newton import _derivs, newton_items


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    return float(np.corrcoef(x, y)[0, 1])


def _sim(n_sub: int, n_items: int, seed: int, *, guessing=None, missing: float = 0.1):
    rng = np.random.default_rng(seed)
    theta = rng.normal(size=n_sub)
    a = rng.lognormal(0.0, 0.3, n_items)
    b = rng.normal(size=n_items)
    y = simulate_responses(theta, a, b, guessing, missing=missing, rng=rng)
    return y, theta, a, b


@pytest.fixture(scope="module")
def twopl_data():
    return _sim(400, 250, seed=11)


@pytest.fixture(scope="module")
def twopl_fit(twopl_data):
    return fit_irt(twopl_data[0], "2pl")


# ---------------------------------------------------------------- likelihood and its gradients


@pytest.mark.parametrize(
    ("model", "guess"),
    [("1pl", None), ("2pl", None), ("3pl", "estimate"), ("3pl", "fixed")],
)
def test_item_gradient_matches_finite_differences(model, guess):
    rng = np.random.default_rng(0)
    n_items, n_points = 6, 15
    theta = rng.normal(size=n_points)
    a, b = rng.uniform(0.4, 2.0, n_items), rng.normal(size=n_items)
    c = rng.uniform(0.05, 0.3, n_items) if model == "3pl" else None
    r = rng.uniform(0, 4, (n_items, n_points))
    n = r + rng.uniform(0, 4, (n_items, n_points))
    spec = ItemSpec(model, n_items, Bounds(), c if guess == "fixed" else None, guess == "estimate")
    x = spec.pack(a, b, c)
    gbeta = (5.0, 17.0) if guess == "estimate" else None

    def f(v):
        return item_objective(v, spec, theta, r, n, Priors(), gbeta)[0]

    analytic = item_objective(x, spec, theta, r, n, Priors(), gbeta)[1]
    numeric = approx_fprime(x, f, 1e-6)
    assert np.allclose(analytic, numeric, rtol=1e-4, atol=1e-3)


def test_ability_gradient_and_observed_information():
    rng = np.random.default_rng(1)
    theta = rng.normal(size=8)
    a, b, c = rng.uniform(0.5, 2, 5), rng.normal(size=5), rng.uniform(0.1, 0.3, 5)
    r = rng.uniform(0, 1, (5, 8))
    n = np.ones((5, 8))
    t = item_terms(theta, a, b, c, r, n, want_theta=True)
    num = approx_fprime(theta, lambda th: item_terms(th, a, b, c, r, n).value, 1e-6)
    assert np.allclose(t.grad_theta, num, rtol=1e-4, atol=1e-5)
    # Observed information (used by the Newton M-step) = minus the numerical Hessian.
    _, _, observed = _derivs(theta, a, b, c, r, n, ("a", "b", "c"))
    j = 3

    def grad_j(v):
        aa, bb, cc = a.copy(), b.copy(), c.copy()
        aa[j], bb[j], cc[j] = v
        return _derivs(theta, aa, bb, cc, r, n, ("a", "b", "c"))[0][j]

    x = np.array([a[j], b[j], c[j]])
    hess = np.array([approx_fprime(x, lambda v, i=i: grad_j(v)[i], 1e-7) for i in range(3)])
    assert np.allclose(-hess, observed[j], rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("model", ["2pl", "3pl"])
def test_newton_item_step_reaches_the_lbfgs_optimum(model):
    rng = np.random.default_rng(2)
    n_items, theta = 8, np.linspace(-3, 3, 25)
    a, b = rng.uniform(0.5, 2, n_items), rng.normal(size=n_items)
    c = rng.uniform(0.1, 0.3, n_items) if model == "3pl" else None
    n = rng.uniform(2, 20, (n_items, 25))
    r = np.clip(n * prob(theta, a, b, c) + rng.normal(0, 0.5, n.shape), 0, n)
    spec = ItemSpec(model, n_items, Bounds(), None, model == "3pl")
    gbeta = (5.0, 17.0) if model == "3pl" else None
    c0 = np.full(n_items, 0.2) if model == "3pl" else None
    x0 = spec.pack(np.ones(n_items), np.zeros(n_items), c0)
    ref = minimize(
        item_objective,
        x0,
        args=(spec, theta, r, n, Priors(), gbeta),
        jac=True,
        method="L-BFGS-B",
        bounds=spec.lbfgs_bounds(),
        options={"maxiter": 5000, "ftol": 1e-15, "gtol": 1e-10},
    )
    an, bn, cn, _ = newton_items(
        theta, r, n, np.ones(n_items), np.zeros(n_items), c0, spec, Priors(), gbeta, max_iter=100, tol=1e-10
    )
    mine = item_objective(spec.pack(an, bn, cn), spec, theta, r, n, Priors(), gbeta)[0]
    assert mine <= ref.fun + 1e-8
    assert np.allclose(spec.pack(an, bn, cn), ref.x, atol=1e-4)


# ---------------------------------------------------------------- recovery


def test_2pl_recovery_close_to_oracle(twopl_data, twopl_fit):
    y, theta, a, b = twopl_data
    fit, oracle = twopl_fit, fit_items(y, theta, "2pl")
    assert fit.converged
    assert _corr(fit.difficulty, b) >= 0.97
    assert _corr(fit.discrimination, a) >= 0.85
    assert _corr(fit.ability, theta) >= 0.97
    assert _corr(fit.difficulty, b) >= _corr(oracle.difficulty, b) - 0.02
    assert _corr(fit.discrimination, a) >= _corr(oracle.discrimination, a) - 0.03
    # identify="standardize": abilities have mean 0, sd 1; predictions are scale free.
    assert abs(fit.ability.mean()) < 1e-9 and abs(fit.ability.std() - 1) < 1e-9
    p = fit.predict_proba()
    assert p.shape == y.shape and np.all((p > 0) & (p < 1))
    assert np.all(fit.ability_se > 0) and np.all(fit.ability_se < 0.5)


def test_jml_also_recovers(twopl_data):
    y, theta, a, b = twopl_data
    fit = fit_irt(y, "2pl", method="jml")
    assert _corr(fit.difficulty, b) >= 0.96
    assert _corr(fit.discrimination, a) >= 0.8
    assert _corr(fit.ability, theta) >= 0.97


def test_1pl_shared_discrimination():
    rng = np.random.default_rng(3)
    theta, b = rng.normal(size=400), rng.normal(size=120)
    y = simulate_responses(theta, np.full(120, 1.4), b, missing=0.1, rng=rng)
    fit = fit_irt(y, "1pl", identify="none")
    assert np.ptp(fit.discrimination) == 0.0
    assert abs(fit.discrimination[0] - 1.4) < 0.12  # population N(0, 1) = the truth's scale
    assert _corr(fit.difficulty, b) >= 0.98
    assert np.max(np.abs(fit.difficulty - b)) < 0.45
    assert _corr(fit.ability, theta) >= 0.95


def test_3pl_fixed_guessing():
    y, theta, a, b = _sim(500, 200, seed=4, guessing=0.25)
    fit = fit_irt(y, "3pl", n_options=4)  # guessing defaults to fixed at 1/n_options
    oracle = fit_items(y, theta, "3pl", n_options=4)
    assert np.all(fit.guessing == 0.25)
    assert _corr(fit.difficulty, b) >= 0.95
    assert _corr(fit.discrimination, a) >= 0.7
    assert _corr(fit.ability, theta) >= 0.95
    assert _corr(fit.difficulty, b) >= _corr(oracle.difficulty, b) - 0.03
    assert _corr(fit.discrimination, a) >= _corr(oracle.discrimination, a) - 0.03


def test_3pl_estimated_guessing_stays_in_bounds():
    rng = np.random.default_rng(5)
    c_true = rng.uniform(0.1, 0.3, 150)
    y, theta, _, b = _sim(400, 150, seed=5, guessing=c_true)
    fit = fit_irt(y, "3pl", guessing="estimate")
    assert np.all((fit.guessing >= 0) & (fit.guessing <= 0.5))
    assert _corr(fit.difficulty, b) >= 0.9
    assert _corr(fit.ability, theta) >= 0.93


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="only 0, 1 or NaN"):
        fit_irt(np.array([[0, 1], [2, 0]]))
    with pytest.raises(ValueError, match="n_options"):
        fit_irt(np.zeros((3, 3)), "3pl", guessing="fixed")
    with pytest.raises(ValueError, match="model must be"):
        fit_irt(np.zeros((3, 3)), "4pl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="item_ids"):
        fit_irt(np.zeros((3, 3)), item_ids=["a"])


# ---------------------------------------------------------------- missing data


def test_nan_cells_rows_and_columns():
    y, _, _, _ = _sim(200, 60, seed=6, missing=0.3)
    y[:, 5] = np.nan  # an item nobody answered
    extra = np.vstack([y, np.full((1, y.shape[1]), np.nan)])  # a subject who answered nothing
    fit = fit_irt(y, "2pl", identify="none")
    fit_extra = fit_irt(extra, "2pl", identify="none")
    assert np.all(np.isfinite(fit.difficulty)) and np.all(np.isfinite(fit.ability))
    # An empty row carries no information: items are exactly the same, its ability is the prior.
    assert np.allclose(fit.difficulty, fit_extra.difficulty, atol=1e-8)
    assert np.allclose(fit.discrimination, fit_extra.discrimination, atol=1e-8)
    assert abs(fit_extra.ability[-1]) < 1e-6 and abs(fit_extra.ability_se[-1] - 1) < 1e-6
    # The unanswered item falls back to its prior (b = 0 under N(0, 3)).
    assert abs(fit.difficulty[5]) < 1e-3


def test_score_abilities_matches_the_fit(twopl_data, twopl_fit):
    y = twopl_data[0]
    theta, se = score_abilities(twopl_fit, y[:20])
    assert np.allclose(theta, twopl_fit.ability[:20], atol=1e-6)
    theta_map, se_map = score_abilities(twopl_fit, y[:20], method="map")
    assert np.allclose(theta_map, theta, atol=0.05) and np.allclose(se_map, se, atol=0.02)


# ---------------------------------------------------------------- hierarchical


def test_hierarchical_recovers_component_order():
    rng = np.random.default_rng(7)
    truth = {
        "llm": rng.permutation(np.linspace(-1.0, 1.0, 3)),
        "retriever": rng.permutation(np.linspace(-0.8, 0.8, 4)),
        "icl": np.array([-0.4, 0.4]),
    }
    combos = list(itertools.product(*(range(len(v)) for v in truth.values())))
    factors = {f: [f"{f}{c[i]}" for c in combos] for i, f in enumerate(truth)}
    theta = np.array([sum(truth[f][c[i]] for i, f in enumerate(truth)) for c in combos])
    n_items = 200
    y = simulate_responses(
        theta, rng.lognormal(0, 0.3, n_items), rng.normal(size=n_items), missing=0.1, rng=rng
    )
    fit = fit_hierarchical(y, factors, model="2pl")
    for f, eff in truth.items():
        est = [fit.components[f][f"{f}{i}"] for i in range(len(eff))]
        assert spearmanr(est, eff).statistic == pytest.approx(1.0)
        assert abs(sum(est)) < 1e-9  # effects coding is exact
        assert all(s > 0 for s in fit.component_se[f].values())
    assert np.allclose(
        fit.ability, [fit.ability_of(**{f: factors[f][s] for f in truth}) for s in range(len(combos))]
    )
    assert abs(fit.ability.std() - 1) < 1e-9
    assert fit.predict_proba().shape == y.shape


# ---------------------------------------------------------------- information


def test_information_analytic_values(twopl_fit):
    a, b = twopl_fit.discrimination, twopl_fit.difficulty
    info_at_b = np.array([item_information(twopl_fit, bj)[j, 0] for j, bj in enumerate(b[:10])])
    assert np.allclose(info_at_b, a[:10] ** 2 / 4)
    grid = np.linspace(-3, 3, 13)
    assert np.allclose(test_information(twopl_fit, grid), item_information(twopl_fit, grid).sum(axis=0))
    assert np.allclose(
        test_information(twopl_fit, grid, items=[0, 1]), item_information(twopl_fit, grid)[:2].sum(0)
    )


def test_3pl_information_equals_score_variance():
    # I(theta) = P'(theta)^2 / (P (1 - P)) for a binary item; check the closed form numerically.
    class Items:
        discrimination = np.array([1.3])
        difficulty = np.array([0.4])
        guessing = np.array([0.2])
        item_ids = None

    for t in (-2.0, 0.0, 0.4, 1.5):

        def p(x):
            return prob(np.array([x]), Items.discrimination, Items.difficulty, Items.guessing)[0, 0]

        dp = (p(t + 1e-6) - p(t - 1e-6)) / 2e-6
        assert item_information(Items(), t)[0, 0] == pytest.approx(dp**2 / (p(t) * (1 - p(t))), rel=1e-6)
    # Maximum of a 3PL item sits above b (Birnbaum): theta* = b + ln((1 + sqrt(1 + 8c)) / 2) / a.
    grid = np.linspace(-1, 2, 30001)
    peak = grid[np.argmax(item_information(Items(), grid)[0])]
    assert peak == pytest.approx(0.4 + np.log((1 + np.sqrt(1 + 8 * 0.2)) / 2) / 1.3, abs=1e-3)


# ---------------------------------------------------------------- pruning


def test_pruning_drops_planted_bad_items_and_keeps_ids_aligned():
    rng = np.random.default_rng(8)
    n_items = 120
    theta, b = rng.normal(size=400), rng.normal(size=n_items)
    a = rng.lognormal(0.2, 0.25, n_items)
    bad = np.sort(rng.choice(n_items, 12, replace=False))
    a[bad] = 0.02  # answers unrelated to ability
    y = simulate_responses(theta, a, b, missing=0.05, rng=rng)
    ids = [f"q{j:03d}" for j in range(n_items)]
    res = prune_items(y, model="2pl", drop_fraction=0.1, steps=2, min_items=20, item_ids=ids)
    first = res.steps[0]
    assert set(first.dropped_ids) == {ids[j] for j in bad}  # 10% of 120 = exactly the 12 planted
    assert len(res.kept_ids) == 120 - 12 - 10
    assert not set(res.kept_ids) & {ids[j] for j in bad}
    # Alignment: ids, indices and parameters refer to the same columns at every step.
    assert res.kept_ids == [ids[j] for j in res.kept_index] == res.final_fit.item_ids
    refit = fit_irt(y[:, res.kept_index], "2pl")
    assert np.allclose(refit.difficulty, res.final_fit.difficulty)
    for s in res.steps:
        assert s.fit.item_ids == s.item_ids == [ids[j] for j in s.item_index]
        assert s.information_before.shape == s.information_after.shape == res.theta_grid.shape
    assert np.allclose(res.steps[0].information_after, res.steps[1].information_before)
    # Dropping noise items raises the information per remaining item.
    assert first.mean_item_information_after > first.mean_item_information_before


def test_pruning_respects_min_items():
    y, _, _, _ = _sim(150, 30, seed=9)
    res = prune_items(y, drop_fraction=0.5, steps=5, min_items=20)
    assert len(res.kept_ids) == 20 and res.stop_reason == "min_items"


# ---------------------------------------------------------------- adaptive testing


def test_adaptive_reaches_full_exam_estimate_with_few_items(twopl_data, twopl_fit):
    rng = np.random.default_rng(10)
    _, _, a, b = twopl_data
    subjects = rng.normal(size=40)
    rows = simulate_responses(subjects, a, b, rng=rng)
    sims = [simulate_adaptive(twopl_fit, row, se_target=0.3) for row in rows]
    frac = np.array([s.fraction_items for s in sims])
    diff = np.array([s.abs_diff for s in sims])
    se = np.array([s.result.se for s in sims])
    assert all(s.result.stop_reason == "se_target" for s in sims)
    assert np.all(se <= 0.3)
    assert frac.mean() < 0.2  # ~20 of 250 items
    # The adaptive SE is honest: |adaptive - full| <= SE for most subjects, RMS diff <= SE target.
    assert np.mean(diff <= se) >= 0.6
    assert np.sqrt(np.mean(diff**2)) <= 0.3
    assert np.mean(diff <= 2 * se) >= 0.9
    # Trajectories are recorded and items are never repeated.
    r0 = sims[0].result
    assert len(r0.theta_path) == len(r0.se_path) == r0.n_items == len(set(r0.items))


def test_adaptive_picks_most_informative_item_and_honours_budget(twopl_fit):
    asked: list[int] = []

    def answer(j: int) -> int:
        asked.append(j)
        return 1

    res = adaptive_test(twopl_fit, answer, start_theta=0.0, se_target=1e-3, max_items=5)
    first = int(np.argmax(item_information(twopl_fit, 0.0)[:, 0]))
    assert asked[0] == first and res.n_items == 5 and res.stop_reason == "max_items"
    assert res.theta_path[-1] > res.theta_path[0] > 0  # all-correct: estimate rises, stays finite
    assert np.all(np.isfinite(res.theta_path))
