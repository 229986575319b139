"""Host-synchronisation audit: which torch calls in a block would stall a GPU.

On a GPU, a call that needs a device value on the host (``.item()``, ``int(t)``, ``if t:``,
``.tolist()``, ``.cpu()``) or whose output size depends on device data (``nonzero``,
``unique``, boolean-mask indexing, ``repeat_interleave`` without ``output_size``, CUDA
``bincount``) waits for every queued kernel: the host stops issuing launches and a
launch-bound step (a DP-SGD step on small batches) pays the whole pipeline drain each time.
:func:`audit_syncs` records these calls in a block of code *on any tensors*, CPU tensors
included, so the syncs of a CUDA code path can be counted on a machine without a GPU (run the
path with the fake CUDA backend of ``tests/_fake_cuda.py``, whose stand-in tensors live on the
CPU)::

    from ldpfast._syncs import audit_syncs

    with audit_syncs() as audit:
        step()
    print(audit.report())       # one line per sync: where (file:line), which call, why
    assert audit.count() <= 3

What is seen, and how
---------------------
A :class:`torch.overrides.TorchFunctionMode` sees every torch function and ``Tensor`` method
called from Python, including ``__bool__`` / ``__int__`` / ``__float__`` / ``__index__`` /
``__format__`` (``if t:``, ``int(t)``, ``range(t)``, f-strings) and ``__getitem__`` /
``__setitem__`` (whose indices are inspected for boolean masks and tensor slice bounds).
Calls that torch makes internally (C++ or inside a call already seen) are not seen twice:
the mode is off while a call runs.  Not seen: syncs inside C++ extensions (e.g. an op of a
compiled extension that reads a size) and ``torch.cuda.synchronize``; and
``ldpfast._cuda`` launchers read their results in their own code, which the fake backend
replaces: while the audit runs every launcher of the loaded cuda backend is wrapped, calls
inside a launcher are not seen (on a GPU they are device work; in a stand-in, host work of
the stand-in), and the launchers named in :data:`READBACK_LAUNCHERS` count once per call.

``device`` decides which tensors would live on the GPU (default: all of them, i.e. the block
is assumed to run on the device).  A call counts when any tensor argument (or, for
``to``/``cpu``, the tensor copied) passes it.
"""
from __future__ import annotations

import functools
import os
import sys
import traceback
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["READBACK_LAUNCHERS", "SyncAudit", "SyncEvent", "audit_syncs"]

# calls that read a device value on the host
_READS = {
    "item": "reads a value on the host", "tolist": "copies to the host", "numpy": "copies to the host",
    "__array__": "copies to the host", "cpu": "copies to the host", "__bool__": "bool(tensor): reads a value",
    "__int__": "int(tensor): reads a value", "__float__": "float(tensor): reads a value",
    "__index__": "tensor used as a Python int (index, range, size)", "__format__": "formats a value",
    "__repr__": "prints a value", "__str__": "prints a value", "equal": "returns a Python bool",
    "allclose": "returns a Python bool",
}
# calls whose output size depends on device data (CUDA reads the size back)
_SHAPES = {
    "nonzero": "data-dependent output size", "argwhere": "data-dependent output size",
    "unique": "data-dependent output size", "unique_consecutive": "data-dependent output size",
    "masked_select": "data-dependent output size",
    "bincount": "CUDA bincount reads max(input) to size its output",
}
# ldpfast._cuda launchers that read a result back (count / size / first bad index)
READBACK_LAUNCHERS: dict[str, str] = {
    "host_ints": "reads sizes on the host (one device-to-host copy)",
    "heter_infer": "sizes n_id from the count pass (int(node_ptr[-1]))",
    "heter_edges": "sizes the edges from the count pass (int(edge_ptr[-1]))",
    "grr": "returns the first bad index (_first_bad)", "grr_fs": "returns the first bad index (_first_bad)",
    "onebit": "returns the first bad index (_first_bad)",
    "multibit_encode": "returns the first bad index (_first_bad)",
    "rr_labels": "returns the first bad index (_first_bad)",
    "csr_combine": "sizes the output (int(orp[-1]))", "edges_rr": "sizes the output (int(orp[-1]))",
    "locallap_zero": "sizes the output (int(orp[-1]))", "edges_check_csr": "reads the check flags (tolist)",
    "edges_sorted_csr": "reads the check flags (tolist)", "spmm_plan": "sizes the chunk plan",
    "fs_estimate_index": "checks the counts on the host", "synth_edges": "sizes the edges (int(rp[-1]))",
}

# launchers that read back only for some arguments
_READBACK_IF = {
    "heter_edges": lambda args, kwargs: len(args) < 6 and kwargs.get("edge_ptr") is None,
}

_HERE = os.path.abspath(__file__)
_TORCH = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep


@dataclass(frozen=True)
class SyncEvent:
    """One call that would synchronise: ``op`` (the torch name), ``why``, ``where``
    (``file:line`` of the innermost caller outside torch and this module) and ``stack``
    (the callers outside torch, innermost last)."""

    op: str
    why: str
    where: str
    stack: tuple[str, ...]

    def __str__(self) -> str:
        return f"{self.where}: {self.op} ({self.why})"


def _tensors(obj, depth=0):
    if isinstance(obj, torch.Tensor):
        yield obj
    elif depth < 3 and isinstance(obj, (tuple, list)):
        for o in obj:
            yield from _tensors(o, depth + 1)
    elif depth < 3 and isinstance(obj, dict):
        for o in obj.values():
            yield from _tensors(o, depth + 1)


def _is_host(target) -> bool:
    try:
        return target is not None and torch.device(target).type == "cpu"
    except (TypeError, RuntimeError):
        return False


def _index_why(index) -> str | None:
    """Why indexing with ``index`` synchronises: a boolean mask or a tensor slice bound."""
    for i in (index if isinstance(index, tuple) else (index,)):
        if isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8):
            return "boolean-mask index (nonzero: data-dependent size)"
        if isinstance(i, slice) and any(isinstance(v, torch.Tensor) for v in (i.start, i.stop, i.step)):
            return "tensor slice bound (read on the host)"
    return None


def _classify(name: str, args, kwargs) -> str | None:
    """Why ``name(*args, **kwargs)`` would synchronise on a GPU, or None."""
    if name in _READS:
        return _READS[name]
    if name in _SHAPES:
        return _SHAPES[name]
    if name == "to":
        targets = [a for a in args[1:] if isinstance(a, (str, torch.device))] + [kwargs.get("device")]
        return "copies to the host" if any(_is_host(t) for t in targets) else None
    if name == "where" and len(args) + len(kwargs) == 1:
        return "where(cond): data-dependent output size"
    if name == "repeat_interleave":
        reps = args[1] if len(args) > 1 else kwargs.get("repeats")
        if args and "repeats" not in kwargs and len(args) == 1:  # torch.repeat_interleave(repeats)
            reps = args[0]
        if isinstance(reps, torch.Tensor) and kwargs.get("output_size") is None:
            return "repeat_interleave without output_size (sums the repeats on the host)"
        return None
    if name in ("__getitem__", "__setitem__", "index_put", "index_put_", "index"):
        return _index_why(args[1] if len(args) > 1 else kwargs.get("indices"))
    if name in ("masked_fill", "masked_fill_", "fill_", "index_fill", "index_fill_"):
        v = args[-1] if args else None
        if isinstance(v, torch.Tensor) and v.dim() == 0:
            return "fill with a 0-d tensor value (CUDA reads it with .item())"
    if name in ("split", "split_with_sizes") and len(args) > 1 and isinstance(args[1], torch.Tensor):
        return "tensor split sizes (read on the host)"
    return None


def _callers() -> tuple[str, ...]:
    out = []
    for fr in traceback.extract_stack()[:-3]:
        path = os.path.abspath(fr.filename)
        if path == _HERE or path.startswith(_TORCH):
            continue
        rel = os.path.relpath(path)
        out.append(f"{path if rel.startswith('..') else rel}:{fr.lineno} ({fr.name})")
    return tuple(out)


class SyncAudit(TorchFunctionMode):
    """The mode :func:`audit_syncs` enters; :attr:`events` lists what it saw."""

    def __init__(self, device: Callable[[torch.Tensor], bool] | None = None, launchers: bool = True):
        super().__init__()
        self.device = device or (lambda t: True)
        self.events: list[SyncEvent] = []
        self._launchers = launchers
        self._patched: list[tuple[object, str, object]] = []
        self._inside = 0  # > 0 inside a wrapped launcher: its own reads are its event

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if not self._inside:
            name = getattr(func, "__name__", "")
            why = _classify(name, args, kwargs)
            if why is not None and any(self.device(t) for t in _tensors((args, kwargs))):
                self._record(name, why)
        return func(*args, **kwargs)

    def _record(self, op: str, why: str) -> None:
        stack = _callers()
        self.events.append(SyncEvent(op, why, stack[-1] if stack else "?", stack))

    # launchers of the cuda backend (real or the tests' stand-in)
    def _wrap_launchers(self) -> None:
        from . import _backend

        mods = [m for m in (_backend._cache.get("cuda"), sys.modules.get("ldpfast._cuda"))
                if m is not None and not isinstance(m, Exception)]
        for mod in dict.fromkeys(mods):
            for name in dir(mod):
                fn = getattr(mod, name)
                # every launcher: what runs inside one runs on the device (or is a stand-in's)
                if not name.startswith("_") and isinstance(fn, types.FunctionType):
                    self._patched.append((mod, name, fn))
                    setattr(mod, name, self._launcher(name, READBACK_LAUNCHERS.get(name), fn))

    def _launcher(self, name, why, fn):
        cond = _READBACK_IF.get(name, lambda args, kwargs: True)

        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            if not self._inside and why is not None and cond(args, kwargs):
                self._record(f"ldpfast._cuda.{name}", why)
            self._inside += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self._inside -= 1
        return wrapped

    def __enter__(self):
        if self._launchers:
            self._wrap_launchers()
        return super().__enter__()

    def __exit__(self, *exc):
        try:
            return super().__exit__(*exc)
        finally:
            for mod, name, fn in reversed(self._patched):
                setattr(mod, name, fn)
            self._patched = []

    # ------------------------------------------------------------------ results
    def count(self, where: str | None = None, *, anywhere: bool = False) -> int:
        """Number of syncs seen (only those :meth:`select` keeps, if ``where`` is given)."""
        return len(self.select(where, anywhere=anywhere))

    def select(self, where: str | None = None, *, anywhere: bool = False) -> list[SyncEvent]:
        """The events whose innermost caller (``anywhere``: any caller of the stack)
        mentions ``where`` (a path fragment), or all."""
        if where is None:
            return list(self.events)
        return [e for e in self.events if any(where in s for s in (e.stack if anywhere else e.stack[-1:]))]

    def report(self) -> str:
        """One line per distinct ``(where, op)``, with its count, in first-seen order."""
        counts = Counter((e.where, e.op, e.why) for e in self.events)
        lines = [f"{n:3d} x {w}: {op} ({why})" for (w, op, why), n in counts.items()]
        return "\n".join([f"{len(self.events)} host syncs", *lines])


def audit_syncs(device: Callable[[torch.Tensor], bool] | None = None, *, launchers: bool = True) -> SyncAudit:
    """A context manager recording the calls that would force a host synchronisation on a
    GPU (module docstring).

    Parameters
    ----------
    device : callable, optional
        ``device(tensor) -> bool``: whether the tensor would be on the GPU; a call counts
        when one of its tensors is.  Default: every tensor.
    launchers : bool
        Wrap the ``ldpfast._cuda`` launchers that read results back
        (:data:`READBACK_LAUNCHERS`) of the loaded cuda backend (the real one or a test
        stand-in) while the block runs.

    Returns
    -------
    SyncAudit
        Use as ``with audit_syncs() as audit: ...``; then ``audit.events``,
        ``audit.count()``, ``audit.report()``.
    """
    return SyncAudit(device, launchers)
