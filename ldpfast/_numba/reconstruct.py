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


@nb.njit(cache=True, nogil=True, parallel=True)
def _estimate(lam, gam, a, b, allbin, one, half, out, c0):
    n = lam.shape[0]
    B = gam.shape[0]
    for i in nb.prange(n):
        c = 0
        for t in range(B):
            if allbin:
                out[i, c0 + t] = 1 if lam[i, c] * a[t] + b[t] > half else 0
                c += 1
                continue
            g1 = gam[t] - 1
            s = lam[i, c] - lam[i, c]  # zero of lam's dtype
            for j in range(g1):
                s += lam[i, c + j]
            pi0 = (one - s) * a[t] + b[t]
            rmax = lam[i, c] * a[t] + b[t]
            rarg = 0
            for j in range(1, g1):
                p = lam[i, c + j] * a[t] + b[t]
                if p > rmax:
                    rmax = p
                    rarg = j
            out[i, c0 + t] = 0 if pi0 >= rmax else rarg + 1
            c += g1


def fs_estimate_index(lam, gam, a, b, allbin, out, c0):
    """Twin of the C++ ``fs_estimate_index`` (csrc/common/reconstruct.h,
    ``estimate_index_row``): the same float operations in ``lam``'s dtype."""
    if lam.ndim != 2 or out.ndim != 2 or out.shape[0] != lam.shape[0]:
        raise ValueError("lam, out: expected 2-D arrays with the same number of rows")
    if lam.dtype not in (np.float32, np.float64) or a.dtype != lam.dtype or b.dtype != lam.dtype:
        raise ValueError("lam, a, b: expected float32 or float64 of one dtype")
    if out.dtype != np.int64:
        raise ValueError(f"out: expected int64, got {out.dtype}")
    if gam.size and (int(gam.min()) < 2 or (allbin and int(gam.max()) != 2)):
        raise ValueError("gam: domain sizes must be >= 2 (all 2 when allbin)")
    if int((gam - 1).sum()) != lam.shape[1]:
        raise ValueError("lam: expected sum(gam - 1) columns")
    if c0 < 0 or c0 + gam.shape[0] > out.shape[1]:
        raise ValueError("c0: the block's columns must lie in [0, out.shape[1])")
    one = np.ones(1, dtype=lam.dtype)[0]
    half = np.full(1, 0.5, dtype=lam.dtype)[0]
    _estimate(lam, gam, a, b, bool(allbin), one, half, out, np.int64(c0))
