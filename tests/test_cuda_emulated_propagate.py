"""csrc/cuda/propagate.cu run on the host (tests/cuda_emu.h), through ldpfast._cuda's own launcher,
against the C++ build; and KProp's cached CUDA path shown to launch kernels only.

No GPU here: ``_core._launch`` is pointed at the g++-compiled kernels (every lane a coroutine,
shuffles and ballots real rendezvous of 32 lanes), so ``_cuda.spmm_scaled`` picks its geometry
(vector width, lanes per row), plans long rows and launches exactly as on a GPU, on CPU
tensors.  Rows of at most ``chunk`` entries must give the C++ bits; longer rows (chunks
combined in order) must be close.  What this cannot check: the GPU's memory model, timing and
the device compiler's code (the ``-m cuda`` tests of test_cuda.py do that, on a GPU).
"""
from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from test_cuda_emulated import emulate
from torch.utils._python_dispatch import TorchDispatchMode

from ldpfast import _backend, _cuda

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """ldpfast._cuda with its launches run by the emulated propagate.cu on CPU tensors; yields
    the list of launched kernel names (appended as they run)."""
    yield from emulate("propagate", tmp_path_factory.mktemp("emu"))


def _graph(n, seed, long_rows=(), empty_every=5):
    """rowptr (int64), col (int64) of n rows: degrees 0..12, every `empty_every`-th row empty,
    rows `long_rows` given 40..70 entries; columns random (repeats allowed, as a multigraph)."""
    g = np.random.default_rng(seed)
    deg = g.integers(0, 13, n)
    deg[::empty_every] = 0
    for r in long_rows:
        deg[r] = g.integers(40, 71)
    rp = np.zeros(n + 1, np.int64)
    np.cumsum(deg, out=rp[1:])
    col = g.integers(0, n, int(rp[-1]))
    return torch.from_numpy(rp), torch.from_numpy(col)


def _inputs(n, d, dtype, seed, weighted):
    """a, b, x, val: b zero on some nodes (masked senders), a one on some (no scaling), float32
    subnormals in x, some zero weights (skipped entries)."""
    g = torch.Generator().manual_seed(seed)
    adt = torch.float32 if dtype == torch.bfloat16 else dtype
    a = torch.rand(n, generator=g, dtype=adt)
    a[::4] = 1
    b = torch.rand(n, generator=g, dtype=adt)
    b[::6] = 0
    x = torch.rand(n, d, generator=g, dtype=adt) - 0.5
    x[::7] *= 1e-38
    return a, b, x.to(dtype)


def _cpp(rp, col, a, b, x, self_loop, val):
    import ldpfast._C as C

    y = torch.empty_like(x)
    if x.dtype == torch.bfloat16:
        xs, ys = x.view(torch.int16).numpy(), y.view(torch.int16).numpy()
    else:
        xs, ys = x.numpy(), y.numpy()
    C.spmm_scaled(rp.numpy(), col.numpy(), a.numpy(), b.numpy(), xs, ys, self_loop,
                  None if val is None else val.numpy())
    return y


def _bits(t):
    return t.view(torch.int16) if t.dtype == torch.bfloat16 else t


def _check(rp, col, val, a, b, x, self_loop, chunk, emulated, offset=False):
    """The emulated kernels against C++: short rows bit for bit, long rows close."""
    want = _cpp(rp, col, a, b, x, self_loop, val)
    y = torch.empty_like(x)
    if offset:  # x and y one value off their allocation: no vector width fits, vec = 1
        xo = torch.empty(x.numel() + 1, dtype=x.dtype)[1:].view_as(x)
        xo.copy_(x)
        x, y = xo, torch.empty(x.numel() + 1, dtype=x.dtype)[1:].view_as(x)
    del emulated[:]
    _cuda.spmm_scaled(rp, col, a, b, x, y, self_loop, val, chunk=chunk)
    deg = rp[1:] - rp[:-1]
    short = deg <= chunk
    assert torch.equal(_bits(y[short]), _bits(want[short]))
    if bool((~short).any()):
        assert any(k.startswith("spmm_chunks_") for k in emulated)
        assert any(k.startswith("spmm_combine_") for k in emulated)
        tol = {torch.float64: 1e-12, torch.float32: 1e-5, torch.bfloat16: 1e-2}[x.dtype]
        torch.testing.assert_close(y[~short].float(), want[~short].float(), rtol=tol, atol=tol)
    return y


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("col_dtype", [torch.int32, torch.int64])
def test_emulated_spmm_equals_cpp(emulated, dtype, col_dtype):
    # Every feature width shape: d below, at and above a group / warp, not a multiple of the
    # vector width (1, 3, 31, 100, 130 for float32), wider than 32 lanes x vector (130, 300).
    n = 70
    rp, col = _graph(n, 1, long_rows=(3, 40))
    col = col.to(col_dtype)
    cases = [(d, w, sl) for d in (1, 3, 4, 31, 32, 64, 100, 130) for w in (False, True) for sl in (False, True)]
    # keep the run short: every d with both weights and self-loop settings spread over it
    cases = [c for i, c in enumerate(cases) if i % 2 == (0 if dtype == torch.float64 else 1)] + [(300, True, True)]
    for idx, (d, weighted, self_loop) in enumerate(cases):
        a, b, x = _inputs(n, d, dtype, idx, weighted)
        val = None
        if weighted:
            g = torch.Generator().manual_seed(100 + idx)
            val = torch.rand(col.numel(), generator=g, dtype=a.dtype)
            val[::9] = 0
        chunk = 32 if idx % 3 else _cuda.SPMM_CHUNK  # rows 3 and 40 long (40..70 entries) or not
        _check(rp, col, val, a, b, x, self_loop, chunk, emulated)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_emulated_spmm_unaligned_and_unit_scales(emulated, dtype):
    # x, y not aligned for vector loads (vec falls back to 1), and the unit-scale case (a, b all
    # ones: the C++ build takes its UNIT_B path, the CUDA one multiplies by 1; same bits).
    n = 50
    rp, col = _graph(n, 7, long_rows=(11,), empty_every=3)
    for d in (8, 64):
        a, b, x = _inputs(n, d, dtype, d, False)
        assert _cuda.spmm_geometry(x, torch.empty_like(x))[0] > 1
        _check(rp, col, None, a, b, x, True, 16, emulated, offset=True)
        ones = torch.ones_like(a)
        _check(rp, col, None, ones, ones, x, False, 16, emulated)
        _check(rp, col, torch.rand(col.numel(), dtype=a.dtype), ones, ones, x, True, 16, emulated)


def test_geometry_picks_the_widest_aligned_vector_and_a_covering_group():
    for dtype, d, vec, gl in ((torch.float32, 64, 4, 4), (torch.float32, 130, 2, 5), (torch.float32, 3, 1, 2),
                              (torch.float32, 1, 1, 0), (torch.float64, 64, 2, 5), (torch.float64, 4, 2, 1),
                              (torch.bfloat16, 64, 8, 3), (torch.bfloat16, 100, 4, 5), (torch.bfloat16, 8, 8, 0)):
        x = torch.empty(5, d, dtype=dtype)
        assert _cuda.spmm_geometry(x, torch.empty_like(x)) == (vec, gl), (dtype, d)
    x = torch.empty(5 * 64 + 1, dtype=torch.float32)[1:].view(5, 64)
    assert _cuda.spmm_geometry(x, x) == (1, 5)


# --- KProp(cached=True) on the CUDA path: kernels only, no torch work, no host sync ------------
# Two recorders: the torch-function level sees the Python side of the forward (a .item(),
# bool(t), .tolist(), .cpu() would show up by name), the dispatcher level sees every aten op of
# the forward and of the backward (which the autograd engine runs outside the function mode):
# a host sync is an aten op there (_local_scalar_dense, is_nonzero, nonzero, equal, _to_copy).
_METADATA = {"dim", "size", "shape", "dtype", "device", "is_contiguous", "data_ptr", "numel", "layout",
             "element_size", "requires_grad", "is_cuda", "_version", "__get__", "grad_fn", "stride"}
_ALLOCATIONS = {"empty_like", "empty"}


class _Recorder(torch.overrides.TorchFunctionMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", str(func))
        if name == "__get__":  # a property: name it by its owner (Tensor.shape.__get__ -> shape)
            name = getattr(getattr(func, "__self__", None), "__name__", name)
        self.calls.append(name)
        return func(*args, **(kwargs or {}))


class _AtenRecorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls.append(func.__name__.split(".")[0])  # empty_like.default -> empty_like
        return func(*args, **(kwargs or {}))


def _recorded(fn):
    """(torch functions, aten ops) called by fn()."""
    py, at = _Recorder(), _AtenRecorder()
    with py, at:
        fn()
    return py.calls, at.calls


@pytest.fixture
def cuda_path(emulated, monkeypatch):
    """CPU tensors routed to ldpfast._cuda (whose launches the emulated kernels run)."""
    monkeypatch.setattr(_backend, "device_of", lambda *ts: "cuda")
    monkeypatch.setitem(_backend._cache, "cuda", _cuda)
    return emulated


@pytest.mark.parametrize("aggr", ["gcn", "mean", "add"])
@pytest.mark.parametrize("weighted", [False, True])
def test_cached_kprop_launches_only_kernels(cuda_path, aggr, weighted):
    from ldpfast.nn import KProp

    g = torch.Generator().manual_seed(5)
    n, d, k = 60, 16, 2
    ei = torch.randint(0, n, (2, 400), generator=g)
    ew = torch.rand(ei.size(1), generator=g) if weighted else None
    x = torch.rand(n, d, generator=g)
    gy = torch.rand(n, d, generator=g)
    mask = torch.rand(n, generator=g) < 0.8
    layer = KProp(k, aggr, cached=True)
    for call in range(3):
        xg = x.clone().requires_grad_()
        del cuda_path[:]
        py, aten = _recorded(lambda xg=xg: layer(xg, ei, ew, mask=mask).backward(gy))
        if call == 0:  # the first call builds the graph, its transpose, scales and plans
            continue
        assert [c for c in py if c not in _METADATA | _ALLOCATIONS | {"backward", "apply"}] == []
        # one output per step, forward and backward, and the detach of AccumulateGrad (x.grad)
        assert sorted(aten) == ["detach"] + ["empty_like"] * (2 * k), aten
        # K steps forward, K backward, each one spmm launch (no long row in this small graph)
        assert len(cuda_path) == 2 * k and all(kn.startswith("spmm_f32_") for kn in cuda_path), cuda_path
    out = layer(xg, ei, ew, mask=mask)
    # and the numbers are the CPU layer's (short rows: the C++ bits)
    cpu_layer = KProp(k, aggr, cached=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_backend, "device_of", _DEVICE_OF)
        xc = x.clone().requires_grad_()
        want = cpu_layer(xc, ei, ew, mask=mask)
        want.backward(gy)
    assert torch.equal(out.detach(), want.detach())
    assert torch.equal(xg.grad, xc.grad)  # the last recorded call's gradient


_DEVICE_OF = _backend.device_of


def test_cached_kprop_with_a_long_row_launches_the_chunk_kernels_only(cuda_path):
    # A hub row longer than SPMM_CHUNK: the cached plan serves every call, so the chunk and
    # combine kernels run with no planning (no nonzero / cumsum / repeat_interleave, no sync).
    from ldpfast.graph import CSR
    from ldpfast.nn import KProp

    n, d, k = 600, 4, 2
    g = torch.Generator().manual_seed(9)
    rows = [torch.randperm(n, generator=g)[:3].sort().values for _ in range(n)]
    rows[5] = torch.randperm(n, generator=g)[:_cuda.SPMM_CHUNK + 37].sort().values
    rp = torch.zeros(n + 1, dtype=torch.int64)
    torch.cumsum(torch.tensor([len(r) for r in rows]), 0, out=rp[1:])
    csr = CSR(rp, torch.cat(rows).to(torch.int32), n)
    x = torch.rand(n, d, generator=g, dtype=torch.float64)
    layer = KProp(k, "add", cached=True)
    for _ in range(2):
        xg = x.clone().requires_grad_()
        del cuda_path[:]
        gy = torch.ones(n, d, dtype=x.dtype)
        py, aten = _recorded(lambda xg=xg, gy=gy: layer(xg, csr).backward(gy))
    assert [c for c in py if c not in _METADATA | _ALLOCATIONS | {"backward", "apply"}] == []
    # per step an output; forward steps also a buffer of the long row's chunk sums
    assert sorted(aten) == ["detach"] + ["empty"] * k + ["empty_like"] * (2 * k), aten
    # forward: the long row of A; backward on A^T (no row of A^T is long here)
    assert sum(kn.startswith("spmm_chunks_f64_i32") for kn in cuda_path) == k, cuda_path
    assert sum(kn.startswith("spmm_combine_f64") for kn in cuda_path) == k, cuda_path
    assert sum(kn.startswith("spmm_f64_i32") for kn in cuda_path) == 2 * k, cuda_path
    want = KProp(k, "add")
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_backend, "device_of", _DEVICE_OF)
        ref = want(x, csr)
    torch.testing.assert_close(layer(x, csr), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_uncached_propagate_on_the_cuda_path_equals_cpu(cuda_path, dtype):
    # ops.propagate plans each direction once (forward: A's hub row; backward: A^T) and hands
    # the plan to every step: values and gradients as the CPU's (hub row close, others equal).
    from ldpfast import ops

    g = torch.Generator().manual_seed(8)
    n = 700
    ei = torch.randint(0, n, (2, 2000), generator=g)
    ei = torch.cat([ei, torch.stack([torch.arange(1, n), torch.zeros(n - 1, dtype=torch.long)])], 1)  # hub: node 0
    w = torch.rand(ei.size(1), generator=g, dtype=dtype)
    x = torch.rand(n, 6, generator=g, dtype=dtype)
    gy = torch.rand(n, 6, generator=g, dtype=dtype)
    outs = []
    for device_of in (None, _DEVICE_OF):
        with pytest.MonkeyPatch.context() as mp:
            if device_of is not None:
                mp.setattr(_backend, "device_of", device_of)
            del cuda_path[:]
            xg = x.clone().requires_grad_()
            y = ops.propagate(ei, xg, 2, "gcn", edge_weight=w)
            y.backward(gy)
            outs.append((y.detach(), xg.grad, list(cuda_path)))
    (y_cu, g_cu, launched), (y_cpu, g_cpu, _) = outs
    # the hub row: the weighted degrees (gcn's scales) and each forward step; A^T has no long row
    assert sum(k.startswith("spmm_chunks_") for k in launched) == 3, launched
    tol = {"rtol": 1e-5, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 1e-12, "atol": 1e-12}
    torch.testing.assert_close(y_cu, y_cpu, **tol)
    torch.testing.assert_close(g_cu, g_cpu, **tol)
