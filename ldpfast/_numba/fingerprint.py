"""Numba twin of ``csrc/common/fingerprint.h`` / ``csrc/cpu/fingerprint.cpp``: the keyed
fingerprint of a byte string (construction and contract in the header).  Same words, same
blocks, same sums mod 2^64, so the result equals the C++ and CUDA ones."""
from __future__ import annotations

import numba as nb
import numpy as np

from .rng import philox4x32_10

_M32 = np.uint64(0xFFFFFFFF)
_S32 = np.uint64(32)
_ZERO = np.uint64(0)
BLOCK_WORDS = 64
BLOCK_BYTES = 4 * BLOCK_WORDS
KEY_WORDS = 2 * BLOCK_WORDS
_CHUNK = 4096  # blocks per parallel chunk (1 MiB), as the C++ launcher

jit = nb.njit(cache=True, nogil=True)
pjit = nb.njit(cache=True, nogil=True, parallel=True)


@jit
def _philox_key64(c0, c1, c2, c3, key):
    return philox4x32_10(c0, c1, c2, c3, key & _M32, key >> _S32)


@jit
def _nh_keys(k_nh):
    K = np.empty(KEY_WORDS, dtype=np.uint64)
    for q in range(KEY_WORDS // 4):
        r0, r1, r2, r3 = _philox_key64(np.uint64(q), _ZERO, _ZERO, _ZERO, k_nh)
        K[4 * q] = r0
        K[4 * q + 1] = r1
        K[4 * q + 2] = r2
        K[4 * q + 3] = r3
    return K


@jit
def _word(p, nbytes, j):
    """Word j (little endian), zero past nbytes."""
    w = _ZERO
    for t in range(4):
        i = 4 * j + t
        if i < nbytes:
            w |= np.uint64(p[i]) << np.uint64(8 * t)
    return w


@jit
def _block(p, nbytes, b, K, k_pad, k_prf):
    """(R0 | R1 << 32, R2 | R3 << 32): the PRF term of block b."""
    y0 = _ZERO
    y1 = _ZERO
    base = b * BLOCK_WORDS
    full = (b + 1) * BLOCK_BYTES <= nbytes
    for i in range(0, BLOCK_WORDS, 2):
        if full:
            o = 4 * (base + i)
            m0 = (np.uint64(p[o]) | (np.uint64(p[o + 1]) << np.uint64(8)) | (np.uint64(p[o + 2]) << np.uint64(16))
                  | (np.uint64(p[o + 3]) << np.uint64(24)))
            m1 = (np.uint64(p[o + 4]) | (np.uint64(p[o + 5]) << np.uint64(8)) | (np.uint64(p[o + 6]) << np.uint64(16))
                  | (np.uint64(p[o + 7]) << np.uint64(24)))
        else:
            m0 = _word(p, nbytes, base + i)
            m1 = _word(p, nbytes, base + i + 1)
        y0 += ((m0 + K[i]) & _M32) * ((m1 + K[i + 1]) & _M32)
        y1 += ((m0 + K[BLOCK_WORDS + i]) & _M32) * ((m1 + K[BLOCK_WORDS + i + 1]) & _M32)
    bu = np.uint64(b)
    p0, p1, p2, p3 = _philox_key64(bu & _M32, bu >> _S32, _ZERO, _ZERO, k_pad)
    r0, r1, r2, r3 = _philox_key64((y0 & _M32) ^ p0, (y0 >> _S32) ^ p1, (y1 & _M32) ^ p2, (y1 >> _S32) ^ p3,
                                   k_prf)
    return r0 | (r1 << _S32), r2 | (r3 << _S32)


@pjit
def _fingerprint(p, k_nh, k_pad, k_prf, out):
    K = _nh_keys(k_nh)
    nbytes = p.shape[0]
    nb_ = (nbytes + BLOCK_BYTES - 1) // BLOCK_BYTES
    nch = (nb_ + _CHUNK - 1) // _CHUNK
    part = np.zeros((nch, 2), dtype=np.uint64)
    for c in nb.prange(nch):
        s0 = _ZERO
        s1 = _ZERO
        for b in range(c * _CHUNK, min(nb_, (c + 1) * _CHUNK)):
            t0, t1 = _block(p, nbytes, b, K, k_pad, k_prf)
            s0 += t0
            s1 += t1
        part[c, 0] = s0
        part[c, 1] = s1
    s0 = _ZERO
    s1 = _ZERO
    for c in range(nch):
        s0 += part[c, 0]
        s1 += part[c, 1]
    out[0] = s0
    out[1] = s1


def fingerprint(data, k_nh, k_pad, k_prf, out) -> None:
    """Same contract as the C++ ``fingerprint``: ``data`` a 1-D C-contiguous uint8 array,
    ``out`` a uint64 array of 2 elements receiving (S0, S1)."""
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 1:
        raise ValueError("data: expected a 1-D uint8 array")
    if not isinstance(out, np.ndarray) or out.dtype != np.uint64 or out.size != 2:
        raise ValueError("out: expected 2 uint64 elements")
    _fingerprint(np.ascontiguousarray(data), np.uint64(k_nh), np.uint64(k_pad), np.uint64(k_prf),
                 out.reshape(-1))
