"""Backend selection: which compiled kernels serve a call.

Backends
--------
``cpp``
    ``ldpfast._C``, the pybind11 C++17 module built by ``pip install .`` (std::thread,
    no libtorch).  Default for CPU tensors.
``cuda``
    ``csrc/cuda/*.cu`` compiled at first use through CuPy/NVRTC.  Default for CUDA tensors.
``numba``
    ``ldpfast._numba``: the same kernels jitted by Numba; used when ``_C`` is missing or
    when asked for.

The choice is per call: an explicit ``backend=`` argument wins, then the environment
variable ``LDPFAST_BACKEND`` (``cpp``, ``numba``, ``cuda`` or ``auto``), then the device of
the input.  Asking for a backend that is not available raises :class:`BackendUnavailable`
with the reason.  All backends give bit-identical results for the same seed.

When the automatic choice for CPU tensors falls back to Numba because ``ldpfast._C`` cannot
be imported (e.g. a source tree that was never built), a :class:`BackendFallbackWarning`
says so once per process, with the reason: Numba compiles each kernel on first use, which
takes seconds to minutes, and the C++ kernels are faster.  ``LDPFAST_BACKEND=numba`` (or
``backend="numba"``) asks for Numba explicitly and is silent.
"""
from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

from ._oom import DeviceOutOfMemory, format_bytes, oom_guard, to_device  # noqa: F401  (re-exported)

BACKENDS = ("cpp", "cuda", "numba")
_cache: dict[str, ModuleType | Exception] = {}


class BackendUnavailable(RuntimeError):
    """The requested backend cannot run here (the message says why)."""


class BackendFallbackWarning(RuntimeWarning):
    """The automatic backend choice fell back to Numba (the message says why)."""


_warned_fallback = False


def _warn_fallback(reason: Exception) -> None:
    global _warned_fallback
    if _warned_fallback:
        return
    _warned_fallback = True
    warnings.warn(
        f"ldpfast: the C++ backend is unavailable ({type(reason).__name__}: {reason}); "
        "falling back to the Numba kernels, which compile on first use (slow the first "
        "time) and run slower. Install the package with the README's command (it builds "
        "ldpfast._C), or set LDPFAST_BACKEND=numba to choose Numba and silence this.",
        BackendFallbackWarning, stacklevel=3)


def _load(name: str) -> ModuleType | Exception:
    if name not in _cache:
        try:
            if name == "cpp":
                _cache[name] = importlib.import_module("ldpfast._C")
            elif name == "numba":
                _cache[name] = importlib.import_module("ldpfast._numba.kernels")
            else:
                mod = importlib.import_module("ldpfast._cuda")
                mod.check_available()
                _cache[name] = mod
        except Exception as exc:  # noqa: BLE001 - the reason is reported to the user
            _cache[name] = exc
    return _cache[name]


def available() -> dict[str, str | None]:
    """Map each backend to ``None`` if it works here, else the reason it does not."""
    out = {}
    for name in BACKENDS:
        mod = _load(name)
        out[name] = None if isinstance(mod, ModuleType) else f"{type(mod).__name__}: {mod}"
    return out


def requested(backend: str | None = None) -> str:
    """The backend asked for, lower-case and unchecked: ``backend`` if given, else
    ``LDPFAST_BACKEND``, else ``'auto'``."""
    if backend is None:
        backend = os.environ.get("LDPFAST_BACKEND", "auto") or "auto"
    return str(backend).lower()


def check_backend(backend: str | None) -> str | None:
    """``backend`` unchanged if it names a backend (any case) or is None (the default);
    for checking a parameter when it is given, long before :func:`resolve` runs."""
    if backend is not None and (not isinstance(backend, str) or backend.lower() not in BACKENDS + ("auto",)):
        raise ValueError(f"backend: expected None or one of {BACKENDS + ('auto',)}, got {backend!r}")
    return backend


def resolve(device: str = "cpu", backend: str | None = None) -> str:
    """Name of the backend for a call on ``device`` ('cpu' or 'cuda')."""
    backend = requested(check_backend(backend))
    if backend not in BACKENDS + ("auto",):  # LDPFAST_BACKEND
        raise ValueError(f"backend: expected one of {BACKENDS + ('auto',)}, got {backend!r}")
    if backend == "auto":
        if device == "cuda":
            backend = "cuda"
        else:
            cpp = _load("cpp")
            if isinstance(cpp, ModuleType):
                backend = "cpp"
            else:
                backend = "numba"
                _warn_fallback(cpp)
    if device == "cuda" and backend != "cuda":
        raise BackendUnavailable(f"backend {backend!r} cannot run on CUDA tensors; move them to CPU")
    if device != "cuda" and backend == "cuda":
        raise BackendUnavailable("backend 'cuda' needs CUDA tensors; move the inputs with .cuda()")
    return backend


def get(device: str = "cpu", backend: str | None = None) -> ModuleType:
    """Kernel module for a call: ``ldpfast._C``, ``ldpfast._numba.kernels`` or ``ldpfast._cuda``."""
    name = resolve(device, backend)
    mod = _load(name)
    if not isinstance(mod, ModuleType):
        raise BackendUnavailable(f"backend {name!r} is not available: {type(mod).__name__}: {mod}")
    return mod


def device_of(*tensors) -> str:
    """'cuda' if any argument is a CUDA tensor, else 'cpu' (mixing devices is an error)."""
    devs = {t.device.type for t in tensors if hasattr(t, "device")}
    if len(devs) > 1:
        raise ValueError(f"inputs are on different devices: {sorted(devs)}")
    return "cuda" if devs == {"cuda"} else "cpu"


def get_num_threads() -> int:
    """Threads used by the C++ kernels (LDPFAST_NUM_THREADS, else all cores)."""
    mod = _load("cpp")
    if isinstance(mod, ModuleType):
        return mod.get_num_threads()
    import numba

    return numba.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set the thread count of the C++ and Numba kernels (results do not depend on it)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n: expected an int >= 1, got {n!r}")
    mod = _load("cpp")
    if isinstance(mod, ModuleType):
        mod.set_num_threads(n)
    import numba

    numba.set_num_threads(min(n, numba.config.NUMBA_NUM_THREADS))


def require_cuda_family(op: str, family: str, prefix: str = "") -> None:
    """Raise :class:`BackendUnavailable` unless the cuda backend launches kernels of
    ``csrc/cuda/<family>.cu`` (names starting with ``prefix``): ops whose CUDA port is not
    in this build say so by name instead of copying the data to the host.  Also raises,
    with the reason, when the cuda backend itself cannot run here."""
    mod = get("cuda", "cuda")
    names = getattr(mod, "KERNELS", {}).get(family, ())
    if not any(k.startswith(prefix) for k in names):
        raise BackendUnavailable(
            f"{op} has no CUDA path in this build (no {prefix or family}* kernel in "
            f"csrc/cuda/{family}.cu); run it on the CPU (device='cpu') instead")


