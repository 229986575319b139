"""ldpfast.partition: coarsened METIS (label propagation + METIS on the coarse graph) and
metis_bags' coarsen_to option."""
import math

import numpy as np
import pytest
import torch

pytest.importorskip("pymetis")

from ldpfast.graph import CSR, to_csr
from ldpfast.methods.rgnn import metis_bags
from ldpfast.partition import coarsen, edge_cut, partition

#: stated tolerances: bags within 10% of the mean size; coarsened cut within 1.25x of plain
#: METIS on planted communities
BALANCE = 1.10
CUT_FACTOR = 1.25


def planted(blocks=32, size=150, p_in=0.08, out_per_node=2.0, seed=0) -> CSR:
    """Stochastic block model: ``blocks`` communities of ``size`` nodes, nodes shuffled so
    that ids say nothing about the communities."""
    rng = np.random.default_rng(seed)
    n = blocks * size
    src, dst = [], []
    for b in range(blocks):
        a = np.triu(rng.random((size, size)) < p_in, 1)
        i, j = np.nonzero(a)
        src.append(i + b * size)
        dst.append(j + b * size)
    m_out = int(out_per_node * n / 2)
    u, v = rng.integers(0, n, m_out), rng.integers(0, n, m_out)
    src.append(u)
    dst.append(v)
    perm = rng.permutation(n)
    s, d = perm[np.concatenate(src)], perm[np.concatenate(dst)]
    ei = torch.from_numpy(np.stack([s, d])).to(torch.int64)
    return to_csr(ei, n, symmetrize=True)


@pytest.fixture(scope="module")
def graph():
    return planted()


def test_coarsen_weights_add_up(graph):
    tm = {}
    cluster, g = coarsen(graph, 256, seed=3, timings=tm)
    n = graph.num_nodes
    assert cluster.shape == (n,) and cluster.min() == 0 and cluster.max() == g.num_nodes - 1
    assert int(g.vw.sum()) == n
    assert np.array_equal(np.bincount(cluster, minlength=g.num_nodes), g.vw)
    assert int(g.vw.max()) <= math.ceil(n / 256)  # the size cap
    internal = graph.nnz - int(g.ew.sum())  # every fine entry is internal or a coarse weight
    assert internal > 0 and g.ew.min() > 0
    assert g.num_nodes < n and tm["levels"]
    # symmetric coarse graph without self loops
    rows = np.repeat(np.arange(g.num_nodes), np.diff(g.rowptr))
    assert not np.any(rows == g.col)
    fwd = dict(zip(zip(rows.tolist(), g.col.tolist()), g.ew.tolist()))
    assert all(fwd[(c, r)] == w for (r, c), w in fwd.items())


def test_deterministic_for_a_seed(graph):
    a = partition(graph, 8, seed=5, coarsen_to=256)
    b = partition(graph, 8, seed=5, coarsen_to=256)
    assert np.array_equal(a, b)
    ca, _ = coarsen(graph, 256, seed=1)
    cb, _ = coarsen(graph, 256, seed=1)
    assert np.array_equal(ca, cb)


@pytest.mark.parametrize("C", [4, 16])
def test_every_node_one_bag_balanced_and_cut_close_to_metis(graph, C):
    n = graph.num_nodes
    coarse = metis_bags(graph, C, seed=0, coarsen_to=32 * C)
    plain = metis_bags(graph, C, seed=0, coarsen_to=0)
    for bags in (coarse, plain):
        assert bags.shape == (n,) and bags.dtype == torch.int64
        assert int(bags.min()) >= 0 and int(bags.max()) < C  # one bag per node, C bags
        sizes = torch.bincount(bags, minlength=C).double()
        assert float(sizes.min()) > 0
        assert float(sizes.max() / sizes.mean()) <= BALANCE, sizes
    cut_c, cut_p = edge_cut(graph, coarse), edge_cut(graph, plain)
    # planted communities: both must find them (a random C-way split cuts 1 - 1/C)
    assert cut_p < 0.5 * (1 - 1 / C)
    assert cut_c <= CUT_FACTOR * cut_p, (cut_c, cut_p)


def test_default_is_plain_metis_on_small_graphs(graph):
    tm = {}
    a = metis_bags(graph, 8, seed=2, timings=tm)
    assert "coarsen_s" not in tm
    assert torch.equal(a, metis_bags(graph, 8, seed=2, coarsen_to=0))


def test_edge_cut_counts_entries():
    ei = torch.tensor([[0, 1, 2], [1, 2, 3]])
    g = to_csr(ei, 4, symmetrize=True)  # path 0-1-2-3: 6 entries
    assert edge_cut(g, np.array([0, 0, 1, 1])) == pytest.approx(2 / 6)
    assert edge_cut(g, torch.zeros(4, dtype=torch.int64)) == 0.0
    with pytest.raises(ValueError, match="parts"):
        edge_cut(g, np.zeros(3, dtype=np.int64))


def test_bad_arguments(graph):
    with pytest.raises(ValueError, match="coarsen_to"):
        metis_bags(graph, 16, coarsen_to=8)  # fewer clusters than bags
    with pytest.raises(ValueError, match="coarsen_to"):
        coarsen(graph, 0)
    with pytest.raises(ValueError, match="seed"):
        partition(graph, 4, seed=-1, coarsen_to=64)
    with pytest.raises(ValueError, match="C"):
        partition(graph, 0)
    with pytest.raises(TypeError, match="csr"):
        coarsen(torch.zeros(3), 2)


def test_isolated_nodes_are_grouped():
    # 40 isolated nodes next to a ring of 60: they must not stay singletons
    n = 100
    ring = torch.arange(60)
    ei = torch.stack([ring, (ring + 1) % 60])
    g = to_csr(ei, n, symmetrize=True)
    cluster, cg = coarsen(g, 10, seed=0)
    iso = cluster[60:]
    assert np.unique(iso).shape[0] == 4  # 40 nodes, cap = ceil(100 / 10) = 10
    assert int(cg.vw.max()) <= 10 and int(cg.vw.sum()) == n
    parts = partition(g, 2, seed=0, coarsen_to=10)
    sizes = np.bincount(parts, minlength=2)
    assert sizes.min() >= 45  # balanced within 10%
