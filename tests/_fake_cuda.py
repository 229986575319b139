"""The fake-CUDA harness shared by the routing tests (test_cuda_routing.py,
test_transform_routing.py, test_cuda_fit.py), testable without a GPU.

A CPU tensor subclass (:class:`DeviceInput`) plays the CUDA tensors: :func:`install` patches
``_backend.device_of`` to call it "cuda" and puts a recording module in place of
``ldpfast._cuda``; the subclass logs every host copy (``.cpu()``, ``.numpy()``, ``.to(cpu)``,
``.tolist()``, ``__array__``) made of it or of any tensor derived from it.  :func:`cpp_kernel`
makes a stand-in CUDA kernel that runs the real C++ kernel on plain views of the same memory
(so device results can be compared with the CPU ones bit for bit); :data:`REAL` holds the real
CPU backends while :func:`switch_off_cpu_kernels` has replaced them, and :func:`cpu_kernels`
puts them back for the reference runs.
"""
from __future__ import annotations

import contextlib
from typing import ClassVar

import torch

from ldpfast import _backend

HOST_COPIES = {"cpu", "numpy", "tolist", "__array__"}


class DeviceInput(torch.Tensor):
    """Stands for a CUDA tensor; logs host copies of itself and of everything derived."""

    copies: ClassVar[list[str]] = []

    @staticmethod
    def log_copy(func, args, kwargs) -> None:
        """Record ``func`` in :attr:`copies` when the call copies to the host."""
        name = getattr(func, "__name__", "")
        if name in HOST_COPIES or (name == "to" and to_host(args[1:], kwargs)):
            DeviceInput.copies.append(name)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        cls.log_copy(func, args, kwargs)
        return super().__torch_function__(func, types, args, kwargs)


def to_host(args, kwargs) -> bool:
    """Whether the arguments of a ``.to(...)`` call name the CPU."""
    targets = list(args) + [kwargs.get("device")]
    return any(isinstance(t, (str, torch.device)) and torch.device(t).type == "cpu"
               for t in targets if t is not None)


def dev(t: torch.Tensor) -> DeviceInput:
    """``t`` standing for a CUDA tensor (same memory)."""
    return t.as_subclass(DeviceInput)


def plain(t):
    """A plain-tensor view of ``t`` (unchanged when not a tensor): host copies of it are not logged."""
    return t.as_subclass(torch.Tensor) if isinstance(t, torch.Tensor) else t


def np_of(t):
    """The NumPy view of a tensor's memory (None and non-tensors unchanged), not logged."""
    return t.detach().as_subclass(torch.Tensor).numpy() if isinstance(t, torch.Tensor) else t


def _u64(t):
    """A tensor's memory as a NumPy uint64 view (None unchanged), not logged."""
    return None if t is None else np_of(t).view("uint64")


def userkey_kernels() -> dict:
    """Stand-ins of the per-user report key kernels (``csrc/cuda/userkey.cu``) and the keyed
    fingerprint (``fingerprint.cu``): the C++ kernels on the same memory, so the keys the device
    path derives are the CPU ones."""
    import ldpfast._C as C

    return {
        "row_digests": lambda rows, a, b, c, out: C.row_digests(np_of(rows), a, b, c, _u64(out)),
        "set_digests": lambda rp, col, keys, k, out: C.set_digests(np_of(rp), np_of(col), np_of(keys), k, _u64(out)),
        "report_keys": lambda u, ex, dg, a, b, c, seeds, rids: C.report_keys(
            np_of(u), _u64(ex), _u64(dg), a, b, c, _u64(seeds), _u64(rids)),
        "fingerprint": lambda data, a, b, c, out: C.fingerprint(np_of(data), a, b, c, _u64(out)),
    }


def install(monkeypatch, mod) -> None:
    """Make DeviceInput tensors count as CUDA tensors and ``mod`` the cuda backend (with the
    report key kernels and a no-long-rows propagation plan, unless it has its own); resets the
    copy log."""
    defaults = {**userkey_kernels(), "cached_plan": lambda rowptr, chunk=None: ()}
    for name, fn in defaults.items():
        if not hasattr(mod, name):
            setattr(mod, name, fn)
    real = _backend.device_of
    monkeypatch.setattr(_backend, "device_of", lambda *ts: "cuda" if any(
        isinstance(t, DeviceInput) for t in ts) else real(*ts))
    monkeypatch.setitem(_backend._cache, "cuda", mod)
    monkeypatch.delenv("LDPFAST_BACKEND", raising=False)
    DeviceInput.copies = []


REAL: dict = {}


def switch_off_cpu_kernels(monkeypatch) -> None:
    """CPU kernels must not run on device data: factory-made tensors (``torch.ones(n,
    device=...)``) are plain CPU tensors here, so a host kernel call would not be seen as a
    copy.  The real backends go to :data:`REAL` (see :func:`cpu_kernels`)."""
    for name in ("cpp", "numba"):
        REAL[name] = _backend._load(name)
        monkeypatch.setitem(_backend._cache, name, RuntimeError("CPU kernel called on device data"))


@contextlib.contextmanager
def cpu_kernels():
    """The real CPU kernels, for the reference results."""
    saved = {k: _backend._cache[k] for k in REAL}
    _backend._cache.update(REAL)
    try:
        yield
    finally:
        _backend._cache.update(saved)


def _derived_seeds(kk, rows) -> None:
    """What a CUDA mechanism kernel given a KernelKeys does first: each row's seed (and report
    id) from its bytes, into ``kk.seeds`` / ``kk.rids``; here by the C++ kernels."""
    import ldpfast._C as C
    import numpy as np

    n, c = rows.shape[0], kk.ctx
    b = np.ascontiguousarray(np_of(rows)).view(np.uint8).reshape(n, -1)
    dg = np.empty((n, 2), np.uint64)
    C.row_digests(b, c.k_nh, c.k_pad, c.k_prf, dg)
    C.report_keys(np_of(kk.keys), _u64(kk.extra), dg, c.k_a, c.k_b, c.k_c, _u64(kk.seeds), _u64(kk.rids))


def _fused_check(C, name, a) -> int:
    """The first bad index a CUDA mechanism kernel returns (its fused input check), -1 if none."""
    import numpy as np

    if name in ("grr", "grr_fs"):
        return C.check_categorical(a[0], a[1])
    if name == "onebit":
        return C.check_range(a[0], a[1], a[2])
    if name == "multibit_encode":
        return C.check_range(a[0], a[2], a[3])
    y, mask, c = a[0], a[1], a[2]  # rr_labels: masked labels outside [0, c)
    bad = np.flatnonzero(mask & ((y < 0) | (y >= c)))
    return int(bad[0]) if bad.size else -1


MECHANISMS = ("grr", "grr_fs", "onebit", "multibit_encode", "rr_labels")


def cpp_kernel(log, name):
    """A 'CUDA' kernel: takes tensors (by pointer), logs ``name`` and runs the C++ kernel of
    that name on their memory.  The mechanisms keep the CUDA launchers' contract: the seeds
    argument may be a KernelKeys (the kernel derives the seeds), and they return the first bad
    input index (-1: none)."""
    import ldpfast._C as C

    from ldpfast.privacy.users import KernelKeys

    def kernel(*args):
        assert any(isinstance(a, torch.Tensor) for a in args), name
        log.append(name)
        if name not in MECHANISMS:
            return getattr(C, name)(*[np_of(a) for a in args])
        args = list(args)
        if isinstance(args[-2], KernelKeys):  # seeds: the argument before the output
            _derived_seeds(args[-2], args[0])
            args[-2] = args[-2].seeds
        a = [np_of(t) for t in args]
        a[-2] = a[-2].view("uint64")
        getattr(C, name)(*a)
        return _fused_check(C, name, a)
    return kernel
