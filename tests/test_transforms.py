"""PyG transforms: ledgers, no mutation of the input, masks, discretisation helpers."""
from __future__ import annotations

import math

import pytest
import torch
from torch_geometric.data import Data

from ldpfast.privacy import Ledger, grr_fs_epsilon
from ldpfast.transforms import (
    GRRFS,
    RGNN_GROUP_SIZES,
    Discretize,
    GroupBinaryFeatures,
    MultiBit,
    OneBit,
    RRLabels,
    discretize,
    group_binary_features,
    quantile_boundaries,
)


def _data(n=60, d=12, c=3):
    g = torch.Generator().manual_seed(0)
    idx = torch.randperm(n, generator=g)
    train = torch.zeros(n, dtype=torch.bool)
    val = torch.zeros(n, dtype=torch.bool)
    train[idx[:30]] = True
    val[idx[30:45]] = True
    return Data(x=(torch.rand(n, d, generator=g) < 0.3).float(),
                y=torch.randint(0, c, (n,), generator=g),
                edge_index=torch.randint(0, n, (2, 200), generator=g),
                train_mask=train, val_mask=val, test_mask=~(train | val))


def _snapshot(data):
    return {k: v.clone() if isinstance(v, torch.Tensor) else v for k, v in data.to_dict().items()}


def _unchanged(data, snap):
    now = data.to_dict()
    assert set(now) == set(snap)
    for k, v in snap.items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(now[k], v), k


def test_pipeline_records_the_total_budget_and_does_not_mutate():
    data = _data()
    snap = _snapshot(data)
    d1 = GRRFS(eps_x=0.5, m=4, seed=0)(data)
    d2 = RRLabels(eps=1.0, seed=1)(d1)
    _unchanged(data, snap)
    assert "ldp_ledger" not in data.to_dict()
    led = Ledger.of(d2)
    assert [e.mechanism for e in led.entries] == ["grr_fs", "rr_labels"]
    assert led.eps == pytest.approx(4 * 0.5 + 1.0)
    assert led.by_target() == pytest.approx({"features": 2.0, "labels": 1.0})
    assert len(Ledger.of(d1).entries) == 1  # the earlier Data's ledger is not appended to
    assert d2.x.dtype == torch.float32 and set(d2.x.unique().tolist()) <= {0.0, 1.0}
    assert all("seed" not in e.params for e in led.entries)  # the seed stays with the caller


def test_grrfs_paper_accounting_and_domain():
    data = _data()
    data.x = torch.randint(0, 3, data.x.shape)
    out = GRRFS(eps_x=1.0, m=3, domain=3, seed=2, accounting="rgnn_theorem1")(data)
    e = Ledger.of(out).entries[0]
    assert e.eps == pytest.approx(grr_fs_epsilon(1.0, 3, 12)) and e.params["eps_exact"] == 3.0
    assert out.x.dtype == torch.int64 and int(out.x.max()) <= 2


def test_grrfs_rejects_non_categorical_features():
    data = _data()
    data.x = data.x + 0.5
    snap = _snapshot(data)
    with pytest.raises(ValueError, match="categorical"):
        GRRFS(1.0, 2)(data)
    data.x[0, 0] = 5.0
    data.x = data.x.round()
    with pytest.raises(ValueError, match="domain"):
        GRRFS(1.0, 2)(data)
    assert torch.equal(data.x[1:], snap["x"][1:].round())


def test_rrlabels_default_mask_is_train_and_val():
    data = _data()
    out = RRLabels(eps=0.1, seed=3)(data)
    mask = data.train_mask | data.val_mask
    assert torch.equal(out.y_rr_mask, mask)
    assert torch.equal(out.y[data.test_mask], data.y[data.test_mask])  # test labels stay clean
    assert not torch.equal(out.y[mask], data.y[mask])
    assert Ledger.of(out).entries[0].params["num_randomised"] == int(mask.sum())


def test_rrlabels_mask_options():
    data = _data()
    n = data.num_nodes
    assert RRLabels(1.0, mask="all", seed=1)(data).y_rr_mask.all()
    assert torch.equal(RRLabels(1.0, mask="train", seed=1)(data).y_rr_mask, data.train_mask)
    m = torch.arange(n) < 5
    out = RRLabels(1.0, mask=m, seed=1)(data)
    assert torch.equal(out.y[5:], data.y[5:])
    del data.val_mask
    assert RRLabels(1.0, seed=1)(data).y_rr_mask.all()  # no split: every node reports
    with pytest.raises(TypeError, match="mask"):
        RRLabels(1.0, mask="nope")(data)


def test_multibit_and_onebit_transforms():
    data = _data()
    data.x = torch.rand(data.x.shape)
    snap = _snapshot(data)
    out = MultiBit(eps=5.0, seed=4)(data)
    assert out.x.dtype == torch.float32
    e = Ledger.of(out).entries[0]
    assert e.mechanism == "multibit" and e.eps == 5.0 and e.params["m"] == 2
    raw = MultiBit(eps=5.0, rectify=False, seed=4)(data)
    assert raw.x.dtype == torch.int8 and ((raw.x != 0).sum(1) == 2).all()
    one = OneBit(eps=2.0, seed=5)(data)
    assert Ledger.of(one).entries[0].params["m"] == 12
    _unchanged(data, snap)
    data.x[0, 0] = 1.5
    with pytest.raises(ValueError, match="alpha, beta"):
        MultiBit(eps=1.0)(data)


@pytest.mark.parametrize("name,d,dprime", [("citeseer", 3703, 53), ("cora", 1433, 58),
                                          ("dblp", 1639, 33), ("facebook", 4714, 48)])
def test_group_sizes_reproduce_table_1(name, d, dprime):
    assert group_binary_features(torch.zeros(2, d), RGNN_GROUP_SIZES[name]).shape == (2, dprime)


def test_grouping_is_block_or_as_in_rgnn_code():
    g = torch.Generator().manual_seed(1)
    x = (torch.rand(30, 23, generator=g) < 0.05).float()
    out = group_binary_features(x, 5)
    # RGNN data.py preprocess_features, transcribed
    cols = []
    for index in range(0, 23, 5):
        cols.append(x[:, index:index + 5].sum(dim=1))
    ref = torch.stack(cols, 1)
    ref[ref > 0] = 1
    assert torch.equal(out, ref)
    assert torch.equal(GroupBinaryFeatures(5)(Data(x=x)).x, ref)


def test_cora_grouped_sparsity_matches_table_1():
    from ldpfast.datasets import load

    data = load("cora")  # embedded in the package
    x = group_binary_features(data.x, RGNN_GROUP_SIZES["cora"])
    assert x.shape == (2708, 58)
    sparsity = 100 * (x == 0).float().mean().item()
    assert abs(sparsity - 73.8) < 0.5  # Table I: 73.8 %


def test_discretize_and_quantiles():
    x = torch.tensor([[0.1, 5.0], [0.5, 1.0], [0.9, -1.0]])
    b = torch.tensor([0.5, 1.0])
    assert discretize(x, b).tolist() == [[0, 2], [0, 1], [1, 0]]  # right-closed bins
    q = quantile_boundaries(torch.arange(100.0).reshape(100, 1), 4)
    assert q.shape == (3, 1)
    cats = discretize(torch.arange(100.0).reshape(100, 1), q)
    assert torch.bincount(cats[:, 0]).tolist() == [25, 25, 25, 25]
    out = Discretize(b)(Data(x=x))
    assert out.x_domain == 3 and torch.equal(out.x, discretize(x, b))
    with pytest.raises(ValueError, match="sorted"):
        discretize(x, torch.tensor([1.0, 0.5]))
    with pytest.raises(ValueError, match="NaN"):
        discretize(torch.tensor([[math.nan]]), b)
