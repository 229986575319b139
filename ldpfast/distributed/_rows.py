"""Row-range drivers of the edge kernels for one row-block shard (Numba).

A shard holds rows ``[row0, row0 + m)`` of the CSR (local ``rowptr`` of length ``m + 1``,
global column ids); ``n`` is the global number of nodes.  The per-row bodies are the Numba
twins' own (``ldpfast._numba.edges._rr_row``, ``_ll_zero_row``; bit-identical to the C++
kernels), called with the *global* row id, so every draw is addressed by
``(seed, stream, global row, col)`` exactly as in the single-machine call, in O(shard) time
and memory (no n-long arrays).  Only the loops over rows live here.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .._numba import edges as E
from .._numba import rng as R

# serial loops, GIL released: a shard is the unit of parallelism (one task per worker
# thread); parallel=True would add tens of seconds of compilation per worker for nothing
jit = nb.njit(cache=True, nogil=True)

_BLOCK = 256
_STREAM_LOCALLAP = 10
_I64_MIN = np.iinfo(np.int64).min


@jit
def check_rows(row0, n, rowptr, col):
    """(flags, hash) of ``edges_check_csr`` for these rows: flags 1 range, 2 order/duplicates,
    4 self loop; ``hash`` is this shard's term of the symmetry hash (the shards' terms sum to 0
    mod 2^64 iff the check of the whole CSR passes bit 8)."""
    m = rowptr.shape[0] - 1
    nblk = (m + _BLOCK - 1) // _BLOCK
    flags = np.zeros(max(nblk, 1), dtype=np.int64)
    hs = np.zeros(max(nblk, 1), dtype=np.uint64)
    gold = np.uint64(0x9E3779B97F4A7C15)
    s32 = np.uint64(32)
    for blk in range(nblk):
        f = np.int64(0)
        h = np.uint64(0)
        for li in range(blk * _BLOCK, min(m, (blk + 1) * _BLOCK)):
            i = row0 + li
            for k in range(rowptr[li], rowptr[li + 1]):
                j = np.int64(col[k])
                if j < 0 or j >= n:
                    f |= 1
                if k > rowptr[li] and np.int64(col[k - 1]) >= j:
                    f |= 2
                if j == i:
                    f |= 4
                lo = np.uint64(min(i, j))
                hi = np.uint64(max(i, j))
                x = E._mix64((lo << s32) ^ hi ^ gold)
                if i < j:
                    h += x
                else:
                    h -= x
        flags[blk] = f
        hs[blk] = h
    f = np.int64(0)
    h = np.uint64(0)
    for blk in range(flags.shape[0]):
        f |= flags[blk]
        h += hs[blk]
    return f, h


@jit
def _rr(row0, n, rowptr, col, seed, st_t, c_t, st_f, c_f, pt, pf, orp, ocol, fill):
    m = rowptr.shape[0] - 1
    nblk = (m + _BLOCK - 1) // _BLOCK
    bad = np.zeros(max(nblk, 1), dtype=np.int64)
    if not fill:
        orp[0] = 0
    for blk in range(nblk):
        stt = np.empty(11, dtype=np.uint64)
        stf = np.empty(11, dtype=np.uint64)
        for li in range(blk * _BLOCK, min(m, (blk + 1) * _BLOCK)):
            b = rowptr[li]
            d = rowptr[li + 1] - b
            if fill:
                got = E._rr_row(np.int64(row0 + li), col, b, d, n, seed, st_t, c_t, st_f, c_f, pt[li], pf[li],
                                stt, stf, ocol, orp[li], True)
                if got != orp[li + 1] - orp[li]:
                    bad[blk] = 1
            else:
                orp[li + 1] = E._rr_row(np.int64(row0 + li), col, b, d, n, seed, st_t, c_t, st_f, c_f, pt[li],
                                        pf[li], stt, stf, ocol, 0, False)
    return bad.sum()


def rr_rows(row0: int, n: int, rowptr, col, seed: int, streams, p_true, p_false):
    """Noisy rows (``_rr_sample`` of :mod:`ldpfast.mechanisms.edges`) of this shard:
    ``(out_rowptr, out_col)``, local rowptr, global column ids (count pass, then fill)."""
    st_t, c_t, st_f, c_f = (int(s) for s in streams)
    m = rowptr.shape[0] - 1
    orp = np.empty(m + 1, dtype=np.int64)
    args = (np.int64(row0), np.int64(n), rowptr, col, np.uint64(seed), np.uint32(st_t), np.uint32(c_t),
            np.uint32(st_f), np.uint32(c_f), np.ascontiguousarray(p_true, np.float64),
            np.ascontiguousarray(p_false, np.float64))
    _rr(*args, orp, np.empty(0, dtype=col.dtype), False)
    np.cumsum(orp, out=orp)
    ocol = np.empty(int(orp[m]), dtype=col.dtype)
    if _rr(*args, orp, ocol, True):
        raise RuntimeError("rr_rows: count mismatch (bug)")
    return orp, ocol


@jit
def ll_edge_values(row0, rowptr, col, seed, t, s, one, out):
    """LocalLap's true upper entries (``locallap_edge_values``) of rows ``row0 + i``:
    ``one + DLap`` from ``CellRng(seed, LOCALLAP, i, j)`` for ``j > i``, INT64_MIN otherwise."""
    m = rowptr.shape[0] - 1
    nblk = (m + _BLOCK - 1) // _BLOCK
    for blk in range(nblk):
        st = np.empty(11, dtype=np.uint64)
        for li in range(blk * _BLOCK, min(m, (blk + 1) * _BLOCK)):
            i = row0 + li
            for k in range(rowptr[li], rowptr[li + 1]):
                j = np.int64(col[k])
                if j <= i:
                    out[k] = _I64_MIN
                    continue
                R.cell_init(st, seed, _STREAM_LOCALLAP, i, j)
                out[k] = one + R.discrete_laplace(st, t, s)


@jit
def _ll_zero(row0, n, erp, ecol, seed, rnd, pi, lo, hi, t, s, orp, oc, ov, fill):
    m = erp.shape[0] - 1
    nblk = (m + _BLOCK - 1) // _BLOCK
    bad = np.zeros(max(nblk, 1), dtype=np.int64)
    if not fill:
        orp[0] = 0
    for blk in range(nblk):
        stg = np.empty(11, dtype=np.uint64)
        stv = np.empty(11, dtype=np.uint64)
        for li in range(blk * _BLOCK, min(m, (blk + 1) * _BLOCK)):
            eb = erp[li]
            le = erp[li + 1] - eb
            if fill:
                got = E._ll_zero_row(np.int64(row0 + li), n, ecol, eb, le, seed, rnd, pi, lo, hi, t, s, stg, stv,
                                     oc, ov, orp[li], True)
                if got != orp[li + 1] - orp[li]:
                    bad[blk] = 1
            else:
                orp[li + 1] = E._ll_zero_row(np.int64(row0 + li), n, ecol, eb, le, seed, rnd, pi, lo, hi, t, s,
                                             stg, stv, oc, ov, 0, False)
    return bad.sum()


def ll_zero_rows(row0: int, n: int, erp, ecol, seed: int, rnd: int, pi: float, lo: int, hi: int, t: int, s: int):
    """LocalLap zero candidates of round ``rnd`` (``locallap_zero_sample``) for this shard's
    rows: ``(rowptr, col, val)`` (local rowptr, global columns, values in grid units)."""
    m = erp.shape[0] - 1
    orp = np.empty(m + 1, dtype=np.int64)
    args = (np.int64(row0), np.int64(n), erp, ecol, np.uint64(seed), np.uint32(rnd), float(pi), np.int64(lo),
            np.int64(hi), np.uint64(t), np.uint64(s))
    _ll_zero(*args, orp, np.empty(0, dtype=ecol.dtype), np.empty(0, dtype=np.int64), False)
    np.cumsum(orp, out=orp)
    oc = np.empty(int(orp[m]), dtype=ecol.dtype)
    ov = np.empty(int(orp[m]), dtype=np.int64)
    if _ll_zero(*args, orp, oc, ov, True):
        raise RuntimeError("ll_zero_rows: count mismatch (bug)")
    return orp, oc, ov
