"""Routing of CUDA inputs, testable without a GPU.

Every public entry point of ``ldpfast.mechanisms.features`` and ``ldpfast.mechanisms.labels``
must send a CUDA-device input to the CUDA backend and never copy it (or anything computed
from it) to the host.  Here a CPU tensor subclass plays the CUDA input: ``_backend.device_of``
is patched to call it "cuda", a recording module stands in for ``ldpfast._cuda``, and the
subclass logs every host copy (``.cpu()``, ``.numpy()``, ``.to(cpu)``, ``.tolist()``,
``__array__``) made of it or of any tensor derived from it.  Results are not checked (the
fake kernels write zeros); the GPU tests in test_cuda.py do that.
"""
from __future__ import annotations

import types
from typing import ClassVar

import numpy as np
import pytest
import torch

from ldpfast import _backend
from ldpfast.mechanisms import features as F
from ldpfast.mechanisms import (
    grr,
    grr_fs,
    multibit_encode,
    multibit_rectify,
    onebit,
    optimal_m,
    rr_labels,
)

HOST_COPIES = {"cpu", "numpy", "tolist", "__array__"}


class DeviceInput(torch.Tensor):
    """Stands for a CUDA tensor; logs host copies of itself and of everything derived."""

    copies: ClassVar[list[str]] = []

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in HOST_COPIES or (name == "to" and _to_host(args[1:], kwargs)):
            cls.copies.append(name)
        return super().__torch_function__(func, types, args, kwargs)


def _to_host(args, kwargs) -> bool:
    targets = list(args) + [kwargs.get("device")]
    return any(isinstance(t, (str, torch.device)) and torch.device(t).type == "cpu"
               for t in targets if t is not None)


def _kernel(log, name, tensor_args, result=None):
    def kernel(*args):
        for i in tensor_args:  # the CUDA kernels take the tensors themselves, by pointer
            assert isinstance(args[i], torch.Tensor), (name, i, type(args[i]))
        out = args[-1]
        if result is None:
            out.zero_()
        log.append(name)
        return result
    return kernel


@pytest.fixture
def fake_cuda(monkeypatch):
    """A recording 'cuda' backend; DeviceInput tensors count as CUDA tensors."""
    log: list[str] = []
    mod = types.ModuleType("ldpfast._cuda")
    mod.grr = _kernel(log, "grr", (0, 4))
    mod.grr_fs = _kernel(log, "grr_fs", (0, 5))
    mod.onebit = _kernel(log, "onebit", (0, 6))
    mod.multibit_encode = _kernel(log, "multibit_encode", (0, 7))
    mod.rr_labels = _kernel(log, "rr_labels", (0, 1, 5))
    mod.check_categorical = _kernel(log, "check_categorical", (0,), result=-1)
    mod.check_range = _kernel(log, "check_range", (0,), result=-1)
    real = _backend.device_of
    monkeypatch.setattr(_backend, "device_of", lambda *ts: "cuda" if any(
        isinstance(t, DeviceInput) for t in ts) else real(*ts))
    monkeypatch.setitem(_backend._cache, "cuda", mod)
    monkeypatch.delenv("LDPFAST_BACKEND", raising=False)
    DeviceInput.copies = []
    return log


def _dev(t: torch.Tensor) -> DeviceInput:
    return t.as_subclass(DeviceInput)


g = torch.Generator().manual_seed(0)
XI = torch.randint(0, 3, (50, 6), generator=g)
XF = torch.rand(50, 6, generator=g)
Y = torch.randint(0, 4, (50,), generator=g)
MASK = torch.rand(50, generator=g) < 0.5

# (entry point, call on a device input, kernels it must launch)
CALLS = [
    ("grr", lambda b: grr(_dev(XI), 3, 1.0, seed=1, backend=b), ["check_categorical", "grr"]),
    ("grr 1-D", lambda b: grr(_dev(XI[:, 0]), 3, 1.0, seed=1, backend=b),
     ["check_categorical", "grr"]),
    ("grr_fs", lambda b: grr_fs(_dev(XI), 3, 1.0, 2, seed=1, backend=b),
     ["check_categorical", "grr_fs"]),
    ("onebit", lambda b: onebit(_dev(XF), 1.0, seed=1, backend=b), ["check_range", "onebit"]),
    ("multibit_encode", lambda b: multibit_encode(_dev(XF), 1.0, 2, seed=1, backend=b),
     ["check_range", "multibit_encode"]),
    ("rr_labels", lambda b: rr_labels(_dev(Y), 4, 1.0, seed=1, backend=b), ["rr_labels"]),
    ("rr_labels mask", lambda b: rr_labels(_dev(Y), 4, 1.0, seed=1, mask=_dev(MASK), backend=b),
     ["rr_labels"]),
]


@pytest.mark.parametrize("backend", [None, "cuda", "auto"])
@pytest.mark.parametrize("name,call,kernels", CALLS, ids=[c[0] for c in CALLS])
def test_device_inputs_go_to_the_cuda_kernels_without_host_copies(fake_cuda, name, call,
                                                                  kernels, backend):
    out, spent = call(backend)
    assert fake_cuda == kernels
    assert DeviceInput.copies == [], f"{name} copied its input to the host"
    assert isinstance(out, DeviceInput)  # allocated beside the input, not on the host
    assert spent.params["backend"] == "cuda"


def test_post_processing_stays_on_the_device(fake_cuda):
    x_star = _dev(torch.randint(-1, 2, (50, 6), generator=g).to(torch.int8))
    out = multibit_rectify(x_star, 1.0, 6)
    assert isinstance(out, DeviceInput) and DeviceInput.copies == [] and fake_cuda == []
    assert optimal_m(1.0, 6) >= 1  # no tensor argument: nothing to route


def test_every_public_entry_point_is_covered():
    from ldpfast.mechanisms import labels

    public = set(F.__all__) | set(labels.__all__)
    assert public == {c[0] for c in CALLS if " " not in c[0]} | {"multibit_rectify", "optimal_m"}


def test_host_copy_detector_can_fail(fake_cuda):
    # The detector sees copies of derived tensors too, so the test above can fail.
    x = _dev(XI)
    x.detach().contiguous().to("cpu")
    np.asarray(x.reshape(-1))
    x.numpy()
    assert DeviceInput.copies == ["to", "__array__", "numpy"]


def test_bad_device_input_is_reported_from_the_device_check(fake_cuda, monkeypatch):
    monkeypatch.setattr(_backend._cache["cuda"], "check_categorical", lambda x, k: 7)
    with pytest.raises(ValueError, match=r"x: value \d at row 1, column 1 is outside"):
        grr_fs(_dev(XI), 3, 1.0, 2, seed=1)
    assert fake_cuda == []  # nothing randomised


def test_cuda_unavailable_gives_the_reason(monkeypatch):
    real = _backend.device_of
    monkeypatch.setattr(_backend, "device_of", lambda *ts: "cuda" if any(
        isinstance(t, DeviceInput) for t in ts) else real(*ts))
    monkeypatch.setitem(_backend._cache, "cuda", RuntimeError("no CUDA device visible to torch"))
    monkeypatch.delenv("LDPFAST_BACKEND", raising=False)
    for b in (None, "cuda"):
        with pytest.raises(_backend.BackendUnavailable, match="no CUDA device visible"):
            grr(_dev(XI), 3, 1.0, seed=1, backend=b)
    with pytest.raises(_backend.BackendUnavailable, match="cannot run on CUDA tensors"):
        grr(_dev(XI), 3, 1.0, seed=1, backend="cpp")
    with pytest.raises(_backend.BackendUnavailable, match="needs CUDA tensors"):
        onebit(XF, 1.0, seed=1, backend="cuda")


def test_mixed_devices_name_both_tensors():
    # 'meta' stands for a second device: no GPU needed to reach the check.
    with pytest.raises(ValueError, match=r"mask is on meta but y is on cpu"):
        rr_labels(Y, 4, 1.0, mask=torch.ones(50, dtype=torch.bool, device="meta"))
    with pytest.raises(ValueError, match=r"mask is on cpu but y is on meta"):
        rr_labels(Y.to("meta"), 4, 1.0, mask=MASK)
