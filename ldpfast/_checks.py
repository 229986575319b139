"""Argument validation shared by every public function.

A privacy mechanism that silently accepts eps <= 0, NaN or out-of-domain values is a
security bug, so every check raises *before* anything is modified, and the message names
the parameter and the allowed range.
"""
from __future__ import annotations

import math
from numbers import Integral, Real

import torch


def check_eps(name: str, eps, *, allow_inf: bool = False) -> float:
    """A privacy budget: a real number > 0 (finite unless ``allow_inf``)."""
    if isinstance(eps, bool) or not isinstance(eps, Real):
        raise TypeError(f"{name}: expected a real number > 0, got {type(eps).__name__}")
    eps = float(eps)
    if math.isnan(eps) or eps <= 0 or (math.isinf(eps) and not allow_inf):
        raise ValueError(f"{name}: expected a finite real number > 0, got {eps}")
    return eps


def check_prob(name: str, p, *, open_low: bool = False, open_high: bool = False) -> float:
    """A probability in [0, 1] (ends optionally open)."""
    if isinstance(p, bool) or not isinstance(p, Real):
        raise TypeError(f"{name}: expected a real number in [0, 1], got {type(p).__name__}")
    p = float(p)
    lo_ok = p > 0 if open_low else p >= 0
    hi_ok = p < 1 if open_high else p <= 1
    if math.isnan(p) or not (lo_ok and hi_ok):
        lo, hi = "(" if open_low else "[", ")" if open_high else "]"
        raise ValueError(f"{name}: expected a value in {lo}0, 1{hi}, got {p}")
    return p


def check_int(name: str, v, lo: int | None = None, hi: int | None = None) -> int:
    """An integer in [lo, hi] (either bound optional)."""
    if isinstance(v, bool) or not isinstance(v, Integral):
        raise TypeError(f"{name}: expected an int, got {type(v).__name__}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        rng = f"[{lo if lo is not None else '-inf'}, {hi if hi is not None else 'inf'}]"
        raise ValueError(f"{name}: expected an int in {rng}, got {v}")
    return v


def check_real(name: str, v, lo: float | None = None, hi: float | None = None) -> float:
    """A finite real in [lo, hi] (either bound optional)."""
    if isinstance(v, bool) or not isinstance(v, Real):
        raise TypeError(f"{name}: expected a real number, got {type(v).__name__}")
    v = float(v)
    if not math.isfinite(v) or (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"{name}: expected a finite number in [{lo}, {hi}], got {v}")
    return v


def check_tensor(name: str, t, *, dims: int | None = None, dtypes=None) -> torch.Tensor:
    """A torch tensor of the given rank and one of the given dtypes."""
    if not isinstance(t, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if dims is not None and t.dim() != dims:
        raise ValueError(f"{name}: expected a {dims}-D tensor, got shape {tuple(t.shape)}")
    if dtypes is not None and t.dtype not in dtypes:
        raise TypeError(f"{name}: expected dtype in {[str(d) for d in dtypes]}, got {t.dtype}")
    return t


_INDEX_DTYPES = (torch.int8, torch.int16, torch.int32, torch.int64)


def check_mask(name: str, mask, n: int | None, *, device=None) -> torch.Tensor:
    """A node mask as an ``(n,)`` bool tensor, from a bool mask or an index tensor.

    PyG code holds node sets both ways (``data.train_mask``, or ``mask.nonzero().view(-1)``
    and ``torch.tensor([0, 5, 7])``), so every mask parameter takes both.  An integer tensor
    is a list of node ids: distinct, in ``[0, n)``; it becomes the bool mask of length ``n``.
    ``uint8`` is refused (it is ambiguous: an old-style byte mask or node ids).

    Parameters
    ----------
    name : str
        The parameter's name for error messages (e.g. ``"mask"``, ``"data.train_mask"``).
    mask : torch.Tensor
        1-D bool tensor of ``n`` entries, or 1-D int8/16/32/64 tensor of node ids.
    n : int or None
        Number of nodes.  ``None`` (a constructor, before the graph is known): check all but
        the length and the upper bound of the ids, and return ``mask`` as it is.
    device : torch.device or str, optional
        Where the result goes (default: the mask's own device).  A bool mask already there
        is returned as it is (no copy).

    Raises
    ------
    TypeError
        Not a tensor, or neither bool nor a signed integer dtype.
    ValueError
        Not 1-D, a bool mask of the wrong length, ids outside ``[0, n)`` or repeated.
    """
    if not isinstance(mask, torch.Tensor):
        raise TypeError(f"{name}: expected a bool mask of shape ({n},) or a 1-D tensor of node ids, "
                        f"got {type(mask).__name__}")
    if mask.dim() != 1:
        raise ValueError(f"{name}: expected a bool mask of shape ({n},) or a 1-D tensor of node ids, "
                         f"got shape {tuple(mask.shape)}")
    if mask.dtype == torch.bool:
        if n is not None and mask.shape[0] != n:
            raise ValueError(f"{name}: a bool mask needs one entry per node ({n}), got {mask.shape[0]}")
        return mask if device is None or n is None or mask.device == torch.device(device) else mask.to(device)
    if mask.dtype not in _INDEX_DTYPES:
        hint = " (a byte mask: pass mask.bool(); node ids: pass mask.long())" if mask.dtype == torch.uint8 else ""
        raise TypeError(f"{name}: expected a bool mask or an integer tensor of node ids, got {mask.dtype}{hint}")
    idx = mask.to(torch.int64) if device is None or mask.device == torch.device(device) else \
        mask.to(device=device, dtype=torch.int64)
    if not idx.numel():
        return mask if n is None else torch.zeros(n, dtype=torch.bool, device=idx.device)
    lo, hi = (int(v) for v in torch.aminmax(idx))
    if lo < 0 or (n is not None and hi >= n):
        raise ValueError(f"{name}: node ids must lie in [0, {'n' if n is None else n}), got range [{lo}, {hi}]")
    out = torch.zeros(hi + 1 if n is None else n, dtype=torch.bool, device=idx.device)
    out[idx] = True
    if int(out.sum()) != idx.numel():  # one host read; the culprit is looked for on the error path only
        s = torch.sort(idx).values
        dup = int(s[1:][s[1:] == s[:-1]][0])
        raise ValueError(f"{name}: node ids must be distinct, got node {dup} more than once")
    return mask if n is None else out
