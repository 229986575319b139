"""Numba twin of ``csrc/common/userkey.h`` / ``csrc/cpu/userkey.cpp``: per-user report keys
(row digests, neighbour-set digests, seeds and report ids).  Same words, same blocks, same
sums mod 2^64, so every output equals the C++ and CUDA ones."""
from __future__ import annotations

import numba as nb
import numpy as np

from .fingerprint import BLOCK_BYTES, _block, _nh_keys, _philox_key64

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ZERO = np.uint64(0)
_SET_TAG = np.uint64(0x5E7)

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)


@pjit
def _row_digests(rows, k_nh, k_pad, k_prf, out):
    K = _nh_keys(k_nh)
    n, nbytes = rows.shape
    nb_ = (nbytes + BLOCK_BYTES - 1) // BLOCK_BYTES
    for i in nb.prange(n):
        s0 = _ZERO
        s1 = _ZERO
        for b in range(nb_):
            t0, t1 = _block(rows[i], nbytes, b, K, k_pad, k_prf)
            s0 += t0
            s1 += t1
        out[i, 0] = s0
        out[i, 1] = s1


@jit
def _set_term(key, k_set):
    u = np.uint64(key)
    r0, r1, r2, r3 = _philox_key64(u & _M32, u >> _S32, _SET_TAG, _ZERO, k_set)
    return r0 | (r1 << _S32), r2 | (r3 << _S32)


@pjit
def _set_digests(rowptr, col, keys, k_set, out):
    n = rowptr.shape[0] - 1
    for i in nb.prange(n):
        s0 = _ZERO
        s1 = _ZERO
        for q in range(rowptr[i], rowptr[i + 1]):
            t0, t1 = _set_term(keys[col[q]], k_set)
            s0 += t0
            s1 += t1
        out[i, 0] = s0
        out[i, 1] = s1


@jit
def _report_key(u, ex, s0, s1, k_a, k_b, k_c):
    u = np.uint64(u)
    a0, a1, a2, a3 = _philox_key64(u & _M32, u >> _S32, ex & _M32, ex >> _S32, k_a)
    b0, b1, b2, b3 = _philox_key64(a0 ^ (s0 & _M32), a1 ^ (s0 >> _S32), a2 ^ (s1 & _M32), a3 ^ (s1 >> _S32), k_b)
    c0, c1, _, _ = _philox_key64(b0, b1, b2, b3, k_c)
    return b0 | (b1 << _S32), c0 | (c1 << _S32)


@pjit
def _report_keys(ukeys, extra, digests, has_extra, has_dig, k_a, k_b, k_c, seeds, rids, has_rids):
    for i in nb.prange(ukeys.shape[0]):
        ex = extra[i] if has_extra else _ZERO
        s0 = digests[i, 0] if has_dig else _ZERO
        s1 = digests[i, 1] if has_dig else _ZERO
        s, r = _report_key(ukeys[i], ex, s0, s1, k_a, k_b, k_c)
        seeds[i] = s
        if has_rids:
            rids[i] = r


def _arr(a, dtype, name, ndim=1):
    if not isinstance(a, np.ndarray) or a.dtype != dtype or a.ndim != ndim or not a.flags.c_contiguous:
        raise ValueError(f"{name}: expected a C-contiguous {ndim}-D {np.dtype(dtype)} array")
    return a


def row_digests(rows, k_nh, k_pad, k_prf, out) -> None:
    """As the C++ ``row_digests``: ``rows`` uint8 (n, nbytes), ``out`` uint64 (n, 2)."""
    _arr(rows, np.uint8, "rows", 2)
    _arr(out, np.uint64, "out", 2)
    _row_digests(rows, np.uint64(k_nh), np.uint64(k_pad), np.uint64(k_prf), out)


def set_digests(rowptr, col, node_keys, k_set, out) -> None:
    """As the C++ ``set_digests``."""
    _arr(rowptr, np.int64, "rowptr")
    _arr(node_keys, np.int64, "node_keys")
    _arr(out, np.uint64, "out", 2)
    if col.size and (int(col.min()) < 0 or int(col.max()) >= node_keys.size):
        raise IndexError("col: entry outside [0, len(node_keys))")
    _set_digests(rowptr, col, node_keys, np.uint64(k_set), out)


def report_keys(ukeys, extra, digests, k_a, k_b, k_c, seeds, rids) -> None:
    """As the C++ ``report_keys`` (``extra``, ``digests``, ``rids`` may be None)."""
    _arr(ukeys, np.int64, "ukeys")
    _arr(seeds, np.uint64, "seeds")
    z1, z2 = np.zeros(1, np.uint64), np.zeros((1, 2), np.uint64)
    _report_keys(ukeys, z1 if extra is None else _arr(extra, np.uint64, "extra"),
                 z2 if digests is None else _arr(digests, np.uint64, "digests", 2),
                 extra is not None, digests is not None, np.uint64(k_a), np.uint64(k_b), np.uint64(k_c),
                 seeds, z1 if rids is None else _arr(rids, np.uint64, "rids"), rids is not None)
