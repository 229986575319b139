"""The CUDA backend's core: finding ``csrc/``, assembling a ``.cu`` program for NVRTC,
loading it through CuPy and launching a kernel on torch's stream; the helpers every
launcher module uses.  See :mod:`ldpfast._cuda` for the design."""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path

import numpy as np

_THREADS = 256

# Our NVRTC options: C++17 and no FMA contraction (det_log and the 1-bit thresholds must
# round like the C++ build).
OPTIONS = ("-std=c++17", "--fmad=false")

# What CuPy's RawModule appends to our options (cupy/cuda/compiler.py, CuPy 13-14), so the
# NVRTC test compiles the same program; CuPy also adds -arch=sm_XX of the device at hand.
CUPY_APPENDED_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")

# Kernels launched by the launcher modules, per source file (the NVRTC test checks they exist).
KERNELS = {
    "rng": ("fill_u32", "fill_uniform", "fill_randint", "fill_geometric", "fill_binomial",
            "fill_discrete_laplace"),
    "propagate": ("spmm_f32_i32", "spmm_f64_i32", "spmm_f32_i64", "spmm_f64_i64",
                  "spmm_chunks_f32_i32", "spmm_chunks_f64_i32", "spmm_chunks_f32_i64",
                  "spmm_chunks_f64_i64", "spmm_combine_f32", "spmm_combine_f64",
                  "spmm_bf16_i32", "spmm_bf16_i64", "spmm_chunks_bf16_i32", "spmm_chunks_bf16_i64",
                  "spmm_combine_bf16"),
    "reconstruct": ("fs_counts_f32_i32", "fs_counts_f64_i32", "fs_counts_f32_i64",
                    "fs_counts_f64_i64", "fs_estimate_index_f32", "fs_estimate_index_f64"),
    "sampling": ("heter_central", "heter_nodes_i32", "heter_nodes_i64", "heter_edges_i32",
                 "heter_edges_i64", "heter_infer_i32", "heter_infer_i64"),
    "features": ("grr_i32", "grr_i64", "grr_fs_i32", "grr_fs_i64",
                 "onebit_f32", "onebit_f64", "multibit_f32", "multibit_f64",
                 "rr_labels_i32", "rr_labels_i64", "check_categorical_i32",
                 "check_categorical_i64", "check_range_f32", "check_range_f64"),
    "fingerprint": ("fingerprint_u8",),
    "userkey": ("row_digests", "set_digests_i32", "set_digests_i64", "report_keys"),
    "edges": ("dprr_probs", "rr_edges_i32", "rr_edges_i64", "ll_edge_values_i32",
              "ll_edge_values_i64", "ll_zero_i32", "ll_zero_i64", "csr_combine_i32",
              "csr_combine_i64"),
    "edges_keyed": ("keyed_hits", "keyed_pick_i32", "keyed_pick_i64", "keyed_dlap"),
    "synthetic": ("synth_edges", "synth_priorities", "synth_proto", "synth_features_f32",
                  "synth_features_u8"),
    "graph": ("check_csr_i32", "check_csr_i64", "csr_to_edge_index_i32",
              "csr_to_edge_index_i64", "sorted_csr_i32_i32", "sorted_csr_i32_i64",
              "sorted_csr_i64_i32", "sorted_csr_i64_i64"),
}


def csrc_dir() -> Path:
    """Folder holding ``common/`` and ``cuda/`` (source checkout or installed package)."""
    pkg = Path(__file__).resolve().parent.parent  # ldpfast/ (this file: ldpfast/_cuda/_core.py)
    for cand in (pkg / "csrc", pkg.parent / "csrc"):
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
        raise RuntimeError("cupy is not installed (pip install 'ldpfast[cuda12]' or "
                           "'ldpfast[cuda13]', matching the CUDA driver)") from exc
    csrc_dir()


_INCLUDE = re.compile(r'\s*#\s*include\s*"([^"]+)"')


def _inline(path: Path, root: Path, seen: set[Path], out: list[str]) -> None:
    # Paths in #line are relative to csrc/, so the source (and CuPy's cache key) does not
    # depend on where the package is installed.
    rel = os.path.relpath(path, root).replace(os.sep, "/")
    out.append(f'#line 1 "{rel}"')
    for no, line in enumerate(path.read_text().splitlines(), 1):
        m = _INCLUDE.match(line)
        if m is None:
            # every csrc header is #pragma once; `seen` does that job in one string
            out.append("" if line.strip() == "#pragma once" else line)
            continue
        inc = (path.parent / m.group(1)).resolve()
        if not inc.is_file():
            raise FileNotFoundError(f"{rel}:{no}: included file {m.group(1)!r} not found")
        if inc not in seen:
            seen.add(inc)
            _inline(inc, root, seen, out)
        out.append(f'#line {no + 1} "{rel}"')


def program(name: str) -> tuple[str, tuple[str, ...]]:
    """Source string and NVRTC options of ``csrc/cuda/<name>.cu`` exactly as the runtime
    hands them to CuPy: quoted includes inlined (see the module docstring)."""
    root = csrc_dir()
    path = (root / "cuda" / f"{name}.cu").resolve()
    out: list[str] = []
    _inline(path, root, {path}, out)
    return "\n".join(out) + "\n", OPTIONS


def kernel_cache_dir() -> str:
    """Where CuPy keeps compiled modules (``CUPY_CACHE_DIR``, default ``~/.cupy/kernel_cache``)."""
    return os.environ.get("CUPY_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cupy",
                                                            "kernel_cache")


def gpu_info() -> dict:
    """The GPU, CUDA and CuPy versions and the kernel cache, for ``ldpfast info``; each entry
    says why when it cannot be read (no GPU, no CuPy)."""
    out: dict = {"kernel_cache": kernel_cache_dir()}
    try:
        import torch

        out["torch_cuda"] = torch.version.cuda
        if torch.cuda.is_available():
            out["devices"] = [
                f"{i}: {torch.cuda.get_device_name(i)} (sm_{''.join(map(str, torch.cuda.get_device_capability(i)))}, "
                f"{torch.cuda.get_device_properties(i).total_memory / 2**30:.0f} GiB)"
                for i in range(torch.cuda.device_count())]
        else:
            out["devices"] = "none visible to torch"
    except Exception as exc:  # noqa: BLE001 - reported, not raised
        out["devices"] = f"unknown ({exc})"
    try:
        import cupy

        out["cupy"] = cupy.__version__
        try:
            out["cuda_runtime"] = cupy.cuda.runtime.runtimeGetVersion()
            out["cuda_driver"] = cupy.cuda.runtime.driverGetVersion()
            out["nvrtc"] = ".".join(map(str, cupy.cuda.nvrtc.getVersion()))
        except Exception as exc:  # noqa: BLE001 - no driver: say so
            out["cuda_runtime"] = f"unavailable ({exc})"
    except ImportError:
        out["cupy"] = "not installed (pip install 'ldpfast[cuda12]' or 'ldpfast[cuda13]')"
    return out


@functools.cache
def _module(name: str):
    import cupy

    src, options = program(name)
    return cupy.RawModule(code=src, options=options)


def _stream(device):
    import cupy
    import torch

    return cupy.cuda.ExternalStream(torch.cuda.current_stream(device).cuda_stream)


def _ptr(t):
    if not t.is_cuda or not t.is_contiguous():
        raise ValueError("CUDA kernels need contiguous CUDA tensors")
    return np.uint64(t.data_ptr())


def _launch(module: str, kernel: str, n_threads: int, args: tuple, device=None) -> None:
    """Launch ``kernel`` over ``n_threads`` threads on torch's current stream of ``device``
    (a torch CUDA device; default: the current one)."""
    import cupy
    import torch

    if kernel not in KERNELS[module]:
        raise KeyError(f"{module}.cu: {kernel} is not a listed kernel")
    if n_threads <= 0:
        return
    dev = torch.device(device if device is not None else "cuda")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    blocks = (n_threads + _THREADS - 1) // _THREADS
    with cupy.cuda.Device(index):
        fn = _module(module).get_function(kernel)
        with _stream(index):
            fn((blocks,), (_THREADS,), args)


def _prefix(counts):
    """rowptr (n + 1, int64) of per-row counts, on the device."""
    import torch

    rp = torch.zeros(counts.numel() + 1, dtype=torch.int64, device=counts.device)
    torch.cumsum(counts, 0, out=rp[1:])
    return rp


def _suffix(t, name: str) -> str:
    import torch

    suf = {torch.int32: "i32", torch.int64: "i64", torch.float32: "f32",
           torch.float64: "f64"}.get(t.dtype)
    if suf is None:
        raise ValueError(f"{name}: unsupported dtype {t.dtype}")
    return suf


def _col_suffix(col) -> str:
    import torch

    return {torch.int32: "i32", torch.int64: "i64"}[col.dtype]


# Null pointer for an absent optional tensor (the unweighted spmm: val = NULL).
NULL = np.uint64(0)


def _via_core(name: str):
    """A stand-in for this module's ``name`` that looks it up at each call: the launcher
    modules bind ``_launch`` and ``_ptr`` through it, so patching ``_core._launch`` (the
    launch-ABI test does) reaches every launcher from one place."""
    def call(*args, **kwargs):
        return globals()[name](*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call
