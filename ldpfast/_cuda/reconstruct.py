"""Launchers of RGNN's feature reconstruction (``csrc/cuda/reconstruct.cu``): the first-hop
counts and the per-block argmax of the GRR-FS estimate.
"""
from __future__ import annotations

import numpy as np

from ._core import _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


def fs_counts(rowptr, col, e, a, y, self_loop) -> None:
    """y = diag(a) (A [+I]) e for uint8 indicators e, counted in integers (RGNN Algorithm 1,
    first hop); CUDA tensors, same contract as the C++ ``fs_counts``
    (csrc/cpu/reconstruct.cpp) and bit-identical to it for every row."""
    import torch

    if e.dim() != 2 or y.dim() != 2 or y.shape != e.shape:
        raise ValueError("e, y: expected 2-D tensors of one shape")
    n, w = e.shape
    if rowptr.numel() != n + 1 or a.numel() != n:
        raise ValueError(f"rowptr, a: expected {n + 1}, {n} elements (e has {n} rows)")
    if e.dtype != torch.uint8:
        raise ValueError(f"e: expected uint8, got {e.dtype}")
    if y.dtype not in (torch.float32, torch.float64) or a.dtype != y.dtype:
        raise ValueError("y, a: expected float32 or float64 of one dtype")
    fdt = {torch.float32: "f32", torch.float64: "f64"}[y.dtype]
    idt = {torch.int32: "i32", torch.int64: "i64"}[col.dtype]
    _launch("reconstruct", f"fs_counts_{fdt}_{idt}", n * 32,
            (_ptr(rowptr), _ptr(col), _ptr(e), _ptr(a), _ptr(y), np.int64(n), np.int64(w),
             np.int32(bool(self_loop))), y.device)


def fs_estimate_index(lam, gam, a, b, allbin, out, c0) -> None:
    """``out[:, c0 + t]`` = argmax of the GRR-FS estimate of block feature ``t`` (RGNN eq. 5,
    Algorithm 1 line 19); CUDA tensors (``gam`` int64), same contract as the C++
    ``fs_estimate_index``."""
    import torch

    if lam.dim() != 2 or out.dim() != 2 or out.shape[0] != lam.shape[0]:
        raise ValueError("lam, out: expected 2-D tensors with the same number of rows")
    n, w = lam.shape
    B, d = gam.numel(), out.shape[1]
    if lam.dtype not in (torch.float32, torch.float64) or a.dtype != lam.dtype or b.dtype != lam.dtype:
        raise ValueError("lam, a, b: expected float32 or float64 of one dtype")
    if out.dtype != torch.int64 or gam.dtype != torch.int64:
        raise ValueError("out, gam: expected int64")
    if a.numel() != B or b.numel() != B:
        raise ValueError(f"a, b: expected {B} elements (one per block feature)")
    if B and (int(gam.min()) < 2 or (allbin and int(gam.max()) != 2)):
        raise ValueError("gam: domain sizes must be >= 2 (all 2 when allbin)")
    if int((gam - 1).sum()) != w:
        raise ValueError("lam: expected sum(gam - 1) columns")
    if c0 < 0 or c0 + B > d:
        raise ValueError("c0: the block's columns must lie in [0, out.shape[1])")
    fdt = {torch.float32: "f32", torch.float64: "f64"}[lam.dtype]
    _launch("reconstruct", f"fs_estimate_index_{fdt}", n,
            (_ptr(lam), _ptr(gam), _ptr(a), _ptr(b), np.int64(n), np.int64(w), np.int64(B),
             np.int32(bool(allbin)), _ptr(out), np.int64(d), np.int64(c0)), lam.device)
