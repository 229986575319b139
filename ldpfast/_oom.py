"""CUDA out-of-memory errors as :class:`DeviceOutOfMemory`, naming what was allocated.

A leaf module (imports nothing from ldpfast) so that both the backend selection
(:mod:`ldpfast._backend`, which re-exports these names) and the CUDA launchers
(:mod:`ldpfast._cuda`) can use it without an import cycle.
"""
from __future__ import annotations

import contextlib
import re


class DeviceOutOfMemory(MemoryError):
    """A CUDA allocation failed (raised by :func:`oom_guard`): the message names what was
    being allocated and the size asked for; the inputs of the call are unchanged."""



# --- CUDA out-of-memory ---------------------------------------------------------------------
_TRIED = re.compile(r"[Tt]ried to allocate ([0-9.]+ ?[KMGTP]?i?B)")
_CUPY_OOM = re.compile(r"allocating ([0-9,]+) bytes")


def _is_oom(exc: BaseException) -> bool:
    if type(exc).__name__ in ("OutOfMemoryError", "OutOfMemoryError_"):  # torch, CuPy
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def format_bytes(n: int) -> str:
    """``n`` bytes as ``'1.50 GiB (1610612736 bytes)'``."""
    for unit, k in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n / (1 << k):.2f} {unit} ({n} bytes)"
    return f"{n} bytes"


@contextlib.contextmanager
def oom_guard(what: str, nbytes: int | None = None):
    """Turn a CUDA out-of-memory error inside the block into :class:`DeviceOutOfMemory`
    naming ``what`` and the size asked for (``nbytes`` if given, else the size in the
    torch / CuPy message).  Use it around allocations made before anything is written to
    an input, so that the inputs are unchanged when it raises."""
    try:
        yield
    except DeviceOutOfMemory:
        raise
    except Exception as exc:  # only out-of-memory errors are converted
        if not _is_oom(exc):
            raise
        if nbytes is not None:
            asked = format_bytes(int(nbytes))
        else:
            m, c = _TRIED.search(str(exc)), _CUPY_OOM.search(str(exc))
            asked = m.group(1) if m else (format_bytes(int(c.group(1).replace(",", ""))) if c
                                           else "an unknown size")
        raise DeviceOutOfMemory(
            f"{what}: CUDA out of memory allocating {asked}; the inputs are unchanged. Free GPU "
            "memory (smaller inputs or batches, torch.cuda.empty_cache()) or run on the CPU "
            "(device='cpu').") from exc


def to_device(t, device, name: str):
    """``t.to(device)`` under :func:`oom_guard` with the size of the copy (``t`` unchanged);
    ``t`` itself when it is already there."""
    if t.device == device:
        return t
    with oom_guard(f"{name}: copy to {device}", t.numel() * t.element_size()):
        return t.to(device)
