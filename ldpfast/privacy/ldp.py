"""Closed forms of the local-DP randomisers: probabilities, budgets, and the integer
thresholds the kernels use.

Papers
------
* RGNN (Bhaila et al., SDM 2024): GRR with ``p = e^eps / (e^eps + k - 1)``,
  ``q = 1 / (e^eps + k - 1)`` (section IV-A), GRR-FS and its Theorem 1.
* LPGNN (Sajadmanesh & Gatica-Perez, ACM CCS 2021): multi-bit encoder (Algorithm 1,
  Theorem 3.1), optimal ``m*`` (Proposition 3.4, eq. 6), label randomized response (eq. 11).

GRR-FS accounting: Theorem 1 versus the exact bound
----------------------------------------------------
RGNN Theorem 1 states that GRR-FS (each user applies GRR with budget ``eps_x`` to ``m`` of
its ``d`` features and reports uniform values for the other ``d - m``) is ``eps_X``-LDP with
``eps_X = ln(1 + (m/d) (e^{m eps_x} - 1))``.  The proof applies the amplification-by-
sampling lemma (their Lemma 1, a *central*-DP result about sampling records of a dataset)
to the sampling of a user's own features.  Under the LDP definition the paper itself uses
(Definition 1: *any* two inputs ``x``, ``x'`` of one user) this does not hold: take ``x'``
differing from ``x`` in every feature and the output ``o = x``.  For every subset ``S`` the
probability of ``o`` is ``prod_{i in S} p_i * prod_{i not in S} 1/gamma_i`` under ``x``
and ``prod_{i in S} q_i * prod_{i not in S} 1/gamma_i`` under ``x'``, a ratio of exactly
``e^{m eps_x}`` term by term, so the mixture over ``S`` has likelihood ratio exactly
``e^{m eps_x}``, larger than ``e^{eps_X}`` whenever ``m < d``.  (Example: d=2, m=1, binary
features, eps_x=1: ratio e = 2.718 versus Theorem 1's 1.859.)  The exact guarantee is
``m * eps_x`` (sequential composition over the ``m`` GRR reports; the uniform reports carry
no information), and it is tight.  ``tests/test_mechanisms.py`` enumerates the output
distribution and checks both statements.

ldpfast therefore records ``m * eps_x`` (:func:`grr_fs_epsilon_exact`) as the guarantee of
GRR-FS by default, and keeps Theorem 1's value (:func:`grr_fs_epsilon`) for reproducing the
paper's tables, clearly labelled as the paper's claim.

Implemented probabilities
-------------------------
Kernels draw a Bernoulli as ``u32 < T`` for one Philox word ``u32``, so the implemented
probability is exactly ``T / 2^32``.  The thresholds below are rounded in the direction that
keeps the implemented mechanism's worst-case likelihood ratio ``<= e^eps`` (checked
exactly, with integers, before returning), so the privacy guarantee holds for the code that
runs, not only for the real-valued formulas.  The utility cost is a change of at most
``2^-32`` in each probability.
"""
from __future__ import annotations

import math

from .._checks import check_eps, check_int

#: ``2^32``: every implemented probability is an integer threshold ``T / 2^32``.
TWO32 = 1 << 32
_EXP_CAP = 700.0  # e^700 is finite; larger budgets are clipped (only makes the check stricter)


# --- GRR ------------------------------------------------------------------------------------
def grr_probs(eps: float, k: int) -> tuple[float, float]:
    """``(p, q)`` of generalized randomized response over ``k`` values.

    ``p = e^eps / (e^eps + k - 1)`` (report the true value), ``q = 1 / (e^eps + k - 1)``
    (report one given other value); RGNN section IV-A, LPGNN eq. (11).
    """
    eps = check_eps("eps", eps)
    k = check_int("k", k, 1)
    e = math.exp(min(eps, _EXP_CAP))
    return e / (e + k - 1), 1.0 / (e + k - 1)


def grr_threshold(eps: float, k: int) -> int:
    """Integer threshold ``T`` with P[keep] = ``T / 2^32`` for GRR over ``k`` values.

    ``T = floor(2^32 p)``, lowered until ``T (k - 1) <= e^eps (2^32 - T)`` holds, i.e. the
    implemented ratio ``P[o = x | x] / P[o = x | x']`` is ``<= e^eps``.  ``k = 1`` gives
    ``2^32`` (always keep: there is nothing else to report).

    Raises
    ------
    ValueError
        If ``eps`` is so small that a 32-bit threshold cannot keep the ratio in the other
        direction within ``e^eps`` either (roughly ``eps < k / 2^32``).
    """
    eps = check_eps("eps", eps)
    k = check_int("k", k, 1, 1 << 31)
    if k == 1:
        return TWO32
    e = math.exp(min(eps, _EXP_CAP))
    T = min(TWO32 - 1, math.floor(math.ldexp(e / (e + k - 1), 32)))
    while T > 0 and T * (k - 1) > e * (TWO32 - T):
        T -= 1
    if grr_threshold_epsilon(T, k) > eps:
        raise ValueError(f"eps: {eps} is too small to implement GRR over k={k} values with "
                         f"32-bit thresholds; use eps >= {4 * k / TWO32:.3g}")
    return T


def grr_threshold_epsilon(T: int, k: int) -> float:
    """Exact epsilon of the *implemented* GRR with keep probability ``T / 2^32``.

    The output distributions of two inputs differ only on the two true values; the
    worst-case ratio is ``max(a / b, b / a)`` with ``a = T / 2^32`` and
    ``b = (1 - T / 2^32) / (k - 1)``.
    """
    if k == 1:
        return 0.0
    a, b = T * (k - 1), TWO32 - T
    if a == 0 or b == 0:
        return math.inf
    return abs(math.log(a) - math.log(b))


# --- GRR-FS (RGNN) --------------------------------------------------------------------------
def _fs_args(eps_x, m, d):
    eps_x = check_eps("eps_x", eps_x)
    d = check_int("d", d, 1)
    m = check_int("m", m, 1, d)
    return eps_x, m, d


def grr_fs_epsilon(eps_x: float, m: int, d: int) -> float:
    """``eps_X`` claimed by RGNN Theorem 1: ``ln(1 + (m/d) (e^{m eps_x} - 1))``.

    This is the value the RGNN paper reports (e.g. Citeseer, d'=53, m=10, eps_x=1 gives
    8.3).  **It is not a valid eps-LDP bound for GRR-FS** under the paper's own
    Definition 1 (any two inputs of a user) when ``m < d``: the exact worst-case likelihood
    ratio is ``e^{m eps_x}`` (see the module docstring and
    :func:`grr_fs_epsilon_exact`).  Use it to label results the way the paper does, not as
    a guarantee.
    """
    eps_x, m, d = _fs_args(eps_x, m, d)
    return math.log1p((m / d) * math.expm1(m * eps_x))


def grr_fs_epsilon_inverse(eps_X: float, m: int, d: int) -> float:
    """Per-feature ``eps_x`` such that :func:`grr_fs_epsilon` (Theorem 1) equals ``eps_X``.

    ``eps_x = ln(1 + (d/m) (e^{eps_X} - 1)) / m``.
    """
    eps_X = check_eps("eps_X", eps_X)
    d = check_int("d", d, 1)
    m = check_int("m", m, 1, d)
    return math.log1p((d / m) * math.expm1(eps_X)) / m


def grr_fs_epsilon_exact(eps_x: float, m: int, d: int) -> float:
    """Exact (tight) eps-LDP guarantee of GRR-FS: ``m * eps_x``.

    Sequential composition of the ``m`` GRR reports (the ``d - m`` uniform reports do not
    depend on the input).  Tight: the likelihood ratio ``e^{m eps_x}`` is attained by two
    inputs that differ in every feature (features with a domain of size 1 excepted).
    """
    eps_x, m, d = _fs_args(eps_x, m, d)
    return m * eps_x


def grr_fs_eps_x_exact(eps: float, m: int) -> float:
    """Per-feature ``eps_x`` such that GRR-FS is exactly ``eps``-LDP: ``eps / m``."""
    eps = check_eps("eps", eps)
    m = check_int("m", m, 1)
    return eps / m


# --- 1-bit / multi-bit (LPGNN) --------------------------------------------------------------
def optimal_m(eps: float, d: int) -> int:
    """LPGNN Proposition 3.4 (eq. 6): ``m* = max(1, min(d, floor(eps / 2.18)))``."""
    eps = check_eps("eps", eps)
    d = check_int("d", d, 1)
    return int(max(1, min(d, math.floor(eps / 2.18))))


def onebit_threshold(eps: float) -> tuple[int, float]:
    """Thresholds of the 1-bit mechanism with per-dimension budget ``eps``.

    The kernels draw ``t = 1`` with probability ``T(x) / 2^32`` where
    ``T(x) = t_lo + floor((x - alpha) / (beta - alpha) * span)``; ``t_lo`` approximates
    ``2^32 / (e^eps + 1)`` (the paper's ``1 / (e^eps + 1)``) from above and
    ``span = 2^32 - 2 t_lo``, so ``T`` ranges over ``[t_lo, 2^32 - t_lo]`` and both
    ``P[t=1]`` and ``P[t=0]`` vary by a factor ``(2^32 - t_lo) / t_lo <= e^eps`` (checked
    exactly).  Returns ``(t_lo, span)``.

    Raises
    ------
    ValueError
        If ``eps`` is too small for 32-bit thresholds to distinguish any inputs
        (``eps < ~2^-30``).
    """
    eps = check_eps("eps", eps)
    e = math.exp(min(eps, _EXP_CAP))
    t_lo = max(1, math.ceil(TWO32 / (e + 1.0)))
    while (TWO32 - t_lo) > e * t_lo:
        t_lo += 1
    t_lo = min(t_lo, TWO32 // 2)
    span = TWO32 - 2 * t_lo
    if span <= 0:
        raise ValueError(f"eps: per-dimension budget {eps} is too small for the 1-bit mechanism "
                         "with 32-bit thresholds (use eps/m >= 1e-9)")
    return t_lo, float(span)


def onebit_threshold_epsilon(t_lo: int) -> float:
    """Exact per-dimension epsilon of the implemented 1-bit draw: ``ln((2^32 - t_lo) / t_lo)``."""
    return math.log(TWO32 - t_lo) - math.log(t_lo)


def multibit_epsilon(eps: float, m: int, d: int) -> float:
    """Guarantee of the multi-bit encoder (LPGNN Theorem 3.1): ``eps``-LDP per node.

    Each of the ``m`` sampled dimensions is a 1-bit report with budget ``eps / m`` and the
    other dimensions report 0 whatever the input, so the ratio is at most
    ``e^{m * eps/m} = e^eps`` (tight for inputs at the two ends of ``[alpha, beta]``).
    """
    eps = check_eps("eps", eps)
    d = check_int("d", d, 1)
    check_int("m", m, 1, d)
    return eps
