"""Numba twin of ``csrc/cpu/reconstruct.cpp``: the report-count hop of RGNN's feature
reconstruction, ``y = diag(a) (A [+I]) e`` for uint8 indicators ``e``, counted in integers
and converted once (see csrc/common/reconstruct.h for why this equals the float one-hot
propagation bit for bit)."""
from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True, parallel=True)
def _counts(rowptr, col, e, a, y, self_loop):
    n, w = e.shape
    for i in nb.prange(n):
        acc = np.zeros(w, dtype=np.uint32)
        if self_loop:
            for t in range(w):
                acc[t] += e[i, t]
        for k in range(rowptr[i], rowptr[i + 1]):
            j = col[k]
            for t in range(w):
                acc[t] += e[j, t]
        s = a[i]
        for t in range(w):
            y[i, t] = acc[t]  # exact (the count is below 2^24 for float32)
        if s != 1:
            for t in range(w):
                y[i, t] *= s


def fs_counts(rowptr, col, e, a, y, self_loop):
    if e.ndim != 2 or y.ndim != 2:
        raise ValueError("e, y: expected 2-D arrays")
    n = rowptr.shape[0] - 1
    if e.shape[0] != n or y.shape != e.shape:
        raise ValueError(f"e, y: expected shape ({n}, w) each, got {e.shape} and {y.shape}")
    if e.dtype != np.uint8:
        raise ValueError(f"e: expected uint8, got {e.dtype}")
    if y.dtype not in (np.float32, np.float64) or a.dtype != y.dtype or a.shape != (n,):
        raise ValueError("y, a: expected float32 or float64 of the same dtype, a of shape (n,)")
    _counts(rowptr, col, e, a, y, bool(self_loop))
