"""LPGNN pipeline: transition matrix, settings, privacy report, and that it learns."""
import math

import pytest
import torch

from ldpfast.methods import lpgnn
from ldpfast.reproduce import lpgnn as lpgnn_repro


def test_rr_transition():
    P = lpgnn.rr_transition(4, 1.0)
    torch.testing.assert_close(P.sum(1), torch.ones(4))
    assert P[0, 0] == pytest.approx(math.e / (math.e + 3))
    assert torch.equal(lpgnn.rr_transition(3, math.inf), torch.eye(3))


def test_paper_settings_lookup():
    s = lpgnn.paper_settings("cora", 1.0, 1.0)
    assert (s["k_x"], s["k_y"], s["lr"]) == (2, 8, 1e-2)
    s = lpgnn.paper_settings("facebook", 0.01, math.inf)
    assert (s["k_x"], s["k_y"]) == (8, 0)
    # budgets between tabulated ones take the nearest row
    assert lpgnn.paper_settings("cora", 0.9, 1.1)["k_x"] == 2
    s = lpgnn.paper_settings("pubmed", 1.0, 0.5)  # authors' steps.csv / lwd.csv rows
    assert (s["k_x"], s["k_y"], s["lr"], s["weight_decay"], s["dropout"]) == (0, 4, 1e-2, 1e-4, 0.25)
    s = lpgnn.paper_settings("lastfm", 3.0, 0.5)
    assert (s["k_x"], s["k_y"], s["lr"], s["dropout"]) == (16, 8, 1e-3, 0.75)
    assert lpgnn.paper_settings("citeseer", 1.0, 1.0) == lpgnn.paper_settings("cora", 1.0, 1.0)


@pytest.fixture(scope="module")
def cora():
    from ldpfast.datasets import load

    return load("cora")  # embedded in the package


def test_fit_reports_privacy_and_learns(cora):
    rep = lpgnn.fit(cora, 3.0, 3.0, epochs=25, patience=25, seed=0)
    assert rep.privacy["eps_total"] == 6.0
    mechs = sorted(e["mechanism"] for e in rep.privacy["entries"])
    assert mechs == ["multibit", "rr_labels"]
    assert rep.privacy["eps"] == pytest.approx(6.0)
    # chance is ~0.30 (largest class); seeds 0-2 gave 0.77-0.80 with 25 epochs
    assert rep.accuracy > 0.6


def test_non_private_spends_nothing(cora):
    rep = lpgnn.fit(cora, math.inf, math.inf, epochs=20, patience=20, seed=1)
    assert rep.privacy["entries"] == [] and math.isinf(rep.privacy["eps_total"])
    assert rep.accuracy > 0.75  # seeds 0-2 gave 0.86-0.88


def test_bad_input(cora):
    with pytest.raises(ValueError, match="eps_x"):
        lpgnn.fit(cora, 0.0, 1.0)
    with pytest.raises(ValueError, match="eps_y"):
        lpgnn.fit(cora, 1.0, float("nan"))
    with pytest.raises(ValueError, match="training"):
        lpgnn.fit(cora, 1.0, 1.0, training="sgd")
    with pytest.raises(ValueError, match="model"):
        lpgnn.fit(cora, 1.0, 1.0, model="mlp", epochs=1)


@pytest.mark.parametrize("eps_x,k", [(1.0, 2), (math.inf, 4)])
def test_factored_first_layer_equals_dense(cora, eps_x, k):
    """conv1(KProp(x')) computed from the sparse x* equals the dense route, values and grads."""
    from ldpfast.graph import csr_of
    from ldpfast.mechanisms import multibit_encode, multibit_rectify, multibit_scale
    from ldpfast.methods._common import Backbone, graph_input

    csr = csr_of(cora)
    x = cora.x.to(torch.float32)
    n, d = x.shape
    if math.isfinite(eps_x):
        x_star, spent = multibit_encode(x, eps_x, None, 0.0, 1.0, seed=3)
        m = spent.params["m"]
        dense = multibit_rectify(x_star, eps_x, m, 0.0, 1.0)
        first = lpgnn.FactoredSAGEInput(x_star, multibit_scale(eps_x, m, d, 0.0, 1.0), 0.5,
                                        csr, k)
    else:
        dense = x
        first = lpgnn.FactoredSAGEInput(x, 1.0, 0.0, csr, k)
    h = lpgnn._propagate(csr, dense, k)
    torch.manual_seed(0)
    net = Backbone("sage", d, 16, 7, 0.5).eval()
    ei = graph_input(cora.edge_index, n, "sage")
    want = net.conv1(h, ei)
    got = first(net.conv1)
    scale = want.abs().max().item()
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-5 * scale)
    g = torch.randn_like(want)
    grads = []
    for out in (want, got):
        net.zero_grad()
        (out * g).sum().backward()
        grads.append([p.grad.clone() for p in net.conv1.parameters()])
    for a, b in zip(*grads):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-5 * a.abs().max().item())


def test_factored_fit_matches_dense_fit(cora):
    """Same seed, same accuracy to within a few test nodes whichever route conv1 takes."""
    a = lpgnn.fit(cora, 1.0, 1.0, epochs=60, seed=1, factored=True)
    b = lpgnn.fit(cora, 1.0, 1.0, epochs=60, seed=1, factored=False)
    assert a.settings["factored"] and not b.settings["factored"]
    assert abs(a.accuracy - b.accuracy) <= 0.02


def test_reproduce_cli_writes_and_resumes(tmp_path):
    """The reproduction CLI runs a tiny grid (LPGNN and RGNN-Table-II cells), saves JSON and
    markdown, and --resume skips finished cells."""
    import json

    from conftest import require_datasets

    require_datasets("citeseer")
    out = tmp_path / "lp"
    args = ["--quick", "--datasets", "cora", "citeseer", "--runs", "1", "--epochs", "3",
            "--out", str(out)]
    assert lpgnn_repro.reproduce_main(args) == 0
    rows = json.loads((out / "lpgnn.json").read_text())["rows"]
    assert {(r["table"], r["dataset"]) for r in rows} == {
        ("table2", "cora"), ("table4", "cora"), ("rgnn_table2", "citeseer")}
    assert all(0.0 <= r["ours_mean"] <= 100.0 and r["runs"] == 1 for r in rows)
    cs = next(r for r in rows if r["dataset"] == "citeseer")
    assert cs["eps_x_used"] == 10.0 and cs["paper"] == 46.4  # m * eps_x; RGNN Table II
    assert "| table |" in (out / "lpgnn.md").read_text()
    assert lpgnn_repro.reproduce_main(args + ["--resume"]) == 0
    again = json.loads((out / "lpgnn.json").read_text())
    assert again["rows"] == rows and len(again["commands"]) == 2


def test_reproduce_user_supplied_lastfm(tmp_path):
    """--datasets lastfm reads a user-supplied LastFM-Asia folder and keeps 10 classes."""
    import json

    g = torch.Generator().manual_seed(0)
    n = 120
    d = tmp_path / "data" / "lastfm_asia"
    d.mkdir(parents=True)
    y = torch.arange(n) % 12  # 12 classes; the 10 largest are kept
    src, dst = torch.randint(0, n, (2, 600), generator=g).tolist()
    (d / "lastfm_asia_edges.csv").write_text(
        "node_1,node_2\n" + "".join(f"{a},{b}\n" for a, b in zip(src, dst)))
    feats = {str(i): torch.randint(0, 30, (3,), generator=g).tolist() for i in range(n)}
    (d / "lastfm_asia_features.json").write_text(json.dumps(feats))
    (d / "lastfm_asia_target.csv").write_text(
        "id,target\n" + "".join(f"{i},{int(c)}\n" for i, c in enumerate(y)))
    out = tmp_path / "lp"
    assert lpgnn_repro.reproduce_main(["--quick", "--datasets", "lastfm", "--runs", "1", "--epochs",
                                       "2", "--root", str(tmp_path / "data"), "--out", str(out)]) == 0
    rows = json.loads((out / "lpgnn.json").read_text())["rows"]
    assert {r["dataset"] for r in rows} == {"lastfm"} and len(rows) == 3
    assert {r["paper"] for r in rows} == {85.3, 84.9, 82.1}
