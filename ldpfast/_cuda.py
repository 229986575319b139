"""CUDA backend: ``csrc/cuda/*.cu`` compiled at first use through CuPy (NVRTC).

Kernels take torch CUDA tensors by pointer and run on torch's current stream; outputs are
allocated by the caller (like the C++ kernels).  Compiled with ``--fmad=false`` so float
results round exactly like the CPU build (``-ffp-contract=off``): same seed, same bits.
CuPy caches compiled modules on disk (``~/.cupy/kernel_cache``).

Covered so far: the RNG fills (``rng.cu``) and propagation (``propagate.cu``).  Status and
GPU test results: see the CUDA issue notes.
"""
from __future__ import annotations

import functools
from pathlib import Path

_THREADS = 256


def csrc_dir() -> Path:
    """Folder holding ``common/`` and ``cuda/`` (source checkout or installed package)."""
    here = Path(__file__).resolve().parent
    for cand in (here / "csrc", here.parent / "csrc"):
        if (cand / "cuda").is_dir():
            return cand
    raise RuntimeError("CUDA sources (csrc/cuda) not found next to the ldpfast package")


def check_available() -> None:
    """Raise with the reason when the CUDA backend cannot run here."""
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
    csrc_dir()


@functools.cache
def _module(name: str):
    import cupy

    src = (csrc_dir() / "cuda" / f"{name}.cu").read_text()
    return cupy.RawModule(code=src, options=("-std=c++17", "--fmad=false",
                                             f"-I{csrc_dir()}"))


def _stream():
    import cupy
    import torch

    return cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)


def _ptr(t):
    import numpy as np

    if not t.is_cuda or not t.is_contiguous():
        raise ValueError("CUDA kernels need contiguous CUDA tensors")
    return np.uint64(t.data_ptr())


def _launch(module: str, kernel: str, n_threads: int, args: tuple) -> None:
    if n_threads <= 0:
        return
    fn = _module(module).get_function(kernel)
    blocks = (n_threads + _THREADS - 1) // _THREADS
    with _stream():
        fn((blocks,), (_THREADS,), args)


def _fill(kernel: str, out, seed: int, stream: int, row0: int, *extra) -> None:
    import numpy as np

    if out.dim() != 2:
        raise ValueError("out: expected a 2-D tensor")
    R, C = out.shape
    _launch("rng", kernel, R * C, (_ptr(out), np.int64(R), np.int64(C), np.uint64(seed),
                                   np.uint32(stream), np.uint64(row0), *extra))


def fill_u32(out, seed, stream, row0):
    _fill("fill_u32", out, seed, stream, row0)


def fill_uniform(out, seed, stream, row0):
    _fill("fill_uniform", out, seed, stream, row0)


def fill_randint(out, seed, stream, row0, k):
    import numpy as np

    _fill("fill_randint", out, seed, stream, row0, np.uint64(k))


def fill_geometric(out, seed, stream, row0, p):
    import numpy as np

    _fill("fill_geometric", out, seed, stream, row0, np.float64(p))


def fill_binomial(out, seed, stream, row0, n, p):
    import numpy as np

    _fill("fill_binomial", out, seed, stream, row0, np.int64(n), np.float64(p))


def fill_discrete_laplace(out, seed, stream, row0, t, s):
    import numpy as np

    _fill("fill_discrete_laplace", out, seed, stream, row0, np.uint64(t), np.uint64(s))


def spmm_scaled(rowptr, col, a, b, x, y, self_loop) -> None:
    """y = diag(a) (A [+I]) diag(b) x; all arguments CUDA tensors (see propagate.cpp)."""
    import numpy as np
    import torch

    n, d = x.shape
    fdt = {torch.float32: "f32", torch.float64: "f64"}[x.dtype]
    idt = {torch.int32: "i32", torch.int64: "i64"}[col.dtype]
    _launch("propagate", f"spmm_{fdt}_{idt}", n * 32,
            (_ptr(rowptr), _ptr(col), _ptr(a), _ptr(b), _ptr(x), _ptr(y), np.int64(n),
             np.int64(d), np.int32(bool(self_loop))))
