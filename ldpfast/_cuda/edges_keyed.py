"""Launchers of the user-keyed edge randomisers (``csrc/cuda/edges_keyed.cu``; bodies in
``csrc/common/edges_keyed.h``): Warner RR (mode 0) and DPRR's nested levels (mode 1) whose every
bit (i, j) is addressed by user i's coin seed and user j's key.  Same inputs and same bits as
the C++ ``keyed_rr`` / ``keyed_dlap``; the output CSR is built on the device.

The steps (see the .cu file for why each is independent per thread): hits of every (row,
field) counted, prefix-summed and filled; mode 1's hits sorted by (row, key, level); one value
per true edge and per hit (``row N + j`` for an output, else a sentinel that sorts last); one
sort of those values; the row pointers by ``searchsorted``.  Host reads: the number of hits
and the output size (the allocations' sizes).
"""
from __future__ import annotations

import numpy as np

from ._core import NULL, _col_suffix, _prefix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")

L_TOP = 48  # csrc/common/edges_keyed.h
_KL_BITS = 38  # a hit: key (< 2^32) * 64 + (63 - level)


def _sort_in_rows(vals, seg_ptr, bits: int):
    """``vals`` (int64, each in [0, 2^bits)) sorted within the row segments of ``seg_ptr``:
    one sort of row 2^bits + value when that fits in 63 bits, else two stable sorts."""
    import torch

    m = seg_ptr.numel() - 1
    rows = torch.repeat_interleave(torch.arange(m, device=vals.device), seg_ptr[1:] - seg_ptr[:-1],
                                   output_size=vals.numel())
    if m < 2 ** (63 - bits):
        return torch.sort(rows * (1 << bits) + vals).values - rows * (1 << bits)
    order = torch.sort(vals, stable=True).indices
    order = order[torch.sort(rows[order], stable=True).indices]
    return vals[order]


def keyed_rr(rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, p_true, p_false, pm, pub=None, row0=0):
    """Noisy lists of the keyed sampler on rows ``[row0, row0 + m)`` of a graph as a CSR
    (rowptr, int64 col): the C++ ``keyed_rr``'s arguments (``rowptr`` local, ``col`` global ids,
    ``keys`` every user's key, ``row_of_key`` over [0, max key], ``seeds`` (int64 holding the
    uint64 coin seeds), ``p_true``, ``p_false`` and ``pub`` (uint8, optional) per local row), all
    CUDA tensors; the C++ count and fill passes' output, bit for bit."""
    import torch

    m = rowptr.numel() - 1
    N, S = keys.numel(), row_of_key.numel()
    dev = rowptr.device
    if mode not in (0, 1):
        raise ValueError("mode: expected 0 (RR) or 1 (DPRR)")
    if N < row0 + m:
        raise ValueError("keys: expected one key per user of the graph")
    if rowptr.dtype != torch.int64 or keys.dtype != torch.int64 or row_of_key.dtype != torch.int64:
        raise ValueError("rowptr, keys, row_of_key: expected int64")
    for t, nm in ((p_true, "p_true"), (p_false, "p_false")):
        if t.dtype != torch.float64 or t.numel() != m:
            raise ValueError(f"{nm}: expected {m} float64 values")
    if seeds.dtype != torch.int64 or seeds.numel() != m:
        raise ValueError(f"seeds: expected {m} int64 (uint64 bits) coin seeds")
    pp = NULL if pub is None or pub.numel() == 0 else _ptr(pub)
    if pp is not NULL and (pub.dtype != torch.uint8 or pub.numel() != m):
        raise ValueError(f"pub: expected {m} uint8 flags")
    if m * N >= 2**63 - 1:
        raise ValueError(f"keyed_rr: {m} rows of {N} users are too many for one launch (row N + j must fit in int64)")
    if S > 2**32:
        raise ValueError(f"row_of_key: {S} keys; at most 2^32")
    if m == 0:
        return torch.zeros(1, dtype=torch.int64, device=dev), torch.empty(0, dtype=torch.int64, device=dev)
    F = 1 if mode == 0 else L_TOP + 1
    head = (_ptr(keys), _ptr(row_of_key), np.int64(S), _ptr(seeds), np.uint32(st_t), np.uint32(st_f),
            np.int32(mode), _ptr(p_true), _ptr(p_false), np.float64(pm), pp, np.int64(row0))
    counts = torch.zeros(m * F, dtype=torch.int64, device=dev)
    _launch("edges_keyed", "keyed_hits", m * F, head + (np.int64(m), _ptr(counts), NULL, NULL, np.int32(0)), dev)
    hoff = _prefix(counts)
    nh = int(hoff[-1])
    hkl = torch.empty(nh, dtype=torch.int64, device=dev)
    _launch("edges_keyed", "keyed_hits", m * F, head + (np.int64(m), NULL, _ptr(hoff), _ptr(hkl), np.int32(1)), dev)
    del counts
    hrp = hoff[::F].contiguous()  # each row's first hit
    del hoff
    if mode == 1 and nh:
        hkl = _sort_in_rows(hkl, hrp, _KL_BITS)
    nnz = int(col.numel())
    okey = torch.empty(nnz + nh, dtype=torch.int64, device=dev)
    _launch("edges_keyed", f"keyed_pick_{_col_suffix(col)}", nnz + nh,
            (_ptr(rowptr), _ptr(col), np.int64(m), _ptr(keys), _ptr(row_of_key), np.int64(S), _ptr(seeds),
             np.uint32(st_t), np.uint32(st_f), np.int32(mode), _ptr(p_true), _ptr(p_false), np.float64(pm), pp,
             np.int64(row0), _ptr(hrp), _ptr(hkl), np.int64(nh), np.int64(N), _ptr(okey)), dev)
    del hkl
    okey = torch.sort(okey).values
    bounds = torch.arange(m + 1, dtype=torch.int64, device=dev) * N
    orp = torch.searchsorted(okey, bounds)
    return orp, torch.remainder(okey[:int(orp[-1])], N)  # j of row N + j


def keyed_dlap(seeds, t, s, out) -> None:
    """DPRR's discrete Laplace noise of each user's degree (int64 ``out``) from per-user seeds
    (int64 holding uint64 bits): the C++ ``keyed_dlap``'s bits."""
    import torch

    n = seeds.numel()
    if t < 1 or s < 1:
        raise ValueError("t, s: expected integers >= 1")
    if seeds.dtype != torch.int64 or out.dtype != torch.int64 or out.numel() != n:
        raise ValueError(f"seeds, out: expected {n} int64 values each")
    _launch("edges_keyed", "keyed_dlap", n, (_ptr(seeds), np.int64(n), np.uint64(t), np.uint64(s), _ptr(out)),
            seeds.device)
