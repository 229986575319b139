"""CUDA kernels: every .cu compiles with the local nvcc (CI); GPU tests skip without a GPU."""
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

CSRC = Path(__file__).resolve().parents[1] / "csrc"
CU_FILES = sorted((CSRC / "cuda").glob("*.cu"))
NVCC = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc"
                                if Path("/usr/local/cuda/bin/nvcc").exists() else None)


@pytest.mark.skipif(NVCC is None, reason="nvcc not installed")
@pytest.mark.parametrize("cu", CU_FILES, ids=lambda p: p.name)
def test_cu_file_compiles(cu, tmp_path):
    r = subprocess.run([NVCC, "-c", "-std=c++17", "--fmad=false", "-arch=sm_80", f"-I{CSRC}",
                        str(cu), "-o", str(tmp_path / "k.o")], capture_output=True, text=True,
                       timeout=600, check=False)
    assert r.returncode == 0, r.stderr[-3000:]


def test_there_are_cuda_sources():
    assert {p.name for p in CU_FILES} >= {"rng.cu", "propagate.cu"}


def _gpu_ready():
    from ldpfast import _backend

    return _backend.available()["cuda"] is None


gpu = pytest.mark.skipif(not torch.cuda.is_available() or not _gpu_ready(),
                         reason="needs an NVIDIA GPU with cupy")


@gpu
@pytest.mark.parametrize("fn,dtype,args", [
    ("fill_u32", torch.int32, ()), ("fill_uniform", torch.float64, ()),
    ("fill_randint", torch.int64, (7,)), ("fill_geometric", torch.int64, (0.01,)),
    ("fill_binomial", torch.int64, (1000, 0.3)), ("fill_discrete_laplace", torch.int64, (4, 1)),
])
def test_gpu_rng_bit_identical_to_cpu(fn, dtype, args):
    import ldpfast._C as C

    from ldpfast import _cuda

    np_dt = {torch.int32: np.uint32, torch.float64: np.float64, torch.int64: np.int64}[dtype]
    cpu = np.zeros((300, 40), np_dt)
    getattr(C, fn)(cpu, 123, 3, 7, *args)
    out = torch.zeros(300, 40, dtype=dtype, device="cuda")
    getattr(_cuda, fn)(out, 123, 3, 7, *args)
    got = out.cpu().numpy().view(np_dt) if dtype == torch.int32 else out.cpu().numpy()
    np.testing.assert_array_equal(got, cpu)


@gpu
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_gpu_propagation_bit_identical_to_cpu(dtype):
    import ldpfast._C as C

    from ldpfast import _cuda
    from ldpfast.graph import to_csr

    g = torch.Generator().manual_seed(0)
    csr = to_csr(torch.randint(0, 500, (2, 4000), generator=g), 500, symmetrize=True)
    x = torch.rand(500, 33, generator=g, dtype=dtype)
    a = torch.rand(500, generator=g, dtype=dtype)
    b = torch.rand(500, generator=g, dtype=dtype)
    y = torch.empty_like(x)
    C.spmm_scaled(csr.rowptr.numpy(), csr.col.numpy(), a.numpy(), b.numpy(), x.numpy(),
                  y.numpy(), True)
    yc = torch.empty_like(x, device="cuda")
    _cuda.spmm_scaled(csr.rowptr.cuda(), csr.col.cuda(), a.cuda(), b.cuda(), x.cuda(), yc, True)
    assert torch.equal(yc.cpu(), y)
