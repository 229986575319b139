"""Counter-based randomness shared by every backend (NumPy twin of ``csrc/common/rng.h``).

Every random quantity in ldpfast is addressed by ``(seed, stream, row, col)`` plus a
per-cell draw index, and produced by Philox4x32-10 (Salmon et al., SC'11).  The C++,
CUDA and Numba kernels and this module consume the same 32-bit words in the same order,
so a mechanism's output depends only on its seed and input: never on the backend, the
thread count or scheduling.

Counter layout (see ``csrc/common/philox.h``)::

    key     = (seed & 0xffffffff, seed >> 32)
    counter = (draw, col, row & 0xffffffff, ((row >> 32) & 0xffff) | (stream << 16))

Samplers and their exactness:

* ``uniform``: ``(k + 0.5) / 2**53`` with ``k`` uniform on 53 bits, so in (0, 1).
* ``bernoulli(p)``: ``P[true] = p`` exactly for the double ``p``: the 53 bits of ``uniform``
  decide unless they tie with ``p``'s (probability 2**-53), then further words do
  (:func:`bernoulli_words`, exact for any double).
* ``randint(k)``: masking + rejection, no modulo bias.
* ``geometric(p)``: ``G = 2**B H + R`` (memorylessness): ``H`` whole blocks of ``2**B`` failures,
  counted with exact Bernoulli trials, and ``R`` in ``[0, 2**B)`` by rejection (uniform ``B``
  bits accepted with exact Bernoulli ``exp(-lam x)``, ``lam = -log(1-p)``); see
  :func:`geom_draw`.  Full support up to the cap 2**62, and every probability factor within
  relative 2**-48 of Geometric(p); the only floating point is deterministic (``det_log1p``,
  ``det_exp_neg``, ``det_neg_expm1``: correctly rounded +,-,*,/ only), so the bits agree
  across backends (a libm ``log``/``exp`` may differ by one ulp between NumPy, glibc, CUDA).
  The former ``floor(log U / log(1-p))`` with a 53-bit ``U`` could not produce gaps beyond
  ``log(2**-54) / log(1-p)`` nor most gaps of probability below about ``2**-53 / p``.
* ``binomial(n, p)``: counts geometric jumps, exact given the geometric sampler.
* ``discrete_laplace(t, s)``: exact integer algorithm of Canonne, Kamath & Steinke
  (NeurIPS 2020, Alg. 2), scale t/s: P[Y=y] proportional to exp(-|y| s/t).  Continuous Laplace noise
  is drawn on a grid as ``granularity * DLap`` (:func:`laplace_grid`), which avoids the
  floating-point attack on naive inverse-CDF Laplace sampling (Mironov, CCS 2012).
"""
from __future__ import annotations

import enum
import math
import secrets

import numpy as np

#: Philox4x32 round multipliers (Random123's ``PHILOX_M4x32_0``, ``_1``).
M0, M1 = 0xD2511F53, 0xCD9E8D57
#: Philox4x32 key increments (Weyl constants, Random123's ``PHILOX_W32_0``, ``_1``).
W0, W1 = 0x9E3779B9, 0xBB67AE85
#: Mask of the low 32 bits.
MASK32 = 0xFFFFFFFF
#: Largest seed: seeds are 64-bit unsigned integers.
SEED_MAX = 2**64 - 1


class Stream(enum.IntEnum):
    """Named random streams (must match ``enum Stream`` in ``csrc/common/rng.h``)."""

    TEST = 0
    GRR = 1
    GRR_FS_SELECT = 2
    ONEBIT = 3
    MULTIBIT_SELECT = 4
    LABEL_RR = 5
    DPRR_DEGREE = 6
    DPRR_TRUE = 7
    DPRR_FALSE = 8
    RR_EDGES = 9
    LOCALLAP = 10
    SYNTH_CLASS = 11
    SYNTH_DEGREE = 12
    SYNTH_EDGES = 13
    SYNTH_FEATURES = 14
    SYNTH_TRIM = 15
    HETER_CENTRAL = 16
    HETER_PERIPHERAL = 17
    HETER_INFERENCE = 18


def resolve_seed(seed: int | None) -> int:
    """Validate a user seed; ``None`` draws 64 fresh bits from the OS (``secrets``).

    Raises
    ------
    TypeError, ValueError
        If ``seed`` is not an integer in ``[0, 2**64)``.
    """
    if seed is None:
        return secrets.randbits(64)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"seed: expected an int in [0, 2**64) or None, got {type(seed).__name__}")
    seed = int(seed)
    if not 0 <= seed <= SEED_MAX:
        raise ValueError(f"seed: expected an int in [0, 2**64), got {seed}")
    return seed


def philox4x32_10(ctr: np.ndarray, key: np.ndarray) -> np.ndarray:
    """Vectorised Philox4x32-10 on ``ctr`` (n, 4) and ``key`` (n, 2) uint32 arrays."""
    c = np.asarray(ctr, dtype=np.uint64).reshape(-1, 4).T.copy()
    k = np.asarray(key, dtype=np.uint64).reshape(-1, 2).T.copy()
    m32 = np.uint64(MASK32)
    for r in range(10):
        if r > 0:
            k[0] = (k[0] + np.uint64(W0)) & m32
            k[1] = (k[1] + np.uint64(W1)) & m32
        p0 = c[0] * np.uint64(M0)
        p1 = c[2] * np.uint64(M1)
        hi0, lo0 = p0 >> np.uint64(32), p0 & m32
        hi1, lo1 = p1 >> np.uint64(32), p1 & m32
        c = np.stack([hi1 ^ c[1] ^ k[0], lo1, hi0 ^ c[3] ^ k[1], lo0])
    return c.T.astype(np.uint32)


# --- deterministic logarithm (twin of csrc/common/detmath.h) -------------------------------
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SQRT_HALF = 0.70710678118654752440


def _atanh_tail(s):
    z = s * s
    p = np.full_like(z, 1.0 / 25.0)
    for k in (23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3):
        p = p * z + 1.0 / k
    return 2.0 * s * (z * p)


def _log1p_small(f):
    s = f / (2.0 + f)
    return 2.0 * s + _atanh_tail(s)


def det_log(x):
    """Natural log with bits identical to the C++/CUDA/Numba ``det_log`` (x > 0, normal)."""
    x = np.asarray(x, dtype=np.float64)
    m, e = np.frexp(x)
    small = m < _SQRT_HALF
    m = np.where(small, m * 2.0, m)
    de = (e - small.astype(e.dtype)).astype(np.float64)
    return de * _LN2_HI + (_log1p_small(m - 1.0) + de * _LN2_LO)


def det_log1p(x):
    """log(1 + x), accurate for tiny |x|; twin of ``det_log1p`` in ``detmath.h``."""
    x = np.asarray(x, dtype=np.float64)
    near = (x > -0.29) & (x < 0.41)
    safe = np.where(near, 0.0, x)
    return np.where(near, _log1p_small(np.where(near, x, 0.0)), det_log(1.0 + safe))


def det_exp_neg(y: float) -> float:
    """exp(-y) for 0 <= y <= ln2, bits identical to ``det_exp_neg`` in ``detmath.h`` (scalar)."""
    y = float(y)
    z, scale = -y, 1.0
    if y > 0.34657359027997264:
        z = (6.93147180369123816490e-01 - y) + 1.90821492927058770002e-10
        scale = 0.5
    p = 1.0 / 6227020800.0
    for c in _EXP_COEF:
        p = p * z + c
    return p * scale


_EXP_COEF = (1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0, 1.0 / 362880.0, 1.0 / 40320.0,
             1.0 / 5040.0, 1.0 / 720.0, 1.0 / 120.0, 1.0 / 24.0, 1.0 / 6.0, 0.5, 1.0, 1.0)
_EXPM1_COEF = (1.0 / 6227020800.0, -1.0 / 479001600.0, 1.0 / 39916800.0, -1.0 / 3628800.0,
               1.0 / 362880.0, -1.0 / 40320.0, 1.0 / 5040.0, -1.0 / 720.0, 1.0 / 120.0, -1.0 / 24.0,
               1.0 / 6.0, -0.5, 1.0)


def det_neg_expm1(t: float) -> float:
    """1 - exp(-t) for 0 <= t <= ln2, bits identical to ``detmath.h`` (scalar)."""
    t = float(t)
    if t > 0.34657359027997264:
        return 1.0 - det_exp_neg(t)
    p = -1.0 / 87178291200.0
    for c in _EXPM1_COEF:
        p = p * t + c
    return t * p


#: The geometric gap returned when no success can occur (``p <= 0`` or NaN) or the gap is at
#: least this large: beyond any row (``GEO_CAP`` of ``rng.h``).
GEO_CAP = 2**62


def bernoulli_words(src, q: float) -> bool:
    """Exact Bernoulli(q) for a double q from ``src.next_u32()`` words (twin of ``rng.h``):
    the uniform's bits are compared with q's 32 at a time; none drawn when q <= 0."""
    q = float(q)
    while True:
        if not q > 0.0:
            return False
        q = min(q, 1.0)
        Q = q * 4294967296.0
        K = int(Q)
        w = src.next_u32()
        if w != K:
            return w < K
        q = Q - float(K)


def bernoulli_u53(src, p: float) -> bool:
    """``CellRng.bernoulli``: P[true] = p exactly; the 53 bits of ``uniform()`` decide unless
    they tie with p's (probability 2**-53), then :func:`bernoulli_words` (twin of ``rng.h``)."""
    k = src.next_u64() >> 11
    if not p < 1.0:
        return p >= 1.0
    if not p > 0.0:
        return False
    P = p * 9007199254740992.0
    K = int(P)
    return k < K if k != K else bernoulli_words(src, P - float(K))


def geom_params(p: float) -> tuple[int, int, float, float]:
    """``(kind, B, lam, stop)`` of the geometric sampler (twin of ``geom_params`` in ``rng.h``):
    kind 0 always 0 (p >= 1), 1 always the cap (p <= 0 or NaN), 2 sample."""
    p = float(p)
    if p >= 1.0:
        return 0, 0, 0.0, 1.0
    if not p > 0.0:
        return 1, 0, 0.0, 1.0
    lam = p if p < 8.673617379884035e-19 else -float(det_log1p(-p))
    t, B = lam, 0
    while t < 0.34657359027997264 and B < 62:
        t *= 2.0
        B += 1
    return 2, B, lam, (p if B == 0 else det_neg_expm1(t))


def geom_draw(src, params) -> int:
    """Geometric gap from ``src`` (``next_u32``/``next_u64``), the reference of ``geom_draw`` in
    ``rng.h``: H (trials, one byte of a word each, a tie settled by :func:`bernoulli_words`)
    then R (uniform B bits accepted with Bernoulli ``det_exp_neg(lam x)``)."""
    kind, B, lam, stop = params
    if kind == 0:
        return 0
    if kind == 1:
        return GEO_CAP
    hmax = 1 << (62 - B)
    S = stop * 256.0
    K = int(S)
    h = 0
    done = False
    while not done:
        w = src.next_u32()
        for i in range(4):
            b = (w >> (8 * i)) & 0xFF
            if b < K:
                done = True
                break
            if b == K:  # tie; after a failure the next trial takes a fresh word
                if bernoulli_words(src, S - float(K)):
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
    mask = (1 << B) - 1
    while True:
        if B <= 24:
            w = src.next_u32()
            x, v = w & mask, w >> 24
        else:
            w = src.next_u64()
            x = w & mask
            v = w >> 56 if B <= 56 else src.next_u32() >> 24
        A = det_exp_neg(lam * float(x)) * 256.0
        Ka = int(A)
        if (v < Ka) if v != Ka else bernoulli_words(src, A - float(Ka)):
            return (h << B) | x


# --- scalar cell generator (reference for tests; kernels use C++/Numba/CUDA) ---------------
class CellRng:
    """Pure-Python twin of ``ldp::CellRng``: the word stream of one (seed, stream, row, col)."""

    def __init__(self, seed: int, stream: int, row: int, col: int):
        self.key = np.array([seed & MASK32, (seed >> 32) & MASK32], dtype=np.uint32)
        self.c1 = col & MASK32
        self.c2 = row & MASK32
        self.c3 = ((row >> 32) & 0xFFFF) | ((int(stream) << 16) & MASK32)
        self.draw = 0
        self.buf: list[int] = []

    def next_u32(self) -> int:
        if not self.buf:
            ctr = np.array([[self.draw, self.c1, self.c2, self.c3]], dtype=np.uint32)
            self.buf = [int(v) for v in philox4x32_10(ctr, self.key[None, :])[0]]
            self.draw += 1
        return self.buf.pop(0)

    def next_u64(self) -> int:
        hi = self.next_u32()
        return (hi << 32) | self.next_u32()

    def uniform(self) -> float:
        return ((self.next_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0)

    def bernoulli(self, p: float) -> bool:
        return bernoulli_u53(self, p)

    def randint(self, k: int) -> int:
        m = (1 << (k - 1).bit_length()) - 1 if k > 1 else 0
        while True:
            x = (self.next_u32() if k <= 2**32 else self.next_u64()) & m
            if x < k:
                return x

    def geometric(self, p: float) -> int:
        return geom_draw(self, geom_params(p))

    def binomial(self, n: int, p: float) -> int:
        if n <= 0 or p <= 0.0:
            return 0
        if p >= 1.0:
            return n
        flip = p > 0.5
        q = 1.0 - p if flip else p
        params = geom_params(q)
        count, pos = 0, -1
        while True:
            g = geom_draw(self, params)
            if g >= n - 1 - pos:
                break
            pos += g + 1
            count += 1
        return n - count if flip else count

    def bernoulli_exp_neg(self, num: int, den: int) -> bool:
        k = 1
        while self.randint(den) < num and self.randint(k) == 0:
            k += 1
        return k % 2 == 1

    def discrete_laplace(self, t: int, s: int) -> int:
        while True:
            u = self.randint(t)
            if not self.bernoulli_exp_neg(u, t):
                continue
            v = 0
            while self.bernoulli_exp_neg(1, 1):
                v += 1
            y = (u + t * v) // s
            neg = self.next_u32() & 1
            if neg and y == 0:
                continue
            return -y if neg else y


def epsilon_to_rational(eps: float) -> tuple[int, int, float]:
    """Parameters ``(t, s)`` of a discrete Laplace with P[Y=y] ~ exp(-eps_used |y|).

    The exact sampler needs the rate ``s / t`` as a ratio of integers.  ``eps`` is rounded
    *down* to ``eps_used = s / t`` with ``t`` a power of two and ``s < 2**32`` (relative
    change at most 2**-31); rounding down adds noise, so the guarantee ``eps_used <= eps``
    always holds.  ``eps`` must be in [2**-20, 2**31] (keeps ``t <= 2**52``).
    Returns ``(t, s, eps_used)``.
    """
    if isinstance(eps, bool) or not isinstance(eps, (int, float, np.floating, np.integer)) \
            or not math.isfinite(eps):
        raise ValueError(f"eps: expected a finite number in [2**-20, 2**31], got {eps!r}")
    eps = float(eps)
    if not 2.0**-20 <= eps <= 2.0**31:
        raise ValueError(f"eps: expected a value in [2**-20, 2**31] for discrete Laplace, got {eps}")
    k = 0
    while eps * 2.0**k < 2.0**31:
        k += 1
    s = math.floor(eps * 2.0**k)
    t = 2**k
    while s % 2 == 0 and t > 1:
        s //= 2
        t //= 2
    return t, s, s / t
