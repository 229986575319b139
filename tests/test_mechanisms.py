"""Feature and label randomisers: exact privacy, output distributions, backends, bad input.

Statistical tests use fixed seeds (deterministic in CI).  Each chi-square test has
false-alarm rate ALPHA (the probability that a correct mechanism fails it): 1e-4.
Exact-privacy tests enumerate the full output distribution of two neighbouring inputs, from
the paper's formulas and from the mechanism's *own* probability function (the integer
thresholds the kernels compare Philox words with, and the exact law of Floyd's sampling).
"""
from __future__ import annotations

import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats

import ldpfast
from ldpfast import rng
from ldpfast.mechanisms import grr, grr_fs, multibit_encode, multibit_rectify, onebit, rr_labels
from ldpfast.privacy import (
    grr_fs_eps_x_exact,
    grr_fs_epsilon,
    grr_fs_epsilon_exact,
    grr_fs_epsilon_inverse,
    grr_probs,
    grr_threshold,
    grr_threshold_epsilon,
    onebit_threshold,
    onebit_threshold_epsilon,
    optimal_m,
)
from ldpfast.privacy.users import Keying

C = pytest.importorskip("ldpfast._C")
ALPHA = 1e-4  # false-alarm rate of every chi-square test in this file
TWO32 = 2**32
BACKENDS = ["cpp", "numba"]


# --- helpers ----------------------------------------------------------------------------------
def code_rows(out: torch.Tensor, base: int, shift: int = 0) -> np.ndarray:
    """Joint outcome of each row as one integer (row values + shift in [0, base))."""
    a = out.to(torch.int64).numpy() + shift
    w = base ** np.arange(a.shape[1])
    return a @ w


def gof_pvalue(codes: np.ndarray, probs: dict[int, float]) -> float:
    """Chi-square goodness of fit of outcome codes to exact probabilities (zero-probability
    outcomes must not occur at all)."""
    keys = sorted(k for k, v in probs.items() if v > 0)
    idx = {k: i for i, k in enumerate(keys)}
    assert set(np.unique(codes)).issubset(idx), "an impossible outcome occurred"
    counts = np.zeros(len(keys))
    vals, cnt = np.unique(codes, return_counts=True)
    for v, c in zip(vals, cnt):
        counts[idx[v]] = c
    p = np.array([probs[k] for k in keys], float)
    return stats.chisquare(counts, p / p.sum() * counts.sum()).pvalue


def two_sample_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Chi-square test that two samples of outcome codes have one law."""
    keys = np.union1d(a, b)
    ca = np.array([(a == k).sum() for k in keys])
    cb = np.array([(b == k).sum() for k in keys])
    return stats.chi2_contingency(np.stack([ca, cb])).pvalue


def floyd_law(d: int, m: int) -> dict[frozenset, Fraction]:
    """Exact law of the subset drawn by Floyd's algorithm as the kernels run it: enumerate
    every sequence of uniform draws t_j in [0, j], j = d-m .. d-1."""
    if m == d:
        return {frozenset(range(d)): Fraction(1)}
    law: dict[frozenset, Fraction] = {}
    ranges = [range(j + 1) for j in range(d - m, d)]
    w = Fraction(1, math.prod(len(r) for r in ranges))
    for seq in itertools.product(*ranges):
        s: set[int] = set()
        for j, t in zip(range(d - m, d), seq):
            s.add(j if t in s else t)
        key = frozenset(s)
        law[key] = law.get(key, 0) + w
    return law


def grr_col_impl(x: int, k: int, eps: float) -> list[Fraction]:
    """The implemented GRR law of one report: keep with T/2^32, else uniform on the others."""
    if k == 1:
        return [Fraction(1)]
    T = grr_threshold(eps, k)
    keep = Fraction(T, TWO32)
    return [keep if v == x else (1 - keep) / (k - 1) for v in range(k)]


def grr_col_paper(x: int, k: int, eps: float) -> list[float]:
    p, q = grr_probs(eps, k) if k > 1 else (1.0, 0.0)
    return [p if v == x else q for v in range(k)]


def grr_fs_law(x, gam, eps_x, m, impl=True) -> dict[tuple, object]:
    """Full output law of GRR-FS (RGNN eq. 4) for one input vector."""
    d = len(x)
    if impl:
        subsets = floyd_law(d, m)
        col = grr_col_impl
        unif = [[Fraction(1, g)] * g for g in gam]
    else:
        subsets = {frozenset(s): 1.0 / math.comb(d, m) for s in itertools.combinations(range(d), m)}
        col = grr_col_paper
        unif = [[1.0 / g] * g for g in gam]
    law: dict[tuple, object] = {}
    for S, ps in subsets.items():
        cols = [col(x[j], gam[j], eps_x) if j in S else unif[j] for j in range(d)]
        for o in itertools.product(*[range(g) for g in gam]):
            pr = ps
            for j, v in enumerate(o):
                pr = pr * cols[j][v]
            law[o] = law.get(o, 0) + pr
    return law


def max_ratio(laws: list[dict]) -> float:
    """max over outcomes o and input pairs (a, b) of P(o | a) / P(o | b)."""
    worst = 0.0
    for o in laws[0]:
        ps = [lw[o] for lw in laws]
        lo, hi = min(ps), max(ps)
        if lo == 0:
            if hi > 0:
                return math.inf
            continue
        worst = max(worst, float(Fraction(hi) / Fraction(lo)) if isinstance(lo, Fraction)
                    else hi / lo)
    return worst


def onebit_T(v: float, alpha: float, beta: float, t_lo: int, span: float) -> int:
    """Threshold T(x) exactly as the kernels compute it: f clamped into [0, 1], NaN -> 0."""
    f = (float(v) - alpha) / (beta - alpha)
    f = min(f, 1.0) if f > 0.0 else 0.0
    return t_lo + int(f * span)


def onebit_p1_impl(v: float, eps_dim: float, alpha: float, beta: float) -> Fraction:
    """P[t = 1] exactly as the kernels compute it (same double arithmetic)."""
    t_lo, span = onebit_threshold(eps_dim)
    return Fraction(onebit_T(v, alpha, beta, t_lo, span), TWO32)


def onebit_p1_paper(v, eps_dim, alpha, beta) -> float:
    e = math.exp(eps_dim)
    return 1 / (e + 1) + (v - alpha) / (beta - alpha) * (e - 1) / (e + 1)


def multibit_law(x, eps, m, alpha, beta, impl=True) -> dict[tuple, object]:
    """Full output law of the multi-bit encoder (LPGNN Algorithm 1) for one input vector."""
    d = len(x)
    if impl:
        subsets = floyd_law(d, m)
        p1 = onebit_p1_impl
    else:
        subsets = {frozenset(s): 1.0 / math.comb(d, m) for s in itertools.combinations(range(d), m)}
        p1 = onebit_p1_paper
    law: dict[tuple, object] = {}
    for S, ps in subsets.items():
        for signs in itertools.product([-1, 1], repeat=m):
            o = [0] * d
            pr = ps
            for j, s in zip(sorted(S), signs):
                o[j] = s
                q = p1(x[j], eps / m, alpha, beta)
                pr = pr * (q if s == 1 else 1 - q)
            law[tuple(o)] = law.get(tuple(o), 0) + pr
    for o in itertools.product([-1, 0, 1], repeat=d):  # impossible outcomes have probability 0
        law.setdefault(o, 0)
    return law


# --- closed forms -----------------------------------------------------------------------------
def test_theorem1_values_match_the_paper():
    # RGNN section V-A2: Citeseer (d' = 53, m = 10), eps_x in {1, 0.1, 0.01} -> eps_X {8.3, 0.3, 0.02}
    got = [round(grr_fs_epsilon(e, 10, 53), 2) for e in (1, 0.1, 0.01)]
    assert got == [8.33, 0.28, 0.02]
    for e in (0.01, 0.5, 2.0):
        assert grr_fs_epsilon_inverse(grr_fs_epsilon(e, 10, 53), 10, 53) == pytest.approx(e, rel=1e-12)
    assert grr_fs_epsilon_exact(0.5, 4, 9) == 2.0
    assert grr_fs_eps_x_exact(2.0, 4) == 0.5
    assert grr_fs_epsilon(1.0, 5, 5) == pytest.approx(5.0)  # m = d: no sampling, both agree


def test_optimal_m_is_proposition_3_4():
    assert [optimal_m(e, 100) for e in (0.5, 2.17, 2.18, 4.4, 21.8)] == [1, 1, 1, 2, 10]
    assert optimal_m(1000.0, 7) == 7


@pytest.mark.parametrize("k", [2, 3, 7, 1000])
@pytest.mark.parametrize("eps", [1e-6, 0.01, 1.0, 5.0, 50.0, 1e4])
def test_grr_threshold_is_private_and_close(k, eps):
    T = grr_threshold(eps, k)
    assert 0 < T < TWO32
    assert grr_threshold_epsilon(T, k) <= eps
    p, _ = grr_probs(eps, k)
    if eps <= 20:  # below that the 32-bit grid resolves p
        assert abs(T / TWO32 - p) <= 2.0**-31


@pytest.mark.parametrize("eps", [1e-6, 0.01, 1.0, 5.0, 30.0])
def test_onebit_threshold_is_private_and_close(eps):
    t_lo, span = onebit_threshold(eps)
    assert onebit_threshold_epsilon(t_lo) <= eps
    assert t_lo + span + t_lo == TWO32
    if eps <= 20:
        assert abs(t_lo / TWO32 - 1 / (math.exp(eps) + 1)) <= 2.0**-31


# --- exact privacy (enumeration) --------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 3, 5])
@pytest.mark.parametrize("eps", [0.1, 1.0, 3.0])
def test_grr_exact_privacy(k, eps):
    for impl, bound in [(True, math.exp(eps)), (False, math.exp(eps) * (1 + 1e-12))]:
        col = grr_col_impl if impl else grr_col_paper
        laws = [dict(enumerate(col(x, k, eps))) for x in range(k)]
        r = max_ratio(laws)
        assert r <= bound
        assert r >= math.exp(eps) * (1 - 1e-8)  # and the budget is used, not wasted


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("eps_x", [0.3, 1.0])
def test_grr_fs_exact_privacy_and_theorem1(m, eps_x):
    """GRR-FS is exactly (m eps_x)-LDP; RGNN Theorem 1's smaller eps_X is exceeded (m < d)."""
    gam = [2, 3, 2]
    d = len(gam)
    inputs = list(itertools.product(*[range(g) for g in gam]))
    for impl in (True, False):
        laws = [grr_fs_law(x, gam, eps_x, m, impl) for x in inputs]
        r = max_ratio(laws)
        assert r <= math.exp(grr_fs_epsilon_exact(eps_x, m, d)) * (1 + (0 if impl else 1e-12))
        assert r >= math.exp(m * eps_x) * (1 - 1e-8)  # tight
        if m < d:
            assert r > math.exp(grr_fs_epsilon(eps_x, m, d)) * 1.01
    # the implemented law sums to one and Floyd's subsets are uniform
    assert sum(grr_fs_law(inputs[5], gam, eps_x, m, True).values()) == 1
    assert set(floyd_law(d, m).values()) == {Fraction(1, math.comb(d, m))}


def test_grr_fs_spent_records_exact_and_theorem1():
    x = torch.zeros(4, 6, dtype=torch.int64)
    _, s = grr_fs(x, 2, 0.5, 2, seed=1)
    assert s.eps == 1.0 and s.params["eps_exact"] == 1.0
    assert s.params["eps_X_theorem1"] == pytest.approx(grr_fs_epsilon(0.5, 2, 6))
    _, s2 = grr_fs(x, 2, 0.5, 2, seed=1, accounting="rgnn_theorem1")
    assert s2.eps == pytest.approx(grr_fs_epsilon(0.5, 2, 6)) and "NOT a valid" in s2.guarantee


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_multibit_exact_privacy(m, eps):
    alpha, beta = -1.0, 2.0
    grid = [alpha, beta, 0.5, 1.7]
    inputs = list(itertools.product(grid, repeat=3))
    for impl in (True, False):
        laws = [multibit_law(x, eps, m, alpha, beta, impl) for x in inputs]
        r = max_ratio(laws)
        assert r <= math.exp(eps) * (1 + (0 if impl else 1e-12))
        assert r >= math.exp(eps) * (1 - 1e-8)


@pytest.mark.parametrize("eps", [0.5, 3.0])
def test_onebit_exact_privacy(eps):
    # onebit == Algorithm 1 with m = d: budget eps / d per dimension
    inputs = list(itertools.product([0.0, 1.0, 0.25], repeat=3))
    laws = [multibit_law(x, eps, 3, 0.0, 1.0, True) for x in inputs]
    assert math.exp(eps) * (1 - 1e-8) <= max_ratio(laws) <= math.exp(eps)


@pytest.mark.parametrize("c", [2, 4, 7])
@pytest.mark.parametrize("eps", [0.5, 1.0, 3.0])
def test_label_rr_exact_privacy(c, eps):
    # label RR is GRR over c classes (LPGNN eq. 11); both laws from the formula and the code
    for impl, bound in [(True, math.exp(eps)), (False, math.exp(eps) * (1 + 1e-12))]:
        col = grr_col_impl if impl else grr_col_paper
        assert max_ratio([dict(enumerate(col(y, c, eps))) for y in range(c)]) <= bound


# --- the kernels against an executable specification (Python CellRng) -------------------------
class PyBits:
    def __init__(self, seed, stream, row, col):
        self.g, self.r, self.n = rng.CellRng(seed, stream, row, col), 0, 0

    def take(self, b):
        if self.n < b:
            self.r |= self.g.next_u32() << self.n
            self.n += 32
        v = self.r & ((1 << b) - 1)
        self.r >>= b
        self.n -= b
        return v

    def randint(self, k):
        b = (k - 1).bit_length()
        if b == 0:
            return 0
        while True:
            v = self.take(b)
            if v < k:
                return v


def spec_floyd(seed, stream, i, d, m):
    if m == d:
        return list(range(d))
    s = rng.CellRng(seed, stream, i, 0)
    chosen: list[int] = []
    for j in range(d - m, d):
        t = s.randint(j + 1)
        chosen.append(j if t in chosen else t)
    return chosen


def spec_grr_one(x, k, T, keep, bits):
    if keep.next_u32() < T:
        return x
    r = bits.randint(k - 1)
    return r + 1 if r >= x else r


def spec_grr_fs_row(x, k, eps_x, m, seed, i):
    d = len(x)
    T = [grr_threshold(eps_x, kk) for kk in k]
    sel = set(spec_floyd(seed, rng.Stream.GRR_FS_SELECT, i, d, m))
    b = [(kk - 1).bit_length() for kk in k]
    g = rng.CellRng(seed, rng.Stream.GRR, i, 3)
    bits = 0
    for q in range((sum(b) + 127) // 128 * 4):
        bits |= g.next_u32() << (32 * q)
    out, off = [], 0
    for bj in b:
        out.append((bits >> off) & ((1 << bj) - 1))
        off += bj
    keep, over = rng.CellRng(seed, rng.Stream.GRR, i, 2), PyBits(seed, rng.Stream.GRR, i, 4)
    for j in range(d):
        if j in sel:
            out[j] = spec_grr_one(x[j], k[j], T[j], keep, over)
        elif out[j] >= k[j]:
            out[j] = over.randint(k[j])
    return out


def spec_multibit_row(x, eps, m, alpha, beta, seed, i):
    d = len(x)
    t_lo, span = onebit_threshold(eps / m)
    order = spec_floyd(seed, rng.Stream.MULTIBIT_SELECT, i, d, m)
    g = rng.CellRng(seed, rng.Stream.ONEBIT, i, 1)
    out = [0] * d
    for j in order:
        out[j] = 1 if g.next_u32() < onebit_T(x[j], alpha, beta, t_lo, span) else -1
    return out


def keyed(call, secret):
    """Run ``call(_keying=...)`` under ``secret``; returns (output, per-row report seeds): row i's
    streams are CellRng(seeds[i], stream, 0, col) (ldpfast.privacy.users)."""
    k = Keying(secret)
    out, _ = call(_keying=k)
    return out, [int(s) for s in k.last_seeds.numpy().view(np.uint64)]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [[2, 3, 5, 2, 7, 1, 300], [2, 2, 4, 2, 8, 1, 2], [2] * 7])
@pytest.mark.parametrize("m", [1, 4, 7])
def test_grr_fs_matches_the_specification(backend, k, m):
    rs = np.random.default_rng(1)
    x = torch.from_numpy(rs.integers(0, 2**30, (6, len(k))) % np.array(k))
    out, seeds = keyed(lambda **kw: grr_fs(x, torch.tensor(k), 0.7, m, backend=backend, **kw), 0xFEEDFACE12345678)
    for i in (0, 3, 5):
        assert out[i].tolist() == spec_grr_fs_row(x[i].tolist(), k, 0.7, m, seeds[i], 0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("m", [1, 3, 5])
def test_multibit_matches_the_specification(backend, m):
    x = torch.rand(4, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3 - 1
    out, seeds = keyed(lambda **kw: multibit_encode(x, 2.0, m, -1.0, 2.0, backend=backend, **kw), 77)
    for i in range(4):
        assert out[i].tolist() == spec_multibit_row(x[i].tolist(), 2.0, m, -1.0, 2.0, seeds[i], 0)


# Audit F1: a width beta - alpha that overflows (inf / inf = NaN at x = beta), subnormal widths,
# and values at or beyond the ends.  The kernels are called directly (the Python API rejects
# some of these ranges): every threshold must lie in [t_lo, 2^32 - t_lo], so P[+1] is in
# [t_lo / 2^32, 1 - t_lo / 2^32] and the likelihood ratio <= e^eps, and C++ and Numba agree.
_MAXF = 1.7976931348623157e308
EXTREME_RANGES = [(-1e308, 1e308), (-_MAXF, _MAXF), (-_MAXF, 0.0), (0.0, 5e-324), (-5e-324, 5e-324),
                  (1e-320, 3e-320), (1e308, float(np.nextafter(1e308, np.inf))), (-1.0, 1.0)]


def _extreme_values(alpha, beta):
    inside = [alpha, beta, alpha / 2 + beta / 2, float(np.nextafter(alpha, beta)),
              float(np.nextafter(beta, alpha))]
    outside = [0.0, -_MAXF, _MAXF, 5e-324, -1e300, 1e300]  # beyond the range for some rows
    return inside + outside


def _row_words(seeds, stream, col, d):
    """Words [0, d) of CellRng(seeds[i], stream, 0, col) for every row i, as an (n, d) uint64 array."""
    n, nblk = seeds.shape[0], (d + 3) // 4
    q = np.tile(np.arange(nblk, dtype=np.uint64), n)
    ctr = np.stack([q, np.full_like(q, col), np.zeros_like(q), np.full_like(q, int(stream) << 16)], axis=1)
    s = np.repeat(seeds.astype(np.uint64), nblk)
    key = np.stack([s & np.uint64(0xFFFFFFFF), s >> np.uint64(32)], axis=1)
    return rng.philox4x32_10(ctr, key).reshape(n, 4 * nblk)[:, :d].astype(np.uint64)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("alpha,beta", EXTREME_RANGES)
def test_onebit_thresholds_stay_in_range_for_extreme_ranges(alpha, beta, dtype):
    from ldpfast import _backend

    t_lo, span = onebit_threshold(1.0)
    with np.errstate(over="ignore"):  # float32: +-1e308 become +-inf, also fed to the kernels
        vals = [float(dtype(v)) for v in _extreme_values(alpha, beta)]
    Ts = np.array([onebit_T(v, alpha, beta, t_lo, span) for v in vals], np.uint64)
    assert Ts.min() >= t_lo and Ts.max() <= TWO32 - t_lo
    n, d = 4000, len(vals)
    seeds = np.random.default_rng(0x5EED_F1).integers(0, 2**63, n).astype(np.uint64) * np.uint64(3)
    x = np.tile(np.array(vals, dtype), (n, 1))
    outs = {}
    for b in BACKENDS:
        K = _backend.get("cpu", b)
        o1 = np.zeros((n, d), np.int8)
        K.onebit(x, alpha, beta, t_lo, span, seeds, o1)
        om = np.zeros((n, d), np.int8)
        K.multibit_encode(x, d, alpha, beta, t_lo, span, seeds, om)  # m = d: column order
        os_ = np.zeros((n, d), np.int8)
        K.multibit_encode(x, 3, alpha, beta, t_lo, span, seeds, os_)  # Floyd-sampled columns
        outs[b] = (o1, om, os_)
        # exact: each bit is [word < T(x)] with the clamped, in-range threshold
        for o, col in ((o1, 0), (om, 1)):
            w = _row_words(seeds, rng.Stream.ONEBIT, col, d)
            bad = int((o != np.where(w < Ts[None, :], 1, -1)).sum())
            assert bad == 0, f"{b}: {bad} bits differ from [word < T(x)]"
        for i in range(5):
            assert os_[i].tolist() == spec_multibit_row(vals, 3.0, 3, alpha, beta, int(seeds[i]), 0), b
        # empirical P[+1] per x lies within the private band (binomial 5-sigma margin)
        freq = (o1 == 1).mean(axis=0)
        margin = 5 * math.sqrt(0.25 / n)
        assert freq.min() >= t_lo / TWO32 - margin and freq.max() <= 1 - t_lo / TWO32 + margin, b
    for a, c in zip(outs["cpp"], outs["numba"]):
        assert int((a != c).sum()) == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_grr_and_labels_match_the_specification(backend):
    secret, eps = 2**63 + 5, 0.8
    k = [3, 2, 6]
    x = torch.tensor([[2, 1, 5], [0, 0, 0], [1, 1, 3]])
    out, seeds = keyed(lambda **kw: grr(x, torch.tensor(k), eps, backend=backend, **kw), secret)
    for i in range(3):
        keep = rng.CellRng(seeds[i], rng.Stream.GRR, 0, 0)
        bits = PyBits(seeds[i], rng.Stream.GRR, 0, 1)
        ref = [spec_grr_one(int(x[i, j]), k[j], grr_threshold(eps, k[j]), keep, bits) for j in range(3)]
        assert out[i].tolist() == ref
    y = torch.tensor([3, 0, 1, 4, 2])
    mask = torch.tensor([True, False, True, True, True])
    out, seeds = keyed(lambda **kw: rr_labels(y, 5, eps, mask=mask, backend=backend, **kw), secret)
    for i in range(5):
        ref = int(y[i]) if not mask[i] else spec_grr_one(
            int(y[i]), 5, grr_threshold(eps, 5), rng.CellRng(seeds[i], rng.Stream.LABEL_RR, 0, 0),
            PyBits(seeds[i], rng.Stream.LABEL_RR, 0, 1))
        assert int(out[i]) == ref


# --- backends and threads ---------------------------------------------------------------------
def _all_calls(dtype_int, dtype_float):
    g = torch.Generator().manual_seed(3)
    n = 5000
    kcol = torch.tensor([2, 3, 2, 5, 1, 2, 9, 2, 4, 2, 2, 2, 3, 2, 2, 2])
    xc = (torch.randint(0, 2**30, (n, 16), generator=g) % kcol).to(dtype_int)
    xb = torch.randint(0, 2, (n, 16), generator=g).to(dtype_int)
    xf = torch.rand(n, 16, generator=g, dtype=dtype_float)
    y = torch.randint(0, 6, (n,), generator=g).to(dtype_int)
    mask = torch.rand(n, generator=g) < 0.7
    return [
        lambda b: grr(xc, kcol, 0.9, seed=11, backend=b),
        lambda b: grr_fs(xc, kcol, 0.9, 5, seed=12, backend=b),
        lambda b: grr_fs(xb, 2, 1.5, 3, seed=13, backend=b),  # power-of-two fast path
        lambda b: grr_fs(xb, 2, 1.5, 16, seed=13, backend=b),  # m = d
        lambda b: onebit(xf, 4.0, seed=14, backend=b),
        lambda b: multibit_encode(xf, 4.0, 3, seed=15, backend=b),
        lambda b: multibit_encode(xf, 4.0, 16, seed=15, backend=b),
        lambda b: rr_labels(y, 6, 1.2, seed=16, mask=mask, backend=b),
    ]


@pytest.mark.parametrize("dtypes", [(torch.int64, torch.float32), (torch.int32, torch.float64)])
def test_cpp_and_numba_bit_identical(dtypes):
    for call in _all_calls(*dtypes):
        a, sa = call("cpp")
        b, sb = call("numba")
        assert a.dtype == b.dtype and torch.equal(a, b)
        assert sa.params["backend"] == "cpp" and sb.params["backend"] == "numba"


def test_thread_count_does_not_change_output(threads):
    import numba

    calls = _all_calls(torch.int64, torch.float32)
    outs = {}
    for t in (1, 2):
        threads(t)
        outs[t] = [call("cpp")[0] for call in calls]
    for a, b in zip(outs[1], outs[2]):
        assert torch.equal(a, b)
    before = numba.get_num_threads()
    try:
        nb_outs = []
        for t in (1, min(2, numba.config.NUMBA_NUM_THREADS)):
            numba.set_num_threads(t)
            nb_outs.append([call("numba")[0] for call in calls])
    finally:
        numba.set_num_threads(before)
    for a, b, c in zip(nb_outs[0], nb_outs[1], outs[1]):
        assert torch.equal(a, b) and torch.equal(a, c)


def test_seed_reproducibility_and_fresh_seeds():
    x = torch.randint(0, 3, (200, 8))
    a, sa = grr_fs(x, 3, 1.0, 2, seed=5)
    b, _ = grr_fs(x, 3, 1.0, 2, seed=5)
    assert torch.equal(a, b) and "seed" not in sa.params  # the seed stays with the caller
    c, _ = grr_fs(x, 3, 1.0, 2)
    d, _ = grr_fs(x, 3, 1.0, 2)
    assert not torch.equal(c, d)  # seed=None: fresh OS randomness each call


def test_output_shapes_dtypes_and_spent():
    x = torch.randint(0, 2, (30, 5), dtype=torch.int32)
    out, s = grr(x, 2, 0.5, seed=0)
    assert out.dtype == torch.int32 and out.shape == x.shape
    assert s.eps == pytest.approx(2.5) and s.target == "features" and s.params["eps_per_value"] == 0.5
    out, s = grr(x[:, 0], 2, 0.5, seed=0)  # 1-D input: one column
    assert out.shape == (30,) and s.eps == 0.5
    xf = torch.rand(30, 9)
    out, s = multibit_encode(xf, 5.0, seed=0)
    assert out.dtype == torch.int8 and s.params["m"] == 2 and ((out != 0).sum(1) == 2).all()
    assert s.eps == 5.0 and s.params["eps_per_dim"] == 2.5
    out, s = onebit(xf, 5.0, seed=0)
    assert set(out.unique().tolist()) <= {-1, 1} and s.params["eps_per_dim"] == pytest.approx(5 / 9)
    out, s = rr_labels(torch.arange(10) % 3, 3, 1.0, seed=0)
    assert s.target == "labels" and s.eps == 1.0 and s.params["num_randomised"] == 10


# --- distributions (chi-square, false-alarm rate ALPHA each) ----------------------------------
N = 120_000


def test_grr_distribution():
    k = [2, 3, 5]
    xrow = torch.tensor([1, 0, 4])
    out, _ = grr(xrow.repeat(N, 1), torch.tensor(k), 0.8, seed=101)
    law = {o: 1.0 for o in itertools.product(*[range(v) for v in k])}
    for o in law:
        law[o] = math.prod(float(grr_col_impl(int(xrow[j]), k[j], 0.8)[o[j]]) for j in range(3))
    probs = {sum(v * 5**j for j, v in enumerate(o)): p for o, p in law.items()}
    assert gof_pvalue(code_rows(out, 5), probs) > ALPHA


@pytest.mark.parametrize("m", [1, 2, 3])
def test_grr_fs_distribution(m):
    gam = [2, 3, 2]
    xrow = [1, 2, 0]
    out, _ = grr_fs(torch.tensor(xrow).repeat(N, 1), torch.tensor(gam), 1.0, m, seed=200 + m)
    law = grr_fs_law(xrow, gam, 1.0, m, impl=True)
    probs = {sum(v * 3**j for j, v in enumerate(o)): float(p) for o, p in law.items()}
    assert gof_pvalue(code_rows(out, 3), probs) > ALPHA


def test_chi_square_detects_a_wrong_budget():
    # The distribution tests can fail: eps_x = 1.0 output against the eps_x = 1.15 law.
    gam, xrow = [2, 3, 2], [1, 2, 0]
    out, _ = grr_fs(torch.tensor(xrow).repeat(N, 1), torch.tensor(gam), 1.0, 1, seed=201)
    law = grr_fs_law(xrow, gam, 1.15, 1, impl=True)
    probs = {sum(v * 3**j for j, v in enumerate(o)): float(p) for o, p in law.items()}
    assert gof_pvalue(code_rows(out, 3), probs) < ALPHA


@pytest.mark.parametrize("m", [1, 2, 3])
def test_multibit_distribution(m):
    xrow = [0.0, 0.3, 1.0]
    out, _ = multibit_encode(torch.tensor(xrow).repeat(N, 1), 2.0, m, seed=300 + m)
    law = multibit_law(xrow, 2.0, m, 0.0, 1.0, impl=True)
    probs = {sum((v + 1) * 3**j for j, v in enumerate(o)): float(p) for o, p in law.items()}
    assert gof_pvalue(code_rows(out, 3, shift=1), probs) > ALPHA


def test_onebit_distribution():
    xrow = [0.0, 0.6, 1.0]
    out, _ = onebit(torch.tensor(xrow, dtype=torch.float64).repeat(N, 1), 3.0, seed=400)
    law = multibit_law(xrow, 3.0, 3, 0.0, 1.0, impl=True)
    probs = {sum((v + 1) * 3**j for j, v in enumerate(o)): float(p) for o, p in law.items()}
    assert gof_pvalue(code_rows(out, 3, shift=1), probs) > ALPHA


def test_label_rr_distribution_and_mask():
    c, eps = 4, 1.0
    y = torch.arange(N) % c
    mask = torch.arange(N) % 5 != 0
    out, _ = rr_labels(y, c, eps, seed=500, mask=mask)
    assert torch.equal(out[~mask], y[~mask])  # masked-out nodes untouched
    codes = (y[mask] * c + out[mask]).numpy()
    per_true = np.bincount(y[mask].numpy(), minlength=c) / mask.sum().item()
    probs = {t * c + r: per_true[t] * float(grr_col_impl(t, c, eps)[r]) for t in range(c) for r in range(c)}
    assert gof_pvalue(codes, probs) > ALPHA


# --- pure-torch references, written from the papers with torch's own RNG ----------------------
def torch_grr_fs(x, gam, eps_x, m, gen):
    """RGNN eq. (4), as the authors' perturb.GRRFS: sample m of d by top-k of uniforms, GRR
    (one_hot + multinomial) on sampled features, uniform values on the others."""
    n, d = x.shape
    idx = torch.rand(n, d, generator=gen).topk(m, dim=1).indices
    sel = torch.zeros(n, d, dtype=torch.bool).scatter(1, idx, True)
    out = torch.empty_like(x)
    for i in range(d):
        g = gam[i]
        e = math.exp(eps_x)
        p, q = e / (e + g - 1), 1 / (e + g - 1)
        oh = torch.nn.functional.one_hot(x[:, i], g).double()
        grr_ = torch.multinomial(oh * p + (1 - oh) * q, 1, generator=gen).squeeze(1)
        unif = torch.multinomial(torch.full((n, g), 1.0 / g), 1, generator=gen).squeeze(1)
        out[:, i] = torch.where(sel[:, i], grr_, unif)
    return out


def torch_multibit(x, eps, m, alpha, beta, gen):
    """LPGNN Algorithm 1, line by line (vectorised over nodes)."""
    n, d = x.shape
    S = torch.rand(n, d, generator=gen).topk(m, dim=1).indices            # line 1
    s = torch.zeros(n, d, dtype=torch.bool).scatter(1, S, True)           # line 3
    e = math.exp(eps / m)
    pr = 1 / (e + 1) + (x - alpha) / (beta - alpha) * (e - 1) / (e + 1)   # line 4
    t = torch.bernoulli(pr, generator=gen)
    return (s * (2 * t - 1)).to(torch.int8)                               # line 5


def torch_rr(y, c, eps, gen):
    """LPGNN eq. (11) / RGNN section IV-B."""
    e = math.exp(eps)
    oh = torch.nn.functional.one_hot(y, c).double()
    return torch.multinomial(oh * e / (e + c - 1) + (1 - oh) / (e + c - 1), 1, generator=gen).squeeze(1)


def test_kernels_agree_with_torch_references_in_distribution():
    gen = torch.Generator().manual_seed(2024)
    n = 60_000
    gam, xrow = [2, 3, 2], torch.tensor([1, 2, 0])
    a, _ = grr_fs(xrow.repeat(n, 1), torch.tensor(gam), 0.7, 2, seed=600)
    b = torch_grr_fs(xrow.repeat(n, 1), gam, 0.7, 2, gen)
    assert two_sample_pvalue(code_rows(a, 3), code_rows(b, 3)) > ALPHA
    xf = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    a, _ = multibit_encode(xf.repeat(n, 1), 3.0, 2, seed=601)
    b = torch_multibit(xf.repeat(n, 1), 3.0, 2, 0.0, 1.0, gen)
    assert two_sample_pvalue(code_rows(a, 3, 1), code_rows(b, 3, 1)) > ALPHA
    a, _ = onebit(xf.repeat(n, 1), 3.0, seed=602)
    b = torch_multibit(xf.repeat(n, 1), 3.0, 3, 0.0, 1.0, gen)
    assert two_sample_pvalue(code_rows(a, 3, 1), code_rows(b, 3, 1)) > ALPHA
    y = torch.arange(n) % 5
    a, _ = rr_labels(y, 5, 0.6, seed=603)
    b = torch_rr(y, 5, 0.6, gen)
    assert two_sample_pvalue((y * 5 + a).numpy(), (y * 5 + b).numpy()) > ALPHA
    xk = torch.tensor([[2, 0]]).repeat(n, 1)
    a, _ = grr(xk, torch.tensor([3, 4]), 1.3, seed=604)
    b = torch.stack([torch_rr(xk[:, 0], 3, 1.3, gen), torch_rr(xk[:, 1], 4, 1.3, gen)], 1)
    assert two_sample_pvalue(code_rows(a, 4), code_rows(b, 4)) > ALPHA


# --- bad input: clear errors, nothing modified ------------------------------------------------
def _bad_calls():
    # seeded, and y holds every class: y + 1 must reach 3 and y - 1 must reach -1 (an unseeded
    # y missed a class in about 3% of runs, and the label cases below then did not raise)
    g = torch.Generator().manual_seed(0)
    xi = torch.randint(0, 3, (10, 4), generator=g)
    xf = torch.rand(10, 4, generator=g)
    y = torch.arange(10) % 3
    nan = xf.clone()
    nan[3, 2] = float("nan")
    big = xi.clone()
    big[7, 1] = 3
    neg = xi.clone()
    neg[2, 0] = -1
    return xi, xf, y, [
        (lambda: grr_fs(xi, 3, 0.0, 2), ValueError, "eps_x"),
        (lambda: grr_fs(xi, 3, -1.0, 2), ValueError, "eps_x"),
        (lambda: grr_fs(xi, 3, float("nan"), 2), ValueError, "eps_x"),
        (lambda: grr_fs(xi, 3, float("inf"), 2), ValueError, "eps_x"),
        (lambda: grr_fs(xi, 3, 1.0, 0), ValueError, r"m: expected an int in \[1, 4\]"),
        (lambda: grr_fs(xi, 3, 1.0, 5), ValueError, r"m: expected an int in \[1, 4\]"),
        (lambda: grr_fs(xi, 3, 1.0, 2.0), TypeError, "m"),
        (lambda: grr_fs(big, 3, 1.0, 2), ValueError, r"value 3 at row 7, column 1 .*\[0, 3\)"),
        (lambda: grr_fs(neg, 3, 1.0, 2), ValueError, "value -1 at row 2, column 0"),
        (lambda: grr_fs(xi, torch.tensor([3, 3, 3]), 1.0, 2), ValueError, "domain"),
        (lambda: grr_fs(xi, 0, 1.0, 2), ValueError, "domain"),
        (lambda: grr_fs(xi, torch.tensor([3.0] * 4), 1.0, 2), TypeError, "domain"),
        (lambda: grr_fs(xf, 3, 1.0, 2), TypeError, "x: expected dtype"),
        (lambda: grr_fs(xi[0], 3, 1.0, 2), ValueError, "x: expected a 2-D"),
        (lambda: grr_fs(xi.numpy(), 3, 1.0, 2), TypeError, "x: expected a torch.Tensor"),
        (lambda: grr_fs(xi, 3, 1.0, 2, seed=-1), ValueError, "seed"),
        (lambda: grr_fs(xi, 3, 1.0, 2, accounting="paper"), ValueError, "accounting"),
        (lambda: grr_fs(xi, 3, 1.0, 2, backend="cuda"), ldpfast._backend.BackendUnavailable, "cuda"),
        (lambda: grr(xi, 3, 0, seed=1), ValueError, "eps"),
        (lambda: grr(big, 3, 1.0), ValueError, "outside the column's domain"),
        (lambda: multibit_encode(nan, 1.0), ValueError, r"NaN or outside \[alpha, beta\]"),
        (lambda: multibit_encode(xf * 2, 1.0), ValueError, r"outside \[alpha, beta\] = \[0.0, 1.0\]"),
        (lambda: multibit_encode(xf, 1.0, m=5), ValueError, "m: expected"),
        (lambda: multibit_encode(xf, 1.0, m=0), ValueError, "m: expected"),
        (lambda: multibit_encode(xf, float("nan")), ValueError, "eps"),
        (lambda: multibit_encode(xf, 1.0, alpha=1.0, beta=1.0), ValueError, "alpha < beta"),
        (lambda: multibit_encode(xi, 1.0), TypeError, "x: expected dtype"),
        (lambda: onebit(xf - 0.5, 1.0), ValueError, "outside"),
        (lambda: onebit(xf, -2.0), ValueError, "eps"),
        (lambda: multibit_rectify(torch.full((2, 3), 2), 1.0, 1), ValueError, r"\{-1, 0, 1\}"),
        (lambda: multibit_rectify(torch.zeros(2, 3), 1.0, 4), ValueError, "m: expected"),
        (lambda: rr_labels(y, 3, 0.0), ValueError, "eps"),
        (lambda: rr_labels(y + 1, 3, 1.0), ValueError, r"label 3 of node \d+ is outside \[0, num_classes\)"),
        (lambda: rr_labels(y - 1, 3, 1.0), ValueError, "label -1"),
        (lambda: rr_labels(y.float(), 3, 1.0), TypeError, "y: expected dtype"),
        (lambda: rr_labels(y, 0, 1.0), ValueError, "num_classes"),
        (lambda: rr_labels(y, 3, 1.0, mask=torch.ones(9, dtype=torch.bool)), ValueError, "mask"),
        (lambda: rr_labels(y, 3, 1.0, mask=torch.ones(10)), TypeError, "mask"),
    ]


def test_bad_input_raises_clear_errors_and_modifies_nothing():
    xi, xf, y, cases = _bad_calls()
    copies = [t.clone() for t in (xi, xf, y)]
    for call, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            call()
    for t, c in zip((xi, xf, y), copies):
        assert torch.equal(t, c)


def test_labels_outside_the_mask_are_not_validated_and_kept():
    y = torch.tensor([0, -1, 2, 7])
    out, _ = rr_labels(y, 3, 1.0, seed=1, mask=torch.tensor([True, False, True, False]))
    assert out[1] == -1 and out[3] == 7


def test_inputs_are_not_modified_by_successful_calls():
    x = torch.randint(0, 2, (50, 6))
    xf = torch.rand(50, 6)
    cx, cf = x.clone(), xf.clone()
    grr_fs(x, 2, 1.0, 3, seed=1)
    grr(x, 2, 1.0, seed=1)
    multibit_encode(xf, 1.0, seed=1)
    onebit(xf, 1.0, seed=1)
    assert torch.equal(x, cx) and torch.equal(xf, cf)


def test_non_contiguous_inputs():
    x = torch.randint(0, 2, (40, 12))[:, ::2]
    a, _ = grr_fs(x, 2, 1.0, 2, seed=3)
    b, _ = grr_fs(x.contiguous(), 2, 1.0, 2, seed=3)
    assert torch.equal(a, b)
