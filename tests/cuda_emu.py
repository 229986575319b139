"""Python side of tests/cuda_emu.h: csrc/cuda kernels compiled by g++ and run on the host, with
``ldpfast._cuda._core._launch`` / ``_ptr`` pointed at them, so ldpfast's own CUDA launchers run
on CPU tensors (by pointer).  Used by tests/test_cuda_emulated*.py and, for the whole ``-m cuda``
suite, by tools/gpu_dryrun.py (LDPFAST_DRYRUN_EMULATE=1).  It checks indexing, lane roles,
collectives and bits against the C++ build; not the GPU's timing, memory model or compiler.
"""
from __future__ import annotations

import ctypes
import hashlib
import re
import subprocess
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
CSRC = HERE.parent / "csrc"
THREADS = 256  # ldpfast._cuda._core._THREADS
_CTYPES = {"int64_t": ctypes.c_int64, "uint64_t": ctypes.c_uint64, "uint32_t": ctypes.c_uint32,
           "int": ctypes.c_int, "double": ctypes.c_double}


def signatures(src: str) -> dict[str, list[str]]:
    """{kernel: [parameter type, ...]} of the extern "C" kernels of a .cu source."""
    return {name: [" ".join(p.split()[:-1]).replace("const ", "").strip() for p in params.split(",")]
            for name, params in re.findall(r'extern "C" __global__ void (?:[A-Z_]+ )?(\w+)\(([^)]*)\)', src, re.DOTALL)}


def build(module: str, tmp: Path) -> dict:
    """The emulated kernels of csrc/cuda/<module>.cu: {kernel: (function, parameter types)}.
    The library is named by a hash of the sources, so ``tmp`` may be a cache shared by runs."""
    cu = CSRC / "cuda" / f"{module}.cu"
    sigs = signatures(cu.read_text())
    wrappers = []
    for name, types in sigs.items():
        params = ", ".join(f"{t} a{i}" for i, t in enumerate(types))
        call = ", ".join(f"a{i}" for i in range(len(types)))
        wrappers.append(f'extern "C" void emu_{name}(int64_t blocks, {params}) '
                        f'{{ emu_launch(blocks, {THREADS}, [=] {{ {name}({call}); }}); }}')
    text = f'#include "{HERE / "cuda_emu.h"}"\n#include "{cu}"\n' + "\n".join(wrappers) + "\n"
    h = hashlib.sha256(text.encode())
    for f in sorted((CSRC / "common").glob("*.h")) + [cu, HERE / "cuda_emu.h"]:
        h.update(f.read_bytes())
    tag = h.hexdigest()[:16]
    lib = Path(tmp) / f"emu_{module}_{tag}.so"
    if not lib.exists():
        src = Path(tmp) / f"emu_{module}_{tag}.cpp"
        src.write_text(text)
        r = subprocess.run(["g++", "-std=c++20", "-O1", "-ffp-contract=off", "-shared", "-fPIC",
                            f"-I{CSRC}", str(src), "-o", str(lib)], capture_output=True, text=True, check=False)
        if r.returncode != 0:
            raise RuntimeError(f"emulated {module}.cu does not compile:\n{r.stderr[-4000:]}")
    so = ctypes.CDLL(str(lib))
    return {name: (getattr(so, f"emu_{name}"), types) for name, types in sigs.items()}


def launcher(kernels: dict, launches: list):
    """A stand-in for ``_core._launch``: kernels = {module: build(module)}; appends each launched
    kernel's name to ``launches``."""
    from ldpfast import _cuda

    def launch(module, kernel, n_threads, args, device=None):
        if module not in kernels:
            raise RuntimeError(f"{module}.cu is not emulated here")
        assert kernel in _cuda.KERNELS[module], kernel
        fn, types = kernels[module][kernel]
        assert len(args) == len(types), kernel
        cargs = [ctypes.c_void_p(int(a)) if t.endswith("*") else _CTYPES[t](a.item())
                 for a, t in zip(args, types)]
        launches.append(kernel)
        if n_threads > 0:
            fn(ctypes.c_int64((n_threads + THREADS - 1) // THREADS), *cargs)
    return launch


def host_ptr(t) -> np.uint64:
    """``_core._ptr`` for the emulation: a contiguous CPU tensor's address."""
    if not t.is_contiguous():
        raise ValueError("CUDA kernels need contiguous CUDA tensors")
    return np.uint64(t.data_ptr())
