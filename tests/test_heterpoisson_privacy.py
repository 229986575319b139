"""HeterPoisson privacy model (audit finding F3, issue 15) and no seed in any output (F4).

The peripheral probability ``min(1, M / D_ot(j))`` of paper 003 depends on out-degrees, so
Theorem 2's bound is a bound only for model S2 (Definition 4: the whole graph and its
out-degrees are public and fixed).  These tests

* build the audit's counter-example (40 pairs, ``z`` joined to every ``j_l``) and check
  that the S2 accounting names its model, that the degree-dependent law does move with
  ``z`` when degrees are recomputed (true delta 0.61 at the calibrated sigma), and that it
  does not under S2 proper (whole-graph degrees);
* check that the ``"public_bound"`` mode's sampling law does not change with ``z``, that the
  Theorem 2 mixture covers it only with the degree bound it enforces, and that the
  accountant's maximum covers every out-degree up to that bound;
* check that ``fit(setting="inductive")`` samples with whole-graph out-degrees;
* check that no report of ``fit``/``audit_heterpoisson`` holds the seed.

Statistical tests run at fixed seeds (deterministic); each states its false-alarm rate:
the probability that a *correct* sampler fails it for a random seed.
"""
from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats
from torch_geometric.data import Data

from ldpfast.graph import clean_edge_index
from ldpfast.privacy.accountants import HeterPoissonAccountant, heterpoisson_mixture, mog_rdp
from ldpfast.sampling import HeterPoisson

Z_FALSE_ALARM = 5.0  # |z| > 5: two-sided false-alarm rate 5.7e-7 per check
L = 40               # pairs of the counter-example
S2_NAME = "node-level DP, model S2 of Xiang, Wang & Wang"
S2_ASSUMPTION = "out-degrees of the whole graph are public and fixed"


# --------------------------------------------------------------------------- helpers
def _data(n, pairs, d=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.tensor(pairs, dtype=torch.long).t() if pairs else torch.zeros(2, 0, dtype=torch.long)
    ei = clean_edge_index(ei, n)  # undirected, deduplicated
    return Data(x=torch.randn(n, d, generator=g), y=torch.randint(0, 2, (n,), generator=g), edge_index=ei,
                num_nodes=n)


def counterexample(with_z: bool):
    """Nodes ``i_l = l``, ``j_l = L + l``, ``z = 2L``; edges ``i_l - j_l`` and, with ``z``,
    ``z - j_l``.  Without ``z`` its edges are gone too (private structure); ``z`` is kept as
    an isolated node so that ids agree (isolated and not a candidate = absent)."""
    pairs = [(l, L + l) for l in range(L)]
    if with_z:
        pairs += [(2 * L, L + l) for l in range(L)]
    return _data(2 * L + 1, pairs)


CAND = torch.arange(L)  # the candidates are the i_l


def peripheral_counts(sampler, steps):
    """Peripheral nodes per step (drop mode: every node but the centres), and whether node
    ``2L`` (z) ever appeared."""
    counts, z_seen = [], False
    for t in range(steps):
        b = sampler.sample(t, with_x=False)
        counts.append(b.num_nodes - b.num_subgraphs)
        z_seen |= bool((b.n_id == 2 * L).any())
    return np.array(counts, dtype=np.float64), z_seen


def assert_mean(x, mean, var):
    """Sample mean of i.i.d. draws equals ``mean`` (z-test, false alarm 5.7e-7)."""
    z = (x.mean() - mean) / math.sqrt(var / x.size)
    assert abs(z) < Z_FALSE_ALARM, (x.mean(), mean, z)


def _law_pm_half(p_incl):
    """Law of sum over the L pairs of (+1/2 if i_l central and j_l joins, -1/2 if central and
    not, 0 if not central) at q_b = 1/2: values (k - L) / 2, k = 0..2L."""
    v = np.zeros(2 * L + 1)
    v[L] = 1.0
    for _ in range(L):
        w = 0.5 * v
        w[1:] += 0.5 * p_incl * v[:-1]
        w[:-1] += 0.5 * (1 - p_incl) * v[1:]
        v = w
    return (np.arange(2 * L + 1) - L) / 2.0, v


def hockey_stick(m1, w1, m2, w2, sigma, eps):
    """max of both directions of H_eps between two 1-D Gaussian mixtures (same sigma),
    numerically on a fine grid (abs. error << 1e-6 here)."""
    lo = min(m1.min(), m2.min()) - 12 * sigma
    hi = max(m1.max(), m2.max()) + 12 * sigma
    x = np.linspace(lo, hi, 400001)
    dx = x[1] - x[0]
    f1 = (w1[:, None] * stats.norm.pdf(x[None, :], m1[:, None], sigma)).sum(0)
    f2 = (w2[:, None] * stats.norm.pdf(x[None, :], m2[:, None], sigma)).sum(0)
    e = math.exp(eps)
    return max(np.maximum(f1 - e * f2, 0).sum() * dx, np.maximum(f2 - e * f1, 0).sum() * dx)


# --------------------------------------------------------------------------- counter-example
def test_counterexample_s2_accounting_names_its_model_and_fails_outside_it():
    """Degrees recomputed on a graph that changes with z (inductive training graph, private
    structure): z is in no sub-graph, yet the peripheral count falls 20 -> 10 and the true
    delta at the accountant's (eps, sigma) is ~0.61, not 1e-5.  So the S2 figure may only be
    claimed under S2, and the report says so.  Under S2 proper (D_ot of the fixed whole
    graph, passed as out_degree) the law does not move."""
    g_star, g_prime = counterexample(False), counterexample(True)
    q_b, M, steps = 0.5, 1.0, 400
    s_star = HeterPoisson(g_star, q_b, M, seed=11, train_nodes=CAND)
    s_prime = HeterPoisson(g_prime, q_b, M, seed=12, train_nodes=CAND)
    for s in (s_star, s_prime):
        assert s.privacy_model.startswith(S2_NAME) and S2_ASSUMPTION in s.privacy_model
    j = torch.arange(L, 2 * L)
    assert torch.all(s_star.peripheral_prob[j] == 1.0) and torch.all(s_prime.peripheral_prob[j] == 0.5)
    c_star, z1 = peripheral_counts(s_star, steps)
    c_prime, z2 = peripheral_counts(s_prime, steps)
    assert not z1 and not z2  # z appears in no sub-graph ...
    assert_mean(c_star, L * q_b * 1.0, L * 0.5 * 0.5)   # ... yet Bin(40, 1/2): 20
    assert_mean(c_prime, L * q_b * 0.5, L * 0.25 * 0.75)  # and Bin(40, 1/4): 10

    # the accountant's sigma for eps = 1, delta = 1e-5, T = 1 and the true delta there
    acc = HeterPoissonAccountant(q_b, M, int(g_prime.num_nodes))
    sigma = acc.calibrate_sigma(1.0, 1e-5, 1)
    assert sigma == pytest.approx(3.93, abs=0.01)
    rep = acc.epsilon(sigma, 1, 1e-5)
    assert rep.eps <= 1.0
    assert rep.model.startswith(S2_NAME) and S2_ASSUMPTION in rep.model
    assert rep.to_dict()["model"] == rep.model
    m1, w1 = _law_pm_half(1.0)
    m2, w2 = _law_pm_half(0.5)
    true_delta = hockey_stick(m1, w1, m2, w2, sigma, 1.0)
    assert true_delta == pytest.approx(0.61, abs=0.01)

    # S2 proper: G fixed (= G'), the training graph G* samples with G's out-degrees
    s_s2 = HeterPoisson(g_star, q_b, M, seed=13, train_nodes=CAND,
                        out_degree=torch.bincount(g_prime.edge_index[0], minlength=2 * L + 1))
    assert torch.equal(s_s2.peripheral_prob[:2 * L], s_prime.peripheral_prob[:2 * L])
    c_s2, _ = peripheral_counts(s_s2, steps)
    assert_mean(c_s2, L * q_b * 0.5, L * 0.25 * 0.75)


@pytest.mark.parametrize("degree_bound,M", [(1, 1.0), (2, 1.0), (4, 3.0)])
def test_counterexample_public_bound_law_does_not_change_with_z(degree_bound, M):
    """The sound mode: every node's inclusion probability is min(1, M / D_pub) in G* and G'
    (exactly), the measured peripheral counts agree with that law in both, and the true delta
    is 0 (z in no sub-graph and nothing else moves)."""
    g_star, g_prime = counterexample(False), counterexample(True)
    q_b, steps = 0.5, 400
    kw = {"train_nodes": CAND, "degree_model": "public_bound", "degree_bound": degree_bound}
    s_star = HeterPoisson(g_star, q_b, M, seed=21, **kw)
    s_prime = HeterPoisson(g_prime, q_b, M, seed=22, **kw)
    p = min(1.0, M / degree_bound)
    for s in (s_star, s_prime):
        assert torch.all(s.peripheral_prob == p)
        assert "private structure" in s.privacy_model and f"at most {degree_bound} " in s.privacy_model
    # exact per-node inclusion probability of j_l in G_{i_l}: q_b * p (j_l is no candidate)
    assert torch.equal(s_star.peripheral_prob[:2 * L], s_prime.peripheral_prob[:2 * L])
    r = q_b * p
    c_star, z1 = peripheral_counts(s_star, steps)
    c_prime, z2 = peripheral_counts(s_prime, steps)
    assert not z1 and not z2
    assert_mean(c_star, L * r, L * r * (1 - r) + 1e-12)
    assert_mean(c_prime, L * r, L * r * (1 - r) + 1e-12)
    # the output law is the same in G* and G': hockey-stick divergence 0 at any sigma
    m, w = _law_pm_half(p)
    assert hockey_stick(m, w, m, w, 3.93, 1.0) == 0.0
    # and the sampler states the mode in its report
    acc = HeterPoissonAccountant(q_b, M, 2 * L + 1, degree_model="public_bound", degree_bound=degree_bound)
    assert acc.epsilon(3.93, 1, 1e-5).model == s_prime.privacy_model


# --------------------------------------------------------------------------- public bound
def test_public_bound_inclusion_law_is_degree_free():
    """On a graph with very unequal degrees every (central i, neighbour j) trial succeeds with
    the same probability min(1, M / D_pub) (binomial test per degree group, Bonferroni over
    the groups: false alarm 1e-6 in all); the S2 law on the same graph is M / D_ot(j)."""
    g = torch.Generator().manual_seed(5)
    n = 400
    hubs = [(h, int(v)) for h in range(5) for v in torch.randperm(n, generator=g)[:150]]
    rnd = torch.randint(0, n, (2, 900), generator=g).t().tolist()
    data = _data(n, hubs + [tuple(e) for e in rnd])
    deg = torch.bincount(data.edge_index[0], minlength=n)
    D_pub = int(deg.max())
    q_b, M = 0.2, 3.0
    s = HeterPoisson(data, q_b, M, seed=77, degree_model="public_bound", degree_bound=D_pub)
    nb = s.csr
    groups = {"low": deg <= 4, "mid": (deg > 4) & (deg <= 12), "hub": deg > 12}
    trials = dict.fromkeys(groups, 0)
    hits = dict.fromkeys(groups, 0)
    rp, col = nb.rowptr, nb.col
    for t in range(150):
        b = s.sample(t, with_x=False)
        central = torch.zeros(n, dtype=torch.bool)
        central[b.central_nodes] = True
        for k, c in enumerate(b.central_nodes.tolist()):
            nbrs = col[rp[c]:rp[c + 1]]
            nbrs = nbrs[~central[nbrs]]  # central neighbours are dropped whatever their trial
            got = torch.zeros(n, dtype=torch.bool)
            got[b.n_id[int(b.ptr[k]) + 1:int(b.ptr[k + 1])]] = True
            for name, gm in groups.items():
                m = gm[nbrs]
                trials[name] += int(m.sum())
                hits[name] += int(got[nbrs[m]].sum())
    p = min(1.0, M / D_pub)
    for name in groups:
        assert trials[name] > 200, (name, trials[name])
        pv = stats.binomtest(hits[name], trials[name], p).pvalue
        assert pv > 1e-6 / 3, (name, hits[name], trials[name], p)
    # degree-dependent S2 law on the same graph: hubs join far less often than leaves
    s2 = HeterPoisson(data, q_b, M, seed=77)
    assert float(s2.peripheral_prob[deg > 12].max()) < 0.25 < float(s2.peripheral_prob[deg == 1].min())


def test_public_bound_count_of_z_is_the_accounted_binomial_and_covered():
    """z points to D_pub candidates (the worst graph the mode admits).  Its per-step state
    (central, or peripheral in k sub-graphs) follows {central: q_b, k: (1 - q_b)
    Bin(k; D_pub, q_b p)} (chi-square, false alarm 1e-6), which is the accountant's mixture,
    and the exact one-step privacy curve of that mixture at the accountant's sigma is within
    the claimed (eps, delta)."""
    D_pub, q_b, M = 8, 0.3, 2.0
    z = D_pub
    pairs = [(z, i) for i in range(D_pub)] + [(i, (i + 1) % D_pub) for i in range(D_pub)]
    data = _data(D_pub + 1, pairs)  # every node is a candidate; i points to z and 2 others: 3 <= 8
    s = HeterPoisson(data, q_b, M, seed=3, degree_model="public_bound", degree_bound=D_pub)
    steps = 6000
    state = np.empty(steps, dtype=np.int64)  # -1: central, else peripheral count
    for t in range(steps):
        b = s.sample(t, with_x=False)
        cen = bool((b.central_nodes == z).any())
        state[t] = -1 if cen else int((b.n_id == z).sum())
    r = q_b * min(1.0, M / D_pub)
    want = np.concatenate([[q_b], (1 - q_b) * stats.binom.pmf(np.arange(D_pub + 1), D_pub, r)])
    obs = np.array([np.sum(state == -1)] + [np.sum(state == k) for k in range(D_pub + 1)], dtype=np.float64)
    # pool the sparse upper tail so every expected count is >= 5
    e = want * steps
    cut = int(np.argmax(np.cumsum(e[::-1]) >= 5))
    keep = e.size - cut
    eo = np.concatenate([e[:keep - 1], [e[keep - 1:].sum()]])
    oo = np.concatenate([obs[:keep - 1], [obs[keep - 1:].sum()]])
    assert stats.chisquare(oo, eo).pvalue > 1e-6
    sens, probs = heterpoisson_mixture(q_b, M, D_pub, degree_bound=D_pub)
    assert np.allclose(probs, want)
    acc = HeterPoissonAccountant(q_b, M, D_pub + 1, degree_model="public_bound", degree_bound=D_pub)
    eps, delta = 1.0, 1e-5
    sigma = acc.calibrate_sigma(eps, delta, 1)
    assert acc.epsilon(sigma, 1, delta).eps <= eps
    # worst case of the real mechanism: every changed sub-graph moves the sum by its full
    # sensitivity along one direction, i.e. N(0, sigma^2) vs the mixture
    true = hockey_stick(np.array([0.0]), np.array([1.0]), sens, probs, sigma, eps)
    assert true <= delta
    # the bound is not vacuous: with 0.7x the noise the exact curve exceeds delta
    assert hockey_stick(np.array([0.0]), np.array([1.0]), sens, probs, 0.7 * sigma, eps) > delta


def test_public_bound_needs_the_degree_bound_it_enforces():
    """Trying to break the bound: with a constant probability p = M / D_pub, a node pointing
    to d > D_pub candidates is in Bin(d, q_b p) sub-graphs, mean d q_b M / D_pub > q_b M.
    Theorem 2's maximum over D (probability M / D) does not cover that: its RDP is exceeded
    and the exact delta is far above the claim.  Hence the sampler refuses such graphs."""
    q_b, M, D_pub, d, sigma, K = 0.5, 1.0, 2, 40, 3.0, 8
    r = q_b * M / D_pub
    k = np.arange(d + 1.0)
    sens = np.concatenate([[0.5], k])
    probs = np.concatenate([[q_b], (1 - q_b) * stats.binom.pmf(k, d, r)])
    # the same count capped at K, as the accountants cap theirs (a lower bound on its RDP)
    capped = np.concatenate([[q_b], (1 - q_b) * stats.binom.pmf(np.arange(K), d, r),
                             [(1 - q_b) * stats.binom.sf(K - 1, d, r)]])
    orders = [1.5, 2.0, 4.0, 8.0]
    s2 = HeterPoissonAccountant(q_b, M, 10**6, orders=orders)
    pb = HeterPoissonAccountant(q_b, M, 10**6, orders=orders, degree_model="public_bound", degree_bound=D_pub)
    over = mog_rdp(np.concatenate([[0.5], np.arange(K + 1.0)]), capped, sigma, orders).rdp
    assert np.all(over > 2 * s2.rdp(sigma, K)[0])
    assert np.all(over > 2 * pb.rdp(sigma, K)[0])
    # exact: at the S2-calibrated sigma for (1, 1e-5, T = 1) the true delta is 0.29, not 1e-5
    sig = HeterPoissonAccountant(q_b, M, 10**6).calibrate_sigma(1.0, 1e-5, 1)
    assert hockey_stick(np.array([0.0]), np.array([1.0]), sens, probs, sig, 1.0) > 0.25
    # the sampler refuses the graph: z points to 40 candidates > D_pub = 2
    pairs = [(40, i) for i in range(40)]
    data = _data(41, pairs)
    with pytest.raises(ValueError, match=r"degree_bound: .*node 40 points to 40.*\[40, 2147483647\]"):
        HeterPoisson(data, q_b, M, seed=0, degree_model="public_bound", degree_bound=D_pub)
    HeterPoisson(data, q_b, M, seed=0, degree_model="public_bound", degree_bound=40)  # in range: accepted


@pytest.mark.parametrize("q,M,D_pub", [(0.3, 1.0, 6), (0.2, 2.0, 12), (0.5, 4.0, 3)])
def test_public_bound_accountant_covers_every_out_degree(q, M, D_pub):
    """Exhaustive check of the maximum: for every d <= D_pub and both directions the mixture
    {1/2: q, k: (1 - q) Bin(k; d, q min(1, M / D_pub))} (capped at K as the accountant does)
    has RDP <= the accountant's; integer orders attain it at d = D_pub (first-order
    dominance); and the figure never exceeds S2's, whose maximum contains D = D_pub."""
    orders = [1.5, 2.0, 3.0, 5.0, 8.0]
    acc = HeterPoissonAccountant(q, M, 1000, degree_model="public_bound", degree_bound=D_pub, orders=orders)
    s2 = HeterPoissonAccountant(q, M, 1000, orders=orders)
    K = 5
    for sigma in (0.8, 2.0):
        got, _, _ = acc.rdp(sigma, K)
        per_d = []
        for d in range(1, D_pub + 1):
            c, p = heterpoisson_mixture(q, M, d, K, degree_bound=D_pub)
            r = mog_rdp(c, p, sigma, orders, rtol=1e-12)
            per_d.append(np.maximum(r.mix_gauss, r.gauss_mix))
            assert np.all(r.rdp <= got * (1 + 1e-7) + 1e-12), (d, r.rdp, got)
        per_d = np.array(per_d)
        mg = np.array([mog_rdp(*heterpoisson_mixture(q, M, d, K, degree_bound=D_pub), sigma, orders,
                               rtol=1e-12).mix_gauss for d in range(1, D_pub + 1)])
        integer = [i for i, a in enumerate(orders) if float(a).is_integer()]
        assert np.all(np.diff(mg[:, integer], axis=0) >= -1e-10)  # Q||P non-decreasing in d
        assert np.allclose(got, per_d.max(0), rtol=1e-6, atol=1e-12)
        assert np.all(got <= s2.rdp(sigma, K)[0] * (1 + 1e-7) + 1e-12)
    # tail: exact binomial at D_pub, and zero once K >= D_pub
    assert acc.tail(2) == pytest.approx((1 - q) * stats.binom.sf(2, D_pub, q * min(1, M / D_pub)))
    assert acc.tail(D_pub) == 0.0


def test_public_bound_auto_grid_matches_exhaustive_scan():
    """The default degree grid finds the same maximum as every d <= D_pub (both directions)."""
    orders = [1.5, 2.0, 4.0, 8.0]
    kw = {"degree_model": "public_bound", "degree_bound": 120, "orders": orders}
    a_all = HeterPoissonAccountant(0.25, 2.0, 1000, degrees="all", **kw)
    a_auto = HeterPoissonAccountant(0.25, 2.0, 1000, **kw)
    assert a_auto.degrees[-1] == 120 and len(a_auto.degrees) < 40
    for sigma in (1.5, 4.0):
        ra, wa, _ = a_all.rdp(sigma, 8)
        rb, _, _ = a_auto.rdp(sigma, 8)
        assert np.allclose(ra, rb, rtol=1e-9) and np.all(wa == 120)


# --------------------------------------------------------------------------- fit pipeline
def planted(n=300, seed=0):
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 2, (n,), generator=g)
    prob = torch.where(y[:, None] == y[None, :], torch.tensor(0.04), torch.tensor(0.004))
    a = torch.triu(torch.rand(n, n, generator=g) < prob, 1)
    ei = clean_edge_index(torch.nonzero(a).t(), n)
    x = torch.randn(2, 8, generator=g)[y] + torch.randn(n, 8, generator=g)
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


@pytest.fixture
def spy_sampler(monkeypatch):
    from ldpfast import sampling

    made = []

    class Spy(sampling.HeterPoisson):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            made.append(self)

    monkeypatch.setattr(sampling, "HeterPoisson", Spy)
    return made


def test_inductive_fit_samples_with_whole_graph_out_degrees(spy_sampler, one_thread):
    from ldpfast.methods.heterpoisson import fit, split_nodes

    data = planted()
    n = int(data.num_nodes)
    seed = 4
    rep = fit(data, 8.0, model="gcn", setting="inductive", M=2.0, expected_batch_size=60, epochs=1, seed=seed,
              hidden=8)
    tr, _ = split_nodes(n, seed)
    whole = torch.bincount(data.edge_index[0], minlength=n)
    m = tr[data.edge_index[0]] & tr[data.edge_index[1]]
    induced = torch.bincount(data.edge_index[0][m], minlength=n)
    assert not torch.equal(whole[tr], induced[tr])  # the test can tell the two apart
    (s,) = spy_sampler
    assert int(s.data.num_nodes) == int(tr.sum())  # it samples on the training graph ...
    assert torch.equal(s.out_degree, whole[tr])    # ... with the whole graph's D_ot
    assert rep.privacy_model.startswith(S2_NAME) and S2_ASSUMPTION in rep.privacy_model
    assert rep.privacy_model in rep.privacy.guarantee
    assert rep.privacy.params["degree_model"] == "s2_public_degrees"
    # the accountant's maximum over D_ot runs over the whole graph's range
    acc = HeterPoissonAccountant(rep.q_b, 2.0, n)
    assert rep.eps_rdp == pytest.approx(acc.epsilon(rep.sigma, rep.T, rep.delta).eps)


def test_fit_public_bound_mode(spy_sampler, one_thread):
    from ldpfast.methods.heterpoisson import fit

    data = planted(seed=1)
    n = int(data.num_nodes)
    D_pub = int(torch.bincount(data.edge_index[0], minlength=n).max())
    rep = fit(data, 8.0, model="sage", setting="inductive", M=2.0, expected_batch_size=60, epochs=1, seed=2,
              hidden=8, degree_model="public_bound", degree_bound=D_pub)
    (s,) = spy_sampler
    assert torch.all(s.peripheral_prob == min(1.0, 2.0 / D_pub))
    assert "private structure" in rep.privacy_model and rep.privacy_model in rep.privacy.guarantee
    assert rep.privacy.params["degree_bound"] == D_pub and rep.settings["degree_model"] == "public_bound"
    acc = HeterPoissonAccountant(rep.q_b, 2.0, n, degree_model="public_bound", degree_bound=D_pub)
    assert rep.eps == pytest.approx(acc.epsilon(rep.sigma, rep.T, rep.delta).eps) and rep.eps <= 8.0
    # a bound below some node's number of training out-neighbours is refused, before training
    with pytest.raises(ValueError, match="degree_bound"):
        fit(data, 8.0, model="sage", setting="transductive", M=2.0, expected_batch_size=60, epochs=1, seed=2,
            degree_model="public_bound", degree_bound=1)


# --------------------------------------------------------------------------- validation
def test_degree_model_validation_extremes():
    from ldpfast.methods.heterpoisson import fit

    data = counterexample(True)
    kw = {"train_nodes": CAND}
    bad = [({"degree_model": "public_bound"}, ValueError, r"degree_bound: required .*\[1, 2147483647\]"),
           ({"degree_model": "public_bound", "degree_bound": 0}, ValueError, r"degree_bound: .*\[1, 2147483647\]"),
           ({"degree_model": "public_bound", "degree_bound": -3}, ValueError, "degree_bound"),
           ({"degree_model": "public_bound", "degree_bound": 2**31}, ValueError, "degree_bound"),
           ({"degree_model": "public_bound", "degree_bound": 2.0}, TypeError, "degree_bound"),
           ({"degree_model": "public_bound", "degree_bound": float("nan")}, TypeError, "degree_bound"),
           ({"degree_model": "public_bound", "degree_bound": True}, TypeError, "degree_bound"),
           ({"degree_model": "public_bound", "degree_bound": "3"}, TypeError, "degree_bound"),
           ({"degree_bound": 5}, ValueError, "degree_bound: only used with degree_model='public_bound'"),
           ({"degree_model": "s2"}, ValueError, "degree_model: expected one of"),
           ({"degree_model": None}, ValueError, "degree_model"),
           ({"degree_model": "public_bound", "degree_bound": 4,
             "out_degree": torch.ones(2 * L + 1, dtype=torch.long)}, ValueError, "out_degree")]
    for extra, exc, msg in bad:
        with pytest.raises(exc, match=msg):
            HeterPoisson(data, 0.5, 1.0, seed=0, **kw, **extra)
        if "out_degree" not in extra:  # the accountant has no out_degree
            with pytest.raises(exc, match=msg):
                HeterPoissonAccountant(0.5, 1.0, 100, **extra)
    with pytest.raises(ValueError, match="degree_bound"):
        fit(planted(n=60), 1.0, degree_model="public_bound")
    with pytest.raises(ValueError, match="degree_model"):
        fit(planted(n=60), 1.0, degree_model="whole")
    with pytest.raises(ValueError, match="overlap"):
        fit(planted(n=60), 1.0, overlap="zero")
    with pytest.raises(ValueError, match=r"D: expected an integer in \[1, degree_bound=3\]"):
        heterpoisson_mixture(0.5, 1.0, 4, degree_bound=3)
    # extremes inside the range: D_pub = 1 with M >= 1 keeps every neighbour (p = 1); the
    # largest D_pub makes peripheral nodes (almost) never join; both sample and account
    s1 = HeterPoisson(data, 0.5, 1.0, seed=0, degree_model="public_bound", degree_bound=1, **kw)
    b = s1.sample(0, with_x=False)
    assert b.num_nodes == 2 * b.num_subgraphs  # every centre kept its j_l
    smax = HeterPoisson(data, 0.5, 1.0, seed=0, degree_model="public_bound", degree_bound=2**31 - 1, **kw)
    assert float(smax.peripheral_prob[0]) == pytest.approx(1.0 / (2**31 - 1))
    assert smax.sample(0, with_x=False).num_nodes >= 1
    s_big_M = HeterPoisson(data, 0.5, 50.0, seed=0, degree_model="public_bound", degree_bound=2, **kw)
    assert torch.all(s_big_M.peripheral_prob == 1.0)  # min(1, M / D_pub)
    for D_pub in (1, 2**31 - 1):
        a = HeterPoissonAccountant(0.5, 1.0, 100, degree_model="public_bound", degree_bound=D_pub)
        r = a.epsilon(5.0, 3, 1e-5)
        assert math.isfinite(r.eps) and r.eps > 0 and r.worst_degree <= D_pub
    # a rejected call changes nothing: the data is untouched and a valid call still works
    before = data.edge_index.clone()
    with pytest.raises(ValueError):
        HeterPoisson(data, 0.5, 1.0, seed=0, degree_model="public_bound", degree_bound=0, **kw)
    assert torch.equal(before, data.edge_index)


# --------------------------------------------------------------------------- F4: no seed
SEED = 3150346709227310137  # distinctive, < 2**62 (the audit's seed range)


def _walk(obj, path="root"):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path + "/" + str(k), k, None
            yield from _walk(v, path + "/" + str(k))
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            yield from _walk(v, f"{path}[{i}]")
    else:
        yield path, None, obj


def _assert_no_seed(d):
    derived = {SEED, SEED ^ 0x5EED, SEED ^ 0xBA7C4, SEED ^ 0x7E57, SEED + 1, SEED + 2,
               SEED & ((1 << 63) - 1), SEED & 0xFFFFFFFF, SEED >> 32}
    for path, key, val in _walk(d):
        if key is not None:
            assert "seed" not in str(key).lower(), path
        elif isinstance(val, (int, np.integer)) and not isinstance(val, bool):
            assert int(val) not in derived, path
        elif isinstance(val, float):
            assert val not in {float(x) for x in derived}, path
    text = json.dumps(d, default=str)
    for x in derived:
        assert str(x) not in text and format(x, "x") not in text.lower()
    assert "seed" not in text.lower()


@pytest.mark.parametrize("model,setting", [("gcn", "inductive"), ("mlp", "transductive")])
def test_fit_report_holds_no_seed(model, setting, one_thread):
    from ldpfast.methods.heterpoisson import fit

    rep = fit(planted(seed=2), 8.0, model=model, setting=setting, M=1.0, expected_batch_size=60, epochs=1,
              seed=SEED, hidden=8)
    _assert_no_seed(rep.to_dict())
    _assert_no_seed(rep.privacy.to_dict())
    _assert_no_seed(rep.settings)


def test_audit_and_accountant_reports_hold_no_seed():
    from ldpfast.privacy.audit import audit_heterpoisson
    from ldpfast.reproduce._report import public_command

    r = audit_heterpoisson(planted(n=80, seed=3), q_b=0.3, M=1.0, T=5, delta=1e-5, eps=4.0, train_model=False,
                           num_observations=20, runs=100, seed=SEED)
    assert r.privacy_model.startswith(S2_NAME)
    _assert_no_seed(r.to_dict())
    _assert_no_seed(HeterPoissonAccountant(0.3, 1.0, 80).epsilon(2.0, 5, 1e-5).to_dict())
    # the reproduction's recorded command drops the seed in every spelling
    cmd = public_command("ldpfast reproduce heterpoisson", ["--runs", "2", "--seed", str(SEED), "--seed=7", "--quick"])
    assert cmd == "ldpfast reproduce heterpoisson --runs 2 --seed <secret> --seed=<secret> --quick"
