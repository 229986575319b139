"""Accountants in seconds (issue 38, item 3): the fast PLD, the PRV and GDP figures.

* the PLD built by :func:`ldpfast.privacy.accountants.mog_pld` is ``dp_accounting``'s own
  (checked against ``from_mixture_gaussian_mechanism``, which took 418 s to calibrate on Cora);
* the PRV figure (our FFT composition) agrees with the PLD within its stated slack, and both
  with the Gaussian mechanism's exact curve where the mixture is one Gaussian;
* GDP is a valid bound (never below the PLD) and exact for one Gaussian;
* every figure is non-decreasing in ``T`` (issue 37, finding 16) and calibration round-trips.

Timings are in ``benchmarks/bench_accountants.py``, never asserted here.
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from ldpfast.privacy.accountants import (
    HeterPoissonAccountant,
    MixtureAccountant,
    gaussian_epsilon,
    gdp_epsilon,
    heterpoisson_mixture,
    mog_pld,
    prv_epsilon,
)
from ldpfast.privacy.accountants.pld import _pld_eps, _pld_eps_reference

dp_accounting = pytest.importorskip("dp_accounting")


# ----------------------------------------------------------------------------- the fast PLD
@pytest.mark.parametrize("mix", ["subsampled", "heterpoisson"])
def test_fast_pld_is_dp_accountings(mix):
    """The same connect-the-dots PLD as dp_accounting's constructor: the eps of 1 and 20
    compositions agree to 1e-6 relative, never below it (the exact cut-off)."""
    if mix == "subsampled":
        c, p, sigma = [0.0, 0.5], [0.9, 0.1], 0.9
    else:
        c, p = heterpoisson_mixture(0.15, 2.0, math.inf, 6)
        sigma = 1.4
    for T in (1, 20):
        ours = _pld_eps(c, p, sigma, T, 1e-5, 1e-2)
        ref = _pld_eps_reference(c, p, sigma, T, 1e-5, 1e-2)
        assert ours == pytest.approx(ref, rel=1e-6) and ours >= ref - 1e-9, (T, ours, ref)


def test_fast_pld_hockey_stick_matches_point_by_point():
    """The eps-hockey-stick divergences on the grid equal dp_accounting's to 1e-12."""
    from dp_accounting.pld import privacy_loss_mechanism as plm

    from ldpfast.privacy.accountants.pld import _MoGLoss

    c, p = heterpoisson_mixture(0.2, 1.0, 7, 5)
    for direction, adj in (("remove", plm.AdjacencyType.REMOVE), ("add", plm.AdjacencyType.ADD)):
        ours = _MoGLoss(c, p, 1.1, direction)
        ref = plm.MixtureGaussianPrivacyLoss(1.1, list(c), list(p), adjacency_type=adj)
        b = ref.connect_dots_bounds()
        assert ours.eps_range() == pytest.approx((b.epsilon_lower, b.epsilon_upper), abs=1e-12)
        e = np.linspace(b.epsilon_lower, b.epsilon_upper, 300)
        assert np.max(np.abs(ours.deltas(e) - ref.get_delta_for_epsilon(e))) < 1e-12


def test_coarse_pld_grid_dominates_the_fine_one():
    """Calibration tests at a 1e-2 grid: a valid bound for the 1e-3 grid it reports at."""
    for q, M, sigma, T in ((0.1, 2.0, 1.5, 77), (0.01, 1.0, 0.7, 900)):
        c, p = heterpoisson_mixture(q, M, math.inf, 6)
        assert _pld_eps(c, p, sigma, T, 1e-6, 1e-2) >= _pld_eps(c, p, sigma, T, 1e-6, 1e-3) - 1e-9


def test_composed_degrees_cover_the_grid():
    """The composed figures take D = 1 and the Poisson limit: no degree of the RDP grid gives a
    larger PLD figure (Cora's setting)."""
    acc = HeterPoissonAccountant(0.118, 2.0, 2708)
    K, T = 8, 77
    top = max(_pld_eps(*heterpoisson_mixture(0.118, 2.0, D, K), 1.6, T, 1e-4, 1e-2) for D in (1, math.inf))
    for D in acc.degrees[:-1][::3]:
        assert _pld_eps(*heterpoisson_mixture(0.118, 2.0, D, K), 1.6, T, 1e-4, 1e-2) <= top + 1e-9, D


# ----------------------------------------------------------------------------- PRV and GDP
@pytest.mark.parametrize("sigma, T", [(1.0, 1), (2.0, 10), (0.8, 40)])
def test_prv_and_gdp_of_one_gaussian_are_the_exact_curve(sigma, T):
    """A mixture with one component is the Gaussian mechanism: GDP is exact, the PRV above the
    exact curve by at most T * mesh, the PLD by its grid."""
    exact = gaussian_epsilon(0.5, sigma, T, 1e-5)
    assert gdp_epsilon([0.5], [1.0], sigma, T, 1e-5) == pytest.approx(exact, rel=1e-9)
    prv = prv_epsilon([0.5], [1.0], sigma, T, 1e-5)
    assert exact - 1e-9 <= prv <= exact + T * max(1e-5, min(1e-3, 0.01 / T)) + 1e-6
    assert exact - 1e-9 <= _pld_eps([0.5], [1.0], sigma, T, 1e-5, 1e-3) <= exact + 5e-3


@pytest.mark.parametrize("q, M, sigma, T", [(0.1, 2.0, 1.2, 30), (0.05, 1.0, 0.9, 120)])
def test_prv_agrees_with_the_pld_within_its_slack(q, M, sigma, T):
    """Two discretisations of one mechanism: the PRV (rounding up) is at least the PLD minus
    its grid error and at most the PLD plus T * mesh."""
    c, p = heterpoisson_mixture(q, M, math.inf, 6)
    pld = _pld_eps(c, p, sigma, T, 1e-5, 1e-3)
    prv = prv_epsilon(c, p, sigma, T, 1e-5)
    mesh = max(1e-5, min(1e-3, 0.01 / T))
    assert pld - 2e-3 <= prv <= pld + T * mesh + 1e-3, (pld, prv)


def test_gdp_is_a_valid_loose_bound():
    """GDP ignores the amplification by sampling: never below the PLD figure, and exactly the
    Gaussian mechanism at the largest sensitivity."""
    c, p = heterpoisson_mixture(0.1, 2.0, math.inf, 6)
    for T in (1, 50):
        g = gdp_epsilon(c, p, 2.0, T, 1e-5)
        assert g >= _pld_eps(c, p, 2.0, T, 1e-5, 1e-3)
        assert g == pytest.approx(gaussian_epsilon(6.0, 2.0, T, 1e-5), rel=1e-12)


# ----------------------------------------------------------------------------- monotone, calibration
@pytest.mark.parametrize("method", ["rdp", "pld", "prv", "gdp"])
def test_every_figure_is_non_decreasing_in_T(method):
    """Issue 37, finding 16 for every accountant: q_b 0.1, M 2, sigma 1, delta 1e-4 (the
    finding's setting), T = 1..6 and a few larger."""
    acc = HeterPoissonAccountant(0.1, 2.0, 2708)
    Ts = [1, 2, 3, 4, 5, 6, 10, 25] if method != "prv" else [1, 2, 3, 5, 8]
    sigma = 30.0 if method == "gdp" else 1.0  # GDP, without amplification, is infinite at sigma 1
    eps = [acc.epsilon(sigma, T, 1e-4, method=method).eps for T in Ts]
    assert all(math.isfinite(e) for e in eps), eps
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(eps)), (method, eps)
    nodes = MixtureAccountant([0.0, 0.5], [0.95, 0.05])
    e2 = [nodes.epsilon(sigma, T, 1e-5, method=method).eps for T in (1, 3, 9, 27)]
    assert all(a <= b + 1e-9 for a, b in itertools.pairwise(e2)), (method, e2)


@pytest.mark.parametrize("method", ["pld", "gdp"])
def test_calibration_round_trip_of_the_composed_figures(method):
    """The sigma found meets the target with the figure epsilon() reports, and 2% less noise
    does not; the PLD's is at most the RDP's (less noise for the same eps)."""
    acc = HeterPoissonAccountant(0.118, 2.0, 2708)
    T, delta = 77, 1 / 2708 ** 1.1
    s = acc.calibrate_sigma(8.0, delta, T, method=method)
    assert acc.epsilon(s, T, delta, method=method).eps <= 8.0
    assert acc.epsilon(s * 0.98, T, delta, method=method).eps > 8.0
    if method == "pld":
        assert s <= acc.calibrate_sigma(8.0, delta, T, method="rdp")


def test_the_pld_figure_holds_its_tail_charge():
    """The composed figures charge e^eps T tail(K) <= 1e-3 delta (valid once eps <= the cap's E)."""
    acc = HeterPoissonAccountant(0.2, 3.0, 5000)
    for sigma in (0.9, 2.0):
        r = acc.epsilon(sigma, 20, 1e-5, method="pld")
        assert r.delta_tail <= 1e-3 * 1e-5 * (1 + 1e-9) and r.K >= 1


def test_a_slow_calibration_prints_progress(capsys):
    from ldpfast.privacy.accountants.base import _Progress

    prog = _Progress("calibrating sigma (pld)", after=0.0, every=0.0)
    f = prog.wrap(lambda s: 3.0 / s)
    f(1.5)
    f(2.0)
    err = capsys.readouterr().err
    assert "calibrating sigma (pld): figure 1, sigma 1.5: eps 2" in err and "figure 2" in err


def test_mog_pld_validates():
    with pytest.raises(ValueError, match="value_discretization_interval"):
        mog_pld([0, 1], [0.5, 0.5], 1.0, value_discretization_interval=0.0)
    with pytest.raises(ValueError, match="mesh"):
        prv_epsilon([0, 1], [0.5, 0.5], 1.0, 3, 1e-5, mesh=2.0)


def test_bench_accountants_runs(tmp_path):
    """The benchmark script runs end to end and writes its report (timings never asserted)."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import bench_accountants

    bench_accountants.main(["--graphs", "cora", "--eps", "8", "--methods", "gdp", "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "bench_accountants.json").read_text())["rows"]
    assert rows and rows[0]["impl"] == "gdp" and rows[0]["reported_eps"] <= 8.0 and rows[0]["cpu_s"] > 0
