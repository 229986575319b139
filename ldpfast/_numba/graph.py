"""Numba twin of ``csrc/cpu/graph.cpp``: COO -> CSR counting sort, per-row sort + unique,
transpose with the value permutation.

Weighted rows are ordered by (column, original position) and repeated columns are summed
in that order, as in the C++ kernel, so both backends give the same bits.
"""
from __future__ import annotations

import numba as nb
import numpy as np

jit = nb.njit(cache=True, nogil=True)


@jit
def _coo_to_csr(src, dst, n, rowptr, col, vin, vout, weighted):
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
        p = fill[src[e]]
        col[p] = dst[e]
        if weighted:
            vout[p] = vin[e]
        fill[src[e]] += 1
    return True


def coo_to_csr(src, dst, n, rowptr, col, val_in=None, val_out=None):
    if (val_in is None) != (val_out is None):
        raise ValueError("val_in, val_out: pass both or neither")
    weighted = val_in is not None
    if not weighted:
        val_in = val_out = np.zeros(1, np.float64)
    if not _coo_to_csr(src, dst, n, rowptr, col, val_in, val_out, weighted):
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


@nb.njit(cache=True, nogil=True, parallel=True)
def _sort_rows_w(rowptr, col, val, drop_self, keep):
    n = rowptr.shape[0] - 1
    for i in nb.prange(n):
        b, e = rowptr[i], rowptr[i + 1]
        c = col[b:e].copy()
        v = val[b:e].copy()
        order = np.argsort(c, kind="mergesort")  # stable: ties keep their original order
        w = 0
        for r in range(order.shape[0]):
            cc = c[order[r]]
            if drop_self and cc == i:
                continue
            if w > 0 and col[b + w - 1] == cc:
                val[b + w - 1] += v[order[r]]
                continue
            col[b + w] = cc
            val[b + w] = v[order[r]]
            w += 1
        keep[i] = w


@jit
def _compact(rowptr, col, val, weighted, keep):
    n = rowptr.shape[0] - 1
    out = 0
    for i in range(n):
        b, k = rowptr[i], keep[i]
        if out != b:
            for j in range(k):
                col[out + j] = col[b + j]
                if weighted:
                    val[out + j] = val[b + j]
        rowptr[i] = out
        out += k
    rowptr[n] = out
    return out


def csr_sort_unique(rowptr, col, drop_self, val=None):
    keep = np.empty(rowptr.shape[0] - 1, dtype=np.int64)
    if val is None:
        _sort_rows(rowptr, col, bool(drop_self), keep)
        return int(_compact(rowptr, col, np.zeros(1, np.float64), False, keep))
    if val.shape[0] != col.shape[0]:
        raise ValueError(f"val: expected {col.shape[0]} elements, got {val.shape[0]}")
    _sort_rows_w(rowptr, col, val, bool(drop_self), keep)
    return int(_compact(rowptr, col, val, True, keep))


@jit
def _transpose_perm(rowptr, col, orp, oc, perm, with_perm):
    n = rowptr.shape[0] - 1
    orp[:] = 0
    for k in range(rowptr[n]):
        orp[col[k] + 1] += 1
    for i in range(n):
        orp[i + 1] += orp[i]
    fill = orp[:n].copy()
    for i in range(n):
        for k in range(rowptr[i], rowptr[i + 1]):
            q = fill[col[k]]
            oc[q] = i
            if with_perm:
                perm[q] = k
            fill[col[k]] += 1


def csr_transpose_perm(rowptr, col, out_rowptr, out_col, out_perm=None):
    if rowptr[-1] != col.shape[0]:
        raise ValueError("rowptr: last entry must equal len(col)")
    with_perm = out_perm is not None
    _transpose_perm(rowptr, col, out_rowptr, out_col,
                    out_perm if with_perm else np.zeros(1, np.int64), with_perm)
