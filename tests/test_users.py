"""Users, not rows (issue 31): every report keyed to its user, never to a row position, the rest
of the graph, other parameters, the thread count or the backend.

Statistical tests state their false-alarm rate: 4.5 standard deviations, about 7e-6 each.
"""
from __future__ import annotations

import hashlib
import math

import ldpfast._C as C
import numpy as np
import pytest
import torch
from secret_keys import sec
from torch_geometric.data import Data

from ldpfast import _backend
from ldpfast._numba import kernels as NB
from ldpfast.datasets import load
from ldpfast.mechanisms import grr_fs, multibit_encode, rr_labels
from ldpfast.mechanisms.edges import dprr, rr_edges
from ldpfast.privacy.ldp import grr_probs
from ldpfast.privacy.users import Keying, context, report_keys, set_report_keys
from ldpfast.rng import philox4x32_10
from ldpfast.transforms import DPRR, GRRFS, MultiBit, RREdges, RRLabels

Z = 4.5  # two-sided false-alarm rate about 7e-6 per check


@pytest.fixture(scope="module")
def cora():
    d = load("cora")
    d.user_id = torch.arange(d.num_nodes, dtype=torch.int64)
    return d


def _sub(d, rows: torch.Tensor) -> Data:
    """The graph induced by ``rows`` (in that order), with every node attribute."""
    n = d.num_nodes
    new = torch.full((n,), -1, dtype=torch.int64)
    new[rows] = torch.arange(rows.numel())
    ei = d.edge_index
    m = (new[ei[0]] >= 0) & (new[ei[1]] >= 0)
    return Data(x=d.x[rows], y=d.y[rows], user_id=d.user_id[rows], edge_index=new[ei[:, m]],
                num_nodes=rows.numel())


def _lists(res, keys: torch.Tensor) -> dict[int, frozenset]:
    """Each user's noisy list as a set of user keys."""
    g = res.noisy
    rp, c, k = g.rowptr.numpy(), g.col.numpy(), keys.numpy()
    return {int(k[i]): frozenset(k[c[rp[i]:rp[i + 1]]].tolist()) for i in range(g.num_nodes)}


# --- the derivation ----------------------------------------------------------------------------
def _philox(c, key):
    out = philox4x32_10(np.array(c, dtype=np.uint64).reshape(1, 4),
                        np.array([key & 0xFFFFFFFF, key >> 32], dtype=np.uint64).reshape(1, 2))[0]
    return [int(v) for v in out]


def test_report_keys_follow_the_documented_chain_on_every_backend():
    g = np.random.default_rng(3)
    rows = g.integers(0, 256, (40, 300), dtype=np.uint8)
    ukeys = g.integers(0, 2**62, 40).astype(np.int64)
    extra = g.integers(0, 2, 40).astype(np.int64)
    ctx = context(12345, "test", "m", {"eps": 1.0})
    want = []
    for i in range(40):
        fp = np.zeros(2, np.uint64)
        C.fingerprint(rows[i].copy(), ctx.k_nh, ctx.k_pad, ctx.k_prf, fp)  # the row digest is the fingerprint
        s0, s1, u, e = int(fp[0]), int(fp[1]), int(ukeys[i]), int(extra[i])
        a = _philox([u & 0xFFFFFFFF, u >> 32, e & 0xFFFFFFFF, e >> 32], ctx.k_a)
        b = _philox([a[0] ^ (s0 & 0xFFFFFFFF), a[1] ^ (s0 >> 32), a[2] ^ (s1 & 0xFFFFFFFF), a[3] ^ (s1 >> 32)], ctx.k_b)
        c = _philox(b, ctx.k_c)
        want.append((b[0] | b[1] << 32, c[0] | c[1] << 32))
    for backend in ("cpp", "numba"):
        import os

        old = os.environ.get("LDPFAST_BACKEND")
        os.environ["LDPFAST_BACKEND"] = backend
        try:
            seeds, ids = report_keys(ctx, torch.from_numpy(ukeys), torch.from_numpy(rows), torch.from_numpy(extra),
                                     ids=True)
        finally:
            os.environ.pop("LDPFAST_BACKEND") if old is None else os.environ.__setitem__("LDPFAST_BACKEND", old)
        got = list(zip(seeds.numpy().view(np.uint64).tolist(), ids.tolist()))
        assert got == want, backend


def test_set_digests_are_order_free_and_equal_across_backends():
    rp = np.array([0, 3, 3, 5], np.int64)
    keys = np.array([7, 100, 2**40], np.int64)
    out = {}
    for name, K in (("cpp", C), ("numba", NB)):
        for col in (np.array([0, 1, 2, 2, 0], np.int32), np.array([2, 0, 1, 0, 2], np.int64)):
            o = np.zeros((3, 2), np.uint64)
            K.set_digests(rp, col, keys, 99, o)
            out.setdefault(name, []).append(o)
    a = out["cpp"][0]
    assert (a[1] == 0).all() and not (a[0] == a[2]).all()
    for v in out["cpp"] + out["numba"]:
        assert (v == a).all()  # neighbour order and backend do not matter


def test_every_parameter_enters_the_derivation():
    keys = torch.arange(5)
    base = report_keys(context(1, "d", "m", {"eps": 1.0}), keys)[0]
    for ctx in (context(2, "d", "m", {"eps": 1.0}), context(1, "e", "m", {"eps": 1.0}),
                context(1, "d", "n", {"eps": 1.0}), context(1, "d", "m", {"eps": 1.0000000000000002}),
                context(1, "d", "m", {"eps": 1.0, "m": 3}), context(1, "d", "m", {"eps": 1.0}, graph=b"g")):
        other = report_keys(ctx, keys)[0]
        assert not torch.equal(other, base)
    assert torch.equal(report_keys(context(1, "d", "m", {"eps": 1.0}), keys)[0], base)
    assert "k_a" not in repr(context(1, "d", "m", {})) and "1" not in repr(Keying(1))


# --- growing, shrinking and permuted releases: nothing an unchanged user reported changes -------
def _node_reports(d, store=None):
    """MultiBit (encoded), GRRFS, RRLabels of d with user keys: (x_multibit, x_grrfs, y)."""
    kw = {"seed": sec(11), "user_key": "user_id", "dataset": "cora-test"}
    xm = MultiBit(1.0, rectify=False, **kw)(d.clone()).x
    db = d.clone()
    db.x = (db.x > 0).to(torch.int64)
    xg = GRRFS(1.0, m=10, **kw)(db).x
    y = RRLabels(1.0, mask="all", **kw)(d.clone()).y
    return xm, xg, y


def test_growing_graph_16_releases_changes_no_existing_report(cora):
    n0 = cora.num_nodes - 16
    first = None
    for r in range(17):  # one user joins per release (with their edges)
        k = n0 + r
        d = _sub(cora, torch.arange(k))
        reps = _node_reports(d)
        if first is None:
            first = [t.clone() for t in reps]
        for a, b in zip(first, reps):
            assert torch.equal(b[:n0], a), "an existing user's node report changed as the graph grew"


def test_user_leaves_and_rows_permuted_keep_every_report(cora):
    n = cora.num_nodes
    ref = _node_reports(cora)
    g = torch.Generator().manual_seed(4)
    leave = torch.randperm(n, generator=g)[0]
    rows = torch.cat([torch.arange(leave), torch.arange(leave + 1, n)])
    rows = rows[torch.randperm(rows.numel(), generator=g)]  # one user leaves, the rest reordered
    got = _node_reports(_sub(cora, rows))
    for a, b in zip(ref, got):
        assert torch.equal(b, a[rows])


def test_edge_reports_keep_their_bits_as_users_join_leave_and_move(cora):
    n = cora.num_nodes
    g = torch.Generator().manual_seed(9)
    perm = torch.randperm(n, generator=g)
    untouched_changed = {}
    for name, mech, kw in (("rr", rr_edges, {"max_output_edges": 10**8}), ("dprr n_max", dprr, {"n_max": 3000})):
        grown = mech(_sub(cora, torch.arange(n)), 2.0, seed=sec(3), user_keys=cora.user_id, **kw)
        L = _lists(grown, cora.user_id)
        moved = mech(_sub(cora, perm), 2.0, seed=sec(3), user_keys=cora.user_id[perm], **kw)
        assert _lists(moved, cora.user_id[perm]) == L, name  # reordered rows: identical reports
        # 16 releases: users n-16 .. n-1 join one by one; count reports of users whose own
        # neighbour list did not change that lose or gain a bit among the users they covered
        changed = 0
        prev = None
        for k in range(n - 16, n + 1):
            d = _sub(cora, torch.arange(k))
            Lk = _lists(mech(d, 2.0, seed=sec(3), user_keys=cora.user_id[:k], **kw), cora.user_id[:k])
            if prev is not None:
                nb_k = set(cora.edge_index[0][cora.edge_index[1] == k - 1].tolist())
                for u, s in prev.items():
                    if u not in nb_k and Lk[u] - {k - 1} != s:
                        changed += 1
            prev = Lk
        untouched_changed[name] = changed
    assert untouched_changed["rr"] == 0 and untouched_changed["dprr n_max"] == 0


def test_dprr_without_n_max_is_a_new_setting_drawn_fresh(cora):
    """Without n_max, eq. (6)'s q moves with n, so a new n is a new setting: every user's report
    is drawn fresh (seed, report id and degree noise), never a re-use of memoised coins under a
    new law; with n_max fixed an unchanged user keeps the identical report."""
    n = cora.num_nodes
    ei = cora.edge_index
    touched = set(ei[0][(ei[1] >= n - 600)].tolist())
    same = [u for u in range(n - 600) if u not in touched]
    k_small = Keying(sec(5), user_keys=cora.user_id[:n - 600], ids=True)
    k_big = Keying(sec(5), user_keys=cora.user_id, ids=True)
    small = dprr(_sub(cora, torch.arange(n - 600)), 3.0, _keying=k_small)
    big = dprr(_sub(cora, torch.arange(n)), 3.0, _keying=k_big)
    ids_small, ids_big = k_small.last[2], k_big.last[2][: n - 600]
    assert not np.isin(ids_small[same], ids_big[same]).any()  # every unchanged user: a new report id
    ds, db = small.d_star.numpy()[same], big.d_star.numpy()[same]
    assert (ds != db).mean() > 0.9  # fresh degree noise (equal only by chance on the grid)
    k1 = Keying(sec(5), user_keys=cora.user_id[:n - 600], ids=True)
    k2 = Keying(sec(5), user_keys=cora.user_id, ids=True)
    fixed_small = dprr(_sub(cora, torch.arange(n - 600)), 3.0, n_max=4000, _keying=k1)
    fixed_big = dprr(_sub(cora, torch.arange(n)), 3.0, n_max=4000, _keying=k2)
    assert np.array_equal(k1.last[2][same], k2.last[2][: n - 600][same])
    Ls, Lb = _lists(fixed_small, cora.user_id[:n - 600]), _lists(fixed_big, cora.user_id)
    old = set(range(n - 600))
    assert all(Lb[u] & old == Ls[u] for u in same)  # identical over the users both releases cover


# --- a seed shared across parameters: independent bits ------------------------------------------
def _sd(p, n):
    return math.sqrt(p * (1 - p) / n)


def test_eps_sweep_with_one_seed_gives_independent_label_reports(cora):
    y = cora.y
    c = 7
    r1, _ = rr_labels(y, c, 1.0, seed=8)
    r2, _ = rr_labels(y, c, 2.0, seed=8)
    diff = r1 != r2
    got = float((r2[diff] == y[diff]).float().mean())
    p1, q1 = grr_probs(1.0, c)
    p2, q2 = grr_probs(2.0, c)
    # independent reports: P(r2 = y | r1 != r2)
    want = p2 * (1 - p1) / (1 - (p1 * p2 + (c - 1) * q1 * q2))
    assert abs(got - want) < Z * _sd(want, int(diff.sum())), (got, want)


def test_eps_sweep_with_one_seed_gives_independent_grr_fs_reports(cora):
    x = (cora.x > 0).to(torch.int64)
    d = x.shape[1]
    m = 100
    a1, _ = grr_fs(x, 2, 0.5, m, seed=8)
    a2, _ = grr_fs(x, 2, 1.0, m, seed=8)
    diff = a1 != a2
    got = float((a2[diff] == x[diff]).double().mean())

    def keep(e):  # P(report = x) for a binary entry: sampled w.p. m/d (GRR), else uniform
        p = math.exp(e) / (math.exp(e) + 1)
        return m / d * p + (1 - m / d) / 2

    k1, k2 = keep(0.5), keep(1.0)
    want = k2 * (1 - k1) / (k1 * (1 - k2) + k2 * (1 - k1))
    assert abs(got - want) < Z * _sd(want, int(diff.sum())), (got, want)


def test_eps_sweep_with_one_seed_gives_independent_rr_edges(cora):
    n = cora.num_nodes
    for keys in (None, cora.user_id):
        L1 = _lists(rr_edges(cora, 1.0, seed=sec(8), user_keys=keys, max_output_edges=10**8), cora.user_id)
        L2 = _lists(rr_edges(cora, 2.0, seed=sec(8), user_keys=keys, max_output_edges=10**8), cora.user_id)
        true = {i: set() for i in range(n)}
        for a, b in cora.edge_index.t().tolist():
            true[a].add(b)
        only1 = [(u, v) for u in L1 for v in L1[u] - L2[u]]
        got = sum(v in true[u] for u, v in only1) / len(only1)
        e1, e2 = math.e / (1 + math.e), math.exp(2) / (1 + math.exp(2))
        E = cora.edge_index.shape[1]
        t, f = E * e1 * (1 - e2), (n * (n - 1) - E) * (1 - e1) * e2  # listed at eps 1 and not at eps 2
        want = t / (t + f)
        assert got > 0 and abs(got - want) < Z * _sd(want, len(only1)), (got, want)


# --- the adversary who keeps every nightly release ----------------------------------------------
def test_plurality_vote_over_16_releases_stays_at_one_report(cora, tmp_path):
    """The audit's RRLabels adversary: with k = 16 growing releases it reached 0.68 label accuracy
    (one eps-1 report: 0.31).  Now every existing user's report is the memoised one."""
    from ldpfast.privacy import ReportStore

    store = ReportStore(tmp_path / "r.sqlite", create=True)
    n0 = cora.num_nodes - 16
    votes = torch.zeros(n0, 7, dtype=torch.int64)
    for r in range(16):
        d = _sub(cora, torch.arange(n0 + r))
        y = RRLabels(1.0, mask="all", seed=sec(21), user_key="user_id", dataset="cora", store=store)(d).y
        votes[torch.arange(n0), y[:n0]] += 1
    acc = float((votes.argmax(1) == cora.y[:n0]).float().mean())
    p, _ = grr_probs(1.0, 7)
    assert abs(acc - p) < Z * _sd(p, n0), (acc, p)  # the single-report limit
    _, eps = store.totals("node-ldp", "cora")
    assert eps.max() == 1.0 and eps.size == cora.num_nodes - 1  # one report each, charged once


def test_store_total_is_the_sum_of_distinct_reports(cora, tmp_path):
    from ldpfast.privacy import ReportStore

    store = ReportStore(tmp_path / "r.sqlite", create=True)
    d = cora.clone()
    g = torch.Generator().manual_seed(2)
    distinct = [set() for _ in range(d.num_nodes)]
    for r in range(6):
        if r:  # a few users change their label between releases (and back: a value seen before)
            who = torch.randint(0, d.num_nodes, (40,), generator=g)
            d.y[who] = torch.randint(0, 7, (40,), generator=g)
        for eps in (1.0, 0.5) if r == 5 else (1.0,):
            RRLabels(eps, mask="all", seed=sec(4), user_key="user_id", dataset="cora", store=store)(d.clone())
            for i, v in enumerate(d.y.tolist()):
                distinct[i].add((v, eps))
    users, eps = store.totals("node-ldp", "cora")
    want = np.array([sum(e for _, e in distinct[u]) for u in users])
    assert np.allclose(eps, want)
    assert (want > 1.5).sum() > 100  # the test has users with several distinct reports


def test_seed_never_reaches_the_store(cora, tmp_path):
    from ldpfast.privacy import ReportStore

    secret = bytes(range(1, 33))
    path = tmp_path / "r.sqlite"
    store = ReportStore(path, create=True)
    t = RRLabels(1.0, mask="all", seed=secret, user_key="user_id", dataset="cora", store=store)
    t(cora.clone())
    store.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert secret[:8] not in blob and secret[8:16] not in blob and secret[16:] not in blob
    # nor any user's report seed, nor an unkeyed hash of a label
    k = Keying(secret, domain="cora", user_keys=cora.user_id)
    seeds = k.seeds("rr_labels", {"eps": 1.0, "num_classes": 7, "dtype": "torch.int64"}, cora.num_nodes, "cpu",
                    rows=cora.y, extra=torch.ones(cora.num_nodes, dtype=torch.bool))
    for s in seeds[:50].numpy().view(np.uint64).tolist():
        assert s.to_bytes(8, "little") not in blob
    for v in range(7):
        assert hashlib.sha256(np.int64(v).tobytes()).digest()[:8] not in blob


# --- edges: the output law of the keyed sampler --------------------------------------------------
def test_keyed_edge_sampler_cpp_equals_numba_and_thread_count(cora):
    for mech, kw in ((dprr, {}), (dprr, {"n_max": 4000}), (rr_edges, {"max_output_edges": 10**8})):
        a = mech(cora, 1.5, seed=sec(6), user_keys=cora.user_id, backend="cpp", **kw).noisy
        b = mech(cora, 1.5, seed=sec(6), user_keys=cora.user_id, backend="numba", **kw).noisy
        old = _backend.get_num_threads()
        _backend.set_num_threads(1)
        try:
            c = mech(cora, 1.5, seed=sec(6), user_keys=cora.user_id, backend="cpp", **kw).noisy
        finally:
            _backend.set_num_threads(old)
        for o in (b, c):
            assert torch.equal(a.rowptr, o.rowptr) and torch.equal(a.col.long(), o.col.long())


def test_keyed_sampler_one_pass_equals_count_and_fill():
    """C++ keyed_rr_rows (one pass, a buffer per thread) gives keyed_rr's count + fill bits and
    the Numba twin's, for both modes, public rows, a shard's rows (row0), any thread count, and
    no rows at all."""
    rng = np.random.default_rng(3)
    n, S = 3000, 3500
    deg = rng.integers(0, 40, n)
    rows = [np.unique(rng.integers(0, n, d)) for d in deg]
    rows = [r[r != i] for i, r in enumerate(rows)]
    rp = np.zeros(n + 1, np.int64)
    rp[1:] = np.cumsum([len(r) for r in rows])
    col = np.concatenate(rows).astype(np.int64)
    keys = rng.permutation(S)[:n].astype(np.int64)
    table = np.full(S, -1, np.int64)
    table[keys] = np.arange(n)
    seeds = rng.integers(0, 2**63, n, dtype=np.int64).view(np.uint64)
    pt = rng.uniform(0.5, 1.0, n)
    pub = (rng.random(n) < 0.05).astype(np.uint8)
    for mode, pf, pm in ((1, rng.uniform(0, 0.02, n), 0.3), (1, np.full(n, 2.0**-20), 0.4),
                         (0, rng.uniform(0, 0.01, n), 0.0)):
        for b, e, pb in ((0, n, None), (0, n, pub), (1000, 2300, None)):
            args = (rp[b:e + 1] - rp[b], col[rp[b]:rp[e]], keys, table, seeds[b:e], 7, 8, mode, pt[b:e], pf[b:e],
                    pm, None if pb is None else pb[b:e])
            want = []
            for K in (C, NB):
                orp = np.zeros(e - b + 1, np.int64)
                K.keyed_rr(*args, orp, None, b)
                np.cumsum(orp, out=orp)
                oc = np.empty(orp[-1], np.int64)
                K.keyed_rr(*args, orp, oc, b)
                want.append((orp, oc))
            assert np.array_equal(want[0][0], want[1][0]) and np.array_equal(want[0][1], want[1][1])
            assert want[0][0][-1] > 0
            old = _backend.get_num_threads()
            try:
                for t in (1, 2, 3):
                    _backend.set_num_threads(t)
                    orp = np.full(e - b + 1, 7, np.int64)
                    oc = C.keyed_rr_rows(*args, orp, b)
                    assert np.array_equal(orp, want[0][0]) and np.array_equal(oc, want[0][1]), (mode, b, t)
            finally:
                _backend.set_num_threads(old)
    orp = np.full(1, 5, np.int64)
    oc = C.keyed_rr_rows(rp[:1], col[:0], keys, table, seeds[:0], 7, 8, 1, pt[:0], pt[:0], 0.3, None, orp, 0)
    assert orp.tolist() == [0] and oc.shape == (0,) and oc.dtype == np.int64


@pytest.mark.parametrize("q", [1.0, 0.7, 0.5, 0.31, 0.0123, 3e-4])
def test_keyed_dprr_bits_have_the_papers_law(q):
    """Bit-by-bit RR then sampling (paper eq. 7): P[output] = p q on a true edge and (1 - p) q
    on a non-edge, independently; checked over many users of a small graph, at q on and off
    the levels' boundaries (exact powers of two)."""
    n, trials = 60, 400
    K = C
    rp = np.zeros(n + 1, np.int64)  # row i: neighbours i+1, i+2 (mod n)
    col = np.array([[(i + 1) % n, (i + 2) % n] for i in range(n)]).reshape(-1)
    col = np.sort(col.reshape(n, 2), axis=1).reshape(-1).astype(np.int64)
    rp[1:] = np.arange(1, n + 1) * 2
    p, pm = 0.8, 0.2
    hits_t = hits_f = 0
    pair = np.zeros((2, 2))
    for t in range(trials):
        keys = np.arange(n, dtype=np.int64)
        seeds = report_keys(context(t, "law", "dprr/coins", {}), torch.from_numpy(keys))[0].numpy().view(np.uint64)
        table = keys.copy()
        orp = np.zeros(n + 1, np.int64)
        pt, qq = np.full(n, p * q), np.full(n, q)
        K.keyed_rr(rp, col, keys, table, seeds, 7, 8, 1, pt, qq, pm, None, orp, None)
        np.cumsum(orp, out=orp)
        oc = np.empty(orp[-1], np.int64)
        K.keyed_rr(rp, col, keys, table, seeds, 7, 8, 1, pt, qq, pm, None, orp, oc)
        for i in range(n):
            row = set(oc[orp[i]:orp[i + 1]].tolist())
            nb = {(i + 1) % n, (i + 2) % n}
            hits_t += len(row & nb)
            hits_f += len(row - nb)
            a, b = (i + 5) % n in row, (i + 6) % n in row  # two non-edges of one row: independent?
            pair[int(a), int(b)] += 1
    nt, nf = trials * n * 2, trials * n * (n - 3)
    for got, prob, cnt in ((hits_t / nt, p * q, nt), (hits_f / nf, pm * q, nf)):
        assert abs(got - prob) < Z * _sd(prob, cnt) + 1e-12, (q, got, prob)
    both = pair[1, 1] / pair.sum()
    assert abs(both - (pm * q) ** 2) < Z * _sd((pm * q) ** 2, pair.sum()) + 1e-12


def test_changed_list_is_redrawn_whole_and_only_its_users_change(cora):
    """Adding one edge (i, j) between existing users changes i's and j's lists: each of the two
    reports is drawn afresh, every bit of it (issue 37, finding 1: keeping each bit's own coin
    showed exactly which bit changed); nobody else's report changes."""
    n = cora.num_nodes
    ei = cora.edge_index
    i, j = 0, 1000
    assert not ((ei[0] == i) & (ei[1] == j)).any()
    d2 = Data(edge_index=torch.cat([ei, torch.tensor([[i, j], [j, i]])], 1), num_nodes=n)
    for eps in (0.5, 3.0):
        a = _lists(rr_edges(cora, eps, seed=sec(2), user_keys=cora.user_id, max_output_edges=10**8), cora.user_id)
        b = _lists(rr_edges(d2, eps, seed=sec(2), user_keys=cora.user_id, max_output_edges=10**8), cora.user_id)
        diff = {u for u in range(n) if a[u] != b[u]}
        assert diff == {i, j}
        for u, v in ((i, j), (j, i)):
            # an unchanged bit flips w.p. 2 p (1 - p) under a fresh draw, never under kept coins
            others = (a[u] ^ b[u]) - {v}
            pm = 1 / (1 + math.exp(eps))
            expect = 2 * pm * (1 - pm) * (n - 2)
            assert len(others) > 0.5 * expect, (eps, len(others), expect)


def test_no_user_key_warns_on_a_second_graph(cora):
    t = RRLabels(1.0, seed=1)
    t(cora.clone())
    t(cora.clone())  # the same graph again: no warning
    d = cora.clone()
    d.y = d.y.clone()
    d.y[0] = (d.y[0] + 1) % 7
    with pytest.warns(UserWarning, match="second, different graph without user keys"):
        t(d)


def test_transform_arguments_are_checked_when_constructed(tmp_path):
    from ldpfast.privacy import ReportStore

    for bad in (lambda: MultiBit(0.0), lambda: RRLabels(float("nan")), lambda: GRRFS(1.0, m=0),
                lambda: DPRR(1.0, alpha=1.5), lambda: RREdges(-1.0), lambda: MultiBit(1.0, alpha=1.0, beta=0.0),
                lambda: RRLabels(1.0, mask=3), lambda: MultiBit(1.0, user_key=5), lambda: MultiBit(1.0, dataset=""),
                lambda: DPRR(1.0, symmetrize="both")):
        with pytest.raises((ValueError, TypeError)):
            bad()
    with pytest.raises(ValueError, match="needs user_key"):
        MultiBit(1.0, store=ReportStore(tmp_path / "s.sqlite", create=True))


def test_user_keys_must_be_distinct_and_dense_for_edges(cora):
    keys = cora.user_id.clone()
    keys[5] = keys[6]
    with pytest.raises(ValueError, match="twice"):
        rr_labels(cora.y, 7, 1.0, seed=sec(1), user_keys=keys)
    with pytest.raises(ValueError, match="negative"):
        rr_labels(cora.y, 7, 1.0, seed=sec(1), user_keys=cora.user_id - 1)
    with pytest.raises(ValueError, match="dense"):
        dprr(cora, 2.0, seed=sec(1), user_keys=cora.user_id * 10**6)
    with pytest.raises(ValueError, match="no user-keyed path"):
        from ldpfast.mechanisms.edges import local_laplace

        local_laplace(cora, 2.0, seed=sec(1), user_keys=cora.user_id)


def test_set_report_keys_ignore_row_numbering(cora):
    """A user's neighbour-set digest depends on their neighbours' keys, not on row numbers."""
    n = cora.num_nodes
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(1))
    d = _sub(cora, perm)
    from ldpfast.graph import csr_of

    ga, gb = csr_of(cora), csr_of(d)
    ctx = context(3, "x", "dprr", {})
    sa, ia = set_report_keys(ctx, cora.user_id, ga.rowptr, ga.col, ids=True)
    sb, ib = set_report_keys(ctx, cora.user_id[perm], gb.rowptr, gb.col, ids=True)
    assert torch.equal(sa[perm], sb) and np.array_equal(ia[perm.numpy()], ib)


def test_multibit_on_two_datasets_under_one_secret_share_no_bits(cora):
    x = cora.x.clamp(0, 1)
    a, _ = multibit_encode(x, 4.0, 4, seed=1, dataset="a")
    b, _ = multibit_encode(x, 4.0, 4, seed=1, dataset="b")
    same_cols = ((a != 0) == (b != 0)).all(1).float().mean()
    assert same_cols < 0.01  # the sampled dimensions are drawn independently


@pytest.mark.parametrize("width", [1, 3, 8, 33, 64, 65, 128, 300])
def test_cpp_kernels_derive_the_seeds_of_report_keys(width):
    # The C++ mechanisms derive each row's seed in their own pass (csrc/cpu/rowkeys.h: lanes of
    # Philox, pads made once, short last blocks from the zero-pair sums): the seeds and report
    # ids of the separate userkey kernels, for any row width (whole and partial 256-byte
    # blocks) and for labels with their mask as the extra flags.  Changing a byte changes the seed.
    g = np.random.default_rng(width)
    n = 41
    x = g.integers(0, 2, (n, width)).astype(np.int32)
    keys = g.permutation(10_000)[:n].astype(np.int64)
    ctx = context(7, "d", "grr", {"w": width})
    k = lambda so, ri, ex=None: (keys, ex, ctx.k_nh, ctx.k_pad, ctx.k_prf, ctx.k_a, ctx.k_b, ctx.k_c, so, ri)
    want, wid = report_keys(ctx, torch.from_numpy(keys), torch.from_numpy(x), ids=True)
    so, ri = np.empty(n, np.int64), np.empty(n, np.int64)
    assert C.grr(x, np.full(width, 2, np.int64), np.full(width, 2**31, np.uint64), k(so, ri), np.empty_like(x)) == -1
    assert np.array_equal(so, want.numpy()) and np.array_equal(ri.view(np.uint64), wid)
    x[5, width - 1] ^= 1
    so2 = np.empty(n, np.int64)
    C.grr(x, np.full(width, 2, np.int64), np.full(width, 2**31, np.uint64), k(so2, None), np.empty_like(x))
    assert (so2 != so).tolist() == [i == 5 for i in range(n)]
    y, m = x[:, 0].astype(np.int64), g.random(n) < 0.5
    want, wid = report_keys(ctx, torch.from_numpy(keys), torch.from_numpy(y), extra=torch.from_numpy(m), ids=True)
    assert C.rr_labels(y, m, 2, 2**31, k(so, ri, m.astype(np.int64)), np.empty_like(y)) == -1
    assert np.array_equal(so, want.numpy()) and np.array_equal(ri.view(np.uint64), wid)
