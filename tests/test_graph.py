"""CSR conversion against a plain-torch reference; cleaning; bad input."""
import numpy as np
import pytest
import torch

from ldpfast import graph


def _reference(ei, n, symmetrize):
    if symmetrize:
        ei = torch.cat([ei, ei.flip(0)], 1)
    ei = ei[:, ei[0] != ei[1]]
    key = torch.unique(ei[0] * n + ei[1])
    return torch.stack([key // n, key % n])


@pytest.mark.parametrize("backend", ["cpp", "numba"])
@pytest.mark.parametrize("symmetrize", [False, True])
def test_to_csr_matches_reference(backend, symmetrize):
    g = torch.Generator().manual_seed(0)
    n = 500
    ei = torch.randint(0, n, (2, 5000), generator=g)
    csr = graph.to_csr(ei, n, symmetrize=symmetrize, backend=backend)
    assert csr.col.dtype == torch.int32 and csr.rowptr.dtype == torch.int64
    assert torch.equal(csr.to_edge_index(), _reference(ei, n, symmetrize))
    if symmetrize:
        assert graph.is_symmetric(csr)


def test_int64_col_path_and_isolated_nodes():
    import ldpfast._C as C

    src = np.array([3, 0, 3, 3], np.int64)
    dst = np.array([1, 2, 1, 3], np.int64)
    rowptr = np.empty(6, np.int64)
    col = np.empty(4, np.int64)
    C.coo_to_csr(src, dst, 5, rowptr, col)
    nnz = C.csr_sort_unique(rowptr, col, True)
    assert nnz == 2
    np.testing.assert_array_equal(rowptr, [0, 1, 1, 1, 2, 2])
    np.testing.assert_array_equal(col[:nnz], [2, 1])


def test_degrees_and_clean():
    ei = torch.tensor([[0, 1, 1, 2, 2], [1, 0, 2, 2, 1]])
    clean = graph.clean_edge_index(ei, 4)
    assert clean.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    assert graph.degrees(clean, 4).tolist() == [1, 2, 1, 0]


def test_empty_graph():
    csr = graph.to_csr(torch.empty(2, 0, dtype=torch.long), 3)
    assert csr.nnz == 0 and csr.rowptr.tolist() == [0, 0, 0, 0]


def test_csr_of_caches_and_notices_edits():
    from torch_geometric.data import Data

    d = Data(edge_index=torch.tensor([[0, 1], [1, 0]]), num_nodes=3)
    a = graph.csr_of(d)
    assert graph.csr_of(d) is a
    d.edge_index[1, 0] = 2  # in-place edit bumps the tensor version
    assert graph.csr_of(d).col.tolist() == [2, 0]


@pytest.mark.parametrize("ei,n,exc,msg", [
    ([[0, 1], [1, 5]], 3, ValueError, "num_nodes"),
    ([[0, -1], [1, 0]], 3, ValueError, "num_nodes"),
    ([[0, 1, 2]], 3, ValueError, "shape"),
])
def test_bad_input(ei, n, exc, msg):
    with pytest.raises(exc, match=msg):
        graph.to_csr(torch.tensor(ei), n)


def test_bad_types():
    with pytest.raises(TypeError, match="edge_index"):
        graph.to_csr([[0], [1]], 2)
    with pytest.raises(TypeError, match="edge_index"):
        graph.to_csr(torch.zeros(2, 1), 2)
    with pytest.raises(TypeError, match="num_nodes"):
        graph.to_csr(torch.zeros(2, 1, dtype=torch.long), 2.0)
    with pytest.raises(ValueError, match="num_nodes"):
        graph.to_csr(torch.zeros(2, 0, dtype=torch.long), -1)


@pytest.mark.parametrize("weighted,n,e", [(False, 5000, 200_000), (True, 5000, 200_000), (False, 20_000, 400_000)])
def test_parallel_counting_sort_is_thread_count_independent(threads, weighted, n, e):
    # Large enough for the chunked (parallel) counting sort, and without values for several
    # buckets of the two-step scatter (scatter.h); the Numba twin is serial, so equality with
    # it proves the chunked order is the stable serial order.
    g = torch.Generator().manual_seed(4)
    ei = torch.randint(0, n, (2, e), generator=g)
    w = torch.rand(e, generator=g, dtype=torch.float64) if weighted else None
    out = {}
    for nt in (1, 2, 3):
        threads(nt)
        c = graph.to_csr(ei, n, edge_weight=w, dedup=True, drop_self_loops=False, backend="cpp")
        out[nt] = (c, graph.transpose(c, backend="cpp"))
    ref = graph.to_csr(ei, n, edge_weight=w, drop_self_loops=False, backend="numba")
    ref_t = graph.transpose(ref, backend="numba")
    for c, t in out.values():
        for a, b in ((c, ref), (t, ref_t)):
            assert torch.equal(a.rowptr, b.rowptr) and torch.equal(a.col, b.col)
            assert (a.value is None) == (not weighted)
            if weighted:
                assert torch.equal(a.value, b.value)
    # the transpose is the transpose
    assert torch.equal(graph.transpose(out[2][1]).col, out[2][0].col)


def test_two_step_scatter_with_wide_pairs_is_the_transpose():
    # many nodes, few edges: the key and value bits exceed 32, so the scatter (scatter.h) packs
    # 8-byte pairs (the dense test above uses 4-byte ones); reference: a stable sort in torch
    g = torch.Generator().manual_seed(6)
    n, e = 2**21, 100_000
    ei = torch.randint(0, n, (2, e), generator=g)
    c = graph.to_csr(ei, n, dedup=False, drop_self_loops=False, backend="cpp")
    order = torch.argsort(ei[0] * n + ei[1], stable=True)
    assert torch.equal(c.col.long(), ei[1][order])
    t = graph.transpose(c, backend="cpp")
    order_t = torch.argsort(ei[1][order] * n + ei[0][order], stable=True)
    assert torch.equal(t.col.long(), ei[0][order][order_t])
    assert torch.equal(t.rowptr[1:] - t.rowptr[:-1], torch.bincount(ei[1], minlength=n))


def test_to_csr_keeps_stable_edge_order_within_rows(threads):
    # dedup=False keeps every entry; the counting sort must keep edge order within a row
    # before the (stable) row sort, whatever the thread count.
    g = torch.Generator().manual_seed(5)
    n, e = 1000, 100_000
    ei = torch.randint(0, n, (2, e), generator=g)
    w = torch.arange(e, dtype=torch.float64)
    threads(2)
    c = graph.to_csr(ei, n, edge_weight=w, dedup=False, drop_self_loops=False)
    key = ei[0] * n + ei[1]
    order = torch.argsort(key, stable=True)
    assert torch.equal(c.col.long(), ei[1][order]) and torch.equal(c.value, w[order])


def test_transpose_rejects_out_of_range_col():
    bad = graph.CSR(torch.tensor([0, 1, 1]), torch.tensor([5], dtype=torch.int32), 2)
    with pytest.raises(IndexError, match="col"):
        graph.transpose(bad)
