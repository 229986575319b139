"""Numba twin of ``csrc/cpu/rng.cpp``: raw Philox blocks and per-cell sampler fills."""
from __future__ import annotations

import numba as nb
import numpy as np

from . import rng as R

pjit = nb.njit(cache=True, nogil=True, parallel=True)


@pjit
def _philox_blocks(c, k, o):
    for i in nb.prange(c.shape[0] // 4):
        r = R.philox4x32_10(np.uint64(c[4 * i]), np.uint64(c[4 * i + 1]), np.uint64(c[4 * i + 2]),
                            np.uint64(c[4 * i + 3]), np.uint64(k[2 * i]), np.uint64(k[2 * i + 1]))
        for j in range(4):
            o[4 * i + j] = np.uint32(r[j])


def philox_blocks(ctr, key, out):
    _philox_blocks(ctr.reshape(-1), key.reshape(-1), out.reshape(-1))


@pjit
def _fill(out, seed, stream, row0, kind, a, b):
    R_, C = out.shape
    for r in nb.prange(R_):
        st = np.empty(11, dtype=np.uint64)
        for c in range(C):
            R.cell_init(st, seed, stream, np.uint64(row0) + np.uint64(r), c)
            if kind == 0:
                out[r, c] = R.next_u32(st)
            elif kind == 1:
                out[r, c] = R.uniform(st)
            elif kind == 2:
                out[r, c] = R.randint(st, np.uint64(a))
            elif kind == 3:
                out[r, c] = R.geometric(st, b)
            elif kind == 4:
                out[r, c] = R.binomial(st, np.int64(a), b)
            elif kind == 6:
                out[r, c] = R.bernoulli(st, b)
            else:
                out[r, c] = R.discrete_laplace(st, np.uint64(a), np.uint64(b))


def fill_u32(out, seed, stream, row0):
    _fill(out, np.uint64(seed), stream, row0, 0, 0, 0.0)


def fill_uniform(out, seed, stream, row0):
    _fill(out, np.uint64(seed), stream, row0, 1, 0, 0.0)


def fill_randint(out, seed, stream, row0, k):
    _fill(out, np.uint64(seed), stream, row0, 2, np.uint64(k), 0.0)


def fill_geometric(out, seed, stream, row0, p):
    _fill(out, np.uint64(seed), stream, row0, 3, 0, float(p))


def fill_binomial(out, seed, stream, row0, n, p):
    _fill(out, np.uint64(seed), stream, row0, 4, n, float(p))


def fill_bernoulli(out, seed, stream, row0, p):
    _fill(out, np.uint64(seed), stream, row0, 6, 0, float(p))


def geom_params(p):
    kind, B, lam, stop = R.geom_params(float(p))
    return int(kind), int(B), float(lam), float(stop)


def fill_discrete_laplace(out, seed, stream, row0, t, s):
    # b carries s; it is an integer < 2**63 so the float round-trip is exact for powers of 2
    _fill(out, np.uint64(seed), stream, row0, 5, np.uint64(t), float(s))


det_log = R.det_log
det_log1p = R.det_log1p
det_exp_neg = R.det_exp_neg
det_neg_expm1 = R.det_neg_expm1
