"""Launchers of the feature / label randomisers and input checks (``csrc/cuda/features.cu``).
"""
from __future__ import annotations

import numpy as np

from ._core import NULL, _suffix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


# --- feature / label randomisers and input checks (features.cu) -------------------------------
# Same names, arguments and checks as the C++ entry points (csrc/cpu/features.cpp): data
# arguments are CUDA tensors, the per-column parameters (k, thresholds) small host arrays that
# are copied to the device here.

def _same_shape(a, b, na: str, nb: str) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{nb}: shape differs from {na}")


def _on_device(arr, dtype, like):
    """A small host parameter array as a contiguous tensor on ``like``'s device."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(arr, dtype=dtype)).to(like.device)


def _seeds(seeds, x):
    """Pointer of the per-row report seeds: ``(n,)`` int64 (uint64 bits) on ``x``'s device."""
    import torch

    n = x.shape[0]
    if (not isinstance(seeds, torch.Tensor) or seeds.dtype != torch.int64 or seeds.device != x.device
            or tuple(seeds.shape) != (n,) or not seeds.is_contiguous()):
        raise ValueError(f"seeds: expected a contiguous int64 tensor of {n} per-row seeds on {x.device}")
    return _ptr(seeds)


ROWS_PER_WARP = 8  # features.cu keyed_rows


def _row_keys(seeds, x) -> tuple:
    """The kernels' RowKeys arguments (csrc/common/userkey.h): given per-row seeds (a tensor), or
    a :class:`ldpfast.privacy.users.KernelKeys`, whose seeds the kernel derives from each row's
    bytes as it reads the row (and writes to ``seeds``, and report ids to ``rids`` if asked)."""
    import torch

    zero = (np.uint64(0),) * 6
    if isinstance(seeds, torch.Tensor):
        return (_seeds(seeds, x), NULL, NULL, *zero, NULL, NULL)
    kk, n = seeds, x.shape[0]
    for t, name in ((kk.keys, "keys"), (kk.seeds, "seeds"), (kk.extra, "extra"), (kk.rids, "rids")):
        if t is not None and (t.dtype != torch.int64 or tuple(t.shape) != (n,) or t.device != x.device
                              or not t.is_contiguous()):
            raise ValueError(f"{name}: expected a contiguous int64 tensor of {n} on {x.device}")
    c = kk.ctx
    return (NULL, _ptr(kk.keys), NULL if kk.extra is None else _ptr(kk.extra),
            *(np.uint64(v) for v in (c.k_nh, c.k_pad, c.k_prf, c.k_a, c.k_b, c.k_c)),
            _ptr(kk.seeds), NULL if kk.rids is None else _ptr(kk.rids))


def _warps(n: int) -> int:
    """Threads of a launch with a warp per ROWS_PER_WARP rows."""
    return -(-n // ROWS_PER_WARP) * 32


def _cat_args(x, k, thresholds, out):
    if x.dim() != 2:
        raise ValueError("x: expected a 2-D tensor")
    _same_shape(x, out, "x", "out")
    if out.dtype != x.dtype:
        raise ValueError("out: dtype differs from x")
    d = x.shape[1]
    k = np.ascontiguousarray(k, dtype=np.int64).reshape(-1)
    T = np.ascontiguousarray(thresholds, dtype=np.uint64).reshape(-1)
    if k.size != d:
        raise ValueError(f"k: expected {d} elements, got {k.size}")
    if T.size != d:
        raise ValueError(f"thresholds: expected {d} elements, got {T.size}")
    if k.size and (k.min() < 1 or k.max() > 2**31):
        raise ValueError("k: domain sizes must lie in [1, 2^31]")
    if T.size and T.max() > 2**32:
        raise ValueError("thresholds: must be <= 2^32")
    # uint64 thresholds cross as int64 bits (the kernel reads them as uint64)
    return _on_device(k, np.int64, x), _on_device(T.view(np.int64), np.int64, x), _k_common(k)


def _k_common(k: np.ndarray) -> int:
    """The domain every column with k > 2 shares (their "other value" draws then go together,
    csrc/cuda/features.cu other_draws), else 0."""
    big = k[k > 2]
    return int(big[0]) if big.size and (big == big[0]).all() else 0


def _flagged(kernel: str, n_threads: int, args: tuple, like) -> int:
    """Launch a features.cu kernel whose last argument is its bad-index flag (one int64, all
    ones on entry: no bad index); returns the smallest flat index it flagged, or -1 (the call's
    one host sync)."""
    import torch

    bad = torch.full((1,), -1, dtype=torch.int64, device=like.device)
    _launch("features", kernel, n_threads, (*args, _ptr(bad)), like.device)
    return int(bad.item())


def grr(x, k, thresholds, seeds, out) -> int:
    """GRR into ``out``; returns the first flat index of ``x`` outside its domain, or -1 (then
    ``out`` holds the reports; otherwise discard it)."""
    kd, Td, kc = _cat_args(x, k, thresholds, out)
    n, d = x.shape
    return _flagged(f"grr_{_suffix(x, 'x')}", _warps(n),
                    (_ptr(x), _ptr(out), np.int64(n), np.int64(d), _ptr(kd), _ptr(Td), np.int64(kc),
                     *_row_keys(seeds, x)), x)


def grr_fs(x, k, thresholds, m, seeds, out) -> int:
    """GRR-FS into ``out``; returns the first bad flat index or -1, as :func:`grr`."""
    kd, Td, kc = _cat_args(x, k, thresholds, out)
    n, d = x.shape
    if not 1 <= m <= d:
        raise ValueError("m: expected an int in [1, d]")
    return _flagged(f"grr_fs_{_suffix(x, 'x')}", _warps(n),
                    (_ptr(x), _ptr(out), np.int64(n), np.int64(d), _ptr(kd), _ptr(Td), np.int64(m), np.int64(kc),
                     *_row_keys(seeds, x)), x)


def _onebit_args(x, out, alpha, beta, t_lo, span) -> None:
    import torch

    if x.dim() != 2:
        raise ValueError("x: expected a 2-D tensor")
    _same_shape(x, out, "x", "out")
    if out.dtype != torch.int8:
        raise ValueError("out: expected an int8 tensor")
    if not alpha < beta:
        raise ValueError("alpha, beta: expected alpha < beta")
    if not (1 <= t_lo <= 2**31 and span >= 0 and 2.0 * t_lo + span <= 2.0**32):
        raise ValueError("t_lo, span: expected 1 <= t_lo <= 2^31 and 2 t_lo + span <= 2^32")


_SUB_ONEBIT, _SUB_MULTIBIT = 0, 1  # csrc/common/features.h


def _onebit_blocks(x, alpha, beta, t_lo, span, seeds, out, sub) -> int:
    n, d = x.shape
    return _flagged(f"onebit_{_suffix(x, 'x')}", _warps(n),
                    (_ptr(x), _ptr(out), np.int64(n), np.int64(d), np.float64(alpha), np.float64(beta),
                     np.uint64(t_lo), np.float64(span), *_row_keys(seeds, x), np.uint32(sub)), x)


def onebit(x, alpha, beta, t_lo, span, seeds, out) -> int:
    """1-bit encoding into ``out``; returns the first flat index of ``x`` that is NaN or
    outside [alpha, beta], or -1 (then ``out`` holds the reports; otherwise discard it)."""
    _onebit_args(x, out, alpha, beta, t_lo, span)
    return _onebit_blocks(x, alpha, beta, t_lo, span, seeds, out, _SUB_ONEBIT)


def multibit_encode(x, m, alpha, beta, t_lo, span, seeds, out) -> int:
    """Multi-bit encoding into ``out``; returns the first bad flat index or -1, as :func:`onebit`."""
    _onebit_args(x, out, alpha, beta, t_lo, span)
    n, d = x.shape
    if not 1 <= m <= d:
        raise ValueError("m: expected an int in [1, d]")
    if m == d:  # multibit_row's m = d case: the lanes take Philox blocks, not Floyd's draws
        return _onebit_blocks(x, alpha, beta, t_lo, span, seeds, out, _SUB_MULTIBIT)
    return _flagged(f"multibit_{_suffix(x, 'x')}", _warps(n),
                    (_ptr(x), _ptr(out), np.int64(n), np.int64(d), np.int64(m), np.float64(alpha),
                     np.float64(beta), np.uint64(t_lo), np.float64(span), *_row_keys(seeds, x)), x)


def rr_labels(y, mask, num_classes, threshold, seeds, out) -> int:
    """Label RR into ``out``; returns the first masked node whose label is outside
    [0, num_classes), or -1 (then ``out`` holds the reports; otherwise discard it)."""
    import torch

    if y.dim() != 1:
        raise ValueError("y: expected a 1-D tensor")
    _same_shape(y, out, "y", "out")
    if out.dtype != y.dtype:
        raise ValueError("out: dtype differs from y")
    if mask.dtype != torch.bool or tuple(mask.shape) != tuple(y.shape):
        raise ValueError(f"mask: expected a bool tensor of {y.shape[0]} elements")
    if not 1 <= num_classes <= 2**31:
        raise ValueError("num_classes: expected an int in [1, 2^31]")
    if threshold > 2**32:
        raise ValueError("threshold: must be <= 2^32")
    n = y.shape[0]
    return _flagged(f"rr_labels_{_suffix(y, 'y')}", n,
                    (_ptr(y), _ptr(mask), _ptr(out), np.int64(n), np.uint64(num_classes),
                     np.uint64(threshold), *_row_keys(seeds, y)), y)


def check_categorical(x, k) -> int:
    if x.dim() != 2:
        raise ValueError("x: expected a 2-D tensor")
    n, d = x.shape
    k = np.ascontiguousarray(k, dtype=np.int64).reshape(-1)
    if k.size != d:
        raise ValueError(f"k: expected {d} elements, got {k.size}")
    kd = _on_device(k, np.int64, x)  # held until launched: a freed block could be reused
    return _flagged(f"check_categorical_{_suffix(x, 'x')}", n * d, (_ptr(x), np.int64(n), np.int64(d), _ptr(kd)), x)


def check_range(x, alpha, beta) -> int:
    N = x.numel()
    return _flagged(f"check_range_{_suffix(x, 'x')}", N, (_ptr(x), np.int64(N), np.float64(alpha), np.float64(beta)), x)
