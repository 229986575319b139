"""Synthetic power-law graphs with planted classes (ldpfast.datasets.synthetic).

Backends and thread counts must give bit-identical graphs; the output must be a simple
undirected graph in sorted CSR; the edge probabilities, mean degree and homophily must match
the model.  Statistical tests use fixed seeds and state their false-alarm rate ALPHA (the
probability that a correct generator fails them).
"""
import importlib
import math

import numpy as np
import pytest
import torch
from scipy import stats

import ldpfast
from ldpfast.datasets import orkut_like, synthetic
from ldpfast.graph import csr_of

S = importlib.import_module("ldpfast.datasets.synthetic")
C = pytest.importorskip("ldpfast._C")
ALPHA = 1e-4


def _same(a, b):
    assert torch.equal(a.y, b.y)
    assert torch.equal(a.csr.rowptr, b.csr.rowptr)
    assert torch.equal(a.csr.col, b.csr.col)
    if a.x is None:
        assert b.x is None
    else:
        assert torch.equal(a.x, b.x)


def _check_simple_undirected(data):
    csr = data.csr
    n = data.num_nodes
    assert csr.rowptr.dtype == torch.int64 and csr.col.dtype == torch.int32
    assert csr.rowptr.numel() == n + 1 and int(csr.rowptr[0]) == 0
    assert int(csr.rowptr[-1]) == csr.col.numel()
    ei = csr.to_edge_index()
    row, col = ei
    assert int(col.min()) >= 0 and int(col.max()) < n
    assert not bool((row == col).any()), "self loop"
    key = row * n + col
    assert bool((key[1:] > key[:-1]).all()), "rows not sorted or duplicate entries"
    rev = torch.sort(col * n + row).values
    assert torch.equal(key, rev), "not symmetric"


def test_backends_identical():
    kw = {"num_classes": 3, "homophily": 0.7, "num_edges": 15_000, "seed": 11, "num_features": 12}
    for kind in ("binary", "continuous"):
        a = synthetic(3000, 10.0, feature_kind=kind, backend="cpp", **kw)
        b = synthetic(3000, 10.0, feature_kind=kind, backend="numba", **kw)
        _same(a, b)
        assert torch.equal(a.edge_index, b.edge_index)
    a = synthetic(4000, 6.0, degree_exponent=2.2, homophily=0.3, seed=3, backend="cpp")
    b = synthetic(4000, 6.0, degree_exponent=2.2, homophily=0.3, seed=3, backend="numba")
    _same(a, b)


@pytest.mark.parametrize("backend", ["cpp", "numba"])
def test_thread_count_does_not_change_output(threads, backend):
    kw = {"num_classes": 2, "homophily": 0.8, "num_edges": 40_000, "seed": 5, "num_features": 4,
              "backend": backend}
    threads(1)
    a = synthetic(8000, 10.0, **kw)
    threads(2)
    b = synthetic(8000, 10.0, **kw)
    _same(a, b)


def test_single_pass_equals_count_and_fill(threads):
    """The per-thread-region pass and its fallback (count + fill) give the same rows."""
    threads(2)
    plan = S._Plan(C, 7, 5000, 2, 0.8, 12.0, 2.5, 200.0, {})
    scale = plan.calibrate(C, 5000 * 12.0 / 2)
    work = plan.work(False)
    expect = np.zeros(5001, dtype=np.int64)
    np.cumsum(np.ceil(plan.erow).astype(np.int64), out=expect[1:])
    args = (7, 0, plan.W, plan.cls, plan.seg, plan.fmat, scale, work)
    rp = np.empty(5001, dtype=np.int64)
    col = np.empty(2 * int(expect[-1]), dtype=np.int32)
    total = C.synth_edge_sample(*args, expect, rp, col)
    assert total > 0
    assert C.synth_edge_sample(*args, expect, np.empty(5001, np.int64),
                               np.empty(10, np.int32)) == -1  # too small: caller falls back
    rp2 = np.zeros(5001, dtype=np.int64)
    C.synth_edge_count(*args, rp2[1:])
    np.cumsum(rp2, out=rp2)
    col2 = np.empty(int(rp2[-1]), dtype=np.int32)
    C.synth_edge_fill(*args, rp2, col2)
    assert np.array_equal(rp, rp2) and np.array_equal(col[:total], col2)
    for t in range(5000):  # upper triangle, ascending positions
        r = col2[rp2[t]:rp2[t + 1]]
        assert np.all(r > t) and np.all(np.diff(r) > 0)


def test_simple_undirected_graph_and_pyg_data():
    d = synthetic(5000, 8.0, num_classes=4, homophily=0.6, seed=1)
    _check_simple_undirected(d)
    assert csr_of(d) is d.csr and d["csr"] is d.csr
    assert d.edge_index.dtype == torch.int64
    assert torch.equal(d.edge_index, d.csr.to_edge_index())
    assert d.x is None and d.y.dtype == torch.int64 and d.num_nodes == 5000
    counts = torch.bincount(d.y, minlength=4)
    assert int(counts.max() - counts.min()) <= 1  # stratified, balanced classes
    lean = synthetic(5000, 8.0, num_classes=4, homophily=0.6, seed=1, edge_index=False)
    assert "edge_index" not in lean
    _same(d, lean)
    assert csr_of(lean) is lean.csr


def test_exact_edge_count():
    cases = [
        {"num_nodes": 5000, "avg_degree": 9.0, "num_edges": 20_000},
        {"num_nodes": 3000, "num_edges": 12_345, "num_classes": 3, "homophily": 1.0},
        {"num_nodes": 3000, "num_edges": 9_999, "num_classes": 2, "homophily": 0.0},
        {"num_nodes": 30, "num_edges": 400},     # near complete: every reachable pair sampled
        {"num_nodes": 30, "num_edges": 435},     # complete graph
        {"num_nodes": 2, "num_edges": 1},
    ]
    for i, kw in enumerate(cases):
        for backend in ("cpp", "numba"):
            d = synthetic(seed=i, backend=backend, **kw)
            assert d.csr.nnz == 2 * kw["num_edges"], (kw, backend)
            _check_simple_undirected(d)
    d = synthetic(3000, num_edges=12_345, num_classes=3, homophily=1.0, seed=0)
    assert bool((d.y[d.edge_index[0]] == d.y[d.edge_index[1]]).all())
    d = synthetic(3000, num_edges=9_999, num_classes=2, homophily=0.0, seed=0)
    assert not bool((d.y[d.edge_index[0]] == d.y[d.edge_index[1]]).any())


def test_seeds():
    a = synthetic(2000, 6.0, seed=1)
    b = synthetic(2000, 6.0, seed=1)
    c = synthetic(2000, 6.0, seed=2)
    _same(a, b)
    assert not torch.equal(a.csr.col[:100], c.csr.col[:100]) or not torch.equal(a.y, c.y)
    x = synthetic(2000, 6.0, seed=None)
    y = synthetic(2000, 6.0, seed=None)
    _check_simple_undirected(x)
    assert not (torch.equal(x.y, y.y) and torch.equal(x.csr.rowptr, y.csr.rowptr))


def test_mean_degree_and_homophily():
    n, d = 20_000, 10.0
    for h in (0.8, 0.5):
        g = synthetic(n, d, num_classes=2, homophily=h, seed=21)
        m = g.csr.nnz // 2
        # E[m] = n d / 2 exactly (alpha is calibrated); Var[m] <= E[m]: 5 sd, ALPHA > 1e-6
        assert abs(m - n * d / 2) <= 5 * math.sqrt(n * d / 2), m
        ei = g.edge_index
        intra = float((g.y[ei[0]] == g.y[ei[1]]).double().mean())
        assert abs(intra - h) <= 0.02, (h, intra)
    g3 = synthetic(n, d, num_classes=4, homophily=0.4, seed=2)
    ei = g3.edge_index
    assert abs(float((g3.y[ei[0]] == g3.y[ei[1]]).double().mean()) - 0.4) <= 0.02


def test_degrees_heavy_tailed():
    g = synthetic(20_000, 10.0, degree_exponent=2.3, seed=4)
    deg = g.csr.degrees().double()
    assert deg.max() > 15 * deg.mean()
    # power-law tail: many more high-degree nodes than a Poisson(10) graph (P[deg >= 40] ~ 1e-12)
    assert int((deg >= 40).sum()) > 100
    # the target weights follow the discrete power law with the requested maximum
    w, i0 = S._power_law_weights(20_000, 10.0, 2.3, 300.0)
    assert abs(w.mean() - 10.0) < 1e-9 and abs(w[0] - 300.0) < 1e-6 and np.all(np.diff(w) <= 0)
    beta = 1 / 1.3
    ref = (np.arange(20_000) + i0) ** -beta
    assert np.allclose(w, ref * 10.0 / ref.mean(), rtol=1e-12)


@pytest.mark.parametrize(
    ("n", "seeds", "kw"),
    [
        (60, 200, {"num_classes": 2, "homophily": 0.8, "degree_exponent": 2.3, "max_degree": 40.0}),
        (400, 30, {"num_classes": 3, "homophily": 0.6, "degree_exponent": 2.5, "max_degree": 150.0}),
    ],
)
def test_edge_probabilities_match_model(n, seeds, kw):
    """Pooled over seeds, pair {u, v} is an edge with probability min(1, scale w_u w_v f)."""
    d = 8.0
    iu = np.triu_indices(n, 1)
    probs, hits = [], []
    for s in range(seeds):
        w, y, f, scale = S._edge_model(n, d, seed=s, **kw)
        P = np.minimum(1.0, scale * np.outer(w, w) * f[y][:, y])
        g = synthetic(n, d, seed=s, edge_index=False, **kw)
        A = np.zeros((n, n), dtype=bool)
        ei = g.csr.to_edge_index().numpy()
        A[ei[0], ei[1]] = True
        probs.append(P[iu])
        hits.append(A[iu])
    p = np.concatenate(probs)
    a = np.concatenate(hits)
    assert np.all(a[p >= 1.0]), "a pair with probability 1 is missing"
    assert abs(a.sum() - p.sum()) < 5 * math.sqrt((p * (1 - p)).sum())
    # chi-square over 20 probability bins (normal approximation per bin)
    m = p < 1.0
    p, a = p[m], a[m]
    edges = np.quantile(p, np.linspace(0, 1, 21))
    b = np.clip(np.searchsorted(edges, p, side="right") - 1, 0, 19)
    obs = np.bincount(b, weights=a, minlength=20)
    exp = np.bincount(b, weights=p, minlength=20)
    var = np.bincount(b, weights=p * (1 - p), minlength=20)
    chi2 = float(((obs - exp) ** 2 / var).sum())
    assert chi2 < stats.chi2.ppf(1 - ALPHA, 20), chi2


def test_features():
    g = synthetic(4000, 6.0, num_features=32, feature_kind="binary", feature_signal=1.0, seed=8)
    x = g.x
    assert x.shape == (4000, 32) and x.dtype == torch.float32
    assert set(torch.unique(x).tolist()) <= {0.0, 1.0}
    m0, m1 = x[g.y == 0].mean(0), x[g.y == 1].mean(0)
    assert float((m0 - m1).abs().max()) > 0.2  # class-correlated
    u8 = synthetic(4000, 6.0, num_features=32, feature_signal=1.0, seed=8,
                   feature_dtype=torch.uint8)
    assert u8.x.dtype == torch.uint8 and torch.equal(u8.x.float(), x)
    flat = synthetic(4000, 6.0, num_features=32, feature_signal=0.0, seed=8)
    assert abs(float(flat.x.mean()) - 0.5) < 0.01
    c = synthetic(4000, 6.0, num_features=16, feature_kind="continuous", seed=8)
    assert float(c.x.min()) >= 0.0 and float(c.x.max()) <= 1.0
    assert c.x.dtype == torch.float32 and torch.unique(c.x).numel() > 1000


@pytest.mark.parametrize(
    "kw, exc, word",
    [
        ({"num_nodes": 1, "avg_degree": 0.5}, ValueError, "num_nodes"),
        ({"num_nodes": 2**31, "avg_degree": 2.0}, ValueError, "num_nodes"),
        ({"num_nodes": 10.0, "avg_degree": 2.0}, TypeError, "num_nodes"),
        ({"num_nodes": True, "avg_degree": 0.5}, TypeError, "num_nodes"),
        ({"num_nodes": 100, "avg_degree": 0.0}, ValueError, "avg_degree"),
        ({"num_nodes": 100, "avg_degree": 99.0}, ValueError, "avg_degree"),
        ({"num_nodes": 100, "avg_degree": float("nan")}, ValueError, "avg_degree"),
        ({"num_nodes": 100}, ValueError, "avg_degree"),
        ({"num_nodes": 100, "avg_degree": 4.0, "homophily": 1.5}, ValueError, "homophily"),
        ({"num_nodes": 100, "avg_degree": 4.0, "homophily": float("nan")}, ValueError, "homophily"),
        ({"num_nodes": 100, "avg_degree": 4.0, "degree_exponent": 2.0}, ValueError, "degree_exponent"),
        ({"num_nodes": 100, "avg_degree": 4.0, "degree_exponent": float("inf")}, ValueError,
         "degree_exponent"),
        ({"num_nodes": 100, "avg_degree": 4.0, "num_classes": 0}, ValueError, "num_classes"),
        ({"num_nodes": 100, "avg_degree": 4.0, "num_classes": 101}, ValueError, "num_classes"),
        ({"num_nodes": 100, "avg_degree": 4.0, "max_degree": 3.0}, ValueError, "max_degree"),
        ({"num_nodes": 100, "avg_degree": 4.0, "max_degree": 100.0}, ValueError, "max_degree"),
        ({"num_nodes": 100, "avg_degree": 4.0, "num_features": -1}, ValueError, "num_features"),
        ({"num_nodes": 100, "avg_degree": 4.0, "feature_kind": "gauss"}, ValueError, "feature_kind"),
        ({"num_nodes": 100, "avg_degree": 4.0, "feature_signal": 2.0}, ValueError, "feature_signal"),
        ({"num_nodes": 100, "avg_degree": 4.0, "feature_kind": "continuous",
              "feature_dtype": torch.uint8}, ValueError, "feature_dtype"),
        ({"num_nodes": 100, "avg_degree": 4.0, "feature_dtype": torch.int64}, TypeError,
         "feature_dtype"),
        ({"num_nodes": 100, "num_edges": 0}, ValueError, "num_edges"),
        ({"num_nodes": 100, "num_edges": 4951}, ValueError, "num_edges"),
        ({"num_nodes": 100, "num_edges": 2000, "num_classes": 50, "homophily": 1.0}, ValueError,
         "num_edges"),
        ({"num_nodes": 100, "avg_degree": 4.0, "num_classes": 100, "homophily": 1.0}, ValueError,
         "avg_degree"),
        ({"num_nodes": 100, "avg_degree": 4.0, "edge_index": 1}, TypeError, "edge_index"),
        ({"num_nodes": 100, "avg_degree": 4.0, "seed": -1}, ValueError, "seed"),
        ({"num_nodes": 100, "avg_degree": 4.0, "seed": "x"}, TypeError, "seed"),
        ({"num_nodes": 100, "avg_degree": 4.0, "backend": "gpu"}, ValueError, "backend"),
    ],
)
def test_bad_inputs(kw, exc, word):
    with pytest.raises(exc, match=word):
        synthetic(**kw)


def test_kernels_reject_bad_plans():
    W = np.array([3.0, 2.0, 2.5, 1.0])  # increases inside class 0
    cls = np.zeros(4, dtype=np.int32)
    seg = np.array([0, 4], dtype=np.int64)
    f = np.ones(1)
    for k in (C, importlib.import_module("ldpfast._numba.kernels")):
        with pytest.raises(ValueError, match="W"):
            k.synth_edge_count(0, 0, W, cls, seg, f, 0.1, np.arange(5, dtype=np.int64),
                               np.empty(4, dtype=np.int64))
        with pytest.raises(ValueError, match="ids"):
            k.synth_symmetrize(np.zeros(3, np.int64), np.zeros(2, np.int64),
                               np.zeros(0, np.int32), np.array([0, 5], np.int32),
                               np.empty(3, np.int64), np.empty(0, np.int32))


@pytest.mark.slow
def test_orkut_like_exact_size():
    g = orkut_like(seed=0)
    assert g.num_nodes == 3_072_441 and g.csr.nnz == 2 * 117_185_083
    assert "edge_index" not in g
    deg = g.csr.degrees()
    assert int(deg.max()) > 20_000
    assert ldpfast.graph.csr_of(g) is g.csr


@pytest.mark.parametrize("drop", [0, 1, 777, 5000])
def test_priority_sort_trim_equals_histogram_trim(drop):
    """The CUDA path's trim (stable sort of synth_priorities, the `drop` first go) and its
    sorted-key CSR give the C++ synth_trim + synth_symmetrize result (run here on CPU tensors)."""
    plan = S._Plan(C, 9, 6000, 3, 0.7, 9.0, 2.5, 300.0, {})
    scale = plan.calibrate(C, 6000 * 9.0 / 2)
    rp, col = plan.sample(C, 9, 0, scale, False)
    total = int(rp[-1])
    ucnt = np.empty(6000, dtype=np.int64)
    ucol = col.copy()
    C.synth_trim(9, rp, ucol, drop, ucnt)
    want_rp = np.empty(6001, dtype=np.int64)
    want_col = np.empty(2 * (total - drop), dtype=np.int32)
    C.synth_symmetrize(rp, ucnt, ucol, plan.ids, want_rp, want_col)

    class K:  # the C++ twin of the CUDA launcher
        @staticmethod
        def synth_priorities(uptr, tot, seed):
            out = np.empty(tot, dtype=np.int64)
            C.synth_priorities(seed, uptr.numpy(), out)
            return torch.from_numpy(out)

    got_rp, got_col = S._device_csr(K, 9, 6000, torch.from_numpy(rp), torch.from_numpy(col), drop,
                                    torch.from_numpy(plan.ids.astype(np.int64)))
    assert got_col.dtype == torch.int32 and got_rp.dtype == torch.int64
    assert np.array_equal(got_rp.numpy(), want_rp) and np.array_equal(got_col.numpy(), want_col)


def test_priorities_are_the_trim_words():
    rp = np.array([0, 3, 3, 9], dtype=np.int64)
    out = np.empty(9, dtype=np.int64)
    C.synth_priorities(2**64 - 1, rp, out)
    from ldpfast.rng import CellRng, Stream

    want = []
    for s in range(3):  # row s's k-th edge gets the k-th word of its trim cell
        g = CellRng(2**64 - 1, Stream.SYNTH_TRIM, s, 0)
        want += [g.next_u32() for _ in range(rp[s + 1] - rp[s])]
    assert out.tolist() == want


def test_weight_tables_match_the_kernels():
    from ldpfast._numba.synthetic import _wtables

    W = np.sort(np.random.default_rng(1).random(1000))[::-1].copy()
    for a, b in zip(S._weight_tables(W), _wtables(W)):
        assert a.tobytes() == b.tobytes()
    assert S._weight_tables(W)[0].shape == (16,)


def test_priority_sort_trim_breaks_ties_like_the_histogram_trim():
    """A drop that splits two equal priorities: both trims remove the earlier edge."""
    n, seed = 60000, 4
    plan = S._Plan(C, seed, n, 2, 0.8, 8.0, 2.5, 600.0, {})
    scale = plan.calibrate(C, n * 8.0 / 2)
    rp, col = plan.sample(C, seed, 0, scale, False)
    total = int(rp[-1])
    prio = np.empty(total, dtype=np.int64)
    C.synth_priorities(seed, rp, prio)
    vals, counts = np.unique(prio, return_counts=True)
    assert np.any(counts > 1), "no tied priorities: pick another seed"
    p = vals[counts > 1][0]
    drop = int(np.sum(prio < p)) + 1  # exactly one of the tied edges goes
    ucnt = np.empty(n, dtype=np.int64)
    ucol = col.copy()
    C.synth_trim(seed, rp, ucol, drop, ucnt)
    kept = np.concatenate([ucol[rp[s]:rp[s] + ucnt[s]] for s in range(n)])

    class K:
        @staticmethod
        def synth_priorities(uptr, tot, sd):
            return torch.from_numpy(prio)

    first = int(np.flatnonzero(prio == p)[0])
    got_rp, got_col = S._device_csr(K, seed, n, torch.from_numpy(rp), torch.from_numpy(col), drop,
                                    torch.from_numpy(plan.ids.astype(np.int64)))
    want_rp = np.empty(n + 1, dtype=np.int64)
    want_col = np.empty(2 * (total - drop), dtype=np.int32)
    C.synth_symmetrize(rp, ucnt, ucol, plan.ids, want_rp, want_col)
    assert kept.size == total - drop
    assert np.array_equal(got_rp.numpy(), want_rp) and np.array_equal(got_col.numpy(), want_col)
    # and the tie went to the earlier edge (a later-first rule would keep `first`)
    row = int(np.searchsorted(rp, first, side="right") - 1)
    j = first - rp[row]
    assert col[rp[row] + j] not in ucol[rp[row]:rp[row] + ucnt[row]]
