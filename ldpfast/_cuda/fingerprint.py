"""Launcher of the keyed input fingerprint of :mod:`ldpfast.privacy.report_once`
(``csrc/cuda/fingerprint.cu``).
"""
from __future__ import annotations

import numpy as np

from ._core import _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


# --- keyed input fingerprint (fingerprint.cu) ---------------------------------------------------
# Warps of 32 blocks of 256 bytes; more threads than this only queue behind each other.
_FP_MAX_THREADS = 1 << 21


def fingerprint(data, k_nh, k_pad, k_prf, out) -> None:
    """Add the keyed fingerprint (csrc/common/fingerprint.h) of the bytes of ``data`` (a 1-D
    uint8 CUDA tensor) to ``out`` (two int64 holding uint64 sums, zeroed by the caller), as
    the C++ ``fingerprint``.  A view that is not 4-byte aligned is copied on the device first
    (the kernel reads whole words)."""
    import torch

    if data.dtype != torch.uint8 or data.dim() != 1:
        raise ValueError("data: expected a 1-D uint8 tensor")
    if out.dtype != torch.int64 or out.numel() != 2:
        raise ValueError("out: expected 2 int64 elements")
    nb = (data.numel() + 255) // 256
    if nb == 0:  # nothing to add: the sums of no blocks are zero
        return
    if data.data_ptr() % 4:
        data = data.clone()
    _launch("fingerprint", "fingerprint_u8", min(32 * ((nb + 31) // 32), _FP_MAX_THREADS),
            (_ptr(data), np.int64(data.numel()), np.uint64(k_nh), np.uint64(k_pad), np.uint64(k_prf),
             _ptr(out)), data.device)
