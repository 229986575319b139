"""Launchers of the RNG fills (``csrc/cuda/rng.cu``): Philox draws into a 2-D output, rows
numbered from ``row0``.
"""
from __future__ import annotations

import numpy as np

from ._core import _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


def _fill(kernel: str, out, seed: int, stream: int, row0: int, *extra) -> None:
    if out.dim() != 2:
        raise ValueError("out: expected a 2-D tensor")
    R, C = out.shape
    _launch("rng", kernel, R * C, (_ptr(out), np.int64(R), np.int64(C), np.uint64(seed),
                                   np.uint32(stream), np.uint64(row0), *extra), out.device)


def fill_u32(out, seed, stream, row0):
    _fill("fill_u32", out, seed, stream, row0)


def fill_uniform(out, seed, stream, row0):
    _fill("fill_uniform", out, seed, stream, row0)


def fill_randint(out, seed, stream, row0, k):
    _fill("fill_randint", out, seed, stream, row0, np.uint64(k))


def fill_geometric(out, seed, stream, row0, p):
    _fill("fill_geometric", out, seed, stream, row0, np.float64(p))


def fill_binomial(out, seed, stream, row0, n, p):
    _fill("fill_binomial", out, seed, stream, row0, np.int64(n), np.float64(p))


def fill_discrete_laplace(out, seed, stream, row0, t, s):
    _fill("fill_discrete_laplace", out, seed, stream, row0, np.uint64(t), np.uint64(s))
