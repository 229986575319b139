"""RGNN pipeline (paper 000): reconstruction (Algorithms 1-2), estimators, bags, LLP, fit.

Graphs are planted-partition graphs built here with torch (no dataset files needed): every
node draws ``deg`` neighbours, each of its own class with probability ``h`` and uniform
otherwise, then the edge list is symmetrised.  All randomness is seeded, so every assertion
is deterministic; the margins below are chosen with a wide safety factor over the expected
values derived in each test.
"""
import math

import pytest
import torch
import torch.nn.functional as F

from ldpfast.estimation import grr_fs_expected_frequencies, grr_fs_variance, grr_variance
from ldpfast.graph import to_csr
from ldpfast.mechanisms import grr_fs, rr_labels
from ldpfast.methods import rgnn
from ldpfast.privacy.ldp import grr_fs_epsilon, grr_probs
from ldpfast.reproduce import rgnn as rgnn_repro


def planted_graph(n, c, deg, h, seed):
    g = torch.Generator().manual_seed(seed)
    y = torch.arange(n) % c
    y = y[torch.randperm(n, generator=g)]
    src = torch.arange(n).repeat_interleave(deg)
    same = torch.rand(n * deg, generator=g) < h
    by_class = [torch.nonzero(y == k).squeeze(1) for k in range(c)]
    dst = torch.randint(0, n, (n * deg,), generator=g)
    for k in range(c):
        sel = same & (y[src] == k)
        pool = by_class[k]
        dst[sel] = pool[torch.randint(0, pool.numel(), (int(sel.sum()),), generator=g)]
    csr = to_csr(torch.stack([src, dst]), n, symmetrize=True)
    return csr, y


def class_features(y, d, gamma, purity, seed):
    """Categorical features: value ``proto[y, i]`` with probability ``purity``, else uniform."""
    g = torch.Generator().manual_seed(seed)
    c = int(y.max()) + 1
    proto = torch.randint(0, gamma, (c, d), generator=g)
    x = proto[y]
    noise = torch.rand(x.shape, generator=g) >= purity
    x[noise] = torch.randint(0, gamma, (int(noise.sum()),), generator=g)
    return x


def test_reconstructed_features_beat_raw_reports():
    # eps_x = 2, gamma = 4, d = 8, m = 4: a raw report equals the true value with
    # probability (m/d) p + (1 - m/d)/gamma = 0.5*0.711 + 0.5*0.25 = 0.48.  After 2 hops
    # over ~20 mostly same-class neighbours, the true value's observed share exceeds the
    # next value's by about (m/d)(p-q) * 0.75 = 0.23 with noise std <= 0.1, so the argmax
    # is right for ~90% of the entries.  We assert a margin of 0.25 over the raw reports
    # (observed: 0.927 vs 0.481).
    csr, y = planted_graph(3000, 4, 10, 0.9, seed=1)
    x = class_features(y, 8, 4, 0.9, seed=2)
    xr, _ = grr_fs(x, 4, 2.0, 4, seed=3)
    rec = rgnn.reconstruct_features(xr, csr, 4, 2.0, 4, k_x=2, output="index")
    acc_raw = (xr == x).float().mean().item()
    acc_rec = (rec == x).float().mean().item()
    assert acc_raw == pytest.approx(0.48, abs=0.02)
    assert acc_rec >= acc_raw + 0.25, (acc_rec, acc_raw)
    # GNN input layout: one-hot of the argmax, gamma columns per categorical feature
    feats = rgnn.reconstruct_features(xr, csr, 4, 2.0, 4, k_x=2)
    assert feats.shape == (3000, 32)
    assert torch.equal(feats.view(3000, 8, 4).argmax(2), rec)


def test_reconstructed_binary_features_beat_raw_reports():
    # Binary features, eps_x = 1, d = 20, m = 10: the raw reports have mean absolute error
    # 1 - [(m/d) p + (1 - m/d)/2] = 1 - (0.5*0.731 + 0.25) = 0.385; the clipped estimate of P(x = 1) over a 2-hop
    # homophilous neighbourhood has error ~0.1 (purity 0.95; observed 0.107).  Margin
    # asserted: 0.2.
    csr, y = planted_graph(3000, 2, 10, 0.95, seed=4)
    x = class_features(y, 20, 2, 0.95, seed=5)
    xr, _ = grr_fs(x, 2, 1.0, 10, seed=6)
    rec = rgnn.reconstruct_features(xr, csr, 2, 1.0, 10, k_x=2)
    assert rec.dtype == torch.float32 and rec.shape == x.shape
    assert float(rec.min()) >= 0.0 and float(rec.max()) <= 1.0
    mae_raw = (xr - x).abs().float().mean().item()
    mae_rec = (rec - x).abs().mean().item()
    assert mae_raw == pytest.approx(0.385, abs=0.02)
    assert mae_rec <= mae_raw - 0.2, (mae_rec, mae_raw)


def test_reconstructed_labels_beat_raw_reports():
    # eps_y = 1, c = 4: a report is right with probability p = e/(e+3) = 0.475.  With 2
    # hops over homophilous (h = 0.8) neighbourhoods, P^{-1} lambda' recovers the majority
    # class for >90% of labelled nodes.  Margin asserted: 0.3 (observed 0.990 vs 0.473).
    csr, y = planted_graph(3000, 4, 10, 0.8, seed=7)
    mask = torch.rand(3000, generator=torch.Generator().manual_seed(8)) < 0.75
    yr, _ = rr_labels(y, 4, 1.0, seed=9, mask=mask)
    rec = rgnn.reconstruct_labels(yr, mask, csr, 4, 1.0, k_y=2)
    assert bool((rec[~mask] == -1).all())
    acc_raw = (yr[mask] == y[mask]).float().mean().item()
    acc_rec = (rec[mask] == y[mask]).float().mean().item()
    assert acc_raw == pytest.approx(0.475, abs=0.03)
    assert acc_rec >= acc_raw + 0.3, (acc_rec, acc_raw)
    # k_y = 0: nothing to aggregate, the reconstruction is the report itself
    assert torch.equal(rgnn.reconstruct_labels(yr, mask, csr, 4, 1.0, k_y=0)[mask], yr[mask])


def _dense_mean(csr, n):
    A = torch.eye(n, dtype=torch.float64)
    ei = csr.to_edge_index()
    A[ei[0], ei[1]] = 1.0
    return A / A.sum(1, keepdim=True)


def test_algorithm1_matches_line_by_line_reference():
    # Algorithm 1 literally: a loop over features, K dense mean steps over {v} u N(v), eq. (5).
    csr, _ = planted_graph(60, 3, 3, 0.8, seed=10)
    gam = torch.tensor([2, 3, 4, 2, 5])
    x = torch.stack([torch.randint(0, int(g), (60,), generator=torch.Generator().manual_seed(i))
                     for i, g in enumerate(gam)], 1)
    d, m, eps, K = 5, 2, 1.5, 3
    xr, _ = grr_fs(x, gam, eps, m, seed=11)
    W = _dense_mean(csr, 60)
    ref_pi, ref_idx = [], []
    for i in range(d):
        lam = F.one_hot(xr[:, i], int(gam[i])).to(torch.float64)
        for _ in range(K):
            lam = W @ lam
        p, q = grr_probs(eps, int(gam[i]))
        g = int(gam[i])
        pi = lam * d / (m * (p - q)) + (m - d - m * g * q) / (m * g * (p - q))
        ref_pi.append(pi)
        ref_idx.append(pi.argmax(1))
    pi = rgnn.reconstruct_features(xr, csr, gam, eps, m, K, output="pi", dtype=torch.float64)
    torch.testing.assert_close(pi, torch.cat(ref_pi, 1))
    idx = rgnn.reconstruct_features(xr, csr, gam, eps, m, K, output="index", dtype=torch.float64)
    assert torch.equal(idx, torch.stack(ref_idx, 1))
    feats = rgnn.reconstruct_features(xr, csr, gam, eps, m, K, dtype=torch.float64)
    # binary columns: clipped pi~_v1; categorical: one-hot argmax
    torch.testing.assert_close(feats[:, 0], ref_pi[0][:, 1].clamp(0, 1))
    assert torch.equal(feats[:, 1:4].argmax(1), ref_idx[1]) and feats.shape == (60, 1 + 3 + 4 + 1 + 5)


def test_algorithm2_matches_line_by_line_reference():
    csr, y = planted_graph(80, 3, 3, 0.8, seed=12)
    mask = torch.arange(80) % 3 != 0
    yr, _ = rr_labels(y, 3, 0.7, seed=13, mask=mask)
    W = _dense_mean(csr, 80)
    lam = F.one_hot(yr, 3).to(torch.float64) * mask[:, None]  # line 5: zero vectors
    for _ in range(4):
        lam = W @ lam  # lines 6-11: MEAN over {v} u N(v), zero vectors included
    p, q = grr_probs(0.7, 3)
    P = torch.full((3, 3), q, dtype=torch.float64)
    P.fill_diagonal_(p)
    pi_ref = lam @ torch.linalg.inv(P).T  # eq. 14
    rec, pi = rgnn.reconstruct_labels(yr, mask, csr, 3, 0.7, k_y=4, return_pi=True)
    torch.testing.assert_close(pi, pi_ref)
    assert torch.equal(rec[mask], pi_ref.argmax(1)[mask])


def test_neighbourhood_feature_estimator_is_unbiased_within_stated_variance():
    # For K = 1 the estimate of node v averages the n_v = deg(v) + 1 reports of {v} u N(v):
    # E[pi~_v] is the true proportion of each value there (Theorem 2 at neighbourhood
    # level), with variance at most eq. (11)'s d^2 lbar (1 - lbar) / (n_v m^2 (p-q)^2),
    # lbar the mean expected report frequency (eq. 8).  Over R = 300 independent
    # randomisations every entry's mean must be within 5 standard errors of the truth
    # (per-entry false-alarm rate < 1e-6 under the CLT; 1,800 entries), and the empirical
    # variance must not exceed the stated one by more than 25%.
    csr, y = planted_graph(150, 3, 3, 0.8, seed=14)
    gamma, d, m, eps, R = 3, 4, 2, 1.0, 300
    x = class_features(y, d, gamma, 0.8, seed=15)
    onehot = F.one_hot(x, gamma).to(torch.float64)  # (n, d, gamma)
    W = _dense_mean(csr, 150)
    truth = torch.einsum("uv,vdg->udg", W, onehot).reshape(150, d * gamma)
    est = torch.stack([
        rgnn.reconstruct_features(grr_fs(x, gamma, eps, m, seed=100 + r)[0], csr, gamma, eps, m,
                                  1, output="pi", dtype=torch.float64)
        for r in range(R)])
    n_v = (csr.degrees() + 1).to(torch.float64)
    lam_bar = grr_fs_expected_frequencies(truth.view(150, d, gamma), eps, m, d, gamma)
    var = grr_fs_variance(lam_bar, eps, m, d, gamma, n_v.view(150, 1)).reshape(150, d * gamma)
    z = (est.mean(0) - truth) / (var / R).sqrt()
    assert float(z.abs().max()) < 5.0
    assert float((est.var(0) / var).max()) < 1.25


def test_label_estimator_is_unbiased_within_stated_variance():
    # eq. (14) on K = 1 neighbourhoods (every node labelled): unbiased for the true class
    # proportions of {v} u N(v), variance at most the dispersion-matrix diagonal.
    csr, y = planted_graph(150, 4, 3, 0.7, seed=16)
    R, eps = 300, 1.0
    mask = torch.ones(150, dtype=torch.bool)
    W = _dense_mean(csr, 150)
    truth = W @ F.one_hot(y, 4).to(torch.float64)
    est = torch.stack([rgnn.reconstruct_labels(rr_labels(y, 4, eps, seed=500 + r)[0], mask, csr,
                                               4, eps, 1, return_pi=True)[1] for r in range(R)])
    p, q = grr_probs(eps, 4)
    lam_bar = (p - q) * truth + q
    n_v = (csr.degrees() + 1).to(torch.float64)
    var = grr_variance(lam_bar, eps, 4, n_v)
    z = (est.mean(0) - truth) / (var / R).sqrt()
    assert float(z.abs().max()) < 5.0
    assert float((est.var(0) / var).max()) < 1.25


def test_llp_loss_zero_iff_proportions_match():
    torch.manual_seed(0)
    bags = torch.tensor([0, 0, 1, 1, 1, 2, 2, 2, 2])
    b_tilde = torch.tensor([[0.5, 0.5, 0.0], [0.2, 0.3, 0.5], [1 / 3, 1 / 3, 1 / 3]])
    probs = b_tilde[bags].clone()
    assert rgnn.llp_loss(probs, bags, b_tilde).item() == pytest.approx(0.0, abs=1e-9)
    # mean of the bag matches although single rows differ -> still zero
    probs2 = probs.clone()
    probs2[0], probs2[1] = torch.tensor([1.0, 0.0, 0.0]), torch.tensor([0.0, 1.0, 0.0])
    assert rgnn.llp_loss(probs2, bags, b_tilde).item() == pytest.approx(0.0, abs=1e-9)
    assert rgnn.llp_loss(probs2, bags, b_tilde, direction="reverse").item() == pytest.approx(
        0.0, abs=1e-9)
    # any other prediction: positive, and the gradient flows
    logits = torch.randn(9, 3, requires_grad=True)
    loss = rgnn.llp_loss(F.softmax(logits, 1), bags, b_tilde)
    assert loss.item() > 1e-3
    loss.backward()
    assert logits.grad is not None and float(logits.grad.abs().sum()) > 0
    # masked rows are ignored; a bag without masked rows is left out of the average
    mask = torch.tensor([True, True, False, False, False, True, True, True, True])
    bad = probs.clone()
    bad[2:5] = torch.tensor([1.0, 0.0, 0.0])
    assert rgnn.llp_loss(bad, bags, b_tilde, mask).item() == pytest.approx(0.0, abs=1e-9)
    assert rgnn.llp_loss(bad, bags, b_tilde).item() > 0.1


def test_bag_proportions_unbiased():
    # One bag of 20,000 perturbed labels: b~ = P^{-1} b' is within 5 standard errors of the
    # true proportions; eps = inf gives the exact proportions.
    n, c, eps = 20000, 3, 1.0
    y = torch.multinomial(torch.tensor([0.6, 0.3, 0.1]), n, replacement=True,
                          generator=torch.Generator().manual_seed(17))
    true = torch.bincount(y, minlength=c).double() / n
    bags = torch.zeros(n, dtype=torch.int64)
    mask = torch.ones(n, dtype=torch.bool)
    _, exact, cnt = rgnn.bag_proportions(y, bags, mask, c, math.inf)
    torch.testing.assert_close(exact[0], true) and int(cnt[0]) == n
    yr, _ = rr_labels(y, c, eps, seed=18)
    b_prime, b_tilde, _ = rgnn.bag_proportions(yr, bags, mask, c, eps)
    se = grr_variance(b_prime[0], eps, c, n).sqrt()
    assert float(((b_tilde[0] - true).abs() / se).max()) < 5.0
    torch.testing.assert_close(b_tilde.sum(1), torch.ones(1, dtype=torch.float64))


def test_metis_bags_partition_the_nodes():
    csr, _ = planted_graph(2000, 4, 5, 0.9, seed=19)
    tm = {}
    bags = rgnn.metis_bags(csr, 16, seed=3, timings=tm)
    assert bags.shape == (2000,) and bags.dtype == torch.int64
    assert int(bags.min()) == 0 and int(bags.max()) == 15
    sizes = torch.bincount(bags, minlength=16)
    assert int(sizes.sum()) == 2000 and int(sizes.min()) > 0
    assert int(sizes.max()) <= 1.5 * 2000 / 16  # METIS balances parts (default 3% imbalance)
    assert tm["metis_s"] >= 0
    assert torch.equal(bags, rgnn.metis_bags(csr, 16, seed=3))  # deterministic
    ei = csr.to_edge_index()
    intra = (bags[ei[0]] == bags[ei[1]]).float().mean().item()
    assert intra > 0.3  # random bags would give 1/16; METIS minimises the edge cut
    assert bool((rgnn.metis_bags(csr, 1) == 0).all())


def test_bad_inputs_raise_naming_the_parameter():
    csr, y = planted_graph(50, 2, 3, 0.8, seed=20)
    x = torch.randint(0, 3, (50, 4))
    with pytest.raises(ValueError, match="eps_x"):
        rgnn.reconstruct_features(x, csr, 3, 0.0, 2)
    with pytest.raises(ValueError, match="eps_x"):
        rgnn.reconstruct_features(x, csr, 3, float("nan"), 2)
    with pytest.raises(ValueError, match="m"):
        rgnn.reconstruct_features(x, csr, 3, 1.0, 5)
    with pytest.raises(ValueError, match="k_x"):
        rgnn.reconstruct_features(x, csr, 3, 1.0, 2, -1)
    with pytest.raises(TypeError, match="x"):
        rgnn.reconstruct_features(x.float(), csr, 3, 1.0, 2)
    with pytest.raises(ValueError, match="x"):
        rgnn.reconstruct_features(x + 3, csr, 3, 1.0, 2)
    with pytest.raises(ValueError, match="x"):
        rgnn.reconstruct_features(x[:10], csr, 3, 1.0, 2)
    with pytest.raises(ValueError, match="domain"):
        rgnn.reconstruct_features(x, csr, 1, 1.0, 2)
    with pytest.raises(ValueError, match="output"):
        rgnn.reconstruct_features(x, csr, 3, 1.0, 2, output="probs")
    with pytest.raises(TypeError, match="csr"):
        rgnn.reconstruct_features(x, "graph", 3, 1.0, 2)
    mask = torch.ones(50, dtype=torch.bool)
    with pytest.raises(TypeError, match="mask"):
        rgnn.reconstruct_labels(y, mask.float(), csr, 2, 1.0)  # (int: node ids)
    with pytest.raises(ValueError, match="y"):
        rgnn.reconstruct_labels(y + 2, mask, csr, 2, 1.0)
    with pytest.raises(ValueError, match="num_classes"):
        rgnn.reconstruct_labels(y, mask, csr, 1, 1.0)
    with pytest.raises(ValueError, match="eps_y"):
        rgnn.reconstruct_labels(y, mask, csr, 2, -1.0)
    with pytest.raises(ValueError, match="C"):
        rgnn.metis_bags(csr, 0)
    with pytest.raises(ValueError, match="C"):
        rgnn.metis_bags(csr, 51)
    directed = to_csr(torch.tensor([[0, 1], [1, 2]]), 3)
    with pytest.raises(ValueError, match="undirected"):
        rgnn.metis_bags(directed, 2)
    probs = torch.full((50, 2), 0.5)
    bags = torch.zeros(50, dtype=torch.int64)
    with pytest.raises(ValueError, match="b_tilde"):
        rgnn.llp_loss(probs, bags, torch.full((1, 3), 1 / 3))
    with pytest.raises(ValueError, match="bags"):
        rgnn.llp_loss(probs, bags[:10], torch.full((1, 2), 0.5))
    with pytest.raises(ValueError, match="bags"):
        rgnn.llp_loss(probs, bags + 1, torch.full((1, 2), 0.5))
    with pytest.raises(ValueError, match="direction"):
        rgnn.llp_loss(probs, bags, torch.full((1, 2), 0.5), direction="forward")


@pytest.fixture(scope="module")
def small_data():
    from torch_geometric.data import Data

    csr, y = planted_graph(600, 3, 6, 0.85, seed=21)
    x = class_features(y, 12, 2, 0.9, seed=22).float()
    return Data(x=x, y=y, edge_index=csr.to_edge_index(), num_nodes=600)


def test_fit_reports_privacy_and_learns(small_data):
    rep = rgnn.fit(small_data, 1.0, 2.0, m=4, k_x=2, k_y=2, C=8, epochs=40, seed=0)
    pv = rep.privacy
    assert pv["eps_X_exact"] == 4.0 and pv["eps_total_exact"] == 6.0
    assert pv["eps_X_theorem1"] == pytest.approx(grr_fs_epsilon(1.0, 4, 12))
    assert pv["eps_total_theorem3"] == pytest.approx(pv["eps_X_theorem1"] + 2.0)
    assert sorted(e["mechanism"] for e in pv["entries"]) == ["grr_fs", "rr_labels"]
    assert pv["eps"] == pytest.approx(6.0)  # the ledger records the exact guarantee
    assert rep.settings["d"] == 12 and rep.settings["group_size"] == 1
    assert "metis_s" in rep.timings and rep.epoch >= 0
    assert rep.reconstruction["label_acc_train_y_tilde"] > rep.reconstruction[
        "label_acc_train_y_perturbed"]
    assert rep.accuracy > 0.6  # 3 balanced classes: chance is 1/3
    base = rgnn.fit(small_data, 1.0, 2.0, m=4, k_x=2, k_y=2, C=8, epochs=40, seed=0,
                    variant="graphsage_perturbed")
    assert "metis_s" not in base.timings and base.settings["alpha"] == 0.0
    assert rep.accuracy > base.accuracy


def test_fit_variants_and_bad_input(small_data):
    for v in ("no_llp", "no_fy", "no_fx"):
        rep = rgnn.fit(small_data, 1.0, 1.0, m=4, k_x=2, k_y=2, C=4, epochs=5, seed=1, variant=v)
        assert rep.settings["variant"] == v and 0.0 <= rep.accuracy <= 1.0
    with pytest.raises(ValueError, match="variant"):
        rgnn.fit(small_data, 1.0, 1.0, variant="rgnn2")
    with pytest.raises(ValueError, match="eps_x"):
        rgnn.fit(small_data, 0.0, 1.0)
    with pytest.raises(ValueError, match="eps_y"):
        rgnn.fit(small_data, 1.0, float("nan"))
    with pytest.raises(ValueError, match="alpha"):
        rgnn.fit(small_data, 1.0, 1.0, alpha=-1.0)
    with pytest.raises(ValueError, match="C"):
        rgnn.fit(small_data, 1.0, 1.0, C=0)
    with pytest.raises(ValueError, match="m"):
        rgnn.fit(small_data, 1.0, 1.0, m=13)
    with pytest.raises(ValueError, match="model"):
        rgnn.fit(small_data, 1.0, 1.0, model="mlp", epochs=1)
    bad = small_data.clone()
    bad.x = bad.x * 0.5
    with pytest.raises(ValueError, match="data.x"):
        rgnn.fit(bad, 1.0, 1.0)


def test_reproduce_quick(tmp_path):
    # --quick runs on Cora only, which is embedded in the package
    assert rgnn_repro.reproduce_main(["--quick", "--methods", "rgnn", "graphsage", "--epochs", "10",
                                      "--out", str(tmp_path)]) == 0
    import json

    rows = json.loads((tmp_path / "rgnn.json").read_text())["rows"]
    assert {r["method"] for r in rows} == {"rgnn", "graphsage"}
    assert all(r["paper_mean"] is not None and r["runs"] == 2 for r in rows)
    assert (tmp_path / "rgnn.md").read_text().count("| cora |") == 2
    assert (tmp_path / "rgnn_accuracy_vs_eps_y.png").stat().st_size > 0
