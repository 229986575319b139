"""Launchers of the synthetic-graph generator (``csrc/cuda/synthetic.cu``): the Miller-Hagberg
walk, the trim priorities and the features.
"""
from __future__ import annotations

import numpy as np

from ._core import NULL, _prefix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


# --- synthetic graphs (synthetic.cu) ----------------------------------------------------------
# Contracts of the C++ synth_edge_count / _fill, synth_priorities and synth_features
# (csrc/cpu/synthetic.cpp); data arguments are CUDA tensors.  The node plan (weights, classes,
# ids, calibration: O(n C log n)) is computed on the host and uploaded once (synth_upload).

def synth_upload(arrays: dict, device) -> dict:
    """The host node arrays (NumPy) of a synthetic graph as CUDA tensors on ``device``."""
    import torch

    from .._oom import to_device

    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: expected a CUDA device, got {device!r}")
    return {k: to_device(torch.from_numpy(np.ascontiguousarray(a)), dev, k) for k, a in arrays.items()}


def synth_edges(W, cls, seg, fmat, wmax, wmin, scale, seed, attempt):
    """Upper triangle by position, (rowptr int64 (n + 1), col int32), of sampling attempt
    ``attempt``: a count launch, a device prefix sum, one host read of the total (the
    allocation size), a fill launch.  Same bits as the C++ synth_edge_count + synth_edge_fill."""
    import torch

    from .._oom import oom_guard

    for t, nm, dt in ((W, "W", torch.float64), (cls, "cls", torch.int32), (seg, "seg", torch.int64),
                      (fmat, "fmat", torch.float64), (wmax, "wmax", torch.float64), (wmin, "wmin", torch.float64)):
        if t.dtype != dt:
            raise ValueError(f"{nm}: expected {dt}, got {t.dtype}")
    n, C = W.numel(), seg.numel() - 1
    if cls.numel() != n or fmat.numel() != C * C or wmax.numel() != wmin.numel():
        raise ValueError("cls, fmat, wmax, wmin: sizes do not match W and seg")
    dev = W.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(W), _ptr(cls), _ptr(seg), _ptr(fmat), _ptr(wmax), _ptr(wmin), np.int64(n), np.int64(C),
            np.float64(scale), np.uint64(seed), np.int64(attempt))
    _launch("synthetic", "synth_edges", n, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    rp = _prefix(counts)
    del counts
    total = int(rp[-1])
    with oom_guard("synthetic: upper-triangle edge list", 4 * total):
        col = torch.empty(total, dtype=torch.int32, device=dev)
    _launch("synthetic", "synth_edges", n, head + (NULL, _ptr(rp), _ptr(col), np.int32(1)), dev)
    return rp, col


def synth_priorities(rowptr, total, seed):
    """Trim priority (a 32-bit word, stored as int64) of each of the ``total = rowptr[-1]``
    upper-triangle edges, as the C++ synth_priorities (``total`` from the caller, which has
    read it: no second host sync)."""
    import torch

    from .._oom import oom_guard

    if rowptr.dtype != torch.int64:
        raise ValueError(f"rowptr: expected torch.int64, got {rowptr.dtype}")
    n = rowptr.numel() - 1
    with oom_guard("synthetic: trim priorities", 8 * total):
        prio = torch.empty(total, dtype=torch.int64, device=rowptr.device)
    _launch("synthetic", "synth_priorities", n, (_ptr(rowptr), np.int64(n), np.uint64(seed), _ptr(prio)),
            rowptr.device)
    return prio


def synth_features(seed, y, C, signal, kind, x) -> None:
    """Class-correlated features into x ((n, d) float32, or uint8 for kind 0), as the C++
    synth_features (y: int64 labels in [0, C) on the device)."""
    import torch

    if x.dim() != 2 or x.shape[0] != y.numel():
        raise ValueError(f"x: expected shape ({y.numel()}, d)")
    if kind not in (0, 1):
        raise ValueError("kind: 0 (binary) or 1 (continuous)")
    if x.dtype == torch.uint8 and kind != 0:
        raise ValueError("x: uint8 output is for binary features only")
    suffix = {torch.float32: "f32", torch.uint8: "u8"}.get(x.dtype)
    if suffix is None:
        raise ValueError(f"x: expected float32 or uint8, got {x.dtype}")
    if y.dtype != torch.int64:
        raise ValueError(f"y: expected torch.int64, got {y.dtype}")
    n, d = x.shape
    q = torch.empty(C * d, dtype=torch.float64, device=x.device)
    _launch("synthetic", "synth_proto", C * d, (np.uint64(seed), np.int64(C), np.int64(d), np.float64(signal),
                                                _ptr(q)), x.device)
    _launch("synthetic", f"synth_features_{suffix}", n * d,
            (np.uint64(seed), _ptr(y), np.int64(n), np.int64(d), _ptr(q), np.int32(kind), _ptr(x)), x.device)
