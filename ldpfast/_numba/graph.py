"""Numba twin of ``csrc/cpu/graph.cpp``: COO -> CSR counting sort, per-row sort + unique."""
from __future__ import annotations

import numba as nb
import numpy as np

jit = nb.njit(cache=True, nogil=True)


@jit
def _coo_to_csr(src, dst, n, rowptr, col):
    rowptr[:] = 0
    for e in range(src.shape[0]):
        s, d = src[e], dst[e]
        if s < 0 or s >= n or d < 0 or d >= n:
            return False
        rowptr[s + 1] += 1
    for i in range(n):
        rowptr[i + 1] += rowptr[i]
    fill = rowptr[:n].copy()
    for e in range(src.shape[0]):
        col[fill[src[e]]] = dst[e]
        fill[src[e]] += 1
    return True


def coo_to_csr(src, dst, n, rowptr, col):
    if not _coo_to_csr(src, dst, n, rowptr, col):
        raise IndexError("edge_index: node id outside [0, num_nodes)")


@nb.njit(cache=True, nogil=True, parallel=True)
def _sort_rows(rowptr, col, drop_self, keep):
    n = rowptr.shape[0] - 1
    for i in nb.prange(n):
        b, e = rowptr[i], rowptr[i + 1]
        seg = np.sort(col[b:e])
        w = 0
        for r in range(seg.shape[0]):
            v = seg[r]
            if drop_self and v == i:
                continue
            if w > 0 and col[b + w - 1] == v:
                continue
            col[b + w] = v
            w += 1
        keep[i] = w


@jit
def _compact(rowptr, col, keep):
    n = rowptr.shape[0] - 1
    out = 0
    for i in range(n):
        b, k = rowptr[i], keep[i]
        if out != b:
            for j in range(k):
                col[out + j] = col[b + j]
        rowptr[i] = out
        out += k
    rowptr[n] = out
    return out


def csr_sort_unique(rowptr, col, drop_self):
    keep = np.empty(rowptr.shape[0] - 1, dtype=np.int64)
    _sort_rows(rowptr, col, bool(drop_self), keep)
    return int(_compact(rowptr, col, keep))
