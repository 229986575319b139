"""Mixture-of-Gaussians accountant (HeterPoisson Theorem 2): closed forms, an independent
library (dp_accounting), the plain Gaussian mechanism where the mixture degenerates, the
PLD figure and calibration round trips."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import integrate, stats

from ldpfast.privacy.accountants import (
    HeterPoissonAccountant,
    MixtureAccountant,
    gaussian_epsilon,
    heterpoisson_mixture,
    mog_rdp,
    rdp_to_epsilon,
    tail_bound,
)

rdp_lib = pytest.importorskip("dp_accounting.rdp.rdp_privacy_accountant")


def _quad_moment(c, p, sigma, expo):
    """E_{x ~ N(0,1)}[r(x)^expo] by adaptive quadrature (independent of our integrator)."""
    c, p = np.asarray(c, float), np.asarray(p, float)
    mu = c / sigma

    def f(x):
        r = np.sum(p * np.exp(mu * x - mu**2 / 2))
        return r**expo * stats.norm.pdf(x)

    hi = max(1.0, expo) * mu.max() + 12
    lo = -12 - max(0.0, -expo) * mu.max()
    pts = sorted(set(np.clip(expo * mu, lo, hi).tolist()))
    v, _ = integrate.quad(f, lo, hi, points=pts, limit=800, epsabs=0, epsrel=1e-12)
    return v


# ----------------------------------------------------------------------------- MoG RDP
def test_single_component_is_gaussian_closed_form():
    r = mog_rdp([0.5], [1.0], 1.7, [1.5, 2, 10])
    want = np.array([1.5, 2, 10]) * 0.25 / (2 * 1.7**2)
    assert np.allclose(r.rdp, want, rtol=0, atol=0)
    assert np.array_equal(r.mix_gauss, r.gauss_mix)


@pytest.mark.parametrize("q,sigma", [(0.01, 0.8), (0.2, 2.0), (0.5, 1.0), (0.9, 4.0)])
def test_two_components_match_dp_accounting_subsampled_gaussian(q, sigma):
    """{0, 1} with probabilities {1-q, q} is the Poisson-subsampled Gaussian: integer orders
    agree with dp_accounting's exact series; at fractional orders dp_accounting uses an
    upper bound (non-monotone in alpha), ours equals adaptive quadrature and is below it."""
    ints = [2.0, 3.0, 5.0, 8.0, 16.0]
    fr = [1.25, 1.5, 2.5, 4.5]
    r = mog_rdp([0.0, 1.0], [1 - q, q], sigma, ints + fr)
    lib = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, sigma, ints + fr)
    assert np.allclose(r.mix_gauss[:5], lib[:5], rtol=1e-8, atol=1e-13)
    assert np.all(r.mix_gauss[5:] <= lib[5:] * (1 + 1e-9) + 1e-13)
    for k, a in enumerate(fr):
        ref = math.log(_quad_moment([0, 1], [1 - q, q], sigma, a)) / (a - 1)
        assert r.mix_gauss[5 + k] == pytest.approx(ref, rel=1e-7, abs=1e-12)
    # the dominating direction for the subsampled Gaussian (Mironov et al. 2019)
    assert np.all(r.mix_gauss >= r.gauss_mix - 1e-12)


def test_closed_forms_at_integer_orders():
    """E[r^2] = sum_ij p_i p_j e^{mu_i mu_j}, E[r^3] = sum_ijk p_i p_j p_k e^{mu_i mu_j +
    mu_i mu_k + mu_j mu_k} (Gaussian moment generating function)."""
    c = np.array([0.5, 0.0, 1.0, 2.0, 3.0])
    p = np.array([0.2, 0.5, 0.2, 0.08, 0.02])
    sigma = 1.3
    mu = c / sigma
    a2 = sum(p[i] * p[j] * math.exp(mu[i] * mu[j]) for i in range(5) for j in range(5))
    a3 = sum(p[i] * p[j] * p[k] * math.exp(mu[i] * mu[j] + mu[i] * mu[k] + mu[j] * mu[k])
             for i, j, k in itertools.product(range(5), repeat=3))
    r = mog_rdp(c, p, sigma, [2.0, 3.0])
    assert r.mix_gauss[0] == pytest.approx(math.log(a2), rel=1e-9)
    assert r.mix_gauss[1] == pytest.approx(math.log(a3) / 2, rel=1e-9)
    # reverse direction against quadrature
    for a in (2.0, 3.0, 1.5):
        ref = math.log(_quad_moment(c, p, sigma, 1 - a)) / (a - 1)
        assert mog_rdp(c, p, sigma, [a]).gauss_mix[0] == pytest.approx(ref, rel=1e-7)


def test_stated_precision_and_monotone_in_order():
    c, p = heterpoisson_mixture(0.2, 2.0, math.inf, 12)
    loose = mog_rdp(c, p, 2.0, [1.1, 2, 4, 9], rtol=1e-6)
    tight = mog_rdp(c, p, 2.0, [1.1, 2, 4, 9], rtol=1e-13)
    assert np.all(np.abs(loose.rdp - tight.rdp) <= loose.error + tight.error + 1e-6 / 0.1)
    assert np.all(tight.error < 1e-11)
    r = mog_rdp(c, p, 2.0, np.linspace(1.05, 12, 40))
    assert np.all(np.diff(r.mix_gauss) >= -1e-12) and np.all(np.diff(r.gauss_mix) >= -1e-12)


def test_untruncated_mixture_blows_up():
    """Why the tail cap exists (module docstring): with every binomial component kept (in log
    space: their weights underflow doubles), the Rényi moments explode with D."""
    from ldpfast.privacy.accountants.rdp import _mog_rdp_lower

    def lower(D, alpha):
        k = np.arange(D + 1.0)
        logw = np.concatenate([[math.log(0.2)], math.log(0.8) + stats.binom.logpmf(k, D, 0.4 / D)])
        return float(_mog_rdp_lower(np.concatenate([[0.5], k]), logw[None, :], 5.0, alpha)[0])

    assert lower(100, 4.0) > 60
    assert lower(1000, 2.0) > 2e4
    # the lower bound is a lower bound: compare where the full mixture is representable
    c, p = heterpoisson_mixture(0.2, 2.0, 60)
    assert mog_rdp(c, p, 1.0, [3.0]).rdp[0] >= lower(60, 3.0) - 1e-12


# ----------------------------------------------------------------------------- conversion
def test_rdp_to_epsilon_is_theorem_1():
    orders = np.array([2.0, 4.0, 8.0])
    rdp = np.array([0.1, 0.3, 0.9])
    delta = 1e-5
    want = [r + math.log((a - 1) / a) - (math.log(delta) + math.log(a)) / (a - 1) for a, r in zip(orders, rdp)]
    e, a = rdp_to_epsilon(orders, rdp, delta)
    assert e == pytest.approx(min(want))
    assert a == orders[int(np.argmin(want))]


# ----------------------------------------------------------------------------- Theorem 2
def test_mixture_components():
    s, p = heterpoisson_mixture(0.3, 2.0, 5)
    assert s[0] == 0.5 and p[0] == pytest.approx(0.3)
    assert np.allclose(p[1:], 0.7 * stats.binom.pmf(np.arange(6), 5, 0.3 * 2 / 5))
    s, p = heterpoisson_mixture(0.3, 4.0, 2)  # D < M: probability capped at 1 -> Bin(D, q_b)
    assert np.allclose(p[1:], 0.7 * stats.binom.pmf(np.arange(3), 2, 0.3))
    s, p = heterpoisson_mixture(0.3, 2.0, 1000, K=6)
    assert s[-1] == 6 and p[-1] == pytest.approx(0.7 * stats.binom.sf(5, 1000, 0.3 * 2 / 1000))
    assert p.sum() == pytest.approx(1.0)
    s, p = heterpoisson_mixture(0.3, 2.0, math.inf, K=6)
    assert np.allclose(p[1:-1], 0.7 * stats.poisson.pmf(np.arange(6), 0.6))


@pytest.mark.parametrize("q,M", [(0.05, 1.0), (0.2, 2.0), (0.23, 4.0), (0.6, 3.0)])
def test_tail_bound_dominates_every_degree(q, M):
    """Anderson-Samuels: the Poisson tail bounds the binomial tail of every degree."""
    for K in range(math.ceil(q * M), 14):
        D = np.arange(1, 5000)
        exact = (1 - q) * np.max(stats.binom.sf(K, D, q * np.minimum(1, M / D)))
        assert tail_bound(q, M, K, 10**6) >= exact * (1 - 1e-12)
        assert tail_bound(q, M, K, 10**6) <= (1 - q) * stats.poisson.sf(K, q * M) * (1 + 1e-9) + exact


def test_auto_degrees_match_exhaustive_scan():
    acc_all = HeterPoissonAccountant(0.25, 2.0, 400, degrees="all", orders=[1.5, 2, 4, 8])
    acc_auto = HeterPoissonAccountant(0.25, 2.0, 400, orders=[1.5, 2, 4, 8])
    for sigma in (1.5, 3.0):
        ra, _, _ = acc_all.rdp(sigma, 10)
        rb, _, _ = acc_auto.rdp(sigma, 10)
        # auto also contains the Poisson limit, the supremum over large D
        assert np.all(rb >= ra * (1 - 1e-9))
        assert np.allclose(ra, rb, rtol=2e-3)


def test_rdp_non_decreasing_in_degree_beyond_M():
    acc = HeterPoissonAccountant(0.2, 2.0, 5000, degrees=[2, 3, 4, 8, 16, 64, 256, 4096], orders=[2.0, 3.0, 6.0])
    c, logw = acc._log_weights(10)
    from ldpfast.privacy.accountants.rdp import _mog_rdp_batch

    mg, _gm, _ = _mog_rdp_batch(c, logw, 2.0, acc.orders, 1e-12)
    assert np.all(np.diff(mg, axis=0) >= -1e-10)  # D = 2 .. 4096, then the Poisson limit


# ----------------------------------------------------------------------------- Gaussian limit
@pytest.mark.parametrize("sigma,T", [(1.0, 10), (3.0, 50)])
def test_degenerate_mixture_is_gaussian_mechanism(sigma, T):
    """q_b = 1: every node is central, the mixture is N(1/2, sigma^2): RDP = T alpha/(8 sigma^2)
    exactly; the PLD matches the exact Gaussian (eps, delta) curve to discretisation error;
    RDP -> eps is an upper bound of it."""
    delta = 1e-5
    acc = HeterPoissonAccountant(1.0, 2.0, 100)
    rdp, _, _ = acc.rdp(sigma, 1)
    assert np.allclose(rdp, acc.orders / (8 * sigma**2))
    exact = gaussian_epsilon(0.5, sigma, T, delta)
    r = acc.epsilon(sigma, T, delta)
    p = acc.pld_epsilon(sigma, T, delta)
    assert p.eps == pytest.approx(exact, abs=2e-2)
    assert p.eps >= exact - 1e-6  # pessimistic discretisation
    assert r.eps >= exact
    e_closed, _ = rdp_to_epsilon(acc.orders, T * acc.orders / (8 * sigma**2), delta)
    assert r.eps == pytest.approx(e_closed)


def test_mixture_accountant_naive_dpsgd_matches_dp_accounting():
    """Naive DP-SGD (features only): Poisson-subsampled Gaussian with clip 0.5, i.e.
    sensitivities {0, 0.5}; RDP at integer orders equals dp_accounting with noise multiplier
    2 sigma."""
    q, sigma = 0.1, 1.5
    acc = MixtureAccountant([0.0, 0.5], [1 - q, q], orders=[2.0, 3.0, 4.0, 10.0])
    lib = rdp_lib._compute_rdp_poisson_subsampled_gaussian(q, 2 * sigma, [2, 3, 4, 10])
    assert np.allclose(acc.rdp(sigma).rdp, lib, rtol=1e-8)


# ----------------------------------------------------------------------------- RDP vs PLD
@pytest.mark.parametrize("q,M,sigma,T", [(0.2, 1.0, 3.0, 20), (0.1, 3.0, 5.0, 30)])
def test_pld_is_tighter_than_rdp(q, M, sigma, T):
    delta = 1e-5
    acc = HeterPoissonAccountant(q, M, 5000)
    r = acc.epsilon(sigma, T, delta)
    p = acc.pld_epsilon(sigma, T, delta)
    assert math.isfinite(r.eps) and math.isfinite(p.eps)
    assert p.eps <= r.eps + 1e-2
    # and not absurdly tighter: RDP conversion loses a bounded amount here
    assert p.eps >= 0.6 * r.eps
    assert r.delta_tail <= delta and p.delta_tail <= 1e-3 * delta * 1.01


def test_calibration_round_trip():
    acc = HeterPoissonAccountant(0.2, 2.0, 20000)
    T, delta = 45, 2e-5
    for eps in (2.0, 8.0):
        s = acc.calibrate_sigma(eps, delta, T, rel_tol=1e-4)
        assert acc.epsilon(s, T, delta).eps <= eps
        assert acc.epsilon(s * (1 - 3e-4), T, delta).eps > eps
    # larger eps, less noise; more steps, more noise
    assert acc.calibrate_sigma(2.0, delta, T) > acc.calibrate_sigma(8.0, delta, T)
    assert acc.calibrate_sigma(4.0, delta, 2 * T) > acc.calibrate_sigma(4.0, delta, T)


def test_pld_calibration_round_trip():
    acc = MixtureAccountant([0.0, 0.5], [0.9, 0.1])
    kw = {"value_discretization_interval": 1e-2}
    s = acc.calibrate_sigma(0.7, 1e-5, 10, method="pld", rel_tol=2e-2, **kw)
    assert acc.epsilon(s, 10, 1e-5, method="pld", **kw).eps <= 0.7
    assert acc.epsilon(s * 0.97, 10, 1e-5, method="pld", **kw).eps > 0.7


# ----------------------------------------------------------------------------- validation
def test_validation():
    with pytest.raises(ValueError, match="q_b"):
        HeterPoissonAccountant(0.0, 1.0, 100)
    with pytest.raises(ValueError, match="q_b"):
        HeterPoissonAccountant(1.2, 1.0, 100)
    with pytest.raises(ValueError, match="M"):
        HeterPoissonAccountant(0.5, 0.0, 100)
    with pytest.raises(ValueError, match="num_nodes"):
        HeterPoissonAccountant(0.5, 1.0, 1)
    acc = HeterPoissonAccountant(0.5, 1.0, 100)
    with pytest.raises(ValueError, match="sigma"):
        acc.epsilon(0.0, 10, 1e-5)
    with pytest.raises(ValueError, match="sigma"):
        acc.epsilon(float("nan"), 10, 1e-5)
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(1.0, 10, 0.0)
    with pytest.raises(ValueError, match="delta"):
        acc.epsilon(1.0, 10, 1.0)
    with pytest.raises(ValueError, match="T"):
        acc.epsilon(1.0, 0, 1e-5)
    with pytest.raises(ValueError, match="eps"):
        acc.calibrate_sigma(0.0, 1e-5, 10)
    with pytest.raises(ValueError, match="eps"):
        acc.calibrate_sigma(-1.0, 1e-5, 10)
    with pytest.raises(ValueError, match="method"):
        acc.epsilon(1.0, 10, 1e-5, method="moments")
    with pytest.raises(ValueError, match="orders"):
        mog_rdp([0, 1], [0.5, 0.5], 1.0, [1.0])
    with pytest.raises(ValueError, match="probs"):
        mog_rdp([0, 1], [0.5, 0.6], 1.0)
    with pytest.raises(ValueError, match="sensitivities"):
        mog_rdp([0, -1], [0.5, 0.5], 1.0)
    with pytest.raises(TypeError, match="sigma"):
        mog_rdp([0, 1], [0.5, 0.5], "1")
