"""The RNG contract: Philox known answers, bit-identical backends, sampler distributions.

Statistical tests use fixed seeds (deterministic in CI); each states its false-alarm rate
(the probability that a correct sampler fails it) as the p-value threshold ALPHA.
"""
import math

import numpy as np
import pytest
from scipy import stats

from ldpfast import rng
from ldpfast._numba import kernels as NK

C = pytest.importorskip("ldpfast._C")
ALPHA = 1e-4  # false-alarm rate of each chi-square test below

# Random123 kat_vectors, philox4x32 10: counter[4], key[2] -> output[4]
KAT = [
    ([0, 0, 0, 0], [0, 0], [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]),
    ([0xFFFFFFFF] * 4, [0xFFFFFFFF] * 2, [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]),
    ([0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344], [0xA4093822, 0x299F31D0],
     [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]),
]


def _kat_arrays():
    c = np.array([k[0] for k in KAT], np.uint32)
    k = np.array([k[1] for k in KAT], np.uint32)
    e = np.array([k[2] for k in KAT], np.uint32)
    return c, k, e


@pytest.mark.parametrize("impl", ["cpp", "numba", "numpy"])
def test_philox_known_answers(impl):
    c, k, e = _kat_arrays()
    if impl == "numpy":
        out = rng.philox4x32_10(c, k)
    else:
        out = np.zeros_like(c)
        (C if impl == "cpp" else NK).philox_blocks(c, k, out)
    np.testing.assert_array_equal(out, e)


def test_philox_known_answer_detects_a_wrong_round_count():
    # The KAT must be able to fail: 9 rounds would not match.
    c, k, e = _kat_arrays()
    assert not np.array_equal(rng.philox4x32_10(c, k)[:, ::-1], e)


SEED = 0xDEADBEEF12345


CASES = [
    ("fill_u32", np.uint32, (), "next_u32"),
    ("fill_uniform", np.float64, (), "uniform"),
    ("fill_randint", np.int64, (7,), "randint"),
    ("fill_randint", np.int64, (2**40 + 3,), "randint"),
    ("fill_geometric", np.int64, (0.01,), "geometric"),
    ("fill_geometric", np.int64, (1e-9,), "geometric"),
    ("fill_geometric", np.int64, (0.9,), "geometric"),
    ("fill_binomial", np.int64, (1000, 0.3), "binomial"),
    ("fill_binomial", np.int64, (50, 0.9), "binomial"),
    ("fill_discrete_laplace", np.int64, (3, 2), "discrete_laplace"),
]


@pytest.mark.parametrize("fn,dtype,args,meth", CASES)
def test_backends_bit_identical(fn, dtype, args, meth):
    a = np.zeros((40, 25), dtype)
    b = np.zeros((40, 25), dtype)
    getattr(C, fn)(a, SEED, 3, 2**33 + 5, *args)
    getattr(NK, fn)(b, SEED, 3, 2**33 + 5, *args)
    np.testing.assert_array_equal(a, b)
    # the scalar NumPy twin on a few cells
    for r, c in [(0, 0), (1, 7), (39, 24)]:
        ref = getattr(rng.CellRng(SEED, 3, 2**33 + 5 + r, c), meth)(*args)
        assert ref == a[r, c]


@pytest.mark.parametrize("fn,dtype,args,meth", CASES[:6])
def test_thread_count_does_not_change_output(fn, dtype, args, meth, threads):
    outs = []
    for t in (1, 2):
        threads(t)
        a = np.zeros((3000, 3), dtype)
        getattr(C, fn)(a, SEED, 1, 0, *args)
        outs.append(a)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_streams_rows_cols_are_independent_addresses():
    a = np.zeros((4, 4), np.uint32)
    b = np.zeros((4, 4), np.uint32)
    C.fill_u32(a, 1, 1, 0)
    C.fill_u32(b, 1, 2, 0)
    assert not np.any(a == b)
    C.fill_u32(b, 2, 1, 0)
    assert not np.any(a == b)


def test_det_log_accuracy_and_twins():
    x = np.concatenate([np.random.default_rng(0).uniform(1e-300, 1, 20000),
                        np.geomspace(1e-300, 1e300, 2000), [1.0, 0.5, 2.0, 1 - 2**-53]])
    ours = rng.det_log(x)
    np.testing.assert_allclose(ours, np.log(x), rtol=4e-16, atol=1e-300)
    for v in x[::97]:
        assert C.det_log(v) == NK.det_log(v) == float(rng.det_log(v))
    y = np.concatenate([-np.geomspace(1e-18, 0.999, 500), np.geomspace(1e-18, 10, 500)])
    np.testing.assert_allclose(rng.det_log1p(y), np.log1p(y), rtol=4e-16)
    for v in y[::13]:
        assert C.det_log1p(v) == NK.det_log1p(v) == float(rng.det_log1p(v))


def _chisq_pvalue(counts, probs):
    counts = np.asarray(counts, float)
    exp = np.asarray(probs, float) * counts.sum()
    return stats.chisquare(counts, exp).pvalue


def test_uniform_is_uniform_on_open_interval():
    a = np.zeros((1000, 200), np.float64)
    C.fill_uniform(a, 11, 0, 0)
    assert a.min() > 0 and a.max() < 1
    counts = np.histogram(a, bins=100, range=(0, 1))[0]
    assert _chisq_pvalue(counts, np.full(100, 0.01)) > ALPHA


@pytest.mark.parametrize("k", [3, 7, 10, 2**31 + 1])
def test_randint_uniform(k):
    a = np.zeros((1000, 100), np.int64)
    C.fill_randint(a, 12, 0, 0, k)
    assert a.min() >= 0 and a.max() < k
    bins = min(k, 64)
    counts = np.bincount((a * bins // k).ravel(), minlength=bins)
    # exact bin probabilities for the floor(a*bins/k) map
    edges = np.ceil(np.arange(bins + 1) * k / bins)
    probs = np.diff(edges) / k
    assert _chisq_pvalue(counts, probs) > ALPHA


@pytest.mark.parametrize("p", [0.5, 0.05, 0.001])
def test_geometric_pmf(p):
    a = np.zeros((500, 200), np.int64)
    C.fill_geometric(a, 13, 0, 0, p)
    # bins: quantiles of the true law, last bin open
    cdf_cut = np.unique(stats.geom.ppf(np.linspace(0.05, 0.95, 19), p).astype(int) - 1)
    edges = np.concatenate([[-1], cdf_cut, [np.inf]])
    counts = np.histogram(a, bins=edges + 0.5)[0]
    cdf = np.concatenate([[0], stats.geom.cdf(cdf_cut + 1, p), [1]])
    assert _chisq_pvalue(counts, np.diff(cdf)) > ALPHA


@pytest.mark.parametrize("n,p", [(20, 0.3), (1000, 0.01), (40, 0.85)])
def test_binomial_pmf(n, p):
    a = np.zeros((400, 100), np.int64)
    C.fill_binomial(a, 14, 0, 0, n, p)
    lo, hi = stats.binom.ppf([0.001, 0.999], n, p).astype(int)
    vals = np.clip(a.ravel(), lo, hi)
    counts = np.bincount(vals - lo, minlength=hi - lo + 1)
    probs = stats.binom.pmf(np.arange(lo, hi + 1), n, p)
    probs[0] = stats.binom.cdf(lo, n, p)
    probs[-1] = stats.binom.sf(hi - 1, n, p)
    assert _chisq_pvalue(counts, probs) > ALPHA


@pytest.mark.parametrize("t,s", [(1, 1), (4, 1), (2, 3), (2**33, 2**31 + 7), (2**52, 2**50 + 1)])
def test_discrete_laplace_pmf(t, s):
    a = np.zeros((300, 100), np.int64)
    C.fill_discrete_laplace(a, 15, 0, 0, t, s)
    lam = s / t  # P[Y = y] ~ exp(-lam |y|)
    lim = max(1, math.ceil(6 / lam))
    vals = np.clip(a.ravel(), -lim, lim)
    ys = np.arange(-lim, lim + 1)
    w = np.exp(-lam * np.abs(ys))
    norm = (1 - math.exp(-lam)) / (1 + math.exp(-lam))
    probs = w * norm
    tail = math.exp(-lam * lim) / (1 + math.exp(-lam))  # P[Y >= lim]
    probs[0] = probs[-1] = tail
    counts = np.bincount(vals + lim, minlength=2 * lim + 1)
    assert _chisq_pvalue(counts, probs / probs.sum()) > ALPHA
    # symmetric
    assert abs(a.mean()) < 6 * a.std() / math.sqrt(a.size)


def test_epsilon_to_rational_rounds_down():
    for eps in [0.1, 1.0, 2.5, 1e-5, 3.3e3, 2.0**-20]:
        t, s, used = rng.epsilon_to_rational(eps)
        assert used <= eps and used > eps * (1 - 2**-30)
        assert s < 2**32 and t & (t - 1) == 0 and t <= 2**52
    for bad in [0.0, -1.0, float("nan"), float("inf"), 1e-7]:
        with pytest.raises(ValueError, match="eps"):
            rng.epsilon_to_rational(bad)


def test_resolve_seed():
    assert rng.resolve_seed(5) == 5
    a, b = rng.resolve_seed(None), rng.resolve_seed(None)
    assert a != b and 0 <= a < 2**64
    for bad, exc in [(-1, ValueError), (2**64, ValueError), (1.5, TypeError), ("1", TypeError),
                     (True, TypeError)]:
        with pytest.raises(exc, match="seed"):
            rng.resolve_seed(bad)
