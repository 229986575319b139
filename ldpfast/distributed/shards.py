"""Sharded randomisation on Dask: the edge, feature and label mechanisms on row-block shards.

A graph too large for one machine is stored as row-block shards (:func:`write_shards`
makes them from an in-memory graph; any producer can write the same layout)::

    in/meta.json                 {"format": "ldpfast-shards/1", "num_nodes": n, "num_edges": nnz,
                                  "shards": [{"row_start": a, "row_end": b, "nnz": k,
                                              "edges": "edges-00000.parquet",
                                              "nodes": "nodes-00000.parquet" or null}, ...]}
    in/edges-00000.parquet       columns src, dst (int64): the neighbour lists of rows [a, b),
                                 sorted by (src, dst), both directions of every undirected edge
    in/nodes-00000.parquet       optional: x (fixed-size list, one row per node of [a, b)),
                                 y (int64), y_mask (bool)

:func:`randomize` runs one task per shard on a ``dask.distributed`` cluster; no task reads
another shard, and the driver only sees per-shard summaries of a few numbers (and, for
LocalLap, a histogram of candidate values).  Every draw of the single-machine kernels is
addressed by ``(seed, stream, global row, col)`` (counter-based Philox), and each task draws
with the global row ids of its shard, so the output equals the single-machine call with the
same seed **bit for bit**:

* ``dprr``: ``ldpfast.mechanisms.dprr(graph, eps, seed, eps1, n_max=n_max, alpha=alpha)``:
  the budget split (eq. 8) uses only public ``n_max`` (default ``n``, from meta.json); the
  noisy degree of row ``i`` is ``CellRng(seed, DPRR_DEGREE, i, 0)``; ``q_i`` and the bit
  probabilities depend only on row ``i``'s degree, its noise and public ``n, eps2``.  One
  pass after validation.
* ``rr``: ``rr_edges(graph, eps, seed, max_output_edges)``; the size guard uses ``n`` and
  the total edge count (public in meta.json), exactly the single-machine expectation.
* ``locallap``: ``local_laplace(graph, eps, seed)``.  Its global quantities are computed from
  per-shard integers, exactly: pass 1 draws each shard's noisy degrees (rows' own cells) and
  returns ``sum(noise)``; the driver forms ``T = floor((|E| G + sum noise) / (2 G))`` clipped
  to ``[0, n(n-1)/2]`` in integer arithmetic as the single-machine code does, and the
  threshold ``tau`` and the split ``h``.  Pass 2 draws each shard's candidates (true upper
  entries and zero entries above ``tau``, the rows' own cells; zero picks above ``h`` carry
  no value, and in the rare case their values matter the driver draws them in the global
  order, as the single-machine ``_resolve_high``, and hands each shard its slice) and the
  histograms of candidate values;
  the driver merges the histograms into the exact ``T``-th largest value and draws the
  tie-break with the single-machine generator over the global candidate order (round 0 of
  every shard in row order, then later rounds, then true edges), handing each shard its
  chosen ties.  Pass 3 writes the kept entries.  (A second threshold round, probability
  below ``e^-50``, is handled as in the single-machine code.)  The output shards hold the
  upper triangle ``U`` (``src < dst``) of the undirected result, row block by row block:
  exactly the ``src < dst`` entries of ``local_laplace(...).noisy``; the graph is ``U + U^T``.
* features (``grr``, ``grr_fs``, ``onebit``, ``multibit``) and labels (``rr_labels``): the
  same mechanism functions on the shard's rows with ``row_offset = row_start``.

Failure semantics: every task writes to ``out/.staging-<token>/`` under a temporary name and
renames it there when its file is complete; the driver moves the shards into ``out/`` and
writes ``out/meta.json`` last, only after every task succeeded.  A failing task, a killed
worker (the local cluster allows no retry) or bad input anywhere raises on the driver, the
staging folder is removed, and ``out/`` holds no part file and no meta.json.  Input is
validated completely (pass 1) before anything is randomised, as in the single-machine calls.

Paths must be visible to every worker under the same name (local disk for a LocalCluster,
a shared file system otherwise).

Layout: this module is the driver (:func:`randomize`, its passes, the report); the shard
store (the layout above, :func:`write_shards`, :func:`read_shards`) is in ``_shard_io.py``
and the per-shard tasks run on the workers in ``_shard_tasks.py``.
"""
from __future__ import annotations

import json
import math
import os
import shutil
import time
import uuid
import warnings
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._checks import check_eps, check_int, check_prob
from ..privacy.budget import Spent
from ..privacy.secret import resolve_secret
from ..privacy.users import Keying, check_domain
from ._shard_io import FORMAT, _load_meta, read_shards, write_shards
from ._shard_tasks import (
    _call,
    _edge_task,
    _ids_path,
    _ids_task,
    _ll_degree_task,
    _ll_hist_task,
    _ll_round_task,
    _ll_ties_task,
    _ll_write_task,
    _Plan,
    _validate_task,
    _withheld_path,
    identity_part,
)

__all__ = [
    "EDGE_MECHANISMS",
    "FEATURE_MECHANISMS",
    "FORMAT",
    "RandomizeReport",
    "graph_identity",
    "randomize",
    "read_shards",
    "write_shards",
]

#: The edge mechanisms of :func:`randomize` (``--edges``).
EDGE_MECHANISMS = ("dprr", "rr", "locallap")
#: The feature mechanisms of :func:`randomize` (``--features``).
FEATURE_MECHANISMS = ("grr", "grr_fs", "onebit", "multibit")


# ----------------------------------------------------------------------------- driver
@dataclass
class RandomizeReport:
    """Result of :func:`randomize` (also saved as ``out/meta.json``, without the seed).

    Attributes
    ----------
    spent : list of Spent
        One per mechanism run (edges, features, labels), as the single-machine call reports.
    num_edges_out : int
        Entries written (directed lists; LocalLap: the upper triangle).
    seconds : dict
        Wall time per phase.
    peak_rss : dict
        Peak resident memory (bytes) reported by each worker address.
    meta : dict
        The output meta.json.
    tasks : list of dict
        One entry per task: ``task``, ``shard``, ``worker``, ``seconds``, ``rss``.
    """

    spent: list[Spent]
    num_edges_out: int
    seconds: dict[str, float]
    peak_rss: dict[str, int]
    meta: dict
    tasks: list[dict] = field(default_factory=list)


def _edge_spec(edges: dict | None, n: int, nnz: int) -> tuple[dict | None, Spent | None]:
    """Checked public parameters of the edge mechanism and its Spent (single-machine formulas)."""
    if edges is None:
        return None, None
    from ..mechanisms import edges as EM

    e = dict(edges)
    mech = e.pop("mechanism", None)
    fault = e.pop("_fault", None)
    if mech not in EDGE_MECHANISMS:
        raise ValueError(f"edges: mechanism must be one of {EDGE_MECHANISMS}, got {mech!r}")
    eps = check_eps("eps", e.pop("eps", None))
    spec: dict[str, Any] = {"mechanism": mech, "eps": eps, "_fault": fault}
    if mech == "dprr":
        n_max = e.pop("n_max", None)
        n_max_given = n_max is not None
        n_max = n if n_max is None else check_int("n_max", n_max, lo=max(n, 2))
        alpha = check_prob("alpha", e.pop("alpha", 0.9), open_low=True, open_high=True)
        eps1_in = e.pop("eps1", None)
        allocation = "paper eq. 8 (eps2 = eps - eps1)" if eps1_in is None else "given eps1 (eps2 = eps - eps1)"
        eps1, eps2 = EM.dprr_budget(eps, n_max, alpha, eps1_in)
        g, t, s, eps1_used = EM._grid("eps1", eps1)
        while eps1_used + eps2 > eps:
            eps2 = math.nextafter(eps2, 0.0)
        p, pm = EM._rr_probs(eps2)
        law = {"eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "granularity": g, "dlap_t": t, "dlap_s": s}
        spec.update(eps2=eps2, g=g, t=t, s=s, law=law, p=p, pm=pm, eps_spent=eps1_used + eps2,
                    n_q=n_max if n_max_given else n,
                    seed_params={**law, "n": n, "n_max": n_max, "alpha": alpha})
        spent = Spent(mechanism="dprr", target="edges", eps=eps1_used + eps2, guarantee=EM._GUARANTEE,
                      params={"eps": eps, "eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "p": p, "flip_prob": pm,
                              "granularity": g, "dlap_t": t, "dlap_s": s, "n": n, "n_max": n_max, "alpha": alpha,
                              "allocation": allocation, "num_public": 0, "symmetrize": "none", "sharded": True})
    elif mech == "rr":
        max_out = check_int("max_output_edges", e.pop("max_output_edges", 50_000_000), lo=0)
        p, pm = EM._rr_probs(eps)
        spec.update(p=p, pm=pm, eps_spent=eps, seed_params={"eps": eps, "n": n})
        expected = nnz * p + (n * (n - 1) - nnz) * pm  # = expected_rr_output: sum_i d_i p + (n-1-d_i)(1-p)
        if expected > max_out:
            raise ValueError(f"rr: Warner's RR would output about {expected:.4g} directed edges for n={n} at "
                             f"eps={eps:g}; this exceeds max_output_edges={max_out} (RR makes a sparse graph "
                             "dense); pass a larger max_output_edges to run it anyway, or use dprr")
        spent = Spent(mechanism="rr_edges", target="edges", eps=eps, guarantee=EM._GUARANTEE,
                      params={"eps": eps, "p": p, "flip_prob": pm, "n": n, "expected_output": expected,
                              "num_public": 0, "symmetrize": "none", "sharded": True})
    else:
        eps1 = eps / 10.0
        eps2 = eps - eps1
        g1, t1, s1, eps1_used = EM._grid("eps1", eps1)
        g2, t2, s2, eps2_used = EM._grid("eps2", eps2)
        while eps1_used + eps2_used > eps:
            eps2 = math.nextafter(eps2, 0.0)
            g2, t2, s2, eps2_used = EM._grid("eps2", eps2)
        spec.update(t1=t1, s1=s1, G1=round(1.0 / g1), t2=t2, s2=s2, G2=round(1.0 / g2), eps1=eps1, eps2=eps2,
                    eps1_used=eps1_used, eps2_used=eps2_used, g1=g1, g2=g2,
                    max_dense_entries=check_int("max_dense_entries", e.pop("max_dense_entries", 200_000_000), lo=0),
                    _target=e.pop("_target", None), _split_target=e.pop("_split_target", None),
                    seed_params={"eps": eps, "n": n})
        spent = None  # completed after the run (T, threshold, candidates)
    if e:
        raise ValueError(f"edges: unknown parameters for {mech}: {sorted(e)}")
    return spec, spent


def _node_specs(features: dict | None, labels: dict | None, meta: dict):
    from ..mechanisms import features as F
    from ..privacy.ldp import optimal_m

    fspec = lspec = None
    if features is not None:
        f = dict(features)
        mech = f.pop("mechanism", None)
        if mech not in FEATURE_MECHANISMS:
            raise ValueError(f"features: mechanism must be one of {FEATURE_MECHANISMS}, got {mech!r}")
        if not meta.get("x"):
            raise ValueError("features: the input shards store no features (meta.json x is null)")
        d = int(meta["x"]["d"])
        fspec = {"mechanism": mech, "eps": check_eps("eps", f.pop("eps", None)), "_fault": f.pop("_fault", None)}
        if mech in ("grr", "grr_fs"):
            fspec["k"] = F._as_domain("k", f.pop("k", None), d).tolist()
            if mech == "grr_fs":
                fspec["m"] = check_int("m", f.pop("m", None), 1, d)
        else:
            fspec["alpha"], fspec["beta"] = F._continuous_input(torch.zeros(1, d), f.pop("alpha", 0.0),
                                                                f.pop("beta", 1.0))
            if mech == "multibit":
                m = f.pop("m", None)
                fspec["m"] = optimal_m(fspec["eps"], d) if m is None else check_int("m", m, 1, d)
        if f:
            raise ValueError(f"features: unknown parameters for {mech}: {sorted(f)}")
    if labels is not None:
        lab = dict(labels)
        if not meta.get("y"):
            raise ValueError("labels: the input shards store no labels (meta.json y is false)")
        lspec = {"num_classes": check_int("num_classes", lab.pop("num_classes", None), 1, 2**31),
                 "eps": check_eps("eps", lab.pop("eps", None)), "use_mask": bool(lab.pop("use_mask", True))}
        if lab:
            raise ValueError(f"labels: unknown parameters: {sorted(lab)}")
    return fspec, lspec


def _run(client, fn, plan: _Plan, shards: list[dict], progress, desc: str, extra=None) -> list[dict]:
    """One task per shard; returns the results in shard order, raising the first failure."""
    from distributed import as_completed

    futs = [client.submit(_call, fn, plan, s, sh, *(() if extra is None else (extra[s],)), pure=False,
                          key=f"ldpfast-{desc}-{s:05d}-{uuid.uuid4().hex[:8]}")
            for s, sh in enumerate(shards)]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(futs), desc=desc, unit="shard")
    try:
        for fut in as_completed(futs):
            fut.result()  # raises the task's exception (or KilledWorker) at once
            if bar is not None:
                bar.update(1)
    except BaseException:
        for f in futs:
            f.cancel()
        raise
    finally:
        if bar is not None:
            bar.close()
    return client.gather(futs)


def _local_client(n_workers: int, memory_limit):
    import dask
    from distributed import Client, LocalCluster

    # a killed worker fails the job instead of being retried elsewhere (see module docstring)
    dask.config.set({"distributed.scheduler.allowed-failures": 0})
    env = {"LDPFAST_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    cluster = LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, memory_limit=memory_limit,
                           dashboard_address=None, env=env)
    return Client(cluster), cluster


def randomize(in_dir, out_dir, *, seed: bytes | int | None = None, edges: dict | None = None, features: dict | None = None,
              labels: dict | None = None, dataset: str = "default", store=None, client=None,
              scheduler: str | None = None, n_workers: int = 2, memory_limit: str | int = "4GiB",
              progress: bool = False, engine: str = "cpp") -> RandomizeReport:
    """Randomise a sharded graph on a Dask cluster; output bit-identical to one machine.

    Every report is keyed as the single-machine calls key it (:mod:`ldpfast.privacy.users`).
    Shards that carry a ``user_id`` column (:func:`write_shards` ``user_id=``) key each report
    to its user: next week's snapshot, re-sharded and renumbered, gives every unchanged user
    the identical report, and ``store=`` accounts it per user.  Without user ids the rows are
    the users of this input only: the input's keyed identity (:func:`graph_identity`, a sum
    over rows, so it does not depend on the shard layout) enters every report, so two inputs
    never share bits, and each run is a fresh release of every node (a warning says so).

    Parameters
    ----------
    in_dir : str or Path
        Input shard set (module docstring; :func:`write_shards`).
    out_dir : str or Path
        Output folder: ``part-XXXXX.parquet`` (src, dst), ``nodes-XXXXX.parquet`` (x, y) and
        ``meta.json`` (written last).  Must not hold a meta.json already.
    seed : bytes or int
        The secret, the one a single-machine call would get: bytes of at least 16 when the
        shards carry user ids or a store is given (memoised reports; see
        :func:`ldpfast.privacy.new_secret`), else also an int in ``[0, 2**64)``.  ``None``: fresh
        from the OS (then the run cannot be repeated).  Never written to any output.
    edges : dict, optional
        ``{"mechanism": "dprr", "eps": ..., "eps1": None, "n_max": None, "alpha": 0.9}``,
        ``{"mechanism": "rr", "eps": ..., "max_output_edges": 5e7}`` or
        ``{"mechanism": "locallap", "eps": ..., "max_dense_entries": 2e8}``: parameters as in
        :func:`ldpfast.mechanisms.dprr`, :func:`~ldpfast.mechanisms.rr_edges`,
        :func:`~ldpfast.mechanisms.local_laplace` (common setting: no public users;
        directed output, rule ``"none"``; LocalLap writes the upper triangle).
    features : dict, optional
        ``{"mechanism": "grr", "k": ..., "eps": ...}``, ``{"mechanism": "grr_fs", "k": ...,
        "eps": eps_x, "m": ...}``, ``{"mechanism": "onebit", "eps": ..., "alpha": 0, "beta": 1}``
        or ``{"mechanism": "multibit", "eps": ..., "m": None, "alpha": 0, "beta": 1}``.
    labels : dict, optional
        ``{"num_classes": c, "eps": ..., "use_mask": True}`` (the stored ``y_mask`` selects
        the reporting nodes when present).  The output nodes files mark the labels that are
        reports in ``y_rr_mask`` (the others are raw: ``y_mask`` false), and meta.json counts them.
    dataset : str
        The dataset's name (domain separator, as the single-machine calls' ``dataset``).
    store : ldpfast.privacy.ReportStore, optional
        Per-user ledger (needs shards with user ids).  Before anything is written, one pass
        computes every user's report ids and one store transaction charges the new ones; users
        over the store's budget are withheld (empty list, features 0, label -1, marked in
        ``edge_withheld`` / ``x_withheld`` / ``y_withheld``).  A job that fails after that
        transaction leaves its charge: the store may over-count, never under-count.
    client : distributed.Client, optional
        Cluster to use.  Otherwise ``scheduler`` (an address such as ``tcp://host:8786``),
        otherwise a LocalCluster of ``n_workers`` single-threaded worker processes with
        ``memory_limit`` each (closed afterwards).
    progress : bool
        Progress bars per pass.
    engine : {"cpp", "numba"}
        Sampler of DPRR / RR per shard: ``"cpp"`` (default) runs the compiled one-pass kernel
        (the C++ one if built, else its Numba twin) on an n-row view of the shard (32 n bytes
        and O(n) empty-row visits per task); ``"numba"`` runs the Numba twin's row body over
        the shard's rows only (O(shard) memory; about 4x slower on one core here).  Same bits.
        LocalLap always uses the Numba row drivers.

    Returns
    -------
    RandomizeReport

    Raises
    ------
    ValueError, TypeError
        Bad parameters or bad input shards (naming the parameter, the shard and the global
        row); nothing is written.
    RuntimeError, distributed.KilledWorker
        A task failed or a worker died; ``out_dir`` is left without part files or meta.json.
    """
    t_start = time.perf_counter()
    if engine not in ("cpp", "numba"):
        raise ValueError(f"engine: expected 'cpp' or 'numba', got {engine!r}")
    in_dir, out_dir = Path(in_dir).resolve(), Path(out_dir).resolve()
    meta = _load_meta(in_dir)
    n, nnz = int(meta["num_nodes"]), int(meta["num_edges"])
    shards = meta["shards"]
    if edges is None and features is None and labels is None:
        raise ValueError("edges, features, labels: give at least one mechanism")
    espec, espent = _edge_spec(edges, n, nnz)
    fspec, lspec = _node_specs(features, labels, meta)
    dataset = check_domain(dataset)
    keyed = bool(meta.get("user_id"))
    seed = resolve_secret(seed, memoised=keyed or store is not None)
    if store is not None and not keyed:
        raise ValueError("store: a report store accounts per user, so the shards need a user_id column "
                         "(write_shards(..., user_id=...)); these shards have none")
    if keyed and espec is not None and espec["mechanism"] == "locallap":
        raise ValueError("edges: locallap has no user-keyed path yet (as ldpfast.mechanisms.local_laplace); these "
                         "shards carry user ids: use dprr or rr, or shards without user_id")
    if not keyed:
        warnings.warn("randomize: the shards carry no user ids, so the rows are the users of this input only: every "
                      "node gets a fresh report in each run (next week's snapshot is a new release of everyone). "
                      "Write shards with user_id= to key reports to users and account them with a store.",
                      UserWarning, stacklevel=2)
    created = not out_dir.exists()
    out_dir.mkdir(parents=True, exist_ok=True)
    if (out_dir / "meta.json").exists() or any(out_dir.glob("part-*.parquet")):
        raise FileExistsError(f"out_dir: {out_dir} already holds output (meta.json or part files); choose an "
                              "empty folder")
    stage = out_dir / f".staging-{uuid.uuid4().hex}"
    stage.mkdir()
    plan = _Plan(str(in_dir), str(stage), n, seed, espec, fspec, lspec, engine=engine, dataset=dataset, keyed=keyed,
                 store=store is not None)
    own = None
    if client is None:
        if scheduler is not None:
            from distributed import Client

            client = Client(scheduler)
            own = (client, None)
        else:
            client, cluster = _local_client(n_workers, memory_limit)
            own = (client, cluster)
    seconds: dict[str, float] = {}
    results: list[list[dict]] = []
    ok = False
    try:
        t0 = time.perf_counter()
        v = _run(client, _validate_task, plan, shards, progress, "validate")
        results.append(v)
        if espec is not None and sum(r["hash"] for r in v) % 2**64 != 0:
            raise ValueError("graph: the neighbour lists must form a simple undirected graph; found an asymmetric "
                             "adjacency (edge (i, j) present without (j, i)) across the shards")
        if not keyed:  # the input's identity (layout-free sum) and the edge mechanism's graph seed
            plan.graph = _identity_bytes(n, sum(r["identity"] for r in v))
            if espec is not None:
                from ..mechanisms.edges import _graph_seed

                name = {"dprr": "dprr", "rr": "rr_edges", "locallap": "local_laplace"}[espec["mechanism"]]
                plan.edge_seed = _graph_seed(Keying(seed, domain=dataset, graph=plan.graph), name,
                                             espec["seed_params"], None)
        seconds["validate"] = time.perf_counter() - t0
        store_counts = {}
        if store is not None:  # charge every new report in one transaction, before anything is written
            t0 = time.perf_counter()
            ids = _run(client, _ids_task, plan, shards, progress, "report-ids")
            results.append(ids)
            store_counts = _charge(store, dataset, plan, shards, ids)
            seconds["store"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        if espec is not None and espec["mechanism"] == "locallap":
            degs = _run(client, _ll_degree_task, plan, shards, progress, "locallap-degrees")
            results.append(degs)
            final, espent = _locallap(client, plan, shards, degs, nnz, progress, results)
        else:
            final = _run(client, _edge_task, plan, shards, progress, "randomize")
        results.append(final)
        seconds["randomize"] = time.perf_counter() - t0
        # every task succeeded: move the shards out of staging, meta.json last
        parts, nodes_out = [], []
        for s, (sh, r) in enumerate(zip(shards, final)):
            entry = {"row_start": sh["row_start"], "row_end": sh["row_end"], "nnz": r["nnz_out"],
                     "edges": r.get("edges"), "nodes": r.get("nodes")}
            for key in ("edges", "nodes"):
                if entry[key] is not None:
                    if not (stage / entry[key]).exists():
                        raise RuntimeError(f"shard {s}: {entry[key]} missing from staging after success")
                    nodes_out.append(entry[key])
            parts.append(entry)
        for name in nodes_out:
            os.replace(stage / name, out_dir / name)
        spent = [sp for sp in (espent,) if sp is not None]
        if fspec is not None:
            spent.append(_feature_spent(fspec, int(meta["x"]["d"])))
        n_rand = sum(r.get("labels_randomised", 0) for r in final)
        if lspec is not None:
            from ..privacy.ldp import grr_probs

            p, q = grr_probs(lspec["eps"], lspec["num_classes"])
            spent.append(Spent("rr_labels", "labels", lspec["eps"], guarantee="eps-LDP per node",
                               params={"num_classes": lspec["num_classes"], "p": p, "q": q, "sharded": True,
                                       "num_randomised": n_rand}))
        spent = [replace(sp, params={**sp.params, "user_keys": keyed, "dataset": dataset,
                                     **({"store": store_counts[_KIND[sp.target]]} if _KIND[sp.target] in store_counts
                                        else {})})
                 for sp in spent]
        total_out = sum(r["nnz_out"] for r in final)
        peak: dict[str, int] = {}
        for rs in results:
            for r in rs:
                w = r.get("worker") or "?"
                peak[w] = max(peak.get(w, 0), int(r["rss"]))
        out_meta = {"format": FORMAT, "num_nodes": n, "num_edges": total_out,
                    "edges_layout": None if espec is None else
                    ("upper triangle (src < dst) of the undirected output" if espec["mechanism"] == "locallap"
                     else "directed noisy lists: row i is user i's report"),
                    "shards": parts, "spent": [sp.to_dict() for sp in spent],
                    "x": None if fspec is None else {"d": int(meta["x"]["d"])}, "y": lspec is not None,
                    "keying": "user ids" if keyed else "rows of this input only (one release)",
                    "user_id": keyed, "dataset": dataset}
        if lspec is not None:
            out_meta["labels"] = {"randomised": n_rand, "mask_column": "y_rr_mask",
                                  "note": "labels where y_rr_mask is false are raw (outside the label mask)"}
        tmp = out_dir / f".meta.json.{uuid.uuid4().hex}.tmp"
        tmp.write_text(json.dumps(out_meta, indent=1, default=str))
        os.replace(tmp, out_dir / "meta.json")
        ok = True
        seconds["total"] = time.perf_counter() - t_start
        tasks = [{k: r.get(k) for k in ("task", "shard", "worker", "seconds", "rss")} for rs in results for r in rs]
        return RandomizeReport(spent=spent, num_edges_out=total_out, seconds=seconds, peak_rss=peak, meta=out_meta,
                               tasks=tasks)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if not ok:  # nothing that looks complete may remain
            for f in list(out_dir.glob("part-*.parquet")) + list(out_dir.glob("nodes-*.parquet")):
                f.unlink(missing_ok=True)
            if created and not any(out_dir.iterdir()):
                out_dir.rmdir()
        if own is not None:
            own[0].close()
            if own[1] is not None:
                own[1].close()


_KIND = {"edges": "edges", "features": "features", "labels": "labels"}


def _identity_bytes(n: int, total: int) -> bytes:
    return b"shards:" + int(n).to_bytes(8, "little") + (int(total) % 2**64).to_bytes(8, "little")


def graph_identity(graph, seed: int, *, x=None, y=None, y_mask=None, dataset: str = "default") -> bytes:
    """The identity :func:`randomize` mixes into every report of shards without user ids,
    computed here from the graph in memory: with it, the single-machine calls give the sharded
    output bit for bit, e.g. ``dprr(graph, eps, _keying=Keying(seed, domain=dataset,
    graph=graph_identity(graph, seed, ...)))``.  A keyed sum over rows (secret; never stored)."""
    from ..mechanisms.edges import _graph_csr

    csr = _graph_csr(graph, None)
    nodes = {k: v.numpy() for k, v in (("x", x), ("y", y), ("y_mask", y_mask)) if v is not None}
    total = identity_part(resolve_secret(seed, memoised=False), check_domain(dataset), 0, csr.num_nodes, csr.rowptr.numpy(),
                          csr.col.numpy(), nodes)
    return _identity_bytes(csr.num_nodes, total)


def _charge(store, dataset: str, plan: _Plan, shards: list[dict], ids: list[dict]) -> dict:
    """One store transaction per mechanism over every shard's report ids (the reporting users);
    writes each shard's withheld rows to staging (read by the randomise pass).  Returns the
    store's counts per mechanism."""
    withheld: list[dict] = [{} for _ in shards]
    counts = {}
    for mech, info in ids[0]["releases"].items():
        users, rids, rep = [], [], []
        for s in range(len(shards)):
            with np.load(_ids_path(plan, s)) as z:
                users.append(z[f"{mech}_users"])
                rids.append(z[f"{mech}_rids"])
                rep.append(z[f"{mech}_rep"])
        r = np.concatenate(rep)
        res = store.release(dataset=dataset, mechanism=info["mechanism"], params_digest=info["params_digest"],
                            params=info["params"], relation=info["relation"], eps=info["eps"], delta=info["delta"],
                            users=np.concatenate(users)[r], rids=np.concatenate(rids)[r])
        counts[mech] = {**res.counts, "path": str(store.path)}
        full = np.zeros(r.shape[0], bool)
        full[r] = res.withheld
        cuts = np.cumsum([0] + [u.shape[0] for u in users])
        for s in range(len(shards)):
            withheld[s][mech] = full[cuts[s]:cuts[s + 1]]
    for s in range(len(shards)):
        np.savez(_withheld_path(plan, s), **withheld[s])
    return counts


def _feature_spent(f: dict, d: int) -> Spent:
    from ..privacy.ldp import grr_fs_epsilon_exact

    mech = f["mechanism"]
    if mech == "grr":
        return Spent("grr", "features", f["eps"] * d, guarantee="eps-LDP per node",
                     params={"eps_per_value": f["eps"], "d": d, "sharded": True})
    if mech == "grr_fs":
        return Spent("grr_fs", "features", grr_fs_epsilon_exact(f["eps"], f["m"], d),
                     guarantee="eps-LDP per node (exact: m * eps_x)",
                     params={"eps_x": f["eps"], "m": f["m"], "d": d, "sharded": True})
    m = d if mech == "onebit" else f["m"]
    return Spent(mech, "features", f["eps"], guarantee="eps-LDP per node",
                 params={"m": m, "eps_per_dim": f["eps"] / m, "d": d, "alpha": f["alpha"], "beta": f["beta"],
                         "sharded": True})


def _locallap(client, plan: _Plan, shards, v, nnz: int, progress, results):
    """LocalLap's global steps (T, threshold rounds, the T-th largest value, the tie-break)
    on per-shard summaries; every formula is the single-machine one (module docstring)."""
    from ..mechanisms import edges as EM

    e = plan.edges
    n, G1 = plan.n, e["G1"]
    total_units = nnz * G1 + sum(r["noise_sum"] for r in v)
    N = n * (n - 1) // 2
    T = min(max(total_units // (2 * G1), 0), N)
    r2 = e["s2"] / e["t2"]
    N0 = N - nnz // 2
    base_target = T + 10.0 * math.sqrt(T) + 100.0 if e["_target"] is None else float(e["_target"])
    hi, prev_tau, prev_tail = np.iinfo(np.int64).max, math.inf, 0.0
    zero_count, rnd, split_at, r0 = 0, 0, None, None
    while True:  # the rounds of the single-machine loop (mechanisms.edges.laplace)
        rnd, tau, lo, pi = EM._next_round(r2, N0, N, T, base_target, rnd, prev_tau, prev_tail, zero_count,
                                          e["max_dense_entries"])
        zhi, split = hi, False
        if not plan.rounds:  # first round: zero picks at or above split_at get no value
            split_at = EM._split_point(r2, e["s2"], N0, nnz // 2, e["G2"], lo, T, e.get("_split_target"))
            zhi, split = (hi, False) if split_at is None else (split_at, True)
        plan.rounds.append((rnd, pi, lo, hi, zhi, split))
        rr = _run(client, _ll_round_task, plan, shards, progress, f"locallap-round{rnd}")
        results.append(rr)
        if split:
            r0 = rr
        zero_count += sum(r["zeros"] for r in rr)
        ones_above = sum(r["ones_above"] for r in rr)
        if zero_count + ones_above >= T or tau == -math.inf:
            break
        hi, prev_tau, prev_tail = lo, tau, EM._tail(r2, tau)
        rnd += 1
    if split_at is not None:  # as the single-machine _resolve_high, in the same global order
        n_high = sum(r["high"] for r in r0)
        if n_high and T > 0 and n_high + sum(r["ones_ge_split"] for r in r0) >= T:
            from ._shard_tasks import _kernels

            hv = EM._high_values(n_high, split_at, plan.edge_seed, e["t2"], e["s2"], _kernels(), "cpu",
                                 lambda t: t.numpy()).numpy()
            cuts = np.cumsum([0] + [r["high"] for r in r0])
            e["high"] = [hv[cuts[i]:cuts[i + 1]] for i in range(len(r0))]
    # the T-th largest value from the merged histograms (= np.partition(vals, C - T)[C - T])
    hs = _run(client, _ll_hist_task, plan, shards, progress, "locallap-histogram")
    results.append(hs)
    vals = np.concatenate([h["values"] for h in hs])
    cnts = np.concatenate([h["counts"] for h in hs])
    uv, inv = np.unique(vals, return_inverse=True)
    uc = np.bincount(inv, weights=cnts, minlength=uv.shape[0]).astype(np.int64)
    C = int(uc.sum())
    chosen: list[list[np.ndarray]] = [[np.empty(0, np.int64)] * (len(plan.rounds) + 1) for _ in shards]
    if T <= 0:
        e.update(keep="none", vstar=0)
    elif T >= C:
        e.update(keep="all", vstar=0)
    else:
        above = np.cumsum(uc[::-1])[::-1]  # above[k] = #values >= uv[k]
        k = int(np.flatnonzero(above >= T)[-1])  # largest value with at least T values >= it
        vstar = int(uv[k])
        need = T - (int(above[k + 1]) if k + 1 < uv.shape[0] else 0)
        e.update(keep="top", vstar=vstar)
        ts = _run(client, _ll_ties_task, plan, shards, progress, "locallap-ties")
        results.append(ts)
        # global tie order: source by source (round 0, 1, ..., true edges), shards in row order
        n_src = len(plan.rounds) + 1
        offs = np.zeros((n_src, len(shards)), dtype=np.int64)
        tot = 0
        for src in range(n_src):
            for s in range(len(shards)):
                offs[src, s] = tot
                tot += ts[s]["ties"][src]
        seed = plan.edge_seed
        rng = np.random.Generator(np.random.Philox(key=(int(seed) << 64) | 0x4C6F63616C4C6170))
        pick = np.sort(rng.choice(tot, size=need, replace=False))
        for src in range(n_src):
            for s in range(len(shards)):
                o, c = offs[src, s], ts[s]["ties"][src]
                lo_i, hi_i = np.searchsorted(pick, [o, o + c])
                chosen[s][src] = pick[lo_i:hi_i] - o
    final = _run(client, _ll_write_task, plan, shards, progress, "locallap-write", extra=chosen)
    spent = Spent(mechanism="locallap", target="edges", eps=e["eps1_used"] + e["eps2_used"], guarantee=EM._GUARANTEE,
                  params={"eps": e["eps"], "eps1": e["eps1"], "eps1_used": e["eps1_used"], "eps2": e["eps2"],
                          "eps2_used": e["eps2_used"], "granularity_degree": e["g1"], "granularity_entries": e["g2"],
                          "T": T, "n": n, "threshold": plan.rounds[-1][2], "threshold_rounds": len(plan.rounds),
                          "candidates": C, "sharded": True})
    return final, spent
