"""Launchers of the per-user report keys (``csrc/cuda/userkey.cu``): same names and contract
as the C++ entry points (``csrc/cpu/userkey.cpp``), on CUDA tensors.  uint64 arrays cross as
int64 tensors holding the same bits."""
from __future__ import annotations

import numpy as np

from ._core import NULL, _col_suffix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


def _check(t, dtype, name, shape=None):
    import torch

    if not isinstance(t, torch.Tensor) or t.dtype != dtype or not t.is_contiguous():
        raise ValueError(f"{name}: expected a contiguous {dtype} tensor")
    if shape is not None and tuple(t.shape) != shape:
        raise ValueError(f"{name}: expected shape {shape}, got {tuple(t.shape)}")


def row_digests(rows, k_nh, k_pad, k_prf, out) -> None:
    """``rows``: uint8 (n, nbytes); ``out``: int64 (n, 2).  A warp per row."""
    import torch

    _check(rows, torch.uint8, "rows")
    if rows.dim() != 2:
        raise ValueError("rows: expected a 2-D uint8 tensor")
    n, nbytes = rows.shape
    _check(out, torch.int64, "out", (n, 2))
    _launch("userkey", "row_digests", 32 * n,
            (_ptr(rows), np.int64(n), np.int64(nbytes), np.uint64(k_nh), np.uint64(k_pad), np.uint64(k_prf),
             _ptr(out)), rows.device)


def set_digests(rowptr, col, node_keys, k_set, out) -> None:
    """``out``: int64 (n, 2), zeroed here; a thread per neighbour entry."""
    import torch

    _check(rowptr, torch.int64, "rowptr")
    _check(node_keys, torch.int64, "node_keys")
    n = rowptr.numel() - 1
    _check(out, torch.int64, "out", (n, 2))
    out.zero_()
    _launch("userkey", f"set_digests_{_col_suffix(col)}", int(col.numel()),
            (_ptr(rowptr), _ptr(col), np.int64(n), _ptr(node_keys), np.uint64(k_set), _ptr(out)), rowptr.device)


def report_keys(ukeys, extra, digests, k_a, k_b, k_c, seeds, rids) -> None:
    """``extra``, ``digests`` (n, 2) and ``rids`` may be None; a thread per user."""
    import torch

    _check(ukeys, torch.int64, "ukeys")
    n = ukeys.numel()
    _check(seeds, torch.int64, "seeds", (n,))
    for t, name, shape in ((extra, "extra", (n,)), (digests, "digests", (n, 2)), (rids, "rids", (n,))):
        if t is not None:
            _check(t, torch.int64, name, shape)
    opt = [NULL if t is None else _ptr(t) for t in (extra, digests)]
    _launch("userkey", "report_keys", n,
            (_ptr(ukeys), *opt, np.int64(n), np.uint64(k_a), np.uint64(k_b), np.uint64(k_c), _ptr(seeds),
             NULL if rids is None else _ptr(rids)), ukeys.device)
