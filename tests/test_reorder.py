"""ldpfast.graph.reorder: a valid permutation, the relabelled graph propagates to the same result
once un-permuted, and the order shrinks index gaps along edges of a randomly labelled grid.
(Whether it makes a GPU faster can only be measured on one.)"""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ldpfast import ops
from ldpfast.graph import CSR, as_adj_t, reorder, to_csr


def _grid(side, seed):
    """edge_index (both directions) of a side x side grid whose node ids are shuffled."""
    ids = np.arange(side * side).reshape(side, side)
    pairs = np.concatenate([np.stack([ids[:, :-1].ravel(), ids[:, 1:].ravel()]),
                            np.stack([ids[:-1].ravel(), ids[1:].ravel()])], 1)
    label = np.random.default_rng(seed).permutation(side * side)
    ei = torch.from_numpy(label[pairs])
    return torch.cat([ei, ei.flip(0)], 1)


def _span(csr: CSR) -> tuple[int, float]:
    """(bandwidth max |i - j|, mean |i - j|) over the entries of a CSR."""
    row = torch.repeat_interleave(torch.arange(csr.num_nodes), csr.degrees())
    gap = (row - csr.col.long()).abs().double()
    return int(gap.max()), float(gap.mean())


def test_reorder_is_a_permutation_and_relabels_the_graph():
    g = torch.Generator().manual_seed(1)
    n = 300
    ei = torch.randint(0, n - 20, (2, 1500), generator=g)  # nodes n-20.. isolated
    ei = torch.cat([ei, torch.tensor([[n - 5], [n - 4]])], 1)  # a two-node component
    w = torch.rand(ei.size(1), generator=g, dtype=torch.float64)
    r = reorder(ei, n, edge_weight=w)
    assert torch.equal(torch.sort(r.perm).values, torch.arange(n))
    assert torch.equal(r.inv[r.perm], torch.arange(n))
    # the same weighted edge set, relabelled: entry (i, j) of the original is (inv i, inv j)
    orig = as_adj_t(ei, n, edge_weight=w)
    rows = torch.repeat_interleave(torch.arange(n), orig.degrees())
    want = {(int(r.inv[i]), int(r.inv[j])): float(v) for i, j, v in zip(rows, orig.col, orig.value)}
    new_rows = torch.repeat_interleave(torch.arange(n), r.csr.degrees())
    got = {(int(i), int(j)): float(v) for i, j, v in zip(new_rows, r.csr.col, r.csr.value)}
    assert got == want
    for i in range(n):  # rows sorted, as every ldpfast CSR
        seg = r.csr.col[r.csr.rowptr[i]:r.csr.rowptr[i + 1]]
        assert torch.equal(seg, seg.sort().values)
    x = torch.rand(n, 3, generator=g)
    assert torch.equal(r.unpermute(r.permute(x)), x)
    assert torch.equal(r.permute_edge_index(ei), r.inv[ei])
    # isolated nodes last (they have no locality to gain)
    assert set(r.perm[-18:].tolist()) == set(range(n - 20, n)) - {n - 5, n - 4}


@pytest.mark.parametrize("aggr", ["mean", "gcn", "add"])
@pytest.mark.parametrize("weighted", [False, True])
def test_propagation_on_the_reordered_graph_equals_the_original(aggr, weighted):
    g = torch.Generator().manual_seed(2)
    n = 200
    ei = torch.randint(0, n, (2, 1200), generator=g)
    w = torch.rand(ei.size(1), generator=g, dtype=torch.float64) if weighted else None
    # integer-valued features: every sum exact in float64, so a different summation order
    # within a row (columns renumbered) cannot hide a wrong entry behind rounding
    x = torch.randint(-8, 9, (n, 5), generator=g).double()
    mask = torch.rand(n, generator=g) < 0.7
    want = ops.propagate(ei, x, 2, aggr, mask=mask, edge_weight=w)
    r = reorder(ei, n, edge_weight=w)
    got = r.unpermute(ops.propagate(r.csr, r.permute(x), 2, aggr, mask=r.permute(mask)))
    torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
    if not weighted and aggr == "add":  # integer sums: exact in any order
        assert torch.equal(got, want)


def test_reorder_shrinks_index_gaps_on_a_shuffled_grid():
    side = 40
    ei = _grid(side, 3)
    n = side * side
    before = _span(to_csr(ei, n))
    r = reorder(ei, n)
    after = _span(r.csr)
    # A grid numbered row by row has bandwidth `side`; RCM's diagonal sweeps stay within ~2x.
    assert after[0] <= 2 * side + 2, (before, after)
    assert after[1] < before[1] / 10, (before, after)
    # a CSR input gives the same order as its edge_index
    assert torch.equal(reorder(as_adj_t(ei, n)).perm, r.perm)


def test_reorder_errors_name_the_parameter():
    ei = torch.tensor([[0, 1], [1, 2]])
    with pytest.raises(ValueError, match="num_nodes: required"):
        reorder(ei)
    with pytest.raises(TypeError, match="num_nodes"):
        reorder(ei, 3.0)
    with pytest.raises(ValueError, match="num_nodes"):
        reorder(ei, -1)
    csr = as_adj_t(ei, 3)
    with pytest.raises(ValueError, match="num_nodes: 4 disagrees"):
        reorder(csr, 4)
    with pytest.raises((TypeError, ValueError), match="adj|edge_index"):
        reorder([[0, 1], [1, 2]], 3)
    r = reorder(ei, 3)
    with pytest.raises(ValueError, match="x: expected one row per node"):
        r.permute(torch.zeros(4, 2))
    with pytest.raises(ValueError, match="y: expected one row per node"):
        r.unpermute(torch.zeros(2))
    with pytest.raises(TypeError, match="x: expected a torch.Tensor"):
        r.permute(np.zeros(3))
    with pytest.raises(ValueError, match="edge_index"):
        r.permute_edge_index(torch.zeros(3, 2, dtype=torch.long))


def test_reorder_of_an_empty_graph():
    r = reorder(torch.zeros(2, 0, dtype=torch.long), 4)
    assert torch.equal(torch.sort(r.perm).values, torch.arange(4)) and r.csr.nnz == 0
    r0 = reorder(torch.zeros(2, 0, dtype=torch.long), 0)
    assert r0.perm.numel() == 0 and r0.csr.num_nodes == 0
