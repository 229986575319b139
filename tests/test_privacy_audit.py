"""Audit findings F1, F2 and F4 (issue 15): each test failed on commit 9a1942e.

* F1: a feature range whose width overflows (``beta - alpha = inf``) gave the 1-bit encoder
  an unbounded likelihood ratio while the ledger said eps.
* F2a: a transform with a fixed seed gave node i of every graph the same random bits.
* F2b: a ``seed=None`` transform used as ``dataset.transform`` re-randomised the raw data on
  every access, so a majority vote over accesses undid the noise.
* F4: every ledger entry carried the seed that rebuilds the noise.
"""
from __future__ import annotations

import json
import math

import pytest
import torch
from torch_geometric.data import Batch, Data
from torch_geometric.data import Dataset as PygDataset

from ldpfast.graph import clean_edge_index
from ldpfast.mechanisms import edges as E
from ldpfast.mechanisms import grr, grr_fs, multibit_encode, multibit_rectify, onebit, rr_labels
from ldpfast.privacy import Ledger
from ldpfast.privacy.ldp import grr_probs
from ldpfast.transforms import DPRR, GRRFS, LocalLap, MultiBit, OneBit, RREdges, RRLabels

SECRET = 0x5EC2E7_5EED_1234  # distinctive: searched for in every record below


def _graph(n, d, seed, p_edge=0.05):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 2, (n, d), generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    m = int(p_edge * n * n / 2)
    ei = torch.randint(0, n, (2, m), generator=g)
    ei = clean_edge_index(torch.cat([ei, ei.flip(0)], 1), n)
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


# --- F1 -------------------------------------------------------------------------------------
@pytest.mark.parametrize("alpha, beta", [(-1e308, 1e308), (-math.inf, 0.0), (0.0, math.inf),
                                         (-1.7976931348623157e308, 1.7976931348623157e308)])
def test_f1_range_with_non_finite_width_is_refused(alpha, beta):
    x = torch.zeros(4, 3, dtype=torch.float64)
    for fn in (lambda: onebit(x, 1.0, alpha, beta, seed=0),
               lambda: multibit_encode(x, 2.0, 1, alpha, beta, seed=0),
               lambda: multibit_rectify(torch.zeros(4, 3), 2.0, 1, alpha, beta)):
        with pytest.raises(ValueError, match="alpha|beta"):
            fn()


def test_f1_widest_finite_range_keeps_the_bound():
    """The widest range whose width is finite: both ends stay within the e^eps ratio."""
    alpha, beta = -8.9e307, 8.9e307  # width 1.78e308 < DBL_MAX
    n = 20000
    lo = torch.full((n, 1), alpha, dtype=torch.float64)
    hi = torch.full((n, 1), beta, dtype=torch.float64)
    a, s = onebit(lo, 1.0, alpha, beta, seed=3)
    b, _ = onebit(hi, 1.0, alpha, beta, seed=3)
    p_lo, p_hi = (a == 1).double().mean().item(), (b == 1).double().mean().item()
    e = math.exp(1.0)
    # exact law: P[+1 | alpha] = 1/(e+1) = 0.269, P[+1 | beta] = e/(e+1) = 0.731 (sd 0.003)
    assert abs(p_lo - 1 / (e + 1)) < 0.02 and abs(p_hi - e / (e + 1)) < 0.02
    assert s.eps == 1.0


# --- F2a: a fixed seed across graphs ---------------------------------------------------------
def test_f2a_features_of_two_graphs_get_independent_bits():
    """Attack of the audit: with shared bits, x_B = out_B xor out_A xor x_A exactly."""
    A, B = _graph(400, 10, 1), _graph(400, 10, 2)
    t = GRRFS(eps_x=0.5, m=10, seed=0)  # m = d: every bit is a GRR report
    oa, ob = t(A.clone()), t(B.clone())
    guess = ob.x.long() ^ oa.x.long() ^ A.x
    recovered = (guess == B.x).double().mean().item()
    # independent bits: P[correct] = p^2 + q^2 = 0.530 at eps 0.5 (sd 0.008 over 4000 bits);
    # shared bits (the old code): 1.0
    p, q = grr_probs(0.5, 2)
    assert abs(recovered - (p * p + q * q)) < 0.05


def test_f2a_labels_of_two_graphs_get_independent_keep_decisions():
    A, B = _graph(2000, 2, 3), _graph(2000, 2, 4)
    t = RRLabels(eps=0.5, mask="all", seed=0, num_classes=4)
    ka = t(A.clone()).y == A.y
    kb = t(B.clone()).y == B.y
    same = (ka == kb).double().mean().item()
    p, _ = grr_probs(0.5, 4)
    # independent: p^2 + (1-p)^2 = 0.54 (sd 0.011); shared decisions (old code): 1.0
    assert abs(same - (p * p + (1 - p) ** 2)) < 0.05


def test_f2a_dprr_degree_noise_is_independent_across_graphs():
    A, B = _graph(300, 1, 5), _graph(300, 1, 6)
    t = DPRR(eps=1.0, seed=0, eps1=0.5)
    t(A)
    ra = t.last_result
    t(B)
    rb = t.last_result
    da, db = torch.bincount(A.edge_index[0], minlength=300), torch.bincount(B.edge_index[0], minlength=300)
    na, nb = ra.d_star - da, rb.d_star - db
    # old code: identical noise for 300 of 300 users (the true degrees fall out)
    assert (na == nb).double().mean().item() < 0.5


def test_f2a_identity_attribute_separates_identical_graphs():
    A = _graph(300, 8, 7)
    B = A.clone()
    t = GRRFS(eps_x=1.0, m=8, seed=0)
    assert torch.equal(t(A.clone()).x, t(B.clone()).x)  # same content, same report
    A.graph_id, B.graph_id = 0, 1
    t2 = GRRFS(eps_x=1.0, m=8, seed=0, identity="graph_id")
    assert not torch.equal(t2(A.clone()).x, t2(B.clone()).x)
    with pytest.raises(ValueError, match="identity"):
        GRRFS(eps_x=1.0, m=8, seed=0, identity="nope")(A.clone())
    with pytest.raises(TypeError, match="identity"):
        GRRFS(eps_x=1.0, m=8, seed=0, identity=3)


def test_f2a_subgraphs_and_batches_are_refused():
    A = _graph(100, 4, 8)
    sub = A.subgraph(torch.arange(50))
    sub.n_id = torch.arange(50)
    for t in (GRRFS(1.0, 2, seed=0), MultiBit(1.0, seed=0), RRLabels(1.0, seed=0),
              DPRR(1.0, seed=0), RREdges(1.0, seed=0), LocalLap(1.0, seed=0)):
        with pytest.raises(ValueError, match="once per user"):
            t(sub)
    batch = Batch.from_data_list([_graph(30, 4, 9), _graph(30, 4, 10)])
    with pytest.raises(ValueError, match="once per user"):
        GRRFS(1.0, 2, seed=0)(batch)


# --- F2b: seed=None as a dataset transform ---------------------------------------------------
class _OneGraph(PygDataset):
    """A dataset whose get() returns a fresh copy each time, as PyG's InMemoryDataset does."""

    def __init__(self, data, transform):
        self._d = data
        super().__init__(None, transform=transform)

    def len(self):
        return 1

    def get(self, idx):
        return self._d.clone()


def test_f2b_dataset_transform_gives_one_report_per_user():
    raw = _graph(300, 16, 11)
    raw.x = raw.x.float()
    ds = _OneGraph(raw, transform=GRRFS(eps_x=0.5, m=4))  # seed=None
    reports = [ds[0] for _ in range(51)]
    for r in reports[1:]:
        assert torch.equal(r.x, reports[0].x)
    vote = (torch.stack([r.x for r in reports]).mean(0) > 0.5).float()
    # a majority vote over accesses recovers nothing beyond one report (old code: 99.98%)
    assert torch.equal(vote, reports[0].x)
    assert all(len(Ledger.of(r).entries) == 1 for r in reports)


def test_f2b_labels_do_not_change_with_the_split():
    raw = _graph(500, 2, 12)
    t = RRLabels(eps=0.5, seed=None, num_classes=4)
    g = torch.Generator().manual_seed(0)
    outs = []
    for _ in range(5):  # a random split per access (RandomNodeSplit as transform=)
        d = raw.clone()
        d.train_mask = torch.rand(500, generator=g) < 0.5
        d.val_mask = torch.zeros(500, dtype=torch.bool)
        outs.append((d.train_mask, t(d).y))
    both = outs[0][0] & outs[1][0]
    assert torch.equal(outs[0][1][both], outs[1][1][both])


def test_f2b_separate_transform_objects_draw_separate_secrets():
    raw = _graph(300, 8, 13)
    assert not torch.equal(GRRFS(1.0, 8)(raw.clone()).x, GRRFS(1.0, 8)(raw.clone()).x)
    raw2 = raw.clone()
    raw2.x = raw2.x.float()
    a = OneBit(2.0, seed=SECRET)(raw2.clone())
    b = OneBit(2.0, seed=SECRET)(raw2.clone())
    assert torch.equal(a.x, b.x)  # a kept seed reproduces the run


# --- F4: the seed never leaves the caller ----------------------------------------------------
def _walk(obj, path="$"):
    """Yield (path, key-or-value) of every key and leaf of a JSON-like object."""
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path, k
            yield from _walk(v, f"{path}.{k}")
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, obj


def _assert_no_seed(record: dict, seeds=(SECRET,)):
    text = json.dumps(record, default=str)
    for s in seeds:
        assert str(s) not in text and hex(s) not in text, "the seed is in the record"
    for path, item in _walk(json.loads(text)):
        assert not (isinstance(item, str) and "seed" in item.lower() and len(item) < 40), (
            f"a seed field at {path}: {item!r}")


def test_f4_mechanisms_and_transforms_record_no_seed():
    A = _graph(200, 6, 14)
    xf = torch.rand(200, 6, dtype=torch.float64)
    spents = [grr(A.x, 2, 1.0, seed=SECRET)[1], grr_fs(A.x, 2, 1.0, 3, seed=SECRET)[1],
              onebit(xf, 1.0, seed=SECRET)[1], multibit_encode(xf, 2.0, 2, seed=SECRET)[1],
              rr_labels(A.y, 4, 1.0, seed=SECRET)[1],
              E.dprr(A, 1.0, seed=SECRET).spent, E.rr_edges(A, 1.0, seed=SECRET).spent,
              E.local_laplace(A, 1.0, seed=SECRET).spent]
    for s in spents:
        _assert_no_seed(s.to_dict())
    d = GRRFS(1.0, 3, seed=SECRET)(A.clone())
    d = RRLabels(1.0, seed=SECRET)(d)
    d = DPRR(1.0, seed=SECRET)(d)
    _assert_no_seed(Ledger.of(d).to_dict())
    for t in (GRRFS(1.0, 3, seed=SECRET), MultiBit(1.0, seed=SECRET), DPRR(1.0, seed=SECRET)):
        assert str(SECRET) not in repr(t) and hex(SECRET) not in repr(t)


def test_f4_method_reports_record_no_seed():
    from ldpfast.methods import dprr as mdprr
    from ldpfast.methods import lpgnn, rgnn
    from ldpfast.reproduce.dprr import synthetic_graph_classification

    data = _graph(300, 20, 15)
    data.x = data.x.float()
    s = 0x5EC2E7  # rgnn takes seeds < 2**31
    rep = lpgnn.fit(data, 2.0, 2.0, epochs=2, patience=2, seed=s)
    _assert_no_seed(rep.to_dict(), seeds=(s,))
    rep = rgnn.fit(data, 1.0, 1.0, m=2, epochs=2, seed=s, group_size=4, C=4)
    _assert_no_seed(rep.to_dict(), seeds=(s,))
    graphs = synthetic_graph_classification(num_graphs=12, seed=1)
    rep = mdprr.fit(graphs, "dprr", 1.0, runs=1, epochs=1, seed=s)
    _assert_no_seed(rep.to_dict(), seeds=(s,))


def test_f4_saved_commands_hide_the_secret_seed():
    from ldpfast.reproduce._report import public_command

    cmd = public_command("ldpfast reproduce lpgnn", ["--quick", "--seed", "987654321", "--runs", "2"])
    assert "987654321" not in cmd and cmd.endswith("--seed <secret> --runs 2")
    assert "42" not in public_command("ldpfast reproduce rgnn", ["--seed=42"])


def test_f4_method_fits_default_to_a_fresh_secret_seed():
    """seed=None (the default) must not be a fixed, guessable seed."""
    from ldpfast.methods import lpgnn

    data = _graph(200, 12, 16)
    data.x = data.x.float()
    a = lpgnn.fit(data, 1.0, 1.0, epochs=1, patience=1)
    b = lpgnn.fit(data, 1.0, 1.0, epochs=1, patience=1)
    c = lpgnn.fit(data, 1.0, 1.0, epochs=1, patience=1, seed=7)
    d = lpgnn.fit(data, 1.0, 1.0, epochs=1, patience=1, seed=7)
    assert c.accuracy == d.accuracy  # a kept seed reproduces
    assert a.settings["split"] == b.settings["split"]
    # fresh seeds -> different random splits, so different test sets (almost surely)
    assert (a.accuracy, a.val_loss) != (b.accuracy, b.val_loss)
