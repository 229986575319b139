"""Propagation kernel vs a dense reference, masks, autograd, KProp module."""
import pytest
import torch

from ldpfast import ops
from ldpfast.graph import CSR, to_csr
from ldpfast.nn import KProp


def _graph(n=40, e=160, seed=0, symmetric=True):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    return to_csr(ei, n, symmetrize=symmetric)


def dense_reference(csr, x, k, aggr, self_loops, mask):
    """Line-by-line from the definition: A without self loops, normalised, K times."""
    n = csr.num_nodes
    A = torch.zeros(n, n, dtype=torch.float64)
    ei = csr.to_edge_index()
    A[ei[0], ei[1]] = 1.0
    if self_loops:
        A = A + torch.eye(n, dtype=torch.float64)
    h = x.to(torch.float64)
    m = torch.ones(n, dtype=torch.float64) if mask is None else mask.to(torch.float64)
    deg = A.sum(1)
    for _ in range(k):
        if aggr == "add":
            h = A @ (h * m[:, None])
        elif aggr == "gcn":
            dinv = torch.where(deg > 0, deg.clamp(min=1) ** -0.5, torch.zeros_like(deg))
            h = dinv[:, None] * (A @ (dinv[:, None] * h * m[:, None]))
        else:
            cnt = A @ m
            h = (A @ (h * m[:, None])) / cnt.clamp(min=1)[:, None]
            h[cnt == 0] = 0
        m = ((A @ m) > 0).to(torch.float64)
    return h


@pytest.mark.parametrize("backend", ["cpp", "numba"])
@pytest.mark.parametrize("aggr", ["mean", "add", "gcn"])
@pytest.mark.parametrize("self_loops", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_dense_reference(backend, aggr, self_loops, masked):
    csr = _graph()
    g = torch.Generator().manual_seed(1)
    x = torch.rand(csr.num_nodes, 5, generator=g, dtype=torch.float64)
    mask = (torch.rand(csr.num_nodes, generator=g) < 0.3) if masked else None
    for k in (1, 3):
        y = ops.propagate(csr, x, k, aggr, self_loops, mask, backend=backend)
        ref = dense_reference(csr, x, k, aggr, self_loops, mask)
        torch.testing.assert_close(y, ref, rtol=1e-12, atol=1e-12)
    y32 = ops.propagate(csr, x.float(), 3, aggr, self_loops, mask, backend=backend)
    torch.testing.assert_close(y32.double(), ref, rtol=1e-5, atol=1e-5)


def test_directed_graph_and_backends_identical():
    csr = _graph(symmetric=False)
    x = torch.rand(csr.num_nodes, 7)
    a = ops.propagate(csr, x, 4, "mean", backend="cpp")
    b = ops.propagate(csr, x, 4, "mean", backend="numba")
    assert torch.equal(a, b)
    torch.testing.assert_close(a.double(), dense_reference(csr, x, 4, "mean", False, None),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("aggr", ["mean", "gcn", "add"])
def test_gradcheck(aggr):
    csr = _graph(n=15, e=40, symmetric=False)
    mask = torch.arange(15) % 3 != 0
    x = torch.rand(15, 3, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: ops.propagate(csr, t, 3, aggr, False, mask), (x,))


def test_thread_count_irrelevant(threads):
    csr = _graph(n=3000, e=30000)
    x = torch.rand(3000, 16)
    threads(1)
    a = ops.propagate(csr, x, 2, "gcn")
    threads(2)
    b = ops.propagate(csr, x, 2, "gcn")
    assert torch.equal(a, b)


def test_kprop_module_matches_pyg_propagation():
    from torch_geometric.nn import SimpleConv
    from torch_geometric.utils import to_undirected

    g = torch.Generator().manual_seed(3)
    ei = to_undirected(torch.randint(0, 30, (2, 90), generator=g))
    ei = ei[:, ei[0] != ei[1]]
    x = torch.rand(30, 4)
    ref = x
    conv = SimpleConv(aggr="mean")
    for _ in range(3):
        ref = conv(ref, ei)
    out = KProp(k=3, aggr="mean")(x, ei)
    torch.testing.assert_close(out, ref, rtol=1e-5, atol=1e-6)
    # the layer trains: gradient flows to x
    x.requires_grad_(True)
    KProp(k=2, aggr="gcn")(x, ei).sum().backward()
    assert x.grad is not None and torch.isfinite(x.grad).all()


def test_kprop_sees_graph_changes():
    layer = KProp(k=1, aggr="add")
    x = torch.eye(3)
    a = layer(x, torch.tensor([[0, 1], [1, 0]]))
    b = layer(x, torch.tensor([[0, 2], [2, 0]]))
    assert not torch.equal(a, b)


def test_bad_input():
    csr = _graph()
    x = torch.rand(csr.num_nodes, 2)
    with pytest.raises(ValueError, match="aggr"):
        ops.propagate(csr, x, 1, "max")
    with pytest.raises(ValueError, match="k"):
        ops.propagate(csr, x, -1)
    with pytest.raises(ValueError, match="x"):
        ops.propagate(csr, x[:-1], 1)
    with pytest.raises(TypeError, match="x"):
        ops.propagate(csr, x.long(), 1)
    with pytest.raises(TypeError, match="mask"):
        ops.propagate(csr, x, 1, mask=torch.ones(csr.num_nodes))
    with pytest.raises(ValueError, match="aggr"):
        KProp(k=2, aggr="max")  # ("sum" is PyG's "add": tests/test_pyg_idioms.py)


def test_bench_propagate_cached_tiny(tmp_path):
    """The --cached section runs end to end on a tiny graph (timings are never asserted)."""
    import json
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from benchmarks import bench_propagate

    bench_propagate.main(["--nodes", "1500", "--edges", "12000", "--dim", "8", "--ks", "1",
                          "--repeat", "1", "--warmup", "1", "--skip-pyg", "--cached",
                          "--out", str(tmp_path)])
    (report,) = tmp_path.glob("bench_propagate_*.json")
    payload = json.loads(report.read_text())
    impls = {r["impl"] for r in payload["rows"]}
    assert {"ldpfast KProp(cached=True)", "ldpfast KProp(cached=False)",
            "torch.sparse.mm(csr built once)", "torch coo.coalesce().to_sparse_csr()",
            "ldpfast as_adj_t"} <= impls
    cpu = payload["environment"]["cpu"]
    assert cpu["logical_cores"] >= 1 and "model" in cpu
    assert len(payload["environment"]["loadavg_1_5_15m"]) == 3


# --- bfloat16 storage (opt-in): float32 sums, one rounding per step --------------------------

def _bf16_input(n, d=24, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, d, generator=g) * 3
    x[0, 0], x[1, 1], x[2, 2] = float("nan"), float("inf"), 3.3e38  # NaN, inf, overflow on rounding
    return x.bfloat16()


def _bits(t):
    """bf16 bits, NaNs as 0x7FC0: the kernels' canonical NaN (torch's own conversion is not
    consistent about NaN bits: 0x7FC0 scalar, 0xFFFF vectorised), every other value exact."""
    return torch.where(torch.isnan(t), torch.tensor(0x7FC0, dtype=torch.int16), t.view(torch.int16))


@pytest.mark.parametrize("backend", ["cpp", "numba"])
@pytest.mark.parametrize("aggr", ["mean", "add", "gcn"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("masked", [False, True])
def test_bf16_is_the_float32_step_rounded(backend, aggr, weighted, masked):
    # The definition, independent of the kernel: a bf16 step equals the float32 step on the
    # widened input, rounded to nearest-even by torch's own conversion.
    ei = _graph(seed=3, symmetric=False)
    n = ei.num_nodes
    if weighted:
        ei = CSR(ei.rowptr, ei.col, n, torch.rand(ei.nnz, generator=torch.Generator().manual_seed(5)))
    x = _bf16_input(n)
    mask = (torch.arange(n) % 3 != 0) if masked else None
    y16 = ops.propagate(ei, x, 1, aggr, mask=mask, backend=backend)
    y32 = ops.propagate(ei, x.float(), 1, aggr, mask=mask, backend=backend)
    assert y16.dtype == torch.bfloat16
    assert torch.equal(_bits(y16), _bits(y32.bfloat16()))


def test_bf16_k_steps_round_each_step_and_backends_agree():
    # (NaN bits of the kernels themselves are compared raw: both write 0x7FC0)
    ei = _graph(seed=4)
    n = ei.num_nodes
    x = _bf16_input(n, seed=2)
    y = ops.propagate(ei, x, 3, "gcn", backend="cpp")
    ref = x
    for _ in range(3):  # gcn without mask: every step has the same scales
        ref = ops.propagate(ei, ref.float(), 1, "gcn", backend="cpp").bfloat16()
    assert torch.equal(_bits(y), _bits(ref))
    assert torch.equal(y.view(torch.int16), ops.propagate(ei, x, 3, "gcn", backend="numba").view(torch.int16))
    assert bool(torch.isnan(y).any())  # the NaN input reached the output


def test_bf16_backward_is_the_float32_backward_rounded():
    ei = _graph(seed=6, symmetric=False)
    n = ei.num_nodes
    x16 = _bf16_input(n, seed=3)
    x16[:3] = 0.5  # finite gradients
    gy = torch.randn(n, 24, generator=torch.Generator().manual_seed(9)).bfloat16()
    a = x16.clone().requires_grad_()
    ops.propagate(ei, a, 1, "gcn").backward(gy)
    b = x16.float().requires_grad_()
    ops.propagate(ei, b, 1, "gcn").backward(gy.float())
    assert a.grad.dtype == torch.bfloat16
    assert torch.equal(_bits(a.grad), _bits(b.grad.bfloat16()))


@pytest.mark.parametrize("cached", [False, True])
def test_kprop_bf16_storage(cached):
    ei = _graph(seed=7)
    n = ei.num_nodes
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(1), requires_grad=True)
    layer = KProp(k=2, aggr="gcn", cached=cached, storage=torch.bfloat16)
    y = layer(x, ei)
    assert y.dtype == torch.float32
    ref = KProp(k=2, aggr="gcn")(x, ei)
    assert not torch.equal(y, ref)  # really rounded
    torch.testing.assert_close(y, ref, rtol=2e-2, atol=2e-2)
    y.sum().backward()
    assert x.grad is not None and bool(torch.isfinite(x.grad).all())
    assert "storage=torch.bfloat16" in repr(layer)


def test_bf16_bad_input():
    ei = _graph()
    n = ei.num_nodes
    with pytest.raises(ValueError, match="storage"):
        KProp(storage=torch.float16)
    with pytest.raises(TypeError, match="bfloat16"):
        ops.propagate(ei, torch.ones(n, 2, dtype=torch.float16), 1)


def test_gcn_scales_are_the_correctly_rounded_inverse_square_root():
    # The CPU/GPU bit identity of float64 KProp rests on deg^-1/2 being correctly rounded on
    # both devices: torch's CPU sqrt is not (it differs from NumPy on ~1% of doubles), so the
    # reference here is NumPy's IEEE sqrt, and integer and weighted degrees are both covered.
    import numpy as np

    g = torch.Generator().manual_seed(7)
    d = torch.cat([torch.arange(1, 200_001, dtype=torch.float64),
                   torch.rand(200_000, generator=g, dtype=torch.float64) * 1e6 + 0.1])
    assert ops._inv_sqrt(d).numpy().tobytes() == (1.0 / np.sqrt(d.numpy())).tobytes()
    n = 3000
    ei = torch.randint(0, n, (2, 60_000), generator=g)
    w = torch.rand(60_000, generator=g, dtype=torch.float64)
    for csr in (to_csr(ei, n), to_csr(ei, n, edge_weight=w)):
        (a, b), = ops.step_scales(csr, 1, "gcn", True, None, torch.float64)
        deg = csr.degrees().double() + 1.0
        if csr.value is not None:  # weighted in-degree + 1, summed by the kernel in CSR order
            rows = [csr.value[csr.rowptr[i]:csr.rowptr[i + 1]].tolist() for i in range(n)]
            deg = torch.tensor([sum(r, 1.0) for r in rows], dtype=torch.float64)  # 1 + w_1 + ..., in order
        want = 1.0 / np.sqrt(deg.numpy())
        assert a.numpy().tobytes() == want.tobytes() and b.numpy().tobytes() == want.tobytes()
