"""The privacy loss distribution (PLD) of the mixture-of-Gaussians mechanism, fast.

:meth:`.HeterPoissonAccountant.pld_epsilon` (:mod:`.heterpoisson`) gives an independent, tighter figure
than the RDP one: the PLD of the mixture (both adjacency directions, pessimistic "connect the
dots" discretisation, Doroshenko et al. 2022), composed ``T`` times by Google's
``dp_accounting`` (0.6), at the worst ``D`` of the RDP scan, ``D = 1`` and the Poisson limit.
It keeps components up to a cap whose tail is below ``1e-3 delta`` and charges ``e^eps T
tail`` to ``delta`` by the same coupling as the RDP figure (:mod:`.heterpoisson`, item 1).
Composing PLDs is exact up to discretisation, RDP composition plus conversion is not, so
``eps_PLD <= eps_RDP`` up to the discretisation error (``value_discretization_interval``,
default ``1e-3``).

Speed (issue 38, item 3).  ``dp_accounting``'s ``from_mixture_gaussian_mechanism`` inverts the
privacy loss by a recursive bisection in Python, one grid point after another: 5 s per
direction and mixture on Cora, 418 s for a calibration of ``sigma``.  :func:`mog_pld` builds the
same PLD with the inversion vectorised (Newton's method on all grid points at once, from a
bracket on the side where it converges monotonically: the privacy loss is a log-sum-exp of
affine functions of the output, convex and decreasing for "remove", concave and decreasing
for "add"), then hands the hockey-stick divergences on the grid to ``dp_accounting``'s own
connect-the-dots construction and composition.  The grid, the tail truncation
(``log_mass_truncation_bound = -50``) and the formula are ``dp_accounting``'s; the inversion is
exact to rounding where ``dp_accounting`` rounds the cut-off to a multiple of ``1e-6``, and any
other cut-off gives a smaller ``Q(S) - e^eps P(S)`` than the exact one, so each divergence here
is at least ``dp_accounting``'s (the tests compare the two: equal to ``1e-9``, and the ``eps``
to ``1e-6``).  Calibration (:meth:`HeterPoissonAccountant.calibrate_sigma` with
``method="pld"``) then takes seconds: a bisection on ``sigma`` at a coarse grid
(``value_discretization_interval = 1e-2``, pessimistic, hence a valid bound at the finer grid
too, as a connect-the-dots PLD on fewer points dominates one on more), refined at the
requested grid within the bracket found.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

from ..._checks import check_real

__all__ = ["mog_pld"]

_LOG_MASS_TRUNCATION = -50.0  # dp_accounting's default for the mixture of Gaussians
_TAIL_PRECISION = 1e-4  # dp_accounting's bisection precision of the "remove" lower truncation


def _loss(x: np.ndarray, a: np.ndarray, b: np.ndarray, sign: float) -> tuple[np.ndarray, np.ndarray]:
    """``L(x) = sign * logsumexp_i(a_i + b_i x)`` and ``L'(x)``, for ``x`` of any shape."""
    z = a + b * x[..., None]
    m = z.max(axis=-1, keepdims=True)
    w = np.exp(z - m)
    s = w.sum(axis=-1)
    return sign * (m[..., 0] + np.log(s)), sign * (w * b).sum(axis=-1) / s


class _MoGLoss:
    """The privacy loss of the mixture ``sum_i p_i N(s_i, sigma^2)`` against ``N(0, sigma^2)``
    in ``dp_accounting``'s two adjacency directions (``MixtureGaussianPrivacyLoss``):

    * ``"remove"``: ``L(x) = log sum_i p_i exp(-s_i x / v - s_i^2 / (2 v))`` (``v = sigma^2``), the
      output ``x`` drawn from ``mu_upper = sum_i p_i N(-s_i, v)``;
    * ``"add"``: ``L(x) = -log sum_i p_i exp(s_i x / v - s_i^2 / (2 v))``, ``x ~ N(0, v)``.

    Both decrease in ``x``; ``remove`` is convex, ``add`` concave."""

    def __init__(self, sens, probs, sigma: float, direction: str):
        s, p = np.asarray(sens, np.float64), np.asarray(probs, np.float64)
        keep = p > 0
        self.s, self.p = s[keep], p[keep]
        self.sigma, self.v = float(sigma), float(sigma) ** 2
        self.direction = direction
        self.q = float(np.clip(self.p[self.s > 0].sum(), 0.0, 1.0))  # mass of positive sensitivities
        base = self.s * self.s / (2 * self.v)
        if direction == "remove":
            self.a, self.b, self.sign = np.log(self.p) - base, -self.s / self.v, 1.0
        else:
            self.a, self.b, self.sign = np.log(self.p) - base, self.s / self.v, -1.0
        j = int(np.argmax(self.s))
        self._j = j

    def loss(self, x):
        return _loss(np.asarray(x, np.float64), self.a, self.b, self.sign)[0]

    def inverse(self, eps: np.ndarray) -> np.ndarray:
        """``x`` with ``L(x) = eps`` for every ``eps`` in the loss's open range, by Newton's
        method from the side of monotone convergence (bound by the largest sensitivity's term)."""
        eps = np.asarray(eps, np.float64)
        v, s_j, a_j = self.v, self.s[self._j], self.a[self._j]
        # remove: L(x) >= a_j - s_j x / v, so x0 with a_j - s_j x0 / v = eps has L(x0) >= eps (left of
        # the root of a convex decreasing L); add: L(x) <= -(a_j + s_j x / v), x0 right of the root of
        # a concave decreasing L.  Newton's iterates then increase (decrease) to the root.
        x = (a_j - eps) * v / s_j if self.direction == "remove" else (-eps - a_j) * v / s_j
        act = np.arange(x.size)  # the points not converged yet
        for _ in range(100):
            f, d = _loss(x[act], self.a, self.b, self.sign)
            step = (f - eps[act]) / d
            x[act] -= step
            act = act[np.abs(step) > 1e-13 * (1.0 + np.abs(x[act]))]
            if act.size == 0:
                break
        return x

    def upper_cdf(self, x: np.ndarray) -> np.ndarray:
        """``P[X <= x]`` for the output distribution the loss is taken under."""
        if self.direction == "add":
            return stats.norm.cdf(x / self.sigma)
        return (stats.norm.cdf((x[..., None] + self.s) / self.sigma) * self.p).sum(axis=-1)

    def lower_log_cdf(self, x: np.ndarray) -> np.ndarray:
        """``log P[X' <= x]`` for the other distribution."""
        if self.direction == "remove":
            return special.log_ndtr(x / self.sigma)
        return special.logsumexp(special.log_ndtr((x[..., None] - self.s) / self.sigma), axis=-1, b=self.p)

    def deltas(self, eps: np.ndarray) -> np.ndarray:
        """The eps-hockey-stick divergence at non-decreasing ``eps`` (``dp_accounting``'s
        ``get_delta_for_epsilon``, with the exact cut-off)."""
        eps = np.asarray(eps, np.float64)
        out = np.zeros_like(eps)
        if self.q >= 1.0:
            inside = np.ones(eps.shape, bool)
        elif self.direction == "add":
            inside = eps < -math.log1p(-self.q)
        else:
            inside = eps > math.log1p(-self.q)
            out[~inside] = -np.expm1(eps[~inside])
        if inside.any():
            e = eps[inside]
            x = self.inverse(e)
            out[inside] = self.upper_cdf(x) - np.exp(e + self.lower_log_cdf(x))
        out = np.clip(out, 0.0, 1.0)
        return np.maximum.accumulate(out[::-1])[::-1]  # non-increasing, as dp_accounting fixes it

    def eps_range(self) -> tuple[float, float]:
        """``dp_accounting``'s connect-the-dots bounds: the losses at the truncated tails."""
        tail = 0.5 * math.exp(_LOG_MASS_TRUNCATION)
        z = float(stats.norm.ppf(tail)) * self.sigma
        upper_x = -z
        if self.direction == "add":
            lower_x = z
        else:  # the bisection of dp_accounting's privacy_loss_tail, to its precision, left end
            lo, hi = z - float(self.s.max()), z
            while hi - lo > _TAIL_PRECISION:
                mid = 0.5 * (lo + hi)
                if float(self.upper_cdf(np.array([mid]))[0]) < tail:
                    lo = mid
                else:
                    hi = mid
            lower_x = lo
        return float(self.loss(np.array([upper_x]))[0]), float(self.loss(np.array([lower_x]))[0])


def _ctd_pmf(loss: _MoGLoss, vdi: float):
    """The pessimistic connect-the-dots PMF of one direction (``dp_accounting``'s construction)."""
    from dp_accounting.pld import pld_pmf

    e_lo, e_hi = loss.eps_range()
    lo, hi = math.floor(e_lo / vdi), math.ceil(e_hi / vdi)
    grid = np.arange(lo, hi + 1, dtype=np.float64) * vdi
    return pld_pmf.create_pmf_pessimistic_connect_dots_fixed_gap(vdi, lo, hi, loss.deltas(grid))


def mog_pld(sensitivities, probs, sigma: float, *, value_discretization_interval: float = 1e-3):
    """The pessimistic PLD of one step of the scalar mixture-of-Gaussians mechanism
    (``P = N(0, sigma^2)``, ``Q = sum_i probs[i] N(sensitivities[i], sigma^2)``, both
    adjacency directions), as ``dp_accounting.pld.PrivacyLossDistribution``: the same
    object as ``dp_accounting``'s ``from_mixture_gaussian_mechanism`` (connect the dots,
    ``log_mass_truncation_bound = -50``), built with a vectorised inversion of the privacy
    loss (module docstring), hundreds of times faster.

    Parameters
    ----------
    sensitivities, probs : array_like
        The mixture (``c_i >= 0``, at least one positive; ``p_i`` summing to 1).
    sigma : float
        Noise standard deviation, > 0.
    value_discretization_interval : float
        Grid of the privacy loss, in [1e-6, 1].
    """
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    vdi = check_real("value_discretization_interval", value_discretization_interval, 1e-6, 1.0)
    return pld_mod.PrivacyLossDistribution(_ctd_pmf(_MoGLoss(sensitivities, probs, sigma, "remove"), vdi),
                                           _ctd_pmf(_MoGLoss(sensitivities, probs, sigma, "add"), vdi))


def _pld_eps(c, p, sigma, T, delta, vdi) -> float:
    """``eps(delta)`` of ``T`` compositions of :func:`mog_pld`."""
    pld = mog_pld(c, p, sigma, value_discretization_interval=vdi)
    return float(pld.self_compose(int(T)).get_epsilon_for_delta(float(delta)))


def _pld_eps_reference(c, p, sigma, T, delta, vdi) -> float:
    """The same figure from ``dp_accounting``'s own constructor (slow; tests)."""
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    pld = pld_mod.from_mixture_gaussian_mechanism(
        standard_deviation=float(sigma), sensitivities=[float(v) for v in c],
        sampling_probs=[float(v) for v in p], pessimistic_estimate=True, value_discretization_interval=vdi)
    return float(pld.self_compose(int(T)).get_epsilon_for_delta(float(delta)))
