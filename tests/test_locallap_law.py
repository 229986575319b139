"""LocalLap's sparse sampler against the dense algorithm it stands for, in law.

The reference enumerates all n(n-1)/2 upper entries of a tiny graph, adds exact discrete
Laplace noise on the same grid (the library's exact sampler on the test stream, other cells),
draws T from exact degree noise as the mechanism does, and keeps the T largest values (ties
uniformly at random).  The sparse mechanism, with its threshold forced high (``_target``) and
its split forced at several points (``_split_target``), so that the fast true-entry path, the
split, the drawn values of the picks above the split (``_resolve_high``) and the later rounds
all occur, must give the same law of the kept set: per-pair keep counts and the number of kept
true edges, each compared by a chi-square contingency test at ALPHA (the per-pair one is
conservative: the T keeps of one run are drawn without replacement).  Each mutant (a biased zero-pick
probability, true entries' values one quarter unit too high, the picks above the split kept
without drawing their values when they matter) must be rejected by the same test.
"""
from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy import stats

import ldpfast
from ldpfast.graph import to_csr
from ldpfast.mechanisms import edges as E
from ldpfast.mechanisms.edges import laplace as L
from ldpfast.rng import Stream

ALPHA = 1e-4
N_NODES = 10
EPS = 3.0
RUNS = 4000
# (round-0 target, split target): forced high thresholds (fast true-entry path, later rounds),
# splits with and without drawn values above them, and no split
CONFIGS = ((2.0, None), (3.0, 1.0), (4.0, 4.0), (16.0, 12.0), (14.0, 10.0), (16.0, 16.0), (12.0, 8.0))

pytestmark = pytest.mark.skipif(ldpfast.available_backends().get("cpp", "missing") is not None,
                                reason="needs the cpp backend")


def _graph():
    ei = torch.tensor([[0, 1, 1, 2, 3, 4, 5, 6, 7, 0, 2, 8], [1, 2, 3, 3, 4, 5, 6, 7, 8, 9, 9, 9]])
    return to_csr(torch.cat([ei, ei.flip(0)], 1), N_NODES)


def _pairs(n):
    iu = np.triu_indices(n, 1)
    index = -np.ones((n, n), dtype=np.int64)
    index[iu] = np.arange(iu[0].size)
    return iu, index


def _kept_upper(res, index):
    rp, col = res.noisy.rowptr.numpy(), res.noisy.col.numpy().astype(np.int64)
    row = np.repeat(np.arange(rp.size - 1), np.diff(rp))
    up = col > row
    return index[row[up], col[up]]


def _upper_adj(csr):
    n, rp = csr.num_nodes, csr.rowptr
    adj = torch.zeros(n, n, dtype=torch.int64)
    adj[torch.repeat_interleave(torch.arange(n), rp[1:] - rp[:-1]), csr.col.long()] = 1
    return adj.numpy()[_pairs(n)[0]]


def _reference(csr, params, runs, seed):
    """Keep counts per pair and kept-true counts per run of the dense algorithm."""
    k = ldpfast._backend.get("cpu", "cpp")
    n = csr.num_nodes
    _, t1, s1, _ = E._grid("eps1", params["eps1"])
    g2, t2, s2, _ = E._grid("eps2", params["eps2"])
    G1, G2 = round(1.0 / params["granularity_degree"]), round(1.0 / g2)
    a_up = _upper_adj(csr)
    dn = np.empty((runs, n), dtype=np.int64)
    k.fill_discrete_laplace(dn, seed, int(Stream.TEST), 0, t1, s1)
    vn = np.empty((runs, a_up.size), dtype=np.int64)
    k.fill_discrete_laplace(vn, seed, int(Stream.TEST), 2**30, t2, s2)
    keys = np.random.default_rng(seed).random((runs, a_up.size))
    N, total = a_up.size, int(csr.nnz) * G1
    counts, true_kept = np.zeros(a_up.size, dtype=np.int64), []
    for r in range(runs):
        T = min(max((total + int(dn[r].sum())) // (2 * G1), 0), N)
        vals = a_up * G2 + vn[r]
        top = np.lexsort((keys[r], -vals))[:T]
        counts[top] += 1
        true_kept.append(int(a_up[top].sum()))
    return counts, np.array(true_kept)


def _ours(csr, runs, seed0):
    _, index = _pairs(csr.num_nodes)
    a_up = _upper_adj(csr)
    counts, true_kept = np.zeros(index.max() + 1, dtype=np.int64), []
    for r in range(runs):
        target, split_target = CONFIGS[r % len(CONFIGS)]
        res = E.local_laplace(csr, EPS, seed=seed0 + r, backend="cpp", _target=target, _split_target=split_target)
        kept = _kept_upper(res, index)
        assert kept.size == res.spent.params["T"]
        counts[kept] += 1
        true_kept.append(int(a_up[kept].sum()))
    return counts, np.array(true_kept)


def _pvalues(ours, ref):
    (c1, k1), (c2, k2) = ours, ref
    p_pairs = stats.chi2_contingency(np.stack([c1, c2]))[1]
    hi = max(k1.max(), k2.max()) + 1
    h1, h2 = np.bincount(k1, minlength=hi), np.bincount(k2, minlength=hi)
    keep = (h1 + h2) >= 10  # merge sparse categories so the chi-square is valid
    h1, h2 = np.append(h1[keep], h1[~keep].sum()), np.append(h2[keep], h2[~keep].sum())
    if h1[-1] + h2[-1] == 0:
        h1, h2 = h1[:-1], h2[:-1]
    p_true = stats.chi2_contingency(np.stack([h1, h2]))[1]
    return p_pairs, p_true


@pytest.fixture(scope="module")
def reference():
    csr = _graph()
    params = E.local_laplace(csr, EPS, seed=1).spent.params
    return csr, _reference(csr, params, 4 * RUNS, 77)  # (unequal totals: a contingency test)


def _run(csr, seed0):
    return _ours(csr, RUNS, seed0)


def test_sparse_sampler_has_the_dense_law(reference):
    csr, ref = reference
    ours = _run(csr, 10_000)
    p_pairs, p_true = _pvalues(ours, ref)
    assert p_pairs > ALPHA and p_true > ALPHA, (p_pairs, p_true)


def _wrap(monkeypatch, name, fn):
    C = ldpfast._backend.get("cpu", "cpp")
    real = getattr(C, name)
    monkeypatch.setattr(C, name, lambda *a: fn(real, *a))


@pytest.mark.parametrize("mutant", ["zero_pick_biased", "true_value_high", "high_not_resolved"])
def test_the_law_test_catches_mutants(reference, monkeypatch, mutant):
    csr, ref = reference
    if mutant == "zero_pick_biased":  # zero entries picked with 1.5 x P[L >= tau]
        _wrap(monkeypatch, "locallap_zero_sample",
              lambda real, erp, ecol, seed, rnd, pi, *rest: real(erp, ecol, seed, rnd, min(1.0, 1.5 * pi), *rest))
    elif mutant == "true_value_high":  # true entries valued G + 256 + L (a quarter unit high)
        _wrap(monkeypatch, "locallap_edge_values",
              lambda real, rp, col, seed, t, s, one, rnd, lo, hi, p, out: real(
                  rp, col, seed, t, s, one + 256, rnd, lo, hi, L._tail(s / t, lo - one - 256), out))
    else:  # picks above the split always ranked first, values never drawn
        monkeypatch.setattr(L, "_resolve_high", lambda *a: None)
    ours = _run(csr, 20_000)
    p_pairs, p_true = _pvalues(ours, ref)
    assert min(p_pairs, p_true) < ALPHA, (mutant, p_pairs, p_true)
