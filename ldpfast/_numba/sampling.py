"""Numba twin of ``csrc/cpu/sampling.cpp`` (HeterPoisson sub-graph sampling).

Same function names and arguments as the C++ kernels, and the same sampler calls in the
same order (one ``CellRng`` per trial, addressed by node or CSR position and step), so the
outputs are bit-identical to the C++ ones for any thread count.  See the C++ file for the
algorithm and the addressing of the random trials.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from . import rng as R

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)

_STREAM_CENTRAL = 16
_STREAM_PERIPHERAL = 17
_STREAM_INFERENCE = 18
_BLOCK = 64  # sub-graphs per parallel task (results never depend on it)


@jit
def _central(st, seed, step, v, q):
    R.cell_init(st, seed, _STREAM_CENTRAL, v, step)
    return R.bernoulli(st, q)


@pjit
def _central_all(cand, seed, step, q, flags):
    m = cand.shape[0]
    nblk = (m + 1023) // 1024
    for blk in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        for i in range(blk * 1024, min(m, (blk + 1) * 1024)):
            flags[i] = 1 if _central(st, seed, step, cand[i], q) else 0


def heter_central(cand, seed, step, q_b, flags):
    if flags.shape[0] != cand.shape[0]:
        raise ValueError("flags: wrong size")
    _central_all(cand, np.uint64(seed), np.uint32(step), float(q_b), flags)
    return int(flags.sum(dtype=np.int64))


@pjit
def _nodes(rowptr, col, deg, centers, cand, allow, use_allow, seed, step, q, M, drop, ub_ptr, counts, n_id, zeroed):
    B = centers.shape[0]
    nblk = (B + _BLOCK - 1) // _BLOCK
    for blk in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        sc = np.empty(11, dtype=np.uint64)
        for b in range(blk * _BLOCK, min(B, (blk + 1) * _BLOCK)):
            v = centers[b]
            out = ub_ptr[b]
            cnt = 1
            n_id[out] = v
            zeroed[out] = 0
            for e in range(rowptr[v], rowptr[v + 1]):
                j = np.int64(col[e])
                if j == v:
                    continue
                if use_allow and allow[j] == 0:
                    continue
                R.cell_init(st, seed, _STREAM_PERIPHERAL, e, step)
                if not R.bernoulli(st, M / np.float64(deg[j])):
                    continue
                cen = cand[j] != 0 and _central(sc, seed, step, j, q)
                if cen and drop:
                    continue
                n_id[out + cnt] = j
                zeroed[out + cnt] = 1 if cen else 0
                cnt += 1
            counts[b] = cnt


def _mask(a, n):
    if a.shape[0] == 0:
        return np.zeros(1, dtype=np.uint8), False
    if a.shape[0] != n:
        raise ValueError("allow_mask: wrong size")
    return a, True


def heter_nodes(rowptr, col, deg, centers, cand_mask, allow_mask, seed, step, q_b, M, drop,
                ub_ptr, counts, n_id, zeroed):
    n = rowptr.shape[0] - 1
    B = centers.shape[0]
    if deg.shape[0] != n or cand_mask.shape[0] != n:
        raise ValueError("deg / cand_mask: wrong size")
    if ub_ptr.shape[0] != B + 1 or counts.shape[0] != B:
        raise ValueError("ub_ptr / counts: wrong size")
    if B:
        if centers.min() < 0 or centers.max() >= n:
            raise IndexError("centers: node id outside [0, n)")
        if np.any(np.diff(ub_ptr) < 1 + (rowptr[centers + 1] - rowptr[centers])):
            raise ValueError("ub_ptr: sub-graph b needs 1 + deg(centers[b]) slots")
    if n_id.shape[0] != ub_ptr[B] or zeroed.shape[0] != ub_ptr[B]:
        raise ValueError("n_id / zeroed: wrong size")
    allow, use = _mask(allow_mask, n)
    _nodes(rowptr, col, deg, centers, cand_mask, allow, use, np.uint64(seed), np.uint32(step), float(q_b),
           float(M), bool(drop), ub_ptr, counts, n_id, zeroed)


@pjit
def _infer(rowptr, col, centers, allow, use_allow, seed, step, n_test, node_ptr, counts, n_id, fill):
    B = centers.shape[0]
    nblk = (B + _BLOCK - 1) // _BLOCK
    bad = 0
    for blk in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        for b in range(blk * _BLOCK, min(B, (blk + 1) * _BLOCK)):
            v = centers[b]
            avail = 0
            for e in range(rowptr[v], rowptr[v + 1]):
                j = np.int64(col[e])
                if j != v and (not use_allow or allow[j] != 0):
                    avail += 1
            k = min(avail, n_test)
            if not fill:
                counts[b] = 1 + k
                continue
            out = node_ptr[b]
            if node_ptr[b + 1] - out != 1 + k:
                bad += 1
                continue
            n_id[out] = v
            if k == avail:
                c = 1
                for e in range(rowptr[v], rowptr[v + 1]):
                    j = np.int64(col[e])
                    if j != v and (not use_allow or allow[j] != 0):
                        n_id[out + c] = j
                        c += 1
                continue
            keys = np.empty(avail, dtype=np.uint64)
            ids = np.empty(avail, dtype=np.int64)
            c = 0
            for e in range(rowptr[v], rowptr[v + 1]):
                j = np.int64(col[e])
                if j == v or (use_allow and allow[j] == 0):
                    continue
                R.cell_init(st, seed, _STREAM_INFERENCE, e, step)
                keys[c] = R.next_u64(st)
                ids[c] = j
                c += 1
            # ids ascend, so a stable sort on the key orders by (key, id) like the C++ code
            order = np.argsort(keys, kind="mergesort")
            sel = np.sort(ids[order[:k]])
            for i in range(k):
                n_id[out + 1 + i] = sel[i]
    return bad


def heter_infer_nodes(rowptr, col, centers, allow_mask, seed, step, n_test, counts_or_ptr, n_id, fill):
    n = rowptr.shape[0] - 1
    if n_test < 0:
        raise ValueError("n_test: expected >= 0")
    if centers.shape[0] and (centers.min() < 0 or centers.max() >= n):
        raise IndexError("centers: node id outside [0, n)")
    allow, use = _mask(allow_mask, n)
    B = centers.shape[0]
    if fill:
        if counts_or_ptr.shape[0] != B + 1 or n_id.shape[0] != counts_or_ptr[B]:
            raise ValueError("node_ptr / n_id: wrong size")
        bad = _infer(rowptr, col, centers, allow, use, np.uint64(seed), np.uint32(step), np.int64(n_test),
                     counts_or_ptr, np.empty(0, np.int64), n_id, True)
        if bad:
            raise RuntimeError("heter_infer_nodes: fill size differs from count (bug)")
    else:
        if counts_or_ptr.shape[0] != B:
            raise ValueError("counts: wrong size")
        _infer(rowptr, col, centers, allow, use, np.uint64(seed), np.uint32(step), np.int64(n_test),
               np.empty(0, np.int64), counts_or_ptr, np.empty(0, np.int64), False)


@jit
def _lower(P, lo, hi, x):
    # first index in the sorted slice P[lo:hi] with P[i] >= x (hi if none)
    a = lo
    b = hi
    while a < b:
        m = (a + b) >> 1
        if P[m] < x:
            a = m + 1
        else:
            b = m
    return a


@jit
def _has(R_, lo, hi, x):
    # is x in the sorted slice R_[lo:hi]?
    a = _lower(R_, lo, hi, x)
    return a < hi and np.int64(R_[a]) == x


@pjit
def _edges(rowptr, col, n_id, node_ptr, induced, edge_ptr, counts, src, dst, fill):
    B = node_ptr.shape[0] - 1
    nblk = (B + _BLOCK - 1) // _BLOCK
    bad = 0
    for blk in nb.prange(nblk):
        for b in range(blk * _BLOCK, min(B, (blk + 1) * _BLOCK)):
            p0 = node_ptr[b]
            L = node_ptr[b + 1] - p0
            v = n_id[p0]
            P0 = p0 + 1  # peripherals n_id[P0 : P0 + s], ascending
            s = L - 1
            cnt = 0
            base = edge_ptr[b] if fill else 0
            for lt in range(L):
                gt = n_id[p0 + lt]
                r0 = rowptr[gt]
                r1 = rowptr[gt + 1]
                d = r1 - r0
                if lt == 0:
                    if s == 0 or d == 0:
                        continue
                else:
                    if gt != v and _has(col, r0, r1, v):
                        if fill:
                            src[base + cnt] = p0
                            dst[base + cnt] = p0 + lt
                        cnt += 1
                    if not induced or s == 0 or d == 0:
                        continue
                if s * 8 < d:
                    for i in range(s):
                        a = n_id[P0 + i]
                        if a != gt and _has(col, r0, r1, a):
                            if fill:
                                src[base + cnt] = p0 + 1 + i
                                dst[base + cnt] = p0 + lt
                            cnt += 1
                elif d * 8 < s:
                    for r in range(r0, r1):
                        x = np.int64(col[r])
                        if x == gt or x == v:
                            continue
                        q = _lower(n_id, P0, P0 + s, x)
                        if q < P0 + s and n_id[q] == x:
                            if fill:
                                src[base + cnt] = p0 + 1 + (q - P0)
                                dst[base + cnt] = p0 + lt
                            cnt += 1
                else:
                    i = 0
                    r = r0
                    while i < s and r < r1:
                        a = n_id[P0 + i]
                        x = np.int64(col[r])
                        if a < x:
                            i += 1
                        elif x < a:
                            r += 1
                        else:
                            if a != gt:
                                if fill:
                                    src[base + cnt] = p0 + 1 + i
                                    dst[base + cnt] = p0 + lt
                                cnt += 1
                            i += 1
                            r += 1
            if fill:
                if cnt != edge_ptr[b + 1] - edge_ptr[b]:
                    bad += 1
            else:
                counts[b] = cnt
    return bad


def heter_edges(rowptr, col, n_id, node_ptr, induced, counts_or_ptr, src, dst, fill):
    n = rowptr.shape[0] - 1
    B = node_ptr.shape[0] - 1
    if B < 0:
        raise ValueError("node_ptr: expected at least one element")
    if n_id.shape[0] != node_ptr[B]:
        raise ValueError("n_id: wrong size")
    if B and np.any(np.diff(node_ptr) <= 0):
        raise ValueError("node_ptr: every sub-graph needs >= 1 node")
    if n_id.shape[0] and (n_id.min() < 0 or n_id.max() >= n):
        raise IndexError("n_id: node id outside [0, n)")
    if fill:
        if counts_or_ptr.shape[0] != B + 1 or src.shape[0] != counts_or_ptr[B] or dst.shape[0] != counts_or_ptr[B]:
            raise ValueError("edge_ptr / src / dst: wrong size")
        bad = _edges(rowptr, col, n_id, node_ptr, bool(induced), counts_or_ptr, np.empty(0, np.int64),
                     src, dst, True)
        if bad:
            raise RuntimeError("heter_edges: fill regenerated a different size than count (bug)")
    else:
        if counts_or_ptr.shape[0] != B:
            raise ValueError("counts: wrong size")
        _edges(rowptr, col, n_id, node_ptr, bool(induced), np.empty(0, np.int64), counts_or_ptr,
               np.empty(0, np.int64), np.empty(0, np.int64), False)
