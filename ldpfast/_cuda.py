"""CUDA backend: ``csrc/cuda/*.cu`` compiled at first use through CuPy (NVRTC).

Kernels take torch CUDA tensors by pointer and run on torch's current stream; outputs are
allocated by the caller (like the C++ kernels).  Compiled with ``--fmad=false`` so float
results round exactly like the CPU build (``-ffp-contract=off``): same seed, same bits.

Source assembly (:func:`program`, used by the runtime and by the NVRTC test): the quoted
``#include``s of a ``.cu`` file are inlined recursively, each file once, resolved relative
to the including file as nvcc does, with ``#line`` markers so compiler messages name the
original file and line.  Two reasons: NVRTC resolves ``"../common/philox.h"`` against its
include path, not against a file (the program is a string), so the sources failed to compile
at run time; and CuPy's on-disk cache (``~/.cupy/kernel_cache``) keys a module on the source
string, options, architecture and NVRTC version only, so an edited header behind an
``#include`` would silently reuse the old binary.  With the headers inlined, the key covers
them.  (``RawModule`` takes no header list outside jitify, so passing include names is not
an option.)

CuPy appends ``-ftz=true`` to the options (:data:`CUPY_APPENDED_OPTIONS`; the last ``-ftz``
wins), so float32 subnormals are flushed on the GPU unless a kernel avoids float32 maths:
the feature kernels widen float32 inputs with an exact conversion (``to_f64`` in
``csrc/common/features.h``) and do the rest in double; propagation adds, multiplies and
compares float32 with IEEE (non-.ftz) PTX forms (``csrc/common/propagate.h``).

Kernels: the HeterPoisson sampler (``sampling.cu``, bodies shared with the C++ build in
``csrc/common/sampling.h``; prefix sums and compaction as torch ops here), the RNG fills
(``rng.cu``), propagation (``propagate.cu``, body shared with the C++
build in ``csrc/common/propagate.h``; rows longer than :data:`SPMM_CHUNK` entries are split
into fixed chunks combined in order, so hubs do not serialise on one warp) and the feature / label
randomisers and input checks (``features.cu``, bodies shared with the C++ build in
``csrc/common/features.h``), the keyed input fingerprint of
:mod:`ldpfast.privacy.report_once` (``fingerprint.cu``, body in ``csrc/common/fingerprint.h``),
the edge mechanisms (``edges.cu``: DPRR's per-user
probabilities, the sparse RR sampler, LocalLap's entry noise and zero candidates, the
server-side row combination; bodies shared with ``csrc/cpu/edges.cpp`` in
``csrc/common/edges.h``) and the graph checks / edge_index writer (``graph.cu``, body in
``csrc/common/graph.h``) and the synthetic-graph generator (``synthetic.cu``: the
Miller-Hagberg walk, the trim priorities and the features, bodies shared with
``csrc/cpu/synthetic.cpp`` in ``csrc/common/synthetic.h``; it has only been compiled, never
run on a GPU).  Variable-size outputs (noisy lists, candidates, combinations) are
built by a count launch, a device prefix sum (``torch.cumsum``), one host read of the total
to allocate, and a fill launch: the edge list never goes through the host.

Torch-native on CUDA (no custom kernel; deterministic, listed here as issue 18 asks):
COO -> CSR with sort / dedup / weight sums and the transpose (``ldpfast/graph.py``: stable
``torch.sort`` on a 64-bit key, ``unique``-by-neighbour-comparison, ``bincount`` + ``cumsum``,
repeated weights summed rank by rank), because a stable device sort is what a hand-written
kernel would do and it gives the C++ counting sort's result; LocalLap's top-T selection
(``mechanisms/edges.py``: the T-th largest value by ``torch.kthvalue`` on exact integers, the
strict winners by comparison, the ties by index order; the random tie-break draws only
positions among the ties, from NumPy's Philox on the host exactly as the CPU path, so it
needs the number of ties and returns the chosen ranks, never the candidates); the masked
CSRs and searchsorted of LocalLap (``torch.cumsum``, boolean indexing, ``torch.searchsorted``);
the synthetic generator's exact-count trim (a stable ``torch.sort`` of the per-edge
priorities: the ``drop`` lowest go, ties in edge order, the edges the C++ histogram trim
removes) and its symmetric CSR (``torch.sort`` of distinct 64-bit (row, col) keys and
``torch.searchsorted`` for the row pointers: the sorted adjacency, which is what the C++
counting sort builds).
"""
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

# Kernels launched from this module, per source file (the NVRTC test checks they exist).
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
    "features": ("grr_i32", "grr_i64", "grr_fs_flags", "grr_fs_i32", "grr_fs_i64",
                 "onebit_f32", "onebit_f64", "multibit_f32", "multibit_f64",
                 "rr_labels_i32", "rr_labels_i64", "check_categorical_i32",
                 "check_categorical_i64", "check_range_f32", "check_range_f64"),
    "fingerprint": ("fingerprint_u8",),
    "edges": ("dprr_probs", "rr_edges_i32", "rr_edges_i64", "ll_edge_values_i32",
              "ll_edge_values_i64", "ll_zero_i32", "ll_zero_i64", "csr_combine_i32",
              "csr_combine_i64"),
    "synthetic": ("synth_edges", "synth_priorities", "synth_proto", "synth_features_f32",
                  "synth_features_u8"),
    "graph": ("check_csr_i32", "check_csr_i64", "csr_to_edge_index_i32",
              "csr_to_edge_index_i64", "sorted_csr_i32_i32", "sorted_csr_i32_i64",
              "sorted_csr_i64_i32", "sorted_csr_i64_i64"),
}


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


# Rows with more entries than this are split into chunks of this many entries, summed by
# separate warps and combined in chunk order (propagate.cu); shorter rows match C++ bit for bit.
SPMM_CHUNK = 512

# Null pointer for an absent optional tensor (the unweighted spmm: val = NULL).
NULL = np.uint64(0)


def spmm_plan(rowptr, chunk: int = SPMM_CHUNK):
    """Chunks of the rows longer than ``chunk``, computed on the device with torch (two host
    syncs for the sizes), or None when there are none: ``(long_row, long_first, chunk_row,
    chunk_k0)``, chunk q of long row r = ``long_row[r]`` covering entries ``chunk_k0[q] ..
    +chunk``; the chunks of row r are ``long_first[r] .. long_first[r + 1]``.  Depends only on
    rowptr and chunk, so results do not depend on the launch."""
    import torch

    deg = rowptr[1:] - rowptr[:-1]
    long_row = torch.nonzero(deg > chunk).flatten()
    if long_row.numel() == 0:
        return None
    nch = (deg[long_row] + chunk - 1) // chunk
    long_first = torch.zeros(long_row.numel() + 1, dtype=torch.int64, device=rowptr.device)
    torch.cumsum(nch, 0, out=long_first[1:])
    nchunks = int(long_first[-1])
    chunk_row = torch.repeat_interleave(long_row, nch, output_size=nchunks)
    first = torch.repeat_interleave(long_first[:-1], nch, output_size=nchunks)
    pos = torch.arange(nchunks, dtype=torch.int64, device=rowptr.device) - first
    chunk_k0 = rowptr[chunk_row] + pos * chunk
    return long_row, long_first, chunk_row.contiguous(), chunk_k0.contiguous()


def spmm_scaled(rowptr, col, a, b, x, y, self_loop, val=None, *, chunk: int = SPMM_CHUNK,
                plan=None) -> None:
    """y = diag(a) (A [+I]) diag(b) x, A weighted by ``val`` (None: unweighted); all
    arguments CUDA tensors, same contract as the C++ ``spmm_scaled`` (csrc/cpu/propagate.cpp).
    Rows of at most ``chunk`` entries are bit-identical to C++; longer ones are summed in
    fixed chunks combined in chunk order (deterministic, close to C++ but not bit-identical).
    ``plan``: a precomputed :func:`spmm_plan` of ``rowptr`` and ``chunk``."""
    import torch

    if x.dim() != 2 or y.shape != x.shape or y.dtype != x.dtype:
        raise ValueError("x, y: expected 2-D tensors of one shape and dtype")
    n, d = x.shape
    if rowptr.numel() != n + 1 or a.numel() != n or b.numel() != n:
        raise ValueError(f"rowptr, a, b: expected {n + 1}, {n}, {n} elements (x has {n} rows)")
    if chunk < 1:
        raise ValueError("chunk: expected >= 1")
    fdt = {torch.float32: "f32", torch.float64: "f64", torch.bfloat16: "bf16"}[x.dtype]
    idt = {torch.int32: "i32", torch.int64: "i64"}[col.dtype]
    sdt = torch.float32 if x.dtype == torch.bfloat16 else x.dtype  # bf16 storage, float maths
    for t, nm in ((a, "a"), (b, "b")) + (() if val is None else ((val, "val"),)):
        if t.dtype != sdt:
            raise ValueError(f"{nm}: dtype {t.dtype}, expected {sdt} for x of dtype {x.dtype}")
    pv = NULL if val is None else _ptr(val)
    if plan is None:
        plan = spmm_plan(rowptr, chunk)
    sl = np.int32(bool(self_loop))
    _launch("propagate", f"spmm_{fdt}_{idt}", n * 32,
            (_ptr(rowptr), _ptr(col), pv, _ptr(a), _ptr(b), _ptr(x), _ptr(y), np.int64(n),
             np.int64(d), sl, np.int64(chunk)), x.device)
    if plan is None:
        return
    long_row, long_first, chunk_row, chunk_k0 = plan
    nchunks, nlong = chunk_row.numel(), long_row.numel()
    partial = torch.empty(nchunks, d, dtype=sdt, device=x.device)
    _launch("propagate", f"spmm_chunks_{fdt}_{idt}", nchunks * 32,
            (_ptr(rowptr), _ptr(col), pv, _ptr(b), _ptr(x), _ptr(chunk_row), _ptr(chunk_k0),
             _ptr(partial), np.int64(nchunks), np.int64(d), np.int64(chunk)), x.device)
    _launch("propagate", f"spmm_combine_{fdt}", nlong * 32,
            (_ptr(long_row), _ptr(long_first), _ptr(partial), _ptr(a), _ptr(b), _ptr(x), _ptr(y),
             np.int64(nlong), np.int64(d), sl), x.device)


# --- feature / label randomisers and input checks (features.cu) -------------------------------
# Same names, arguments and checks as the C++ entry points (csrc/cpu/features.cpp): data
# arguments are CUDA tensors, the per-column parameters (k, thresholds) small host arrays that
# are copied to the device here.

def _suffix(t, name: str) -> str:
    import torch

    suf = {torch.int32: "i32", torch.int64: "i64", torch.float32: "f32",
           torch.float64: "f64"}.get(t.dtype)
    if suf is None:
        raise ValueError(f"{name}: unsupported dtype {t.dtype}")
    return suf


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


def _same_shape(a, b, na: str, nb: str) -> None:
    if tuple(a.shape) != tuple(b.shape):
        raise ValueError(f"{nb}: shape differs from {na}")


def _on_device(arr, dtype, like):
    """A small host parameter array as a contiguous tensor on ``like``'s device."""
    import torch

    return torch.from_numpy(np.ascontiguousarray(arr, dtype=dtype)).to(like.device)


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
    return _on_device(k, np.int64, x), _on_device(T.view(np.int64), np.int64, x)


def grr(x, k, thresholds, seed, out) -> None:
    kd, Td = _cat_args(x, k, thresholds, out)
    n, d = x.shape
    _launch("features", f"grr_{_suffix(x, 'x')}", n,
            (_ptr(x), _ptr(out), np.int64(n), np.int64(d), _ptr(kd), _ptr(Td),
             np.uint64(seed)), x.device)


def grr_fs(x, k, thresholds, m, seed, out) -> None:
    import torch

    kd, Td = _cat_args(x, k, thresholds, out)
    n, d = x.shape
    if not 1 <= m <= d:
        raise ValueError("m: expected an int in [1, d]")
    flags = torch.empty(2, dtype=torch.int32, device=x.device)
    _launch("features", "grr_fs_flags", 1, (_ptr(kd), np.int64(d), _ptr(flags)), x.device)
    _launch("features", f"grr_fs_{_suffix(x, 'x')}", n,
            (_ptr(x), _ptr(out), np.int64(n), np.int64(d), _ptr(kd), _ptr(Td), np.int64(m),
             np.uint64(seed), _ptr(flags)), x.device)


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


def _onebit_blocks(x, alpha, beta, t_lo, span, seed, out, sub) -> None:
    n, d = x.shape
    _launch("features", f"onebit_{_suffix(x, 'x')}", n * ((d + 3) // 4),
            (_ptr(x), _ptr(out), np.int64(n), np.int64(d), np.float64(alpha), np.float64(beta),
             np.uint64(t_lo), np.float64(span), np.uint64(seed), np.uint32(sub)), x.device)


def onebit(x, alpha, beta, t_lo, span, seed, out) -> None:
    _onebit_args(x, out, alpha, beta, t_lo, span)
    _onebit_blocks(x, alpha, beta, t_lo, span, seed, out, _SUB_ONEBIT)


def multibit_encode(x, m, alpha, beta, t_lo, span, seed, out) -> None:
    _onebit_args(x, out, alpha, beta, t_lo, span)
    n, d = x.shape
    if not 1 <= m <= d:
        raise ValueError("m: expected an int in [1, d]")
    if m == d:  # multibit_row's m = d case, one thread per Philox block instead of per row
        _onebit_blocks(x, alpha, beta, t_lo, span, seed, out, _SUB_MULTIBIT)
        return
    _launch("features", f"multibit_{_suffix(x, 'x')}", n,
            (_ptr(x), _ptr(out), np.int64(n), np.int64(d), np.int64(m), np.float64(alpha),
             np.float64(beta), np.uint64(t_lo), np.float64(span), np.uint64(seed)), x.device)


def rr_labels(y, mask, num_classes, threshold, seed, out) -> None:
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
    _launch("features", f"rr_labels_{_suffix(y, 'y')}", n,
            (_ptr(y), _ptr(mask), _ptr(out), np.int64(n), np.uint64(num_classes),
             np.uint64(threshold), np.uint64(seed)), y.device)


def _first_index(kernel: str, x, n_threads: int, args: tuple) -> int:
    """Smallest flat index flagged by a check kernel, or -1 (the one host sync of a check)."""
    import torch

    first = torch.full((1,), -1, dtype=torch.int64, device=x.device)  # all ones: no hit
    _launch("features", kernel, n_threads, (_ptr(x), *args, _ptr(first)), x.device)
    return int(first.item())


def check_categorical(x, k) -> int:
    if x.dim() != 2:
        raise ValueError("x: expected a 2-D tensor")
    n, d = x.shape
    k = np.ascontiguousarray(k, dtype=np.int64).reshape(-1)
    if k.size != d:
        raise ValueError(f"k: expected {d} elements, got {k.size}")
    kd = _on_device(k, np.int64, x)  # held until launched: a freed block could be reused
    return _first_index(f"check_categorical_{_suffix(x, 'x')}", x, n * d,
                        (np.int64(n), np.int64(d), _ptr(kd)))


def check_range(x, alpha, beta) -> int:
    N = x.numel()
    return _first_index(f"check_range_{_suffix(x, 'x')}", x, N,
                        (np.int64(N), np.float64(alpha), np.float64(beta)))


# --- HeterPoisson sampling (sampling.cu) -------------------------------------------------------
# Same names and arguments as the C++ entry points (csrc/cpu/sampling.cpp) where they exist;
# data arguments are CUDA tensors.  Prefix sums (cumsum) are torch ops on the device.

def _col_suffix(col) -> str:
    import torch

    return {torch.int32: "i32", torch.int64: "i64"}[col.dtype]


def heter_central(cand, seed, step, q_b, flags) -> int:
    """flags[i] = central trial of candidate cand[i] at step; returns the count (one sync)."""
    m = cand.numel()
    _launch("sampling", "heter_central", m,
            (_ptr(cand), np.int64(m), np.uint64(seed), np.uint32(step), np.float64(q_b), _ptr(flags)),
            cand.device)
    return int(flags.sum())


def heter_nodes(rowptr, col, deg, centers, cand_mask, allow_mask, seed, step, q_b, M, drop, ub_ptr,
                counts, n_id, zeroed) -> None:
    """Node lists into slots ub_ptr[b] (>= 1 + deg(centers[b])), sizes into counts; allow_mask
    None or empty: every node may be peripheral.  Centres are trusted to be valid node ids
    (the sampler draws them from its candidates)."""
    B = centers.numel()
    allow = NULL if allow_mask is None or allow_mask.numel() == 0 else _ptr(allow_mask)
    _launch("sampling", f"heter_nodes_{_col_suffix(col)}", B,
            (_ptr(rowptr), _ptr(col), _ptr(deg), _ptr(centers), np.int64(B), _ptr(cand_mask), allow,
             np.uint64(seed), np.uint32(step), np.float64(q_b), np.float64(M), np.int32(bool(drop)),
             _ptr(ub_ptr), _ptr(counts), _ptr(n_id), _ptr(zeroed)), centers.device)


def heter_infer(rowptr, col, centers, allow_mask, seed, step, n_test):
    """Inference sub-graphs (section 4.4) of the test nodes ``centers`` as (node_ptr, n_id):
    count pass, cumsum, fill pass, the same node lists as the C++ heter_infer_nodes.
    allow_mask None or empty: every neighbour admissible."""
    import torch

    if n_test < 0:
        raise ValueError("n_test: expected >= 0")
    B = centers.numel()
    dev = centers.device
    allow = NULL if allow_mask is None or allow_mask.numel() == 0 else _ptr(allow_mask)
    kern = f"heter_infer_{_col_suffix(col)}"
    counts = torch.zeros(B, dtype=torch.int64, device=dev)
    head = (_ptr(rowptr), _ptr(col), _ptr(centers), np.int64(B), allow, np.uint64(seed), np.uint32(step),
            np.int64(n_test))
    _launch("sampling", kern, B, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    node_ptr = _prefix(counts)
    n_id = torch.empty(int(node_ptr[-1]), dtype=torch.int64, device=dev)
    _launch("sampling", kern, B, head + (NULL, _ptr(node_ptr), _ptr(n_id), np.int32(1)), dev)
    return node_ptr, n_id


def heter_edges(rowptr, col, n_id, node_ptr, induced):
    """(2, E) int64 edge_index (block-diagonal local ids) of the induced (or star) sub-graph of
    every node list: count pass, cumsum, fill pass, as the C++ sampler."""
    import torch

    B = node_ptr.numel() - 1
    dev = n_id.device
    counts = torch.zeros(B, dtype=torch.int64, device=dev)
    kern = f"heter_edges_{_col_suffix(col)}"
    _launch("sampling", kern, B, (_ptr(rowptr), _ptr(col), _ptr(n_id), _ptr(node_ptr), np.int64(B),
                                  np.int32(bool(induced)), NULL, _ptr(counts), NULL, NULL, np.int32(0)), dev)
    edge_ptr = torch.zeros(B + 1, dtype=torch.int64, device=dev)
    torch.cumsum(counts, 0, out=edge_ptr[1:])
    E = int(edge_ptr[-1])
    out = torch.empty(2, E, dtype=torch.int64, device=dev)
    src, dst = out[0], out[1]  # contiguous rows of a (2, E) tensor
    _launch("sampling", kern, B, (_ptr(rowptr), _ptr(col), _ptr(n_id), _ptr(node_ptr), np.int64(B),
                                  np.int32(bool(induced)), _ptr(edge_ptr), NULL, _ptr(src), _ptr(dst),
                                  np.int32(1)), dev)
    return out


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
# --- synthetic graphs (synthetic.cu) ----------------------------------------------------------
# Contracts of the C++ synth_edge_count / _fill, synth_priorities and synth_features
# (csrc/cpu/synthetic.cpp); data arguments are CUDA tensors.  The node plan (weights, classes,
# ids, calibration: O(n C log n)) is computed on the host and uploaded once (synth_upload).

def synth_upload(arrays: dict, device) -> dict:
    """The host node arrays (NumPy) of a synthetic graph as CUDA tensors on ``device``."""
    import torch

    from ._oom import to_device

    dev = torch.device(device)
    if dev.type != "cuda":
        raise ValueError(f"device: expected a CUDA device, got {device!r}")
    return {k: to_device(torch.from_numpy(np.ascontiguousarray(a)), dev, k) for k, a in arrays.items()}


def synth_edges(W, cls, seg, fmat, wmax, wmin, scale, seed, attempt):
    """Upper triangle by position, (rowptr int64 (n + 1), col int32), of sampling attempt
    ``attempt``: a count launch, a device prefix sum, one host read of the total (the
    allocation size), a fill launch.  Same bits as the C++ synth_edge_count + synth_edge_fill."""
    import torch

    from ._oom import oom_guard

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

    from ._oom import oom_guard

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


# --- edge mechanisms (edges.cu) and graph checks (graph.cu) -----------------------------------
# Same contracts as the C++ entry points of csrc/cpu/edges.cpp; data arguments are CUDA
# tensors.  Variable-size outputs: count launch, torch.cumsum, one host read of the total
# (the only sync: the size of the allocation), fill launch.

def _prefix(counts):
    """rowptr (n + 1, int64) of per-row counts, on the device."""
    import torch

    rp = torch.zeros(counts.numel() + 1, dtype=torch.int64, device=counts.device)
    torch.cumsum(counts, 0, out=rp[1:])
    return rp


def dprr_probs(rowptr, noise, g, p, pm):
    """(d_star, q, p_true, p_false), float64 per user: DPRR lines 2-7 (csrc/common/edges.h
    dprr_probs) from the CSR degrees and the int64 degree noise (n,) in grid units."""
    import torch

    n = rowptr.numel() - 1
    if noise.numel() != n or noise.dtype != torch.int64:
        raise ValueError(f"noise: expected {n} int64 values")
    outs = [torch.empty(n, dtype=torch.float64, device=rowptr.device) for _ in range(4)]
    _launch("edges", "dprr_probs", n, (_ptr(rowptr), _ptr(noise.contiguous()), np.int64(n), np.float64(g),
                                       np.float64(p), np.float64(pm), *[_ptr(o) for o in outs]), rowptr.device)
    return tuple(outs)


def edges_rr(rowptr, col, seed, st_t, c_t, st_f, c_f, p_true, p_false, pub=None):
    """Noisy lists of the sparse RR sampler as a CSR (rowptr, col): row i keeps each true edge
    with probability p_true[i] and each non-neighbour j != i with p_false[i]; pub (uint8,
    optional): rows copied unchanged.  Same bits as the C++ edges_rr_sample / _count + _fill."""
    import torch

    n = rowptr.numel() - 1
    for t, nm in ((p_true, "p_true"), (p_false, "p_false")):
        if t.dtype != torch.float64 or t.numel() != n:
            raise ValueError(f"{nm}: expected {n} float64 values")
    pp = NULL if pub is None or pub.numel() == 0 else _ptr(pub)
    if pp is not NULL and (pub.dtype != torch.uint8 or pub.numel() != n):
        raise ValueError(f"public: expected {n} uint8 flags")
    kern = f"rr_edges_{_col_suffix(col)}"
    dev = rowptr.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(rowptr), _ptr(col), np.int64(n), np.uint64(seed), np.uint32(st_t), np.uint32(c_t),
            np.uint32(st_f), np.uint32(c_f), _ptr(p_true), _ptr(p_false), pp)
    _launch("edges", kern, n, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    orp = _prefix(counts)
    ocol = torch.empty(int(orp[-1]), dtype=col.dtype, device=dev)
    _launch("edges", kern, n, head + (NULL, _ptr(orp), _ptr(ocol), np.int32(1)), dev)
    return orp, ocol


def locallap_edge_values(rowptr, col, seed, t, s, one, out_val) -> None:
    """out_val[k] = one + DLap(t, s) for every entry (i, j > i), INT64_MIN below the diagonal."""
    n = rowptr.numel() - 1
    if t < 1 or s < 1:
        raise ValueError("t, s: expected >= 1")
    _launch("edges", f"ll_edge_values_{_col_suffix(col)}", n,
            (_ptr(rowptr), _ptr(col), np.int64(n), np.uint64(seed), np.uint64(t), np.uint64(s),
             np.int64(one), _ptr(out_val)), rowptr.device)


def locallap_zero(excl_rowptr, excl_col, seed, rnd, pi, lo, hi, t, s):
    """LocalLap zero candidates of round ``rnd`` as (rowptr, col, int64 values); same bits as
    the C++ locallap_zero / locallap_zero_sample."""
    import torch

    n = excl_rowptr.numel() - 1
    if t < 1 or s < 1:
        raise ValueError("t, s: expected >= 1")
    kern = f"ll_zero_{_col_suffix(excl_col)}"
    dev = excl_rowptr.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(excl_rowptr), _ptr(excl_col), np.int64(n), np.uint64(seed), np.uint32(rnd), np.float64(pi),
            np.int64(lo), np.int64(hi), np.uint64(t), np.uint64(s))
    _launch("edges", kern, n, head + (_ptr(counts), NULL, NULL, NULL, np.int32(0)), dev)
    orp = _prefix(counts)
    nnz = int(orp[-1])
    oc = torch.empty(nnz, dtype=excl_col.dtype, device=dev)
    ov = torch.empty(nnz, dtype=torch.int64, device=dev)
    _launch("edges", kern, n, head + (NULL, _ptr(orp), _ptr(oc), _ptr(ov), np.int32(1)), dev)
    return orp, oc, ov


def csr_combine(rowptr_a, col_a, rowptr_b, col_b, mode):
    """Row-wise union (0) / intersection (1) / lower (2) / upper (3) of two sorted CSRs of one
    column dtype, as (rowptr, col)."""
    import torch

    if mode not in (0, 1, 2, 3):
        raise ValueError("mode: expected 0..3")
    if col_a.dtype != col_b.dtype:
        raise ValueError(f"col_b: dtype {col_b.dtype} differs from col_a ({col_a.dtype})")
    n = rowptr_a.numel() - 1
    if rowptr_b.numel() != n + 1:
        raise ValueError(f"rowptr_b: expected {n + 1} elements")
    kern = f"csr_combine_{_col_suffix(col_a)}"
    dev = rowptr_a.device
    counts = torch.zeros(n, dtype=torch.int64, device=dev)
    head = (_ptr(rowptr_a), _ptr(col_a), _ptr(rowptr_b), _ptr(col_b), np.int64(n), np.int32(mode))
    _launch("edges", kern, n, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    orp = _prefix(counts)
    oc = torch.empty(int(orp[-1]), dtype=col_a.dtype, device=dev)
    _launch("edges", kern, n, head + (NULL, _ptr(orp), _ptr(oc), np.int32(1)), dev)
    return orp, oc


def edges_check_csr(rowptr, col) -> int:
    """Flags of a CSR (1 range, 2 unsorted / duplicate, 4 self loop, 8 asymmetric), as the C++
    edges_check_csr; one host read of two words."""
    import torch

    n = rowptr.numel() - 1
    out = torch.zeros(2, dtype=torch.int64, device=rowptr.device)
    _launch("graph", f"check_csr_{_col_suffix(col)}", n, (_ptr(rowptr), _ptr(col), np.int64(n), _ptr(out)),
            rowptr.device)
    f, h = (int(v) for v in out.tolist())
    return f | (8 if h != 0 else 0)


def csr_to_edge_index(rowptr, col, out_ei, layout) -> None:
    """(2, nnz) int64 edge_index of a CSR into out_ei: layout 0 (col, row), 1 (row, col)."""
    if layout not in (0, 1):
        raise ValueError("layout: expected 0 (col, row) or 1 (row, col)")
    n = rowptr.numel() - 1
    if tuple(out_ei.shape) != (2, col.numel()):
        raise ValueError(f"out_ei: expected shape (2, {col.numel()})")
    _launch("graph", f"csr_to_edge_index_{_col_suffix(col)}", n,
            (_ptr(rowptr), _ptr(col), np.int64(n), _ptr(out_ei), np.int32(layout)), rowptr.device)


SORTED_CHUNK = 32  # edges per thread of sorted_csr_* (graph.cu)


def edges_sorted_csr(src, dst, n, out_rowptr, out_col) -> int:
    """CSR of an edge_index sorted by (source, target) into out_rowptr / out_col, checked in the
    same pass; returns the edges_check_csr flags (flags & 3: outputs not built), as the C++
    edges_sorted_csr.  One host read of two words."""
    import torch

    E = src.numel()
    if dst.numel() != E or dst.dtype != src.dtype:
        raise ValueError(f"dst: expected {E} values of dtype {src.dtype} (as src)")
    if out_rowptr.numel() != n + 1 or out_col.numel() != E:
        raise ValueError(f"out_rowptr, out_col: expected {n + 1} and {E} elements")
    if n < 0:
        raise ValueError("n: expected >= 0")
    if E == 0:
        out_rowptr.zero_()
        return 0
    out = torch.zeros(2, dtype=torch.int64, device=src.device)
    kern = f"sorted_csr_{_col_suffix(src)}_{_col_suffix(out_col)}"
    _launch("graph", kern, (E + SORTED_CHUNK - 1) // SORTED_CHUNK,
            (_ptr(src), _ptr(dst), np.int64(E), np.int64(n), _ptr(out_rowptr), _ptr(out_col), _ptr(out)),
            src.device)
    f, h = (int(v) for v in out.tolist())
    if f & 3:
        return f
    return f | (8 if h != 0 else 0)
