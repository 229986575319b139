"""Launchers of the edge mechanisms (``csrc/cuda/edges.cu``): DPRR's per-user probabilities,
the sparse RR sampler, LocalLap's entry noise and zero candidates, the server-side row
combination.
"""
from __future__ import annotations

import numpy as np

from ._core import NULL, _col_suffix, _prefix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


# --- edge mechanisms (edges.cu) and graph checks (graph.cu) -----------------------------------
# Same contracts as the C++ entry points of csrc/cpu/edges.cpp; data arguments are CUDA
# tensors.  Variable-size outputs: count launch, torch.cumsum, one host read of the total
# (the only sync: the size of the allocation), fill launch.

def dprr_probs(rowptr, noise, g, p, pm):
    """(d_star, q, p_true, p_false), float64 per user: DPRR lines 2-7 (csrc/common/edges.h
    dprr_probs) from the CSR degrees and the int64 degree noise (n,) in grid units."""
    import torch

    n = rowptr.numel() - 1
    if noise.numel() != n or noise.dtype != torch.int64:
        raise ValueError(f"noise: expected {n} int64 values")
    outs = [torch.empty(n, dtype=torch.float64, device=rowptr.device) for _ in range(4)]
    _launch("edges", "dprr_probs", n, (_ptr(rowptr), _ptr(noise.contiguous()), np.int64(n), np.float64(g),
                                       np.float64(p), np.float64(pm), *[_ptr(o) for o in outs]), rowptr.device)
    return tuple(outs)


def edges_rr(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub=None):
    """Noisy lists of the sparse RR sampler as a CSR (rowptr, col): row i keeps each true edge
    with probability p_true[i] and each non-neighbour j != i with p_false[i]; pub (uint8,
    optional): rows copied unchanged.  Same bits as the C++ edges_rr_sample / _count + _fill.
    A warp per row (csrc/cuda/edges.cu): coalesced neighbours, the false edges' geometric gaps
    drawn speculatively across the lanes and chained by shuffles."""
    import torch

    n = rowptr.numel() - 1
    for t, nm in ((p_true, "p_true"), (p_false, "p_false")):
        if t.dtype != torch.float64 or t.numel() != n:
            raise ValueError(f"{nm}: expected {n} float64 values")
    pp = NULL if pub is None or pub.numel() == 0 else _ptr(pub)
    if pp is not NULL and (pub.dtype != torch.uint8 or pub.numel() != n):
        raise ValueError(f"public: expected {n} uint8 flags")
    kern = f"rr_edges_{_col_suffix(col)}"
    dev = rowptr.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(rowptr), _ptr(col), np.int64(n), np.uint64(seed), np.uint32(st_t), np.uint32(c_t),
            np.uint32(st_f), np.uint32(c_f), _ptr(p_true), _ptr(p_false), pp)
    # a warp per row (edges.cu): 32 threads each
    _launch("edges", kern, 32 * n, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    orp = _prefix(counts)
    ocol = torch.empty(int(orp[-1]), dtype=col.dtype, device=dev)
    _launch("edges", kern, 32 * n, head + (NULL, _ptr(orp), _ptr(ocol), np.int32(1)), dev)
    return orp, ocol


def locallap_edge_values(rowptr, col, seed, t, s, one, rnd, lo, hi, p, out_val) -> None:
    """Round ``rnd`` of the true upper entries (csrc/common/edges.h ll_edge_row; ``p`` =
    P[L >= lo - one], the skip path's rate in round 0): out_val[k] =
    one + L for the entries (i, j > i) at or above ``lo`` (below ``hi``), LL_NOT_CAND
    (INT64_MIN + 1) for the others, INT64_MIN below the diagonal; round >= 1 decides only the
    entries still LL_NOT_CAND.  Same bits as the C++ locallap_edge_values."""
    n = rowptr.numel() - 1
    if t < 1 or s < 1:
        raise ValueError("t, s: expected >= 1")
    if not 0 <= rnd <= 254:
        raise ValueError("rnd: expected 0..254")
    _launch("edges", f"ll_edge_values_{_col_suffix(col)}", n,
            (_ptr(rowptr), _ptr(col), np.int64(n), np.uint64(seed), np.uint64(t), np.uint64(s),
             np.int64(one), np.uint32(rnd), np.int64(lo), np.int64(hi), np.float64(p), _ptr(out_val)),
            rowptr.device)


def locallap_zero(excl_rowptr, excl_col, seed, rnd, pi, lo, hi, split, t, s):
    """LocalLap zero candidates of round ``rnd`` as (rowptr, col, int64 values; LL_HIGH =
    INT64_MAX for picks above the split ``hi`` when ``split``); same bits as the C++
    locallap_zero / locallap_zero_sample."""
    import torch

    n = excl_rowptr.numel() - 1
    if t < 1 or s < 1:
        raise ValueError("t, s: expected >= 1")
    if split and not (1 <= lo < hi and hi - lo <= (2**63 - 1) // s):
        raise ValueError("split: needs 1 <= lo < hi and (hi - lo) * s < 2^63")
    kern = f"ll_zero_{_col_suffix(excl_col)}"
    dev = excl_rowptr.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(excl_rowptr), _ptr(excl_col), np.int64(n), np.uint64(seed), np.uint32(rnd), np.float64(pi),
            np.int64(lo), np.int64(hi), np.int32(bool(split)), np.uint64(t), np.uint64(s))
    _launch("edges", kern, n, head + (_ptr(counts), NULL, NULL, NULL, np.int32(0)), dev)
    orp = _prefix(counts)
    nnz = int(orp[-1])
    oc = torch.empty(nnz, dtype=excl_col.dtype, device=dev)
    ov = torch.empty(nnz, dtype=torch.int64, device=dev)
    _launch("edges", kern, n, head + (NULL, _ptr(orp), _ptr(oc), _ptr(ov), np.int32(1)), dev)
    return orp, oc, ov


def csr_combine(rowptr_a, col_a, rowptr_b, col_b, mode):
    """Row-wise union (0) / intersection (1) / lower (2) / upper (3) of two sorted CSRs of one
    column dtype, as (rowptr, col)."""
    import torch

    if mode not in (0, 1, 2, 3):
        raise ValueError("mode: expected 0..3")
    if col_a.dtype != col_b.dtype:
        raise ValueError(f"col_b: dtype {col_b.dtype} differs from col_a ({col_a.dtype})")
    n = rowptr_a.numel() - 1
    if rowptr_b.numel() != n + 1:
        raise ValueError(f"rowptr_b: expected {n + 1} elements")
    kern = f"csr_combine_{_col_suffix(col_a)}"
    dev = rowptr_a.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(rowptr_a), _ptr(col_a), _ptr(rowptr_b), _ptr(col_b), np.int64(n), np.int32(mode))
    _launch("edges", kern, n, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    orp = _prefix(counts)
    oc = torch.empty(int(orp[-1]), dtype=col_a.dtype, device=dev)
    _launch("edges", kern, n, head + (NULL, _ptr(orp), _ptr(oc), np.int32(1)), dev)
    return orp, oc
