"""Estimators: unbiasedness against the stated variances, closed forms, simplex projection.

Monte-Carlo tests run R independent randomisations of one fixed population in a single
kernel call (rows are independent streams), with fixed seeds.  A z-test rejects when
|mean - truth| > Z * SE with SE from the stated variance: Z = 4.5, false-alarm rate
6.8e-6 per coordinate (Bonferroni: at most ~20 coordinates per test, so < 2e-4 per test).
Variance checks use a chi-square test on the sample variance with false-alarm rate 1e-4.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from ldpfast import estimation as E
from ldpfast.mechanisms import grr_fs, multibit_encode, multibit_rectify, rr_labels
from ldpfast.privacy import grr_probs, grr_threshold

Z = 4.5
ALPHA = 1e-4


def _grr_P(eps, k):
    p, q = grr_probs(eps, k)
    return torch.full((k, k), q, dtype=torch.float64).fill_diagonal_(p)


# --- closed forms -----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 6])
def test_grr_estimate_is_the_inverse_of_P(k):
    g = torch.Generator().manual_seed(k)
    lam = torch.rand(5, k, generator=g, dtype=torch.float64)
    lam[:3] /= lam[:3].sum(1, keepdim=True)  # some sum to 1, some do not (masked propagation)
    P = _grr_P(0.7, k)
    ref = torch.linalg.solve(P, lam.T).T
    torch.testing.assert_close(E.grr_estimate(lam, 0.7, k), ref)
    pi = torch.softmax(torch.randn(4, k, generator=g, dtype=torch.float64), 1)
    torch.testing.assert_close(E.grr_expected_frequencies(pi, 0.7, k), pi @ P.T)


@pytest.mark.parametrize("k", [2, 4])
def test_grr_variance_is_the_dispersion_matrix_diagonal(k):
    g = torch.Generator().manual_seed(0)
    lam = torch.rand(3, k, generator=g, dtype=torch.float64)
    lam[0] /= lam[0].sum()
    P_inv = torch.linalg.inv(_grr_P(1.3, k))
    n = 57
    for row in lam:
        disp = P_inv @ (torch.diag(row) - torch.outer(row, row)) @ P_inv.T / (n - 1)
        torch.testing.assert_close(E.grr_variance(row, 1.3, k, n), torch.diagonal(disp))


@pytest.mark.parametrize("gamma", [2, 3, 5])
def test_grr_fs_estimate_inverts_eq_8(gamma):
    pi = torch.softmax(torch.randn(7, gamma, dtype=torch.float64), 1)
    lam = E.grr_fs_expected_frequencies(pi, 0.9, 3, 11, gamma)
    torch.testing.assert_close(lam.sum(1), torch.ones(7, dtype=torch.float64))
    torch.testing.assert_close(E.grr_fs_estimate(lam, 0.9, 3, 11, gamma), pi)
    # eq. (8) from eq. (7): m/d (pi p + (1 - pi) q) + (1 - m/d) / gamma
    p, q = grr_probs(0.9, gamma)
    torch.testing.assert_close(lam, 3 / 11 * (pi * p + (1 - pi) * q) + (1 - 3 / 11) / gamma)


def test_grr_fs_estimate_with_m_equal_d_is_plain_grr():
    lam = torch.softmax(torch.randn(4, 3, dtype=torch.float64), 1)
    torch.testing.assert_close(E.grr_fs_estimate(lam, 1.1, 5, 5, 3), E.grr_estimate(lam, 1.1, 3))
    v1 = E.grr_fs_variance(lam, 1.1, 5, 5, 3, 40)
    v2 = E.grr_variance(lam, 1.1, 3, 40)
    torch.testing.assert_close(v1, v2)


def test_multibit_variance_matches_lemma_a1():
    eps, m, d, a, b = 2.0, 2, 7, -1.0, 3.0
    x = torch.linspace(a, b, 9, dtype=torch.float64)
    e = math.exp(eps / m)
    mean_star = m / d * (e - 1) / (e + 1) * (2 * (x - a) / (b - a) - 1)  # eq. (21)
    var_star = m / d - mean_star**2                                      # eq. (22)
    C = d * (b - a) / (2 * m) * (e + 1) / (e - 1)
    torch.testing.assert_close(E.multibit_variance(x, eps, m, d, a, b), C * C * var_star)
    torch.testing.assert_close(C * mean_star + (a + b) / 2, x)            # Proposition 3.2


def test_observed_frequencies():
    x = torch.tensor([[0, 1], [2, 1], [0, 0], [0, 1]])
    lam = E.observed_frequencies(x, 3)
    torch.testing.assert_close(lam, torch.tensor([[0.75, 0, 0.25], [0.25, 0.75, 0]], dtype=torch.float64))
    torch.testing.assert_close(E.observed_frequencies(x[:, 0], 3, mask=torch.tensor([1, 1, 0, 0]).bool()),
                               torch.tensor([0.5, 0, 0.5], dtype=torch.float64))
    with pytest.raises(ValueError, match="domain"):
        E.observed_frequencies(x, 2)


# --- unbiasedness (Monte Carlo) ---------------------------------------------------------------
def _split_runs(x, R, n):
    return x.reshape(R, n, *x.shape[1:])


def test_grr_frequency_estimator_is_unbiased():
    c, eps, n, R = 4, 0.8, 500, 600
    y = torch.tensor(np.repeat(np.arange(c), [250, 125, 75, 50]))  # pi = (.5, .25, .15, .1)
    truth = torch.tensor([0.5, 0.25, 0.15, 0.1], dtype=torch.float64)
    out, _ = rr_labels(y.repeat(R), c, eps, seed=7)
    runs = _split_runs(out, R, n)
    lam = torch.stack([torch.bincount(r, minlength=c) for r in runs]).double() / n
    est = E.grr_estimate(lam, eps, c)
    var = E.grr_variance(lam, eps, c, n)
    se = (var.mean(0) / R).sqrt()
    assert ((est.mean(0) - truth).abs() <= Z * se).all()
    # exact variance for this fixed population: lambda'_j is a Poisson-binomial mean
    T = grr_threshold(eps, c) / 2**32
    P = torch.full((c, c), (1 - T) / (c - 1), dtype=torch.float64).fill_diagonal_(T)
    prob = P[:, y].T                                           # (n, c): P(report j | y_i)
    var_lam = (prob * (1 - prob)).sum(0) / n**2
    p, q = grr_probs(eps, c)
    exact = var_lam / (p - q) ** 2  # pi~_j = (lambda'_j - q) / (p - q) when sum(lambda') = 1
    _variance_check(est[:, 0], exact[0])
    assert (var.mean(0) >= exact * 0.97).all()  # the stated variance is an upper bound


def _variance_check(samples, sigma2):
    R = samples.numel()
    s2 = samples.var(unbiased=True).item()
    stat = (R - 1) * s2 / float(sigma2)
    p = 2 * min(stats.chi2.cdf(stat, R - 1), stats.chi2.sf(stat, R - 1))
    assert p > ALPHA, (s2, float(sigma2))


@pytest.mark.parametrize("m", [2, 5])
def test_grr_fs_frequency_estimator_is_unbiased(m):
    """RGNN Theorem 2: eq. (5) is unbiased, with variance bounded by eq. (6)."""
    d, eps_x, n, R = 5, 1.0, 400, 500
    gam = [3, 2, 3, 2, 4]
    g = torch.Generator().manual_seed(m)
    pis = [torch.softmax(torch.randn(k, generator=g) * 1.5, 0).double() for k in gam]
    cols = []
    for k, pi in zip(gam, pis):
        counts = (pi * n).round().long()
        counts[0] += n - counts.sum()
        cols.append(torch.repeat_interleave(torch.arange(k), counts)[torch.randperm(n, generator=g)])
    x = torch.stack(cols, 1)
    truth = [torch.bincount(x[:, j], minlength=k).double() / n for j, k in enumerate(gam)]
    out, _ = grr_fs(x.repeat(R, 1), torch.tensor(gam), eps_x, m, seed=100 + m)
    runs = _split_runs(out, R, n)
    for j, k in enumerate(gam):
        lam = torch.stack([torch.bincount(r[:, j], minlength=k) for r in runs]).double() / n
        est = E.grr_fs_estimate(lam, eps_x, m, d, k)
        var = E.grr_fs_variance(lam, eps_x, m, d, k, n)
        se = (var.mean(0) / R).sqrt()
        assert ((est.mean(0) - truth[j]).abs() <= Z * se).all(), j
        # exact variance of the estimator for this population (Poisson-binomial counts)
        p, q = grr_probs(eps_x, k)
        T = grr_threshold(eps_x, k) / 2**32
        keep = torch.full((k, k), (1 - T) / (k - 1), dtype=torch.float64).fill_diagonal_(T)
        prob = m / d * keep[:, x[:, j]].T + (1 - m / d) / k      # (n, k)
        exact = (prob * (1 - prob)).sum(0) / n**2 * d * d / (m * m * (p - q) ** 2)
        _variance_check(est[:, 0], exact[0])
        assert (var.mean(0) >= exact * 0.97).all()


def test_estimator_test_detects_a_wrong_budget():
    # The unbiasedness test can fail: estimating with eps_x = 1.3 data randomised at 1.0.
    d, m, n, R, k = 4, 2, 400, 300, 2
    x = (torch.arange(n) < 300).long().unsqueeze(1).repeat(1, d)
    out, _ = grr_fs(x.repeat(R, 1), 2, 1.0, m, seed=9)
    lam = torch.stack([torch.bincount(r[:, 0], minlength=k) for r in _split_runs(out, R, n)]).double() / n
    est = E.grr_fs_estimate(lam, 1.3, m, d, k)
    se = (E.grr_fs_variance(lam, 1.3, m, d, k, n).mean(0) / R).sqrt()
    assert ((est.mean(0) - torch.tensor([0.25, 0.75], dtype=torch.float64)).abs() > Z * se).any()


@pytest.mark.parametrize("m", [1, 3])
def test_multibit_rectifier_is_unbiased_with_eq5_variance(m):
    """LPGNN Proposition 3.2 (unbiased) and 3.3 (variance, eq. 5)."""
    d, eps, a, b, R = 6, 3.0, -1.0, 2.0, 40_000
    xrow = torch.tensor([-1.0, 2.0, 0.5, 0.0, 1.9, -0.3], dtype=torch.float64)
    xs, _ = multibit_encode(xrow.repeat(R, 1), eps, m, a, b, seed=50 + m)
    xp = multibit_rectify(xs, eps, m, a, b, dtype=torch.float64)
    var = E.multibit_variance(xrow, eps, m, d, a, b)
    se = (var / R).sqrt()
    assert ((xp.mean(0) - xrow).abs() <= Z * se).all()
    # variance: z-test on the second moment with the sample SE of x'^2
    sq = xp**2
    se2 = sq.std(0) / math.sqrt(R)
    assert ((sq.mean(0) - (var + xrow**2)).abs() <= Z * se2).all()


def test_rectifier_detects_wrong_m():
    d, eps, R = 6, 3.0, 40_000
    xrow = torch.linspace(0, 1, d, dtype=torch.float64)
    xs, _ = multibit_encode(xrow.repeat(R, 1), eps, 1, seed=3)
    xp = multibit_rectify(xs, eps, 2, dtype=torch.float64)  # wrong m
    se = (E.multibit_variance(xrow, eps, 1, d) / R).sqrt()
    assert ((xp.mean(0) - xrow).abs() > Z * se).any()


# --- simplex projection -----------------------------------------------------------------------
def test_clip_projection_is_rgnn_code():
    v = torch.tensor([[0.7, -0.2, 0.5], [-1.0, -2.0, -3.0], [0.2, 0.3, 0.5]], dtype=torch.float64)
    out = E.project_simplex(v)
    ref = v.clone()
    ref[ref < 0] = 1e-5                               # RGNN model.py / train.py
    ref = ref / ref.sum(1, keepdim=True)
    torch.testing.assert_close(out, ref)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=8))
def test_euclidean_projection_is_the_closest_point(vals):
    v = torch.tensor(vals, dtype=torch.float64)
    w = E.project_simplex(v, "euclidean")
    assert abs(w.sum().item() - 1) < 1e-9 and (w >= 0).all()
    # KKT: w = max(v - theta, 0) for one theta
    pos = w > 0
    theta = (v[pos] - w[pos]).mean()
    torch.testing.assert_close(w, torch.clamp(v - theta, min=0), atol=1e-9, rtol=0)
    if (v >= 0).all() and abs(v.sum().item() - 1) < 1e-12:
        torch.testing.assert_close(w, v)


def test_estimator_bad_input():
    lam = torch.full((3,), 1 / 3)
    with pytest.raises(ValueError, match="eps"):
        E.grr_estimate(lam, 0.0, 3)
    with pytest.raises(ValueError, match="last dimension 4"):
        E.grr_estimate(lam, 1.0, 4)
    with pytest.raises(ValueError, match="m: expected"):
        E.grr_fs_estimate(lam, 1.0, 6, 5, 3)
    with pytest.raises(ValueError, match="n: expected"):
        E.grr_fs_variance(lam, 1.0, 2, 5, 3, 1)
    with pytest.raises(ValueError, match="method"):
        E.project_simplex(lam, "l1")
    with pytest.raises(ValueError, match="NaN"):
        E.project_simplex(torch.tensor([float("nan"), 1.0]))
