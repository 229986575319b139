"""Issue 37, item 2: a store says "reused" only for a bit-identical report.

Property: for every mechanism, over random edits of the input (a value changed, a zero column
appended, the dtype changed, rows permuted, users joining or leaving, an edge added or removed)
and of the parameters (eps, m, domain, range, class count, n_max), a user whose report id is
the same in two releases has the bit-identical report in both (edges: over the users both
releases cover, the rest of the key space being drawn from the same seed).  Report ids are
what the store compares, so this is the store's "reused"; the store itself is exercised by
tests/test_store.py and the transform tests.  The converse (an unchanged user keeps their id)
is checked too, so the test cannot pass by giving everyone a new id.
"""
from __future__ import annotations

import numpy as np
import torch
from secret_keys import sec
from torch_geometric.data import Data

from ldpfast.mechanisms import dprr, grr, grr_fs, multibit_encode, onebit, rr_edges, rr_labels
from ldpfast.privacy.users import Keying

SECRET = sec(2026)


def _run(call, keys):
    k = Keying(SECRET, user_keys=keys, ids=True)
    out = call(k)
    return out, dict(zip(keys.tolist(), k.last[2].tolist()))


def _check(rep_a, ids_a, rep_b, ids_b, same_row, name, unchanged):
    """Every user in both releases with one report id has one report; ``unchanged`` users (input
    and parameters unchanged) must keep their id."""
    reused = 0
    for u in set(ids_a) & set(ids_b):
        if ids_a[u] == ids_b[u]:
            assert same_row(rep_a, rep_b, u), f"{name}: user {u} 'reused' but the report changed"
            reused += 1
        else:
            assert u not in unchanged, f"{name}: unchanged user {u} got a new report id"
    assert reused >= len(unchanged & set(ids_a) & set(ids_b)), name
    return reused


def _rowmap(keys):
    return {int(u): i for i, u in enumerate(keys.tolist())}


# --- node mechanisms ----------------------------------------------------------------------------
NODE = {
    "grr": (lambda x, kg, p: grr(x, p.get("k", 5), p.get("eps", 1.0), _keying=kg)[0], "cat"),
    "grr_fs": (lambda x, kg, p: grr_fs(x, p.get("k", 5), p.get("eps", 1.0), p.get("m", 2), _keying=kg)[0], "cat"),
    "onebit": (lambda x, kg, p: onebit(x, p.get("eps", 1.0), 0.0, p.get("beta", 1.0), _keying=kg)[0], "real"),
    "multibit": (lambda x, kg, p: multibit_encode(x, p.get("eps", 2.0), p.get("m", 2), 0.0, p.get("beta", 1.0),
                                                  _keying=kg)[0], "real"),
    "rr_labels": (lambda x, kg, p: rr_labels(x, p.get("k", 5), p.get("eps", 1.0), _keying=kg)[0], "label"),
}


def _node_input(kind, n, d, g):
    if kind == "cat":
        return torch.from_numpy(g.integers(0, 5, (n, d)))
    if kind == "real":
        return torch.from_numpy(g.random((n, d)))
    return torch.from_numpy(g.integers(0, 5, n))


def _edits(kind, x, keys, g):
    """(name, x', keys', params', unchanged users) for one random edit of each kind."""
    n = x.shape[0]
    out = []
    y = x.clone()
    i = int(g.integers(n))
    if kind == "real":
        y[i, int(g.integers(x.shape[1]))] = float(g.random())
    elif kind == "cat":
        y[i, int(g.integers(x.shape[1]))] = (y[i, 0] + 1) % 5
    else:
        y[i] = (y[i] + 1) % 5
    out.append(("value", y, keys, {}, set(keys.tolist()) - {int(keys[i])}))
    if kind != "label":
        out.append(("zero column", torch.cat([x, torch.zeros((n, 1), dtype=x.dtype)], 1), keys, {}, set()))
        out.append(("dtype", x.to(torch.float32 if kind == "real" else torch.int32), keys, {}, set()))
    else:
        out.append(("dtype", x.to(torch.int32), keys, {}, set()))
    perm = torch.from_numpy(g.permutation(n))
    out.append(("permute", x[perm], keys[perm], {}, set(keys.tolist())))
    keep = torch.from_numpy(np.sort(g.choice(n, n - 3, replace=False)))
    out.append(("leave", x[keep], keys[keep], {}, set(keys[keep].tolist())))
    out.append(("eps", x, keys, {"eps": 1.5}, set()))
    if kind == "cat":
        out.append(("m/k", x, keys, {"m": 3, "k": 6}, set()))
    if kind == "real":
        out.append(("range", x, keys, {"beta": 2.0}, set()))
    if kind == "label":
        out.append(("classes", x, keys, {"k": 6}, set()))
    return out


def test_node_reports_reused_only_when_bit_identical():
    g = np.random.default_rng(5)
    for name, (call, kind) in NODE.items():
        for trial in range(3):
            n, d = 40, int(g.integers(2, 9))
            x = _node_input(kind, n, d, g)
            keys = torch.from_numpy(g.permutation(10**6)[:n].astype(np.int64))
            rep_a, ids_a = _run(lambda kg, x=x, call=call: call(x, kg, {}), keys)
            ra = _rowmap(keys)
            for edit, x2, keys2, params, unchanged in _edits(kind, x, keys, g):
                rep_b, ids_b = _run(lambda kg, x2=x2, params=params, call=call: call(x2, kg, params), keys2)
                rb = _rowmap(keys2)

                def same(a, b, u, ra=ra, rb=rb):
                    return a[ra[u]].shape == b[rb[u]].shape and bool(torch.equal(a[ra[u]], b[rb[u]]))
                _check(rep_a, ids_a, rep_b, ids_b, same, f"{name}/{edit}/{trial}", unchanged)


# --- edge mechanisms ----------------------------------------------------------------------------
def _graph(n, m, g):
    src = g.integers(0, n, m)
    dst = g.integers(0, n, m)
    keep = src != dst
    ei = torch.from_numpy(np.stack([src[keep], dst[keep]]))
    ei = torch.unique(torch.cat([ei, ei.flip(0)], 1), dim=1)
    return ei


def _lists(res, keys):
    rp, col = res.noisy.rowptr.numpy(), res.noisy.col.numpy()
    k = keys.numpy()
    return {int(k[i]): frozenset(k[col[rp[i]:rp[i + 1]]].tolist()) for i in range(len(k))}


EDGE = {
    "rr_edges": lambda data, kg, p: rr_edges(data, p.get("eps", 2.0), max_output_edges=10**7, _keying=kg),
    "dprr": lambda data, kg, p: dprr(data, p.get("eps", 3.0), n_max=p.get("n_max", 500), _keying=kg),
    "dprr no n_max": lambda data, kg, p: dprr(data, p.get("eps", 3.0), _keying=kg),
}


def test_edge_reports_reused_only_when_bit_identical_over_common_users():
    g = np.random.default_rng(7)
    n = 120
    for name, call in EDGE.items():
        for trial in range(2):
            ei = _graph(n, 300, g)
            keys = torch.from_numpy(g.permutation(n).astype(np.int64))  # dense keys (positions)
            base = Data(edge_index=ei, num_nodes=n)
            res_a, ids_a = _run(lambda kg, base=base, call=call: call(base, kg, {}), keys)
            La = _lists(res_a, keys)
            deg = torch.bincount(ei[0], minlength=n)
            edits = []
            # one edge added between two users: they change, nobody else
            i, j = [int(v) for v in g.choice(n, 2, replace=False)]
            add = torch.cat([ei, torch.tensor([[i, j], [j, i]])], 1)
            touched = {int(keys[i]), int(keys[j])}
            edits.append(("edge added", Data(edge_index=add, num_nodes=n), keys, {},
                          set(keys.tolist()) - touched))
            # rows permuted (the same users, renumbered)
            perm = torch.from_numpy(g.permutation(n))
            inv = torch.empty_like(perm)
            inv[perm] = torch.arange(n)
            edits.append(("permute", Data(edge_index=inv[ei], num_nodes=n), keys[perm], {}, set(keys.tolist())))
            # a user without edges leaves (or the isolated user with the largest degree-0 row)
            iso = torch.nonzero(deg == 0).view(-1)
            if iso.numel():
                v = int(iso[0])
                rows = torch.tensor([r for r in range(n) if r != v])
                remap = torch.full((n,), -1, dtype=torch.long)
                remap[rows] = torch.arange(n - 1)
                ei2 = remap[ei]
                # without n_max a new n is a new setting (eq. 6): every report is fresh
                unchanged = set(keys[rows].tolist()) if name in ("rr_edges", "dprr") else set()
                edits.append(("leave", Data(edge_index=ei2, num_nodes=n - 1), keys[rows], {}, unchanged))
            edits.append(("eps", base, keys, {"eps": 2.5}, set()))
            if name == "dprr":
                edits.append(("n_max", base, keys, {"n_max": 900}, set()))
            for edit, data2, keys2, params, unchanged in edits:
                res_b, ids_b = _run(lambda kg, data2=data2, params=params, call=call: call(data2, kg, params), keys2)
                Lb = _lists(res_b, keys2)
                common = set(keys2.tolist()) & set(keys.tolist())

                def same(a, b, u, common=common, La=La, Lb=Lb):
                    return La[u] & common == Lb[u] & common
                _check(res_a, ids_a, res_b, ids_b, same, f"{name}/{edit}/{trial}", unchanged)
