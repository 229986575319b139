"""Mixture-of-Gaussians accountant for HeterPoisson node-level DP-SGD.

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks" (``shared/papers/003_a68cceb6d6862899.txt``), Definition 7 (MoG mechanism),
Theorem 2 (RDP of Algorithm 1), Theorem 1 (RDP -> (eps, delta)), Appendix B.1.

Units
-----
Everything is in the paper's units: per-sub-graph gradients clipped to norm ``C = 0.5``, so
one sub-graph moves the noisy sum by at most ``1/2`` and ``k`` sub-graphs that each *change*
by at most ``2 * 0.5 = 1``.  ``sigma`` is the standard deviation of the Gaussian noise in
those units; with a general clipping norm ``C`` the noise actually added is
``N(0, (2 C sigma)^2 I)`` (:mod:`ldpfast.dpsgd` does this scaling).

Theorem 2
---------
For a differing node ``z`` of out-degree ``D``, one step of Algorithm 1 is dominated by the
scalar MoG ``P = N(0, sigma^2)`` vs ``Q = sum_i p_i N(c_i, sigma^2)`` with

* ``c = 1/2`` w.p. ``q_b`` (``z`` is a central node);
* ``c = k``  w.p. ``(1 - q_b) Bin(k; D, q_b min(1, M/D))``, ``k = 0..D`` (``z`` is a peripheral
  node of ``k`` sub-graphs).  The paper writes ``q_b M / D``; the sampler's probability is
  ``q_b min(1, M / D)`` (Alg. 3 never keeps a neighbour with probability above 1), which is
  what is used here and coincides with the paper's for ``D >= M``.

and ``gamma <= T max_D max(D_alpha(P||Q), D_alpha(Q||P))``, converted to ``(eps, delta)`` by
Theorem 1: ``eps = T gamma + log((alpha-1)/alpha) - (log delta + log alpha) / (alpha - 1)``
minimised over ``alpha``.

Which neighbouring relation (``degree_model``)
---------------------------------------------
The peripheral probability ``min(1, M / D_ot(j))`` depends on out-degrees, so the mixture
above is a bound only for a neighbouring relation under which those degrees do not move.

* ``"s2_public_degrees"`` (default): **paper 003 model S2** (Definition 4 and the paragraph
  after it).  The whole graph ``G`` is fixed; neighbouring training graphs ``G*, G' ⊆ G``
  differ by one node ``z`` (its features, label and edges are never read when it is
  absent), and every node's in- and out-degree *in G* is the same whichever of them is
  used.  ``D_ot`` must then be the out-degree in the whole graph ``G`` (the sampler's
  ``out_degree`` argument in the inductive setting).  ``z``'s peripheral count is
  ``Bin(d_z, q_b min(1, M / D_ot(z)))`` with ``d_z <= D_ot(z)`` its out-neighbours among the
  candidates: first-order dominated by Theorem 2's mixture at ``D = D_ot(z)``.  It does
  **not** hold when ``D_ot`` is computed on a graph that changes with ``z`` (the induced
  training graph, or any graph when the structure itself is private): there ``z`` changes
  other nodes' probabilities and hence sub-graphs that never contain it.  Counter-example
  (tests/test_heterpoisson_privacy.py): 40 pairs ``j_l -> i_l``, candidates the ``i_l``, ``z``
  joined to every ``j_l``; ``q_b = 1/2``, ``M = 1``: ``D_ot(j_l)`` goes 1 -> 2, the
  peripheral count per step 20 -> 10, and with per-sub-graph gradients ``+-1/2`` and the
  ``sigma = 3.93`` calibrated here to ``eps = 1, delta = 1e-5, T = 1`` the true ``delta`` at
  ``eps = 1`` is 0.61.
* ``"public_bound"`` (``degree_bound = D_pub``): every node joins the sub-graph of a central
  node it points to with the same probability ``p = min(1, M / D_pub)``, fixed by public
  information only; the structure may be private (neighbouring graphs differ by one node
  *and all its edges*).  Then ``z`` changes only the sub-graphs that contain it: its own
  (``c = 1/2``, w.p. ``q_b``; a central node is dropped from the others) and, otherwise,
  those of its central out-neighbours that draw it, ``k ~ Bin(d_z, q_b p)`` with ``d_z`` the
  number of candidates ``z`` points to.  ``d_z`` is private and, without a bound, as large as
  ``|V| - 1``: with a constant ``p`` a node with ``d_z > D_pub`` has mean count
  ``d_z q_b M / D_pub > q_b M``, which Theorem 2's maximum over ``D`` (whose probability
  shrinks as ``M / D``) does **not** cover (a test shows the RDP exceeding it).  The
  adjustment: the guarantee is over graphs in which every node has at most ``D_pub``
  out-neighbours among the candidates (bounded-degree node DP; the sampler refuses other
  inputs, so neighbours both in the class never differ in that check), and the maximum is
  over ``d <= D_pub`` of the mixture ``{1/2: q_b, k: (1 - q_b) Bin(k; d, q_b p)}``.  For an
  integer order ``D_alpha(Q||P) = log E[exp(sum_{i<j} c_i c_j / sigma^2)] / (alpha - 1)``
  (``c_1..c_alpha`` i.i.d. sensitivities) is non-decreasing in the first-order stochastic
  order of the sensitivity, and ``Bin(d, r) <=_st Bin(D_pub, r)``, so ``d = D_pub`` is the
  worst case in that direction; at ``d = D_pub`` the mixture *is* Theorem 2's at
  ``D = D_pub`` (so this figure never exceeds the S2 one with ``|V| > D_pub``, tested), and
  ``Bin(D_pub, q_b M / D_pub) <=_cx Poi(q_b M)`` as in item 2 below.  The reverse direction
  and fractional orders use the numerical maximum over ``d`` (every ``d <= 16``, a
  geometric grid, ``D_pub``), as for S2; an exhaustive scan of every ``d <= D_pub`` gave the
  same maximum, attained at ``d = D_pub`` in every order and both directions, for
  ``q_b`` 0.23 / 0.54, ``M`` 1 / 4, ``D_pub`` 300 / 709, ``sigma`` 1.5 .. 11 (tests check it
  exhaustively for small ``D_pub``).  The count never exceeds ``D_pub``, and the tail is
  exact: ``(1 - q_b) P[Bin(D_pub, q_b p) > K]``.

Every :class:`PrivacyReport` names its model (``report.model``).

Two things the theorem leaves implicit are handled explicitly here:

1. **The heavy tail.**  Component ``c = k`` has weight about ``lambda^k / k!``
   (``lambda = q_b M``) but contributes ``exp(alpha (alpha - 1) k^2 / (2 sigma^2))`` to the
   Rényi moment, so with every component kept ``D_alpha`` is astronomically large for every
   ``alpha > 1`` once ``D`` is large enough (``q_b M = 0.4``, ``sigma = 5``: ``D_4 > 60`` at
   ``D = 100``, ``D_2 > 2 10^4`` at ``D = 1000``; those components' weights are below
   ``1e-2000``, so code that handles probabilities rather than log-probabilities silently
   loses them), and the maximum over ``D <= |V| - 1`` is useless.  (The authors' code drops
   components with log-weight below -30 and renormalises, which is not a bound.)  We cap the count at ``K``:
   the mechanism ``A'`` that keeps ``z`` in at most ``K`` sub-graphs equals Algorithm 1 except
   on the event ``{some step has k > K}``, of probability at most ``T * tail(K)`` with
   ``tail(K) = (1 - q_b) max_D P[Bin(D, q_b min(1, M/D)) >= K + 1]``; a coupling then gives:
   if ``A'`` is ``(eps, delta')``-DP, Algorithm 1 is ``(eps, delta' + e^eps T tail(K))``-DP.
   ``A'`` is exactly the MoG above with the mass ``k >= K`` moved to ``c = K``.  ``tail(K)``
   is bounded by the Poisson tail ``(1 - q_b) P[Poi(lambda) >= K + 1]`` (Anderson & Samuels
   1967: ``P[Bin(n, p) >= k] <= P[Poi(np) >= k]`` for ``k >= np + 1``, and ``Poi`` tails grow
   with the mean), and by the exact binomial maximum over ``D <= min(|V| - 1, 20000)``; the
   larger of the two is used.  ``K`` is chosen among a few values to minimise ``eps``.
2. **The maximum over D.**  ``D_alpha`` is evaluated for every ``D <= 16``, on a geometric
   grid up to ``|V| - 1`` and in the limit ``D -> inf`` (``Bin(D, lambda/D) -> Poi(lambda)``),
   and the maximum taken per order.  For ``D >= M`` the peripheral count is increasing in
   the convex order in ``D`` (Hoeffding 1956: ``Bin(n, lambda/n)`` is convex-order increasing
   in ``n`` with limit ``Poi(lambda)``), and for integer ``alpha`` the moment
   ``E_P[(Q/P)^alpha] = E[exp(sum_{i<j} mu_{k_i} mu_{k_j})]`` is component-wise convex in the
   i.i.d. counts, so ``D_alpha(Q||P)`` is non-decreasing in ``D`` before the cap.  This is a
   numerical maximisation, not a proof: numerically ``D_alpha(Q||P)`` stays non-decreasing
   in ``D`` after the cap (tested), ``D_alpha(P||Q)`` peaks at small ``D`` but below the other
   direction, and the maximum was attained in the Poisson limit in every setting we ran
   (Facebook / Twitch-DE, ``M`` in 1..4).  ``degrees="all"`` evaluates every ``D`` (slow; the
   tests check it agrees with the default on small graphs).

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

PLD figure
----------
:meth:`HeterPoissonAccountant.pld_epsilon` gives an independent, tighter figure with
Google's ``dp_accounting`` (0.6): ``pld.privacy_loss_distribution.
from_mixture_gaussian_mechanism`` (which wraps ``privacy_loss_mechanism.
MixtureGaussianPrivacyLoss``, both adjacency directions, pessimistic discretisation),
composed ``T`` times, at the worst ``D`` of the RDP scan, ``D = 1`` and the Poisson limit.  It
keeps components up to a cap whose tail is below ``1e-12 delta / T`` and charges
``e^eps T tail`` to ``delta`` by the same coupling.  Composing PLDs is exact up to
discretisation, RDP composition plus conversion is not, so ``eps_PLD <= eps_RDP`` up to the
discretisation error (``value_discretization_interval``, default ``1e-3``): the tests check
this relationship and both figures against the plain Gaussian mechanism where the mixture
degenerates (``q_b = 1``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from .._checks import check_eps, check_int, check_prob, check_real

__all__ = [
    "DEFAULT_ORDERS",
    "DEGREE_MODELS",
    "HeterPoissonAccountant",
    "MixtureAccountant",
    "PrivacyReport",
    "gaussian_epsilon",
    "heterpoisson_mixture",
    "mog_rdp",
    "privacy_model",
    "rdp_to_epsilon",
    "tail_bound",
]

DEFAULT_ORDERS = tuple(float(a) for a in np.round(np.concatenate([
    1 + np.arange(1, 20) / 20.0, np.arange(2.0, 10.01, 0.5), np.arange(11.0, 21.0),
    [24.0, 28.0, 32.0, 40.0, 48.0, 64.0]]), 6))
"""Rényi orders scanned by default (1.05 .. 64)."""

DEGREE_MODELS = ("s2_public_degrees", "public_bound")
"""Neighbouring relations the HeterPoisson accounting is stated for (module docstring)."""
DEGREE_BOUND_MAX = 2**31 - 1

_TAIL_LOG_TOL = math.log(1e-30)  # truncated mass of the integration domain, relative
_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


# ----------------------------------------------------------------------------- models
def check_degree_model(degree_model, degree_bound) -> tuple[str, int | None]:
    """Validate ``(degree_model, degree_bound)``: ``degree_bound`` is required (an int in
    ``[1, 2**31 - 1]``) with ``"public_bound"`` and must be ``None`` with
    ``"s2_public_degrees"``."""
    if not isinstance(degree_model, str) or degree_model not in DEGREE_MODELS:
        raise ValueError(f"degree_model: expected one of {DEGREE_MODELS}, got {degree_model!r}")
    if degree_model == "public_bound":
        if degree_bound is None:
            raise ValueError("degree_bound: required with degree_model='public_bound' "
                             f"(an int in [1, {DEGREE_BOUND_MAX}])")
        return degree_model, check_int("degree_bound", degree_bound, 1, DEGREE_BOUND_MAX)
    if degree_bound is not None:
        raise ValueError("degree_bound: only used with degree_model='public_bound'; under "
                         "'s2_public_degrees' the probabilities come from the whole graph's out-degrees")
    return degree_model, None


def privacy_model(degree_model: str = "s2_public_degrees", degree_bound: int | None = None) -> str:
    """One-line statement of the neighbouring relation a HeterPoisson guarantee holds for."""
    degree_model, degree_bound = check_degree_model(degree_model, degree_bound)
    if degree_model == "s2_public_degrees":
        return ("node-level DP, paper 003 model S2 (Definition 4): the out-degrees of the whole graph are public "
                "and fixed; neighbouring training graphs G*, G' of the fixed whole graph G differ by one node "
                "(features, label, edges); D_ot is the out-degree in G. Not a guarantee when the structure "
                "itself is private")
    return (f"node-level DP with private structure: neighbouring graphs differ by one node and all its edges; "
            f"peripheral probability min(1, M / {degree_bound}) from the public degree bound only; holds over "
            f"graphs in which every node has at most {degree_bound} out-neighbours among the candidate "
            f"central nodes (the sampler refuses other graphs)")


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
    Theorem 1 conversion at delta' (module docstring, item 1)."""
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

    def dlt(e):
        return stats.norm.cdf(-e / mu + mu / 2) - math.exp(e) * stats.norm.cdf(-e / mu - mu / 2)

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


def _eps_lazy(c, logw, labels, sigma, T, delta, tail_T, orders, rtol):
    """min over orders (and max over the mixtures, rows of ``logw``) of the Theorem 1 eps,
    with ``delta`` reduced by ``e^eps tail_T``.  Orders whose cheap RDP lower bound already
    gives a larger eps than the best found are skipped: they cannot be the minimiser.
    Returns ``(eps, order, label of the worst mixture)``."""
    best = (math.inf, float(np.min(orders)), labels[0])
    for alpha in np.sort(np.asarray(orders, dtype=np.float64)):
        alpha = float(alpha)
        lb = float(np.max(_mog_rdp_lower(c, logw, sigma, alpha)))
        e_lb, _ = _eps_with_tail(np.array([alpha]), np.array([T * lb]), delta, tail_T)
        if e_lb >= best[0]:
            continue
        mg, gm, _ = _mog_rdp_order(c, logw, sigma, alpha, rtol)
        both = np.maximum(mg, gm)
        i = int(np.argmax(both))
        e, _ = _eps_with_tail(np.array([alpha]), np.array([T * both[i]]), delta, tail_T)
        if e < best[0]:
            best = (e, alpha, labels[i])
    return best


# ----------------------------------------------------------------------------- reports
@dataclass
class PrivacyReport:
    """What one accountant call found.

    Attributes
    ----------
    eps, delta : float
        The guarantee: ``(eps, delta)``-DP for the neighbouring relation ``model``.
    sigma : float
        Noise standard deviation in the paper's units (clip norm 0.5).
    T : int
        Number of steps.
    method : str
        ``"rdp"`` (Theorem 2 + Theorem 1) or ``"pld"`` (dp_accounting).
    order : float or None
        Best Rényi order (RDP).
    K : int or None
        Cap on the peripheral count (module docstring, item 1).
    delta_tail : float
        Part of ``delta`` charged to the capped tail, ``e^eps T tail(K)``.
    worst_degree : float or None
        Out-degree ``D`` attaining the maximum at the best order (``inf``: Poisson limit).
    params : dict
        ``q_b``, ``M``, ``num_nodes`` and the numerical settings.
    model : str
        The neighbouring relation the guarantee holds for (:func:`privacy_model`).
    """

    eps: float
    delta: float
    sigma: float
    T: int
    method: str
    order: float | None = None
    K: int | None = None
    delta_tail: float = 0.0
    worst_degree: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    model: str = ""

    def __post_init__(self):
        self.eps, self.delta, self.sigma = float(self.eps), float(self.delta), float(self.sigma)
        self.delta_tail = float(self.delta_tail)
        if self.order is not None:
            self.order = float(self.order)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- accountants
def _check_T(T) -> int:
    return check_int("T", T, 1)


class _Calibrating:
    """Bisection on sigma for a target eps (shared by both accountants)."""

    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp") -> PrivacyReport:
        raise NotImplementedError

    def calibrate_sigma(self, eps: float, delta: float, T: int, *, method: str = "rdp",
                        rel_tol: float = 1e-3, sigma_max: float = 1e4, **epsilon_kw) -> float:
        """Smallest ``sigma`` (to ``rel_tol``, rounded up) with ``epsilon(sigma) <= eps``
        (bisection in ``log sigma``; ``epsilon_kw`` go to :meth:`epsilon`, e.g.
        ``value_discretization_interval`` for the PLD).

        Raises
        ------
        ValueError
            If even ``sigma_max`` does not reach ``eps``.
        """
        eps = check_eps("eps", eps)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        T = _check_T(T)
        rel_tol = check_real("rel_tol", rel_tol, 1e-8, 0.5)
        if method not in ("rdp", "pld"):
            raise ValueError(f"method: expected 'rdp' or 'pld', got {method!r}")

        def ok(s):
            return self.epsilon(s, T, delta, method=method, **epsilon_kw).eps <= eps

        hi = 1.0
        while not ok(hi):
            hi *= 2
            if hi > sigma_max:
                raise ValueError(f"eps: {eps} is not reachable with sigma <= {sigma_max} "
                                 f"(delta={delta}, T={T})")
        lo = hi / 2
        while ok(lo):
            hi, lo = lo, lo / 2
            if lo < 1e-4:
                return hi
        while hi / lo - 1 > rel_tol:
            mid = math.sqrt(lo * hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return hi


class MixtureAccountant(_Calibrating):
    """Accountant for a fixed scalar MoG per step (Definition 7), e.g. the naive DP-SGD
    baseline: ``MixtureAccountant([0, 0.5], [1 - q, q])`` is the Poisson-subsampled Gaussian
    mechanism with clip norm 0.5.

    Parameters
    ----------
    sensitivities, probs : array_like
        The mixture (``c_i >= 0``, ``p_i`` summing to 1).
    orders : array_like
        Rényi orders, > 1.
    rtol : float
        Relative precision of the numerical integration.
    model : str
        The neighbouring relation under which one step's sensitivity has this law; copied
        into every report (the accountant cannot check it).
    """

    def __init__(self, sensitivities, probs, *, orders=DEFAULT_ORDERS, rtol: float = 1e-10,
                 model: str = "a neighbouring relation under which one step's sensitivity has this mixture's law"):
        self.sensitivities, self.probs = _check_mixture(sensitivities, probs)
        self.orders = _check_orders(orders)
        self.rtol = check_real("rtol", rtol, 1e-14, 1e-3)
        if not isinstance(model, str) or not model:
            raise TypeError("model: expected a non-empty str naming the neighbouring relation")
        self.model = model

    def rdp(self, sigma: float) -> MoGRDP:
        return mog_rdp(self.sensitivities, self.probs, sigma, self.orders, rtol=self.rtol)

    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp",
                value_discretization_interval: float = 1e-3) -> PrivacyReport:
        """``(eps, delta)`` after ``T`` adaptive compositions (RDP or PLD)."""
        sigma = check_eps("sigma", sigma)
        T = _check_T(T)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        params = {"sensitivities": self.sensitivities.tolist(), "probs": self.probs.tolist()}
        if method == "rdp":
            if self.sensitivities.size == 1:
                r = self.rdp(sigma)
                e, a = rdp_to_epsilon(self.orders, T * r.rdp, delta)
            else:
                e, a, _ = _eps_lazy(self.sensitivities, np.log(self.probs)[None, :], [None], sigma, T, delta,
                                    0.0, self.orders, self.rtol)
            return PrivacyReport(e, delta, sigma, T, "rdp", order=a, params=params, model=self.model)
        if method == "pld":
            e = _pld_eps(self.sensitivities, self.probs, sigma, T, delta, value_discretization_interval)
            return PrivacyReport(e, delta, sigma, T, "pld", params=params, model=self.model)
        raise ValueError(f"method: expected 'rdp' or 'pld', got {method!r}")


def _pld_eps(c, p, sigma, T, delta, vdi) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    vdi = check_real("value_discretization_interval", vdi, 1e-6, 1.0)
    pld = pld_mod.from_mixture_gaussian_mechanism(
        standard_deviation=float(sigma), sensitivities=[float(v) for v in c],
        sampling_probs=[float(v) for v in p], pessimistic_estimate=True,
        value_discretization_interval=vdi)
    return float(pld.self_compose(int(T)).get_epsilon_for_delta(float(delta)))


def tail_bound(q_b: float, M: float, K: int, num_nodes: int, *, exact_max_degree: int = 20000,
               degree_bound: int | None = None) -> float:
    """Upper bound on ``(1 - q_b) max_{1 <= D <= num_nodes - 1} P[Bin(D, q_b min(1, M/D)) > K]``,
    the per-step probability that a node is a peripheral node of more than ``K`` sub-graphs.

    The larger of the exact maximum over ``D <= min(num_nodes - 1, exact_max_degree)`` and
    the Poisson tail ``P[Poi(q_b M) > K]`` (an upper bound for every ``D`` when
    ``K + 1 >= q_b M + 1``, Anderson & Samuels 1967).

    With ``degree_bound = D_pub`` (``degree_model="public_bound"``) the count is
    ``Bin(d, q_b min(1, M / D_pub))`` with ``d <= D_pub``, stochastically increasing in ``d``,
    so the exact ``(1 - q_b) P[Bin(D_pub, q_b min(1, M / D_pub)) > K]`` is returned.
    """
    q_b = check_prob("q_b", q_b, open_low=True)
    M = check_real("M", M, 0.0)
    K = check_int("K", K, 0)
    n = check_int("num_nodes", num_nodes, 2)
    lam = q_b * M
    if K < lam:
        raise ValueError(f"K: expected >= q_b * M = {lam}, got {K}")
    if q_b >= 1.0:
        return 0.0
    if degree_bound is not None:
        db = check_int("degree_bound", degree_bound, 1, DEGREE_BOUND_MAX)
        return (1 - q_b) * float(stats.binom.sf(K, db, q_b * min(1.0, M / db)))
    D = np.arange(1, min(n - 1, exact_max_degree) + 1, dtype=np.float64)
    p = q_b * np.minimum(1.0, M / D)
    exact = float(np.max(stats.binom.sf(K, D, p))) if D.size else 0.0
    pois = float(stats.poisson.sf(K, lam))
    return (1 - q_b) * max(exact, pois)


def heterpoisson_mixture(q_b: float, M: float, D: float, K: int | None = None, *,
                         degree_bound: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The Theorem 2 mixture for a node of out-degree ``D`` (``inf``: Poisson limit).

    Returns ``(sensitivities, probs)`` in the paper's units: ``1/2`` w.p. ``q_b``, ``k`` w.p.
    ``(1 - q_b) Bin(k; D, q_b min(1, M/D))``; with ``K`` the counts ``>= K`` are merged
    into ``k = K`` (the capped mechanism of the module docstring).

    With ``degree_bound = D_pub`` (``degree_model="public_bound"``): ``D`` is the number of
    candidates the node points to, in ``[1, D_pub]``, and the per-trial probability is the
    constant ``q_b min(1, M / D_pub)``.
    """
    q_b = check_prob("q_b", q_b, open_low=True)
    M = check_real("M", M, 0.0)
    if M <= 0:
        raise ValueError(f"M: expected a finite number > 0, got {M}")
    if not (D == math.inf or (float(D).is_integer() and D >= 1)):
        raise ValueError(f"D: expected an integer >= 1 or inf, got {D}")
    if degree_bound is not None:
        degree_bound = check_int("degree_bound", degree_bound, 1, DEGREE_BOUND_MAX)
        if D > degree_bound:
            raise ValueError(f"D: expected an integer in [1, degree_bound={degree_bound}], got {D}")
    kmax = math.inf if D == math.inf else int(D)
    if K is not None:
        K = check_int("K", K, 1)
    top = int(min(kmax, K if K is not None else kmax))
    if top == math.inf:
        raise ValueError("K: needed for D = inf")
    k = np.arange(top + 1, dtype=np.float64)
    if D == math.inf:
        lam = q_b * M
        pk = stats.poisson.pmf(k, lam)
        if K is not None:
            pk[-1] = stats.poisson.sf(K - 1, lam)
    else:
        p = q_b * min(1.0, M / (D if degree_bound is None else degree_bound))
        pk = stats.binom.pmf(k, int(D), p)
        if K is not None and K <= kmax:
            pk[-1] = stats.binom.sf(K - 1, int(D), p)
    sens = np.concatenate([[0.5], k])
    probs = np.concatenate([[q_b], (1 - q_b) * pk])
    return sens, probs / probs.sum()


class HeterPoissonAccountant(_Calibrating):
    """Theorem 2 accountant for Algorithm 1 with HeterPoisson sampling (plus the PLD figure).

    Parameters
    ----------
    q_b : float
        Base sampling rate in (0, 1].
    M : float
        Neighbourhood multiplier, > 0.
    num_nodes : int
        ``|V|`` of the whole graph, >= 2: the out-degree maximum is over ``1 .. |V| - 1``
        (``"s2_public_degrees"``; unused by ``"public_bound"``, whose maximum is over
        ``1 .. degree_bound``).
    degree_model : {"s2_public_degrees", "public_bound"}
        The neighbouring relation (module docstring): paper 003's model S2 with the whole
        graph's out-degrees public and fixed (default), or private structure with the
        sampling probability ``min(1, M / degree_bound)`` and every node pointing to at most
        ``degree_bound`` candidates.
    degree_bound : int, optional
        ``D_pub`` in ``[1, 2**31 - 1]``; required by, and only allowed with,
        ``degree_model="public_bound"``.
    orders : array_like
        Rényi orders (> 1).
    degrees : {"auto", "all"} or iterable of int
        Out-degrees over which the maximum is taken: ``"auto"`` (every ``D <= 16``, a
        geometric grid to ``|V| - 1`` and the Poisson limit), ``"all"`` (every ``D``, slow),
        or an explicit list (the Poisson limit is always added).  Under ``"public_bound"``:
        the same up to ``degree_bound`` (always included), no Poisson limit.
    rtol : float
        Relative precision of the numerical integration.

    Notes
    -----
    See the module docstring for the tail cap ``K``, the maximisation over ``D`` and the
    two degree models.
    """

    def __init__(self, q_b: float, M: float, num_nodes: int, *, degree_model: str = "s2_public_degrees",
                 degree_bound: int | None = None, orders=DEFAULT_ORDERS, degrees="auto", rtol: float = 1e-10):
        self.q_b = check_prob("q_b", q_b, open_low=True)
        self.M = check_real("M", M, 0.0)
        if self.M <= 0:
            raise ValueError(f"M: expected a finite number > 0, got {M}")
        self.num_nodes = check_int("num_nodes", num_nodes, 2)
        self.degree_model, self.degree_bound = check_degree_model(degree_model, degree_bound)
        self.model = privacy_model(self.degree_model, self.degree_bound)
        self.orders = _check_orders(orders)
        self.rtol = check_real("rtol", rtol, 1e-14, 1e-3)
        bounded = self.degree_bound is not None
        dmax = self.degree_bound if bounded else self.num_nodes - 1
        if isinstance(degrees, str):
            if degrees == "auto":
                ds = set(range(1, min(dmax, 16) + 1))
                g = 16.0
                while g < dmax:
                    g *= 1.5
                    ds.add(int(min(dmax, round(g))))
                ds.add(dmax)
            elif degrees == "all":
                ds = set(range(1, dmax + 1))
            else:
                raise ValueError(f"degrees: expected 'auto', 'all' or a list of ints, got {degrees!r}")
        else:
            ds = {check_int("degrees", int(d), 1, dmax) for d in degrees}
            if not ds:
                raise ValueError("degrees: expected at least one out-degree")
        # the worst case of the bounded model is d = degree_bound (first-order dominance):
        # always evaluated; S2 adds the supremum over large D, the Poisson limit
        self.degrees = sorted(ds | {dmax}) if bounded else sorted(ds) + [math.inf]
        self._tail_cache: dict[int, float] = {}

    # -- pieces ---------------------------------------------------------------------
    def _params(self) -> dict[str, Any]:
        return {"q_b": self.q_b, "M": self.M, "num_nodes": self.num_nodes, "degree_model": self.degree_model,
                "degree_bound": self.degree_bound}

    def tail(self, K: int) -> float:
        """Per-step probability bound that a node is peripheral in more than ``K`` sub-graphs."""
        if K not in self._tail_cache:
            self._tail_cache[K] = tail_bound(self.q_b, self.M, K, self.num_nodes, degree_bound=self.degree_bound)
        return self._tail_cache[K]

    def _k_for(self, T: int, delta: float, eps_hint: float, frac: float) -> int:
        K = max(1, math.ceil(self.q_b * self.M))
        while self.tail(K) * T * math.exp(min(eps_hint, 700.0)) > frac * delta:
            K += 1
        return K

    def _log_weights(self, K: int) -> tuple[np.ndarray, np.ndarray]:
        c = np.concatenate([[0.5], np.arange(K + 1, dtype=np.float64)])
        logw = np.full((len(self.degrees), K + 2), -np.inf)
        for i, D in enumerate(self.degrees):
            s, p = heterpoisson_mixture(self.q_b, self.M, D, K, degree_bound=self.degree_bound)
            with np.errstate(divide="ignore"):
                logw[i, : s.size] = np.log(p)
        return c, logw

    def rdp(self, sigma: float, K: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-step RDP of the capped mechanism (counts >= ``K`` merged), maximised over the
        out-degrees and both directions, at every order of ``self.orders``.

        Returns ``(rdp, worst_degree, error)`` arrays.
        """
        sigma = check_eps("sigma", sigma)
        K = check_int("K", K, 1)
        if self.q_b >= 1.0:  # only the central component: the Gaussian mechanism
            v = self.orders * 0.25 / (2 * sigma**2)
            return v, np.full(v.shape, math.inf), np.zeros_like(v)
        c, logw = self._log_weights(K)
        mg, gm, err = _mog_rdp_batch(c, logw, sigma, self.orders, self.rtol)
        both = np.maximum(mg, gm)
        i = np.argmax(both, axis=0)
        cols = np.arange(self.orders.size)
        worst = np.array([self.degrees[k] for k in i], dtype=np.float64)
        return both[i, cols], worst, err[i, cols]

    def _eps_rdp(self, sigma: float, T: int, delta: float, K: int):
        """(eps, order, worst D) for cap K (see :func:`_eps_lazy`)."""
        c, logw = self._log_weights(K)
        return _eps_lazy(c, logw, self.degrees, sigma, T, delta, T * self.tail(K), self.orders, self.rtol)

    # -- public ----------------------------------------------------------------------
    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp",
                value_discretization_interval: float = 1e-3) -> PrivacyReport:
        """Node-level ``(eps, delta)`` of ``T`` steps of Algorithm 1 at noise ``sigma``.

        ``method="rdp"``: Theorem 2 + Theorem 1 with the tail cap ``K`` (module docstring),
        ``K`` chosen among the caps that leave ``{50, 10, 1, 0.1}%`` of ``delta`` to the tail;
        ``method="pld"``: :meth:`pld_epsilon`.
        """
        sigma = check_eps("sigma", sigma)
        T = _check_T(T)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        if method == "pld":
            return self.pld_epsilon(sigma, T, delta, value_discretization_interval=value_discretization_interval)
        if method != "rdp":
            raise ValueError(f"method: expected 'rdp' or 'pld', got {method!r}")
        params = dict(self._params(), rtol=self.rtol, orders=[float(self.orders.min()), float(self.orders.max())])
        if self.q_b >= 1.0:
            rdp, _, _ = self.rdp(sigma, 1)
            e, a = rdp_to_epsilon(self.orders, T * rdp, delta)
            return PrivacyReport(e, delta, sigma, T, "rdp", order=a, K=0, worst_degree=math.inf, params=params,
                                 model=self.model)
        results: dict[int, tuple] = {}
        K0 = self._k_for(T, delta, 8.0, 0.1)
        results[K0] = self._eps_rdp(sigma, T, delta, K0)
        hint = results[K0][0] if math.isfinite(results[K0][0]) else 64.0
        for frac in (0.5, 0.1, 1e-2, 1e-3):
            K = self._k_for(T, delta, hint, frac)
            if K not in results:
                results[K] = self._eps_rdp(sigma, T, delta, K)
        K = min(results, key=lambda k: results[k][0])
        e, a, wd = results[K]
        dt = math.exp(e) * T * self.tail(K) if math.isfinite(e) else 0.0
        return PrivacyReport(e, delta, sigma, T, "rdp", order=a, K=K, delta_tail=dt, worst_degree=wd,
                             params=params, model=self.model)

    def pld_epsilon(self, sigma: float, T: int, delta: float, *, degrees=None,
                    value_discretization_interval: float = 1e-3) -> PrivacyReport:
        """Independent figure from ``dp_accounting``'s mixture-of-Gaussians PLD.

        The maximum over ``degrees`` (default: ``1``, the worst ``D`` of the RDP scan at this
        ``sigma`` and the Poisson limit, or ``degree_bound`` under ``"public_bound"``) of the
        ``T``-fold composed PLD's ``eps(delta')``, with the tail charged to ``delta`` (module
        docstring).
        """
        sigma = check_eps("sigma", sigma)
        T = _check_T(T)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        params = dict(self._params(), value_discretization_interval=value_discretization_interval)
        if self.q_b >= 1.0:
            e = _pld_eps(np.array([0.5]), np.array([1.0]), sigma, T, delta, value_discretization_interval)
            return PrivacyReport(e, delta, sigma, T, "pld", K=0, worst_degree=math.inf, params=params,
                                 model=self.model)
        # eps_PLD <= eps_RDP, so a cap K with e^eps_RDP T tail(K) <= 1e-3 delta leaves
        # delta' = delta - e^eps_RDP T tail(K) for the PLD (module docstring)
        ref = self.epsilon(sigma, T, delta)
        e_ref = min(ref.eps, 100.0)
        K = self._k_for(T, delta, e_ref, 1e-3)
        tT = T * self.tail(K)
        if degrees is None:
            wd = ref.worst_degree
            top = math.inf if self.degree_bound is None else float(self.degree_bound)
            degrees = sorted({1.0, wd if wd is not None else top, top})
        for _ in range(4):
            d2 = delta - math.exp(e_ref) * tT
            worst_e, worst_d = -math.inf, None
            for D in degrees:
                s, p = heterpoisson_mixture(self.q_b, self.M, D, K, degree_bound=self.degree_bound)
                e = _pld_eps(s, p, sigma, T, d2, value_discretization_interval)
                if e > worst_e:
                    worst_e, worst_d = e, D
            if worst_e <= e_ref or not math.isfinite(worst_e):
                break
            # rare: the PLD figure exceeds the RDP one (discretisation); charge e^eps_PLD
            e_ref = worst_e + 1e-3
            if math.exp(min(e_ref, 700.0)) * tT >= delta:
                worst_e = math.inf
                break
        dt = math.exp(worst_e) * tT if math.isfinite(worst_e) else 0.0
        return PrivacyReport(worst_e, delta, sigma, T, "pld", K=K, delta_tail=dt,
                             worst_degree=float(worst_d), params=params, model=self.model)
