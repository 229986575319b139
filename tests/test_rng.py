"""The RNG contract: Philox known answers, bit-identical backends, sampler distributions.

Statistical tests use fixed seeds (deterministic in CI); each states its false-alarm rate
(the probability that a correct sampler fails it) as the p-value threshold ALPHA.
"""
import math

import numpy as np
import pytest
from scipy import stats

from ldpfast import rng
from ldpfast._numba import rng_kernels as NK

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
    ("fill_geometric", np.int64, (0.3,), "geometric"),  # B = 0: Bernoulli(p) trials only
    ("fill_geometric", np.int64, (0.29,), "geometric"),  # B = 1
    ("fill_geometric", np.int64, (1e-12,), "geometric"),  # B = 39: 64-bit proposals
    ("fill_geometric", np.int64, (1e-18,), "geometric"),  # B = 59: acceptance byte from one more word
    ("fill_geometric", np.int64, (1e-25,), "geometric"),  # B capped at 62, mostly the cap 2^62
    ("fill_bernoulli", np.uint8, (0.3,), "bernoulli"),
    ("fill_bernoulli", np.uint8, (2.0**-60,), "bernoulli"),
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


def test_det_exp_accuracy_and_twins():
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 120
    ln2 = math.log(2)
    ys = np.concatenate([np.random.default_rng(1).uniform(0, ln2, 2000),
                         [0.0, ln2, ln2 / 2, math.nextafter(ln2 / 2, 1), 1e-300, 5e-324, 1e-10, 0.3]])
    for y in ys:
        e = C.det_exp_neg(y)
        assert e == NK.det_exp_neg(y) == rng.det_exp_neg(y)
        assert abs(mpmath.mpf(e) / mpmath.exp(-mpmath.mpf(y)) - 1) < 2.0**-51
        if y > 0:
            f = C.det_neg_expm1(y)
            assert f == NK.det_neg_expm1(y) == rng.det_neg_expm1(y)
            assert abs(mpmath.mpf(f) / -mpmath.expm1(-mpmath.mpf(y)) - 1) < 2.0**-50


# --- exactness of the Bernoulli and geometric samplers (audit F5) ----------------------------
class Words:
    """Word source over a list, for the NumPy twins (same interface as the C++ hook)."""

    def __init__(self, words):
        self.w, self.pos = [int(v) for v in words], 0

    def next_u32(self):
        if self.pos >= len(self.w):
            raise IndexError("words: exhausted")
        self.pos += 1
        return self.w[self.pos - 1]

    def next_u64(self):
        hi = self.next_u32()
        return (hi << 32) | self.next_u32()


def _both(fn_c, fn_py, arg, words):
    """(result, words used) from the C++ hook and the NumPy twin, which must agree."""
    words = np.asarray(words, np.uint32)
    try:
        a = fn_c(arg, words)
    except IndexError:
        a = "exhausted"
    src = Words(words)
    try:
        b = (fn_py(src, arg), src.pos)
    except IndexError:
        b = "exhausted"
    assert a == b, (arg, words.tolist(), a, b)
    return a


def _digits32(q, n):
    """The first n base-2^32 digits of the double q in [0, 1) (exact: Fraction)."""
    from fractions import Fraction
    f, out = Fraction(q), []
    for _ in range(n):
        f *= 2**32
        out.append(int(f))
        f -= int(f)
    return out


@pytest.mark.parametrize("q", [0.3, 0.5, 1 / 3, 2.0**-40, 1e-300, 5e-324, 1 - 2.0**-53, 0.1 + 2.0**-60])
def test_bernoulli_words_compares_with_every_digit_of_q(q):
    # U < q is decided at the first 32-bit digit where U differs from q; a double has finitely
    # many digits, after which U >= q.  Words equal to q's digits up to j, then one below / above.
    d = _digits32(q, 40)
    last = max(i for i, v in enumerate(d) if v) if any(d) else -1
    for j in range(last + 1):
        if d[j] > 0:
            assert _both(C.bernoulli_words, rng.bernoulli_words, q, d[:j] + [d[j] - 1]) == (True, j + 1)
        if d[j] < 2**32 - 1:
            assert _both(C.bernoulli_words, rng.bernoulli_words, q, d[:j] + [d[j] + 1]) == (False, j + 1)
    assert _both(C.bernoulli_words, rng.bernoulli_words, q, d[:last + 1] + [0]) == (False, last + 1)
    assert _both(C.bernoulli_words, rng.bernoulli_words, 0.0, []) == (False, 0)


def test_bernoulli_is_exact_below_2_pow_minus_53():
    # CellRng::bernoulli: the 53 bits of uniform() first (unchanged answers), a tie settled by
    # further words.  uniform() < p was never true for p < 2^-54; now P[true] = p exactly.
    p = 2.0**-60
    assert _both(C.bernoulli_u53_words, rng.bernoulli_u53, p, [0, 0, 2**25 - 1]) == (True, 3)
    assert _both(C.bernoulli_u53_words, rng.bernoulli_u53, p, [0, 0, 2**25]) == (False, 3)
    assert _both(C.bernoulli_u53_words, rng.bernoulli_u53, p, [0, 2**11, 0]) == (False, 2)
    q = 0.3  # k = floor(0.3 * 2^53) ties; the fraction decides
    K = int(q * 2.0**53)
    frac = _digits32(q * 2.0**53 - K, 1)[0]
    w = [K >> 21, (K & (2**21 - 1)) << 11]
    assert _both(C.bernoulli_u53_words, rng.bernoulli_u53, q, w + [frac - 1]) == (True, 3)
    assert _both(C.bernoulli_u53_words, rng.bernoulli_u53, q, w + [frac + 1]) == (False, 3)
    # away from ties, the same answers as uniform() < p (outputs of existing seeds unchanged)
    for p in (0.3, 1e-3, 0.999):
        a = np.zeros((300, 50), np.uint8)
        u = np.zeros((300, 50), np.float64)
        C.fill_bernoulli(a, 21, 4, 0, p)
        C.fill_uniform(u, 21, 4, 0)
        np.testing.assert_array_equal(a.astype(bool), u < p)


def test_geometric_support_beyond_the_old_maximum_and_the_cap():
    # The old floor(log U / log(1-p)) with a 53-bit U never exceeded log(2^-54) / log(1 - p)
    # (53 at p = 1/2).  Here every gap has positive probability: 1000 words of failed trials
    # (bytes > floor(256 p)) then a success give 4000.
    assert _both(C.geometric_words, lambda s, p: rng.geom_draw(s, rng.geom_params(p)), 0.5,
                 [0xFFFFFFFF] * 1000 + [0]) == (4000, 1001)
    # p = 1e-18: B = 59, so H >= 2^(62-59) = 8 failed blocks means G >= 2^62: the cap.
    assert C.geom_params(1e-18)[1] == 59
    assert _both(C.geometric_words, lambda s, p: rng.geom_draw(s, rng.geom_params(p)), 1e-18,
                 [0xFFFFFFFF] * 2) == (2**62, 2)
    # p = 0.01 (B = 6): four failed trials, the fifth succeeds (H = 4), then x = 37 is accepted
    # (its byte v = 0 is below floor(256 a(37)))
    K = int(C.geom_params(0.01)[3] * 256)
    w0 = 0xFFFFFFFF
    w1 = 0xFFFF_FF00 | (K - 1)
    assert _both(C.geometric_words, lambda s, p: rng.geom_draw(s, rng.geom_params(p)), 0.01,
                 [w0, w1, 37]) == (4 * 64 + 37, 3)


@pytest.mark.parametrize("p", [0.9, 0.3, 0.29, 0.01, 1e-4, 3e-8, 1e-12, 1e-18, 1e-25, 5e-324])
def test_geometric_words_twins_on_adversarial_words(p):
    # Random words whose bytes often equal K = floor(256 stop) or floor(256 a) (ties), so the
    # exact tie paths run; the C++ kernel code and the NumPy twin must agree word for word.
    params = rng.geom_params(p)
    assert C.geom_params(p) == NK.geom_params(p) == params
    K = int(params[3] * 256)
    gen = np.random.default_rng(7)
    for _ in range(400):
        n = int(gen.integers(1, 12))
        bytes_ = gen.integers(0, 256, (n, 4))
        tie = gen.random((n, 4)) < 0.3
        bytes_[tie] = np.minimum(K + gen.integers(-1, 2, tie.sum()), 255).clip(0)
        words = (bytes_ << np.array([0, 8, 16, 24])).sum(1) % 2**32
        _both(C.geometric_words, lambda s, q: rng.geom_draw(s, rng.geom_params(q)), p, words)


@pytest.mark.parametrize("p", [0.9, 0.5, 0.3, 0.29, 0.1, 0.01, 1e-4, 2.0**-20, 1e-9, 1e-13, 1e-17, 1e-19, 1e-25,
                               5e-324])
def test_geometric_law_has_relative_error_below_2_pow_minus_49(p):
    """The law of geom_draw, factor by factor (rng.h): P(G = h 2^B + x) = (1-stop)^h stop a(x) / Z
    with stop = 1 - (1-p)^(2^B) and a(x) = (1-p)^x.  Each computed factor must be within
    relative 2^-49 of the exact one (mpmath), so every likelihood ratio of the skip samplers is
    within e^(+-2^-46) of the exact geometric's, for every gap (no truncation, no hole)."""
    mpmath = pytest.importorskip("mpmath")
    mpmath.mp.prec = 160
    kind, B, lam, stop = C.geom_params(p)
    assert kind == 2
    log_r = mpmath.log1p(-mpmath.mpf(p))  # p is a double: exact
    if B == 0:
        assert stop == p  # trials with P[success] = p itself: the law is exactly Geometric(p)
        return
    true_stop = -mpmath.expm1(2**B * log_r)
    assert abs(mpmath.mpf(stop) / true_stop - 1) < 2.0**-49
    assert abs((1 - mpmath.mpf(stop)) / (1 - true_stop) - 1) < 2.0**-49
    xs = np.arange(2**B) if B <= 10 else np.unique(np.concatenate(
        [[0, 1, 2, 2**B - 2, 2**B - 1], np.random.default_rng(B).integers(0, 2**B, 400)]))
    for x in xs:
        a = C.det_exp_neg(lam * float(x))
        assert abs(mpmath.mpf(a) / mpmath.exp(int(x) * log_r) - 1) < 2.0**-49, x


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


@pytest.mark.parametrize("p", [0.5, 0.3, 0.05, 0.001, 1e-7])
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
