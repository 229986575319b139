"""pytest plugin: the ``-m cuda`` tests' own logic on a machine without a GPU, before GPU time.

    PYTHONPATH=tools python -m pytest -p gpu_dryrun -m cuda -q --tb=line

Every "CUDA" tensor stays a CPU tensor: ``.cuda()`` and ``.to("cuda")`` return it unchanged,
factories given ``device="cuda"`` build on the CPU, ``Tensor.is_cuda`` answers True, and the
cuda backend reports itself available, so the GPU tests are collected instead of skipped.
ldpfast itself still routes by ``tensor.device`` (CPU), so the library runs its CPU kernels.
What this finds is what is wrong in a test itself: bad parameters, C++ signature drift, wrong
imports, hangs. Five such bugs waited for the first GPU run (docs/gpu/README.md); most of
them show up here in seconds.

A test that reaches a CUDA launcher (CuPy missing) is reported as skipped, with that reason.
Failures of these kinds are artefacts of the stand-in, not bugs:
- ``got.backend == "cuda"`` and similar checks of the routing;
- ``.grad`` missing on the "GPU" copy, which is the same tensor as the CPU one here;
- ``DID NOT RAISE`` where the test expects a CPU backend to refuse CUDA tensors;
- ``BackendUnavailable: backend 'cuda' needs CUDA tensors`` for an explicit ``backend="cuda"``;
- ``Torch not compiled with CUDA enabled`` from ``torch.cuda.current_device()``.
On 2026-11-26 (85 tests): 20 passed, 52 skipped at a kernel, 13 failed, all of these kinds;
on 2026-11-27 (88 tests, three adj_t transform tests added): 23 passed, 52 skipped, the same 13 failed;
later on 2026-11-27 (90 tests: the per-user key kernels and user-keyed reports added, issue 31; run with
CuPy hidden, PYTHONPATH=tools:<a folder whose cupy/__init__.py raises ImportError>, since with CuPy
installed every launcher reaches torch.cuda and fails instead of skipping): 23 passed, 52 skipped, 15
failed: the same 13, and two of the current_device kind from DP-SGD's first-batch independence check.
Anything else deserves a look. This is a development aid, not part of the test suite.
"""
import pytest
import torch
from torch.overrides import TorchFunctionMode


def _on_cpu(value):
    return "cpu" if isinstance(value, (str, torch.device)) and "cuda" in str(value) else value


class _CpuForCuda(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = dict(kwargs or {})
        if "device" in kwargs:
            kwargs["device"] = _on_cpu(kwargs["device"])
        name = getattr(func, "__name__", "")
        if name == "cuda":
            return args[0]
        if name == "to":
            args = tuple(_on_cpu(a) for a in args)
        return func(*args, **kwargs)


def pytest_configure(config):
    from ldpfast import _backend

    torch.cuda.is_available = lambda: True
    torch.cuda.synchronize = lambda *a, **k: None
    torch.cuda.get_device_name = lambda *a, **k: "CPU standing in for a GPU (tools/gpu_dryrun.py)"
    torch.Tensor.cuda = lambda self, *a, **k: self
    torch.Tensor.is_cuda = property(lambda self: True)
    real = _backend.available

    def available(*a, **k):
        out = dict(real(*a, **k))
        out["cuda"] = None
        return out

    _backend.available = available
    _CpuForCuda().__enter__()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if call.excinfo is not None and rep.failed:
        text = str(call.excinfo.value)
        if "cupy" in text.lower():  # reached a CUDA launcher: the stand-in ends here
            rep.outcome = "skipped"
            rep.longrepr = (str(item.fspath), item.location[1], "dry run reached a CUDA kernel (no CuPy)")
