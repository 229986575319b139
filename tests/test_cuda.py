"""CUDA kernels.

Without a GPU (CI): every .cu compiles with the local nvcc for sm_80 and sm_90, and through
NVRTC (libnvrtc from the ``nvidia-cuda-nvrtc`` wheel of the ``test`` extra, loaded with
ctypes) from exactly the source string and options ``ldpfast._cuda`` hands CuPy at run time;
the PTX has no FMA and no flushed float32 maths where bit-identity needs it; the source
assembly inlines headers (so CuPy's cache key covers them); and the C++ build runs every
branch of the shared bodies in ``csrc/common/features.h`` against the Numba twin; and
``synthetic.cu`` itself is compiled by g++ with a serial grid and run against the C++ build.
With a GPU (``pytest -m cuda``): bit-identity of every CUDA kernel with the C++ kernel
(propagation: rows of at most ``_cuda.SPMM_CHUNK`` entries; longer, chunked rows are checked
close and deterministic), propagate's autograd and KProp on CUDA against CPU, the public
feature / label ops keep CUDA tensors on the device, the edge kernels (edges.cu, graph.cu) and
the edge mechanisms (dprr, rr_edges, local_laplace, every server rule) and inference
sub-graphs equal the C++ results bit for bit.  None of these GPU tests has run yet.
"""
import ctypes
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from secret_keys import sec

from ldpfast import _cuda
from ldpfast.privacy.users import Keying

CSRC = Path(__file__).resolve().parents[1] / "csrc"
CU_FILES = sorted((CSRC / "cuda").glob("*.cu"))
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if Path("/usr/local/cuda/bin/nvcc").exists() else None)
ARCHS = ("sm_80", "sm_90")


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_cu_file_compiles_with_nvcc(cu, arch, tmp_path):
    r = subprocess.run([NVCC, "-c", "-std=c++17", "--fmad=false", f"-arch={arch}", f"-I{CSRC}", "-Xptxas", "-v",
                        str(cu), "-o", str(tmp_path / "k.o")], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]
    # No kernel keeps anything in local memory: a generator or Philox block indexed at run time
    # lands there, and the kernel then waits on L1 instead of DRAM (the 2026-11-27 profile).
    frames = re.findall(r"Function properties for (\w+)\s+(\d+) bytes stack frame, (\d+) bytes spill stores",
                        r.stdout + r.stderr)
    assert frames, (r.stdout + r.stderr)[-2000:]
    assert [f for f in frames if f[1] != "0" or f[2] != "0"] == []


def test_there_are_cuda_sources():
    assert {p.name for p in CU_FILES} >= {"rng.cu", "propagate.cu"}


# --- NVRTC, as at run time ---------------------------------------------------------------------
def _find_libnvrtc() -> tuple[Path | None, str]:
    """libnvrtc.so from the nvidia-cuda-nvrtc wheel (CUDA 13: nvidia/cu13/lib, CUDA 12:
    nvidia/cuda_nvrtc/lib), else (None, why)."""
    if not sys.platform.startswith("linux"):
        return None, "the NVRTC test loads libnvrtc.so (Linux only)"
    try:
        import nvidia
    except ImportError:
        return None, "nvidia-cuda-nvrtc is not installed (pip install 'ldpfast[test]')"
    libs = [p for root in nvidia.__path__ for p in Path(root).glob("*/lib/libnvrtc.so.*")
            if ".alt." not in p.name and p.name.split(".so.")[1].split(".")[0].isdigit()]
    if not libs:
        return None, f"no libnvrtc.so.* under {list(nvidia.__path__)}"
    return max(libs, key=lambda p: int(p.name.split(".so.")[1].split(".")[0])), ""  # newest


def _load_nvrtc():
    path, why = _find_libnvrtc()
    if path is None:
        return None, why
    try:
        # libnvrtc dlopens libnvrtc-builtins by soname; the wheel's folder is not on the
        # loader's path, so load it first (RTLD_GLOBAL makes the soname resolve to it).
        for builtins in sorted(path.parent.glob("libnvrtc-builtins.so*")):
            if ".alt." not in builtins.name:
                ctypes.CDLL(str(builtins), mode=ctypes.RTLD_GLOBAL)
        lib = ctypes.CDLL(str(path))
    except OSError as exc:
        return None, f"cannot load {path}: {exc}"
    vp = ctypes.c_void_p
    lib.nvrtcCreateProgram.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p, ctypes.c_char_p,
                                       ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
    lib.nvrtcCompileProgram.argtypes = [vp, ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.nvrtcGetProgramLogSize.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetProgramLog.argtypes = [vp, ctypes.c_char_p]
    lib.nvrtcGetCUBINSize.argtypes = [vp, ctypes.POINTER(ctypes.c_size_t)]
    lib.nvrtcGetCUBIN.argtypes = [vp, ctypes.c_char_p]
    lib.nvrtcDestroyProgram.argtypes = [ctypes.POINTER(vp)]
    return lib, ""


NVRTC, NVRTC_WHY = _load_nvrtc()


def nvrtc_compile(src: str, name: str, options) -> tuple[int, str, bytes]:
    """(nvrtcResult, log, cubin) of one NVRTC compilation."""
    prog = ctypes.c_void_p()
    assert NVRTC.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None,
                                    None) == 0
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        rc = NVRTC.nvrtcCompileProgram(prog, len(options), opts)
        size = ctypes.c_size_t()
        NVRTC.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value)
        NVRTC.nvrtcGetProgramLog(prog, log)
        cubin = b""
        if rc == 0:
            NVRTC.nvrtcGetCUBINSize(prog, ctypes.byref(size))
            buf = ctypes.create_string_buffer(size.value)
            NVRTC.nvrtcGetCUBIN(prog, buf)
            cubin = buf.raw
        return rc, log.value.decode(errors="replace"), cubin
    finally:
        NVRTC.nvrtcDestroyProgram(ctypes.byref(prog))


@pytest.mark.skipif(NVRTC is None, reason=NVRTC_WHY or "libnvrtc not loadable")
@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_cu_file_compiles_with_nvrtc_as_at_run_time(cu, arch):
    # The exact program the runtime hands CuPy, plus what CuPy's RawModule appends, with
    # the file compiled from somewhere else than its folder (NVRTC has no file to be relative to).
    src, options = _cuda.program(cu.stem)
    options = tuple(options) + _cuda.CUPY_APPENDED_OPTIONS + (f"-arch={arch}",)
    rc, log, cubin = nvrtc_compile(src, f"{cu.stem}.cu", options)
    assert rc == 0, f"NVRTC error {rc} for {cu.name} with {options}:\n{log[-4000:]}"
    for kernel in _cuda.KERNELS[cu.stem]:
        assert kernel.encode() in cubin, f"kernel {kernel} that ldpfast._cuda launches is missing"


def _nvrtc_ptx(name: str) -> str:
    """PTX of csrc/cuda/<name>.cu compiled as at run time (our options + CuPy's)."""
    src, options = _cuda.program(name)
    options = tuple(options) + _cuda.CUPY_APPENDED_OPTIONS + ("-arch=compute_80",)
    prog = ctypes.c_void_p()
    assert NVRTC.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), name.encode(), 0, None,
                                    None) == 0
    try:
        opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
        assert NVRTC.nvrtcCompileProgram(prog, len(options), opts) == 0
        size = ctypes.c_size_t()
        NVRTC.nvrtcGetPTXSize.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_size_t)]
        NVRTC.nvrtcGetPTX.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
        NVRTC.nvrtcGetPTXSize(prog, ctypes.byref(size))
        buf = ctypes.create_string_buffer(size.value)
        NVRTC.nvrtcGetPTX(prog, buf)
        return buf.value.decode()
    finally:
        NVRTC.nvrtcDestroyProgram(ctypes.byref(prog))


@pytest.mark.skipif(NVRTC is None, reason=NVRTC_WHY or "libnvrtc not loadable")
@pytest.mark.parametrize("name", ["features", "rng", "propagate", "sampling", "fingerprint", "edges", "graph",
                                  "reconstruct", "synthetic"])
def test_ptx_has_no_fma_and_no_flushed_float_maths(name):
    # --fmad=false must hold (det_log, 1-bit thresholds), and CuPy appends -ftz=true, which
    # would flush float32 subnormals (a float32 input widened to double included).
    import re

    ptx = _nvrtc_ptx(name)
    assert not re.findall(r"\bfma\.\S+", ptx)
    assert not re.findall(r"\b\S+\.ftz\S*", ptx), sorted(set(re.findall(r"\b\S+\.ftz\S*", ptx)))


# --- source assembly (what CuPy compiles and keys its cache on) -------------------------------
@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_program_inlines_every_quoted_include_once(cu):
    src, options = _cuda.program(cu.stem)
    assert '#include "' not in src
    assert not any(o.startswith("-I") for o in options)  # nothing left to resolve
    heads = [line for line in src.splitlines() if line.startswith("#line 1 ")]
    assert len(heads) == len(set(heads))  # each file once (#pragma once)
    assert heads[0] == f'#line 1 "cuda/{cu.name}"'
    for line in heads[1:]:
        assert (CSRC / line.split('"')[1]).is_file()


def test_program_changes_when_a_header_changes(tmp_path, monkeypatch):
    # CuPy keys its disk cache on the source string: a header edit must change it.
    shutil.copytree(CSRC, tmp_path / "csrc")
    monkeypatch.setattr(_cuda._core, "csrc_dir", lambda: tmp_path / "csrc")
    before, _ = _cuda.program("features")
    h = tmp_path / "csrc" / "common" / "philox.h"
    h.write_text(h.read_text() + "\n// edited\n")
    after, _ = _cuda.program("features")
    assert before != after and "// edited" in after
    assert str(tmp_path) not in after  # #line paths are relative: the key is install-independent


def test_program_names_a_missing_include(tmp_path, monkeypatch):
    (tmp_path / "csrc" / "cuda").mkdir(parents=True)
    (tmp_path / "csrc" / "cuda" / "bad.cu").write_text('// x\n#include "../common/nope.h"\n')
    monkeypatch.setattr(_cuda._core, "csrc_dir", lambda: tmp_path / "csrc")
    with pytest.raises(FileNotFoundError, match=r"cuda/bad.cu:2: .*nope.h"):
        _cuda.program("bad")


# --- launch ABI: what ldpfast._cuda passes matches each kernel's parameter list ------------------
_SCALARS = {"int64_t": np.int64, "uint64_t": np.uint64, "uint32_t": np.uint32, "int": np.int32,
            "double": np.float64}
_POINTEES = {"int32_t": torch.int32, "uint32_t": torch.int32, "int64_t": torch.int64,
             "uint64_t": torch.int64, "unsigned long long": torch.int64, "float": torch.float32,
             "double": torch.float64, "int8_t": torch.int8, "uint8_t": torch.uint8,
             "Bf16": torch.bfloat16,
             "bool": torch.bool}


def _kernel_signatures():
    """{kernel: [param type, ...]} of every extern "C" kernel, from the assembled sources."""
    import re

    sigs = {}
    for cu in CU_FILES:
        src, _ = _cuda.program(cu.stem)
        for name, params in re.findall(r'extern "C" __global__ void (?:[A-Z_]+ )?(\w+)\(([^)]*)\)', src):
            sigs[name] = [" ".join(p.split()[:-1]).replace("const ", "").strip()
                          for p in params.replace("\n", " ").split(",")]
    return sigs


class _FakePtr:
    def __init__(self, t):
        assert t.is_contiguous()
        self.dtype = t.dtype


def test_launch_arguments_match_kernel_signatures(monkeypatch):
    # CuPy passes each argument by its NumPy size and kind: a wrong count, a float where an
    # integer is expected or a tensor of the wrong dtype would read garbage on the GPU.
    launches = []
    monkeypatch.setattr(_cuda._core, "_ptr", _FakePtr)
    monkeypatch.setattr(_cuda._core, "_launch", lambda module, kernel, n, args, device=None:
                        launches.append((module, kernel, n, args)))
    g = np.random.default_rng(0)
    for it in (torch.int32, torch.int64):
        x = torch.from_numpy(g.integers(0, 2, (6, 5))).to(it)
        k, T = np.full(5, 2), np.full(5, 2**31, np.uint64)
        sd = torch.zeros(6, dtype=torch.int64)
        _cuda.grr(x, k, T, sd, torch.empty_like(x))
        _cuda.grr_fs(x, k, T, 2, sd, torch.empty_like(x))
        # the kernels deriving the seeds themselves (user keys, seeds and report ids out)
        kk = Keying(sec(5), ids=True).kernel_keys("grr", {}, 6, "cpu")
        _cuda.grr(x, k, T, kk, torch.empty_like(x))
        _cuda.grr_fs(x, k, T, 2, kk, torch.empty_like(x))
        _cuda.check_categorical(x, k)
        y = x[:, 0].contiguous()
        _cuda.rr_labels(y, torch.ones(6, dtype=torch.bool), 2, 2**31, sd, torch.empty_like(y))
        kl = Keying(sec(5), ids=True).kernel_keys("rr_labels", {}, 6, "cpu", extra=torch.ones(6, dtype=torch.bool))
        _cuda.rr_labels(y, torch.ones(6, dtype=torch.bool), 2, 2**31, kl, torch.empty_like(y))
    for ft in (torch.float32, torch.float64):
        xf = torch.rand(6, 5, dtype=ft)
        o8 = torch.empty(6, 5, dtype=torch.int8)
        sd = torch.zeros(6, dtype=torch.int64)
        _cuda.onebit(xf, 0.0, 1.0, 10, 2.0**32 - 20, sd, o8)
        _cuda.multibit_encode(xf, 2, 0.0, 1.0, 10, 2.0**32 - 20, sd, o8)
        kk = Keying(5).kernel_keys("onebit", {}, 6, "cpu", extra=torch.ones(6, dtype=torch.bool))
        _cuda.onebit(xf, 0.0, 1.0, 10, 2.0**32 - 20, kk, o8)
        _cuda.multibit_encode(xf, 2, 0.0, 1.0, 10, 2.0**32 - 20, kk, o8)
        _cuda.multibit_encode(xf, 5, 0.0, 1.0, 10, 2.0**32 - 20, sd, o8)
        _cuda.check_range(xf, 0.0, 1.0)
        for ct in (torch.int32, torch.int64):
            rowptr = torch.tensor([0, 0, 1, 2, 5, 5, 6])  # row 3 is "long" for chunk=2
            a = torch.ones(6, dtype=ft)
            for val in (None, a):  # unweighted passes a null val pointer
                _cuda.spmm_scaled(rowptr, torch.zeros(6, dtype=ct), a, a, xf,
                                  torch.empty_like(xf), True, val, chunk=2)
                if ft == torch.float32:  # bfloat16 storage, float32 a, b, val
                    xb = xf.bfloat16()
                    _cuda.spmm_scaled(rowptr, torch.zeros(6, dtype=ct), a, a, xb,
                                      torch.empty_like(xb), True, val, chunk=2)
            _cuda.fs_counts(rowptr, torch.zeros(6, dtype=ct), torch.zeros(6, 5, dtype=torch.uint8),
                            a, torch.empty_like(xf), True)
        gam = torch.tensor([2, 4, 2], dtype=torch.int64)
        ab = torch.ones(3, dtype=ft)
        _cuda.fs_estimate_index(xf, gam, ab, ab, False, torch.empty(6, 4, dtype=torch.int64), 1)
    for ct in (torch.int32, torch.int64):
        rowptr = torch.tensor([0, 0, 1, 2, 5, 5, 6])
        col = torch.zeros(6, dtype=ct)
        cand = torch.arange(6)
        mask = torch.ones(6, dtype=torch.uint8)
        _cuda.heter_central(cand, 1, 2, 0.5, torch.empty(6, dtype=torch.uint8))
        ub = torch.arange(0, 14, 2)
        for allow in (None, mask):  # None: every node may be peripheral (null pointer)
            _cuda.heter_nodes(rowptr, col, torch.ones(6, dtype=torch.int64), cand, mask, allow, 1,
                              2, 0.5, 2.0, True, ub, torch.empty(6, dtype=torch.int64),
                              torch.empty(12, dtype=torch.int64), torch.empty(12, dtype=torch.uint8))
        _cuda.heter_edges(rowptr, col, torch.arange(6), torch.arange(7), True)
        for allow in (None, mask):
            _cuda.heter_infer(rowptr, col, cand, allow, 1, 2, 13)
    for ct in (torch.int32, torch.int64):  # edges.cu, graph.cu
        rowptr = torch.tensor([0, 0, 1, 2, 5, 5, 6])
        col = torch.zeros(6, dtype=ct)
        pr = torch.full((6,), 0.5, dtype=torch.float64)
        for pub in (None, torch.zeros(6, dtype=torch.uint8)):  # None: nobody public (null pointer)
            _cuda.edges_rr(rowptr, col, 1, 7, 0, 8, 0, pr, pr, pub)
        _cuda.locallap_edge_values(rowptr, col, 1, 3, 2, 1024, 0, 5000, 2**63 - 1, 0.01,
                                   torch.empty(6, dtype=torch.int64))
        _cuda.locallap_zero(rowptr, col, 1, 0, 0.1, -5, 2**63 - 1, False, 3, 2)
        _cuda.locallap_zero(rowptr, col, 1, 0, 0.1, 5, 20, True, 3, 2)
        _cuda.csr_combine(rowptr, col, rowptr, col, 0)
        _cuda.edges_check_csr(rowptr, col)
        _cuda.csr_to_edge_index(rowptr, col, torch.empty(2, 6, dtype=torch.int64), 1)
        for it in (torch.int32, torch.int64):
            src = torch.zeros(70, dtype=it)
            _cuda.edges_sorted_csr(src, src, 6, torch.empty(7, dtype=torch.int64), torch.empty(70, dtype=ct))
    _cuda.dprr_probs(torch.tensor([0, 0, 1, 2, 5, 5, 6]), torch.zeros(6, dtype=torch.int64), 2.0**-10, 0.7, 0.3)
    # edges_keyed.cu: the keyed sampler (both modes, public users or none) and the degree noise
    keys = torch.arange(6)
    pr = torch.full((6,), 0.5, dtype=torch.float64)
    for ct in (torch.int32, torch.int64):
        for mode in (0, 1):
            for pub in (None, torch.zeros(6, dtype=torch.uint8)):
                _cuda.keyed_rr(torch.tensor([0, 0, 1, 2, 5, 5, 6]), torch.zeros(6, dtype=ct), keys, keys, keys, 7, 8,
                               mode, pr, pr, 0.3, pub, 0)
    _cuda.keyed_dlap(keys, 3, 2, torch.empty(6, dtype=torch.int64))
    for nbytes in (0, 1, 1000):
        _cuda.fingerprint(torch.zeros(nbytes, dtype=torch.uint8), 1, 2, 2**64 - 1,
                          torch.zeros(2, dtype=torch.int64))
    # userkey.cu: row digests, neighbour-set digests, seeds (optional extra, digests, ids)
    _cuda.row_digests(torch.zeros(4, 300, dtype=torch.uint8), 1, 2, 3, torch.empty(4, 2, dtype=torch.int64))
    for ct in (torch.int32, torch.int64):
        _cuda.set_digests(torch.tensor([0, 1, 3]), torch.zeros(3, dtype=ct), torch.arange(2), 5,
                          torch.empty(2, 2, dtype=torch.int64))
    uk = torch.arange(4)
    for ex, dg, ids in ((None, None, None), (uk, torch.zeros(4, 2, dtype=torch.int64), torch.empty_like(uk))):
        _cuda.report_keys(uk, ex, dg, 1, 2, 3, torch.empty_like(uk), ids)
    _cuda.fill_u32(torch.empty(3, 4, dtype=torch.int32), 1, 2, 3)
    _cuda.fill_uniform(torch.empty(3, 4, dtype=torch.float64), 1, 2, 3)
    _cuda.fill_randint(torch.empty(3, 4, dtype=torch.int64), 1, 2, 3, 7)
    _cuda.fill_geometric(torch.empty(3, 4, dtype=torch.int64), 1, 2, 3, 0.1)
    # synthetic.cu: the walk (count + fill), the trim priorities, prototypes and features
    W, seg = torch.tensor([3.0, 2.0, 1.0], dtype=torch.float64), torch.tensor([0, 2, 3])
    _cuda.synth_edges(W, torch.tensor([0, 0, 1], dtype=torch.int32), seg, torch.ones(4, dtype=torch.float64),
                      W[:1], W[2:], 0.1, 1, 0)
    _cuda.synth_priorities(torch.tensor([0, 1, 1, 1]), 1, 2)
    for ft in (torch.float32, torch.uint8):
        _cuda.synth_features(1, torch.tensor([0, 1, 1]), 2, 0.5, 0, torch.empty(3, 4, dtype=ft))
    _cuda.fill_binomial(torch.empty(3, 4, dtype=torch.int64), 1, 2, 3, 10, 0.1)
    _cuda.fill_discrete_laplace(torch.empty(3, 4, dtype=torch.int64), 1, 2, 3, 4, 1)

    sigs = _kernel_signatures()
    nulls = set()
    assert {kern for _, kern, _, _ in launches} == {k for ks in _cuda.KERNELS.values() for k in ks}
    for module, kern, n, args in launches:
        params = sigs[kern]
        assert len(args) == len(params), (kern, args)
        for i, (arg, ctype) in enumerate(zip(args, params)):
            if ctype.endswith("*") and arg is _cuda.NULL:  # optional pointer left out
                nulls.add((kern, i))
            elif ctype.endswith("*"):
                assert isinstance(arg, _FakePtr), (kern, i, arg)
                assert arg.dtype == _POINTEES[ctype[:-1].strip()], (kern, i, ctype, arg.dtype)
            else:
                assert type(arg) is _SCALARS[ctype], (kern, i, ctype, type(arg))
        assert n > 0
    # only optional pointers may be null: spmm's val, heter_nodes' allow, and heter_edges'
    # fill-only (edge_ptr, src, dst) or count-only (counts) outputs
    # edge kernels' count-only (counts) or fill-only (out_rowptr, outputs) pointers and RR's pub
    allowed = {("spmm_", 2), ("heter_nodes_", 6), ("heter_edges_", 6), ("heter_edges_", 7),
               ("heter_edges_", 8), ("heter_edges_", 9),
               ("heter_infer_", 4), ("heter_infer_", 8), ("heter_infer_", 9), ("heter_infer_", 10),
               ("rr_edges_", 10), ("rr_edges_", 11), ("rr_edges_", 12), ("rr_edges_", 13),
               ("ll_zero_", 11), ("ll_zero_", 12), ("ll_zero_", 13), ("ll_zero_", 14),
               ("csr_combine_", 6), ("csr_combine_", 7), ("csr_combine_", 8),
               ("synth_", 11), ("synth_", 12), ("synth_", 13),
               ("keyed_", 10), ("keyed_", 13), ("keyed_", 14), ("keyed_", 15), ("keyed_pick_", 13),
               ("report_", 1), ("report_", 2), ("report_", 8),
               # RowKeys: given seeds (user keys, extra, seeds out, ids null) or derived (seeds in null)
               *((f, i0 + j) for f, i0 in (("grr_", 7), ("grr_fs_", 8), ("onebit_", 8), ("multibit_", 9), ("rr_labels_", 6))
                 for j in (0, 1, 2, 9, 10))}
    family = {k: "spmm_" if k.startswith("spmm_") else k.rsplit("_", 1)[0] + "_" for k, _ in nulls}
    assert nulls and {(family[k], i) for k, i in nulls} <= allowed, nulls


# --- every branch of the shared feature bodies (csrc/common/features.h) -------------------------
# The cases run each body through the C++ launchers here (against the Numba twin, which is
# written independently) and through the CUDA launchers on a GPU (against C++): widths that
# are not multiples of 4, 8 or 32; binary, all-ones, power-of-two, rejecting and 2^31 domains;
# m = 1, some, d; masks; extreme thresholds; float32 subnormals next to a tiny range.
def _seeds(g, n):
    """Per-row report seeds (ldpfast.privacy.users), as the kernels take them."""
    return g.integers(0, 2**63, n, dtype=np.int64).view(np.uint64) ^ np.uint64(1 << 63)


def _feature_cases():
    g = np.random.default_rng(7)
    cases = []
    shapes = ((37, 1), (50, 7), (64, 33), (40, 130))
    domains = ((2,), (1,), (2, 4, 1, 8), (3,), (2, 3, 5, 1, 300), (1 << 31,))
    for dt in (np.int32, np.int64):
        for n, d in shapes:
            for kk in domains:
                k = np.array([kk[j % len(kk)] for j in range(d)], np.int64)
                x = (g.integers(0, 2**62, (n, d)) % k).astype(dt)
                T = g.integers(0, 2**32 + 1, d).astype(np.uint64)
                T[:2] = (0, 2**32)[: min(2, d)]
                cases.append(("grr", (x, k, T, _seeds(g, n))))
                for m in sorted({1, max(1, d // 3), d}):
                    cases.append(("grr_fs", (x, k, T, m, _seeds(g, n))))
                cases.append(("check_categorical", (x, k)))
                bad = x.copy()
                bad.reshape(-1)[g.integers(0, bad.size, 3)] = -1
                bad[-1, -1] = k[-1] if k[-1] < np.iinfo(dt).max else -5
                cases.append(("check_categorical", (bad, k)))
    for dt in (np.float32, np.float64):
        for n, d in shapes:
            x = (g.random((n, d)) * 3 - 1).astype(dt)
            for t_lo in (1, 12345, 2**31):
                span = 2.0**32 - 2 * t_lo
                cases.append(("onebit", (x, -1.0, 2.0, t_lo, span, _seeds(g, n))))
                for m in sorted({1, max(1, d // 3), d}):
                    cases.append(("multibit_encode", (x, m, -1.0, 2.0, t_lo, span, _seeds(g, n))))
            cases.append(("check_range", (x, -1.0, 2.0)))
            y = x.copy()
            y.reshape(-1)[g.integers(0, y.size, 2)] = np.nan
            y[-1, 0] = 2.5
            cases.append(("check_range", (y, -1.0, 2.0)))
        # float32 subnormals in a range of subnormal width: exact widening matters here
        tiny = (g.random((20, 9)) * 1e-39).astype(dt)
        cases.append(("onebit", (tiny, 0.0, 1e-39, 1000, 2.0**32 - 2000, _seeds(g, 20))))
        cases.append(("multibit_encode", (tiny, 4, 0.0, 1e-39, 1000, 2.0**32 - 2000, _seeds(g, 20))))
        cases.append(("check_range", (tiny, 1e-45, 1e-39)))
    for dt in (np.int32, np.int64):
        for c in (1, 2, 3, 10, 1 << 31):
            y = (g.integers(0, 2**62, 500) % c).astype(dt)
            mask = g.random(500) < 0.7
            for T in (0, 2**31, 2**32):
                cases.append(("rr_labels", (y, mask, c, T, _seeds(g, 500))))
    return cases


def _run_case(K, name, args, to_dev=lambda a: a, to_host=lambda a: a):
    """Run one case on kernel module K; arrays cross with to_dev / to_host (uint64 seeds as
    int64 bits on a device, as the CUDA launchers take them)."""
    if K is _cuda:
        args = tuple(a.view(np.int64) if isinstance(a, np.ndarray) and a.dtype == np.uint64 else a
                     for a in args)
        if not name.startswith("check") and name != "rr_labels":  # the per-row seeds, last
            args = args[:-1] + (to_dev(args[-1]),)
    x = args[0]
    if name.startswith("check"):
        return K.__dict__[name](to_dev(x), *args[1:])
    if name == "rr_labels":
        y, mask, c, T, seeds = args
        out = to_dev(np.empty_like(y))
        K.rr_labels(to_dev(y), to_dev(mask), c, T, to_dev(seeds) if K is _cuda else seeds, out)
        return to_host(out)
    dtype = np.int8 if name in ("onebit", "multibit_encode") else x.dtype
    out = to_dev(np.empty(x.shape, dtype))
    K.__dict__[name](to_dev(x), *args[1:], out)
    return to_host(out)


def _case_id(name, args):
    return f"{name}:{args[0].dtype}:{args[0].shape}"


def test_shared_bodies_cpp_matches_numba_on_every_branch():
    C = pytest.importorskip("ldpfast._C")
    from ldpfast._numba import kernels as NB

    bad = []
    for name, args in _feature_cases():
        a, b = _run_case(C, name, args), _run_case(NB, name, args)
        if not np.array_equal(a, b):
            bad.append(_case_id(name, args))
    assert not bad, bad
    # the checks report the first bad flat index, as NumPy finds it
    n_found = 0
    for name, args in _feature_cases():
        if name == "check_categorical":
            x, k = args
            flags = (x < 0) | (x.astype(np.int64) >= k)
        elif name == "check_range":
            x, lo, hi = args
            xd = x.astype(np.float64)  # compare as the kernels do (NumPy would use float32)
            flags = ~((xd >= lo) & (xd <= hi))
        else:
            continue
        want = int(np.argmax(flags.reshape(-1))) if flags.any() else -1
        assert _run_case(C, name, args) == want, _case_id(name, args)
        n_found += want >= 0
    assert n_found >= 50


# --- on a GPU (pytest -m cuda) -----------------------------------------------------------------
def _gpu_ready():
    from ldpfast import _backend

    return _backend.available()["cuda"] is None


gpu = [pytest.mark.cuda,
       pytest.mark.skipif(not torch.cuda.is_available() or not _gpu_ready(),
                          reason="needs an NVIDIA GPU with cupy")]


def _apply(marks):
    def deco(f):
        for m in reversed(marks):
            f = m(f)
        return f
    return deco


@_apply(gpu)
@pytest.mark.parametrize("fn,dtype,args", [
    ("fill_u32", torch.int32, ()), ("fill_uniform", torch.float64, ()),
    ("fill_randint", torch.int64, (7,)), ("fill_geometric", torch.int64, (0.01,)),
    ("fill_binomial", torch.int64, (1000, 0.3)), ("fill_discrete_laplace", torch.int64, (4, 1)),
])
def test_gpu_rng_bit_identical_to_cpu(fn, dtype, args):
    import ldpfast._C as C

    np_dt = {torch.int32: np.uint32, torch.float64: np.float64, torch.int64: np.int64}[dtype]
    cpu = np.zeros((300, 40), np_dt)
    getattr(C, fn)(cpu, 123, 3, 7, *args)
    out = torch.zeros(300, 40, dtype=dtype, device="cuda")
    getattr(_cuda, fn)(out, 123, 3, 7, *args)
    got = out.cpu().numpy().view(np_dt) if dtype == torch.int32 else out.cpu().numpy()
    np.testing.assert_array_equal(got, cpu)


def _spmm_case(dtype, col_dtype, weighted, hub=0, seed=0):
    from ldpfast.graph import to_csr

    g = torch.Generator().manual_seed(seed)
    n = max(500, hub + 1)
    ei = torch.randint(0, n, (2, 8 * n), generator=g)
    if hub:  # row 0 of the (source-major) CSR gets `hub` distinct entries: a long row
        ei = torch.cat([ei, torch.stack([torch.zeros(hub, dtype=torch.long), torch.arange(1, hub + 1)])], 1)
    w = torch.rand(ei.size(1), generator=g, dtype=dtype) if weighted else None
    csr = to_csr(ei, n, edge_weight=w)
    x = torch.rand(n, 33, generator=g, dtype=dtype)
    x[::7] *= 1e-38  # float32 subnormal products: must not be flushed on the GPU
    a = torch.rand(n, generator=g, dtype=dtype)
    b = torch.rand(n, generator=g, dtype=dtype)
    b[::5] = 0
    return csr.rowptr, csr.col.to(col_dtype), csr.value, a, b, x


@_apply(gpu)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("col_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("self_loop", [False, True])
def test_gpu_propagation_bit_identical_to_cpu(dtype, col_dtype, weighted, self_loop):
    # Rows of at most SPMM_CHUNK entries: same summation order, same bits.
    import ldpfast._C as C

    rp, col, val, a, b, x = _spmm_case(dtype, col_dtype, weighted)
    assert int((rp[1:] - rp[:-1]).max()) <= _cuda.SPMM_CHUNK
    y = torch.empty_like(x)
    C.spmm_scaled(rp.numpy(), col.numpy(), a.numpy(), b.numpy(), x.numpy(), y.numpy(), self_loop,
                  None if val is None else val.numpy())
    yc = torch.empty_like(x, device="cuda")
    _cuda.spmm_scaled(rp.cuda(), col.cuda(), a.cuda(), b.cuda(), x.cuda(), yc, self_loop,
                      None if val is None else val.cuda())
    assert torch.equal(yc.cpu(), y)


@_apply(gpu)
@pytest.mark.parametrize("col_dtype", [torch.int32, torch.int64])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("hub", [0, 3000])
def test_gpu_propagation_bf16_storage(col_dtype, weighted, hub):
    # bf16 x / y, float32 maths: rows of at most SPMM_CHUNK entries give the C++ bits; a
    # chunked hub row is the float32 chunked sum rounded once.
    import ldpfast._C as C

    rp, col, val, a, b, x = _spmm_case(torch.float32, col_dtype, weighted, hub=hub)
    x16 = x.bfloat16()
    y = torch.empty_like(x16)
    C.spmm_scaled(rp.numpy(), col.numpy(), a.numpy(), b.numpy(), x16.view(torch.int16).numpy(),
                  y.view(torch.int16).numpy(), True, None if val is None else val.numpy())
    yc = torch.empty_like(x16, device="cuda")
    _cuda.spmm_scaled(rp.cuda(), col.cuda(), a.cuda(), b.cuda(), x16.cuda(), yc, True,
                      None if val is None else val.cuda())
    short = (rp[1:] - rp[:-1]) <= _cuda.SPMM_CHUNK
    assert torch.equal(yc.cpu()[short].view(torch.int16), y[short].view(torch.int16))
    y32 = torch.empty_like(x, device="cuda")
    _cuda.spmm_scaled(rp.cuda(), col.cuda(), a.cuda(), b.cuda(), x16.float().cuda(), y32, True,
                      None if val is None else val.cuda())
    assert torch.equal(yc.view(torch.int16), y32.bfloat16().view(torch.int16))


@_apply(gpu)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("chunk", [3, 64, _cuda.SPMM_CHUNK])
def test_gpu_propagation_long_rows_chunked_close_and_deterministic(dtype, chunk):
    # A hub row longer than the chunk: fixed chunks combined in order, so a different
    # summation order from C++ (close, not equal) but the same bits on every run.
    import ldpfast._C as C

    rp, col, val, a, b, x = _spmm_case(dtype, torch.int32, True, hub=20000)
    y = torch.empty_like(x)
    C.spmm_scaled(rp.numpy(), col.numpy(), a.numpy(), b.numpy(), x.numpy(), y.numpy(), True,
                  val.numpy())
    dev = [t.cuda() for t in (rp, col, val, a, b, x)]
    outs = []
    for _ in range(3):
        yc = torch.empty_like(dev[-1])
        _cuda.spmm_scaled(dev[0], dev[1], dev[3], dev[4], dev[5], yc, True, dev[2], chunk=chunk)
        outs.append(yc.cpu())
    assert all(torch.equal(o, outs[0]) for o in outs)
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(outs[0], y, **tol)
    short = (rp[1:] - rp[:-1]) <= chunk  # rows not chunked keep the C++ bits
    assert torch.equal(outs[0][short], y[short])


@_apply(gpu)
@pytest.mark.parametrize("aggr", ["mean", "add", "gcn"])
def test_gpu_propagate_autograd(aggr):
    from ldpfast import ops

    g = torch.Generator().manual_seed(3)
    ei = torch.randint(0, 30, (2, 120), generator=g)
    w = torch.rand(120, generator=g, dtype=torch.float64)
    mask = torch.rand(30, generator=g) < 0.7
    # a CPU generator draws on the CPU only (torch refuses it for device="cuda")
    x = torch.rand(30, 4, generator=g, dtype=torch.float64).cuda().requires_grad_()
    for kw in ({}, {"edge_weight": w.cuda()}, {"mask": mask.cuda(), "self_loops": True}):
        assert torch.autograd.gradcheck(
            lambda t, kw=kw: ops.propagate(ei.cuda(), t, 2, aggr, **kw), (x,))


@_apply(gpu)
@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpu_kprop_equals_cpu(cached, dtype):
    from ldpfast.nn import KProp

    g = torch.Generator().manual_seed(4)
    ei = torch.randint(0, 400, (2, 3000), generator=g)
    x = torch.rand(400, 17, generator=g, dtype=dtype)
    for aggr in ("mean", "add", "gcn"):
        xc = x.clone().requires_grad_()
        want = KProp(3, aggr, cached=cached)(xc, ei)
        want.sum().backward()
        xg = x.cuda().requires_grad_()
        got = KProp(3, aggr, cached=cached)(xg, ei.cuda())
        got.sum().backward()
        assert got.is_cuda and xg.grad.is_cuda
        # short rows: the CUDA kernel adds in the C++ order, scales are the same torch maths
        assert torch.equal(got.detach().cpu(), want.detach()), aggr
        assert torch.equal(xg.grad.cpu(), xc.grad), aggr


@_apply(gpu)
def test_gpu_inv_sqrt_correctly_rounded_and_cuda_names_the_current_device():
    # gcn scales: the GPU's 1/sqrt must give NumPy's bits (the CPU path uses NumPy's sqrt)
    from ldpfast import ops
    from ldpfast.graph import as_adj_t

    g = torch.Generator().manual_seed(8)
    d = torch.cat([torch.arange(1, 200_001, dtype=torch.float64),
                   torch.rand(200_000, generator=g, dtype=torch.float64) * 1e6 + 0.1])
    assert ops._inv_sqrt(d.cuda()).cpu().numpy().tobytes() == (1.0 / np.sqrt(d.numpy())).tobytes()
    ei = torch.randint(0, 50, (2, 300), generator=g)
    want = as_adj_t(ei, 50)
    for device in ("cuda", torch.device("cuda"), f"cuda:{torch.cuda.current_device()}"):
        got = as_adj_t(ei.cuda(), 50, device=device)  # "cuda" is the tensors' cuda:0, not another device
        assert torch.equal(got.col.cpu(), want.col) and torch.equal(got.rowptr.cpu(), want.rowptr)


def _hub_graph(seed):
    """(generator, n, edge_index, x, y): 3000 random nodes plus a hub (node 0, 2000 in-edges,
    a long row); the generator goes on from there for the test's masks."""
    g = torch.Generator().manual_seed(seed)
    n = 3000
    ei = torch.randint(0, n, (2, 40000), generator=g)
    ei = torch.cat([ei, torch.stack([torch.arange(1, 2001), torch.zeros(2000, dtype=torch.long)])], 1)
    x = torch.rand(n, 5, generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    return g, n, ei, x, y


@_apply(gpu)
@pytest.mark.parametrize("overlap", ["drop", "zero"])
@pytest.mark.parametrize("induced", [True, False])
def test_gpu_heterpoisson_bit_identical_to_cpu(overlap, induced):
    from torch_geometric.data import Data

    from ldpfast.sampling import HeterPoisson

    g, n, ei, x, y = _hub_graph(8)
    kw = {"train_nodes": torch.rand(n, generator=g) < 0.6, "overlap": overlap, "induced": induced}
    cpu = HeterPoisson(Data(x=x, y=y, edge_index=ei, num_nodes=n), 0.2, 3.0, seed=9, **kw)
    gpu = HeterPoisson(Data(x=x.cuda(), y=y.cuda(), edge_index=ei.cuda(), num_nodes=n), 0.2, 3.0,
                       seed=9, **kw)
    for t in range(4):
        want, got = cpu.sample(t), gpu.sample(t)
        for f in ("x", "edge_index", "n_id", "ptr", "batch", "center", "y", "zeroed"):
            a = getattr(got, f)
            assert a.is_cuda, f
            assert torch.equal(a.cpu(), getattr(want, f)), (t, f)


@_apply(gpu)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("col_dtype", [torch.int32, torch.int64])
def test_gpu_reconstruct_kernels_bit_identical_to_cpp(dtype, col_dtype):
    # Integer counts: every row (long ones too) equals C++; the estimator is per row.
    import ldpfast._C as C

    from ldpfast.graph import to_csr

    g = torch.Generator().manual_seed(11)
    n = 400
    ei = torch.randint(0, n, (2, 6000), generator=g)
    csr = to_csr(ei[:, ei[0] != ei[1]], n, symmetrize=True)
    rp, col = csr.rowptr, csr.col.to(col_dtype)
    e = (torch.rand(n, 37, generator=g) < 0.3).to(torch.uint8)
    a = (1.0 / (csr.degrees() + 1).double()).to(dtype)
    y = torch.empty(n, 37, dtype=dtype)
    C.fs_counts(rp.numpy(), col.numpy(), e.numpy(), a.numpy(), y.numpy(), True)
    yc = torch.empty(n, 37, dtype=dtype, device="cuda")
    _cuda.fs_counts(rp.cuda(), col.cuda(), e.cuda(), a.cuda(), yc, True)
    assert torch.equal(yc.cpu(), y)
    gam = torch.tensor([2, 4, 3, 5, 2, 9, 4, 4, 2, 3, 2, 9], dtype=torch.int64)  # sum(gam - 1) = 37
    ab = torch.rand(2, 12, generator=g, dtype=torch.float64).to(dtype)
    out = torch.full((n, 13), -7, dtype=torch.int64)
    C.fs_estimate_index(y.numpy(), gam.numpy(), ab[0].numpy(), ab[1].numpy(), False, out.numpy(), 1)
    oc = torch.full((n, 13), -7, dtype=torch.int64, device="cuda")
    _cuda.fs_estimate_index(yc, gam.cuda(), ab[0].cuda(), ab[1].cuda(), False, oc, 1)
    assert torch.equal(oc.cpu(), out)


@_apply(gpu)
def test_gpu_feature_kernels_bit_identical_to_cpp():
    import ldpfast._C as C

    bad = []
    for name, args in _feature_cases():
        want = _run_case(C, name, args)
        got = _run_case(_cuda, name, args, lambda a: torch.from_numpy(a).cuda(),
                        lambda t: t.cpu().numpy())
        if not np.array_equal(want, got):
            bad.append(_case_id(name, args))
    assert not bad, bad


@_apply(gpu)
def test_gpu_userkey_kernels_bit_identical_to_cpp():
    """The per-user report keys (userkey.cu: a warp per row for the digests, a thread per
    entry for the neighbour sets, a thread per user for the chain) equal the C++ ones."""
    import ldpfast._C as C

    g = np.random.default_rng(4)
    for nbytes in (0, 1, 7, 64, 256, 300, 513, 8200):
        rows = g.integers(0, 256, (70, nbytes), dtype=np.uint8)
        want = np.zeros((70, 2), np.uint64)
        C.row_digests(rows, 1, 2, 3, want)
        got = torch.empty((70, 2), dtype=torch.int64, device="cuda")
        _cuda.row_digests(torch.from_numpy(rows).cuda(), 1, 2, 3, got)
        assert np.array_equal(got.cpu().numpy().view(np.uint64), want), nbytes
    rp = np.array([0, 3, 3, 7, 8], np.int64)
    keys = g.integers(0, 2**62, 4).astype(np.int64)
    for cdt in (np.int32, np.int64):
        col = g.integers(0, 4, 8).astype(cdt)
        want = np.zeros((4, 2), np.uint64)
        C.set_digests(rp, col, keys, 9, want)
        got = torch.empty((4, 2), dtype=torch.int64, device="cuda")
        _cuda.set_digests(torch.from_numpy(rp).cuda(), torch.from_numpy(col).cuda(), torch.from_numpy(keys).cuda(),
                          9, got)
        assert np.array_equal(got.cpu().numpy().view(np.uint64), want)
    u = g.integers(0, 2**62, 500).astype(np.int64)
    ex = g.integers(0, 2**62, 500).astype(np.int64)
    dg = g.integers(0, 2**62, (500, 2)).astype(np.int64)
    for e, d in ((None, None), (ex, dg)):
        ws, wr = np.zeros(500, np.uint64), np.zeros(500, np.uint64)
        C.report_keys(u, None if e is None else e.view(np.uint64), None if d is None else d.view(np.uint64),
                      5, 6, 7, ws, wr)
        gs, gr = (torch.empty(500, dtype=torch.int64, device="cuda") for _ in range(2))
        _cuda.report_keys(torch.from_numpy(u).cuda(), None if e is None else torch.from_numpy(e).cuda(),
                          None if d is None else torch.from_numpy(d).cuda(), 5, 6, 7, gs, gr)
        assert np.array_equal(gs.cpu().numpy().view(np.uint64), ws)
        assert np.array_equal(gr.cpu().numpy().view(np.uint64), wr)


@_apply(gpu)
def test_gpu_user_keyed_reports_equal_cpu():
    """A report keyed to users is the same on the GPU: keys derived on the device."""
    from ldpfast.mechanisms import multibit_encode, rr_labels

    g = torch.Generator().manual_seed(3)
    x = torch.rand(3000, 33, generator=g)
    y = torch.randint(0, 6, (3000,), generator=g)
    keys = torch.randperm(3000, generator=g) * 3
    a, _ = multibit_encode(x, 3.0, 4, seed=sec(9), user_keys=keys, dataset="d")
    b, _ = multibit_encode(x.cuda(), 3.0, 4, seed=sec(9), user_keys=keys.cuda(), dataset="d")
    assert torch.equal(a, b.cpu())
    a, _ = rr_labels(y, 6, 1.0, seed=sec(9), user_keys=keys)
    b, _ = rr_labels(y.cuda(), 6, 1.0, seed=sec(9), user_keys=keys.cuda())
    assert torch.equal(a, b.cpu())


# --- the user-keyed edge sampler (edges_keyed.cu), its cases shared with the emulated tests ------
def _secret():
    """A 128-bit secret where the keyed mechanisms take one, else (before that change) an int."""
    try:
        Keying(b"\x01" * 16)
        return b"\x01" * 16
    except TypeError:
        return 77


def _keyed_graph(n, hubs, col_dtype, seed):
    """(rowptr, col) of a random simple graph with ``hubs`` rows of degree about n / 2."""
    from ldpfast.graph import to_csr

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 3 * n), generator=g)
    for h in range(hubs):
        nb = torch.randperm(n, generator=g)[: n // 2]
        ei = torch.cat([ei, torch.stack([torch.full_like(nb, h * 7 % n), nb])], 1)
    csr = to_csr(ei, n, symmetrize=True)
    return csr.rowptr.numpy(), csr.col.numpy().astype(col_dtype)


def _keyed_q(g, m):
    """DPRR's q per row: random small, 0 (no false edge), 1, exact powers of two (the levels'
    boundaries), just above one, below the top level (2^-48)."""
    q = g.uniform(0, 0.05, m)
    special = [0.0, 1.0, 0.5, 0.25, 2.0**-7, np.nextafter(2.0**-7, 1), 2.0**-48, 2.0**-52, 0.75, 0.0]
    q[: len(special)] = special[:m]
    g.shuffle(q)
    return q


def _keyed_cases(col_dtype, n=260):
    """(name, args of the C++ keyed_rr without its outputs): modes 0 and 1, public users or
    none, per-row probabilities, rows with no false edge, long rows, a shard's rows (row0)."""
    g = np.random.default_rng(5)
    rp, col = _keyed_graph(n, 3, col_dtype, 1)
    S = n + n // 3
    keys = g.permutation(S)[:n].astype(np.int64)  # dense, with holes, not in row order
    table = np.full(S, -1, np.int64)
    table[keys] = np.arange(n)
    seeds = g.integers(0, 2**64, n, dtype=np.uint64)
    pub = (g.random(n) < 0.15).astype(np.uint8)
    p = 0.7
    specs = []
    for pb in (None, pub):
        q = _keyed_q(g, n)
        specs.append(("dprr", 1, p * q, q, 0.3, pb, 0, n))
        specs.append(("rr", 0, np.full(n, p), np.full(n, 0.3), 0.3, pb, 0, n))
        specs.append(("rr per row", 0, g.uniform(0, 1, n), np.where(g.random(n) < 0.2, 0.0, g.uniform(0, 0.2, n)),
                      0.3, pb, 0, n))
    q = _keyed_q(g, n)
    specs.append(("dprr shard", 1, p * q, q, 0.45, pub, 100, 230))  # rows [100, 230) of the graph
    specs.append(("rr shard", 0, np.full(n, 0.8), np.full(n, 0.2), 0.2, None, 37, 38))
    c = np.ascontiguousarray
    for name, mode, pt, pf, pm, pb, a, b in specs:
        yield (f"{name}{'' if pb is None else ' public'}",
               (c(rp[a:b + 1] - rp[a]), c(col[rp[a]:rp[b]]), keys, table, c(seeds[a:b]), 7, 8, mode, c(pt[a:b]),
                c(pf[a:b]), pm, None if pb is None else c(pb[a:b]), a))


def _keyed_cpp(args):
    """The C++ keyed_rr's count pass, prefix sum and fill pass: (rowptr, int64 col)."""
    import ldpfast._C as C

    *head, row0 = args
    m = head[0].shape[0] - 1
    orp = np.zeros(m + 1, np.int64)
    C.keyed_rr(*head, orp, None, row0)
    np.cumsum(orp, out=orp)
    oc = np.empty(int(orp[m]), np.int64)
    C.keyed_rr(*head, orp, oc, row0)
    return orp, oc


def _keyed_cuda(args, to_dev):
    """ldpfast._cuda.keyed_rr on the same inputs (arrays through ``to_dev``; uint64 seeds as
    int64 bits): (rowptr, col) as host arrays."""
    rp, col, keys, table, seeds, st_t, st_f, mode, pt, pf, pm, pub, row0 = args
    orp, oc = _cuda.keyed_rr(to_dev(rp), to_dev(col), to_dev(keys), to_dev(table), to_dev(seeds.view(np.int64)),
                             st_t, st_f, mode, to_dev(pt), to_dev(pf), pm, None if pub is None else to_dev(pub), row0)
    return orp.cpu().numpy(), oc.cpu().numpy()


@_apply(gpu)
@pytest.mark.parametrize("col_dtype", [np.int32, np.int64])
def test_gpu_keyed_edge_kernels_bit_identical_to_cpp(col_dtype):
    """The keyed RR / DPRR sampler (edges_keyed.cu) and DPRR's per-user degree noise equal the
    C++ keyed_rr / keyed_dlap bit for bit (the cases of tests/test_cuda_emulated_edges.py)."""
    import ldpfast._C as C

    for name, args in _keyed_cases(col_dtype):
        want, got = _keyed_cpp(args), _keyed_cuda(args, lambda a: torch.from_numpy(a).cuda())
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), name
    seeds = np.random.default_rng(2).integers(0, 2**64, 5000, dtype=np.uint64)
    for t, s in ((1, 1), (9, 7), (2**20, 3)):
        want = np.empty(5000, np.int64)
        C.keyed_dlap(seeds, t, s, want)
        got = torch.empty(5000, dtype=torch.int64, device="cuda")
        _cuda.keyed_dlap(torch.from_numpy(seeds.view(np.int64)).cuda(), t, s, got)
        assert np.array_equal(got.cpu().numpy(), want), (t, s)


@_apply(gpu)
def test_gpu_keyed_edge_reports_equal_cpu():
    """dprr / rr_edges with user keys on a CUDA graph run on the device and equal the CPU call:
    the noisy lists, d*, q and the report ids."""
    from ldpfast.graph import CSR
    from ldpfast.mechanisms import dprr, rr_edges

    n = 3000
    rp, col = _keyed_graph(n, 4, np.int64, 6)
    g = np.random.default_rng(8)
    keys = torch.from_numpy(g.permutation(n + 500)[:n].astype(np.int64))
    pub = torch.from_numpy(g.random(n) < 0.1)
    calls = {
        "dprr": lambda g_, k, p: dprr(g_, 2.0, _keying=k, public=p),
        "dprr n_max": lambda g_, k, p: dprr(g_, 3.0, _keying=k, n_max=5000, public=p, symmetrize="or"),
        "rr_edges": lambda g_, k, p: rr_edges(g_, 4.0, _keying=k, public=p, max_output_edges=10**8),
    }
    for cd in (torch.int32, torch.int64):
        csr = CSR(torch.from_numpy(rp), torch.from_numpy(col).to(cd), n)
        dcsr = CSR(csr.rowptr.cuda(), csr.col.cuda(), n)
        for name, call in calls.items():
            for p in (None, pub):
                wk = Keying(_secret(), user_keys=keys, ids=True)
                want = call(csr, wk, p)
                gk = Keying(_secret(), user_keys=keys.cuda(), ids=True)
                got = call(dcsr, gk, None if p is None else p.cuda())
                key = (name, cd, p is None)
                assert got.backend == "cuda" and got.noisy.col.is_cuda and got.noisy.col.dtype == cd, key
                assert torch.equal(got.noisy.rowptr.cpu(), want.noisy.rowptr), key
                assert torch.equal(got.noisy.col.cpu(), want.noisy.col), key
                assert torch.equal(got.edge_index.cpu(), want.edge_index), key
                for f in ("d_star", "q"):
                    a, b = getattr(got, f), getattr(want, f)
                    if b is not None:
                        assert a.is_cuda and torch.equal(a.cpu().nan_to_num(-7), b.nan_to_num(-7)), (key, f)
                assert np.array_equal(gk.last[2], wk.last[2]), key


def _public_calls():
    from ldpfast.mechanisms import grr, grr_fs, multibit_encode, onebit, rr_labels

    g = torch.Generator().manual_seed(5)
    k = torch.tensor([2, 3, 2, 5, 1, 2, 9, 2, 4, 2, 2, 2, 3, 2, 2, 2, 7, 2, 2, 2, 2, 2, 2, 2,
                      2, 2, 2, 2, 2, 2, 2, 2, 2])
    xc = torch.randint(0, 2**30, (3000, 33), generator=g) % k
    xb = torch.randint(0, 2, (3000, 70), generator=g).int()
    xf = torch.rand(3000, 33, generator=g)
    y = torch.randint(0, 6, (3000,), generator=g)
    mask = torch.rand(3000, generator=g) < 0.6
    return [
        ("grr", lambda dev, **kw: grr(xc.to(dev), k, 0.9, seed=1, **kw)),
        ("grr 1-D", lambda dev, **kw: grr(xc[:, 1].to(dev), 3, 0.9, seed=1, **kw)),
        ("grr_fs", lambda dev, **kw: grr_fs(xc.to(dev), k, 0.9, 5, seed=2, **kw)),
        ("grr_fs binary", lambda dev, **kw: grr_fs(xb.to(dev), 2, 1.5, 9, seed=3, **kw)),
        ("grr_fs m=d", lambda dev, **kw: grr_fs(xb.to(dev), 2, 1.5, 70, seed=3, **kw)),
        ("onebit", lambda dev, **kw: onebit(xf.to(dev), 4.0, seed=4, **kw)),
        ("multibit", lambda dev, **kw: multibit_encode(xf.to(dev), 4.0, 3, seed=5, **kw)),
        ("multibit m=d", lambda dev, **kw: multibit_encode(xf.to(dev), 4.0, 33, seed=5, **kw)),
        ("rr_labels", lambda dev, **kw: rr_labels(y.to(dev), 6, 1.2, seed=6,
                                                  mask=mask.to(dev), **kw)),
        ("rr_labels all", lambda dev, **kw: rr_labels(y.to(dev), 6, 1.2, seed=6, **kw)),
    ]


@_apply(gpu)
@pytest.mark.parametrize("backend", [None, "cuda"])
def test_gpu_public_ops_stay_on_device_and_match_cpu(backend):
    for name, call in _public_calls():
        want, s_cpu = call("cpu")
        got, s_gpu = call("cuda", backend=backend)
        assert got.is_cuda, name
        assert got.dtype == want.dtype and torch.equal(got.cpu(), want), name
        assert s_gpu.params["backend"] == "cuda" and s_gpu.eps == s_cpu.eps, name


@_apply(gpu)
def test_gpu_bad_input_errors_match_cpu_and_modify_nothing():
    from ldpfast import _backend
    from ldpfast.mechanisms import grr_fs, multibit_encode, rr_labels

    x = torch.randint(0, 3, (100, 9))
    x[37, 4] = 3
    xf = torch.rand(100, 9)
    xf[12, 8] = float("nan")
    y = torch.randint(0, 4, (100,))
    y[55] = 4
    for call, t in ((lambda t: grr_fs(t, 3, 1.0, 2), x), (lambda t: multibit_encode(t, 1.0), xf),
                    (lambda t: rr_labels(t, 4, 1.0), y)):
        with pytest.raises(ValueError) as on_cpu:
            call(t)
        tc = t.cuda()
        keep = tc.clone()
        with pytest.raises(ValueError) as on_gpu:
            call(tc)
        assert str(on_gpu.value) == str(on_cpu.value)
        # bytes, not torch.equal: the float case holds a NaN, which equals nothing
        assert tc.cpu().numpy().tobytes() == keep.cpu().numpy().tobytes()
    with pytest.raises(_backend.BackendUnavailable, match="cannot run on CUDA"):
        grr_fs(x.clamp(max=2).cuda(), 3, 1.0, 2, backend="cpp")
    with pytest.raises(ValueError, match="mask is on cpu but y is on cuda"):
        rr_labels(y.clamp(max=3).cuda(), 4, 1.0, mask=torch.ones(100, dtype=torch.bool))


def test_info_reports_the_gpu_or_why_not():
    """`ldpfast info` shows the GPU, CUDA / CuPy versions and the kernel cache (issue 18)."""
    import json
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "ldpfast", "info", "--json"], capture_output=True,
                       text=True, timeout=300, check=True)
    gpu = json.loads(r.stdout)["gpu"]
    assert gpu["kernel_cache"] and "devices" in gpu and "cupy" in gpu
    if not torch.cuda.is_available():
        assert gpu["devices"] == "none visible to torch"


@pytest.mark.parametrize("chunk", [1, 3, 7, 512])
def test_spmm_plan_covers_each_long_row_once_in_order(chunk):
    # The chunk plan (torch ops, here on CPU): every entry of every row longer than `chunk`
    # lies in exactly one chunk, chunks of a row are consecutive and ascending.
    g = torch.Generator().manual_seed(2)
    deg = torch.randint(0, 40, (300,), generator=g)
    deg[::37] = 2000
    rp = torch.zeros(301, dtype=torch.int64)
    torch.cumsum(deg, 0, out=rp[1:])
    plan = _cuda.spmm_plan(rp, chunk)
    long = torch.nonzero(deg > chunk).flatten()
    if long.numel() == 0:
        assert plan is None
        return
    long_row, long_first, chunk_row, chunk_k0 = plan
    assert torch.equal(long_row, long)
    for r, i in enumerate(long_row.tolist()):
        q0, q1 = int(long_first[r]), int(long_first[r + 1])
        assert (chunk_row[q0:q1] == i).all()
        starts = chunk_k0[q0:q1].tolist()
        assert starts == list(range(int(rp[i]), int(rp[i + 1]), chunk))


# --- edge mechanisms on a GPU (edges.cu, graph.cu) ----------------------------------------------
def _edge_graph(col_dtype, n=2000, hub=1500, seed=3):
    from ldpfast.graph import CSR, to_csr

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 6 * n), generator=g)
    ei = torch.cat([ei, torch.stack([torch.zeros(hub, dtype=torch.long), torch.arange(1, hub + 1)])], 1)
    csr = to_csr(ei, n, symmetrize=True)
    return CSR(csr.rowptr, csr.col.to(col_dtype), n)


def _cell_word(seed, stream, row, col, j):
    """Word j of Philox cell (seed, stream, row, col) (csrc/common/philox.h's addressing)."""
    from ldpfast.rng import philox4x32_10

    ctr = np.array([[j // 4, col, row & 0xFFFFFFFF, ((row >> 32) & 0xFFFF) | (stream << 16)]], np.uint64)
    key = np.array([[seed & 0xFFFFFFFF, seed >> 32]], np.uint64)
    return int(philox4x32_10(ctr, key)[0, j % 4])


def _rr_cases(col_dtype):
    """(name, args of the C++ edges_rr_count / _fill without outputs; pub empty for none): the
    sparse RR sampler's branches.  True edges: kept with probability in (0, 1), always, never,
    and rows whose p_true ties the word of neighbour 3 or 40 with its first digit (the tie settled
    from further words: the rest of the row is read after them).  False edges: none, rare, 0.05,
    0.3 and 0.5 (geometric blocks of 2 and 1 trials), every non-neighbour (p_false >= 1).  Long
    rows; public users."""
    n = 300
    rp, col = _keyed_graph(n, 3, col_dtype, 2)
    deg = np.diff(rp)
    g = np.random.default_rng(4)
    seed, st_t, c_t, st_f, c_f = 2**63 + 5, 7, 0, 8, 0
    pt, pf = g.uniform(0, 1, n), g.uniform(0, 0.01, n)
    pt[:30], pf[:30], pt[30:60], pf[30:60] = 1.0, 0.0, 0.0, 0.05
    pf[60:90], pf[90:100], pf[100:110], pt[110:115] = 0.3, 0.5, 1.0, 1.0
    ties = [(i, j) for i, j in ((int(np.argmax(deg)), 40), (int(np.flatnonzero(deg > 8)[-1]), 3))]
    assert all(deg[i] > j + 5 for i, j in ties)
    for i, j in ties:  # K = floor(2^32 p_true) = word j of the row's true cell
        pt[i] = (_cell_word(seed, st_t, i, c_t, j) + 0.5) / 2.0**32
    pub = (g.uniform(size=n) < 0.1).astype(np.uint8)
    pub[[i for i, _ in ties]] = 0
    for name, pb in (("", np.empty(0, np.uint8)), (" public", pub)):
        yield f"rr{name}", (rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pb)
    yield "rr one p", (rp, col, 99, 9, 0, 9, 1, np.full(n, 0.8), np.full(n, 0.2), np.empty(0, np.uint8))


def _rr_cpp(args):
    import ldpfast._C as C

    rp, col = args[0], args[1]
    n = rp.shape[0] - 1
    orp = np.zeros(n + 1, dtype=np.int64)
    C.edges_rr_count(*args, orp, True)
    np.cumsum(orp, out=orp)
    oc = np.empty(int(orp[n]), dtype=col.dtype)
    C.edges_rr_fill(*args, orp, oc)
    return orp, oc


def _rr_cuda(args, to_dev):
    rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pb = args
    orp, oc = _cuda.edges_rr(to_dev(rp), to_dev(col), seed, st_t, c_t, st_f, c_f, to_dev(pt), to_dev(pf),
                             to_dev(pb) if pb.size else None)
    return orp.cpu().numpy(), oc.cpu().numpy()


@_apply(gpu)
@pytest.mark.parametrize("col_dtype", [np.int32, np.int64])
def test_gpu_rr_sampler_bit_identical_to_cpp(col_dtype):
    """The sparse RR sampler (edges.cu, a warp per row) on every branch equals the C++ one."""
    for name, args in _rr_cases(col_dtype):
        want, got = _rr_cpp(args), _rr_cuda(args, lambda a: torch.from_numpy(a).cuda())
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), name


@_apply(gpu)
@pytest.mark.parametrize("col_dtype", [torch.int32, torch.int64])
def test_gpu_edge_kernels_bit_identical_to_cpp(col_dtype):
    import ldpfast._C as C

    csr = _edge_graph(col_dtype)
    n = csr.num_nodes
    rp, col = csr.rowptr, csr.col
    rpd, cold = rp.cuda(), col.cuda()
    rng = np.random.default_rng(2)
    # DPRR probabilities from the degree noise
    noise = rng.integers(-40000, 40000, n)
    p, pm = 0.8, 0.2
    want = [np.empty(n) for _ in range(4)]
    C.dprr_probs(rp.numpy(), noise, 2.0**-10, p, pm, *want)
    got = _cuda.dprr_probs(rpd, torch.from_numpy(noise).cuda(), 2.0**-10, p, pm)
    for a, b in zip(got, want):
        assert a.cpu().numpy().tobytes() == b.tobytes()
    # sparse RR: ordinary, always / never kept, public rows
    pt, pf = rng.uniform(0, 1, n), rng.uniform(0, 0.01, n)
    pt[:30], pf[:30], pt[30:60], pf[30:60] = 1.0, 0.0, 0.0, 0.05
    pub = (rng.uniform(size=n) < 0.1).astype(np.uint8)
    for pb in (None, pub):
        orp = np.zeros(n + 1, dtype=np.int64)
        args = (rp.numpy(), col.numpy(), 2**63 + 5, 7, 0, 8, 0, pt, pf, np.empty(0, np.uint8) if pb is None else pb)
        C.edges_rr_count(*args, orp, True)
        np.cumsum(orp, out=orp)
        oc = np.empty(int(orp[n]), dtype=col.numpy().dtype)
        C.edges_rr_fill(*args, orp, oc)
        g_rp, g_col = _cuda.edges_rr(rpd, cold, 2**63 + 5, 7, 0, 8, 0, torch.from_numpy(pt).cuda(),
                                     torch.from_numpy(pf).cuda(), None if pb is None else torch.from_numpy(pb).cuda())
        assert np.array_equal(g_rp.cpu().numpy(), orp) and np.array_equal(g_col.cpu().numpy(), oc)
    # LocalLap entry values and zero candidates (bounded and unbounded bands, an exclusion CSR)
    # (rounds: fast path, exact path, a later round deciding the rest, the dense round)
    vals = np.empty(col.numel(), dtype=np.int64)
    gv = torch.empty(col.numel(), dtype=torch.int64, device="cuda")
    for rnd, lo, hi, p in ((0, 5000, 2**63 - 1, 0.05), (0, 500, 2**63 - 1, 0.0), (1, -300, 5000, 0.0),
                           (2, -(2**63), -300, 0.0)):
        C.locallap_edge_values(rp.numpy(), col.numpy(), 11, 9, 7, 1024, rnd, lo, hi, p, vals)
        _cuda.locallap_edge_values(rpd, cold, 11, 9, 7, 1024, rnd, lo, hi, p, gv)
        assert np.array_equal(gv.cpu().numpy(), vals), rnd
    for rnd, pi, lo, hi, split in ((0, 0.001, 5000, 2**63 - 1, False), (0, 0.001, 5000, 5003, True),
                                   (0, 0.001, 5000, 5100, True), (1, 0.01, -300, 5000, False),
                                   (2, 1.0, -(2**63), 0, False)):  # a reachable band: P[L < 0] ~ 0.3 at t/s = 9/7
        orp = np.zeros(n + 1, dtype=np.int64)
        a = (rp.numpy(), col.numpy(), 13, rnd, pi, lo, hi, split, 9, 7)
        C.locallap_zero(*a, orp, np.empty(0, col.numpy().dtype), np.empty(0, np.int64), False)
        np.cumsum(orp, out=orp)
        zc, zv = np.empty(int(orp[n]), col.numpy().dtype), np.empty(int(orp[n]), np.int64)
        C.locallap_zero(*a, orp, zc, zv, True)
        g_rp, g_c, g_v = _cuda.locallap_zero(rpd, cold, 13, rnd, pi, lo, hi, split, 9, 7)
        for x, y in ((g_rp, orp), (g_c, zc), (g_v, zv)):
            assert np.array_equal(x.cpu().numpy(), y), rnd
    # server-side combination of the graph with a random other CSR, every mode
    other = _edge_graph(col_dtype, seed=8)
    for mode in range(4):
        args = (rp.numpy(), col.numpy(), other.rowptr.numpy(), other.col.numpy(), mode)
        orp = np.zeros(n + 1, dtype=np.int64)
        C.csr_combine(*args, orp, np.empty(0, col.numpy().dtype), False)
        np.cumsum(orp, out=orp)
        oc = np.empty(int(orp[n]), col.numpy().dtype)
        C.csr_combine(*args, orp, oc, True)
        g_rp, g_c = _cuda.csr_combine(rpd, cold, other.rowptr.cuda(), other.col.cuda(), mode)
        assert np.array_equal(g_rp.cpu().numpy(), orp) and np.array_equal(g_c.cpu().numpy(), oc), mode
    # one-pass CSR of a sorted edge_index (and of broken ones: the flags must agree)
    ei = torch.stack([torch.repeat_interleave(torch.arange(n), rp[1:] - rp[:-1]), col.long()])
    for it in (torch.int32, torch.int64):
        for name, e in (("sorted", ei), ("self loop", torch.cat([ei, torch.tensor([[n - 1], [n - 1]])], 1)),
                        ("unsorted", ei.flip(1)), ("range", torch.cat([ei, torch.tensor([[n - 1], [n]])], 1)),
                        ("asymmetric", ei[:, :-1]), ("empty", ei[:, :0])):
            e = e.to(it)
            w_rp, w_col = np.empty(n + 1, np.int64), np.empty(e.size(1), col.numpy().dtype)
            want_f = C.edges_sorted_csr(e[0].contiguous().numpy(), e[1].contiguous().numpy(), n, w_rp, w_col)
            g_rp = torch.empty(n + 1, dtype=torch.int64, device="cuda")
            g_col = torch.empty(e.size(1), dtype=col.dtype, device="cuda")
            got_f = _cuda.edges_sorted_csr(e[0].contiguous().cuda(), e[1].contiguous().cuda(), n, g_rp, g_col)
            if want_f & 3:  # not built: which later flags were seen depends on where the passes stopped
                assert got_f & 3 == want_f & 3, name
            else:
                assert got_f == want_f, name
                assert np.array_equal(g_rp.cpu().numpy(), w_rp) and np.array_equal(g_col.cpu().numpy(), w_col), name
    # checks and the edge_index writer
    bad = col.clone()
    bad[5], bad[40] = bad[4], n + 3  # a repeat and an id out of range
    for c in (col, bad, col.flip(0)):
        assert _cuda.edges_check_csr(rpd, c.cuda()) == C.edges_check_csr(rp.numpy(), c.numpy())
    for layout in (0, 1):
        ei = np.empty((2, col.numel()), dtype=np.int64)
        C.csr_to_edge_index(rp.numpy(), col.numpy(), ei, layout)
        gei = torch.empty((2, col.numel()), dtype=torch.int64, device="cuda")
        _cuda.csr_to_edge_index(rpd, cold, gei, layout)
        assert np.array_equal(gei.cpu().numpy(), ei)


@_apply(gpu)
@pytest.mark.parametrize("rule", ["none", "or", "and", "lower", "upper"])
def test_gpu_edge_mechanisms_stay_on_device_and_match_cpu(rule):
    from torch_geometric.data import Data

    from ldpfast.graph import CSR
    from ldpfast.mechanisms import dprr, local_laplace, rr_edges
    from ldpfast.mechanisms.edges import server_graph

    csr = _edge_graph(torch.int32)
    n = csr.num_nodes
    dev = CSR(csr.rowptr.cuda(), csr.col.cuda(), n)
    data = Data(edge_index=csr.to_edge_index().cuda(), num_nodes=n)
    pub = torch.rand(n, generator=torch.Generator().manual_seed(1)) < 0.1
    calls = [
        ("dprr", lambda g, p: dprr(g, 2.0, seed=21, public=p, symmetrize=rule)),
        ("rr_edges", lambda g, p: rr_edges(g, 4.0, seed=22, public=p, symmetrize=rule)),
        ("local_laplace", lambda g, p: local_laplace(g, 1.0, seed=23)),
        ("local_laplace rounds", lambda g, p: local_laplace(g, 3.0, seed=24, _target=20.0)),
    ]
    for name, call in calls:
        want = call(csr, pub)
        for g in (dev, data):
            got = call(g, pub.cuda())
            assert got.backend == "cuda" and got.noisy.col.is_cuda and got.edge_index.is_cuda, name
            for a, b in ((got.noisy, want.noisy), (got.graph(), want.graph())):
                assert torch.equal(a.rowptr.cpu(), b.rowptr) and torch.equal(a.col.cpu(), b.col), name
            assert torch.equal(got.edge_index.cpu(), want.edge_index), name
            for f in ("d_star", "q"):
                a, b = getattr(got, f), getattr(want, f)
                if b is not None:
                    assert a.is_cuda and torch.equal(a.cpu().nan_to_num(-7), b.nan_to_num(-7)), (name, f)
            assert got.spent.params == want.spent.params, name
    g_noisy = dprr(dev, 2.0, seed=21).noisy
    assert torch.equal(server_graph(g_noisy, rule).col.cpu(), server_graph(dprr(csr, 2.0, seed=21).noisy, rule).col)
    with pytest.raises(ValueError, match="public is on cpu but graph is on cuda"):
        dprr(dev, 2.0, seed=1, public=pub)
    with pytest.raises(ValueError, match=r"CSR.col is on cpu but CSR.rowptr is on cuda"):
        dprr(CSR(dev.rowptr, csr.col, n), 2.0, seed=1)


@_apply(gpu)
@pytest.mark.parametrize("induced", [True, False])
def test_gpu_inference_subgraphs_bit_identical_to_cpu(induced):
    from torch_geometric.data import Data

    from ldpfast.sampling import inference_subgraphs

    g, n, ei, x, y = _hub_graph(6)
    test = torch.rand(n, generator=g) < 0.3
    test[0] = True  # the hub: a long row (the C++ build takes nth_element there, the GPU the scans)
    allow = ~(torch.rand(n, generator=g) < 0.6)
    for n_test, periph in ((13, None), (13, allow), (0, None), (40, allow)):
        kw = {"peripheral_nodes": periph, "seed": 3, "step": 5, "induced": induced}
        want = inference_subgraphs(Data(x=x, y=y, edge_index=ei, num_nodes=n), test, n_test, **kw)
        got = inference_subgraphs(Data(x=x.cuda(), y=y.cuda(), edge_index=ei.cuda(), num_nodes=n), test.cuda(),
                                  n_test, **{**kw, "peripheral_nodes": None if periph is None else periph.cuda()})
        for f in ("x", "edge_index", "n_id", "ptr", "batch", "center", "y", "zeroed"):
            a = getattr(got, f)
            assert a.is_cuda, f
            assert torch.equal(a.cpu(), getattr(want, f)), (n_test, f)


# --- synthetic.cu's indexing, emulated on the host --------------------------------------------
# No GPU here: g++ compiles synthetic.cu itself with the CUDA keywords defined away and a serial
# grid (every thread of every 256-thread block, the bounds guards included), so the kernels'
# indexing, count / fill split and output casts run against the C++ build.  This checks the
# .cu code paths, not the GPU (device compilation and the PTX are the tests above).
_EMU = r"""
#include <cstdint>
#define __global__
#define __device__
#define __forceinline__ inline
struct EmuDim { unsigned x; };
static EmuDim blockIdx, threadIdx, blockDim = {256};
#include "SYNTH_CU"
template <class F> static void grid(int64_t n, F f) {
    for (int64_t i = 0; i < (n + 255) / 256 * 256; ++i) {
        blockIdx.x = (unsigned)(i / 256);
        threadIdx.x = (unsigned)(i % 256);
        f();
    }
}
extern "C" void emu_edges(const double* W, const int32_t* cls, const int64_t* seg, const double* fmat,
                          const double* wmax, const double* wmin, int64_t n, int64_t C, double scale, uint64_t seed,
                          int64_t attempt, int64_t* counts, const int64_t* rowptr, int32_t* col, int fill) {
    grid(n, [&] { synth_edges(W, cls, seg, fmat, wmax, wmin, n, C, scale, seed, attempt, counts, rowptr, col, fill); });
}
extern "C" void emu_priorities(const int64_t* rowptr, int64_t n, uint64_t seed, int64_t* prio) {
    grid(n, [&] { synth_priorities(rowptr, n, seed, prio); });
}
extern "C" void emu_features(uint64_t seed, const int64_t* y, int64_t n, int64_t C, int64_t d, double signal,
                             int kind, double* q, void* x, int u8) {
    grid(C * d, [&] { synth_proto(seed, C, d, signal, q); });
    grid(n * d, [&] {
        if (u8) synth_features_u8(seed, y, n, d, q, kind, (uint8_t*)x);
        else synth_features_f32(seed, y, n, d, q, kind, (float*)x);
    });
}
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")
def test_synthetic_cu_kernels_emulated_on_the_host_equal_cpp(tmp_path):
    import importlib

    C = pytest.importorskip("ldpfast._C")
    S = importlib.import_module("ldpfast.datasets.synthetic")
    src = tmp_path / "emu.cpp"
    src.write_text(_EMU.replace("SYNTH_CU", str(CSRC / "cuda" / "synthetic.cu")))
    lib = tmp_path / "emu.so"
    r = subprocess.run(["g++", "-std=c++17", "-O1", "-ffp-contract=off", "-shared", "-fPIC", str(src), "-o",
                        str(lib)], check=False, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    E = ctypes.CDLL(str(lib))
    P = ctypes.c_void_p
    i64, u64, f64, i32 = ctypes.c_int64, ctypes.c_uint64, ctypes.c_double, ctypes.c_int
    E.emu_edges.argtypes = [P] * 6 + [i64, i64, f64, u64, i64, P, P, P, i32]
    E.emu_priorities.argtypes = [P, i64, u64, P]
    E.emu_features.argtypes = [u64, P, i64, i64, i64, f64, i32, P, P, i32]

    def ptr(a):
        return a.ctypes.data_as(P) if a is not None else None

    seed, n = 2**64 - 11, 5003  # n not a multiple of the block size
    for Cn, h in ((1, 1.0), (3, 0.6)):
        plan = S._Plan(C, seed, n, Cn, h, 9.0, 2.3, 400.0, {})
        scale = plan.calibrate(C, n * 9.0 / 2)
        wmax, wmin = S._weight_tables(plan.W)
        for attempt in (0, 2):
            args = (seed, attempt, plan.W, plan.cls, plan.seg, plan.fmat, scale,
                    np.arange(n + 1, dtype=np.int64))
            want_rp = np.zeros(n + 1, dtype=np.int64)
            C.synth_edge_count(*args, want_rp[1:])
            np.cumsum(want_rp, out=want_rp)
            want_col = np.empty(int(want_rp[-1]), dtype=np.int32)
            C.synth_edge_fill(*args, want_rp, want_col)
            head = (ptr(plan.W), ptr(plan.cls), ptr(plan.seg), ptr(plan.fmat), ptr(wmax), ptr(wmin), n, Cn,
                    scale, seed, attempt)
            counts = np.full(n, -1, dtype=np.int64)
            E.emu_edges(*head, ptr(counts), None, None, 0)
            rp = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(counts, out=rp[1:])
            col = np.full(int(rp[-1]), -1, dtype=np.int32)
            E.emu_edges(*head, None, ptr(rp), ptr(col), 1)
            assert rp.tobytes() == want_rp.tobytes() and col.tobytes() == want_col.tobytes()
        want = np.empty(int(rp[-1]), dtype=np.int64)
        C.synth_priorities(seed, rp, want)
        got = np.full_like(want, -1)
        E.emu_priorities(ptr(rp), n, seed, ptr(got))
        assert got.tobytes() == want.tobytes()
        for kind, dt in ((0, np.float32), (1, np.float32), (0, np.uint8)):
            d = 7
            want = np.empty((n, d), dtype=dt)
            C.synth_features(seed, plan.y, Cn, 0.7, kind, want)
            got = np.full((n, d), 9, dtype=dt)
            q = np.empty(Cn * d)
            E.emu_features(seed, ptr(plan.y), n, Cn, d, 0.7, kind, ptr(q), ptr(got), int(dt == np.uint8))
            assert got.tobytes() == want.tobytes()


# --- synthetic graphs on a GPU (synthetic.cu) ---------------------------------------------------
@_apply(gpu)
@pytest.mark.parametrize("kw", [
    {"avg_degree": 10, "num_features": 6},
    {"num_edges": 60000, "num_classes": 3, "homophily": 0.6, "num_features": 5, "feature_kind": "continuous"},
    {"avg_degree": 8, "num_classes": 4, "homophily": 1.0, "num_features": 9, "feature_dtype": torch.uint8},
    {"num_edges": 20000 * 19999 // 2 // 400, "num_classes": 1, "max_degree": 5000},
])
def test_gpu_synthetic_bit_identical_to_cpp(kw):
    from ldpfast.datasets import synthetic

    want = synthetic(20000, seed=2**63 + 9, edge_index=True, backend="cpp", **kw)
    got = synthetic(20000, seed=2**63 + 9, edge_index=True, device="cuda", **kw)
    assert got.csr.col.is_cuda and got.csr.rowptr.is_cuda and got.y.is_cuda
    pairs = [(got.csr.rowptr, want.csr.rowptr), (got.csr.col, want.csr.col), (got.y, want.y),
             (got.edge_index, want.edge_index)]
    if want.x is not None:
        assert got.x.is_cuda
        pairs.append((got.x, want.x))
    for g, w in pairs:
        assert g.dtype == w.dtype
        assert g.cpu().numpy().tobytes() == w.numpy().tobytes()
