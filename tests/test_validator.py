"""ldpfast.privacy.validate / fix (issue 38, part 2): Opacus' ModuleValidator for node-level DP-SGD."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from test_heterpoisson import random_graph

import ldpfast as lf
from ldpfast.privacy.dpsgd import SubgraphGradSampleModule, SubgraphMixingError
from ldpfast.sampling import HeterPoisson


class Net(torch.nn.Module):
    """A bit of everything: fast, general, fixable and unfixable layers."""

    def __init__(self, pairnorm=True):
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv, LayerNorm, PairNorm

        self.conv = GATConv(6, 8)
        self.bn = torch.nn.BatchNorm1d(8)
        self.ln = LayerNorm(8)  # mode="graph" by default
        self.gcn = GCNConv(8, 8, cached=True)
        self.pn = PairNorm() if pairnorm else torch.nn.Identity()
        self.gru = torch.nn.GRUCell(8, 8)
        self.head = torch.nn.Linear(8, 3)

    def forward(self, x, edge_index):
        h = F.elu(self.conv(x, edge_index))
        h = self.pn(self.ln(self.bn(h)))
        return self.head(self.gru(F.elu(self.gcn(h, edge_index))))


def _row(report, name):
    return next(r for r in report.rows if r.name == name)


def test_validate_lists_every_module_with_its_path():
    net = Net()
    before = {k: v.clone() for k, v in net.state_dict().items()}
    rep = lf.privacy.validate(net)
    assert [r.name for r in rep.rows] == [n for n, _ in net.named_modules()]
    assert _row(rep, "conv").status == "fast" and set(_row(rep, "conv").fast) == {"att_src", "att_dst", "bias"}
    assert _row(rep, "conv.lin").status == "fast" and _row(rep, "head").status == "fast"
    assert _row(rep, "gru").status == "general" and "GRUCell" in _row(rep, "gru").detail
    assert rep.general == ["gru.weight_ih", "gru.weight_hh", "gru.bias_ih", "gru.bias_hh"]
    for name, fixable, why in [("bn", True, "batch's statistics"), ("ln", True, "mode='graph'"),
                               ("gcn", True, "cached=True"), ("pn", False, "mean over all nodes")]:
        r = _row(rep, name)
        assert r.status == "refused" and r.fixable == fixable and why in r.detail, r
    assert _row(rep, "").status == "no parameters"
    assert not rep.ok and len(rep.fixable) == 3
    text = str(rep)
    for piece in ("GATConv", "BatchNorm1d", "refused (fixable)", "general", "4 refused (3 fixable"):
        assert piece in text
    # validating changes nothing
    assert all(torch.equal(before[k], v) for k, v in net.state_dict().items())
    assert net.gcn.cached and net.ln.mode == "graph"
    with pytest.raises(SubgraphMixingError, match="PairNorm"):
        lf.privacy.validate(net, strict=True)


def test_validate_agrees_with_the_wrapper():
    net = Net(pairnorm=False)
    fixed = lf.privacy.fix(net)
    rep = lf.privacy.validate(fixed, strict=True)
    assert rep.ok
    assert SubgraphGradSampleModule(fixed).general_parameters == rep.general
    forced = lf.privacy.validate(fixed, grad_path="general")
    assert len(forced.general) == sum(1 for p in fixed.parameters() if p.requires_grad)


def test_fix_swaps_what_has_a_per_node_equivalent():
    from torch_geometric.nn import BatchNorm as PygBatchNorm
    from torch_geometric.nn import LayerNorm

    torch.manual_seed(0)
    net = Net()
    for p in net.bn.parameters():
        torch.nn.init.normal_(p)
    fixed = lf.privacy.fix(net)
    assert fixed is not net and isinstance(net.bn, torch.nn.BatchNorm1d) and net.gcn.cached  # a copy
    assert isinstance(fixed.bn, torch.nn.GroupNorm) and fixed.bn.num_groups == 1
    assert torch.equal(fixed.bn.weight, net.bn.weight) and torch.equal(fixed.bn.bias, net.bn.bias)
    assert isinstance(fixed.ln, LayerNorm) and fixed.ln.mode == "node"
    assert not fixed.gcn.cached
    assert isinstance(fixed.pn, type(net.pn))  # no per-node equivalent: left, still refused
    rep = lf.privacy.validate(fixed)
    assert [r.name for r in rep.refused] == ["pn"] and not rep.fixable
    # GroupNorm(1, C) is the per-node normalisation of the features (LayerNorm for (N, C))
    x = torch.randn(5, 8)
    ref = F.layer_norm(x, (8,), fixed.bn.weight, fixed.bn.bias, fixed.bn.eps)
    assert torch.allclose(fixed.bn(x), ref, atol=1e-5)
    # in place, PyG's BatchNorm, and a bare BatchNorm as the model
    seq = torch.nn.Sequential(torch.nn.Linear(4, 4), PygBatchNorm(4))
    assert lf.privacy.fix(seq, inplace=True) is seq and isinstance(seq[1], torch.nn.GroupNorm)
    assert isinstance(lf.privacy.fix(torch.nn.BatchNorm1d(3)), torch.nn.GroupNorm)
    # a model without refused layers comes back computing the same thing
    clean = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.LayerNorm(4))
    assert torch.equal(lf.privacy.fix(clean)(x[:, :4]), clean(x[:, :4]))
    with pytest.raises(TypeError, match="model"):
        lf.privacy.fix("not a model")
    with pytest.raises(TypeError, match="inplace"):
        lf.privacy.fix(clean, inplace=1)


class Center(torch.nn.Module):
    def forward(self, x):
        return x - x.mean(0)


def test_validate_with_a_batch_runs_the_runtime_check():
    from torch_geometric.nn import GCNConv

    b = HeterPoisson(random_graph(n=200, m=1500, seed=3), 0.2, 2.0, seed=1).sample(0)
    net = torch.nn.Module()
    net.conv, net.center, net.head = GCNConv(6, 8), Center(), torch.nn.Linear(8, 3)
    net.forward = lambda x, ei: net.head(net.center(net.conv(x, ei)))
    quiet = lf.privacy.validate(net)
    assert quiet.ok and "not run" in quiet.summary()  # no list knows Center
    rep = lf.privacy.validate(net, batch=b)
    assert rep.runtime_checked and [r.name for r in rep.refused] == ["center"]
    assert "run-time check" in _row(rep, "center").detail and not _row(rep, "center").fixable
    with pytest.raises(SubgraphMixingError, match="center"):
        rep.raise_if_refused()
    net.center = torch.nn.Identity()
    assert lf.privacy.validate(net, batch=b).ok
    with pytest.raises(TypeError, match="batch"):
        lf.privacy.validate(net, batch=object())
    with pytest.raises(TypeError, match="already a SubgraphGradSampleModule"):
        lf.privacy.validate(SubgraphGradSampleModule(net))
