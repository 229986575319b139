"""DPRR pipeline (paper 001, section V): synthetic dataset, per-graph randomisation, baselines,
degree preservation (Fig. 7), privacy reporting, argument checks.  Fast (< 60 s)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from ldpfast.datasets import synthetic
from ldpfast.methods import dprr as D
from ldpfast.reproduce import dprr as RD


@pytest.fixture(scope="module")
def small_dataset():
    return RD.synthetic_graph_classification(60, classes=2, nodes=(60, 150), seed=1)


def _edge_set(ei):
    return set(map(tuple, ei.t().tolist()))


def test_synthetic_dataset_structure(small_dataset):
    gs = small_dataset
    assert len(gs) == 60
    ys = np.array([int(g.y) for g in gs])
    assert set(ys.tolist()) == {0, 1} and abs(int((ys == 0).sum()) - 30) <= 1
    for g in gs:
        assert 60 <= g.num_nodes <= 150 and g.x is None
        ei = g.edge_index
        assert _edge_set(ei) == _edge_set(ei.flip(0))  # undirected
        assert not bool((ei[0] == ei[1]).any())
    # classes differ in degree law: Q&A (0) sparser with bigger hubs than discussion (1)
    mean_deg = [np.mean([g.edge_index.shape[1] / g.num_nodes for g in gs if int(g.y) == c]) for c in (0, 1)]
    max_rel = [np.mean([int(torch.bincount(g.edge_index[0]).max()) / g.num_nodes for g in gs if int(g.y) == c])
               for c in (0, 1)]
    assert mean_deg[0] < mean_deg[1] - 0.5
    assert max_rel[0] > max_rel[1]
    # same seed, same dataset
    again = RD.synthetic_graph_classification(60, classes=2, nodes=(60, 150), seed=1)
    assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(gs, again))


def test_nonpriv_full_separable(small_dataset):
    # A fixed seed: fit() draws a fresh one by default.  15 epochs left GIN at chance on some
    # seeds (the best epoch is often 15-29); 40 epochs and the mean of 3 runs gave 92-100 %
    # on seeds 0-4.
    rep = D.fit(small_dataset, "nonpriv_full", model="gin", runs=3, epochs=40, split=(0.6, 0.2), threads=1,
                seed=0)
    # chance is 50 %; 12 test graphs.  The classes differ by ~1.2 in mean degree and in hub size
    assert rep.accuracy["mean"] >= 75.0, rep.accuracy
    assert math.isinf(rep.privacy["eps"])
    assert rep.settings["model"] == "gin" and rep.settings["runs"] == 3


def test_dprr_fit_reports_privacy(small_dataset):
    rep = D.fit(small_dataset, "dprr", 1.0, runs=1, epochs=2, threads=1)
    pr = rep.privacy
    assert 0 < pr["eps"] <= 1.0
    assert pr["eps1"] + pr["eps2"] == pytest.approx(pr["eps"], abs=1e-9)
    n_max = max(g.num_nodes for g in small_dataset)
    assert pr["n_max"] == n_max
    assert pr["eps1"] == pytest.approx(max(math.sqrt(8 / (n_max - 1)), 0.1), rel=1e-3)  # eq. 8
    assert "common setting" in pr["guarantee"]
    assert set(rep.accuracy) >= {"mean", "std", "runs"}
    rd = D.randomize_dataset(small_dataset, "locallap", 2.0, seed=3)
    assert rd.privacy["eps"] <= 2.0 and rd.privacy["eps1"] == pytest.approx(0.2, rel=1e-3)
    rd = D.randomize_dataset(small_dataset, "rr", 0.5, seed=3)
    assert rd.privacy["eps"] == 0.5


def test_public_users_send_true_lists(small_dataset):
    gs = small_dataset[:10]
    for method in ("dprr", "rr"):
        rd = D.randomize_dataset(gs, method, 1.0, public_fraction=0.5, seed=5)
        assert "customized" in rd.privacy["guarantee"]
        for g, h in zip(gs, rd.graphs):
            n = g.num_nodes
            assert int(h.public.sum()) == round(0.5 * n)
            true = _edge_set(g.edge_index)
            # symmetrize="none": edge (j, i) for every j in user i's noisy list
            for i in torch.nonzero(h.public).flatten().tolist():
                sent = set(h.edge_index[0, h.edge_index[1] == i].tolist())
                assert sent == {b for a, b in true if a == i}


def test_nonpriv_part_is_induced_subgraph(small_dataset):
    gs = small_dataset[:10]
    rd = D.randomize_dataset(gs, "nonpriv_part", 1.0, public_fraction=0.2, seed=9)
    assert rd.privacy["eps"] == 0.0
    for g, h in zip(gs, rd.graphs):
        ids = h.node_ids
        assert h.num_nodes == ids.numel() == max(1, round(0.2 * g.num_nodes))
        assert h.x.shape == (h.num_nodes, 1) and bool(h.public.all())
        keep = set(ids.tolist())
        expect = {(a, b) for a, b in _edge_set(g.edge_index) if a in keep and b in keep}
        got = {(int(ids[a]), int(ids[b])) for a, b in _edge_set(h.edge_index)}
        assert got == expect
    with pytest.raises(ValueError, match="public_fraction"):
        D.randomize_dataset(gs, "nonpriv_part", 1.0, public_fraction=0.0)


def test_locallap_customized_keeps_public_edges(small_dataset):
    g = small_dataset[0]
    rd = D.randomize_dataset([g], "locallap", 1.0, public_fraction=0.5, seed=2)
    h = rd.graphs[0]
    pub = h.public
    got = _edge_set(h.edge_index)
    assert got == _edge_set(h.edge_index.flip(0))  # undirected
    for a, b in _edge_set(g.edge_index):
        if bool(pub[a]) or bool(pub[b]):
            assert (a, b) in got


def test_degree_features(small_dataset):
    rd = D.randomize_dataset(small_dataset[:3], "nonpriv_full", 1.0, features="degree")
    h, g = rd.graphs[0], small_dataset[0]
    deg = torch.bincount(g.edge_index[1], minlength=g.num_nodes).float()
    assert torch.allclose(h.x[:, 1], torch.log1p(deg))


def test_degree_preservation_ordering(tmp_path):
    # n = 1000, mean degree 20, power law 2.5.  At eps = 1, eq. (8) gives eps1 = 0.1, so DPRR's
    # error per user is about E|Lap(10)| = 10 before the projection (measured MAE ~ 9.0 over 3
    # seeds, sd 0.2); LocalLap keeps T ~ |E| edges that are almost all noise (threshold ~ 4.4
    # at eps2 = 0.9), so its degrees are ~ Poisson(20) regardless of d_i (MAE ~ 11.2, sd 0.2);
    # RR adds ~ (n-1)/(e+1) ~ 270 false edges per user.  A 10 % margin is ~10 sd.
    g = synthetic(1000, 20.0, num_classes=1, homophily=1.0, degree_exponent=2.5, seed=3)
    r = RD.degree_preservation(g, 1.0, seed=0)
    assert r["degree"].shape == r["dprr"].shape == r["rr"].shape == r["locallap"].shape == (1000,)
    assert not r["rr_sampled"]
    mae = r["mae"]
    assert mae["dprr"] < 0.9 * mae["locallap"], mae
    assert mae["dprr"] < 0.1 * mae["rr"], mae
    # ranking of degrees: DPRR keeps it, LocalLap loses it (corr of log degrees)
    assert r["corr"]["dprr"] > 0.45 and r["corr"]["locallap"] < 0.3, r["corr"]
    assert r["privacy"]["dprr"] <= 1.0 and r["privacy"]["locallap"] <= 1.0
    # RR from its exact law when the output is too big: same mean as materialised
    s = RD.degree_preservation(g, 1.0, seed=0, rr_max_edges=1000)
    assert s["rr_sampled"]
    assert abs(s["mean"]["rr"] - r["mean"]["rr"]) < 3.0
    path = RD.plot_degree_preservation(r, tmp_path / "fig7.png")
    assert path.exists() and path.stat().st_size > 1000


def test_bad_inputs(small_dataset):
    gs = small_dataset[:4]
    with pytest.raises(ValueError, match="method"):
        D.randomize_dataset(gs, "laplace", 1.0)
    with pytest.raises(TypeError, match="method"):
        D.randomize_dataset(gs, 3, 1.0)
    with pytest.raises(ValueError, match="eps"):
        D.randomize_dataset(gs, "dprr", -1.0)
    with pytest.raises(TypeError, match="eps"):
        D.randomize_dataset(gs, "dprr", "1")
    with pytest.raises(ValueError, match="public_fraction"):
        D.randomize_dataset(gs, "dprr", 1.0, public_fraction=1.0)
    with pytest.raises(TypeError, match="graphs"):
        D.randomize_dataset("REDDIT", "dprr", 1.0)
    with pytest.raises(TypeError, match="graphs"):
        D.randomize_dataset([], "dprr", 1.0)
    with pytest.raises(ValueError, match="features"):
        D.randomize_dataset(gs, "dprr", 1.0, features="onehot")
    with pytest.raises(ValueError, match="rr_max_edges"):
        D.randomize_dataset(gs, "rr", 1.0, rr_max_edges=100)
    with pytest.raises(ValueError, match="eps1"):  # eq. 8: sqrt(8 / (n_max - 1)) >= eps
        D.randomize_dataset(gs, "dprr", 0.1)
    with pytest.raises(ValueError, match="model"):
        D.fit(gs, "dprr", 1.0, model="gat")
    with pytest.raises(ValueError, match="split"):
        D.fit(gs, "dprr", 1.0, split=(0.9, 0.2))
    with pytest.raises(ValueError, match="runs"):
        D.fit(gs, "dprr", 1.0, runs=0)
    with pytest.raises(ValueError, match="classes"):
        RD.synthetic_graph_classification(10, classes=1)
    with pytest.raises(TypeError, match="nodes"):
        RD.synthetic_graph_classification(10, nodes=100)
    with pytest.raises(ValueError, match="nodes"):
        RD.synthetic_graph_classification(10, nodes=(100, 50))
    with pytest.raises(TypeError, match="graph"):
        RD.degree_preservation(np.zeros(3), 1.0)


def test_reproduce_smoke(tmp_path):
    argv = ["--graphs", "16", "--nodes", "40", "60", "--runs", "1", "--epochs", "1", "--eps", "1",
            "--alphas", "0", "0.5", "--no-facebook", "--degree-nodes", "300", "--rr-max-edges", "1000",
            "--out", str(tmp_path)]
    assert RD.reproduce_main(argv) == 0
    import json

    res = json.loads((tmp_path / "dprr.json").read_text())
    methods = {(r["method"], r["alpha"]) for r in res["rows"]}
    assert {("DPRR", 0.0), ("NonPriv-Full", 0.0), ("NonPriv-Part", 0.5), ("LocalLap", 0.5)} <= methods
    assert all("skipped" in r for r in res["rows"] if r["method"] == "RR")  # over the 1000-edge limit
    for f in ("dprr.md", "dprr_accuracy_vs_eps.png", "dprr_accuracy_vs_alpha.png", "dprr_degrees_synthetic-n300.png"):
        assert (tmp_path / f).exists()
