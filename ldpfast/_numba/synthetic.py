"""Numba twin of ``csrc/cpu/synthetic.cpp``: same functions, same RNG words in the same order.

See the C++ file for the algorithms (Chung-Lu expected-degree model with planted classes,
Miller-Hagberg skip sampling, exact-count trim, symmetric CSR, class-correlated features).
Outputs are bit-identical to the C++ kernels for any thread count.  Scatter phases that the
C++ kernel runs with atomics run serially here (Numba has no CPU atomics).
"""
from __future__ import annotations

import numba as nb
import numpy as np

from . import rng as R

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)

_PROTO_ROW = np.uint64(1 << 47)
_EDGES = 13
_CLASS = 11
_DEGREE = 12
_FEATURES = 14
_TRIM = 15
_BLOCK = 1024  # rows per parallel task (results never depend on it)


def _check_plan(W, cls, seg, fmat):
    n = W.shape[0]
    C = seg.shape[0] - 1
    if C < 1:
        raise ValueError("seg: expected num_classes + 1 >= 2 entries")
    if cls.shape[0] != n or fmat.shape[0] != C * C:
        raise ValueError("cls / fmat: wrong size")
    if seg[0] != 0 or seg[C] != n or np.any(np.diff(seg) < 0):
        raise ValueError("seg: must run from 0 to n, non-decreasing")
    pos = np.arange(n)
    c = cls.astype(np.int64)
    if n and (c.min() < 0 or c.max() >= C or np.any(pos < seg[c]) or np.any(pos >= seg[c + 1])):
        raise ValueError("cls: inconsistent with seg")
    if n and not (np.all(W > 0.0) and np.all(W < 1e300)):
        raise ValueError("W: weights must be finite and > 0")
    same = cls[1:] == cls[:-1]
    if np.any(W[1:][same] > W[:-1][same]):
        raise ValueError("W: must be non-increasing inside every class segment")
    return n, C


@jit
def _min1(x):
    return min(1.0, x)


@jit
def _segment(s, a, k, seg, fmat, C):
    """(f, lo, hi): row s's (class a) candidates [lo, hi) in class segment k and their factor
    f; lo >= hi when there are none (as synth::segment in csrc/common/synthetic.h)."""
    f = fmat[a * C + k]
    lo = s + 1 if k == a else seg[k]
    hi = seg[k + 1]
    if not f > 0.0:
        hi = lo
    return f, lo, hi


_REFRESH = 0.9375  # see walk_row in csrc/common/synthetic.h
_BLOCK_SHIFT = 6


def _wtables(W):
    """Max / min of W over blocks of 2**_BLOCK_SHIFT positions (as make_plan in C++)."""
    n = W.shape[0]
    starts = np.arange(0, n, 1 << _BLOCK_SHIFT)
    if n == 0:
        return np.zeros(0), np.zeros(0)
    return np.maximum.reduceat(W, starts), np.minimum.reduceat(W, starts)


@jit
def _walk_row(st, seed, attempt, s, W, wmax, wmin, cls, seg, fmat, C, scale, out, w0, end):
    """Miller-Hagberg walk of row s; writes accepted t to out[w0:end] if out is non-empty.

    Returns the number of accepted neighbours.
    """
    a = np.int64(cls[s])
    m = np.int64(0)
    write = out.shape[0] > 0
    for k in range(a, C):
        f, lo, hi = _segment(s, a, k, seg, fmat, C)
        if lo >= hi:
            continue
        R.cell_init(st, seed, _EDGES, s, attempt * C + k)
        cu = scale * W[s] * f
        t = lo
        pb = _min1(cu * W[t])
        lg = R.det_log1p(-pb) if pb < 1.0 else 0.0
        while True:
            if not pb > 0.0:
                break
            if pb < 1.0:
                x = R.det_log(R.uniform(st)) / lg
                if not x < np.float64(hi - t):
                    break
                t += np.int64(x)
            blk = t >> _BLOCK_SHIFT
            qlo = _min1(cu * wmin[blk])
            qhi = _min1(cu * wmax[blk])
            acc = qlo >= pb
            if not acc:
                u = R.uniform(st) * pb
                acc = u < qlo or (u < qhi and u < _min1(cu * W[t]))
            if acc:
                if write and w0 + m < end:
                    out[w0 + m] = np.int32(t)
                m += 1
            t += 1
            if t >= hi:
                break
            if qhi < pb * _REFRESH:
                pb = qhi
                lg = R.det_log1p(-pb)
    return m


@pjit
def _nodes(seed, C, cls, key):
    n = cls.shape[0]
    nb_ = (n + C - 1) // C
    nblk = (nb_ + _BLOCK - 1) // _BLOCK
    for B in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        perm = np.empty(C, dtype=np.int32)
        for blk in range(B * _BLOCK, min(nb_, (B + 1) * _BLOCK)):
            for i in range(C):
                perm[i] = i
            R.cell_init(st, seed, _CLASS, blk, 0)
            for i in range(C - 1, 0, -1):
                j = np.int64(R.randint(st, np.uint64(i + 1)))
                tmp = perm[i]
                perm[i] = perm[j]
                perm[j] = tmp
            r0 = blk * C
            m = min(C, n - r0)
            for i in range(m):
                cls[r0 + i] = perm[i]
    nk = (n + _BLOCK - 1) // _BLOCK
    for B in nb.prange(nk):
        st = np.empty(11, dtype=np.uint64)
        for r in range(B * _BLOCK, min(n, (B + 1) * _BLOCK)):
            R.cell_init(st, seed, _DEGREE, r, 0)
            key[r] = R.next_u64(st)


def synth_nodes(seed, C, cls, key):
    if C < 1:
        raise ValueError("num_classes: must be >= 1")
    if key.shape[0] != cls.shape[0]:
        raise ValueError("key: wrong size")
    _nodes(np.uint64(seed), np.int64(C), cls, key)


@pjit
def _expected(W, cls, seg, fmat, scale, P, er, lr):
    n = W.shape[0]
    C = seg.shape[0] - 1
    nblk = (n + _BLOCK - 1) // _BLOCK
    for B in nb.prange(nblk):
        for s in range(B * _BLOCK, min(n, (B + 1) * _BLOCK)):
            a = np.int64(cls[s])
            trunc = np.int64(0)
            lin = 0.0
            for k in range(a, C):
                f, lo, hi = _segment(s, a, k, seg, fmat, C)
                if lo >= hi:
                    continue
                cu = scale * W[s] * f
                l, h = lo, hi
                while l < h:
                    mid = l + (h - l) // 2
                    if cu * W[mid] >= 1.0:
                        l = mid + 1
                    else:
                        h = mid
                trunc += l - lo
                lin += cu * (P[hi] - P[l])
            lr[s] = lin
            er[s] = np.float64(trunc) + lin
    E = 0.0
    L = 0.0
    for s in range(n):
        E += er[s]
        L += lr[s]
    return E, L


def synth_expected(W, cls, seg, fmat, scale, prefix, erow, lrow):
    n, _ = _check_plan(W, cls, seg, fmat)
    if prefix.shape[0] != n + 1 or erow.shape[0] != n or lrow.shape[0] != n:
        raise ValueError("prefix / erow / lrow: wrong size")
    return _expected(W, cls, seg, fmat, float(scale), prefix, erow, lrow)


@pjit
def _edges(seed, attempt, W, wmax, wmin, cls, seg, fmat, scale, rowptr, cnt, col):
    n = W.shape[0]
    C = seg.shape[0] - 1
    fill = col.shape[0] > 0 or cnt.shape[0] == 0
    nblk = (n + _BLOCK - 1) // _BLOCK
    bad = np.zeros(nblk, dtype=np.bool_)
    for B in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        for s in range(B * _BLOCK, min(n, (B + 1) * _BLOCK)):
            if fill:
                m = _walk_row(st, seed, attempt, s, W, wmax, wmin, cls, seg, fmat, C, scale, col,
                              rowptr[s], rowptr[s + 1])
                if m != rowptr[s + 1] - rowptr[s]:
                    bad[B] = True
            else:
                m = _walk_row(st, seed, attempt, s, W, wmax, wmin, cls, seg, fmat, C, scale, col, 0, 0)
                cnt[s] = m
    return not bad.any()


def synth_edge_count(seed, attempt, W, cls, seg, fmat, scale, work, cnt):
    n, _ = _check_plan(W, cls, seg, fmat)
    if work.shape[0] != n + 1 or cnt.shape[0] != n:
        raise ValueError("work / cnt: wrong size")
    empty = np.empty(0, dtype=np.int32)
    rp = np.zeros(n + 1, dtype=np.int64)
    _edges(np.uint64(seed), np.int64(attempt), W, *_wtables(W), cls, seg, fmat, float(scale), rp,
           cnt, empty)


def synth_edge_fill(seed, attempt, W, cls, seg, fmat, scale, work, rowptr, col):
    n, _ = _check_plan(W, cls, seg, fmat)
    if work.shape[0] != n + 1 or rowptr.shape[0] != n + 1 or col.shape[0] != rowptr[n]:
        raise ValueError("work / rowptr / col: wrong size")
    cnt = np.empty(0, dtype=np.int64)
    if col.shape[0] == 0:
        return
    ok = _edges(np.uint64(seed), np.int64(attempt), W, *_wtables(W), cls, seg, fmat, float(scale),
                rowptr, cnt, col)
    if not ok:
        raise RuntimeError("synth_edge_fill: row count differs from pass 1")


def synth_edge_sample(seed, attempt, W, cls, seg, fmat, scale, work, expect, rowptr, col):
    """Same output as the C++ single pass (here: count, then fill); -1 if col is too small."""
    n, _ = _check_plan(W, cls, seg, fmat)
    if work.shape[0] != n + 1 or expect.shape[0] != n + 1 or rowptr.shape[0] != n + 1:
        raise ValueError("work / expect / rowptr: wrong size")
    seed, attempt, scale = np.uint64(seed), np.int64(attempt), float(scale)
    empty = np.empty(0, dtype=np.int32)
    wmax, wmin = _wtables(W)
    _edges(seed, attempt, W, wmax, wmin, cls, seg, fmat, scale, rowptr, rowptr[1:], empty)
    rowptr[0] = 0
    np.cumsum(rowptr, out=rowptr)
    total = int(rowptr[n])
    if total > col.shape[0]:
        return -1
    if total > 0:
        nocnt = np.empty(0, dtype=np.int64)
        if not _edges(seed, attempt, W, wmax, wmin, cls, seg, fmat, scale, rowptr, nocnt, col):
            raise RuntimeError("synth_edge_sample: row count differs between passes")
    return total


@pjit
def _trim_hist(seed, rp, low, hi_bin, nch):
    n = rp.shape[0] - 1
    hist = np.zeros((nch, 65536), dtype=np.int64)
    per = (n + nch - 1) // nch
    for c in nb.prange(nch):
        st = np.empty(11, dtype=np.uint64)
        for s in range(c * per, min(n, (c + 1) * per)):
            R.cell_init(st, seed, _TRIM, s, 0)
            for _j in range(rp[s], rp[s + 1]):
                p = R.next_u32(st)
                if not low:
                    hist[c, np.int64(p >> np.uint64(16))] += 1
                elif (p >> np.uint64(16)) == hi_bin:
                    hist[c, np.int64(p & np.uint64(0xFFFF))] += 1
    tot = np.zeros(65536, dtype=np.int64)
    for c in range(nch):
        for i in range(65536):
            tot[i] += hist[c, i]
    return tot


@jit
def _boundary(tot, below, drop):
    for i in range(65536):
        if below + tot[i] > drop:
            return i, below
        below += tot[i]
    return -1, below


@jit
def _find_ties(seed, rp, T, r):
    n = rp.shape[0] - 1
    out = np.empty(r, dtype=np.int64)
    m = 0
    st = np.empty(11, dtype=np.uint64)
    for s in range(n):
        if m >= r:
            break
        R.cell_init(st, seed, _TRIM, s, 0)
        for j in range(rp[s], rp[s + 1]):
            if m >= r:
                break
            if R.next_u32(st) == T:
                out[m] = j
                m += 1
    return out[:m]


@pjit
def _trim_compact(seed, rp, col, T, dropped, cnt):
    n = rp.shape[0] - 1
    nblk = (n + _BLOCK - 1) // _BLOCK
    for B in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        for s in range(B * _BLOCK, min(n, (B + 1) * _BLOCK)):
            R.cell_init(st, seed, _TRIM, s, 0)
            w = rp[s]
            for j in range(rp[s], rp[s + 1]):
                p = R.next_u32(st)
                keep = p > T
                if p == T:
                    keep = True
                    for i in range(dropped.shape[0]):
                        if dropped[i] == j:
                            keep = False
                if keep:
                    col[w] = col[j]
                    w += 1
            cnt[s] = w - rp[s]


def synth_trim(seed, rowptr, col, drop, cnt):
    n = rowptr.shape[0] - 1
    E = int(rowptr[n])
    if col.shape[0] != E or cnt.shape[0] != n:
        raise ValueError("col / cnt: wrong size")
    drop = int(drop)
    if drop < 0 or drop > E:
        raise ValueError("drop: expected 0 <= drop <= number of edges")
    if drop == 0:
        cnt[:] = np.diff(rowptr)
        return
    seed = np.uint64(seed)
    nch = max(1, min(n, 4 * nb.get_num_threads()))
    tot = _trim_hist(seed, rowptr, False, np.uint64(0), nch)
    H, below_hi = _boundary(tot, 0, drop)
    tot = _trim_hist(seed, rowptr, True, np.uint64(H), nch)
    Lb, below = _boundary(tot, below_hi, drop)
    if H < 0 or Lb < 0:
        raise RuntimeError("synth_trim: histogram does not cover the edges")
    T = np.uint64((H << 16) | Lb)
    r = drop - below
    dropped = _find_ties(seed, rowptr, T, r) if r > 0 else np.empty(0, dtype=np.int64)
    _trim_compact(seed, rowptr, col, T, dropped, cnt)


@jit
def _sym_scatter(up, uc, ucl, ids, rp, cl):
    n = uc.shape[0]
    rp[:] = 0
    for s in range(n):
        rp[ids[s] + 1] += uc[s]
        for j in range(up[s], up[s] + uc[s]):
            rp[ids[ucl[j]] + 1] += 1
    for i in range(n):
        rp[i + 1] += rp[i]
    fill = rp[:n].copy()
    for s in range(n):
        a = ids[s]
        for j in range(up[s], up[s] + uc[s]):
            b = ids[ucl[j]]
            cl[fill[a]] = b
            fill[a] += 1
            cl[fill[b]] = a
            fill[b] += 1


@pjit
def _sort_rows(rp, cl):
    n = rp.shape[0] - 1
    nblk = (n + _BLOCK - 1) // _BLOCK
    for B in nb.prange(nblk):
        for i in range(B * _BLOCK, min(n, (B + 1) * _BLOCK)):
            cl[rp[i]:rp[i + 1]].sort()


def synth_symmetrize(uptr, ucnt, ucol, ids, rowptr, col):
    n = ucnt.shape[0]
    if uptr.shape[0] != n + 1 or ids.shape[0] != n or rowptr.shape[0] != n + 1:
        raise ValueError("uptr / ids / rowptr: wrong size")
    if np.any(ucnt < 0) or np.any(ucnt > np.diff(uptr)):
        raise ValueError("ucnt: outside the rows of uptr")
    if n and (ids.min() < 0 or ids.max() >= n):
        raise ValueError("ids: outside [0, n)")
    if col.shape[0] != 2 * int(ucnt.sum()):
        raise ValueError("col: wrong size")
    _sym_scatter(uptr, ucnt, ucol, ids, rowptr, col)
    _sort_rows(rowptr, col)


@pjit
def _features(seed, y, C, signal, kind, x):
    n, d = x.shape
    q = np.empty((C, d), dtype=np.float64)
    st = np.empty(11, dtype=np.uint64)
    for c in range(C):
        for j in range(d):
            R.cell_init(st, seed, _FEATURES, _PROTO_ROW + np.uint64(c), j)
            q[c, j] = 0.5 + signal * (R.uniform(st) - 0.5)
    nblk = (n + 255) // 256
    for B in nb.prange(nblk):
        st2 = np.empty(11, dtype=np.uint64)
        for v in range(B * 256, min(n, (B + 1) * 256)):
            c = y[v]
            for j in range(d):
                R.cell_init(st2, seed, _FEATURES, v, j)
                u = R.uniform(st2)
                if kind == 0:
                    x[v, j] = 1 if u < q[c, j] else 0
                else:
                    t = q[c, j] + u - 0.5
                    t = 0.0 if t < 0.0 else (min(t, 1.0))
                    x[v, j] = t


def synth_features(seed, y, C, signal, kind, x):
    if x.ndim != 2:
        raise ValueError("x: expected a 2-D array")
    if y.shape[0] != x.shape[0]:
        raise ValueError("y: wrong size")
    if y.shape[0] and (y.min() < 0 or y.max() >= C):
        raise ValueError("y: labels outside [0, num_classes)")
    if kind not in (0, 1):
        raise ValueError("kind: 0 (binary) or 1 (continuous)")
    if x.dtype == np.uint8 and kind != 0:
        raise ValueError("x: uint8 output is for binary features only")
    _features(np.uint64(seed), y, np.int64(C), float(signal), int(kind), x)
