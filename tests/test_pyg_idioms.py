"""PyG idioms (issue 33, item 3): arguments checked at construction, ``aggr="sum"``, masks as
bool or node-id tensors everywhere, ``-1`` labels outside the mask, mask lengths named in the
error, KProp's cached result, LPGNN's label denoising and loss in ``ldpfast.nn``, edge
transforms that say what their output is."""
from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest
import torch
from torch_geometric.data import Data
from torch_geometric.utils import to_undirected

import ldpfast as lf
from ldpfast import ops
from ldpfast.graph import to_csr
from ldpfast.mechanisms import rr_labels
from ldpfast.nn import KProp
from ldpfast.transforms import (
    DPRR,
    GRRFS,
    Discretize,
    KPropFeatures,
    LocalLap,
    MultiBit,
    NoisyGraphWarning,
    OneBit,
    RREdges,
    RRLabels,
)

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _graph(n=60, e=150, seed=0, c=3):
    g = torch.Generator().manual_seed(seed)
    ei = to_undirected(torch.randint(0, n, (2, e), generator=g))
    ei = ei[:, ei[0] != ei[1]]
    idx = torch.randperm(n, generator=g)
    train = torch.zeros(n, dtype=torch.bool)
    val = torch.zeros(n, dtype=torch.bool)
    train[idx[:30]] = True
    val[idx[30:45]] = True
    return Data(x=(torch.rand(n, 8, generator=g) < 0.3).float(), y=torch.randint(0, c, (n,), generator=g),
                edge_index=ei, train_mask=train, val_mask=val, test_mask=~(train | val))


# --- arguments checked when a transform is constructed ---------------------------------------
@pytest.mark.parametrize("make,err,match", [
    (lambda: GRRFS(1.0, m=4, domain=[2, 2, 3]), ValueError, "m: .*d = 3"),
    (lambda: GRRFS(1.0, m=2, domain=torch.ones(2, 2, dtype=torch.int64)), ValueError, "domain"),
    (lambda: GRRFS(1.0, m=2, backend="gpu"), ValueError, "backend"),
    (lambda: MultiBit(1.0, backend="fast"), ValueError, "backend"),
    (lambda: OneBit(1.0, backend=3), ValueError, "backend"),
    (lambda: RRLabels(1.0, backend="nope"), ValueError, "backend"),
    (lambda: RRLabels(1.0, mask=torch.tensor([0, 3, 3])), ValueError, "mask: .*distinct"),
    (lambda: RRLabels(1.0, mask=torch.tensor([-1, 3])), ValueError, "mask: .*node ids"),
    (lambda: RRLabels(1.0, mask=torch.ones(3, 2, dtype=torch.bool)), ValueError, "mask"),
    (lambda: RRLabels(1.0, mask=torch.ones(3)), TypeError, "mask"),
    (lambda: RRLabels(1.0, mask=""), TypeError, "mask"),
    (lambda: DPRR(1.0, eps1=1.5), ValueError, "eps1"),
    (lambda: DPRR(0.4, n_max=40), ValueError, "eps1.*eq. 8"),
    (lambda: DPRR(1.0, public=0.5), TypeError, "public"),
    (lambda: DPRR(1.0, public=torch.tensor([1, 1])), ValueError, "public: .*distinct"),
    (lambda: DPRR(1.0, backend="c"), ValueError, "backend"),
    (lambda: RREdges(1.0, public=torch.zeros(4)), TypeError, "public"),
    (lambda: RREdges(1.0, backend="c"), ValueError, "backend"),
    (lambda: LocalLap(1.0, backend="c"), ValueError, "backend"),
    (lambda: Discretize(torch.tensor([1.0, 0.5])), ValueError, "sorted"),
    (lambda: Discretize(torch.tensor([0.5, math.nan])), ValueError, "NaN"),
    (lambda: Discretize([0.5]), TypeError, "boundaries"),
    (lambda: KPropFeatures(-1), ValueError, "k"),
    (lambda: KPropFeatures(2, aggr="max"), ValueError, "aggr"),
])
def test_transforms_check_their_arguments_when_constructed(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_valid_arguments_still_construct():
    GRRFS(1.0, m=3, domain=[2, 2, 3])
    GRRFS(1.0, m=3, domain=torch.tensor([2, 5, 3]))
    RRLabels(1.0, mask=torch.tensor([4, 0, 2]), num_classes=3, backend="CPP")
    DPRR(1.0, eps1=0.1, public=torch.tensor([0, 5]))
    DPRR(2.0, n_max=100)


# --- aggr="sum" ------------------------------------------------------------------------------
def test_aggr_sum_is_add():
    d = _graph()
    x = torch.rand(d.num_nodes, 4, dtype=torch.float64)
    want = ops.propagate(d.edge_index, x, 2, "add")
    assert torch.equal(ops.propagate(d.edge_index, x, 2, "sum"), want)
    for cached in (False, True):
        layer = KProp(k=2, aggr="sum", cached=cached)
        assert layer.norm == "add" and torch.equal(layer(x, d.edge_index), want)
    d.x = x
    assert torch.equal(KPropFeatures(2, aggr="sum")(d).x, want)
    with pytest.raises(ValueError, match="aggr: .*'sum'"):
        ops.propagate(d.edge_index, x, 1, "max")


# --- masks: bool or node ids -----------------------------------------------------------------
def test_rr_labels_and_RRLabels_take_node_ids():
    d = _graph()
    n, mask = d.num_nodes, d.train_mask | d.val_mask
    ids = torch.nonzero(mask).flatten()
    want, _ = rr_labels(d.y, 3, 1.0, seed=3, mask=mask)
    for m in (ids, ids.flip(0), ids.to(torch.int32)):
        got, spent = rr_labels(d.y, 3, 1.0, seed=3, mask=m)
        assert torch.equal(got, want) and spent.params["num_randomised"] == int(mask.sum())
    a = RRLabels(1.0, mask=mask, seed=4)(d)
    b = RRLabels(1.0, mask=ids, seed=4)(d)
    assert torch.equal(a.y, b.y) and torch.equal(b.y_rr_mask, mask) and b.y_rr_mask.dtype == torch.bool
    # PyG datasets holding their split as node ids
    d2 = d.clone()
    d2.train_mask, d2.val_mask = torch.nonzero(d.train_mask).flatten(), torch.nonzero(d.val_mask).flatten()
    c = RRLabels(1.0, seed=4)(d2)
    assert torch.equal(c.y, a.y) and torch.equal(c.y_rr_mask, mask)
    with pytest.raises(ValueError, match=rf"mask: node ids must lie in \[0, {n}\)"):
        RRLabels(1.0, mask=torch.tensor([0, n]), seed=4)(d)
    with pytest.raises(ValueError, match="mask: node ids must be distinct, got node 7"):
        rr_labels(d.y, 3, 1.0, seed=3, mask=torch.tensor([7, 1, 7]))
    with pytest.raises(TypeError, match="uint8.*mask.bool()"):
        rr_labels(d.y, 3, 1.0, seed=3, mask=mask.to(torch.uint8))


def test_propagate_kprop_and_estimation_take_node_ids():
    d = _graph()
    x = torch.rand(d.num_nodes, 3, dtype=torch.float64)
    ids = torch.nonzero(d.train_mask).flatten()
    for aggr in ("mean", "gcn"):
        want = ops.propagate(d.edge_index, x, 2, aggr, mask=d.train_mask)
        assert torch.equal(ops.propagate(d.edge_index, x, 2, aggr, mask=ids), want)
        assert torch.equal(KProp(2, aggr, cached=True)(x, d.edge_index, mask=ids), want)
    xi = torch.randint(0, 4, (d.num_nodes, 2))
    assert torch.equal(lf.estimation.observed_frequencies(xi, 4, ids),
                       lf.estimation.observed_frequencies(xi, 4, d.train_mask))


def test_rgnn_and_edge_public_take_node_ids():
    from ldpfast.methods import rgnn

    d = _graph()
    csr = to_csr(d.edge_index, d.num_nodes)
    ids = torch.nonzero(d.train_mask).flatten()
    a = rgnn.reconstruct_labels(d.y, d.train_mask, csr, 3, 1.0)
    b = rgnn.reconstruct_labels(d.y, ids, csr, 3, 1.0)
    assert torch.equal(a, b)
    pub_ids = torch.tensor([1, 4, 9])
    pub = torch.zeros(d.num_nodes, dtype=torch.bool)
    pub[pub_ids] = True
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoisyGraphWarning)
        for T in (DPRR, RREdges):
            x, y = T(2.0, seed=5, public=pub)(d), T(2.0, seed=5, public=pub_ids)(d)
            assert torch.equal(x.edge_index, y.edge_index), T.__name__
        e1 = lf.mechanisms.edges.dprr(csr, 2.0, seed=1, public=pub)
        e2 = lf.mechanisms.edges.dprr(csr, 2.0, seed=1, public=pub_ids)
    assert torch.equal(e1.noisy.col, e2.noisy.col)


def test_heterpoisson_refuses_repeated_node_ids():
    from ldpfast.sampling import HeterPoisson

    d = _graph()
    with pytest.raises(ValueError, match="train_nodes: node ids must be distinct"):
        HeterPoisson(d, 0.5, 1.0, seed=0, train_nodes=torch.tensor([0, 3, 3]))


def test_wrong_length_split_masks_are_named():
    d = _graph()
    d.train_mask = d.train_mask[:-1]  # a raw RuntimeError from `train_mask | val_mask` before
    with pytest.raises(ValueError, match=r"data.train_mask: a bool mask needs one entry per node \(60\), got 59"):
        RRLabels(1.0, seed=0)(d)
    d = _graph()
    d.val_mask = torch.ones(61, dtype=torch.bool)
    with pytest.raises(ValueError, match="data.val_mask"):
        RRLabels(1.0, mask="val_mask", seed=0)(d)
    with pytest.raises(ValueError, match=r"mask: a bool mask needs one entry per node \(60\)"):
        RRLabels(1.0, mask=torch.ones(59, dtype=torch.bool), seed=0)(_graph())


# --- -1 labels outside the mask --------------------------------------------------------------
def _unlabelled(n=60, c=3):
    d = _graph(n, c=c)
    d.y[d.test_mask] = -1  # PyG's unlabelled nodes: outside train_mask | val_mask
    return d


def test_minus_one_labels_outside_the_mask():
    d = _unlabelled()
    unl = d.y < 0
    out = RRLabels(1.0, seed=1)(d)  # num_classes inferred from y.max()
    assert torch.equal(out.y[unl], d.y[unl])
    assert lf.privacy.Ledger.of(out).entries[0].params["num_classes"] == 3
    y2, _ = rr_labels(d.y, 3, 1.0, seed=2, mask=d.train_mask | d.val_mask)
    assert (y2[unl] == -1).all()
    with pytest.raises(ValueError, match="label -1 of node"):
        RRLabels(1.0, mask="all", seed=1)(d)


def test_fits_split_the_labelled_nodes_only():
    from ldpfast.methods import lpgnn, rgnn

    d = _unlabelled()
    for eps in (1.0, math.inf):  # refused before ("label -1 of node ..."), whatever the mask
        r = lpgnn.fit(d, eps, eps, seed=0, epochs=2, dataset="cora")
        assert 0.0 <= r.accuracy <= 1.0
    r = rgnn.fit(d, 1.0, 1.0, seed=0, epochs=2, C=4, m=4)
    assert 0.0 <= r.accuracy <= 1.0
    from ldpfast.methods._common import labelled_split, random_split

    masks = labelled_split(d.y, 7)
    assert not any(m[d.y < 0].any() for m in masks) and sum(int(m.sum()) for m in masks) == 45
    full = _graph()  # every node labelled: the split of all nodes, as before
    assert all(torch.equal(a, b) for a, b in zip(labelled_split(full.y, 7), random_split(60, 7)))
    with pytest.raises(ValueError, match="label -2 of node 3"):
        labelled_split(torch.tensor([0, 1, 0, -2]), 1)


def test_heterpoisson_fit_splits_the_labelled_nodes_only():
    from ldpfast.methods import heterpoisson
    from ldpfast.methods.heterpoisson import split_nodes

    d = _unlabelled()
    lab = d.y >= 0
    tr, te = split_nodes(d.num_nodes, 3, labelled=lab)
    assert not (tr | te)[~lab].any() and int((tr | te).sum()) == int(lab.sum())
    all_tr, _ = split_nodes(60, 3)  # every node labelled: the split as before
    assert torch.equal(split_nodes(60, 3, labelled=torch.ones(60, dtype=torch.bool))[0], all_tr)
    r = heterpoisson.fit(d, 8.0, M=2, expected_batch_size=16, epochs=1, hidden=8, seed=0)  # refused -1 before
    assert 0.0 <= r.accuracy <= 1.0


# --- KProp's cached result and the precompute transform --------------------------------------
def test_kprop_cache_result_is_sgconv_cached(monkeypatch):
    d = _graph()
    x = torch.rand(d.num_nodes, 5)
    want = KProp(3, "gcn")(x, d.edge_index)
    layer = KProp(3, "gcn", cache_result=True)
    first = layer(x, d.edge_index)
    assert torch.equal(first, want)
    calls = []
    monkeypatch.setattr(ops, "propagate", lambda *a, **k: calls.append(1))
    assert layer(x, d.edge_index) is first and not calls  # served from the cache
    monkeypatch.undo()
    with pytest.raises(ValueError, match="another input"):
        layer(x.clone(), d.edge_index)
    x.mul_(2.0)  # modified in place
    with pytest.raises(ValueError, match="another input"):
        layer(x, d.edge_index)
    layer.reset_cache()
    assert torch.equal(layer(x, d.edge_index), KProp(3, "gcn")(x, d.edge_index))
    with pytest.raises(ValueError, match="requires grad"):
        KProp(2, cache_result=True)(x.requires_grad_(), d.edge_index)
    with pytest.raises(TypeError, match="cache_result"):
        KProp(2, cache_result=1)
    assert "Which cache when" in KProp.__doc__ and "KPropFeatures" in KProp.__doc__


def test_kprop_features_precomputes_kprop():
    d = _graph()
    d.x = torch.rand(d.num_nodes, 5)
    out = KPropFeatures(3)(d)
    assert torch.equal(out.x, KProp(3, "gcn")(d.x, d.edge_index))
    import torch_geometric.transforms as T

    adj = T.ToSparseTensor()(d.clone())
    assert torch.allclose(KPropFeatures(3)(adj).x, out.x)


# --- LPGNN's label denoising and loss in ldpfast.nn ------------------------------------------
def test_lpgnn_label_denoising_and_loss_are_public_in_nn():
    import torch.nn.functional as F

    from ldpfast.methods import lpgnn

    assert lpgnn.rr_transition is lf.nn.rr_transition  # the old path still works, no twin
    d = _unlabelled()
    labelled = d.train_mask | d.val_mask
    kp = KProp(2, "gcn", cached=True)
    y_t = lf.nn.denoise_labels(d.y, labelled, d.edge_index, kp)
    Y = F.one_hot(d.y.clamp(min=0), 3).float() * labelled[:, None]
    agg = KProp(2, "gcn")(Y, d.edge_index)
    assert torch.equal(y_t, torch.where(agg.sum(1) > 0, agg.argmax(1), d.y))
    assert torch.equal(lf.nn.denoise_labels(d.y, torch.nonzero(labelled).flatten(), d.edge_index, kp), y_t)
    logits = torch.randn(d.num_nodes, 3, requires_grad=True)
    P = lf.nn.rr_transition(3, 1.0)
    loss = lf.nn.corrected_loss(logits, y_t, d.train_mask, P, kp, d.edge_index)
    p = F.softmax(KProp(2, "gcn")(F.softmax(logits, 1) @ P, d.edge_index), 1)
    assert torch.allclose(loss, F.nll_loss(torch.log(p[d.train_mask] + 1e-12), y_t[d.train_mask]))
    loss.backward()
    assert logits.grad is not None
    fc = lf.nn.corrected_loss(logits, d.y, d.val_mask, P)
    assert torch.allclose(fc, F.nll_loss(torch.log((F.softmax(logits, 1) @ P)[d.val_mask]), d.y[d.val_mask]))
    with pytest.raises(ValueError, match="masked nodes"):
        lf.nn.denoise_labels(d.y, torch.ones(d.num_nodes, dtype=torch.bool), d.edge_index, kp)
    text = (EXAMPLES / "lpgnn.py").read_text()
    assert "lf.nn.denoise_labels" in text and "lf.nn.corrected_loss" in text
    assert "import paper_settings, rr_transition" not in text


# --- edge transforms: output direction, mostly-false-edges and dropped-attribute warnings ----
def test_edge_transforms_document_their_output_direction():
    for T in (DPRR, RREdges):
        assert "source_to_target" in T.__doc__ and "directed" in T.__doc__
    assert "undirected" in LocalLap.__doc__ and "is_undirected()" in LocalLap.__doc__


@pytest.mark.parametrize("make,budget", [(lambda e: DPRR(e, seed=1), "eps2"), (lambda e: RREdges(e, seed=1), "eps"),
                                         (lambda e: LocalLap(e, seed=1), "eps2")], ids=["DPRR", "RREdges", "LocalLap"])
def test_edge_transforms_warn_when_the_output_is_mostly_false_edges(make, budget):
    d = _graph(200, 300)  # ~3 neighbours of 199: false edges win below eps ~ ln(196/3) = 4.2
    with pytest.warns(NoisyGraphWarning, match=rf"mostly false edges.*only for {budget} > 4\.[0-9]"):
        make(1.0)(d)
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoisyGraphWarning)
        make(9.0)(d)


def test_expected_edges_matches_the_output():
    from ldpfast.transforms import expected_edges

    d = _graph(300, 900, seed=2)
    csr = to_csr(d.edge_index, d.num_nodes)
    true = set(map(tuple, d.edge_index.t().tolist()))
    for T in (DPRR(2.0, seed=3), RREdges(2.0, seed=3)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoisyGraphWarning)
            out = T(d)
        kept = sum((i, j) in true for i, j in out.edge_index.t().tolist())
        e = expected_edges(csr, T.last_result)
        assert abs(kept - e["true_kept"]) < 4 * math.sqrt(e["true_kept"]) + 5, (type(T).__name__, kept, e)
        false = out.edge_index.size(1) - kept
        assert abs(false - e["false"]) < 4 * math.sqrt(e["false"]) + 5, (type(T).__name__, false, e)


@pytest.mark.parametrize("rule", ["and", "or"])
def test_expected_edges_counts_the_server_graph_of_the_and_or_rules(rule):
    """Under symmetrize="and" / "or" the counts are those of the server graph (both directions):
    a true edge survives with p^2 q_i q_j ("and"), so the threshold halves."""
    from ldpfast.transforms import expected_edges

    d = _graph(300, 900, seed=4)
    csr = to_csr(d.edge_index, d.num_nodes)
    true = set(map(tuple, d.edge_index.t().tolist()))
    for T in (DPRR(4.0, seed=5, symmetrize=rule), RREdges(3.0, seed=5, symmetrize=rule)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", NoisyGraphWarning)
            out = T(d)
        kept = sum((i, j) in true for i, j in out.edge_index.t().tolist())
        e = expected_edges(csr, T.last_result)
        assert abs(kept - e["true_kept"]) < 4 * math.sqrt(e["true_kept"]) + 5, (rule, type(T).__name__, kept, e)
        false = out.edge_index.size(1) - kept
        assert abs(false - e["false"]) < 4 * math.sqrt(e["false"]) + 5, (rule, type(T).__name__, false, e)
    non, edges = 300 * 299 - csr.nnz, csr.nnz
    lists = math.log(non / edges)
    if rule == "and":
        assert e["threshold"] == pytest.approx(lists / 2)
    else:  # "or" adds false edges from both lists: a higher threshold, where the rates balance
        assert e["threshold"] > lists
        x = 1 / (1 + math.exp(e["threshold"]))
        assert (1 - x * x) * edges == pytest.approx((2 * x - x * x) * non)


def test_rr_and_rule_warns_only_below_its_own_threshold():
    d = _graph(200, 300)  # ln(196/3) = 4.2 for the lists, about 2.1 for the "and" rule
    with warnings.catch_warnings():
        warnings.simplefilter("error", NoisyGraphWarning)
        RREdges(3.0, seed=1, symmetrize="and")(d)  # the lists are mostly false, the server graph is not
    with pytest.warns(NoisyGraphWarning, match=r"symmetrize='and'.*only for eps > 2\.[0-9]"):
        RREdges(1.5, seed=1, symmetrize="and")(d)


def test_edge_transforms_warn_when_they_drop_edge_attributes():
    d = _graph()
    d.edge_attr = torch.rand(d.edge_index.size(1), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoisyGraphWarning)
        with pytest.warns(UserWarning, match="RREdges: dropped data.edge_attr"):
            out = RREdges(5.0, seed=0)(d)
    assert "edge_attr" not in out
