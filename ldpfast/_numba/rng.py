"""Numba twin of ``csrc/common/philox.h``, ``detmath.h`` and ``rng.h``.

A cell generator is a small uint64 array ``st`` (see :func:`cell_new`):
``[k0, k1, c1, c2, c3, draw, pos, b0, b1, b2, b3]``.  All arithmetic is done in uint64 with
explicit 32-bit masks, because Numba promotes mixed integer types (uint64 op int64 gives
float64), which would silently corrupt the bit stream.
"""
from __future__ import annotations

import math

import numba as nb
import numpy as np

_U = np.uint64
_M32 = np.uint64(0xFFFFFFFF)
_M0 = np.uint64(0xD2511F53)
_M1 = np.uint64(0xCD9E8D57)
_W0 = np.uint64(0x9E3779B9)
_W1 = np.uint64(0xBB67AE85)
_S32 = np.uint64(32)
_S11 = np.uint64(11)
_S16 = np.uint64(16)
_MFFFF = np.uint64(0xFFFF)
_ONE = np.uint64(1)
_ZERO = np.uint64(0)
_TWO32 = np.uint64(0x100000000)

jit = nb.njit(cache=True, nogil=True)


@jit
def philox4x32_10(c0, c1, c2, c3, k0, k1):
    """One Philox4x32-10 block; all arguments uint64 holding 32-bit values."""
    for r in range(10):
        if r > 0:
            k0 = (k0 + _W0) & _M32
            k1 = (k1 + _W1) & _M32
        p0 = _M0 * c0
        p1 = _M1 * c2
        n0 = ((p1 >> _S32) ^ c1 ^ k0) & _M32
        n1 = p1 & _M32
        n2 = ((p0 >> _S32) ^ c3 ^ k1) & _M32
        n3 = p0 & _M32
        c0, c1, c2, c3 = n0, n1, n2, n3
    return c0, c1, c2, c3


@jit
def cell_init(st, seed, stream, row, col):
    """(Re)initialise generator state ``st`` (uint64[11]) for one cell."""
    seed = np.uint64(seed)
    row = np.uint64(row)
    st[0] = seed & _M32
    st[1] = seed >> _S32
    st[2] = np.uint64(col) & _M32
    st[3] = row & _M32
    st[4] = ((row >> _S32) & _MFFFF) | ((np.uint64(stream) << _S16) & _M32)
    st[5] = _ZERO
    st[6] = np.uint64(4)


@jit
def cell_new(seed, stream, row, col):
    st = np.empty(11, dtype=np.uint64)
    cell_init(st, seed, stream, row, col)
    return st


@jit
def next_u32(st):
    if st[6] == np.uint64(4):
        o0, o1, o2, o3 = philox4x32_10(st[5], st[2], st[3], st[4], st[0], st[1])
        st[7] = o0
        st[8] = o1
        st[9] = o2
        st[10] = o3
        st[5] = st[5] + _ONE
        st[6] = _ZERO
    v = st[7 + np.int64(st[6])]
    st[6] = st[6] + _ONE
    return v


@jit
def next_u64(st):
    hi = next_u32(st)
    lo = next_u32(st)
    return (hi << _S32) | lo


@jit
def uniform(st):
    return (np.float64(next_u64(st) >> _S11) + 0.5) * (1.0 / 9007199254740992.0)


@jit
def bernoulli_words(st, q):
    """Exact Bernoulli(q) for a double q, 32 bits at a time (twin of rng.h bernoulli_words)."""
    while True:
        if not q > 0.0:
            return False
        q = min(q, 1.0)
        Q = q * 4294967296.0
        K = np.uint64(Q)
        w = next_u32(st)
        if w != K:
            return w < K
        q = Q - np.float64(K)


@jit
def bernoulli(st, p):
    """P[true] = p exactly: the 53 bits of uniform(), a tie settled by further words."""
    k = next_u64(st) >> _S11
    if not p < 1.0:
        return p >= 1.0
    if not p > 0.0:
        return False
    P = p * 9007199254740992.0
    K = np.uint64(P)
    if k != K:
        return k < K
    return bernoulli_words(st, P - np.float64(K))


@jit
def randint(st, k):
    """Uniform integer in [0, k), k >= 1 (uint64), masking + rejection."""
    k = np.uint64(k)
    m = k - _ONE
    m |= m >> np.uint64(1)
    m |= m >> np.uint64(2)
    m |= m >> np.uint64(4)
    m |= m >> np.uint64(8)
    m |= m >> np.uint64(16)
    m |= m >> np.uint64(32)
    if k <= _TWO32:
        while True:
            x = next_u32(st) & m
            if x < k:
                return x
    while True:
        x = next_u64(st) & m
        if x < k:
            return x


# --- deterministic logarithm (twin of detmath.h) --------------------------------------------
@jit
def _atanh_tail(s):
    z = s * s
    p = 1.0 / 25.0
    p = p * z + 1.0 / 23.0
    p = p * z + 1.0 / 21.0
    p = p * z + 1.0 / 19.0
    p = p * z + 1.0 / 17.0
    p = p * z + 1.0 / 15.0
    p = p * z + 1.0 / 13.0
    p = p * z + 1.0 / 11.0
    p = p * z + 1.0 / 9.0
    p = p * z + 1.0 / 7.0
    p = p * z + 1.0 / 5.0
    p = p * z + 1.0 / 3.0
    return 2.0 * s * (z * p)


@jit
def _log1p_small(f):
    s = f / (2.0 + f)
    return 2.0 * s + _atanh_tail(s)


@jit
def det_log(x):
    m, e = math.frexp(x)
    if m < 0.70710678118654752440:
        m = m * 2.0
        e = e - 1
    de = np.float64(e)
    return de * 6.93147180369123816490e-01 + (_log1p_small(m - 1.0) + de * 1.90821492927058770002e-10)


@jit
def det_log1p(x):
    if x > -0.29 and x < 0.41:
        return _log1p_small(x)
    return det_log(1.0 + x)


@jit
def det_exp_neg(y):
    """exp(-y), 0 <= y <= ln2 (twin of detmath.h)."""
    z = -y
    scale = 1.0
    if y > 0.34657359027997264:
        z = (6.93147180369123816490e-01 - y) + 1.90821492927058770002e-10
        scale = 0.5
    p = 1.0 / 6227020800.0
    p = p * z + 1.0 / 479001600.0
    p = p * z + 1.0 / 39916800.0
    p = p * z + 1.0 / 3628800.0
    p = p * z + 1.0 / 362880.0
    p = p * z + 1.0 / 40320.0
    p = p * z + 1.0 / 5040.0
    p = p * z + 1.0 / 720.0
    p = p * z + 1.0 / 120.0
    p = p * z + 1.0 / 24.0
    p = p * z + 1.0 / 6.0
    p = p * z + 0.5
    p = p * z + 1.0
    p = p * z + 1.0
    return p * scale


@jit
def det_neg_expm1(t):
    """1 - exp(-t), 0 <= t <= ln2 (twin of detmath.h)."""
    if t > 0.34657359027997264:
        return 1.0 - det_exp_neg(t)
    p = -1.0 / 87178291200.0
    p = p * t + 1.0 / 6227020800.0
    p = p * t - 1.0 / 479001600.0
    p = p * t + 1.0 / 39916800.0
    p = p * t - 1.0 / 3628800.0
    p = p * t + 1.0 / 362880.0
    p = p * t - 1.0 / 40320.0
    p = p * t + 1.0 / 5040.0
    p = p * t - 1.0 / 720.0
    p = p * t + 1.0 / 120.0
    p = p * t - 1.0 / 24.0
    p = p * t + 1.0 / 6.0
    p = p * t - 0.5
    p = p * t + 1.0
    return t * p


GEO_CAP = np.int64(4611686018427387904)


@jit
def geom_params(p):
    """(kind, B, lam, stop) of the geometric sampler (twin of rng.h geom_params)."""
    if p >= 1.0:
        return 0, 0, 0.0, 1.0
    if not p > 0.0:
        return 1, 0, 0.0, 1.0
    lam = p if p < 8.673617379884035e-19 else -det_log1p(-p)
    t = lam
    B = 0
    while t < 0.34657359027997264 and B < 62:
        t = t * 2.0
        B += 1
    stop = p if B == 0 else det_neg_expm1(t)
    return 2, B, lam, stop


@jit
def geom_draw(st, kind, B, lam, stop):
    """Geometric gap with the law and draw order of rng.h geom_draw (trials one at a time; no
    squeeze table, which only saves time there and never changes a decision)."""
    if kind == 0:
        return np.int64(0)
    if kind == 1:
        return GEO_CAP
    hmax = np.int64(1) << np.int64(62 - B)
    S = stop * 256.0
    K = np.uint64(S)
    h = np.int64(0)
    done = False
    while not done:
        w = next_u32(st)
        for i in range(4):
            b = (w >> np.uint64(8 * i)) & np.uint64(0xFF)
            if b < K:
                done = True
                break
            if b == K:  # tie: settled from the following words; a failure goes on with a new word
                if bernoulli_words(st, S - np.float64(K)):
                    done = True
                else:
                    h += 1
                    if h >= hmax:
                        return GEO_CAP
                break
            h += 1
            if h >= hmax:
                return GEO_CAP
    if B == 0:
        return h
    mask = (_ONE << np.uint64(B)) - _ONE
    while True:
        if B <= 24:
            w = next_u32(st)
            x = w & mask
            v = w >> np.uint64(24)
        else:
            w = next_u64(st)
            x = w & mask
            v = w >> np.uint64(56) if B <= 56 else next_u32(st) >> np.uint64(24)
        A = det_exp_neg(lam * np.float64(x)) * 256.0
        Ka = np.uint64(A)
        if v != Ka:
            acc = v < Ka
        else:
            acc = bernoulli_words(st, A - np.float64(Ka))
        if acc:
            return (h << np.int64(B)) | np.int64(x)


@jit
def geometric(st, p):
    kind, B, lam, stop = geom_params(p)
    return geom_draw(st, kind, B, lam, stop)


@jit
def binomial(st, n, p):
    n = np.int64(n)
    if n <= 0 or p <= 0.0:
        return np.int64(0)
    if p >= 1.0:
        return n
    flip = p > 0.5
    q = 1.0 - p if flip else p
    kind, B, lam, stop = geom_params(q)
    count = np.int64(0)
    pos = np.int64(-1)
    while True:
        g = geom_draw(st, kind, B, lam, stop)
        if g >= n - 1 - pos:
            break
        pos += g + 1
        count += 1
    return n - count if flip else count


@jit
def bernoulli_exp_neg(st, num, den):
    num = np.uint64(num)
    k = np.uint64(1)
    while True:
        if not (randint(st, den) < num):
            break
        if randint(st, k) != _ZERO:
            break
        k += _ONE
    return (k & _ONE) == _ONE


@jit
def discrete_laplace(st, t, s):
    t = np.uint64(t)
    s = np.uint64(s)
    while True:
        u = randint(st, t)
        if not bernoulli_exp_neg(st, u, t):
            continue
        v = _ZERO
        while bernoulli_exp_neg(st, _ONE, _ONE):
            v += _ONE
        y = np.int64((u + t * v) // s)
        neg = (next_u32(st) & _ONE) != _ZERO
        if neg and y == 0:
            continue
        return -y if neg else y
