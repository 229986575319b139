"""Rényi DP of the scalar mixture-of-Gaussians (MoG) mechanism and its conversion to (eps, delta).

Xiang, Wang and Wang (IEEE S&P 2024), Definition 7 (MoG mechanism) and Theorem 1 (RDP ->
``(eps, delta)``); :mod:`.heterpoisson` applies them to HeterPoisson sampling (Theorem 2).

Numerical integration
---------------------
With ``x ~ N(0, 1)`` and ``r(x) = Q/P = sum_i p_i exp(mu_i x - mu_i^2 / 2)`` (``mu_i = c_i /
sigma``) the two Rényi moments are ``E[r^alpha]`` and ``E[r^(1-alpha)]``.  Both are computed
in log space by the trapezoid rule on ``[-L, alpha mu_max + U]``; ``L, U`` are chosen from
explicit tail bounds (``Phi(-z) <= exp(-z^2/2)/2``, ``r <= 1`` for ``x <= 0``, the power-mean
inequality for ``x`` large, ``r >= p_j exp(mu_j x - mu_j^2/2)`` for the reciprocal moment) so
that the truncated mass is below ``1e-30`` of the moment, and the step is halved until the
rule with step ``h`` and ``2h`` agree to ``rtol`` (default ``1e-10``, relative).  The
trapezoid rule converges geometrically for these analytic integrands, so ``|I_h - I_2h|``
bounds the error of ``I_h``; it is added to the moment before the logarithm, so every
returned RDP value is an upper estimate, accurate to about ``rtol / (alpha - 1)`` absolute.
Single-component mixtures (``q_b = 1``) use the closed form ``alpha c^2 / (2 sigma^2)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..._checks import check_eps, check_prob, check_real

__all__ = ["DEFAULT_ORDERS", "MoGRDP", "gaussian_epsilon", "mog_rdp", "rdp_to_epsilon"]

DEFAULT_ORDERS = tuple(float(a) for a in np.round(np.concatenate([
    1 + np.arange(1, 20) / 20.0, np.arange(2.0, 10.01, 0.5), np.arange(11.0, 21.0),
    [24.0, 28.0, 32.0, 40.0, 48.0, 64.0]]), 6))
"""Rényi orders scanned by default (1.05 .. 64)."""

_TAIL_LOG_TOL = math.log(1e-30)  # truncated mass of the integration domain, relative
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# ----------------------------------------------------------------------------- MoG RDP
def _check_orders(orders) -> np.ndarray:
    a = np.asarray(orders, dtype=np.float64).reshape(-1)
    if a.size == 0 or not np.all(np.isfinite(a)) or np.any(a <= 1):
        raise ValueError("orders: expected finite Rényi orders > 1")
    return a


def _check_mixture(sensitivities, probs) -> tuple[np.ndarray, np.ndarray]:
    c = np.asarray(sensitivities, dtype=np.float64).reshape(-1)
    p = np.asarray(probs, dtype=np.float64).reshape(-1)
    if c.size == 0 or c.size != p.size:
        raise ValueError("sensitivities, probs: expected two non-empty 1-D arrays of equal length")
    if not np.all(np.isfinite(c)) or np.any(c < 0):
        raise ValueError("sensitivities: expected finite values >= 0")
    if not np.all(np.isfinite(p)) or np.any(p < 0) or np.any(p > 1):
        raise ValueError("probs: expected probabilities in [0, 1]")
    if abs(p.sum() - 1.0) > 1e-9:
        raise ValueError(f"probs: expected to sum to 1, got {p.sum()!r}")
    keep = p > 0
    c, p = c[keep], p[keep]
    if np.all(c == 0):
        raise ValueError("sensitivities: at least one positive sensitivity with positive probability")
    return c, p


def _zeta(log_c: float) -> float:
    """z with Phi(-z) * exp(log_c) <= 1e-30 (Chernoff: Phi(-z) <= exp(-z^2/2) / 2)."""
    return math.sqrt(2.0 * max(0.0, log_c - _TAIL_LOG_TOL))


def _lse(a: np.ndarray, axis: int = -1) -> np.ndarray:
    m = np.max(a, axis=axis, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    return np.squeeze(m, axis=axis) + np.log(np.sum(np.exp(a - m), axis=axis))


def _log_moments(mu: np.ndarray, logw: np.ndarray, alpha: float, rtol: float):
    """log E[r^alpha], log E[r^(1-alpha)] for a batch of mixtures.

    mu: (K,) standardised sensitivities, logw: (B, K) log weights (-inf allowed).
    Returns (lp, lm, err_p, err_m): log moments (B,) and relative error bounds (B,).
    """
    mu_max = float(mu.max())
    K = mu.size
    # heaviest component of each mixture, for the reciprocal moment's tails
    j = np.argmax(logw, axis=1)
    log_cj = (1 - alpha) * logw[np.arange(logw.shape[0]), j] + alpha * (alpha - 1) * mu[j] ** 2 / 2
    shift = float(np.max((alpha - 1) * mu[j]))
    lo = -max(_zeta(0.0), shift + _zeta(float(np.max(log_cj))))
    hi = max(alpha * mu_max + _zeta((alpha - 1) * math.log(K)), _zeta(float(np.max(log_cj))))
    h = min(0.1, 2.0 / (mu_max + 1.0))
    for _ in range(12):
        n = math.ceil((hi - lo) / h)
        n += n % 2  # even number of intervals, so the 2h rule uses every other point
        x = lo + h * np.arange(n + 1)
        lr = _lse(logw[:, :, None] + mu[None, :, None] * x[None, None, :]
                  - 0.5 * mu[None, :, None] ** 2, axis=1)                    # (B, N)
        lphi = -0.5 * x * x - _LOG_SQRT_2PI
        out = []
        for expo in (alpha, 1.0 - alpha):
            f = expo * lr + lphi
            # trapezoid with step h and 2h (end points carry negligible mass)
            ih = _lse(f, axis=1) + math.log(h)
            i2 = _lse(f[:, ::2], axis=1) + math.log(2 * h)
            rel = np.abs(np.expm1(i2 - ih))
            out.append((ih, rel))
        (lp, ep), (lm, em) = out
        if max(float(ep.max()), float(em.max())) <= rtol or h < 1e-5:
            break
        h /= 2
    return lp, lm, ep, em


@dataclass(frozen=True)
class MoGRDP:
    """Per-step RDP of a mixture-of-Gaussians mechanism (Definition 7).

    Attributes
    ----------
    orders : np.ndarray
    mix_gauss : np.ndarray
        ``D_alpha(Q || P)`` with ``Q`` the mixture, ``P = N(0, sigma^2)``.
    gauss_mix : np.ndarray
        ``D_alpha(P || Q)``.
    rdp : np.ndarray
        ``max`` of the two (Theorem 2), upper estimates (numerical error added).
    error : np.ndarray
        Bound on the absolute numerical error of ``rdp`` (already included in it).
    """

    orders: np.ndarray
    mix_gauss: np.ndarray
    gauss_mix: np.ndarray
    rdp: np.ndarray
    error: np.ndarray


def _mog_rdp_order(c: np.ndarray, logw: np.ndarray, sigma: float, alpha: float, rtol: float):
    """(D(Q||P), D(P||Q), error) arrays (B,) at one order for B mixtures on the support c."""
    mu = c / sigma
    B, K = logw.shape
    # chunk the mixtures so that the (chunk, K, grid) work array stays below ~4M doubles
    span = alpha * float(mu.max()) + 40.0
    npts = span / min(0.1, 2.0 / (float(mu.max()) + 1.0))
    chunk = max(1, int(4e6 // max(1.0, K * npts)))
    mg, gm, err = np.empty(B), np.empty(B), np.empty(B)
    for s in range(0, B, chunk):
        lp, lm, ep, em = _log_moments(mu, logw[s:s + chunk], alpha, rtol)
        mg[s:s + chunk] = (lp + np.log1p(ep)) / (alpha - 1)
        gm[s:s + chunk] = (lm + np.log1p(em)) / (alpha - 1)
        err[s:s + chunk] = np.maximum(np.log1p(ep), np.log1p(em)) / (alpha - 1)
    # Rényi divergences are >= 0; tiny negative values are rounding
    return np.maximum(mg, 0.0), np.maximum(gm, 0.0), err


def _mog_rdp_batch(c: np.ndarray, logw: np.ndarray, sigma: float, orders: np.ndarray, rtol: float):
    """RDP arrays (B, A) for B mixtures sharing the support c."""
    B, A = logw.shape[0], orders.size
    mg, gm, err = np.empty((B, A)), np.empty((B, A)), np.empty((B, A))
    for a, alpha in enumerate(orders):
        mg[:, a], gm[:, a], err[:, a] = _mog_rdp_order(c, logw, sigma, float(alpha), rtol)
    return mg, gm, err


def _mog_rdp_lower(c: np.ndarray, logw: np.ndarray, sigma: float, alpha: float) -> np.ndarray:
    """Cheap lower bound on D_alpha(Q||P) per mixture: (a + b)^alpha >= a^alpha + b^alpha,
    so E[r^alpha] >= max_i p_i^alpha exp(alpha (alpha - 1) mu_i^2 / 2)."""
    mu = c / sigma
    with np.errstate(invalid="ignore"):
        t = alpha * logw + alpha * (alpha - 1) * mu[None, :] ** 2 / 2
    t = np.where(np.isnan(t), -np.inf, t)
    return np.maximum(np.max(t, axis=1), 0.0) / (alpha - 1)


def mog_rdp(sensitivities, probs, sigma: float, orders=DEFAULT_ORDERS, *, rtol: float = 1e-10) -> MoGRDP:
    """Rényi DP of one step of the scalar MoG mechanism (paper Definition 7).

    ``P = N(0, sigma^2)``, ``Q = sum_i probs[i] N(sensitivities[i], sigma^2)``; returns both
    ``D_alpha(Q||P)``, ``D_alpha(P||Q)`` and their maximum, by the numerical integration
    described in the module docstring (relative precision ``rtol`` on the Rényi moments).
    A vector MoG is dominated by the scalar one with the norms as sensitivities (paper
    Corollary 1), so this bounds per-sub-graph clipped Gaussian sums.

    Parameters
    ----------
    sensitivities : array_like
        ``c_i >= 0``.
    probs : array_like
        ``p_i`` in [0, 1], summing to 1.
    sigma : float
        Noise standard deviation, > 0.
    orders : array_like
        Rényi orders, > 1.
    rtol : float
        Relative precision of the numerical integration, in [1e-14, 1e-3].
    """
    c, p = _check_mixture(sensitivities, probs)
    sigma = check_eps("sigma", sigma)
    orders = _check_orders(orders)
    rtol = check_real("rtol", rtol, 1e-14, 1e-3)
    if c.size == 1:  # plain Gaussian mechanism: closed form, both directions equal
        v = orders * c[0] ** 2 / (2 * sigma**2)
        return MoGRDP(orders, v, v.copy(), v.copy(), np.zeros_like(v))
    mg, gm, err = _mog_rdp_batch(c, np.log(p)[None, :], sigma, orders, rtol)
    return MoGRDP(orders, mg[0], gm[0], np.maximum(mg[0], gm[0]), err[0])


def rdp_to_epsilon(orders, rdp, delta: float) -> tuple[float, float]:
    """(eps, best order) from total RDP values by the paper's Theorem 1.

    ``eps = rdp(alpha) + log((alpha-1)/alpha) - (log delta + log alpha) / (alpha - 1)``,
    minimised over the given orders (Balle et al. 2020, Theorem 21).
    """
    orders = _check_orders(orders)
    rdp = np.asarray(rdp, dtype=np.float64).reshape(-1)
    if rdp.size != orders.size:
        raise ValueError("rdp: expected one value per order")
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    eps = rdp + np.log((orders - 1) / orders) - (math.log(delta) + np.log(orders)) / (orders - 1)
    eps = np.where(np.isnan(eps), np.inf, eps)
    i = int(np.argmin(eps))
    return max(0.0, float(eps[i])), float(orders[i])


def _eps_with_tail(orders, rdp_total, delta: float, tail_T: float) -> tuple[float, float]:
    """min over orders of eps such that delta' + e^eps * tail_T <= delta, where eps is the
    Theorem 1 conversion at delta' (:mod:`.heterpoisson` docstring, item 1)."""
    orders = np.asarray(orders, dtype=np.float64)
    rdp_total = np.asarray(rdp_total, dtype=np.float64)
    if tail_T <= 0:
        return rdp_to_epsilon(orders, rdp_total, delta)
    best, best_a = math.inf, float(orders[0])
    base = rdp_total + np.log((orders - 1) / orders) - np.log(orders) / (orders - 1)
    for a, b in zip(orders, base):
        if not math.isfinite(b):
            continue

        def f(e, a=a, b=b):
            dp = delta - math.exp(min(e, 700.0)) * tail_T
            return math.inf if dp <= 0 else b - math.log(dp) / (a - 1)

        # f is increasing; iterating e <- f(e) from below climbs to the least fixed point
        e = max(0.0, b - math.log(delta) / (a - 1))
        for _ in range(200):
            fe = f(e)
            if not math.isfinite(fe):
                e = math.inf
                break
            if fe <= e:
                break
            e = fe + 1e-12 * max(1.0, abs(fe))
        if e < best:
            best, best_a = e, float(a)
    return max(0.0, best), best_a


def gaussian_epsilon(sensitivity: float, sigma: float, T: int, delta: float) -> float:
    """Exact (eps, delta) curve of ``T`` compositions of the Gaussian mechanism: the
    composition is the Gaussian mechanism with ``mu = sqrt(T) sensitivity / sigma``, and
    ``delta(eps) = Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2)`` (Balle & Wang 2018) is
    inverted by bisection.  Reference for the degenerate mixture (tests)."""
    mu = math.sqrt(T) * sensitivity / sigma

    from scipy import special

    def dlt(e):  # the second term in log space: e^eps overflows where Phi underflows
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e + float(special.log_ndtr(-e / mu - mu / 2)))

    if dlt(0.0) <= delta:
        return 0.0
    lo, hi = 0.0, 1.0
    while dlt(hi) > delta:
        hi *= 2
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if dlt(mid) > delta:
            lo = mid
        else:
            hi = mid
    return hi


def _eps_lazy(c, logw, labels, sigma, T, delta, tail_T, orders, rtol, *, cache: dict | None = None,
              target: float | None = None):
    """min over orders (and max over the mixtures, rows of ``logw``) of the Theorem 1 eps,
    with ``delta`` reduced by ``e^eps tail_T``, and the same minimum without the tail
    charge (the whole ``delta`` to the RDP conversion: a lower bound on the first for this
    mixture and, RDP growing with the cap, for every larger cap; :mod:`.heterpoisson`).
    Orders whose cheap RDP lower bound already gives a larger eps than the best found, in
    both minima, are skipped: they cannot be a minimiser of either.

    ``cache`` (a dict kept by the caller for one ``(c, logw, sigma)``) holds the per-step
    RDP of every order computed, so that other ``T`` and ``delta`` reuse it; with
    ``target``, the scan stops at the first order whose eps is at most ``target`` (a
    decision, not the minimum: the figures returned are then upper bounds of the minima).
    Returns ``(eps, order, label of the worst mixture, eps without the tail charge)``."""
    best = (math.inf, float(np.min(orders)), labels[0])
    best_free = math.inf
    for alpha in np.sort(np.asarray(orders, dtype=np.float64)):
        alpha = float(alpha)
        hit = None if cache is None else cache.get(alpha)
        if hit is None:
            lb = np.array([T * float(np.max(_mog_rdp_lower(c, logw, sigma, alpha)))])
            e_lb, _ = _eps_with_tail(np.array([alpha]), lb, delta, tail_T)
            f_lb, _ = rdp_to_epsilon(np.array([alpha]), lb, delta)
            if e_lb >= best[0] and f_lb >= best_free:
                continue
            mg, gm, _ = _mog_rdp_order(c, logw, sigma, alpha, rtol)
            both = np.maximum(mg, gm)
            i = int(np.argmax(both))
            hit = (float(both[i]), i)
            if cache is not None:
                cache[alpha] = hit
        r, i = hit
        e, _ = _eps_with_tail(np.array([alpha]), np.array([T * r]), delta, tail_T)
        f, _ = rdp_to_epsilon(np.array([alpha]), np.array([T * r]), delta)
        if e < best[0]:
            best = (e, alpha, labels[i])
        best_free = min(best_free, f)
        if target is not None and best[0] <= target:
            break
    return (*best, best_free)
