"""Numba twin of ``csrc/cpu/propagate.cpp``: y = diag(a) (A [+I]) diag(b) x over CSR."""
from __future__ import annotations

import numba as nb


@nb.njit(cache=True, nogil=True, parallel=True)
def _spmm(rowptr, col, a, b, x, y, self_loop):
    n, d = x.shape
    for i in nb.prange(n):
        for f in range(d):
            y[i, f] = 0
        if self_loop and b[i] != 0:
            for f in range(d):
                y[i, f] += b[i] * x[i, f]
        for k in range(rowptr[i], rowptr[i + 1]):
            j = col[k]
            w = b[j]
            if w == 0:
                continue
            for f in range(d):
                y[i, f] += w * x[j, f]
        s = a[i]
        if s != 1:
            for f in range(d):
                y[i, f] *= s


def spmm_scaled(rowptr, col, a, b, x, y, self_loop):
    _spmm(rowptr, col, a, b, x, y, bool(self_loop))
