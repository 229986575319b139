"""Numba twin of ``csrc/cpu/propagate.cpp``: y = diag(a) (A [+I]) diag(b) x over CSR.

With ``val`` (weighted adjacency) the per-edge factor is ``val[k] * b[j]``, skipped when
zero, in the same order as the C++ kernel, so both give the same bits.

bfloat16 storage (``x``/``y`` int16 arrays of bf16 bits, float32 ``a``, ``b``, ``val``): x is
widened exactly, propagated in float32 by the same loop, and rounded to the nearest bf16
(ties to even, NaN -> 0x7FC0): the C++ kernel's definition, so the bits agree.
"""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True, parallel=True)
def _spmm(rowptr, col, val, weighted, a, b, x, y, self_loop):
    n, d = x.shape
    for i in nb.prange(n):
        for f in range(d):
            y[i, f] = 0
        if self_loop and b[i] != 0:
            for f in range(d):
                y[i, f] += b[i] * x[i, f]
        for k in range(rowptr[i], rowptr[i + 1]):
            j = col[k]
            w = val[k] * b[j] if weighted else b[j]
            if w == 0:
                continue
            for f in range(d):
                y[i, f] += w * x[j, f]
        s = a[i]
        if s != 1:
            for f in range(d):
                y[i, f] *= s


def bf16_widen(bits: np.ndarray) -> np.ndarray:
    """bf16 bits (int16/uint16) -> float32, exactly."""
    return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32)


def bf16_round(v: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bits (int16), nearest, ties to even; NaN -> 0x7FC0 (torch's rule)."""
    u = v.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[np.isnan(v)] = 0x7FC0
    return r.view(np.int16)


def spmm_scaled(rowptr, col, a, b, x, y, self_loop, val=None):
    if x.dtype == np.int16:  # bf16 storage
        if y.dtype != np.int16 or y.shape != x.shape:
            raise ValueError("y: expected an int16 (bf16 bits) array shaped like x")
        y32 = np.empty(x.shape, dtype=np.float32)
        spmm_scaled(rowptr, col, a, b, bf16_widen(x), y32, self_loop, val)
        y[...] = bf16_round(y32)
        return
    if val is not None and val.shape[0] != rowptr[-1]:
        raise ValueError(f"val: expected {int(rowptr[-1])} elements, got {val.shape[0]}")
    if val is not None and val.dtype != x.dtype:
        raise ValueError(f"val: expected dtype {x.dtype}, got {val.dtype}")
    weighted = val is not None
    _spmm(rowptr, col, val if weighted else np.zeros(1, x.dtype), weighted, a, b, x, y,
          bool(self_loop))
