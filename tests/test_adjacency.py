"""Every PyG adjacency format through ops.propagate / KProp: same output and gradients as
the edge_index path on a directed graph, weights, KProp(cached=True), bad input, and a
standard PyG training script (issue 17, parts 1, 2 and 8)."""
import warnings

import pytest
import torch

import ldpfast
from ldpfast import graph, ops
from ldpfast.nn import KProp

pytestmark = pytest.mark.filterwarnings("ignore:Sparse CSR tensor support is in beta")

N = 30


def _directed(n=N, e=140, seed=0):
    """A directed graph: no self loops, no repeated edges, many one-way edges."""
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    key = torch.unique(ei[0] * n + ei[1])
    ei = torch.stack([key // n, key % n])
    # shuffle the edge order: formats must not depend on it
    ei = ei[:, torch.randperm(ei.size(1), generator=g)]
    w = torch.rand(ei.size(1), generator=g, dtype=torch.float64) + 0.1
    return ei, w


def dense_reference(ei, n, x, k, aggr, w=None, self_loops=False):
    """From the definitions: M[i, j] = weight of j -> i, PyG's SimpleConv / gcn_norm maths."""
    M = torch.zeros(n, n, dtype=torch.float64)
    M[ei[1], ei[0]] = 1.0 if w is None else w.to(torch.float64)
    C = (M != 0).to(torch.float64)  # neighbour counts for "mean"
    if self_loops:
        M = M + torch.eye(n, dtype=torch.float64)
        C = C + torch.eye(n, dtype=torch.float64)
    h = x.to(torch.float64)
    for _ in range(k):
        if aggr == "add":
            h = M @ h
        elif aggr == "mean":
            h = (M @ h) / C.sum(1).clamp(min=1)[:, None]
        else:
            deg = M.sum(1)
            dinv = torch.where(deg > 0, deg.clamp(min=1e-300) ** -0.5, torch.zeros_like(deg))
            h = dinv[:, None] * (M @ (dinv[:, None] * h))
    return h


class FakeSparseTensor:
    """Mimics the part of torch_sparse.SparseTensor that ldpfast reads (``csr()``,
    ``sparse_sizes()``, ``storage``): torch_sparse is not installed here (a 7-18 minute
    source build), so its branch is tested through this stand-in."""

    def __init__(self, rowptr, col, value, sizes):
        self.storage = type("Storage", (), {})()
        self._rowptr, self._col, self._value, self._sizes = rowptr, col, value, sizes
        self.csr_calls = 0

    def csr(self):
        self.csr_calls += 1
        return self._rowptr, self._col, self._value

    def sparse_sizes(self):
        return self._sizes


def _formats(ei, w, n=N):
    """(name, adj, edge_weight) for every format, all meaning the same weighted (or not)
    graph in PyG's adj_t convention (row i = sources of i)."""
    vals = torch.ones(ei.size(1), dtype=torch.float64) if w is None else w
    coo = torch.sparse_coo_tensor(ei.flip(0), vals, (n, n))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        csr_t = coo.coalesce().to_sparse_csr()
        csc_t = coo.coalesce().to_sparse_csc()
    out = [
        ("edge_index", ei, w),
        ("edge_index_int32", ei.to(torch.int32), w),
        ("coo", coo, None),
        ("coo_coalesced", coo.coalesce(), None),
        ("csr", csr_t, None),
        ("csc", csc_t, None),
        ("torch_sparse_fake", FakeSparseTensor(csr_t.crow_indices(), csr_t.col_indices(),
                                               None if w is None else csr_t.values(), (n, n)), None),
        ("ldpfast_csr", graph.as_adj_t(ei, n, edge_weight=w), None),
    ]
    import torch_geometric.transforms as T
    from torch_geometric.data import Data

    d = Data(edge_index=ei.clone(), num_nodes=n)
    if w is not None:
        d.edge_weight = w.clone()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = T.ToSparseTensor()(d)
    out.append(("pyg_ToSparseTensor", d.adj_t, None))
    return out


def test_pyg_adj_t_is_target_major_csr():
    # What the installed PyG produces (torch_sparse absent: a torch sparse CSR tensor)
    # and the convention: row i of adj_t lists the sources sending to i.
    import torch_geometric.transforms as T
    from torch_geometric.data import Data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        d = T.ToSparseTensor()(Data(edge_index=torch.tensor([[0, 0], [1, 2]]), num_nodes=3))
    adj = d.adj_t
    if isinstance(adj, torch.Tensor):
        assert adj.layout == torch.sparse_csr
        assert adj.to_dense().tolist() == [[0, 0, 0], [1, 0, 0], [1, 0, 0]]
    csr = graph.as_adj_t(adj, 3)
    assert csr.rowptr.tolist() == [0, 0, 1, 2] and csr.col.tolist() == [0, 0]
    assert torch.equal(csr.rowptr, graph.as_adj_t(torch.tensor([[0, 0], [1, 2]]), 3).rowptr)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("aggr", ["mean", "add", "gcn"])
def test_every_format_same_output_and_gradients(weighted, aggr):
    ei, w = _directed()
    w = w if weighted else None
    g = torch.Generator().manual_seed(5)
    x0 = torch.rand(N, 4, generator=g, dtype=torch.float64)
    gy = torch.rand(N, 4, generator=g, dtype=torch.float64)
    ref = dense_reference(ei, N, x0, 3, aggr, w)
    results = {}
    for name, adj, ew in _formats(ei, w):
        x = x0.clone().requires_grad_(True)
        y = ops.propagate(adj, x, 3, aggr, edge_weight=ew)
        (y * gy).sum().backward()
        results[name] = (y.detach(), x.grad)
        torch.testing.assert_close(y.detach(), ref, rtol=1e-12, atol=1e-12, msg=name)
    y0, g0 = results["edge_index"]
    assert not torch.equal(g0, torch.zeros_like(g0))
    for name, (y, gx) in results.items():
        # Same CSR, same kernel: the same bits, not just close.
        assert torch.equal(y, y0), name
        assert torch.equal(gx, g0), name


@pytest.mark.parametrize("aggr", ["mean", "add", "gcn"])
def test_kprop_every_format(aggr):
    ei, w = _directed(seed=2)
    x = torch.rand(N, 3)
    ref = KProp(k=2, aggr=aggr)(x, ei)
    refw = KProp(k=2, aggr=aggr)(x, ei, w)
    assert not torch.allclose(ref, refw)  # the weights matter
    for weighted in (False, True):
        for name, adj, ew in _formats(ei, w if weighted else None):
            for cached in (False, True):
                out = KProp(k=2, aggr=aggr, cached=cached)(x, adj, ew)
                assert torch.equal(out, refw if weighted else ref), (name, cached)


def test_directed_convention_matches_pyg():
    from torch_geometric.nn import SimpleConv
    from torch_geometric.nn.conv.gcn_conv import gcn_norm

    ei, w = _directed(seed=3)
    x = torch.rand(N, 5, dtype=torch.float64)
    for aggr in ("add", "mean"):
        for ew in (None, w):
            h = x
            for _ in range(3):
                h = SimpleConv(aggr=aggr)(h, ei, ew)
            torch.testing.assert_close(KProp(k=3, aggr=aggr)(x, ei, ew), h)
    for ew in (None, w):
        e2, w2 = gcn_norm(ei, ew, N, add_self_loops=False)
        h = x
        for _ in range(3):
            h = SimpleConv(aggr="add")(h, e2, w2)
        torch.testing.assert_close(KProp(k=3, aggr="gcn")(x, ei, ew), h)
        e2, w2 = gcn_norm(ei, ew, N, add_self_loops=True)
        h = SimpleConv(aggr="add")(x, e2, w2)
        torch.testing.assert_close(KProp(k=1, aggr="gcn", add_self_loops=True)(x, ei, ew), h)


def test_self_loops_and_duplicates():
    # Self loops are dropped in every format; repeated entries: an unweighted edge_index is
    # a set of edges, weighted / sparse inputs sum them (coalesce()).
    ei = torch.tensor([[0, 1, 1, 2, 2], [1, 2, 2, 2, 0]])
    x = torch.tensor([[1.0], [10.0], [100.0]])
    assert ops.propagate(ei, x, 1, "add").flatten().tolist() == [100.0, 1.0, 10.0]
    w = torch.tensor([1.0, 2.0, 3.0, 5.0, 1.0])
    assert ops.propagate(ei, x, 1, "add", edge_weight=w).flatten().tolist() == [100.0, 1.0, 50.0]
    coo = torch.sparse_coo_tensor(ei.flip(0), w, (3, 3))
    assert ops.propagate(coo, x, 1, "add").flatten().tolist() == [100.0, 1.0, 50.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        csr = torch.sparse_csr_tensor(torch.tensor([0, 1, 2, 5]), torch.tensor([2, 0, 1, 2, 1]),
                                      torch.tensor([1.0, 1.0, 2.0, 5.0, 3.0]), (3, 3))
    assert ops.propagate(csr, x, 1, "add").flatten().tolist() == [100.0, 1.0, 50.0]
    # unit values (PyG's adj_t without edge_weight) with a repeated entry and a self loop:
    # still summed, as torch.sparse.mm would
    rp, cols = torch.tensor([0, 1, 2, 5]), torch.tensor([2, 0, 1, 2, 1])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ones = torch.sparse_csr_tensor(rp, cols, torch.ones(5), (3, 3))
    assert ops.propagate(ones, x, 1, "add").flatten().tolist() == [100.0, 1.0, 20.0]
    fake = FakeSparseTensor(rp, cols, None, (3, 3))
    assert ops.propagate(fake, x, 1, "add").flatten().tolist() == [100.0, 1.0, 20.0]
    assert graph.as_adj_t(ones, 3).value.tolist() == [1.0, 1.0, 2.0]


def test_unit_weights_are_unweighted():
    ei, _ = _directed()
    csr = graph.as_adj_t(ei, N, edge_weight=torch.ones(ei.size(1)))
    assert csr.value is None
    assert graph.as_adj_t(ei, N, edge_weight=torch.full((ei.size(1),), 2.0)).value is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_weighted_kernels_cpp_numba_identical(dtype):
    g = torch.Generator().manual_seed(7)
    n = 200
    ei = torch.randint(0, n, (2, 3000), generator=g)  # with duplicates and self loops
    w = torch.rand(3000, generator=g, dtype=dtype) - 0.3  # signed weights, some sums ~0
    a = graph.to_csr(ei, n, edge_weight=w, backend="cpp")
    b = graph.to_csr(ei, n, edge_weight=w, backend="numba")
    assert torch.equal(a.rowptr, b.rowptr) and torch.equal(a.col, b.col)
    assert torch.equal(a.value, b.value)
    ta, tb = graph.transpose(a, backend="cpp"), graph.transpose(b, backend="numba")
    assert torch.equal(ta.col, tb.col) and torch.equal(ta.value, tb.value)
    x = torch.rand(n, 37, generator=g, dtype=dtype)
    mask = torch.rand(n, generator=g) < 0.5
    for aggr in ("add", "mean"):
        for m in (None, mask):
            ya = ops.propagate(a, x, 3, aggr, True, m, backend="cpp")
            yb = ops.propagate(a, x, 3, aggr, True, m, backend="numba")
            assert torch.equal(ya, yb), (aggr, m is None)


def test_to_csr_weighted_matches_coalesce():
    g = torch.Generator().manual_seed(8)
    n = 50
    ei = torch.randint(0, n, (2, 600), generator=g)
    w = torch.rand(600, generator=g, dtype=torch.float64)
    csr = graph.to_csr(ei, n, edge_weight=w, drop_self_loops=False)
    ref = torch.sparse_coo_tensor(ei, w, (n, n)).coalesce()
    assert torch.equal(csr.to_edge_index(), ref.indices())
    torch.testing.assert_close(csr.value, ref.values(), rtol=1e-15, atol=1e-15)
    t = graph.transpose(csr)
    reft = torch.sparse_coo_tensor(ei.flip(0), w, (n, n)).coalesce()
    assert torch.equal(t.to_edge_index(), reft.indices())
    torch.testing.assert_close(t.value, reft.values(), rtol=1e-15, atol=1e-15)


def test_gradcheck_weighted():
    ei, w = _directed(n=12, e=40)
    mask = torch.arange(12) % 3 != 0
    x = torch.rand(12, 3, dtype=torch.float64, requires_grad=True)
    for aggr in ("add", "mean", "gcn"):
        assert torch.autograd.gradcheck(
            lambda t, aggr=aggr: ops.propagate(ei, t, 2, aggr, True, mask, edge_weight=w), (x,))


# --- KProp(cached=True) ---------------------------------------------------------------


def _counting(monkeypatch):
    calls = {"as_adj_t": 0, "transpose": 0}
    real_adj, real_t = graph.as_adj_t, graph.transpose

    def as_adj_t(*a, **k):
        calls["as_adj_t"] += 1
        return real_adj(*a, **k)

    def transpose(*a, **k):
        calls["transpose"] += 1
        return real_t(*a, **k)

    monkeypatch.setattr(graph, "as_adj_t", as_adj_t)
    monkeypatch.setattr(graph, "transpose", transpose)
    return calls


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("aggr", ["mean", "gcn"])
def test_cached_equals_uncached_and_builds_once(monkeypatch, weighted, aggr):
    ei, w = _directed(seed=4)
    w = w.float() if weighted else None
    calls = _counting(monkeypatch)
    plain, cached = KProp(k=3, aggr=aggr), KProp(k=3, aggr=aggr, cached=True)
    mask = torch.arange(N) % 4 != 0
    for step in range(3):
        for m in (None, mask):
            x1 = torch.rand(N, 6, requires_grad=True)
            x2 = x1.detach().clone().requires_grad_(True)
            y1, y2 = plain(x1, ei, w, mask=m), cached(x2, ei, w, mask=m)
            assert torch.equal(y1, y2)
            gy = torch.rand_like(y1)
            (y1 * gy).sum().backward()
            (y2 * gy).sum().backward()
            assert torch.equal(x1.grad, x2.grad)
    # plain: one CSR and one transpose per call (6 calls); cached: one of each in total
    assert calls == {"as_adj_t": 6 + 1, "transpose": 6 + 1}


def test_cached_symmetric_graph_shares_transpose():
    from torch_geometric.utils import to_undirected

    ei = to_undirected(_directed()[0])
    layer = KProp(k=2, cached=True)
    x = torch.rand(N, 2, requires_grad=True)
    layer(x, ei).sum().backward()
    assert layer._cache["csr_t"] is layer._cache["csr"]


def test_cached_staleness(recwarn):
    ei, _ = _directed(seed=5)
    other, _ = _directed(seed=6)
    x = torch.rand(N, 3)
    layer = KProp(k=2, aggr="mean", cached=True)
    a = layer(x, ei)
    assert torch.equal(layer(x, ei), a)
    assert not [r for r in recwarn.list if "cached" in str(r.message)]  # same graph: silent
    with pytest.warns(UserWarning, match="cached"):
        b = layer(x, other)  # a different graph: the cached one is used, with a warning
    assert torch.equal(b, a)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once per cache
        assert torch.equal(layer(x, other), a)
    layer.reset_cache()
    fresh = layer(x, other)
    assert torch.equal(fresh, KProp(k=2, aggr="mean")(x, other))
    assert not torch.equal(fresh, a)
    layer.reset_parameters()  # as GCNConv: forgets the cache too
    assert layer._cache is None
    layer(x, other)
    with pytest.raises(ValueError, match="reset_cache"):
        layer(torch.rand(N + 1, 3), other)  # a different number of nodes is an error


def test_cached_in_place_edit_warns():
    ei, _ = _directed(seed=5)
    layer = KProp(k=1, cached=True)
    x = torch.rand(N, 2)
    layer(x, ei)
    ei[0, 0] = (ei[0, 0] + 1) % N
    with pytest.warns(UserWarning, match="modified"):
        layer(x, ei)


# --- bad input --------------------------------------------------------------------------


def test_bad_adjacency_input():
    ei, w = _directed()
    x = torch.rand(N, 2)
    cases = [
        (TypeError, "adj", [[0, 1], [1, 0]], {}),
        (ValueError, "edge_index", torch.zeros(3, 4, dtype=torch.long), {}),
        (TypeError, "edge_index", ei.float(), {}),
        (TypeError, "dense adjacency", torch.rand(N, N), {}),
        (ValueError, "edge_index", torch.tensor([[0, N], [1, 0]]), {}),
        (ValueError, "edge_index", torch.tensor([[0, -1], [1, 0]]), {}),
        (ValueError, "edge_weight", ei, {"edge_weight": w[:-1]}),
        (TypeError, "edge_weight", ei, {"edge_weight": torch.ones(ei.size(1), dtype=torch.bool)}),
        (ValueError, "edge_weight", ei, {"edge_weight": torch.full((ei.size(1),), float("nan"))}),
        (ValueError, "edge_weight", ei, {"edge_weight": w.clone().requires_grad_(True)}),
        (ValueError, "edge_weight", torch.sparse_coo_tensor(ei, w, (N, N)), {"edge_weight": w}),
        (ValueError, "adj", torch.sparse_coo_tensor(ei, w, (N, N + 1)), {}),
        (ValueError, "adj", torch.sparse_coo_tensor(ei, w, (N + 1, N + 1)), {}),
        (ValueError, "adj", torch.sparse_coo_tensor(ei, torch.rand(ei.size(1), 2), (N, N, 2)), {}),
        (TypeError, "layout", torch.sparse_coo_tensor(ei, w, (N, N)).to_sparse_bsr((1, 1)), {}),
        (ValueError, "adj", FakeSparseTensor(torch.zeros(N + 1, dtype=torch.long),
                                             torch.zeros(0, dtype=torch.long), None, (N, 2)), {}),
        (ValueError, "adj", graph.as_adj_t(ei, N + 1), {}),
    ]
    for exc, msg, adj, kw in cases:
        with pytest.raises(exc, match=msg):
            ops.propagate(adj, x, 1, "mean", **kw)
    with pytest.raises(ValueError, match="edge_weight.*non-negative"):
        ops.propagate(ei, x, 1, "gcn", edge_weight=torch.full((ei.size(1),), -1.0))
    with pytest.raises(TypeError, match="x"):
        ops.propagate(ei, x.long())
    with pytest.raises(ValueError, match="x"):
        ops.propagate(ei, torch.rand(N))


def test_bad_sparse_structure_rejected_before_the_kernel():
    x = torch.rand(3, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bad_col = torch.sparse_csr_tensor(torch.tensor([0, 1, 1, 1]), torch.tensor([7]),
                                          torch.tensor([1.0]), (3, 3), check_invariants=False)
    with pytest.raises(ValueError, match="adj: column ids"):
        ops.propagate(bad_col, x)
    rp = torch.tensor([0, 2, 1, 2])
    with pytest.raises(ValueError, match="row pointers"):
        ops.propagate(FakeSparseTensor(rp, torch.tensor([1, 2]), None, (3, 3)), x)


def test_mixed_devices_are_named():
    ei, w = _directed()
    x = torch.rand(N, 2)
    meta = torch.device("meta")
    with pytest.raises(ValueError, match="edge_index.*device"):
        ops.propagate(ei.to(meta), x)
    with pytest.raises(ValueError, match="edge_weight.*meta"):
        ops.propagate(ei, x, edge_weight=w.to(meta))
    with pytest.raises(ValueError, match="x"):
        ops.propagate(ei, x.to(meta))
    with pytest.raises(ValueError, match="mask"):
        ops.propagate(ei, x, mask=torch.ones(N, dtype=torch.bool, device=meta))
    with pytest.raises(ValueError, match="adj.*meta"):
        ops.propagate(torch.sparse_coo_tensor(ei, w, (N, N)).to(meta), x)
    with pytest.raises(ValueError, match="x"):
        KProp(k=1, cached=True)(x.to(meta), ei)


def test_bad_input_changes_nothing():
    ei, w = _directed()
    ei0, w0 = ei.clone(), w.clone()
    with pytest.raises(ValueError):
        ops.propagate(ei, torch.rand(N, 2), edge_weight=w[:-1])
    layer = KProp(k=1, cached=True)
    with pytest.raises(ValueError):
        layer(torch.rand(N, 2), torch.tensor([[0, N], [1, 0]]))
    assert layer._cache is None  # nothing cached from a failed call
    assert torch.equal(ei, ei0) and torch.equal(w, w0)
    with pytest.raises(TypeError, match="cached"):
        KProp(k=1, cached="yes")


# --- a standard PyG script --------------------------------------------------------------


def test_pyg_script_cora_to_sparse_tensor():
    """Planetoid-style Data with T.ToSparseTensor(), a model holding KProp(cached=True) and a
    linear layer, a normal training loop: the loss goes down."""
    import torch_geometric.transforms as T
    from conftest import load_or_skip

    data = load_or_skip("cora")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = T.Compose([T.NormalizeFeatures(), T.ToSparseTensor()])(data)
    assert hasattr(data, "adj_t") and "edge_index" not in data

    class Net(torch.nn.Module):
        def __init__(self, d, c):
            super().__init__()
            self.prop = KProp(k=2, aggr="gcn", cached=True)
            self.lin = torch.nn.Linear(d, c)

        def forward(self, x, adj_t):
            return self.lin(self.prop(x, adj_t))

    torch.manual_seed(0)
    model = Net(data.num_features, int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.2)
    losses = []
    for _ in range(15):
        opt.zero_grad()
        out = model(data.x, data.adj_t)
        loss = torch.nn.functional.cross_entropy(out[data.train_mask], data.y[data.train_mask])
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    # the cached layer equals a fresh uncached one on the same graph
    x = data.x
    torch.testing.assert_close(model.prop(x, data.adj_t), KProp(k=2, aggr="gcn")(x, data.adj_t))
    assert ldpfast.nn.KProp is KProp


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error where no GPU exists")
def test_as_adj_t_for_cuda_without_a_gpu_names_the_adjacency():
    from ldpfast.graph import as_adj_t

    with pytest.raises(ValueError, match="edge_index: expected tensors on cuda"):
        as_adj_t(torch.randint(0, 5, (2, 10)), 5, device="cuda")


@pytest.mark.parametrize("weighted", [False, True])
def test_adj_t_as_edge_index_and_csr_of(weighted):
    """PyG's adj_t in every format, read back as the edge_index it stands for (entry (i, j) is
    the edge j -> i; self loops and weights kept) and as csr_of's source-major CSR, which is
    cached on the Data until adj_t is replaced."""
    from torch_geometric.data import Data

    g = torch.Generator().manual_seed(5)
    ei = torch.randint(0, N, (2, 90), generator=g)
    ei = graph.to_csr(torch.cat([ei, torch.tensor([[4], [4]])], 1), N, drop_self_loops=False).to_edge_index()
    w = torch.rand(ei.size(1), generator=g, dtype=torch.float64) + 0.5 if weighted else None
    want = sorted(zip(ei[0].tolist(), ei[1].tolist(), [1.0] * ei.size(1) if w is None else w.tolist()))
    ref = graph.to_csr(ei, N)
    seen = 0
    for name, adj, _ in _formats(ei, w):
        if name.startswith("edge_index") or name == "ldpfast_csr":
            continue
        seen += 1
        got, gw = graph._edge_index_of_adj_t(adj, N)
        assert got.dtype == torch.int64 and (gw is None) == (w is None), name
        vals = [1.0] * got.size(1) if gw is None else gw.tolist()
        have = sorted(zip(got[0].tolist(), got[1].tolist(), vals))
        assert [e[:2] for e in have] == [e[:2] for e in want], name
        assert [e[2] for e in have] == pytest.approx([e[2] for e in want]), name
        d = Data(adj_t=adj, num_nodes=N)
        c = graph.csr_of(d)
        assert torch.equal(c.rowptr, ref.rowptr) and torch.equal(c.col, ref.col), name
        assert graph.csr_of(d) is c  # cached
        d.adj_t = graph.as_adj_t(ei[:, 1:], N)  # replaced (an ldpfast CSR is no adj_t PyG makes)
        with pytest.raises(TypeError, match="adj_t: expected a torch sparse"):
            graph.csr_of(d)
    assert seen >= 6
    with pytest.raises(ValueError, match=r"adj_t: expected a \(31, 31\)"):
        graph._edge_index_of_adj_t(_formats(ei, w)[3][1], N + 1)
    with pytest.raises(ValueError, match="no graph"):
        graph.csr_of(Data(num_nodes=N))


def test_methods_train_the_same_from_adj_t():
    """lpgnn / heterpoisson .fit on a Data holding adj_t (T.ToSparseTensor) instead of
    edge_index: the same run, report for report; the input is not modified."""
    import torch_geometric.transforms as T
    from conftest import load_or_skip

    from ldpfast.methods import heterpoisson, lpgnn, random_split

    data = load_or_skip("cora")
    data.train_mask, data.val_mask, data.test_mask = random_split(data.num_nodes, seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sparse = T.ToSparseTensor()(data.clone())
    runs = [lambda d: lpgnn.fit(d, eps_x=1.0, eps_y=1.0, epochs=3, seed=0),
            lambda d: heterpoisson.fit(d, eps=4.0, epochs=0.05, seed=0)]
    for run in runs:
        a, b = run(data), run(sparse)
        assert a.accuracy == b.accuracy and a.privacy == b.privacy
    assert "adj_t" in sparse and "edge_index" not in sparse


def test_neighbour_csr_reads_adj_t():
    """HeterPoisson's neighbour lists NB(i) (sources of i) from adj_t equal those from edge_index."""
    from torch_geometric.data import Data

    from ldpfast.sampling import neighbour_csr

    g = torch.Generator().manual_seed(6)
    ei = graph.to_csr(torch.randint(0, N, (2, 80), generator=g), N).to_edge_index()  # directed
    want = neighbour_csr(Data(edge_index=ei, num_nodes=N))
    for name, adj, _ in _formats(ei, None):
        if name.startswith("edge_index") or name == "ldpfast_csr":
            continue
        d = Data(adj_t=adj, num_nodes=N)
        got = neighbour_csr(d)
        assert torch.equal(got.rowptr, want.rowptr) and torch.equal(got.col, want.col), name
        assert neighbour_csr(d) is got
