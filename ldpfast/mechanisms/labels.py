"""Label randomiser: k-ary randomized response on node labels.

LPGNN (paper 002) eq. (11) and RGNN (paper 000) section IV-B use the same mechanism:
``P(y' | y) = e^eps / (e^eps + c - 1)`` if ``y' = y`` and ``1 / (e^eps + c - 1)`` otherwise.
Kernel: ``rr_labels`` in ``csrc/cpu/features.cpp`` (Numba twin in
``ldpfast/_numba/features.py``), one generator per node, so the output does not depend on
the thread count or backend.
"""
from __future__ import annotations

import torch

from .. import _backend
from .._checks import check_eps, check_int, check_tensor
from ..privacy.budget import Spent
from ..privacy.ldp import grr_probs, grr_threshold
from ..rng import resolve_seed
from .features import INT_DTYPES, MAX_DOMAIN, _backend_name, _cpu_contig, _kernels

__all__ = ["rr_labels"]


def rr_labels(y: torch.Tensor, num_classes: int, eps: float, seed: int | None = None, *,
              mask: torch.Tensor | None = None,
              backend: str | None = None) -> tuple[torch.Tensor, Spent]:
    """Randomized response on labels (LPGNN eq. 11; RGNN section IV-B).

    For every node with ``mask[i]`` true, the label ``y[i]`` in ``[0, c)`` is kept with
    probability ``p = e^eps / (e^eps + c - 1)`` and replaced by each other class with
    probability ``q = 1 / (e^eps + c - 1)``.  Nodes outside the mask keep their label
    unchanged (and are not validated: e.g. ``-1`` for unlabelled test nodes is allowed
    there).

    Parameters
    ----------
    y : torch.Tensor
        ``(n,)`` int32 / int64 labels.
    num_classes : int
        ``c >= 1`` (public).
    eps : float
        Label budget ``eps_y`` > 0.
    seed : int, optional
        64-bit seed (``None``: fresh from the OS); never recorded in the ``Spent`` (it would undo the noise).
    mask : torch.Tensor, optional
        ``(n,)`` bool: the nodes that report a label (default: all).
    backend : {"cpp", "numba"}, optional

    Returns
    -------
    (torch.Tensor, Spent)
        Randomised labels (same shape, dtype, device as ``y``) and the guarantee.

    Privacy
    -------
    ``eps``-LDP for each node's label (a node reports once).
    """
    check_tensor("y", y, dims=1, dtypes=INT_DTYPES)
    c = check_int("num_classes", num_classes, 1, MAX_DOMAIN)
    eps = check_eps("eps", eps)
    seed = resolve_seed(seed)
    n = y.shape[0]
    if mask is None:
        m = torch.ones(n, dtype=torch.bool)
    else:
        check_tensor("mask", mask, dims=1, dtypes=(torch.bool,))
        if mask.shape[0] != n:
            raise ValueError(f"mask: expected {n} entries (one per node), got {mask.shape[0]}")
        m = _cpu_contig(mask)
    yc = _cpu_contig(y)
    sel = yc[m]
    if sel.numel():
        lo, hi = int(sel.min()), int(sel.max())
        if lo < 0 or hi >= c:
            bad = int(torch.nonzero(m & ((yc < 0) | (yc >= c)))[0])
            raise ValueError(f"y: label {int(yc[bad])} of node {bad} is outside "
                             f"[0, num_classes) = [0, {c})")
    T = grr_threshold(eps, c)
    K = _kernels(_backend.device_of(y), backend)
    out = torch.empty_like(yc)
    K.rr_labels(yc.numpy(), m.numpy(), c, T, seed, out.numpy())
    p, q = grr_probs(eps, c)
    spent = Spent("rr_labels", "labels", eps, guarantee="eps-LDP per node",
                  params={"num_classes": c, "p": p, "q": q, "num_randomised": int(m.sum()),
                          "backend": _backend_name(K),
                          "source": "LPGNN eq. (11); RGNN sec. IV-B"})
    return out.to(y.device), spent
