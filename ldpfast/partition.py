"""Graph partitioning for graphs too large for METIS in one piece: multilevel coarsening by
size-constrained label propagation, METIS (pymetis) on the coarse weighted graph, and the
partition projected back (RGNN's bags on Orkut-scale graphs).

Why: pymetis on an Orkut-scale graph (3.07M nodes, 234M CSR entries) needs its own int64
copy of the graph plus METIS' coarsening hierarchy, and runs single-threaded; measured on
graphs of the same mean degree its time and memory grow linearly in the entries, which puts
the full graph far beyond 10 minutes (BENCHMARKS.md, "Orkut scale end to end").  METIS'
own first levels are matchings, which on power-law graphs shrink the graph slowly (a hub's
leaves cannot all match the hub).  Label propagation with a cap on the cluster weight
(SCLaP, Meyerhenke, Sanders and Schulz, "Partitioning complex networks via size-constrained
clustering", 2014) merges whole neighbourhoods per pass instead, so a few passes take the
graph down to a few thousand weighted clusters; METIS then partitions that small graph
(vertex weights = cluster sizes, edge weights = the number of fine entries between the
clusters), and every node gets its cluster's part.

:func:`coarsen` is deterministic for a seed: the passes visit the nodes in one seeded
permutation, sequentially (each move sees every earlier move), with ties broken by the
order in which a node's neighbours are stored.  METIS is deterministic for its seed too.

Functions
---------
* :func:`partition` -- parts of every node (plain METIS, or coarsen + METIS + project).
* :func:`coarsen` -- cluster id of every node and the coarse weighted graph.
* :func:`edge_cut` -- fraction of the CSR entries whose endpoints lie in different parts.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numba as nb
import numpy as np
import torch

from . import _numba  # noqa: F401 - sets Numba's cache directory before the decorators run
from ._checks import check_int
from .graph import CSR

__all__ = ["CoarseGraph", "coarsen", "edge_cut", "partition"]

_jit = nb.njit(cache=True, nogil=True)
_PASSES, _MAX_LEVELS = 5, 8  # coarsen() defaults, also used by partition()


@dataclass
class CoarseGraph:
    """A weighted undirected graph in CSR form (no self loops).

    ``rowptr`` int64 ``(k + 1,)``, ``col`` int32 ``(nnz,)``, ``ew`` int64 edge weights
    (``(nnz,)``; the number of fine CSR entries between the two clusters), ``vw`` int64
    vertex weights (``(k,)``; the number of fine nodes in the cluster).
    """

    rowptr: np.ndarray
    col: np.ndarray
    ew: np.ndarray
    vw: np.ndarray

    @property
    def num_nodes(self) -> int:
        return int(self.vw.shape[0])

    @property
    def nnz(self) -> int:
        return int(self.col.shape[0])


@_jit
def _label_propagation(rowptr, col, ew, vw, order, cap, low, passes, labels, size):
    """Sequential size-constrained label propagation, in place on ``labels`` (cluster of
    every node, in ``[0, len(size))``) and ``size`` (weight of every cluster).

    A node moves to the neighbouring cluster it shares the largest edge weight with when that
    is strictly more than it shares with its own cluster, the new cluster's weight stays
    <= cap and the old one's >= low.  ``ew`` empty means unit weights.  Integer weights: exact, order-independent sums.
    Used both to coarsen (singletons at the start) and to refine a partition (parts at the
    start, ``cap`` = the largest part allowed): every move strictly lowers the cut.
    """
    unit = ew.shape[0] == 0
    acc = np.zeros(size.shape[0], dtype=np.int64)
    touched = np.empty(size.shape[0], dtype=np.int64)
    for _ in range(passes):
        moved = 0
        for v in order:
            cv = labels[v]
            nt = 0
            for e in range(rowptr[v], rowptr[v + 1]):
                c = labels[col[e]]
                if acc[c] == 0:
                    touched[nt] = c
                    nt += 1
                acc[c] += 1 if unit else ew[e]
            best = cv
            bw = acc[cv]
            if size[cv] - vw[v] < low:
                nt_keep = 0  # its cluster may not shrink: look at no other
            else:
                nt_keep = nt
            for i in range(nt_keep):
                c = touched[i]
                if c != cv and acc[c] > bw and size[c] + vw[v] <= cap:
                    best = c
                    bw = acc[c]
            for i in range(nt):
                acc[touched[i]] = 0
            if best != cv:
                size[cv] -= vw[v]
                size[best] += vw[v]
                labels[v] = best
                moved += 1
        if moved == 0:
            break


@_jit
def _compact(labels):
    """Relabel to ``[0, k)`` in order of first appearance; returns (labels, k)."""
    n = labels.shape[0]
    remap = np.full(n, -1, dtype=np.int64)
    out = np.empty(n, dtype=np.int64)
    k = 0
    for v in range(n):
        c = labels[v]
        if remap[c] < 0:
            remap[c] = k
            k += 1
        out[v] = remap[c]
    return out, k


@_jit
def _contract(rowptr, col, ew, vw, labels, k):
    """The coarse graph of ``labels`` (in ``[0, k)``): two passes over the fine entries (count,
    then fill), so the only large allocation is the coarse CSR itself."""
    n = rowptr.shape[0] - 1
    unit = ew.shape[0] == 0
    start = np.zeros(k + 1, dtype=np.int64)
    for v in range(n):
        start[labels[v] + 1] += 1
    for c in range(k):
        start[c + 1] += start[c]
    members = np.empty(n, dtype=np.int64)
    fill = start[:-1].copy()
    for v in range(n):
        members[fill[labels[v]]] = v
        fill[labels[v]] += 1
    cvw = np.zeros(k, dtype=np.int64)
    for v in range(n):
        cvw[labels[v]] += vw[v]
    acc = np.zeros(k, dtype=np.int64)
    touched = np.empty(k, dtype=np.int64)
    crow = np.zeros(k + 1, dtype=np.int64)
    ccol = np.empty(0, dtype=np.int32)
    cew = np.empty(0, dtype=np.int64)
    for step in range(2):
        if step == 1:
            for c in range(k):
                crow[c + 1] += crow[c]
            ccol = np.empty(crow[k], dtype=np.int32)
            cew = np.empty(crow[k], dtype=np.int64)
        for c in range(k):
            nt = 0
            for i in range(start[c], start[c + 1]):
                v = members[i]
                for e in range(rowptr[v], rowptr[v + 1]):
                    d = labels[col[e]]
                    if d == c:
                        continue  # internal entry: becomes the cluster's weight, not an edge
                    if acc[d] == 0:
                        touched[nt] = d
                        nt += 1
                    acc[d] += 1 if unit else ew[e]
            if step == 0:
                crow[c + 1] = nt
            else:
                p = crow[c]
                for i in range(nt):
                    d = touched[i]
                    ccol[p + i] = d
                    cew[p + i] = acc[d]
            for i in range(nt):
                acc[touched[i]] = 0
    return crow, ccol, cew, cvw


@_jit
def _cut_entries(rowptr, col, parts):
    n = rowptr.shape[0] - 1
    cut = 0
    for v in range(n):
        pv = parts[v]
        for e in range(rowptr[v], rowptr[v + 1]):
            if parts[col[e]] != pv:
                cut += 1
    return cut


def _csr_arrays(g) -> tuple[np.ndarray, np.ndarray]:
    if not isinstance(g, CSR):
        raise TypeError(f"csr: expected an ldpfast.graph.CSR, got {type(g).__name__}")
    rowptr = g.rowptr.cpu().numpy().astype(np.int64, copy=False)
    col = g.col.cpu().numpy()
    if col.dtype not in (np.int32, np.int64):
        col = col.astype(np.int64)
    return rowptr, col


def coarsen(csr: CSR, coarsen_to: int, seed: int = 0, *, passes: int = _PASSES,
            max_levels: int = _MAX_LEVELS, timings: dict | None = None) -> tuple[np.ndarray, CoarseGraph]:
    """Cluster the nodes of an undirected graph into roughly ``coarsen_to`` clusters.

    Levels of size-constrained label propagation (at most ``passes`` passes each), each
    followed by a contraction, until the graph has at most ``2 * coarsen_to`` nodes or a
    level shrinks it by less than 5%.  No cluster ever weighs more than
    ``ceil(num_nodes / coarsen_to)`` fine nodes, so at least ``coarsen_to`` clusters remain
    and a partition into ``C <= coarsen_to / 8`` parts can still be balanced.

    Parameters
    ----------
    csr : ldpfast.graph.CSR
        Undirected graph (both directions stored, no self loops), on the host or a GPU (read
        once to the host).
    coarsen_to : int
        Target number of clusters, ``>= 1``.
    seed : int
        In ``[0, 2**63)``: the order in which label propagation visits the nodes.
    passes : int
        Label propagation passes per level, ``>= 1`` (a level stops early when no node moves).
    max_levels : int
        Most levels, ``>= 1``.
    timings : dict, optional
        Receives ``coarsen_s``, ``levels`` (nodes and entries after each level).

    Returns
    -------
    (cluster, coarse)
        ``cluster``: int64 ``(num_nodes,)`` cluster id in ``[0, coarse.num_nodes)``;
        ``coarse``: the :class:`CoarseGraph` of the clusters.
    """
    rowptr, col = _csr_arrays(csr)
    coarsen_to = check_int("coarsen_to", coarsen_to, 1)
    seed = check_int("seed", seed, 0, 2**63 - 1)
    passes = check_int("passes", passes, 1)
    max_levels = check_int("max_levels", max_levels, 1)
    return _coarsen(rowptr, col, coarsen_to, seed, passes, max_levels, timings)


def _coarsen(rowptr, col, coarsen_to, seed, passes, max_levels, timings):
    # coarsen() on host arrays already read and checked (partition reads a GPU CSR once)
    n = rowptr.shape[0] - 1
    t0 = time.perf_counter()
    cap = max(1, math.ceil(n / coarsen_to))
    rng = np.random.default_rng(seed)
    g = CoarseGraph(rowptr, col, np.empty(0, np.int64), np.ones(n, np.int64))
    cluster = np.arange(n, dtype=np.int64)
    levels = []
    for _ in range(max_levels):
        if g.num_nodes <= 2 * coarsen_to:
            break
        order = rng.permutation(g.num_nodes).astype(np.int64)
        lab = np.arange(g.num_nodes, dtype=np.int64)
        _label_propagation(g.rowptr, g.col, g.ew, g.vw, order, cap, 0, passes, lab, g.vw.copy())
        if not levels:
            # isolated nodes never move (no neighbour): group them, cap at a time, so that
            # they cannot keep the graph from shrinking
            iso = np.flatnonzero(np.diff(g.rowptr) == 0)
            lab[iso] = iso[(np.arange(iso.shape[0]) // cap) * cap]
        lab, k = _compact(lab)
        if k > 0.95 * g.num_nodes:
            break
        g = CoarseGraph(*_contract(g.rowptr, g.col, g.ew, g.vw, lab, k))
        cluster = lab[cluster]
        levels.append({"nodes": g.num_nodes, "nnz": g.nnz})
    if g.ew.shape[0] == 0 and g.nnz:  # no level ran: the input itself, unit weights
        g = CoarseGraph(g.rowptr, g.col.astype(np.int32), np.ones(g.nnz, np.int64), g.vw)
    if timings is not None:
        timings["coarsen_s"] = time.perf_counter() - t0
        timings["levels"] = levels
    return cluster, g


def edge_cut(csr: CSR, parts) -> float:
    """Fraction of the CSR entries ``(u, v)`` with ``parts[u] != parts[v]`` (0 for a graph
    without entries).  ``parts``: ``(num_nodes,)`` integer tensor or array."""
    rowptr, col = _csr_arrays(csr)
    p = parts.cpu().numpy() if isinstance(parts, torch.Tensor) else np.asarray(parts)
    if p.shape != (rowptr.shape[0] - 1,):
        raise ValueError(f"parts: expected shape ({rowptr.shape[0] - 1},), got {p.shape}")
    nnz = col.shape[0]
    return _cut_entries(rowptr, col, p.astype(np.int64, copy=False)) / nnz if nnz else 0.0


def partition(csr: CSR, C: int, seed: int = 0, *, coarsen_to: int | None = None,
              ufactor: int | None = None, refine_passes: int = 4,
              timings: dict | None = None) -> np.ndarray:
    """``C``-way partition of an undirected graph with METIS (pymetis, k-way).

    Parameters
    ----------
    csr : ldpfast.graph.CSR
        Undirected graph (both directions stored, no self loops), ``num_nodes >= 1``.
    C : int
        Parts, ``1 <= C <= num_nodes``.
    seed : int
        In ``[0, 2**31)``: METIS' seed and the coarsening order.
    coarsen_to : int, optional
        ``None`` or ``0``: METIS on the graph itself.  Otherwise, ``>= C``: first
        :func:`coarsen` the graph to about ``coarsen_to`` weighted clusters, partition those
        (vertex weights = cluster sizes, edge weights = entries between clusters) and give
        every node its cluster's part.  Balance is then limited by the cluster weights
        (at most ``ceil(num_nodes / coarsen_to)``): take ``coarsen_to >= 16 * C``.
    ufactor : int, optional
        METIS' allowed imbalance in 1/1000 (default METIS' 30, i.e. 1.03).
    refine_passes : int
        With coarsening: passes of label-propagation refinement on the original graph after
        the projection (``>= 0``; each pass reads every entry once; a node moves to the part
        it has strictly more edges into, keeping every part at most
        ``max((1 + ufactor / 1000) * n / C, largest part METIS returned)`` and at least
        ``min((1 - ufactor / 1000) * n / C, smallest part METIS returned)``).
    timings : dict, optional
        Receives ``metis_s`` and, when coarsening, ``coarsen_s``, ``levels``,
        ``coarse_nodes``, ``coarse_nnz`` and ``refine_s``.

    Returns
    -------
    numpy.ndarray
        int64 ``(num_nodes,)`` part of every node, in ``[0, C)``.
    """
    import pymetis

    rowptr, col = _csr_arrays(csr)
    n = rowptr.shape[0] - 1
    if n < 1:
        raise ValueError("csr: the graph has no nodes")
    C = check_int("C", C, 1, n)
    seed = check_int("seed", seed, 0, 2**31 - 1)
    if coarsen_to is not None and coarsen_to != 0:
        coarsen_to = check_int("coarsen_to", coarsen_to, C)
    refine_passes = check_int("refine_passes", refine_passes, 0)
    opts = pymetis.Options(seed=seed) if ufactor is None else pymetis.Options(
        seed=seed, ufactor=check_int("ufactor", ufactor, 1, 10**6))
    if col.shape[0] == 0 or C == 1:
        if timings is not None:
            timings["metis_s"] = 0.0
        return np.zeros(n, dtype=np.int64) if C == 1 else np.arange(n, dtype=np.int64) % C
    if not coarsen_to:
        t0 = time.perf_counter()
        adj = pymetis.CSRAdjacency(adj_starts=rowptr, adjacent=col.astype(np.int64, copy=False))
        _, parts = pymetis.part_graph(C, adj, options=opts, recursive=False)
        if timings is not None:
            timings["metis_s"] = time.perf_counter() - t0
        return np.asarray(parts, dtype=np.int64)
    tm: dict = {}
    cluster, g = _coarsen(rowptr, col, coarsen_to, seed, _PASSES, _MAX_LEVELS, tm)
    tm_nodes, tm_nnz = g.num_nodes, g.nnz
    t0 = time.perf_counter()
    if g.num_nodes <= C:  # every cluster its own part (cannot happen with the cap, kept safe)
        cparts = np.arange(g.num_nodes, dtype=np.int64)
    elif g.nnz == 0:
        cparts = np.arange(g.num_nodes, dtype=np.int64) % C
    else:
        adj = pymetis.CSRAdjacency(adj_starts=g.rowptr, adjacent=g.col.astype(np.int64))
        _, cparts = pymetis.part_graph(C, adj, vweights=g.vw, eweights=g.ew, options=opts,
                                       recursive=False)
        cparts = np.asarray(cparts, dtype=np.int64)
    t1 = time.perf_counter()
    parts = cparts[cluster]
    del cluster, g
    if refine_passes:
        # the coarse cut is only as good as the clusters: move single nodes to the part
        # they have most edges into, never letting a part outgrow the larger of METIS'
        # allowed imbalance and the part METIS returned
        size = np.bincount(parts, minlength=C).astype(np.int64)
        uf = 30 if ufactor is None else ufactor
        cap = max(int(size.max()), math.floor((1000 + uf) * n / (1000 * C)))
        low = min(int(size.min()), math.ceil((1000 - uf) * n / (1000 * C)))
        order = np.random.default_rng([seed, 1]).permutation(n).astype(np.int64)
        _label_propagation(rowptr, col, np.empty(0, np.int64), np.ones(n, np.int64), order,
                           cap, low, refine_passes, parts, size)
    if timings is not None:
        timings.update(tm)
        timings["metis_s"] = t1 - t0
        timings["refine_s"] = time.perf_counter() - t1
        timings["coarse_nodes"], timings["coarse_nnz"] = tm_nodes, tm_nnz
    return parts
