"""CUDA backend: ``csrc/cuda/*.cu`` compiled at first use through CuPy (NVRTC).

Not implemented yet (tracked in the CUDA issue): :func:`check_available` explains why the
backend cannot be used, so ``ldpfast info`` and backend selection report it clearly.
"""
from __future__ import annotations


def check_available() -> None:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover
        raise RuntimeError("torch is not installed") from exc
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device visible to torch")
    try:
        import cupy  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("cupy is not installed (pip install 'ldpfast[cuda]')") from exc
    raise RuntimeError("CUDA kernels are not built yet in this version")
