"""Numba twin of ``csrc/cpu/features.cpp``: GRR, GRR-FS, 1-bit, multi-bit, label RR.

Same function names, arguments and outputs as the C++ kernels, and the same draws in the
same order from the same (seed, stream, row, col) generators, so outputs are bit-identical.
See the header of ``features.cpp`` for the stream layout.  Rows are processed in blocks of
``_BLOCK`` (generator state allocated once per block); results never depend on the split.
"""
from __future__ import annotations

import numba as nb
import numpy as np

from . import rng as R

_U = np.uint64
_ZERO = np.uint64(0)
_ONE = np.uint64(1)
_S32 = np.uint64(32)
_BLOCK = 256

STREAM_GRR = 1
STREAM_GRR_FS_SELECT = 2
STREAM_ONEBIT = 3
STREAM_MULTIBIT_SELECT = 4
STREAM_LABEL_RR = 5
SUB_GRR_KEEP, SUB_GRR_BITS, SUB_FS_KEEP, SUB_FS_BITS, SUB_FS_OVER = 0, 1, 2, 3, 4
SUB_ONEBIT, SUB_MULTIBIT = 0, 1
SUB_LABEL_KEEP, SUB_LABEL_BITS = 0, 1

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)


# --- bit reservoir (twin of BitReader): st[0:11] cell state, st[11] bits, st[12] count ----
@jit
def _bits_init(st, seed, stream, row, col):
    R.cell_init(st, seed, stream, row, col)
    st[11] = _ZERO
    st[12] = _ZERO


@jit
def _take(st, b):
    if st[12] < b:
        st[11] = st[11] | (R.next_u32(st) << st[12])
        st[12] = st[12] + _S32
    v = st[11] & ((_ONE << b) - _ONE)
    st[11] = st[11] >> b
    st[12] = st[12] - b
    return v


@jit
def _randint_bits(st, k, b):
    if b == _ZERO:
        return _ZERO
    while True:
        v = _take(st, b)
        if v < k:
            return v


@jit
def _grr_one(xv, k, T, bkm1, keep, bits):
    if R.next_u32(keep) < T:
        return xv
    r = _randint_bits(bits, k - _ONE, bkm1)
    return r + _ONE if r >= xv else r


def _bit_length(a):
    return np.array([int(v).bit_length() for v in a], dtype=np.uint64)


def _grr_bits(k):
    k = np.asarray(k, dtype=np.int64)
    return _bit_length(np.maximum(k - 1, 0)), _bit_length(np.maximum(k - 2, 0))


# --- kernels ---------------------------------------------------------------------------------
@pjit
def _grr(x, k, T, bkm1, seeds, out):
    n, d = x.shape
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        keep = np.empty(11, np.uint64)
        bits = np.empty(13, np.uint64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            R.cell_init(keep, seeds[i], STREAM_GRR, 0, SUB_GRR_KEEP)  # row i's own seed
            _bits_init(bits, seeds[i], STREAM_GRR, 0, SUB_GRR_BITS)
            for j in range(d):
                out[i, j] = _grr_one(_U(x[i, j]), _U(k[j]), T[j], bkm1[j], keep, bits)


@jit
def _stream_words(st, seed, stream, row, col, w, nblk):
    """Words [0, 4 nblk) of the stream (seed, stream, row, col), as CellRng draws them."""
    R.cell_init(st, seed, stream, row, col)
    for q in range(4 * nblk):
        w[q] = R.next_u32(st)


@jit
def _slot(w, off, b):
    win = w[off >> 5] | (w[(off >> 5) + 1] << _S32)
    return (win >> _U(off & 31)) & ((_ONE << b) - _ONE)


@pjit
def _grr_fs(x, k, T, bk, bkm1, off, nblk, m, seeds, out):
    n, d = x.shape
    all_ = m == d
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        keep = np.empty(11, np.uint64)
        over = np.empty(13, np.uint64)
        s = np.empty(11, np.uint64)
        g = np.empty(11, np.uint64)
        w = np.zeros(4 * nblk + 1, np.uint64)
        sel = np.zeros(d, np.uint8)
        if all_:
            sel[:] = 1
        idx = np.empty(m, np.int64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            seed, r = seeds[i], 0
            if not all_:
                R.cell_init(s, seed, STREAM_GRR_FS_SELECT, r, 0)
                for c in range(m):
                    j = d - m + c
                    t = np.int64(R.randint(s, _U(j + 1)))
                    pick = j if sel[t] != 0 else t
                    sel[pick] = 1
                    idx[c] = pick
            _stream_words(g, seed, STREAM_GRR, r, SUB_FS_BITS, w, nblk)
            for j in range(d):
                out[i, j] = _slot(w, off[j], bk[j])
            R.cell_init(keep, seed, STREAM_GRR, r, SUB_FS_KEEP)
            _bits_init(over, seed, STREAM_GRR, r, SUB_FS_OVER)
            for j in range(d):
                if sel[j] != 0:
                    out[i, j] = _grr_one(_U(x[i, j]), _U(k[j]), T[j], bkm1[j], keep, over)
                elif np.int64(out[i, j]) >= k[j]:
                    out[i, j] = _randint_bits(over, _U(k[j]), bk[j])
            if not all_:
                for c in range(m):
                    sel[idx[c]] = 0


@jit
def _onebit_f(v, alpha, beta):
    # Twin of onebit_f (features.cpp): clamp into [0, 1], NaN -> 0, so the threshold stays in
    # [t_lo, 2^32 - t_lo] (an overflowing beta - alpha gives inf/inf = NaN, and float -> uint64
    # of NaN or an out-of-range value is undefined).
    f = (v - alpha) / (beta - alpha)
    if f > 0.0:
        return min(f, 1.0)  # f is not NaN here
    return 0.0


@jit
def _onebit_one(v, alpha, beta, t_lo, span, g):
    T = t_lo + _U(_onebit_f(np.float64(v), alpha, beta) * span)
    return np.int8(1) if R.next_u32(g) < T else np.int8(-1)


@pjit
def _onebit(x, alpha, beta, t_lo, span, seeds, out):
    n, d = x.shape
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        g = np.empty(11, np.uint64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            R.cell_init(g, seeds[i], STREAM_ONEBIT, 0, SUB_ONEBIT)
            for j in range(d):
                out[i, j] = _onebit_one(x[i, j], alpha, beta, t_lo, span, g)


@pjit
def _multibit(x, m, alpha, beta, t_lo, span, seeds, out):
    n, d = x.shape
    all_ = m == d
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        g = np.empty(11, np.uint64)
        s = np.empty(11, np.uint64)
        idx = np.empty(m, np.int64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            R.cell_init(g, seeds[i], STREAM_ONEBIT, 0, SUB_MULTIBIT)
            if all_:
                for j in range(d):
                    out[i, j] = _onebit_one(x[i, j], alpha, beta, t_lo, span, g)
                continue
            for j in range(d):
                out[i, j] = 0
            R.cell_init(s, seeds[i], STREAM_MULTIBIT_SELECT, 0, 0)
            for c in range(m):
                j = d - m + c
                t = np.int64(R.randint(s, _U(j + 1)))
                pick = j if out[i, t] != 0 else t
                out[i, pick] = 2
                idx[c] = pick
            for c in range(m):
                j = idx[c]
                out[i, j] = _onebit_one(x[i, j], alpha, beta, t_lo, span, g)


@pjit
def _rr_labels(y, mask, c, T, bkm1, seeds, out):
    n = y.shape[0]
    for blk in nb.prange((n + _BLOCK - 1) // _BLOCK):
        keep = np.empty(11, np.uint64)
        bits = np.empty(13, np.uint64)
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            if not mask[i]:
                out[i] = y[i]
                continue
            R.cell_init(keep, seeds[i], STREAM_LABEL_RR, 0, SUB_LABEL_KEEP)
            _bits_init(bits, seeds[i], STREAM_LABEL_RR, 0, SUB_LABEL_BITS)
            out[i] = _grr_one(_U(y[i]), c, T, bkm1, keep, bits)


@pjit
def _check_categorical(x, k, first):
    n, d = x.shape
    nb_ = first.shape[0]
    for blk in nb.prange(nb_):
        for i in range(blk * _BLOCK, min(n, (blk + 1) * _BLOCK)):
            hit = False
            for j in range(d):
                v = np.int64(x[i, j])
                if v < 0 or v >= k[j]:
                    first[blk] = i * d + j
                    hit = True
                    break
            if hit:
                break


@pjit
def _check_range(x, alpha, beta, first):
    N = x.shape[0]
    blk_size = 65536
    for blk in nb.prange(first.shape[0]):
        for i in range(blk * blk_size, min(N, (blk + 1) * blk_size)):
            v = np.float64(x[i])
            if not (v >= alpha and v <= beta):
                first[blk] = i
                break


# --- public twins (same signatures as ldpfast._C) --------------------------------------------
def _seeds(seeds, n):
    """The per-row report seeds (``ldpfast.privacy.users``): uint64 (n,), as the C++ launchers take them."""
    if not isinstance(seeds, np.ndarray) or seeds.dtype != np.uint64 or seeds.shape != (n,):
        raise ValueError(f"seeds: expected a uint64 array of {n} per-row seeds")
    return np.ascontiguousarray(seeds)


def _check_2d(x, out, name="x"):
    if x.ndim != 2:
        raise ValueError(f"{name}: expected a 2-D array")
    if out.shape != x.shape:
        raise ValueError(f"out: shape differs from {name}")


def _cat_args(x, k, thresholds, out):
    _check_2d(x, out)
    k = np.ascontiguousarray(k, dtype=np.int64)
    T = np.ascontiguousarray(thresholds, dtype=np.uint64)
    if k.size != x.shape[1] or T.size != x.shape[1]:
        raise ValueError("k, thresholds: expected one entry per column")
    if k.size and (k.min() < 1 or k.max() > 2**31):
        raise ValueError("k: domain sizes must lie in [1, 2^31]")
    if T.size and T.max() > 2**32:
        raise ValueError("thresholds: must be <= 2^32")
    return k, T


def grr(x, k, thresholds, seeds, out):
    k, T = _cat_args(x, k, thresholds, out)
    _, bkm1 = _grr_bits(k)
    _grr(x, k, T, bkm1, _seeds(seeds, x.shape[0]), out)


def grr_fs(x, k, thresholds, m, seeds, out):
    k, T = _cat_args(x, k, thresholds, out)
    if not 1 <= m <= x.shape[1]:
        raise ValueError("m: expected an int in [1, d]")
    bk, bkm1 = _grr_bits(k)
    off = np.zeros(k.size, np.int64)
    if k.size > 1:
        off[1:] = np.cumsum(bk.astype(np.int64))[:-1]
    total = int(bk.astype(np.int64).sum())
    nblk = ((total + 31) // 32 + 3) // 4
    _grr_fs(x, k, T, bk, bkm1, off, np.int64(nblk), np.int64(m), _seeds(seeds, x.shape[0]), out)


def _onebit_args(alpha, beta, t_lo, span):
    if not alpha < beta:
        raise ValueError("alpha, beta: expected alpha < beta")
    if not (1 <= t_lo <= 2**31 and span >= 0 and 2.0 * t_lo + span <= 2.0**32):
        raise ValueError("t_lo, span: expected 1 <= t_lo <= 2^31 and 2 t_lo + span <= 2^32")


def onebit(x, alpha, beta, t_lo, span, seeds, out):
    _check_2d(x, out)
    _onebit_args(alpha, beta, t_lo, span)
    _onebit(x, float(alpha), float(beta), _U(t_lo), float(span), _seeds(seeds, x.shape[0]), out)


def multibit_encode(x, m, alpha, beta, t_lo, span, seeds, out):
    _check_2d(x, out)
    _onebit_args(alpha, beta, t_lo, span)
    if not 1 <= m <= x.shape[1]:
        raise ValueError("m: expected an int in [1, d]")
    _multibit(x, np.int64(m), float(alpha), float(beta), _U(t_lo), float(span), _seeds(seeds, x.shape[0]), out)


def rr_labels(y, mask, num_classes, threshold, seeds, out):
    if y.ndim != 1:
        raise ValueError("y: expected a 1-D array")
    if out.shape != y.shape or mask.shape != y.shape:
        raise ValueError("mask, out: shape differs from y")
    if not 1 <= num_classes <= 2**31:
        raise ValueError("num_classes: expected an int in [1, 2^31]")
    if threshold > 2**32:
        raise ValueError("threshold: must be <= 2^32")
    bkm1 = _U(max(int(num_classes) - 2, 0).bit_length())
    _rr_labels(y, mask, _U(num_classes), _U(threshold), bkm1, _seeds(seeds, y.shape[0]), out)


def check_categorical(x, k):
    if x.ndim != 2:
        raise ValueError("x: expected a 2-D array")
    k = np.ascontiguousarray(k, dtype=np.int64)
    first = np.full((x.shape[0] + _BLOCK - 1) // _BLOCK, -1, np.int64)
    _check_categorical(x, k, first)
    hits = first[first >= 0]
    return int(hits[0]) if hits.size else -1


def check_range(x, alpha, beta):
    flat = x.reshape(-1)
    first = np.full((flat.shape[0] + 65535) // 65536, -1, np.int64)
    _check_range(flat, float(alpha), float(beta), first)
    hits = first[first >= 0]
    return int(hits[0]) if hits.size else -1
