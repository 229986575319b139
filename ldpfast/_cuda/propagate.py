"""Launcher of propagation (``csrc/cuda/propagate.cu``): the scaled SpMM, long rows split into
fixed chunks combined in order (:data:`SPMM_CHUNK`).

Geometry (:func:`spmm_geometry`): each lane owns ``vec`` consecutive features (one vector load of
at most 16 bytes per gathered row), a group of ``2^gl`` lanes covers a row's features, and a warp
holds ``32 >> gl`` groups, one row (or chunk of a long row) each.  A call given a ``plan``
(:func:`cached_plan`) launches kernels only: no torch work and no host synchronisation.
"""
from __future__ import annotations

import numpy as np

from ._core import NULL, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


# Rows with more entries than this are split into chunks of this many entries, summed by
# separate warps and combined in chunk order (propagate.cu); shorter rows match C++ bit for bit.
SPMM_CHUNK = 512


def spmm_plan(rowptr, chunk: int = SPMM_CHUNK):
    """Chunks of the rows longer than ``chunk``, computed on the device with torch (two host
    syncs for the sizes), or None when there are none: ``(long_row, long_first, chunk_row,
    chunk_k0)``, chunk q of long row r = ``long_row[r]`` covering entries ``chunk_k0[q] ..
    +chunk``; the chunks of row r are ``long_first[r] .. long_first[r + 1]``.  Depends only on
    rowptr and chunk, so results do not depend on the launch."""
    import torch

    deg = rowptr[1:] - rowptr[:-1]
    long_row = torch.nonzero(deg > chunk).flatten()
    if long_row.numel() == 0:
        return None
    nch = (deg[long_row] + chunk - 1) // chunk
    long_first = torch.zeros(long_row.numel() + 1, dtype=torch.int64, device=rowptr.device)
    torch.cumsum(nch, 0, out=long_first[1:])
    nchunks = int(long_first[-1])
    chunk_row = torch.repeat_interleave(long_row, nch, output_size=nchunks)
    first = torch.repeat_interleave(long_first[:-1], nch, output_size=nchunks)
    pos = torch.arange(nchunks, dtype=torch.int64, device=rowptr.device) - first
    chunk_k0 = rowptr[chunk_row] + pos * chunk
    return long_row, long_first, chunk_row.contiguous(), chunk_k0.contiguous()


def cached_plan(rowptr, chunk: int = SPMM_CHUNK):
    """:func:`spmm_plan` for keeping: ``()`` instead of None when no row is longer than
    ``chunk``, so that :func:`spmm_scaled` given it does no planning (and no host sync)."""
    plan = spmm_plan(rowptr, chunk)
    return () if plan is None else plan


def spmm_geometry(x, y) -> tuple[int, int]:
    """``(vec, gl)`` of the launch for x, y (n, d): ``vec`` features per lane, the widest of
    8 / 4 / 2 / 1 values that fits 16 bytes, divides d and keeps every lane's piece of x and y
    aligned (else 1); groups of ``2^gl`` lanes, the smallest power of two covering ``d / vec``
    pieces, at most 32.  Metadata only (no device access)."""
    d, esz = x.shape[1], x.element_size()
    vec = 1
    for w in (8, 4, 2):
        if w * esz <= 16 and d % w == 0 and x.data_ptr() % (w * esz) == 0 and y.data_ptr() % (w * esz) == 0:
            vec = w
            break
    pieces = max(1, d // vec)
    return vec, min(5, (pieces - 1).bit_length())


def spmm_scaled(rowptr, col, a, b, x, y, self_loop, val=None, *, chunk: int = SPMM_CHUNK,
                plan=None) -> None:
    """y = diag(a) (A [+I]) diag(b) x, A weighted by ``val`` (None: unweighted); all
    arguments CUDA tensors, same contract as the C++ ``spmm_scaled`` (csrc/cpu/propagate.cpp).
    Rows of at most ``chunk`` entries are bit-identical to C++; longer ones are summed in
    fixed chunks combined in chunk order (deterministic, close to C++ but not bit-identical).
    ``plan``: :func:`cached_plan` of ``rowptr`` and ``chunk`` (or a :func:`spmm_plan`): then
    only kernels are launched; None plans here (torch ops and host syncs for the sizes)."""
    import torch

    if x.dim() != 2 or y.shape != x.shape or y.dtype != x.dtype:
        raise ValueError("x, y: expected 2-D tensors of one shape and dtype")
    n, d = x.shape
    if rowptr.numel() != n + 1 or a.numel() != n or b.numel() != n:
        raise ValueError(f"rowptr, a, b: expected {n + 1}, {n}, {n} elements (x has {n} rows)")
    if chunk < 1:
        raise ValueError("chunk: expected >= 1")
    fdt = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16"}[x.dtype]
    idt = {torch.int32: "i32", torch.int64: "i64"}[col.dtype]
    sdt = torch.float32 if x.dtype == torch.bfloat16 else x.dtype  # bf16 storage, float maths
    for t, nm in ((a, "a"), (b, "b")) + (() if val is None else ((val, "val"),)):
        if t.dtype != sdt:
            raise ValueError(f"{nm}: dtype {t.dtype}, expected {sdt} for x of dtype {x.dtype}")
    pv = NULL if val is None else _ptr(val)
    if n == 0 or d == 0:
        return
    if plan is None:
        plan = spmm_plan(rowptr, chunk)
    vec, gl = spmm_geometry(x, y)
    per_warp = 32 >> gl  # rows (chunks) per warp
    sl, shape = np.int32(bool(self_loop)), (np.int32(vec), np.int32(gl))
    _launch("propagate", f"spmm_{fdt}_{idt}", -(-n // per_warp) * 32,
            (_ptr(rowptr), _ptr(col), pv, _ptr(a), _ptr(b), _ptr(x), _ptr(y), np.int64(n),
             np.int64(d), sl, np.int64(chunk)) + shape, x.device)
    if not plan:  # None or (): no long rows
        return
    long_row, long_first, chunk_row, chunk_k0 = plan
    nchunks, nlong = chunk_row.numel(), long_row.numel()
    partial = torch.empty(nchunks, d, dtype=sdt, device=x.device)
    _launch("propagate", f"spmm_chunks_{fdt}_{idt}", -(-nchunks // per_warp) * 32,
            (_ptr(rowptr), _ptr(col), pv, _ptr(b), _ptr(x), _ptr(chunk_row), _ptr(chunk_k0),
             _ptr(partial), np.int64(nchunks), np.int64(d), np.int64(chunk)) + shape, x.device)
    _launch("propagate", f"spmm_combine_{fdt}", nlong * 32,
            (_ptr(long_row), _ptr(long_first), _ptr(partial), _ptr(a), _ptr(b), _ptr(x), _ptr(y),
             np.int64(nlong), np.int64(d), sl), x.device)
