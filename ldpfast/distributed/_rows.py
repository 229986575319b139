"""Row-range drivers of the edge kernels for one row-block shard (Numba).

A shard holds rows ``[row0, row0 + m)`` of the CSR (local ``rowptr`` of length ``m + 1``,
global column ids); ``n`` is the global number of nodes.  The per-row bodies are the Numba
twins' own (``ldpfast._numba.edges._rr_row``, ``_ll_zero_row``, ``_ll_edge_row``,
``_check_row``; bit-identical to the C++ kernels), called with the *global* row id, so every
draw is addressed by ``(seed, stream, global row, col)`` exactly as in the single-machine
call, in O(shard) time and memory (no n-long arrays).  Only the loops over rows live here.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from .._numba import edges as E

# serial loops, GIL released: a shard is the unit of parallelism (one task per worker
# thread); parallel=True would add tens of seconds of compilation per worker for nothing
jit = nb.njit(cache=True, nogil=True)


@jit
def check_rows(row0, n, rowptr, col):
    """(flags, hash) of ``edges_check_csr`` for these rows: flags 1 range, 2 order/duplicates,
    4 self loop; ``hash`` is this shard's term of the symmetry hash (the shards' terms sum to 0
    mod 2^64 iff the check of the whole CSR passes bit 8).  The row body is the Numba twin's."""
    f = np.int64(0)
    h = np.uint64(0)
    for li in range(rowptr.shape[0] - 1):
        rf, rh = E._check_row(np.int64(row0 + li), np.int64(n), col, rowptr[li], rowptr[li + 1])
        f |= rf
        h += rh
    return f, h


@jit
def _row_done(orp, li, got, fill):
    """Book row ``li``'s output size ``got``: its count (count pass), or whether it differs
    from the counted one (fill pass: a bug)."""
    if fill:
        return got != orp[li + 1] - orp[li]
    orp[li + 1] = got
    return False


def _two_pass(kernel, what, args, m, dtypes):
    """``(out_rowptr, *outs)`` of a row kernel run twice: count (sizes into ``out_rowptr``),
    prefix sum, fill (``outs`` of ``dtypes``)."""
    orp = np.empty(m + 1, dtype=np.int64)
    orp[0] = 0
    kernel(*args, orp, *(np.empty(0, dtype=dt) for dt in dtypes), False)
    np.cumsum(orp, out=orp)
    outs = tuple(np.empty(int(orp[m]), dtype=dt) for dt in dtypes)
    if kernel(*args, orp, *outs, True):
        raise RuntimeError(f"{what}: count mismatch (bug)")
    return (orp, *outs)


@jit
def _rr(row0, n, rowptr, col, seed, st_t, c_t, st_f, c_f, pt, pf, orp, ocol, fill):
    stt = np.empty(11, dtype=np.uint64)
    stf = np.empty(11, dtype=np.uint64)
    bad = False
    for li in range(rowptr.shape[0] - 1):
        b = rowptr[li]
        got = E._rr_row(np.int64(row0 + li), col, b, rowptr[li + 1] - b, n, seed, st_t, c_t, st_f, c_f, pt[li],
                        pf[li], stt, stf, ocol, orp[li] if fill else np.int64(0), fill)
        bad |= _row_done(orp, li, got, fill)
    return bad


def rr_rows(row0: int, n: int, rowptr, col, seed: int, streams, p_true, p_false):
    """Noisy rows (``_rr_sample`` of :mod:`ldpfast.mechanisms.edges`) of this shard:
    ``(out_rowptr, out_col)``, local rowptr, global column ids (count pass, then fill)."""
    st_t, c_t, st_f, c_f = (int(s) for s in streams)
    args = (np.int64(row0), np.int64(n), rowptr, col, np.uint64(seed), np.uint32(st_t), np.uint32(c_t),
            np.uint32(st_f), np.uint32(c_f), np.ascontiguousarray(p_true, np.float64),
            np.ascontiguousarray(p_false, np.float64))
    return _two_pass(_rr, "rr_rows", args, rowptr.shape[0] - 1, (col.dtype,))


@jit
def ll_edge_values(row0, rowptr, col, seed, t, s, one, rnd, lo, hi, p, out):
    """LocalLap's true upper entries in round ``rnd`` (``locallap_edge_values``) of rows
    ``row0 + i``: ``one + L`` for the entries ``j > i`` at or above ``lo``, LL_NOT_CAND for the
    others, INT64_MIN for ``j <= i`` (round >= 1: only the entries still LL_NOT_CAND)."""
    st = np.empty(11, dtype=np.uint64)
    for li in range(rowptr.shape[0] - 1):
        E._ll_edge_row(np.int64(row0 + li), col, rowptr[li], rowptr[li + 1], seed, t, s, one, rnd, lo, hi, p, out,
                       st)


@jit
def _ll_zero(row0, n, erp, ecol, seed, rnd, pi, lo, hi, split, t, s, orp, oc, ov, fill):
    stg = np.empty(11, dtype=np.uint64)
    stv = np.empty(11, dtype=np.uint64)
    bad = False
    for li in range(erp.shape[0] - 1):
        eb = erp[li]
        got = E._ll_zero_row(np.int64(row0 + li), n, ecol, eb, erp[li + 1] - eb, seed, rnd, pi, lo, hi, split, t, s,
                             stg, stv, oc, ov, orp[li] if fill else np.int64(0), fill)
        bad |= _row_done(orp, li, got, fill)
    return bad


def ll_zero_rows(row0: int, n: int, erp, ecol, seed: int, rnd: int, pi: float, lo: int, hi: int, split: bool,
                 t: int, s: int):
    """LocalLap zero candidates of round ``rnd`` (``locallap_zero_sample``) for this shard's
    rows: ``(rowptr, col, val)`` (local rowptr, global columns, values in grid units; LL_HIGH
    above the split ``hi`` when ``split``)."""
    E._check_split(split, lo, hi, s)
    args = (np.int64(row0), np.int64(n), erp, ecol, np.uint64(seed), np.uint32(rnd), float(pi), np.int64(lo),
            np.int64(hi), bool(split), np.uint64(t), np.uint64(s))
    return _two_pass(_ll_zero, "ll_zero_rows", args, erp.shape[0] - 1, (ecol.dtype, np.int64))
