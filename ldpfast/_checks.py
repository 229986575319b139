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
