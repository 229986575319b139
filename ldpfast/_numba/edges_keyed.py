"""Numba twin of ``csrc/common/edges_keyed.h`` / ``csrc/cpu/edges_keyed.cpp``: user-keyed
Warner RR and DPRR (every bit addressed by the row's coin seed and the column user's key) and
DPRR's per-user degree noise.  Same cells, same words, same order: outputs equal the C++ ones."""
from __future__ import annotations

import numba as nb
import numpy as np

from . import rng as R

L_TOP = 48
BAND_COL = 0x10000
RR_FALSE_COL = 1
STREAM_DPRR_DEGREE = 6

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)


@jit
def _level_of(q):
    L = 0
    b = 0.5
    while L < L_TOP and q <= b:
        L += 1
        b *= 0.5
    return L


@jit
def _level_rate(L, pm):
    r = pm
    for _ in range(L):
        r *= 0.5
    if L == L_TOP:
        return r
    r1 = r * 0.5
    return (r - r1) / (1.0 - r1)


@jit
def _skip_field(st, p, S, hits, nh, level, lv):
    """Append the hits of a skip field at rate p over [0, S) to hits[nh:] (levels to lv);
    returns the new count (the arrays grow by doubling)."""
    if not p > 0.0 or S <= 0:
        return hits, lv, nh
    kind, B, lam, stop = R.geom_params(p)
    k = np.int64(-1)
    while True:
        gap = R.geom_draw(st, kind, B, lam, stop)
        if gap >= S - 1 - k:
            break
        k += gap + 1
        if nh == hits.shape[0]:
            h2 = np.empty(2 * nh + 16, np.int64)
            l2 = np.empty(2 * nh + 16, np.int64)
            h2[:nh] = hits[:nh]
            l2[:nh] = lv[:nh]
            hits, lv = h2, l2
        hits[nh] = k
        lv[nh] = level
        nh += 1
    return hits, lv, nh


@jit
def _push(out, cnt, j):
    """out[cnt] = j, growing out by doubling; returns (out, cnt + 1)."""
    if cnt == out.shape[0]:
        o2 = np.empty(2 * cnt + 16, np.int64)
        o2[:cnt] = out[:cnt]
        out = o2
    out[cnt] = j
    return out, cnt + 1


@jit
def _contains(col, b, d, v):
    lo, hi = 0, d
    while lo < hi:
        mid = (lo + hi) >> 1
        if np.int64(col[b + mid]) < v:
            lo = mid + 1
        else:
            hi = mid
    return lo < d and np.int64(col[b + lo]) == v


@jit
def _row(i, rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, pt, pf, pm, pub, has_pub, out, row0):
    """Row i's sorted noisy list into out; returns its length (out grows as needed: returned too)."""
    b, e = rowptr[i], rowptr[i + 1]
    d = e - b
    cnt = 0
    if has_pub and pub[i] != 0:
        if out.shape[0] < d:
            out = np.empty(d, np.int64)
        for t in range(d):
            out[t] = np.int64(col[b + t])
        return out, d
    s = seeds[i]
    p_t = pt[i]
    st = np.empty(11, np.uint64)
    for t in range(d):
        j = np.int64(col[b + t])
        keep = True
        if not p_t >= 1.0:
            keep = False
            if p_t > 0.0:
                R.cell_init(st, s, st_t, np.uint64(keys[j]), 0)
                keep = R.bernoulli_words(st, p_t)
        if keep:
            out, cnt = _push(out, cnt, j)
    S = row_of_key.shape[0]
    hits = np.empty(16, np.int64)
    lv = np.empty(16, np.int64)
    nh = 0
    if mode == 0:
        R.cell_init(st, s, st_f, 0, RR_FALSE_COL)
        hits, lv, nh = _skip_field(st, pf[i], S, hits, nh, 0, lv)
    else:
        q = pf[i]
        if q > 0.0:
            Lt = _level_of(q)
            for L in range(L_TOP, Lt - 1, -1):
                R.cell_init(st, s, st_f, 0, L)
                hits, lv, nh = _skip_field(st, _level_rate(L, pm), S, hits, nh, L, lv)
            # by position, the top level first (the C++ sort's order)
            order = np.argsort(hits[:nh] * (L_TOP + 1) + (L_TOP - lv[:nh]), kind="mergesort")
            hits = hits[:nh][order]
            lv = lv[:nh][order]
    for h in range(nh):
        k = hits[h]
        if h > 0 and k == hits[h - 1]:
            continue
        j = np.int64(row_of_key[k])
        if j < 0 or j == row0 + i or _contains(col, b, d, j):
            continue
        keep = True
        if mode == 1:
            q = pf[i]
            Lt = _level_of(q)
            if lv[h] <= Lt:
                scale = 1.0
                for _ in range(Lt + 1 if Lt < L_TOP else L_TOP):
                    scale *= 2.0
                prob = q * scale - 1.0 if Lt < L_TOP else q * scale
                keep = False
                if prob > 0.0:
                    R.cell_init(st, s, st_f, np.uint64(k), BAND_COL)
                    keep = R.bernoulli_words(st, prob)
        if keep:
            out, cnt = _push(out, cnt, j)
    out[:cnt].sort()
    return out, cnt


@pjit
def _keyed(rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, pt, pf, pm, pub, has_pub, orp, ocol, fill, row0):
    n = rowptr.shape[0] - 1
    nblk = (n + 255) // 256
    for blk in nb.prange(nblk):
        buf = np.empty(64, np.int64)
        for i in range(blk * 256, min(n, (blk + 1) * 256)):
            buf, cnt = _row(i, rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, pt, pf, pm, pub, has_pub, buf,
                            row0)
            if fill:
                o = orp[i]
                for t in range(cnt):
                    ocol[o + t] = buf[t]
            else:
                orp[i + 1] = cnt


def keyed_rr(rowptr, col, keys, row_of_key, seeds, st_t, st_f, mode, p_true, p_false, pm, pub, out_rowptr,
             out_col, row0=0) -> None:
    """As the C++ ``keyed_rr`` (count pass with ``out_col=None``, else fill; local rows
    ``[row0, row0 + m)`` of the graph)."""
    n = rowptr.shape[0] - 1
    if mode not in (0, 1):
        raise ValueError("mode: expected 0 (RR) or 1 (DPRR)")
    if keys.shape[0] < row0 + n:
        raise ValueError("keys: expected one key per user of the graph")
    for a, name, size in ((seeds, "seeds", n), (p_true, "p_true", n), (p_false, "p_false", n),
                          (out_rowptr, "out_rowptr", n + 1)):
        if a.shape[0] != size:
            raise ValueError(f"{name}: expected {size} elements")
    fill = out_col is not None
    if fill and out_col.shape[0] != out_rowptr[n]:
        raise ValueError(f"out_col: expected {int(out_rowptr[n])} elements")
    _keyed(rowptr, col, keys, np.ascontiguousarray(row_of_key, np.int64), seeds, np.uint64(st_t), np.uint64(st_f),
           np.int64(mode), p_true, p_false, float(pm), np.zeros(1, np.uint8) if pub is None else pub,
           pub is not None, out_rowptr, np.zeros(1, np.int64) if out_col is None else out_col, fill, np.int64(row0))


@pjit
def _dlap(seeds, t, s, out):
    for blk in nb.prange((seeds.shape[0] + 1023) // 1024):
        st = np.empty(11, np.uint64)
        for i in range(blk * 1024, min(seeds.shape[0], (blk + 1) * 1024)):
            R.cell_init(st, seeds[i], STREAM_DPRR_DEGREE, 0, 0)
            out[i] = R.discrete_laplace(st, t, s)


def keyed_dlap(seeds, t, s, out) -> None:
    """As the C++ ``keyed_dlap``: DPRR's degree noise per user from per-user seeds."""
    if out.shape[0] != seeds.shape[0]:
        raise ValueError("out: expected one entry per seed")
    if t < 1 or s < 1:
        raise ValueError("t, s: expected integers >= 1")
    _dlap(seeds, np.uint64(t), np.uint64(s), out)
