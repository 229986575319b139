"""HeterPoisson (paper 003): sampler kernel, per-sub-graph clipping, DP-SGD, pipeline, audit.

Statistical tests run at fixed seeds, so they are deterministic; each states its
false-alarm rate: the probability that a *correct* sampler fails it for a random seed.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch_geometric.data import Data

from ldpfast import _backend
from ldpfast.graph import clean_edge_index
from ldpfast.rng import MASK32, Stream, philox4x32_10
from ldpfast.sampling import HeterPoisson, inference_subgraphs

ALPHA = 1e-3  # false-alarm rate of every chi-square test below

BACKENDS = [b for b in ("cpp", "numba") if _backend.available()[b] is None]


# --------------------------------------------------------------------------- helpers
def cell_uniform(seed: int, stream: int, rows, col: int) -> np.ndarray:
    """First ``uniform()`` of CellRng(seed, stream, row, col) for many rows (NumPy Philox)."""
    rows = np.asarray(rows, dtype=np.uint64).reshape(-1)
    ctr = np.zeros((rows.size, 4), dtype=np.uint64)
    ctr[:, 1] = col
    ctr[:, 2] = rows & np.uint64(MASK32)
    ctr[:, 3] = ((rows >> np.uint64(32)) & np.uint64(0xFFFF)) | np.uint64((int(stream) << 16) & MASK32)
    key = np.tile(np.array([seed & MASK32, seed >> 32], dtype=np.uint64), (rows.size, 1))
    w = philox4x32_10(ctr.astype(np.uint32), key.astype(np.uint32)).astype(np.uint64)
    u64 = (w[:, 0] << np.uint64(32)) | w[:, 1]
    return ((u64 >> np.uint64(11)).astype(np.float64) + 0.5) / 9007199254740992.0


def random_graph(n=120, m=900, seed=0, directed=False):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, m), generator=g)
    if directed:
        ei = ei[:, ei[0] != ei[1]]
        ei = torch.unique(ei, dim=1)
    else:
        ei = clean_edge_index(ei, n)
    x = torch.randn(n, 6, generator=g)
    y = torch.randint(0, 3, (n,), generator=g)
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


def reference_sample(data, q_b, M, seed, step, cand, allow=None, overlap="drop", induced=True):
    """Algorithms 2 + 3 line by line, Python loops, same counter-based trials as the kernel."""
    n = int(data.num_nodes)
    ei = data.edge_index
    nb = [[] for _ in range(n)]  # NB(i) = {j : j -> i}, sorted
    for s, d in sorted(set(zip(ei[0].tolist(), ei[1].tolist()))):
        if s != d:
            nb[d].append(s)
    for row in nb:
        row.sort()
    rowptr = np.zeros(n + 1, dtype=np.int64)
    rowptr[1:] = np.cumsum([len(r) for r in nb])
    out_deg = np.zeros(n, dtype=np.int64)
    for row in nb:
        for j in row:
            out_deg[j] += 1
    edges = {(s, d) for d in range(n) for s in nb[d]}
    cand = sorted(int(v) for v in cand)
    # Alg. 2 lines 3-6: independent central trials.  The kernels draw an exact Bernoulli; its
    # answer equals uniform() < q except on a tie of the 53 bits (probability 2^-53).
    u = cell_uniform(seed, Stream.HETER_CENTRAL, cand, step)
    central = [v for v, uv in zip(cand, u) if uv < q_b]
    delta = set(central)  # line 15
    subgraphs = []
    for v in central:
        # Alg. 3: neighbour j kept with probability M / D_ot(j), trial addressed by CSR position
        members, zeroed = [v], [False]
        for pos, j in enumerate(nb[v]):
            e = rowptr[v] + pos
            if j == v or (allow is not None and not allow[j]):
                continue
            if not cell_uniform(seed, Stream.HETER_PERIPHERAL, [e], step)[0] < M / float(out_deg[j]):
                continue
            if j in delta:  # lines 16-23
                if overlap == "drop":
                    continue
                zeroed.append(True)
            else:
                zeroed.append(False)
            members.append(j)
        subgraphs.append((members, zeroed))
    n_id, ptr, z, src, dst = [], [0], [], [], []
    for members, zeroed in subgraphs:
        base = len(n_id)
        for lt, t in enumerate(members):  # induced sub-graph (line 10), targets in local order
            for ls, s in enumerate(members):
                if s == t or (s, t) not in edges:
                    continue
                if not induced and ls != 0 and lt != 0:
                    continue
                src.append(base + ls)
                dst.append(base + lt)
        n_id += members
        z += zeroed
        ptr.append(len(n_id))
    return (torch.tensor(n_id, dtype=torch.int64), torch.tensor(ptr, dtype=torch.int64),
            torch.tensor(z, dtype=torch.bool), torch.tensor([src, dst], dtype=torch.int64).reshape(2, -1))


def same_batch(a, b):
    assert torch.equal(a.n_id, b.n_id)
    assert torch.equal(a.ptr, b.ptr)
    assert torch.equal(a.zeroed, b.zeroed)
    assert torch.equal(a.edge_index, b.edge_index)
    if a.x is not None:
        assert torch.equal(a.x, b.x)


# --------------------------------------------------------------------------- sampler: exactness
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("directed", [False, True])
@pytest.mark.parametrize("overlap,induced", [("drop", True), ("zero", True), ("zero", False)])
def test_sampler_equals_line_by_line_reference(backend, directed, overlap, induced):
    data = random_graph(n=90, m=700, seed=3, directed=directed)
    n = data.num_nodes
    cand = torch.arange(0, n, 3)
    allow = torch.ones(n, dtype=torch.bool)
    allow[5::7] = False
    s = HeterPoisson(data, 0.3, 2.0, seed=0xABCDEF12345, train_nodes=cand, peripheral_nodes=allow,
                     overlap=overlap, induced=induced, backend=backend)
    for step in (0, 1, 7):
        b = s.sample(step)
        n_id, ptr, z, ei = reference_sample(data, 0.3, 2.0, 0xABCDEF12345, step, cand.tolist(),
                                            allow.tolist(), overlap, induced)
        assert torch.equal(b.n_id, n_id)
        assert torch.equal(b.ptr, ptr)
        assert torch.equal(b.zeroed, z)
        assert torch.equal(b.edge_index, ei)
        assert torch.equal(b.y, data.y[b.central_nodes])
        assert torch.equal(b.batch, torch.repeat_interleave(torch.arange(b.num_subgraphs), b.sizes()))


def test_cpp_equals_numba():
    if len(BACKENDS) < 2:
        pytest.skip("needs both the C++ and the Numba backend")
    data = random_graph(n=400, m=6000, seed=5)
    for overlap in ("drop", "zero"):
        for induced in (True, False):
            a = HeterPoisson(data, 0.2, 3.0, seed=11, overlap=overlap, induced=induced, backend="cpp")
            b = HeterPoisson(data, 0.2, 3.0, seed=11, overlap=overlap, induced=induced, backend="numba")
            for t in range(3):
                same_batch(a.sample(t), b.sample(t))
    allow = torch.arange(400) % 2 == 1
    for step in (0, 4):
        a = inference_subgraphs(data, ~allow, 4, peripheral_nodes=allow, seed=9, step=step, backend="cpp")
        b = inference_subgraphs(data, ~allow, 4, peripheral_nodes=allow, seed=9, step=step, backend="numba")
        same_batch(a, b)


def test_thread_count_does_not_change_output():
    if "cpp" not in BACKENDS:
        pytest.skip("C++ backend not built")
    import ldpfast._C as C

    # large enough that every kernel takes its parallel path (work >= 2**17 units)
    n = 150_000
    g = torch.Generator().manual_seed(8)
    data = Data(edge_index=clean_edge_index(torch.randint(0, n, (2, 1_500_000), generator=g), n), num_nodes=n)
    allow = torch.arange(n) % 3 != 0
    outs = []
    try:
        for nt in (1, 2):
            C.set_num_threads(nt)
            s = HeterPoisson(data, 0.3, 4.0, seed=21, overlap="zero", backend="cpp")
            outs.append(([s.sample(t) for t in range(2)],
                         inference_subgraphs(data, ~allow, 5, peripheral_nodes=allow, seed=2, backend="cpp")))
    finally:
        C.set_num_threads(0)
    for a, b in zip(outs[0][0], outs[1][0]):
        same_batch(a, b)
    same_batch(outs[0][1], outs[1][1])


def test_same_seed_same_batch_other_seed_other_batch():
    data = random_graph(n=200, m=2000, seed=1)
    a = HeterPoisson(data, 0.2, 2.0, seed=5).sample(3)
    b = HeterPoisson(data, 0.2, 2.0, seed=5).sample(3)
    c = HeterPoisson(data, 0.2, 2.0, seed=6).sample(3)
    same_batch(a, b)
    assert not torch.equal(a.n_id, c.n_id)


# --------------------------------------------------------------------------- sampler: statistics
def _chi2_sf(obs, exp, var):
    stat = float(np.sum((obs - exp) ** 2 / var))
    return stats.chi2.sf(stat, df=len(obs))


def test_central_probability_is_q_b():
    """Per-node central counts over T steps ~ Bin(T, q_b) independently: sum of squared
    standardised residuals ~ chi2(#nodes).  False-alarm rate ALPHA = 1e-3."""
    data = random_graph(n=2000, m=10000, seed=2)
    q, T = 0.15, 200
    s = HeterPoisson(data, q, 1.0, seed=12345)
    counts = np.zeros(2000)
    for t in range(T):
        counts[s.central(t).numpy()] += 1
    p = _chi2_sf(counts, T * q, np.full(2000, T * q * (1 - q)))
    assert p > ALPHA, p
    assert abs(counts.sum() / (2000 * T) - q) < 4 * math.sqrt(q * (1 - q) / (2000 * T))


@pytest.mark.parametrize("overlap", ["zero", "drop"])
def test_peripheral_probability_is_M_over_out_degree(overlap):
    """Given a central node v, each neighbour j joins with probability min(1, M / D_ot(j))
    (zero mode), times (1 - q_b) if j is a candidate (drop mode: central nodes never appear
    as peripheral nodes).  Trials grouped by D_ot(j) into bins; chi2 with one degree of
    freedom per bin.  False-alarm rate ALPHA = 1e-3."""
    data = random_graph(n=600, m=9000, seed=4)
    n = 600
    q, M, T = 0.25, 3.0, 120
    cand = torch.arange(n) % 2 == 0
    s = HeterPoisson(data, q, M, seed=777, train_nodes=cand, overlap=overlap)
    deg = s.out_degree.numpy()
    rowptr, col = s.csr.rowptr.numpy(), s.csr.col.numpy().astype(np.int64)
    bins = np.array([0, 3, 6, 10, 14, 18, 24, 32, 1 << 30])
    nbin = len(bins) - 1
    trials, hits, var_sum, exp_sum = (np.zeros((nbin, 2)) for _ in range(4))
    for t in range(T):
        b = s.sample(t, with_x=False)
        ptr = b.ptr.numpy()
        n_id = b.n_id.numpy()
        for i in range(b.num_subgraphs):
            v = n_id[ptr[i]]
            members = set(n_id[ptr[i] + 1:ptr[i + 1]].tolist())
            nbrs = col[rowptr[v]:rowptr[v + 1]]
            p = np.minimum(1.0, M / deg[nbrs])
            c = cand.numpy()[nbrs].astype(int)
            if overlap == "drop":
                p = p * np.where(c == 1, 1 - q, 1.0)
            got = np.array([j in members for j in nbrs.tolist()], dtype=float)
            k = np.searchsorted(bins, deg[nbrs], side="right") - 1
            np.add.at(trials, (k, c), 1)
            np.add.at(hits, (k, c), got)
            np.add.at(exp_sum, (k, c), p)
            np.add.at(var_sum, (k, c), p * (1 - p))
    ok = var_sum > 0
    pval = _chi2_sf(hits[ok], exp_sum[ok], var_sum[ok])
    assert pval > ALPHA, pval
    # deterministic cells (p == 1) must be exact
    assert np.allclose(hits[~ok], exp_sum[~ok])


def test_peripheral_count_matches_theorem2_binomial():
    """The number of sub-graphs in which a non-central node z appears as a peripheral node is
    Bin(D_ot(z), q_b M / D_ot(z)) (Theorem 2 / Appendix B.1, undirected graph, every node a
    candidate, zero mode).  Pooled histogram of k vs the mixture of these binomials, chi2
    over k = 0..3+ (cells with expectation >= 5).  False-alarm rate ALPHA = 1e-3."""
    data = random_graph(n=1500, m=12000, seed=6)
    q, M, T = 0.2, 2.0, 60
    s = HeterPoisson(data, q, M, seed=99, overlap="zero")
    deg = s.out_degree.numpy()
    kmax = 4
    obs = np.zeros(kmax + 1)
    expected = np.zeros(kmax + 1)
    for t in range(T):
        b = s.sample(t, with_x=False)
        cen = np.zeros(1500, dtype=bool)
        cen[b.central_nodes.numpy()] = True
        periph = np.ones(b.num_nodes, dtype=bool)
        periph[b.center.numpy()] = False
        k = np.bincount(b.n_id.numpy()[periph], minlength=1500)
        z = ~cen & (deg > 0)
        obs += np.bincount(np.minimum(k[z], kmax), minlength=kmax + 1)
        d = deg[z]
        pz = q * np.minimum(1.0, M / d)
        for kk in range(kmax):
            expected[kk] += stats.binom.pmf(kk, d, pz).sum()
        expected[kmax] += stats.binom.sf(kmax - 1, d, pz).sum()
    keep = expected >= 5
    stat = float(np.sum((obs[keep] - expected[keep]) ** 2 / expected[keep]))
    pval = stats.chi2.sf(stat, df=int(keep.sum()) - 1)
    assert pval > ALPHA, (pval, obs, expected)


@pytest.mark.parametrize("overlap", ["zero", "drop"])
def test_no_central_node_keeps_its_features_as_peripheral(overlap):
    """Alg. 2 lines 14-23, checked exactly on every sub-graph of 30 steps."""
    data = random_graph(n=300, m=6000, seed=7)
    data.x = data.x.abs() + 1.0  # no all-zero feature row in the data
    s = HeterPoisson(data, 0.4, 4.0, seed=3, overlap=overlap)
    seen = 0
    for t in range(30):
        b = s.sample(t)
        cen = set(b.central_nodes.tolist())
        periph = torch.ones(b.num_nodes, dtype=torch.bool)
        periph[b.center] = False
        is_cen = torch.tensor([int(v) in cen for v in b.n_id.tolist()])
        bad = periph & is_cen
        if overlap == "drop":
            assert not bool(bad.any())
        else:
            assert torch.equal(b.zeroed, bad)
            assert bool((b.x[bad] == 0).all())
            assert bool((b.x[~bad] != 0).all())
            seen += int(bad.sum())
        # central nodes keep their features in their own sub-graph
        assert torch.equal(b.x[b.center], data.x[b.central_nodes])
    if overlap == "zero":
        assert seen > 0  # the rule was exercised


def test_subgraphs_are_disjoint_blocks_and_induced():
    data = random_graph(n=200, m=3000, seed=9)
    s = HeterPoisson(data, 0.3, 3.0, seed=1)
    b = s.sample(0)
    ei = b.edge_index
    assert torch.equal(b.batch[ei[0]], b.batch[ei[1]])  # block-diagonal
    E = set(zip(data.edge_index[0].tolist(), data.edge_index[1].tolist()))
    for i in range(min(b.num_subgraphs, 20)):
        ids, sei = b.subgraph(i)
        got = {(int(ids[a]), int(ids[c])) for a, c in sei.t().tolist()}
        want = {(a, c) for a in ids.tolist() for c in ids.tolist() if a != c and (a, c) in E}
        assert got == want


def test_inference_subgraphs_only_admissible_and_uniform():
    """Section 4.4: neighbours only among admissible (non-training) nodes, min(n_test, avail)
    of them, each admissible neighbour kept with probability n_test / avail (chi2 over the
    neighbours of a few nodes across rounds, false-alarm rate ALPHA = 1e-3)."""
    data = random_graph(n=300, m=9000, seed=10)
    train = torch.arange(300) % 4 != 0
    test = ~train
    n_test, R = 5, 300
    hits: dict[tuple[int, int], int] = {}
    avail: dict[int, list[int]] = {}
    for r in range(R):
        b = inference_subgraphs(data, test, n_test, peripheral_nodes=test, seed=42, step=r)
        assert torch.equal(b.central_nodes, torch.nonzero(test).flatten())
        periph = torch.ones(b.num_nodes, dtype=torch.bool)
        periph[b.center] = False
        assert not bool(train[b.n_id[periph]].any())
        for i in range(b.num_subgraphs):
            lo, hi = int(b.ptr[i]), int(b.ptr[i + 1])
            v = int(b.n_id[lo])
            if v not in avail:
                nb = data.edge_index[0][data.edge_index[1] == v]
                avail[v] = sorted(set(nb[test[nb]].tolist()) - {v})
            assert hi - lo - 1 == min(n_test, len(avail[v]))
            for j in b.n_id[lo + 1:hi].tolist():
                hits[(v, j)] = hits.get((v, j), 0) + 1
    obs, exp, var = [], [], []
    for v, nbs in avail.items():
        if len(nbs) <= n_test:
            assert all(hits.get((v, j), 0) == R for j in nbs)
            continue
        p = n_test / len(nbs)
        for j in nbs:
            obs.append(hits.get((v, j), 0))
            exp.append(R * p)
            var.append(R * p * (1 - p))
    # within a node the counts are negatively correlated (fixed total), which only makes the
    # independent-cells chi2 conservative
    pval = _chi2_sf(np.array(obs), np.array(exp), np.array(var))
    assert pval > ALPHA, pval


def test_sampler_validation():
    data = random_graph(n=50, m=200, seed=0)
    with pytest.raises(ValueError, match="q_b"):
        HeterPoisson(data, 0.0, 1.0, seed=0)
    with pytest.raises(ValueError, match="q_b"):
        HeterPoisson(data, 1.5, 1.0, seed=0)
    with pytest.raises(ValueError, match="q_b"):
        HeterPoisson(data, float("nan"), 1.0, seed=0)
    with pytest.raises(ValueError, match="M"):
        HeterPoisson(data, 0.5, 0.0, seed=0)
    with pytest.raises(ValueError, match="M"):
        HeterPoisson(data, 0.5, -1.0, seed=0)
    with pytest.raises(TypeError, match="q_b"):
        HeterPoisson(data, "0.5", 1.0, seed=0)
    with pytest.raises(ValueError, match="hops"):
        HeterPoisson(data, 0.5, 1.0, seed=0, hops=2)
    with pytest.raises(ValueError, match="overlap"):
        HeterPoisson(data, 0.5, 1.0, seed=0, overlap="null")
    with pytest.raises(ValueError, match="seed"):
        HeterPoisson(data, 0.5, 1.0, seed=-1)
    with pytest.raises(ValueError, match="train_nodes"):
        HeterPoisson(data, 0.5, 1.0, seed=0, train_nodes=torch.tensor([0, 99]))
    with pytest.raises(ValueError, match="train_nodes"):
        HeterPoisson(data, 0.5, 1.0, seed=0, train_nodes=torch.zeros(50, dtype=torch.bool))
    s = HeterPoisson(data, 0.5, 1.0, seed=0)
    with pytest.raises(ValueError, match="step"):
        s.sample(-1)
    with pytest.raises(TypeError, match="num_steps"):
        iter(s).__next__()
    with pytest.raises(ValueError, match="n_test"):
        inference_subgraphs(data, torch.arange(5), -1, seed=0)


def test_iterator_and_seed_none():
    data = random_graph(n=80, m=500, seed=0)
    s = HeterPoisson(data, 0.5, 1.0, seed=None, num_steps=3)
    assert len(s) == 3
    batches = list(s)
    assert [b.step for b in batches] == [0, 1, 2]
    assert 0 <= s.seed < 2**64


# --------------------------------------------------------------------------- per-sub-graph clipping
def _net(kind, d_in=6, hidden=16, n_cls=3, layers=2):
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv, GINConv, SAGEConv

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            convs, d = [], d_in
            for _ in range(layers):
                if kind == "gcn":
                    convs.append(GCNConv(d, hidden))
                elif kind == "sage":
                    convs.append(SAGEConv(d, hidden))
                elif kind == "sage_max":
                    convs.append(SAGEConv(d, hidden, aggr="max", project=True))
                else:
                    convs.append(GINConv(torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ELU(),
                                                             torch.nn.Linear(hidden, hidden)), train_eps=True))
                d = hidden
            self.convs = torch.nn.ModuleList(convs)
            self.head = torch.nn.Linear(hidden, n_cls)

        def forward(self, x, ei):
            for c in self.convs:
                x = F.elu(c(x, ei))
            return self.head(x)

    return Net()


@pytest.mark.parametrize("kind", ["gcn", "sage", "sage_max", "gin"])
def test_vectorised_clipping_equals_loop(kind):
    """Per-sub-graph norms and the clipped sum equal a Python loop over the sub-graphs to
    1e-5 relative, and every clipped per-sub-graph gradient has norm <= C."""
    from ldpfast.privacy.dpsgd import (
        SubgraphGradSampleModule,
        flat_grad,
        per_subgraph_gradients_loop,
        subgraph_loss,
    )

    torch.manual_seed(0)
    data = random_graph(n=300, m=4000, seed=11)
    b = HeterPoisson(data, 0.25, 3.0, seed=4).sample(0)
    net = _net(kind)
    gsm = SubgraphGradSampleModule(net)
    out = gsm(b)
    subgraph_loss(out, b).backward()
    norms = gsm.norms()
    g = per_subgraph_gradients_loop(net, b).double()
    ref_norms = g.norm(dim=1)
    assert torch.allclose(norms, ref_norms, rtol=1e-5, atol=1e-7)
    C = float(ref_norms.median())  # about half of the sub-graphs are clipped
    out = gsm(b)
    subgraph_loss(out, b).backward()
    stats_ = gsm.clip_and_accumulate(C)
    assert 0.2 < stats_.clipped_fraction < 0.8
    clipped = stats_.factors.unsqueeze(1) * g
    assert bool((clipped.norm(dim=1) <= C).all())
    ref = clipped.sum(0)
    got = flat_grad(net).double()
    assert float((got - ref).norm() / ref.norm()) < 1e-5


def test_clipping_with_center_only_head_and_multiple_uses():
    """A head applied to the central rows only (B rows) and a Linear used twice."""
    import torch.nn.functional as F
    from torch_geometric.nn import GCNConv

    from ldpfast.privacy.dpsgd import SubgraphGradSampleModule, clipped_sum_loop, flat_grad

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = GCNConv(6, 8)
            self.shared = torch.nn.Linear(8, 8)
            self.head = torch.nn.Linear(8, 3)

        def forward(self, x, ei):
            h = F.elu(self.conv(x, ei))
            h = F.elu(self.shared(F.elu(self.shared(h))))
            return self.head(h)

    torch.manual_seed(1)
    data = random_graph(n=200, m=2000, seed=12)
    b = HeterPoisson(data, 0.3, 2.0, seed=5).sample(1)
    net = Net()
    gsm = SubgraphGradSampleModule(net)
    out = gsm(b)
    torch.nn.functional.cross_entropy(out[b.center], b.y, reduction="sum").backward()
    gsm.clip_and_accumulate(0.5)
    ref, _ = clipped_sum_loop(net, b, 0.5)
    assert float((flat_grad(net).double() - ref).norm() / ref.norm()) < 1e-5


def test_unsupported_layers_are_refused():
    from torch_geometric.nn import GATConv, GCNConv

    from ldpfast.privacy.dpsgd import SubgraphGradSampleModule

    with pytest.raises(TypeError, match="BatchNorm"):
        SubgraphGradSampleModule(torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm1d(4)))
    with pytest.raises(ValueError, match="cached=True"):
        SubgraphGradSampleModule(GCNConv(4, 4, cached=True))
    with pytest.raises(TypeError, match="lazy"):
        SubgraphGradSampleModule(GCNConv(-1, 4))
    with pytest.raises(TypeError, match="model"):
        SubgraphGradSampleModule("not a model")
    with pytest.raises(ValueError, match="grad_path"):
        SubgraphGradSampleModule(GATConv(4, 4), grad_path="vmap")
    # GAT's attention vectors have a fast rule now (tests/test_grad_paths.py checks it)
    assert SubgraphGradSampleModule(GATConv(4, 4)).general_parameters == []


def test_dp_optimizer_noise_scale_and_determinism():
    """Noise on the clipped sum is N(0, (2 C sigma)^2) per coordinate (chi2 test on the
    variance, false-alarm rate ALPHA = 1e-3), divided by the expected batch size; the same
    seed gives the same noise."""
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss

    data = random_graph(n=200, m=2000, seed=13)
    b = HeterPoisson(data, 0.3, 2.0, seed=5).sample(0)
    grads = []
    for _ in range(2):
        torch.manual_seed(0)
        net = _net("gcn", hidden=64)
        gsm = SubgraphGradSampleModule(net)
        opt = DPOptimizer(torch.optim.SGD(net.parameters(), lr=0.0), gsm, sigma=1.5, max_grad_norm=0.5,
                          expected_batch_size=50.0, seed=123)
        out = gsm(b)
        subgraph_loss(out, b).backward()
        stats_ = opt.module.clip_and_accumulate(0.5)
        clean = torch.cat([p.grad.reshape(-1).clone() for p in net.parameters()])
        out = gsm(b)
        subgraph_loss(out, b).backward()
        opt.step()
        noisy = torch.cat([p.grad.reshape(-1) for p in net.parameters()])
        grads.append(noisy)
        z = (noisy * 50.0 - clean) / opt.noise_std
        k = z.numel()
        stat = float((z.double() ** 2).sum())
        assert stats.chi2.sf(stat, k) > ALPHA and stats.chi2.cdf(stat, k) > ALPHA
        assert opt.noise_std == pytest.approx(2 * 0.5 * 1.5)
        assert stats_.norms.numel() == b.num_subgraphs
    assert torch.equal(grads[0], grads[1])


def test_dp_optimizer_validation():
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule

    net = _net("gcn")
    gsm = SubgraphGradSampleModule(net)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="sigma"):
        DPOptimizer(opt, gsm, sigma=0.0)
    with pytest.raises(ValueError, match="max_grad_norm"):
        DPOptimizer(opt, gsm, sigma=1.0, max_grad_norm=-1.0)
    with pytest.raises(TypeError, match="module"):
        DPOptimizer(opt, net, sigma=1.0)
    with pytest.raises(TypeError, match="optimizer"):
        DPOptimizer("sgd", gsm, sigma=1.0)


# --------------------------------------------------------------------------- pipeline
def planted_graph(n=800, seed=0, d=16, classes=2, p_in=0.02, p_out=0.002):
    """Two-block SBM with class-informative features (the pipeline should learn it)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, classes, (n,), generator=g)
    same = y[:, None] == y[None, :]
    prob = torch.where(same, torch.tensor(p_in), torch.tensor(p_out))
    a = torch.rand(n, n, generator=g) < prob
    a = torch.triu(a, 1)
    ei = clean_edge_index(torch.nonzero(a).t(), n)
    mean = torch.randn(classes, d, generator=g)
    x = mean[y] * 0.8 + torch.randn(n, d, generator=g)
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


@pytest.mark.parametrize("setting,model", [("transductive", "gcn"), ("inductive", "gcn"), ("transductive", "gat")])
def test_fit_smoke(setting, model, one_thread):
    from ldpfast.methods.heterpoisson import fit

    data = planted_graph()
    rep = fit(data, 8.0, model=model, setting=setting, M=2.0, expected_batch_size=200, epochs=4, seed=0,
              hidden=16)
    assert rep.eps <= 8.0 and rep.eps == pytest.approx(rep.eps_rdp)
    assert rep.delta == pytest.approx(1 / 800**1.1)
    assert rep.T == math.ceil(4 / rep.q_b - 1e-9)
    assert rep.q_b == pytest.approx(200 / 640)
    assert rep.privacy.target == "nodes" and rep.privacy.mechanism == "heterpoisson"
    assert rep.accuracy > 0.7, rep.accuracy
    assert rep.settings["clipped_fraction"] >= 0.0
    d = rep.to_dict()
    assert d["privacy"]["eps"] == rep.eps


def test_fit_naive_baseline_and_sigma_override(one_thread):
    from ldpfast.methods.heterpoisson import fit

    data = planted_graph(seed=1)
    rep = fit(data, 4.0, model="mlp", expected_batch_size=200, epochs=3, seed=1, hidden=16)
    assert rep.privacy.mechanism == "dpsgd" and rep.M is None
    assert rep.eps <= 4.0
    rep2 = fit(data, 4.0, model="sage", expected_batch_size=200, epochs=2, seed=1, hidden=16, sigma=50.0)
    assert rep2.sigma == 50.0 and rep2.eps < 4.0


def test_fit_validation():
    from ldpfast.methods.heterpoisson import fit

    data = planted_graph(n=100)
    with pytest.raises(ValueError, match="eps"):
        fit(data, 0.0)
    with pytest.raises(ValueError, match="model"):
        fit(data, 1.0, model="transformer")
    with pytest.raises(ValueError, match="setting"):
        fit(data, 1.0, setting="semi")
    with pytest.raises(ValueError, match="M"):
        fit(data, 1.0, M=0.0)
    with pytest.raises(ValueError, match="delta"):
        fit(data, 1.0, delta=1.5)
    with pytest.raises(ValueError, match="q_b"):
        fit(data, 1.0, q_b=0.0)
    with pytest.raises(ValueError, match="accountant"):
        fit(data, 1.0, accountant="prv")


# --------------------------------------------------------------------------- audit
def test_audit_stays_below_accountant(one_thread):
    """Algorithm 4 with real training steps (per-step observations) and the whole-mechanism
    canary test (20000 runs): every empirical eps lower bound (95% confidence) is below the
    accountant's eps.  The probability that a correct implementation fails this is at most
    the 5% non-coverage of the bound, and much less here (the bound is far below)."""
    from ldpfast.privacy.audit import audit_heterpoisson

    data = planted_graph(n=300, seed=2)
    r = audit_heterpoisson(data, q_b=0.2, M=2.0, T=40, delta=1e-5, eps=2.0, num_observations=60, hidden=8)
    assert r.eps_lower <= r.eps_accountant
    assert r.eps_step_lower <= r.eps_step_accountant
    assert r.eps_composed <= r.eps_accountant
    assert r.eps_accountant == pytest.approx(2.0, abs=5e-3)
    assert r.eps_lower > 0.3  # the attack has power at the correct noise level
    r = audit_heterpoisson(data, q_b=0.2, M=2.0, T=40, delta=1e-5, eps=2.0, num_observations=60, hidden=8,
                           canary="first")
    assert r.eps_lower <= r.eps_accountant and r.eps_step_lower <= r.eps_step_accountant


def test_audit_detects_too_little_noise():
    """Mutation test: with 0.3x the calibrated noise the audit's lower bound exceeds the
    accountant's eps, so the audit is not vacuous."""
    from ldpfast.privacy.audit import audit_heterpoisson

    data = planted_graph(n=300, seed=3)
    r = audit_heterpoisson(data, q_b=0.2, M=2.0, T=40, delta=1e-5, eps=2.0, train_model=False,
                           num_observations=200, noise_scale=0.3)
    assert r.eps_lower > r.eps_accountant


@pytest.mark.slow
def test_reproduce_quick(tmp_path):
    from conftest import require_datasets

    from ldpfast.reproduce.heterpoisson import reproduce_main

    require_datasets("facebook", "twitch-de")
    assert reproduce_main(["--quick", "--out", str(tmp_path)]) == 0
    for f in ("heterpoisson.json", "heterpoisson.md", "heterpoisson_accuracy_vs_eps.png"):
        assert (tmp_path / f).exists()


def test_inference_shared_scan_body_and_long_row_path_equal_numba():
    # The C++ inference sampler runs the shared body heter::infer_row (k scans of the row: what
    # each CUDA thread runs) when n_test * degree <= 2^16 and nth_element above; both must keep
    # the same neighbours as the Numba twin (an independent selection), hubs and ties of ids
    # included.  n_test = 13 on a hub of degree 6000 takes the long-row path, 3 the scans.
    if len(BACKENDS) < 2:
        pytest.skip("needs both the C++ and the Numba backend")
    g = torch.Generator().manual_seed(21)
    n = 7000
    ei = torch.randint(0, n, (2, 30000), generator=g)
    ei = torch.cat([ei, torch.stack([torch.arange(1, 6001), torch.zeros(6000, dtype=torch.long)])], 1)
    data = Data(edge_index=clean_edge_index(ei, n), num_nodes=n)
    test = torch.rand(n, generator=g) < 0.2
    test[0] = True
    for n_test in (0, 3, 13, 11000):
        for allow in (None, torch.rand(n, generator=g) < 0.5):
            a = inference_subgraphs(data, test, n_test, peripheral_nodes=allow, seed=2, step=1, backend="cpp")
            b = inference_subgraphs(data, test, n_test, peripheral_nodes=allow, seed=2, step=1, backend="numba")
            same_batch(a, b)
            nb = data.edge_index[0][data.edge_index[1] == 0].unique()
            avail = int(nb.numel() if allow is None else allow[nb].sum())
            hub = a.n_id[a.ptr[0]:a.ptr[1]]
            assert hub[0] == 0 and hub.numel() - 1 == min(n_test, avail) and avail > 6000 // 3


# --------------------------------------------------------------------------- the two baselines (issue 39)
def test_paper_baseline_uses_the_authors_settings(one_thread):
    """fit_paper_baseline: MLP d-32-32-32-C, T = 5 epochs of ceil(n_train / 2048) steps, the
    Poisson-subsampled Gaussian accountant at q = 2048 / n_train, delta = 1 / n_train^1.1."""
    from ldpfast.methods.heterpoisson import (
        PAPER_BASELINE_PRIVACY_MODEL,
        fit_paper_baseline,
        split_nodes,
    )
    from ldpfast.privacy.accountants import MixtureAccountant

    data = planted_graph(n=3000, seed=4)
    rep = fit_paper_baseline(data, 2.0, seed=3)
    n_train = int(split_nodes(3000, 3)[0].sum())
    assert rep.T == 5 * math.ceil(n_train / 2048) and rep.q_b == pytest.approx(2048 / n_train)
    assert rep.delta == pytest.approx(1 / n_train**1.1) and rep.M is None
    assert rep.eps <= 2.0 and rep.eps == pytest.approx(2.0, abs=0.01)
    acct = MixtureAccountant([0.0, 1.0], [1 - rep.q_b, rep.q_b])
    assert acct.epsilon(rep.sigma, rep.T, rep.delta).eps == pytest.approx(rep.eps)
    assert rep.settings["noise_std_on_mean"] == pytest.approx(rep.sigma / 2048)
    assert rep.settings["hidden"] == 32 and rep.settings["depth"] == 3 and rep.settings["lr"] == 1e-3
    assert rep.privacy_model == PAPER_BASELINE_PRIVACY_MODEL and "Poisson" in rep.privacy_model
    again = fit_paper_baseline(data, 2.0, seed=3)
    assert again.accuracy == rep.accuracy
    # with enough steps the same code learns the planted classes (it is not broken, only short)
    long = fit_paper_baseline(data, 8.0, seed=3, epochs=8, batch_size=256, lr=3e-2)
    assert long.accuracy > 0.9, long.accuracy


def test_reproduce_reports_both_baselines_beside_heterpoisson(tmp_path, monkeypatch, one_thread):
    """ldpfast reproduce heterpoisson: per cell the HeterPoisson rows, the tuned DP MLP (as many
    tries as HeterPoisson has M values) and the paper's-settings MLP compared with the paper's
    baseline numbers, with the majority-class share."""
    import json

    import ldpfast.datasets
    from ldpfast.reproduce import heterpoisson as repro

    monkeypatch.setattr(ldpfast.datasets, "load", lambda name, root=None, feature_dim=None: planted_graph(seed=1))
    argv = ["--datasets", "twitch-de", "--models", "gcn", "--eps", "8", "--epochs", "2", "--batch", "200",
            "--M", "1", "2", "--out", str(tmp_path), "--seed", "91827364554"]
    assert repro.reproduce_main(argv) == 0
    rows = json.loads((tmp_path / "heterpoisson.json").read_text())["rows"]
    by = {r["model"]: r for r in rows}
    assert set(by) == {"HeterPoisson gcn", repro.TUNED_MLP, repro.PAPER_BASELINE}
    assert repro.PAPER_BASELINE.endswith("paper's settings")
    paper_mlp = repro.PAPER_TABLE2["twitch-de"]["mlp"][8]
    assert by[repro.PAPER_BASELINE]["paper"] == paper_mlp and by[repro.PAPER_BASELINE]["lr"] == 1e-3
    assert by[repro.TUNED_MLP]["paper"] is None and by[repro.TUNED_MLP]["lr"] in (0.03, 0.01)
    assert by["HeterPoisson gcn"]["paper"] == repro.PAPER_TABLE2["twitch-de"]["gcn"][8]
    assert len({r["majority"] for r in rows}) == 1 and 50 <= rows[0]["majority"] <= 100
    md = (tmp_path / "heterpoisson.md").read_text()
    assert "majority" in md and "d-32-32-32-C" in md and "as many tries as HeterPoisson" in md
    assert "91827364554" not in json.dumps(json.loads((tmp_path / "heterpoisson.json").read_text())["command"])
