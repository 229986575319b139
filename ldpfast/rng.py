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
* ``bernoulli(p)``: ``uniform() < p`` (probability within 2**-53 of ``p``).
* ``randint(k)``: masking + rejection, no modulo bias.
* ``geometric(p)``: ``floor(log U / log(1-p))`` with a deterministic logarithm
  (``det_log``) built from correctly rounded +,-,*,/ only, so the bits agree across
  backends (a libm ``log`` may differ by one ulp between NumPy, glibc and CUDA).
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

M0, M1 = 0xD2511F53, 0xCD9E8D57
W0, W1 = 0x9E3779B9, 0xBB67AE85
MASK32 = 0xFFFFFFFF
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
        return self.uniform() < p

    def randint(self, k: int) -> int:
        m = (1 << (k - 1).bit_length()) - 1 if k > 1 else 0
        while True:
            x = (self.next_u32() if k <= 2**32 else self.next_u64()) & m
            if x < k:
                return x

    def geometric(self, p: float) -> int:
        if p >= 1.0:
            return 0
        g = float(det_log(self.uniform())) / float(det_log1p(-p))
        return 2**62 if not g < 2.0**62 else int(g)

    def binomial(self, n: int, p: float) -> int:
        if n <= 0 or p <= 0.0:
            return 0
        if p >= 1.0:
            return n
        flip = p > 0.5
        q = 1.0 - p if flip else p
        count, pos = 0, -1
        while True:
            g = self.geometric(q)
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
