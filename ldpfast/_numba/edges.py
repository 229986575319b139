"""Numba twin of ``csrc/cpu/edges.cpp``: same functions, same RNG words in the same order.

See the C++ file for the algorithms (sparse Warner RR + edge sampling by skip sampling
over the non-neighbours, LocalLap candidate sampling, CSR transpose / combine, O(|E|)
graph checks).  Outputs are bit-identical to the C++ kernels for any thread count.
"""
from __future__ import annotations

import numba as nb
import numpy as np
from numba import types
from numba.extending import overload

from . import rng as R

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)

_STREAM_LOCALLAP = 10
_LL_ROW = np.int64(1 << 40)
_I64_MIN = np.iinfo(np.int64).min
_I64_MAX = np.iinfo(np.int64).max
_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_BLOCK = 256  # rows per parallel task (results never depend on it)


@jit
def _geom_exact(st, t, s):
    t = np.uint64(t)
    s = np.uint64(s)
    while True:
        u = R.randint(st, t)
        if not R.bernoulli_exp_neg(st, u, t):
            continue
        v = _ZERO
        while R.bernoulli_exp_neg(st, _ONE, _ONE):
            v += _ONE
        return np.int64((u + t * v) // s)


@jit
def _bernoulli_exp_neg_any(st, num, den):
    """Bernoulli(exp(-num / den)) exactly for any num (twin of edges.h bernoulli_exp_neg_any)."""
    num = np.uint64(num)
    den = np.uint64(den)
    k = num // den
    while k > _ZERO:
        if not R.bernoulli_exp_neg(st, _ONE, _ONE):
            return False
        k -= _ONE
    return R.bernoulli_exp_neg(st, num % den, den)


@jit
def _dlap_band(st, t, s, lo, hi):
    t = np.uint64(t)
    s = np.uint64(s)
    if lo >= 1 and hi != _I64_MAX and hi > lo and np.uint64(hi - lo) <= t // s:
        w = np.uint64(hi - lo)
        while True:
            x = R.randint(st, w)
            if R.bernoulli_exp_neg(st, x * s, t):
                return lo + np.int64(x)
    while True:
        if lo >= 1:
            y = lo + _geom_exact(st, t, s)
        else:
            y = R.discrete_laplace(st, t, s)
            if lo != _I64_MIN and y < lo:
                continue
        if hi == _I64_MAX or y < hi:
            return y


# --- sparse RR + sampling -------------------------------------------------------------------
@jit
def _next_pick(st, kind, B, lam, stop, m, k):
    """Skip sampling: the next picked position after ``k`` among ``m`` (one geometric gap from
    ``st``), or ``m`` when none is left (twin of the gap loops of csrc/common/edges.h)."""
    g = R.geom_draw(st, kind, B, lam, stop)
    return m if g >= m - 1 - k else k + g + 1


@jit
def _excl_at(col, b, d, x, xpos, t):
    if t < xpos:
        return np.int64(col[b + t])
    if t == xpos:
        return x
    return np.int64(col[b + t - 1])


@jit
def _keep_true_below(col, b, e, d, v, pt, stt, ocol, w0, cnt):
    """Decide row entries ``col[b + e]`` below ``v`` (the true cell's exact Bernoulli(pt), one
    word each as edges.h keep_true, in neighbour order) and write the kept ones at
    ``ocol[w0 + cnt]``; returns ``(e, cnt)`` after them."""
    while e < d and col[b + e] < v:
        if pt >= 1.0 or (pt > 0.0 and R.bernoulli_words(stt, pt)):
            ocol[w0 + cnt] = col[b + e]
            cnt += 1
        e += 1
    return e, cnt


@jit
def _rr_row(i, col, b, d, n, seed, st_t, c_t, st_f, c_f, pt, pf, stt, stf, ocol, w0, fill):
    cnt = np.int64(0)
    e = np.int64(0)
    if not fill:
        if pt >= 1.0:
            cnt += d
        elif pt > 0.0:
            R.cell_init(stt, seed, st_t, i, c_t)
            for _ in range(d):
                if R.bernoulli_words(stt, pt):
                    cnt += 1
    else:
        R.cell_init(stt, seed, st_t, i, c_t)
    m = n - 1 - d
    if pf > 0.0 and m > 0:
        R.cell_init(stf, seed, st_f, i, c_f)
        kind, B, lam, stop = R.geom_params(pf)  # once per row, as the C++ kernel
        xpos = np.int64(np.searchsorted(col[b:b + d], i))
        L = d + 1
        ptr = np.int64(0)
        k = _next_pick(stf, kind, B, lam, stop, m, np.int64(-1))
        while k < m:
            if fill:
                while ptr < L and _excl_at(col, b, d, i, xpos, ptr) <= k + ptr:
                    ptr += 1
                v = k + ptr
                e, cnt = _keep_true_below(col, b, e, d, v, pt, stt, ocol, w0, cnt)
                ocol[w0 + cnt] = v
            cnt += 1
            k = _next_pick(stf, kind, B, lam, stop, m, k)
    if fill:
        e, cnt = _keep_true_below(col, b, e, d, _I64_MAX, pt, stt, ocol, w0, cnt)
    return cnt


@jit
def _rr_row_task(i, args, stt, stf, ocol, _ov, w0, fill):
    """Row ``i`` of ``_rr_row`` for :func:`_count_fill` (public rows copied unchanged)."""
    rowptr, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub = args
    b = rowptr[i]
    d = rowptr[i + 1] - b
    if pub.shape[0] > 0 and pub[i] != 0:
        if fill:
            for k in range(d):
                ocol[w0 + k] = col[b + k]
        return d
    return _rr_row(i, col, b, d, rowptr.shape[0] - 1, seed, st_t, c_t, st_f, c_f, pt[i], pf[i], stt, stf, ocol,
                   w0, fill)


def _row(i, args, sa, sb, oc, ov, w0, fill):
    """Row ``i`` of the sampler that ``args`` belongs to, chosen when Numba types the call:
    RR rows (:func:`_rr_row_task`, whose ``args[7]`` is the p_true array) or LocalLap zero
    candidates (:func:`_ll_zero_task`, whose ``args[7]`` is the split flag).  A function
    passed as an argument instead would make every caller uncacheable or corrupt Numba's cache
    index ("underlying object has vanished", numba issues 2956 and 9348)."""
    raise NotImplementedError("only callable from jitted code")


@overload(_row)
def _row_typed(i, args, sa, sb, oc, ov, w0, fill):
    if isinstance(args.types[7], types.Array):
        return lambda i, args, sa, sb, oc, ov, w0, fill: _rr_row_task(i, args, sa, sb, oc, ov, w0, fill)
    return lambda i, args, sa, sb, oc, ov, w0, fill: _ll_zero_task(i, args, sa, sb, oc, ov, w0, fill)


@pjit
def _count_fill(n, args, orp, oc, ov, fill):
    """The count / fill passes of the row sampler of ``args`` (:func:`_row`), which returns
    row ``i``'s size and, with ``fill``, writes it at ``oc[w0:]`` (and ``ov[w0:]``).  Count:
    ``orp[i + 1]`` = size (``orp[0] = 0``, not summed).  Fill: rows written at the summed
    ``orp``; returns how many blocks regenerated a different size (a bug).  One body for every
    two-pass sampler (RR rows, LocalLap zero candidates)."""
    nblk = (n + _BLOCK - 1) // _BLOCK
    bad = np.zeros(nblk, dtype=np.int64)
    if not fill:
        orp[0] = 0
    for blk in nb.prange(nblk):
        sa = np.empty(11, dtype=np.uint64)
        sb = np.empty(11, dtype=np.uint64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            got = _row(np.int64(i), args, sa, sb, oc, ov, orp[i] if fill else np.int64(0), fill)
            if not fill:
                orp[i + 1] = got
            elif got != orp[i + 1] - orp[i]:
                bad[blk] = 1
    return bad.sum()


def _rr(rowptr, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub, orp, ocol, fill):
    args = (rowptr, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub)
    return _count_fill(rowptr.shape[0] - 1, args, orp, ocol, np.empty(0, dtype=np.int64), fill)


@jit
def _dprr_probs(rowptr, noise, g, p, pm, d_star, q, p_true, p_false):
    n = rowptr.shape[0] - 1
    for i in range(n):
        ds = np.float64(rowptr[i + 1] - rowptr[i]) + g * np.float64(noise[i])
        pos = ds > 0.0
        x = ds if pos else 1.0
        qi = x / (x * (p - pm) + np.float64(n - 1) * pm)
        qi = qi if pos else 0.0
        qi = max(0.0, min(qi, 1.0))  # np.clip (qi is never NaN here)
        d_star[i] = ds
        q[i] = qi
        p_true[i] = p * qi
        p_false[i] = pm * qi


def dprr_probs(rowptr, noise, g, p, pm, d_star, q, p_true, p_false):
    """DPRR lines 2-7 per user (twin of edges::dprr_probs in csrc/common/edges.h)."""
    n = rowptr.shape[0] - 1
    for a, nm in ((noise, "noise"), (d_star, "d_star"), (q, "q"), (p_true, "p_true"), (p_false, "p_false")):
        if a.shape[0] != n:
            raise ValueError(f"{nm}: expected {n} elements")
    _dprr_probs(rowptr, noise, np.float64(g), np.float64(p), np.float64(pm), d_star, q, p_true, p_false)


def _pub(pub, n):
    if pub.size == 0:
        return np.zeros(0, dtype=np.uint8)
    if pub.shape[0] != n or pub.dtype != np.uint8:
        raise ValueError("public: expected uint8 of length n (or empty)")
    return pub


def edges_rr_count(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub, out_rowptr, by_degree):
    n = rowptr.shape[0] - 1
    if p_true.shape[0] != n or p_false.shape[0] != n or out_rowptr.shape[0] != n + 1:
        raise ValueError("p_true / p_false / out_rowptr: wrong size")
    _rr(rowptr, col, np.uint64(seed), np.uint32(st_t), np.uint32(c_t), np.uint32(st_f), np.uint32(c_f),
        p_true, p_false, _pub(pub, n), out_rowptr, np.empty(0, dtype=col.dtype), False)


def edges_rr_fill(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub, out_rowptr, out_col):
    n = rowptr.shape[0] - 1
    if p_true.shape[0] != n or p_false.shape[0] != n or out_rowptr.shape[0] != n + 1:
        raise ValueError("p_true / p_false / out_rowptr: wrong size")
    if out_col.shape[0] != out_rowptr[n] or out_col.dtype != col.dtype:
        raise ValueError("out_col: wrong size or dtype")
    bad = _rr(rowptr, col, np.uint64(seed), np.uint32(st_t), np.uint32(c_t), np.uint32(st_f), np.uint32(c_f),
              p_true, p_false, _pub(pub, n), out_rowptr, out_col, True)
    if bad:
        raise RuntimeError("edges_rr_fill: a row regenerated a different size than edges_rr_count (bug)")


class _Sample:
    """Twin of the C++ ``EdgeSample``: ``nnz`` after the sampling call, ``write`` fills the
    outputs.  Here the sample is a count pass and ``write`` the fill pass (same draws, so the
    same bits as the C++ one-pass kernel)."""

    def __init__(self, rowptr, fill, dtype, has_val):
        self.nnz = int(rowptr[-1])
        self._rowptr, self._fill, self._dtype, self._has_val = rowptr, fill, dtype, has_val
        self._written = False

    def write(self, out_col, out_val, out_ei, layout):
        if self._written:
            raise RuntimeError("EdgeSample.write: already written (the buffers are freed)")
        if layout not in (0, 1):
            raise ValueError("layout: expected 0 (col, row) or 1 (row, col)")
        if int(self._rowptr[-1]) != self.nnz:
            raise ValueError("rowptr: changed since the sample was drawn")
        if out_val.size and not self._has_val:
            raise ValueError("out_val: this sample has no values")
        col = out_col if out_col.size else np.empty(self.nnz, dtype=self._dtype)
        if col.shape[0] != self.nnz or col.dtype != self._dtype:
            raise ValueError("out_col: wrong size or dtype")
        val = out_val if out_val.size else np.empty(self.nnz if self._has_val else 0, dtype=np.int64)
        self._fill(col, val)
        if out_ei.size:
            csr_to_edge_index(self._rowptr, col, out_ei, layout)
        self._written = True


def edges_rr_sample(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub, out_rowptr, by_degree):
    edges_rr_count(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub, out_rowptr, by_degree)
    np.cumsum(out_rowptr, out=out_rowptr)

    def fill(out_col, _val):
        edges_rr_fill(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub, out_rowptr, out_col)

    return _Sample(out_rowptr, fill, col.dtype, False)


@pjit
def _csr_to_ei(rowptr, col, ec, er):
    n = rowptr.shape[0] - 1
    nblk = (n + _BLOCK - 1) // _BLOCK
    for blk in nb.prange(nblk):
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            for k in range(rowptr[i], rowptr[i + 1]):
                ec[k] = col[k]
                er[k] = i


def csr_to_edge_index(rowptr, col, out_ei, layout):
    if layout not in (0, 1):
        raise ValueError("layout: expected 0 (col, row) or 1 (row, col)")
    n = rowptr.shape[0] - 1
    if rowptr[0] != 0 or rowptr[n] != col.shape[0]:
        raise ValueError("rowptr: must run from 0 to len(col)")
    if out_ei.size != 2 * col.shape[0] or out_ei.dtype != np.int64:
        raise ValueError("out_ei: expected 2 * nnz int64 entries")
    ei = out_ei.reshape(2, col.shape[0])
    _csr_to_ei(rowptr, col, ei[0] if layout == 0 else ei[1], ei[1] if layout == 0 else ei[0])


# --- LocalLap -------------------------------------------------------------------------------
_LL_NOT_CAND = _I64_MIN + 1  # true upper entry below every threshold so far (edges.h LL_NOT_CAND)
_LL_HIGH = _I64_MAX  # zero pick above the split, value not drawn (edges.h LL_HIGH)


_LL_TRUE_GAP_COL = 0x80000000  # gap cell of the true entries (edges.h LL_TRUE_GAP_COL)


@jit
def _ll_edge_fast(rnd, lo, hi, one):
    return rnd == 0 and hi == _I64_MAX and lo != _I64_MIN and lo - one >= 1


@jit
def _ll_edge_row(i, col, b, e, seed, t, s, one, rnd, lo, hi, p, out, st):
    """Row ``i`` (entries ``b:e``) of round ``rnd`` (twin of edges.h ll_edge_row): ``one + L``
    for the entries ``j > i`` at or above ``lo``, LL_NOT_CAND for the others, INT64_MIN for
    ``j <= i``; round 0 with ``lo - one >= 1`` by skip sampling at rate ``p``, else one exact
    draw per entry (round >= 1: only the entries still LL_NOT_CAND).  Also
    ldpfast.distributed._rows' body (global row ids)."""
    if _ll_edge_fast(rnd, lo, hi, one):
        e0 = b + np.int64(np.searchsorted(col[b:e], i, side="right"))
        for k in range(b, e0):
            out[k] = _I64_MIN
        for k in range(e0, e):
            out[k] = _LL_NOT_CAND
        m = e - e0
        if m <= 0:
            return
        kind, B, lam, stop = R.geom_params(p)
        R.cell_init(st, seed, _STREAM_LOCALLAP, _LL_ROW + i, _LL_TRUE_GAP_COL)
        k = _next_pick(st, kind, B, lam, stop, m, np.int64(-1))
        while k < m:
            j = np.int64(col[e0 + k])
            st2 = np.empty(11, dtype=np.uint64)
            R.cell_init(st2, seed, _STREAM_LOCALLAP, i, j)
            out[e0 + k] = lo + _geom_exact(st2, t, s)
            k = _next_pick(st, kind, B, lam, stop, m, k)
        return
    row = i if rnd == 0 else (np.int64(rnd) + 1) * _LL_ROW + i
    hl = _I64_MAX if hi == _I64_MAX else hi - one
    for k in range(b, e):
        j = np.int64(col[k])
        if j <= i:
            out[k] = _I64_MIN
            continue
        if rnd != 0 and out[k] != _LL_NOT_CAND:
            continue
        R.cell_init(st, seed, _STREAM_LOCALLAP, row, j)
        y = _dlap_band(st, t, s, _I64_MIN, hl)
        out[k] = one + y if (lo == _I64_MIN or y >= lo - one) else _LL_NOT_CAND


@pjit
def _ll_edge_values(rowptr, col, seed, t, s, one, rnd, lo, hi, p, out):
    n = rowptr.shape[0] - 1
    nblk = (n + _BLOCK - 1) // _BLOCK
    for blk in nb.prange(nblk):
        st = np.empty(11, dtype=np.uint64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            _ll_edge_row(np.int64(i), col, rowptr[i], rowptr[i + 1], seed, t, s, one, rnd, lo, hi, p, out, st)


def locallap_edge_values(rowptr, col, seed, t, s, one, rnd, lo, hi, p, out_val):
    if out_val.shape[0] != col.shape[0]:
        raise ValueError("out_val: wrong size")
    if t == 0 or s == 0:
        raise ValueError("t, s: expected >= 1")
    if not 0 <= rnd <= 254:
        raise ValueError("rnd: expected <= 254")
    _ll_edge_values(rowptr, col, np.uint64(seed), np.uint64(t), np.uint64(s), np.int64(one), np.uint32(rnd),
                    np.int64(lo), np.int64(hi), float(p), out_val)


def _check_split(split, lo, hi, s):
    if split and not (1 <= lo < hi and hi - lo <= (2**63 - 1) // s):
        raise ValueError("split: needs 1 <= lo < hi and (hi - lo) * s < 2^63")


@jit
def _ll_zero_row(i, n, ecol, eb, le, seed, rnd, pi, lo, hi, split, t, s, stg, stv, oc, ov, w0, fill):
    skip = np.int64(np.searchsorted(ecol[eb:eb + le], i, side="right"))
    eb += skip
    le -= skip
    m = n - 1 - i - le
    if m <= 0 or pi <= 0.0:
        return np.int64(0)
    R.cell_init(stg, seed, _STREAM_LOCALLAP, _LL_ROW + i, 2 * rnd)
    R.cell_init(stv, seed, _STREAM_LOCALLAP, _LL_ROW + i, 2 * rnd + 1)
    kind, B, lam, stop = R.geom_params(pi)
    base = i + 1
    ptr = np.int64(0)
    cnt = np.int64(0)
    k = _next_pick(stg, kind, B, lam, stop, m, np.int64(-1))
    while k < m:
        if fill:
            while ptr < le and ecol[eb + ptr] <= base + k + ptr:
                ptr += 1
            oc[w0 + cnt] = base + k + ptr
            if split and _bernoulli_exp_neg_any(stv, np.uint64(hi - lo) * np.uint64(s), t):
                ov[w0 + cnt] = _LL_HIGH
            else:
                ov[w0 + cnt] = _dlap_band(stv, t, s, lo, hi)
        cnt += 1
        k = _next_pick(stg, kind, B, lam, stop, m, k)
    return cnt


@jit
def _ll_zero_task(i, args, stg, stv, oc, ov, w0, fill):
    """Row ``i`` of ``_ll_zero_row`` for :func:`_count_fill`."""
    erp, ecol, seed, rnd, pi, lo, hi, split, t, s = args
    eb = erp[i]
    return _ll_zero_row(i, erp.shape[0] - 1, ecol, eb, erp[i + 1] - eb, seed, rnd, pi, lo, hi, split, t, s, stg, stv,
                        oc, ov, w0, fill)


def _ll_zero(erp, ecol, seed, rnd, pi, lo, hi, split, t, s, orp, oc, ov, fill):
    return _count_fill(erp.shape[0] - 1, (erp, ecol, seed, rnd, pi, lo, hi, split, t, s), orp, oc, ov, fill)


def locallap_zero(excl_rowptr, excl_col, seed, rnd, pi, lo, hi, split, t, s, out_rowptr, out_col, out_val, fill):
    n = excl_rowptr.shape[0] - 1
    if out_rowptr.shape[0] != n + 1:
        raise ValueError("out_rowptr: wrong size")
    if t == 0 or s == 0:
        raise ValueError("t, s: expected >= 1")
    _check_split(split, lo, hi, s)
    if fill:
        if out_col.shape[0] != out_rowptr[n] or out_val.shape[0] != out_rowptr[n] or out_col.dtype != excl_col.dtype:
            raise ValueError("out_col / out_val: wrong size or dtype")
    else:
        out_col = np.empty(0, dtype=excl_col.dtype)
        out_val = np.empty(0, dtype=np.int64)
    bad = _ll_zero(excl_rowptr, excl_col, np.uint64(seed), np.uint32(rnd), float(pi), np.int64(lo), np.int64(hi),
                   bool(split), np.uint64(t), np.uint64(s), out_rowptr, out_col, out_val, bool(fill))
    if bad:
        raise RuntimeError("locallap_zero_fill: count mismatch (bug)")


def locallap_zero_sample(excl_rowptr, excl_col, seed, rnd, pi, lo, hi, split, t, s, out_rowptr):
    empty_c, empty_v = np.empty(0, dtype=excl_col.dtype), np.empty(0, dtype=np.int64)
    locallap_zero(excl_rowptr, excl_col, seed, rnd, pi, lo, hi, split, t, s, out_rowptr, empty_c, empty_v, False)
    np.cumsum(out_rowptr, out=out_rowptr)

    def fill(out_col, out_val):
        locallap_zero(excl_rowptr, excl_col, seed, rnd, pi, lo, hi, split, t, s, out_rowptr, out_col, out_val, True)

    return _Sample(out_rowptr, fill, excl_col.dtype, True)


# --- server side ----------------------------------------------------------------------------
@jit
def _copy_run(src, s0, k, end, oc, w0, cnt, fill):
    """``src[s0 + k : s0 + end]`` appended at ``oc[w0 + cnt]`` (with ``fill``); returns the new count."""
    if fill:
        for x in range(k, end):
            oc[w0 + cnt + x - k] = src[s0 + x]
    return cnt + max(end - k, 0)


@jit
def _combine_row(i, a, a0, la, b, b0, lb, mode, oc, w0, fill):
    cnt = np.int64(0)
    x = np.int64(0)
    y = np.int64(0)
    if mode == 0 or mode == 1:
        while x < la and y < lb:
            va = a[a0 + x]
            vb = b[b0 + y]
            if va == vb or mode == 0:  # union: every value once; intersection: the common ones
                if fill:
                    oc[w0 + cnt] = min(va, vb)
                cnt += 1
            x += va <= vb
            y += vb <= va
        if mode == 0:
            cnt = _copy_run(a, a0, x, la, oc, w0, cnt, fill)
            cnt = _copy_run(b, b0, y, lb, oc, w0, cnt, fill)
        return cnt
    if mode == 2:
        lo_s, lo0, lo_n, hi_s, hi0, hi_n = a, a0, la, b, b0, lb
    else:
        lo_s, lo0, lo_n, hi_s, hi0, hi_n = b, b0, lb, a, a0, la
    # (lo source below i) then (hi source above i)
    cnt = _copy_run(lo_s, lo0, 0, np.int64(np.searchsorted(lo_s[lo0:lo0 + lo_n], i)), oc, w0, cnt, fill)
    k = np.int64(np.searchsorted(hi_s[hi0:hi0 + hi_n], i, side="right"))
    return _copy_run(hi_s, hi0, k, hi_n, oc, w0, cnt, fill)


@pjit
def _combine(ra, ca, rb, cb, mode, orp, oc, fill):
    n = ra.shape[0] - 1
    if not fill:
        orp[0] = 0
    for i in nb.prange(n):
        c = _combine_row(np.int64(i), ca, ra[i], ra[i + 1] - ra[i], cb, rb[i], rb[i + 1] - rb[i], mode, oc,
                         orp[i] if fill else 0, fill)
        if not fill:
            orp[i + 1] = c


def csr_combine(rowptr_a, col_a, rowptr_b, col_b, mode, out_rowptr, out_col, fill):
    n = rowptr_a.shape[0] - 1
    if rowptr_b.shape[0] != n + 1 or out_rowptr.shape[0] != n + 1:
        raise ValueError("rowptr_b / out_rowptr: wrong size")
    if not 0 <= mode <= 3:
        raise ValueError("mode: expected 0..3")
    if fill:
        if out_col.shape[0] != out_rowptr[n]:
            raise ValueError("out_col: wrong size")
    else:
        out_col = np.empty(0, dtype=col_a.dtype)
    _combine(rowptr_a, col_a, rowptr_b, col_b, int(mode), out_rowptr, out_col, bool(fill))


@jit
def _mix64(z):
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@jit
def _check_row(i, n, col, b, e):
    """(flags, hash term) of row ``i`` = ``col[b:e]`` of a graph on ``n`` nodes: flags 1 range,
    2 order/duplicates, 4 self loop; the symmetry hash adds mix(pair) for i < j and subtracts
    it for i > j (mod 2^64), so the terms of a symmetric graph sum to 0.  Also the body of
    ldpfast.distributed._rows.check_rows (global row ids)."""
    f = np.int64(0)
    h = np.uint64(0)
    gold = np.uint64(0x9E3779B97F4A7C15)
    s32 = np.uint64(32)
    for k in range(b, e):
        j = np.int64(col[k])
        if j < 0 or j >= n:
            f |= 1
        if k > b and np.int64(col[k - 1]) >= j:
            f |= 2
        if j == i:
            f |= 4
        lo = np.uint64(min(i, j))
        hi = np.uint64(max(i, j))
        x = _mix64((lo << s32) ^ hi ^ gold)
        if i < j:
            h += x
        else:
            h -= x
    return f, h


@pjit
def _check(rowptr, col):
    n = rowptr.shape[0] - 1
    nblk = (n + _BLOCK - 1) // _BLOCK
    flags = np.zeros(nblk, dtype=np.int64)
    hs = np.zeros(nblk, dtype=np.uint64)
    for blk in nb.prange(nblk):
        f = np.int64(0)
        h = np.uint64(0)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            rf, rh = _check_row(np.int64(i), n, col, rowptr[i], rowptr[i + 1])
            f |= rf
            h += rh
        flags[blk] = f
        hs[blk] = h
    f = np.int64(0)
    h = np.uint64(0)
    for blk in range(nblk):
        f |= flags[blk]
        h += hs[blk]
    if h != np.uint64(0):
        f |= 8
    return f


def edges_check_csr(rowptr, col):
    return int(_check(rowptr, col))


@jit
def _sorted_csr(src, dst, n, rp, col):
    E = src.shape[0]
    gold = np.uint64(0x9E3779B97F4A7C15)
    s32 = np.uint64(32)
    f = np.int64(0)
    h = np.uint64(0)
    for e in range(E):
        r = np.int64(src[e])
        c = np.int64(dst[e])
        if r < 0 or r >= n or c < 0 or c >= n:
            return np.int64(1)
        pr = np.int64(src[e - 1]) if e > 0 else np.int64(-1)
        if e > 0 and (pr > r or (pr == r and np.int64(dst[e - 1]) >= c)):
            return np.int64(2)
        if r == c:
            f |= 4
        col[e] = c
        for rr in range(max(pr + 1, 0), r + 1):
            rp[rr] = e
        x = _mix64((np.uint64(min(r, c)) << s32) ^ np.uint64(max(r, c)) ^ gold)
        if r < c:
            h += x
        else:
            h -= x
    if h != np.uint64(0):
        f |= 8
    last = np.int64(src[E - 1]) if E > 0 else np.int64(-1)
    for rr in range(last + 1, n + 1):
        rp[rr] = E
    return f


def edges_sorted_csr(src, dst, n, out_rowptr, out_col):
    if dst.shape[0] != src.shape[0] or out_col.shape[0] != src.shape[0] or out_rowptr.shape[0] != n + 1:
        raise ValueError("dst / out_col / out_rowptr: wrong size")
    if dst.dtype != src.dtype:
        raise ValueError("dst: expected the dtype of src")
    return int(_sorted_csr(src, dst, np.int64(n), out_rowptr, out_col))
