"""Numba twin of ``csrc/cpu/propagate.cpp``: y = diag(a) (A [+I]) diag(b) x over CSR.

With ``val`` (weighted adjacency) the per-edge factor is ``val[k] * b[j]``, skipped when
zero, in the same order as the C++ kernel, so both give the same bits.
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


def spmm_scaled(rowptr, col, a, b, x, y, self_loop, val=None):
    if val is not None and val.shape[0] != rowptr[-1]:
        raise ValueError(f"val: expected {int(rowptr[-1])} elements, got {val.shape[0]}")
    if val is not None and val.dtype != x.dtype:
        raise ValueError(f"val: expected dtype {x.dtype}, got {val.dtype}")
    weighted = val is not None
    _spmm(rowptr, col, val if weighted else np.zeros(1, x.dtype), weighted, a, b, x, y,
          bool(self_loop))
