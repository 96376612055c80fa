"""Shared IRT machinery: input checks, settings, the item log-likelihood kernel and its gradients.

Everything that optimises (marginal EM, joint MAP, hierarchical, the oracle item fit) goes through
`item_terms`, which evaluates ``sum r log P + (n - r) log(1 - P)`` on a set of ability points with
analytic gradients. With ``r``/``n`` as posterior-expected counts on quadrature nodes it is the
Bock–Aitkin M-step objective; with ``r = y`` and ``n = observed`` on subjects it is the joint
likelihood. One kernel, one gradient check.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, ParamSpec, TypeVar

import numpy as np
from scipy.special import expit
from threadpoolctl import threadpool_limits

ModelName = Literal["1pl", "2pl", "3pl"]
_P = ParamSpec("_P")
_R = TypeVar("_R")
MODELS: tuple[str, ...] = ("1pl", "2pl", "3pl")


def single_blas_thread(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run ``fn`` with BLAS limited to one thread.

    The fits make many small BLAS calls (L-BFGS-B's vector updates, thin matrix products). On a
    busy 2-core machine, OpenBLAS's thread hand-off made each L-BFGS-B iteration ~15 ms instead of
    ~0.2 ms (2,000 variables), i.e. 100x slower; one thread is faster for every size used here.
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with threadpool_limits(limits=1, user_api="blas"):
            return fn(*args, **kwargs)

    return wrapper


@dataclass(frozen=True)
class Bounds:
    """Box constraints for L-BFGS-B; wide defaults so that real exams are not clipped.

    Discrimination is kept strictly positive (an item whose answers fall with ability is a bad
    item, which pruning should find: it ends at the lower bound). Guessing stays below 0.5.
    Bounds apply on the optimisation scale, before the optional standardisation of abilities.
    """

    difficulty: tuple[float, float] = (-6.0, 6.0)
    discrimination: tuple[float, float] = (1e-3, 4.0)
    guessing: tuple[float, float] = (0.0, 0.5)
    ability: tuple[float, float] = (-8.0, 8.0)

    def __post_init__(self) -> None:
        for name in ("difficulty", "discrimination", "guessing", "ability"):
            lo, hi = getattr(self, name)
            if not lo < hi:
                raise ValueError(f"Bounds.{name}: need low < high, got ({lo}, {hi})")
        if self.discrimination[0] <= 0:
            raise ValueError("Bounds.discrimination: the lower bound must be > 0")
        if self.guessing[0] < 0 or self.guessing[1] >= 1:
            raise ValueError("Bounds.guessing: need 0 <= low < high < 1")


@dataclass(frozen=True)
class Priors:
    """Weak priors, used as MAP regularisation of the item parameters (and of abilities).

    * ``ability``: normal (mean, sd). The latent population in marginal ML, the ability prior in
      joint MAP and in EAP/MAP scoring.
    * ``difficulty``: normal (mean, sd) or None.
    * ``discrimination``: lognormal (mu, sigma) of ``log a`` or None.
    * ``guessing``: beta (alpha, beta), None, or ``"auto"``: Beta centred on 1/n_options
      (0.2 when unknown) with strength 20, which keeps 3PL fits away from the degenerate c = 0 / 0.5
      corners without dominating a few hundred responses.
    """

    ability: tuple[float, float] = (0.0, 1.0)
    difficulty: tuple[float, float] | None = (0.0, 3.0)
    discrimination: tuple[float, float] | None = (0.0, 1.0)
    guessing: tuple[float, float] | Literal["auto"] | None = "auto"

    @classmethod
    def none(cls) -> Priors:
        """No item priors (plain maximum likelihood); abilities keep N(0, 1) as population/prior."""
        return cls(difficulty=None, discrimination=None, guessing=None)

    def guessing_beta(self, n_options: int | None) -> tuple[float, float] | None:
        """Resolve ``"auto"`` to concrete Beta parameters."""
        if self.guessing == "auto":
            c0 = 1.0 / n_options if n_options else 0.2
            strength = 20.0
            return (strength * c0 + 1.0, strength * (1.0 - c0) + 1.0)
        return self.guessing


def resolve_priors(priors: Priors | str | None) -> Priors:
    """Accept a Priors object, None/"default" (the defaults) or "none" (no item priors)."""
    if priors is None or priors == "default":
        return Priors()
    if priors == "none":
        return Priors.none()
    if isinstance(priors, Priors):
        if priors.ability is not None and priors.ability[1] <= 0:
            raise ValueError("Priors.ability: the sd must be > 0")
        return priors
    raise ValueError(f"priors must be a Priors object, 'default' or 'none', got {priors!r}")


@dataclass
class Responses:
    """A validated response matrix split into the pieces the kernels use."""

    correct: np.ndarray  # (S, J) float, 1 where answered correctly
    wrong: np.ndarray  # (S, J) float, 1 where answered wrongly
    observed: np.ndarray  # (S, J) bool
    item_ids: list[Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def shape(self) -> tuple[int, int]:
        rows, cols = self.correct.shape
        return int(rows), int(cols)


def as_responses(responses: Any, item_ids: Sequence[Any] | None = None) -> Responses:
    """Validate a subjects x items matrix of 0/1 with NaN for missing (a DataFrame works too)."""
    ids: list[Any] | None = list(item_ids) if item_ids is not None else None
    if ids is None and hasattr(responses, "columns") and hasattr(responses, "to_numpy"):
        ids = list(responses.columns)
        responses = responses.to_numpy(dtype=float, na_value=np.nan)
    x = np.asarray(responses, dtype=float)
    if x.ndim != 2:
        raise ValueError(f"responses must be a 2-D subjects x items matrix, got shape {x.shape}")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"responses is empty (shape {x.shape})")
    observed = ~np.isnan(x)
    vals = x[observed]
    bad = (vals != 0) & (vals != 1)
    if bad.any():
        raise ValueError(
            f"responses must hold only 0, 1 or NaN (missing); found {np.unique(vals[bad])[:5].tolist()}"
        )
    if ids is not None and len(ids) != x.shape[1]:
        raise ValueError(f"item_ids has {len(ids)} labels but responses has {x.shape[1]} items")
    correct = np.where(observed, x, 0.0)
    wrong = np.where(observed, 1.0 - x, 0.0)
    return Responses(correct=correct, wrong=wrong, observed=observed, item_ids=ids)


def log_expit_pair(z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """log sigmoid(z) and log sigmoid(-z), stable for any z.

    Written with exp/log1p: scipy's ``log_expit`` ufunc measured several times slower here.
    """
    lpos = np.minimum(z, 0.0) - np.log1p(np.exp(-np.abs(z)))
    return lpos, lpos - z


def log_probs(
    theta: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """log P and log(1 - P), items x points, computed without cancellation."""
    z = a[:, None] * (theta[None, :] - b[:, None])
    lpos, lneg = log_expit_pair(z)
    if c is None:
        return lpos, lneg
    cc = c[:, None]
    return np.log(cc + (1.0 - cc) * np.exp(lpos)), np.log1p(-cc) + lneg


def prob(theta: np.ndarray, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
    """P(correct), items x points."""
    p = expit(a[:, None] * (theta[None, :] - b[:, None]))
    if c is None:
        return p
    return c[:, None] + (1.0 - c[:, None]) * p


@dataclass
class Terms:
    """Value and gradients of the item log-likelihood kernel."""

    value: float
    grad_a: np.ndarray
    grad_b: np.ndarray
    grad_c: np.ndarray | None
    grad_theta: np.ndarray | None


def item_terms(
    theta: np.ndarray,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None,
    r: np.ndarray,
    n: np.ndarray,
    *,
    want_c: bool = False,
    want_theta: bool = False,
) -> Terms:
    """``sum r log P + (n - r) log(1 - P)`` over items x points, with analytic gradients.

    ``r`` (correct) and ``n`` (observed) are items x points: expected counts on quadrature nodes,
    or the data itself when the points are the subjects. With z = a (theta - b),
    dl/dz = r (1 - c) P* (1 - P*) / P - (n - r) P*, written through stable ratios so that
    P* -> 0 with c = 0 gives r (1 - P*) - (n - r) P* rather than 0/0.
    """
    z = a[:, None] * (theta[None, :] - b[:, None])
    lpos, lneg = log_expit_pair(z)
    pstar = np.exp(lpos)
    nr = n - r
    grad_c = None
    if c is None:
        logp, log1mp = lpos, lneg
        gz = r - n * pstar
    else:
        cc = c[:, None]
        p = cc + (1.0 - cc) * pstar  # >= (1 - c) P* > 0: the ratios below are bounded
        logp = np.log(p)
        log1mp = np.log1p(-cc) + lneg
        qstar = np.exp(lneg)  # 1 - P*, accurate when P* is near 1
        gz = r * ((1.0 - cc) * pstar / p) * qstar - nr * pstar
        if want_c:
            grad_c = (r * qstar / p).sum(axis=1) - nr.sum(axis=1) / (1.0 - c)
    value = float((r * logp).sum() + (nr * log1mp).sum())
    dtheta = theta[None, :] - b[:, None]
    grad_a = (gz * dtheta).sum(axis=1)
    sgz = gz.sum(axis=1)
    grad_b = -a * sgz
    grad_theta = (gz * a[:, None]).sum(axis=0) if want_theta else None
    return Terms(value, grad_a, grad_b, grad_c, grad_theta)


def prior_terms(
    a: np.ndarray, b: np.ndarray, c: np.ndarray | None, priors: Priors, guess_beta: tuple[float, float] | None
) -> tuple[float, np.ndarray, np.ndarray, np.ndarray | None]:
    """Log prior density (up to a constant) of the item parameters and its gradients."""
    lp = 0.0
    ga = np.zeros_like(a)
    gb = np.zeros_like(b)
    gc = None if c is None else np.zeros_like(c)
    if priors.difficulty is not None:
        mu, sd = priors.difficulty
        d = (b - mu) / sd
        lp -= 0.5 * float(d @ d)
        gb -= d / sd
    if priors.discrimination is not None:
        mu, sig = priors.discrimination
        la = np.log(a)
        d = (la - mu) / sig
        lp -= float(la.sum() + 0.5 * d @ d)
        ga -= (1.0 + d / sig) / a
    if c is not None and gc is not None and guess_beta is not None:
        al, be = guess_beta
        cc = np.clip(c, 1e-12, 1 - 1e-12)
        lp += float((al - 1) * np.log(cc).sum() + (be - 1) * np.log1p(-cc).sum())
        gc += (al - 1) / cc - (be - 1) / (1 - cc)
    return lp, ga, gb, gc


def log_prior(
    spec: ItemSpec,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None,
    priors: Priors,
    guess_beta: tuple[float, float] | None,
) -> float:
    """Item log prior as the model counts it (one shared discrimination for the 1PL)."""
    if spec.model == "1pl":
        return prior_terms(a[:1], b, None, priors, None)[0]
    return prior_terms(a, b, c if spec.estimate_guessing else None, priors, guess_beta)[0]


@dataclass
class ItemSpec:
    """How the free item parameters are packed into one L-BFGS-B vector for a given model."""

    model: str
    n_items: int
    bounds: Bounds
    fixed_guessing: np.ndarray | None  # 3PL with c fixed, else None
    estimate_guessing: bool

    @property
    def n_free(self) -> int:
        j = self.n_items
        return (1 + j) if self.model == "1pl" else (3 * j if self.estimate_guessing else 2 * j)

    def unpack(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
        j = self.n_items
        if self.model == "1pl":
            return np.full(j, x[0]), x[1 : 1 + j], None
        a, b = x[:j], x[j : 2 * j]
        if self.estimate_guessing:
            return a, b, x[2 * j : 3 * j]
        return a, b, self.fixed_guessing

    def pack(self, a: np.ndarray, b: np.ndarray, c: np.ndarray | None) -> np.ndarray:
        if self.model == "1pl":
            return np.concatenate([[float(np.mean(a))], b])
        parts = [a, b] + ([c] if self.estimate_guessing and c is not None else [])
        return np.concatenate(parts)

    def pack_grad(
        self, ga: np.ndarray, gb: np.ndarray, gc: np.ndarray | None, ga_shared: float
    ) -> np.ndarray:
        """``ga_shared``: gradient of the shared 1PL discrimination (sum over items plus its prior)."""
        if self.model == "1pl":
            return np.concatenate([[ga_shared], gb])
        parts = [ga, gb] + ([gc] if self.estimate_guessing and gc is not None else [])
        return np.concatenate(parts)

    def lbfgs_bounds(self) -> list[tuple[float, float]]:
        j = self.n_items
        bd = self.bounds
        if self.model == "1pl":
            return [bd.discrimination] + [bd.difficulty] * j
        out = [bd.discrimination] * j + [bd.difficulty] * j
        if self.estimate_guessing:
            out += [bd.guessing] * j
        return out


def items_value_grad(
    spec: ItemSpec,
    t: Terms,
    a: np.ndarray,
    b: np.ndarray,
    c: np.ndarray | None,
    priors: Priors,
    guess_beta: tuple[float, float] | None,
) -> tuple[float, np.ndarray]:
    """Log posterior of the item parameters (kernel value + log prior) and its packed gradient."""
    if spec.model == "1pl":
        lp, ga1, gb, _ = prior_terms(a[:1], b, None, priors, None)
        g = spec.pack_grad(t.grad_a, t.grad_b + gb, None, float(t.grad_a.sum() + ga1[0]))
    else:
        lp, ga, gb, gc = prior_terms(a, b, c if spec.estimate_guessing else None, priors, guess_beta)
        gcs = None if t.grad_c is None or gc is None else t.grad_c + gc
        g = spec.pack_grad(t.grad_a + ga, t.grad_b + gb, gcs, 0.0)
    return t.value + lp, g


def item_objective(
    x: np.ndarray,
    spec: ItemSpec,
    theta: np.ndarray,
    r: np.ndarray,
    n: np.ndarray,
    priors: Priors,
    guess_beta: tuple[float, float] | None,
) -> tuple[float, np.ndarray]:
    """Negative (expected) log posterior of the item parameters and its gradient, for L-BFGS-B."""
    a, b, c = spec.unpack(x)
    t = item_terms(theta, a, b, c, r, n, want_c=spec.estimate_guessing)
    v, g = items_value_grad(spec, t, a, b, c, priors, guess_beta)
    return -v, -g


def resolve_guessing(
    model: str, n_items: int, n_options: int | None, guessing: str | None
) -> tuple[np.ndarray | None, bool]:
    """(fixed guessing vector or None, whether guessing is estimated) for the model."""
    if model not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {model!r}")
    if n_options is not None and n_options < 2:
        raise ValueError(f"n_options must be >= 2, got {n_options}")
    if model != "3pl":
        if guessing not in (None, "fixed", "estimate"):
            raise ValueError(f"guessing must be 'fixed' or 'estimate', got {guessing!r}")
        return None, False
    mode = guessing or ("fixed" if n_options else "estimate")
    if mode == "fixed":
        if not n_options:
            raise ValueError("3PL with guessing='fixed' needs n_options (guessing = 1 / n_options)")
        return np.full(n_items, 1.0 / n_options), False
    if mode == "estimate":
        return None, True
    raise ValueError(f"guessing must be 'fixed' or 'estimate', got {guessing!r}")


def start_values(
    resp: Responses, spec: ItemSpec, n_options: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """Starting items: a = 1, b from the proportion correct (after removing chance), c = 1/k or 0.2."""
    j = spec.n_items
    nobs = resp.observed.sum(axis=0)
    p = (resp.correct.sum(axis=0) + 0.5) / (nobs + 1.0)
    if spec.fixed_guessing is not None:
        c0: np.ndarray | None = spec.fixed_guessing
    elif spec.estimate_guessing:
        c0 = np.full(j, 1.0 / n_options if n_options else 0.2)
        c0 = np.clip(c0, *spec.bounds.guessing)
    else:
        c0 = None
    pp = p if c0 is None else np.clip((p - c0) / (1.0 - c0), 0.02, 0.98)
    # E[logistic(theta - b)] over N(0, 1) is about logistic(-0.86 b) (probit approximation).
    b0 = np.clip(-np.log(pp / (1 - pp)) / 0.86, *spec.bounds.difficulty)
    a0 = np.clip(np.ones(j), *spec.bounds.discrimination)
    return a0, b0, c0
