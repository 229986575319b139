"""The per-shard tasks of :mod:`ldpfast.distributed.shards`, run on Dask workers: validation
(pass 1, with the graph's identity when the shards carry no user ids), the report ids for a
store, the DPRR / RR edge task, the feature and label randomisers, and LocalLap's degrees,
rounds, histograms, ties and writes.  Each reads only its own shard (and, with user ids, every
shard's id column: a bit of an edge report is addressed by the two users' keys), and derives
its reports exactly as the single-machine call does (:mod:`ldpfast.privacy.users`)."""
from __future__ import annotations

import functools
import os
import resource
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..graph import CSR
from ..rng import Stream
from ._shard_io import _edges_table, _nodes_table, _read_edges, _read_nodes, _write_atomic


# ----------------------------------------------------------------------------- the plan
@dataclass
class _Plan:
    """Everything a shard task needs (public parameters and the seed; pickled to workers)."""

    in_dir: str
    stage: str
    n: int
    seed: bytes = field(repr=False)  # secret (resolve_secret): never in a repr, log or output
    edges: dict | None = None
    features: dict | None = None
    labels: dict | None = None
    rounds: list = field(default_factory=list)  # LocalLap: (rnd, pi, lo, hi) per round
    engine: str = "cpp"  # DPRR / RR sampler: "cpp" (n-row view) or "numba" (shard rows only)
    dataset: str = "default"  # the domain separator of every report
    keyed: bool = False  # the shards carry user ids: every report keyed to its user
    graph: bytes = field(default=b"", repr=False)  # without user ids: the input's keyed identity
    edge_seed: int = field(default=0, repr=False)  # without user ids: the edge mechanism's graph seed
    store: bool = False  # a report store: pass 1 writes report ids, pass 2 reads the withheld users


def _keying(plan: _Plan, a: int, m: int, ids: bool = False):
    """The Keying of rows [a, a + m): their user ids, or row ids plus the graph's identity
    (as a single-machine call with ``user_keys``, or a transform without them)."""
    from ..privacy.users import Keying

    if plan.keyed:
        return Keying(plan.seed, domain=plan.dataset, user_keys=torch.from_numpy(_all_keys(plan.in_dir)[a:a + m]),
                      ids=ids)
    return Keying(plan.seed, domain=plan.dataset, graph=plan.graph, row_offset=a)


@functools.lru_cache(maxsize=2)
def _all_keys(in_dir: str) -> np.ndarray:
    """Every user's id, in row order (each shard's ``user_id`` column; read once per worker)."""
    from ._shard_io import _load_meta

    meta = _load_meta(Path(in_dir))
    parts = [_read_nodes(Path(in_dir) / sh["nodes"], sh["row_end"] - sh["row_start"])["user_id"]
             for sh in meta["shards"]]
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.int64)


def identity_part(seed, dataset: str, a: int, n: int, rp: np.ndarray, col: np.ndarray, nodes: dict) -> int:
    """This block's term of a graph's identity (no user ids): the sum mod 2^64 of a keyed PRF of
    each row's (global id, neighbour set, x, y, y_mask) (:mod:`ldpfast.privacy.users`), so the
    sum does not depend on the shard layout."""
    from ..privacy.users import context, report_keys, set_report_keys

    m = rp.shape[0] - 1
    cols = [c for c in ("x", "y", "y_mask", "user_id") if c in nodes]
    params = {"columns": cols, "dtypes": [str(nodes[c].dtype) for c in cols], "n": n}
    parts = [np.ascontiguousarray(nodes[c]).reshape(m, -1).view(np.uint8) for c in cols]
    packed = np.ascontiguousarray(np.concatenate(parts, axis=1)) if parts else np.zeros((m, 0), np.uint8)
    ids = torch.arange(a, a + m, dtype=torch.int64)
    _, r1 = report_keys(context(seed, dataset, "graph-identity/rows", params), ids, torch.from_numpy(packed),
                        ids=True)
    _, r2 = set_report_keys(context(seed, dataset, "graph-identity/edges", params), ids, torch.from_numpy(rp),
                            torch.from_numpy(col), ids=True, node_keys=torch.arange(n, dtype=torch.int64))
    with np.errstate(over="ignore"):
        return int(r1.sum(dtype=np.uint64) + r2.sum(dtype=np.uint64))


def _kernels():
    from .. import _backend

    return _backend.get("cpu", None)


def _peak_rss() -> int:
    """Peak resident bytes of this process: VmHWM (Linux; ru_maxrss would report the peak of
    the parent that forked the worker, as Linux keeps it across exec), else ru_maxrss."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


def _call(fn, *args) -> dict:
    """Run a shard task; add its wall time, the worker's address and peak resident memory."""
    t0 = time.perf_counter()
    out = fn(*args)
    out["task"] = fn.__name__.strip("_")
    out["seconds"] = time.perf_counter() - t0
    try:
        from distributed import get_worker

        out["worker"] = get_worker().address
    except ValueError:  # not on a worker (direct call)
        out["worker"] = "local"
    out["rss"] = _peak_rss()
    return out


def _fault(plan: _Plan, s: int, where: str) -> None:
    """Test hook: ``_fault = {"shard": s, "at": where, "how": "raise" | "exit"}`` in the edge
    spec makes that task fail there (after writing a partial temporary file for "exit")."""
    f = (plan.edges or {}).get("_fault") or (plan.features or {}).get("_fault")
    if not f or f["shard"] != s or f["at"] != where:
        return
    if f["how"] == "exit":
        (Path(plan.stage) / f".part-{s:05d}.parquet.partial.tmp").write_bytes(b"PAR1 truncated")
        os._exit(17)
    raise RuntimeError(f"injected failure in shard {s} ({where})")


def _validate_task(plan: _Plan, s: int, sh: dict) -> dict:
    """Pass 1: read and check the shard; without user ids, its term of the graph's identity;
    with them (shard 0), every user's id: distinct, in [0, 2^63)."""
    from ..mechanisms.edges import _FLAG_MSG
    from ._rows import check_rows

    a, b = int(sh["row_start"]), int(sh["row_end"])
    _fault(plan, s, "validate")
    out: dict[str, Any] = {"shard": s}
    rp = col = None
    if plan.edges is not None or not plan.keyed:
        rp, col = _read_edges(Path(plan.in_dir) / sh["edges"], a, b, plan.n)
        if int(rp[-1]) != int(sh["nnz"]):
            raise ValueError(f"graph: {sh['edges']} has {int(rp[-1])} entries, meta.json says {sh['nnz']}")
        flags, h = check_rows(np.int64(a), np.int64(plan.n), rp, col)
        if flags:
            bad = [msg for bit, msg in _FLAG_MSG.items() if flags & bit]
            raise ValueError(f"graph: shard {s} (rows [{a}, {b})): the neighbour lists must form a simple "
                             "undirected graph; found " + "; ".join(bad))
        out["hash"] = int(h)
    nd = _read_nodes(Path(plan.in_dir) / sh["nodes"], b - a) if sh.get("nodes") else {}
    if plan.keyed and s == 0:  # every user's id, once (each task reads them all anyway)
        from ..privacy.users import _checked_keys

        keys = _all_keys(plan.in_dir)
        _checked_keys(torch.from_numpy(keys), plan.n, "cpu", "user_id (the shards' column)")
        if plan.edges is not None:
            from ..mechanisms.edges._keyed import key_table

            key_table(keys, plan.edges["mechanism"])  # dense enough for the keyed samplers
    if not plan.keyed:
        out["identity"] = identity_part(plan.seed, plan.dataset, a, plan.n, rp, col, nd)
    if plan.features is not None or plan.labels is not None:
        if not sh.get("nodes"):
            raise ValueError(f"in_dir: shard {s} has no nodes file, but features or labels were asked for")
        if plan.features is not None:
            if "x" not in nd:
                raise ValueError(f"x: shard {s} stores no features")
            _check_features(plan.features, nd["x"], a)
        if plan.labels is not None:
            if "y" not in nd:
                raise ValueError(f"y: shard {s} stores no labels")
            y = nd["y"]
            m = nd.get("y_mask", np.ones(b - a, dtype=bool)) if plan.labels.get("use_mask", True) else \
                np.ones(b - a, dtype=bool)
            c = plan.labels["num_classes"]
            bad = np.flatnonzero(m & ((y < 0) | (y >= c)))
            if bad.size:
                i = int(bad[0])
                raise ValueError(f"y: label {int(y[i])} of node {a + i} is outside [0, num_classes) = [0, {c})")
    return out


def _check_features(spec: dict, x: np.ndarray, a: int) -> None:
    """The mechanism's own input check on a block, errors naming the global row."""
    from ..mechanisms import features as F

    K = _kernels()
    mech = spec["mechanism"]
    if mech in ("grr", "grr_fs"):
        k = F._as_domain("k" if mech == "grr" else "domain", spec["k"], x.shape[1])
        if x.dtype.kind not in "iu":
            raise TypeError(f"x: {mech} needs integer features, got {x.dtype}")
        bad = K.check_categorical(np.ascontiguousarray(x), k)
        if bad >= 0:
            i, j = divmod(bad, x.shape[1])
            raise ValueError(f"x: value {int(x[i, j])} at row {a + i}, column {j} is outside the column's "
                             f"domain [0, {int(k[j])})")
    else:
        if x.dtype.kind != "f":
            raise TypeError(f"x: {mech} needs float features, got {x.dtype}")
        bad = K.check_range(np.ascontiguousarray(x), spec["alpha"], spec["beta"])
        if bad >= 0:
            i, j = divmod(bad, x.shape[1])
            raise ValueError(f"x: value {float(x[i, j])} at index ({a + i}, {j}) is NaN or outside "
                             f"[alpha, beta] = [{spec['alpha']}, {spec['beta']}]")


def _ll_degree_task(plan: _Plan, s: int, sh: dict) -> dict:
    """LocalLap: the shard's noisy-degree sum (with the graph's seed, known after pass 1)."""
    a, b = int(sh["row_start"]), int(sh["row_end"])
    noise = np.empty((b - a, 1), dtype=np.int64)
    _kernels().fill_discrete_laplace(noise, plan.edge_seed, int(Stream.LOCALLAP), a, plan.edges["t1"],
                                     plan.edges["s1"])
    return {"shard": s, "noise_sum": int(noise.sum())}


def _release_of(keying, spent, users_mask=None) -> dict:
    """What the driver's store needs of one mechanism's release on a shard: the public
    parameters, and per row the user, their report id and whether they report."""
    ctx, keys, ids = keying.last
    rep = np.ones(keys.shape[0], bool) if users_mask is None else np.asarray(users_mask, bool)
    info = {"mechanism": ctx.mechanism, "params_digest": ctx.params_digest, "params": ctx.params,
            "relation": spent.relation, "eps": spent.eps, "delta": spent.delta}
    return {"info": info, "users": keys.numpy(), "rids": ids, "rep": rep}


def _ids_path(plan: _Plan, s: int) -> Path:
    return Path(plan.stage) / f".ids-{s:05d}.npz"


def _withheld_path(plan: _Plan, s: int) -> Path:
    return Path(plan.stage) / f".withheld-{s:05d}.npz"


def _node_outputs(plan: _Plan, s: int, sh: dict, withheld: dict, releases: dict | None) -> dict:
    """Features and labels of the shard, keyed like the single-machine calls (``_keying``);
    users a store withheld report nothing (features 0, label -1) and are marked.  Returns the
    output columns; ``releases`` (pass 1 with a store) receives each mechanism's report ids."""
    from ..mechanisms import features as F
    from ..mechanisms.labels import rr_labels

    a, b = int(sh["row_start"]), int(sh["row_end"])
    m = b - a
    cols: dict[str, Any] = {}
    if plan.features is None and plan.labels is None:
        return cols
    nd = _read_nodes(Path(plan.in_dir) / sh["nodes"], m)
    if plan.features is not None:
        f = plan.features
        x = torch.from_numpy(np.array(nd["x"], order="C"))  # writable copy of the Arrow buffer
        k = _keying(plan, a, m, ids=releases is not None)
        mech = f["mechanism"]
        if mech == "grr":
            xo, sp = F.grr(x, f["k"], f["eps"], _keying=k)
        elif mech == "grr_fs":
            xo, sp = F.grr_fs(x, f["k"], f["eps"], f["m"], _keying=k)
        elif mech == "onebit":
            xo, sp = F.onebit(x, f["eps"], f["alpha"], f["beta"], _keying=k)
        else:
            xo, sp = F.multibit_encode(x, f["eps"], f["m"], f["alpha"], f["beta"], _keying=k)
        xo = xo.numpy()
        if releases is not None:
            releases["features"] = _release_of(k, sp)
        w = withheld.get("features")
        if w is not None:
            xo[w] = 0
            cols["x_withheld"] = w
        cols["x"] = xo
    if plan.labels is not None:
        lab = plan.labels
        y = torch.from_numpy(np.array(nd["y"]))
        mask = np.array(nd["y_mask"], bool) if (lab.get("use_mask", True) and "y_mask" in nd) else np.ones(m, bool)
        k = _keying(plan, a, m, ids=releases is not None)
        yo, sp = rr_labels(y, lab["num_classes"], lab["eps"], mask=torch.from_numpy(mask), _keying=k)
        yo = yo.numpy()
        if releases is not None:
            releases["labels"] = _release_of(k, sp, mask)
        w = withheld.get("labels")
        if w is not None:
            yo = np.where(w, -1, yo)
            mask = mask & ~w
            cols["y_withheld"] = w
        cols["y"], cols["y_rr_mask"] = yo, mask  # which labels are reports (the rest are raw)
    return cols


def _write_nodes(plan: _Plan, s: int, cols: dict) -> str | None:
    if not cols:
        return None
    name = f"nodes-{s:05d}.parquet"
    _write_atomic(_nodes_table(cols.pop("x", None), **cols), Path(plan.stage) / name)
    return name


def _rr_shard(plan: _Plan, a: int, rp: np.ndarray, col: np.ndarray, streams, pt, pf):
    """The RR sampler on rows [a, a + m) of the shard: ``(local rowptr, col)``.

    ``engine="cpp"``: the C++ one-pass kernel (``edges_rr_sample``) on an n-row view in which
    the other rows are empty with probabilities 0 (they draw nothing), so every row keeps its
    global id; costs 32 n bytes and O(n) trivial row visits per task.  ``"numba"``: the Numba
    twin's row body over the shard's rows only (O(shard) memory, about 4x slower here).
    Both are bit-identical to the single-machine call."""
    from ..mechanisms.edges import _rr_sample

    n, m = plan.n, rp.shape[0] - 1
    if plan.engine == "numba":
        from ._rows import rr_rows

        return rr_rows(a, n, rp, col, plan.edge_seed, streams, pt, pf)
    ptp = np.zeros(n)
    ptp[a:a + m] = pt
    pfp = np.zeros(n)
    pfp[a:a + m] = pf
    res = _rr_sample(CSR(torch.from_numpy(_padded_rowptr(rp, a, n)), torch.from_numpy(col), n), ptp, pfp,
                     plan.edge_seed, streams=streams)
    return res.rowptr.numpy()[a:a + m + 1].copy(), res.col.numpy()


def _padded_rowptr(rp: np.ndarray, a: int, n: int) -> np.ndarray:
    m = rp.shape[0] - 1
    rpp = np.empty(n + 1, dtype=np.int64)
    rpp[:a] = 0
    rpp[a:a + m + 1] = rp
    rpp[a + m + 1:] = rp[-1]
    return rpp


def _edge_rows(plan: _Plan, s: int, sh: dict, withheld: dict, releases: dict | None):
    """The shard's DPRR / RR lists (local rowptr, global col), or None for no such mechanism."""
    from ..mechanisms.edges import _bit_probs, _rr_probs

    e = plan.edges
    if e is None or e["mechanism"] not in ("dprr", "rr"):
        return None
    a, b = int(sh["row_start"]), int(sh["row_end"])
    rp, col = _read_edges(Path(plan.in_dir) / sh["edges"], a, b, plan.n)
    if plan.keyed:
        orp, ocol = _keyed_edges(plan, s, a, rp, col, releases)
    else:
        deg = np.diff(rp)
        if e["mechanism"] == "dprr":
            noise = np.empty((b - a, 1), dtype=np.int64)
            _kernels().fill_discrete_laplace(noise, plan.edge_seed, int(Stream.DPRR_DEGREE), a, e["t"], e["s"])
            d_star = deg.astype(np.float64) + e["g"] * noise[:, 0].astype(np.float64)
            del noise
            _, _, _, pt, pf = _bit_probs(d_star, plan.n, e["eps2"])
            streams = (Stream.DPRR_TRUE, 0, Stream.DPRR_FALSE, 0)
        else:
            p, pm = _rr_probs(e["eps"])
            pt, pf = np.full(b - a, p), np.full(b - a, pm)
            streams = (Stream.RR_EDGES, 0, Stream.RR_EDGES, 1)
        _fault(plan, s, "sample")
        orp, ocol = _rr_shard(plan, a, rp, col, streams, pt, pf)
    w = withheld.get("edges")
    if w is not None and w.any():  # withheld users report an empty list
        keep = ~np.repeat(w, np.diff(orp))
        ocol = ocol[keep]
        orp = np.concatenate([[0], np.cumsum(np.where(w, 0, np.diff(orp)))]).astype(np.int64)
    return orp, ocol


def _keyed_edges(plan: _Plan, s: int, a: int, rp: np.ndarray, col: np.ndarray, releases: dict | None):
    """DPRR / RR keyed to users on the shard's rows: the single-machine row functions
    (``dprr_keyed_rows``, ``rr_keyed_rows``) on rows [a, a + m), every user's id read from the
    shards."""
    from ..mechanisms.edges.degree_preserving import dprr_keyed_rows
    from ..mechanisms.edges.rr import rr_keyed_rows
    from ..privacy.budget import Spent

    e = plan.edges
    keys = _all_keys(plan.in_dir)
    k = _keying(plan, a, rp.shape[0] - 1, ids=releases is not None)
    _fault(plan, s, "sample")
    if e["mechanism"] == "dprr":
        orp, ocol, _, _ = dprr_keyed_rows(k, e["law"], rp, col, keys, n_q=e["n_q"], p=e["p"], pm=e["pm"], row0=a)
    else:
        orp, ocol = rr_keyed_rows(k, e["eps"], rp, col, keys, row0=a)
    if releases is not None:
        name = "dprr" if e["mechanism"] == "dprr" else "rr_edges"
        releases["edges"] = _release_of(k, Spent(name, "edges", e["eps_spent"]))
    return orp, ocol


def _ids_task(plan: _Plan, s: int, sh: dict) -> dict:
    """With a store, before anything is released: each mechanism's report ids of the shard's
    users, saved under staging; returns the public parameters of each release."""
    releases: dict = {}
    _edge_rows(plan, s, sh, {}, releases)
    _node_outputs(plan, s, sh, {}, releases)
    arrays = {}
    for mech, r in releases.items():
        arrays[f"{mech}_users"], arrays[f"{mech}_rids"], arrays[f"{mech}_rep"] = r["users"], r["rids"], r["rep"]
    tmp = _ids_path(plan, s).with_name(f".ids-{s:05d}.{uuid.uuid4().hex}.tmp.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, _ids_path(plan, s))
    return {"shard": s, "releases": {mech: r["info"] for mech, r in releases.items()}}


def _edge_task(plan: _Plan, s: int, sh: dict) -> dict:
    """Pass 2 of DPRR / RR (and the node mechanisms): randomise the shard and write it."""
    a = int(sh["row_start"])
    withheld: dict = {}
    if plan.store:
        with np.load(_withheld_path(plan, s)) as z:
            withheld = {k: z[k] for k in z.files}
    out: dict[str, Any] = {"shard": s, "edges": None, "nnz_out": 0}
    rows = _edge_rows(plan, s, sh, withheld, None)
    if rows is not None:
        orp, ocol = rows
        name = f"part-{s:05d}.parquet"
        _write_atomic(_edges_table(orp, ocol, a), Path(plan.stage) / name)
        out.update(edges=name, nnz_out=int(orp[-1]))
    cols = _node_outputs(plan, s, sh, withheld, None)
    if "edges" in withheld:
        cols["edge_withheld"] = withheld["edges"]
    if plan.keyed:  # the output names its users (rows of the output are the input's rows)
        cols["user_id"] = _all_keys(plan.in_dir)[a:int(sh["row_end"])]
    if "y_rr_mask" in cols:
        out["labels_randomised"] = int(cols["y_rr_mask"].sum())
    out["nodes"] = _write_nodes(plan, s, cols)
    return out


# ---- LocalLap -------------------------------------------------------------------------------
def _ll_work(stage: Path, s: int) -> Path:
    return stage / f".work-{s:05d}.npz"


def _ll_round_task(plan: _Plan, s: int, sh: dict) -> dict:
    """LocalLap candidates of the latest round for one shard (zero picks, and the true upper
    entries decided in this round); saves them under the staging folder, returns counts."""
    from ..mechanisms.edges import _csr_union, _tail
    from ..mechanisms.edges.laplace import _LL_HIGH, _LL_NOT_CAND
    from ._rows import ll_edge_values, ll_zero_rows

    stage = Path(plan.stage)
    a, b = int(sh["row_start"]), int(sh["row_end"])
    e = plan.edges
    rnd, pi, lo, hi, zhi, split = plan.rounds[-1]
    rp, col = _read_edges(Path(plan.in_dir) / sh["edges"], a, b, plan.n)
    work = _ll_work(stage, s)
    if rnd == 0:
        prev: dict[str, np.ndarray] = {"ones": np.empty(col.shape[0], dtype=np.int64)}
        erp, ecol = rp, col
    else:
        with np.load(work) as z:
            prev = dict(z)
        erp, ecol = rp, col  # exclusions: the adjacency and every earlier round's picks
        m = b - a
        for r, *_ in plan.rounds[:-1]:
            u = _csr_union(CSR(torch.from_numpy(erp), torch.from_numpy(ecol), m),
                           CSR(torch.from_numpy(prev[f"rp{r}"]), torch.from_numpy(prev[f"c{r}"]), m))
            erp, ecol = u.rowptr.numpy(), u.col.numpy()
    ones = prev["ones"]
    # the skip path's rate, the single-machine double
    p_true = _tail(e["s2"] / e["t2"], lo - e["G2"]) if rnd == 0 and lo != np.iinfo(np.int64).min else 0.0
    ll_edge_values(np.int64(a), rp, col, np.uint64(plan.edge_seed), np.uint64(e["t2"]), np.uint64(e["s2"]),
                   np.int64(e["G2"]), np.uint32(rnd), np.int64(lo), np.int64(hi), float(p_true), ones)
    _fault(plan, s, "locallap")
    orp, oc, ov = ll_zero_rows(a, plan.n, erp, ecol, plan.edge_seed, rnd, pi, lo, zhi, split, e["t2"], e["s2"])
    prev.update({f"rp{rnd}": orp, f"c{rnd}": oc, f"v{rnd}": ov})
    tmp = work.with_name(f".{work.name}.{uuid.uuid4().hex}.tmp.npz")
    np.savez(tmp, **prev)
    os.replace(tmp, work)
    out = {"shard": s, "zeros": int(oc.shape[0]), "ones_above": int((ones > _LL_NOT_CAND).sum())}
    if split:  # round 0: picks above the split, and true entries at or above it
        out.update(high=int((ov == _LL_HIGH).sum()), ones_ge_split=int((ones >= zhi).sum()))
    return out


def _ll_hist_task(plan: _Plan, s: int, sh: dict) -> dict:
    """Histogram of this shard's candidate values (all rounds, and the true candidates)."""
    with np.load(_ll_work(Path(plan.stage), s)) as z:
        rounds, ones, sel = _ll_sources(z, plan, s)
        vals = [v for _, _, v in rounds]
        vals.append(ones[sel])
    v, c = np.unique(np.concatenate(vals), return_counts=True)
    return {"shard": s, "values": v, "counts": c}


def _ll_sources(z, plan: _Plan, s: int):
    """The shard's candidate sources in the global order: rounds, then true upper entries
    (with the mask of the true candidates); round 0's LL_HIGH picks get their drawn values
    when the host drew them (``plan.edges["high"]``, one array per shard)."""
    from ..mechanisms.edges.laplace import _LL_HIGH, _LL_NOT_CAND

    out = [(z[f"rp{r}"], z[f"c{r}"], z[f"v{r}"]) for r, *_ in plan.rounds]
    high = plan.edges.get("high")
    if high is not None:
        v0 = out[0][2].copy()
        v0[v0 == _LL_HIGH] = high[s]
        out[0] = (out[0][0], out[0][1], v0)
    ones = z["ones"]
    return out, ones, ones > _LL_NOT_CAND


def _ll_ties_task(plan: _Plan, s: int, sh: dict) -> dict:
    """Number of candidates equal to v* per source (rounds..., true entries)."""
    vstar = plan.edges["vstar"]
    with np.load(_ll_work(Path(plan.stage), s)) as z:
        rounds, ones, sel = _ll_sources(z, plan, s)
        counts = [int((v == vstar).sum()) for _, _, v in rounds]
        counts.append(int((ones[sel] == vstar).sum()))
    return {"shard": s, "ties": counts}


def _ll_write_task(plan: _Plan, s: int, sh: dict, chosen: list[np.ndarray]) -> dict:
    """Pass 3: the kept upper-triangle entries of the shard's rows, written as part-s."""
    from ..mechanisms.edges import _csr_union, _masked_csr

    stage = Path(plan.stage)
    a, b = int(sh["row_start"]), int(sh["row_end"])
    m = b - a
    e = plan.edges
    vstar, mode = e["vstar"], e["keep"]
    rp, col = _read_edges(Path(plan.in_dir) / sh["edges"], a, b, plan.n)
    with np.load(_ll_work(stage, s)) as z:
        rounds, ones, sel = _ll_sources(z, plan, s)
        idx = np.flatnonzero(sel)
        sources = [(orp, oc, ov) for orp, oc, ov in rounds]
        sources.append((np.searchsorted(idx, rp), col[idx], ones[idx]))
        parts = []
        for k, (orp, oc, ov) in enumerate(sources):
            if mode == "none":
                keep = np.zeros(ov.shape[0], dtype=bool)
            elif mode == "all":
                keep = np.ones(ov.shape[0], dtype=bool)
            else:
                keep = ov > vstar
                tie_pos = np.flatnonzero(ov == vstar)
                keep[tie_pos[chosen[k]]] = True
            parts.append(_masked_csr(torch.from_numpy(np.ascontiguousarray(orp, dtype=np.int64)),
                                     torch.from_numpy(np.ascontiguousarray(oc)), torch.from_numpy(keep), m))
    U = parts[0]
    for p in parts[1:]:
        U = _csr_union(U, p)
    name = f"part-{s:05d}.parquet"
    _fault(plan, s, "write")
    _write_atomic(_edges_table(U.rowptr.numpy(), U.col.numpy(), a), stage / name)
    out = {"shard": s, "edges": name, "nnz_out": int(U.nnz)}
    cols = _node_outputs(plan, s, sh, {}, None)
    if "y_rr_mask" in cols:
        out["labels_randomised"] = int(cols["y_rr_mask"].sum())
    out["nodes"] = _write_nodes(plan, s, cols)
    return out

