"""PRV and GDP figures of the mixture-of-Gaussians mechanism (issue 38, item 3).

Privacy random variable (PRV, Gopi, Lee and Wutschitz 2021, "Numerical composition of
differential privacy"): the privacy loss ``Y = L(X)`` of one step, ``X`` drawn from the
mechanism's output on one dataset, ``L`` the log-likelihood ratio of the two neighbouring
outputs; the ``T``-fold composition is the sum of ``T`` independent copies, and
``delta(eps) = E[(1 - e^(eps - Y))_+]`` (plus the mass at ``+inf``).  :func:`prv_epsilon`
is our own implementation, independent of ``dp_accounting``'s composition (the tests
compare the two):

* ``Y`` is discretised on the grid ``h Z`` by rounding *up* ("privacy buckets"): the mass of
  ``(y - h, y]`` goes to ``y``, the mass above the grid to ``+inf``, the mass below it to its
  lowest point.  ``delta(eps)`` is non-decreasing in ``Y`` and composition is a sum, so a
  stochastically larger ``Y`` gives a larger ``delta`` after any number of compositions:
  the figure is an upper bound (for ``Y``'s CDF computed exactly: the mixture's ``L`` is
  monotone in ``X``, so ``P[L > y]`` is the mixture's CDF at ``L``'s inverse, found by the
  vectorised Newton method of :mod:`.pld`);
* the ``T``-fold sum is composed by squaring (FFT convolutions, ``scipy.signal``); after
  each convolution, the mass above a window is moved to ``+inf`` and the mass below it up
  to its lowest point, each at most ``tail_mass`` (again only larger ``Y``); FFT round-off
  (about ``1e-16`` of the largest mass) is the only non-pessimistic error;
* ``eps(delta)`` is solved exactly for the discrete ``Y`` (``delta`` is ``A - e^eps B`` between
  grid points), both adjacency directions, the larger taken.

Both this and the PLD figure account the same mechanism; they differ by the discretisation
(buckets here, connect-the-dots there) and are checked against each other and against
``dp_accounting`` (``tests/test_accountants_fast.py``).

Gaussian DP (Dong, Roth and Su 2022): :func:`gdp_epsilon`.  One step of the mixture
``Q = sum_i p_i N(c_i, sigma^2)`` against ``P = N(0, sigma^2)`` is ``mu``-GDP with
``mu = max_i c_i / sigma``, in both directions: for a test of level ``alpha`` against ``Q``,
``1 - E_Q[phi] = sum_i p_i (1 - E_{Q_i}[phi]) >= sum_i p_i G_{c_i/sigma}(alpha) >=
G_mu(alpha)``; for one against ``P`` with ``alpha = sum_i p_i alpha_i`` (``alpha_i =
E_{Q_i}[phi]``), ``1 - E_P[phi] >= max_i G_mu(alpha_i) >= G_mu(min_i alpha_i) >=
G_mu(alpha)``.  GDP composes exactly (``sqrt(T) mu``), so ``T`` steps are ``sqrt(T) mu``-GDP
and ``eps(delta)`` is the Gaussian mechanism's (Balle and Wang 2018).  This is valid but
loose: it ignores the amplification by sampling (the worst component decides), and no
better ``mu`` exists for a subsampled mixture, whose trade-off curve decays like the worst
component's.  The central limit approximation of subsampled GDP (Bu et al. 2020, Opacus's
``"gdp"``) is **not** offered: it is not a bound and under-reports ``eps`` for few steps or
small noise.
"""
from __future__ import annotations

import math

import numpy as np

from ..._checks import check_real
from .pld import _MoGLoss
from .rdp import gaussian_epsilon

__all__ = ["gdp_epsilon", "prv_epsilon"]

_X_TAIL = 1e-18  # output mass left outside the grid of one step (to +inf, or pushed up)
_MAX_GRID = 1_000_000  # points of one step's grid: a coarser mesh beyond (valid, looser)
_MAX_COMPOSED = 1 << 22  # points of a composed distribution: coarsened by 2 beyond (valid, looser)


def _step_pmf(loss: _MoGLoss, h: float):
    """``(first grid index, masses, mass at +inf, mesh)`` of one step's rounded-up loss (the
    mesh coarsened so that the grid has at most ``_MAX_GRID`` points)."""
    from scipy import stats

    s_max, sig = float(loss.s.max()), loss.sigma
    z = float(stats.norm.isf(_X_TAIL / 2)) * sig
    # the output X: remove draws from sum_i p_i N(-s_i, v), add from N(0, v)
    x_lo = -z - (s_max if loss.direction == "remove" else 0.0)
    x_hi = z
    l_min, l_max = float(loss.loss(np.array([x_hi]))[0]), float(loss.loss(np.array([x_lo]))[0])
    h = max(h, (l_max - l_min) / _MAX_GRID)
    i0, i1 = math.floor(l_min / h), math.ceil(l_max / h)
    y = np.arange(i0, i1 + 1, dtype=np.float64) * h
    # G(y) = P[L > y] = P[X < x(y)], L decreasing in X; outside L's range G is 0 or 1
    G = np.empty_like(y)
    if loss.q >= 1.0:
        inside = np.ones(y.shape, bool)
    elif loss.direction == "add":  # L < -log(1 - q)
        inside = y < -math.log1p(-loss.q)
        G[~inside] = 0.0
    else:  # L > log(1 - q)
        inside = y > math.log1p(-loss.q)
        G[~inside] = 1.0
    if inside.any():
        G[inside] = loss.upper_cdf(loss.inverse(y[inside]))
    G = np.minimum.accumulate(np.clip(G, 0.0, 1.0))  # non-increasing (rounding)
    mass = np.empty_like(G)
    mass[0] = 1.0 - G[0]  # L <= y_0: pushed up to y_0
    mass[1:] = G[:-1] - G[1:]
    return i0, mass, float(G[-1]), h


def _truncate(i0: int, pmf: np.ndarray, inf: float, tail: float):
    """Move at most ``tail`` of the upper mass to ``+inf`` and push at most ``tail`` of the
    lower mass up to the window's first point (both pessimistic); drop FFT round-off below 0."""
    pmf = np.maximum(pmf, 0.0)
    up = np.cumsum(pmf[::-1])[::-1]  # mass at index >= i
    hi = int(np.searchsorted(-up, -tail, side="left"))  # first index with mass above it <= tail
    hi = max(0, min(pmf.size - 1, hi))
    inf = inf + float(pmf[hi + 1:].sum())
    low = np.cumsum(pmf)
    lo = int(np.searchsorted(low, tail, side="right"))  # mass below lo <= tail
    lo = min(lo, hi)
    out = pmf[lo:hi + 1].copy()
    out[0] += float(pmf[:lo].sum())
    return i0 + lo, out, inf


def _coarsen(a, r: int):
    """The distribution on the mesh ``r h``, every point rounded up (pessimistic)."""
    i0, pmf, inf, h = a
    j0 = -((-i0) // r)  # ceil(i0 / r)
    idx = -((-(i0 + np.arange(pmf.size))) // r) - j0
    return j0, np.bincount(idx, weights=pmf), inf, h * r


def _convolve(a, b, tail: float):
    """The distribution of the sum (FFT), on the coarser of the two meshes, truncated, and
    coarsened by 2 until it has at most ``_MAX_COMPOSED`` points (each coarsening rounds the
    composed loss up by less than one new mesh step)."""
    from scipy.signal import fftconvolve

    while a[3] < b[3] * (1 - 1e-12):
        a = _coarsen(a, 2)
    while b[3] < a[3] * (1 - 1e-12):
        b = _coarsen(b, 2)
    while a[1].size + b[1].size > _MAX_COMPOSED:
        a, b = _coarsen(a, 2), _coarsen(b, 2)
    (ia, pa, ma, h), (ib, pb, mb, _) = a, b
    pmf = fftconvolve(pa, pb) if min(pa.size, pb.size) > 64 else np.convolve(pa, pb)
    return (*_truncate(ia + ib, pmf, 1.0 - (1.0 - ma) * (1.0 - mb), tail), h)


def _compose(step, T: int, tail: float):
    """``T`` independent copies summed, by squaring."""
    result, base = None, step
    while T:
        if T & 1:
            result = base if result is None else _convolve(result, base, tail)
        T >>= 1
        if T:
            base = _convolve(base, base, tail)
    return result


def _eps_for_delta(i0: int, pmf: np.ndarray, inf: float, h: float, delta: float) -> float:
    """The smallest ``eps`` with ``inf + sum_{y > eps} p(y) (1 - e^(eps - y)) <= delta``."""
    from scipy.signal import lfilter

    if inf > delta:
        return math.inf
    y = (i0 + np.arange(pmf.size)) * h
    A = np.cumsum(pmf[::-1])[::-1]  # sum_{k >= j} p_k
    # R_j = sum_{k >= j} p_k e^(y_j - y_k) = p_j + e^-h R_{j+1}
    R = lfilter([1.0], [1.0, -math.exp(-h)], pmf[::-1])[::-1]
    # delta at eps = y_j: the mass strictly above y_j
    d_at = inf + np.append(A[1:], 0.0) - np.append(R[1:], 0.0) * math.exp(-h)
    ok = np.nonzero(d_at <= delta)[0]
    j = int(ok[0])  # d_at is non-increasing; the last point always qualifies (its upper mass is 0)
    if j == 0:
        return max(0.0, float(y[0]))  # below the support only eps <= y_0 is possible
    # on (y_{j-1}, y_j]: delta(eps) = inf + A_j - e^(eps - y_j) R_j
    num = inf + A[j] - delta
    eps = float(y[j]) + math.log(num / R[j]) if num > 0 and R[j] > 0 else float(y[j])
    return max(0.0, min(float(y[j]), max(float(y[j - 1]), eps)))


def _auto_mesh(T: int, mesh) -> float:
    """``mesh``, or with ``"auto"`` ``min(1e-3, 0.01 / T)`` (at least ``1e-5``): rounding up costs
    at most ``T h`` of privacy loss, about half of it on average."""
    if mesh == "auto":
        return max(1e-5, min(1e-3, 0.01 / T))
    return check_real("mesh", mesh, 1e-5, 1.0)


def prv_epsilon(sensitivities, probs, sigma: float, T: int, delta: float, *, mesh="auto",
                tail_mass: float = 1e-15) -> float:
    """``eps(delta)`` of ``T`` compositions of the scalar mixture-of-Gaussians mechanism
    (``N(0, sigma^2)`` against ``sum_i probs[i] N(sensitivities[i], sigma^2)``, both
    directions) by our PRV accountant (module docstring): an upper bound up to FFT round-off,
    above the exact figure by at most ``T * mesh`` (the rounding up of every step's loss;
    about half of that in practice; a step whose loss spans more than a million points of
    the mesh gets a coarser one).

    Parameters
    ----------
    sensitivities, probs : array_like
        The mixture (``c_i >= 0``, at least one positive; ``p_i`` summing to 1).
    sigma : float
        Noise standard deviation, > 0.
    T : int
        Compositions, >= 1.
    delta : float
        In (0, 1).
    mesh : float or "auto"
        Grid of the privacy loss, in [1e-5, 1]; ``"auto"``: ``min(1e-3, 0.01 / T)``, at least
        ``1e-5`` (a slack of at most 0.01 until ``T = 1000``).
    tail_mass : float
        Mass moved at each truncation of the composed window (pessimistically), in [0, 1e-6].
    """
    h = _auto_mesh(int(T), mesh)
    tail = check_real("tail_mass", tail_mass, 0.0, 1e-6)
    out = 0.0
    for direction in ("remove", "add"):
        step = _step_pmf(_MoGLoss(sensitivities, probs, sigma, direction), h)
        out = max(out, _eps_for_delta(*_compose(step, int(T), tail), float(delta)))
    return out


def gdp_epsilon(sensitivities, probs, sigma: float, T: int, delta: float) -> float:
    """``eps(delta)`` of ``T`` compositions of the mixture by Gaussian DP: ``sqrt(T) mu``-GDP
    with ``mu = max c_i / sigma`` (module docstring: valid, loose, no amplification)."""
    s = np.asarray(sensitivities, np.float64)[np.asarray(probs, np.float64) > 0]
    return gaussian_epsilon(float(s.max()), float(sigma), int(T), float(delta))
