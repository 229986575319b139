"""Label randomiser: k-ary randomized response on node labels.

LPGNN (Sajadmanesh & Gatica-Perez, CCS 2021) eq. (11) and RGNN (Bhaila et al., SDM 2024)
section IV-B use the same mechanism:
``P(y' | y) = e^eps / (e^eps + c - 1)`` if ``y' = y`` and ``1 / (e^eps + c - 1)`` otherwise.
Kernel: ``rr_label`` in ``csrc/common/features.h``, run by the C++ (``csrc/cpu/features.cpp``)
and CUDA (``csrc/cuda/features.cu``) launchers (Numba twin in ``ldpfast/_numba/features.py``),
one generator per node, so the output does not depend on the thread count or backend.  CUDA
labels stay on their device; the CUDA kernel checks the labels in its own pass.
"""
from __future__ import annotations

import torch

from .._checks import check_eps, check_int, check_mask, check_tensor
from ..privacy.budget import Spent
from ..privacy.ldp import grr_probs, grr_threshold
from ..privacy.users import DEFAULT_DOMAIN, keying_of
from .features import (
    _FUSED,
    INT_DTYPES,
    MAX_DOMAIN,
    _array_view,
    _device_of,
    _kernel_seeds,
    _kernels,
    _seeds_for,
)

__all__ = ["rr_labels"]


def rr_labels(y: torch.Tensor, num_classes: int, eps: float, seed: int | None = None, *,
              mask: torch.Tensor | None = None, user_keys=None, dataset: str = DEFAULT_DOMAIN,
              backend: str | None = None, row_offset: int = 0, _keying=None) -> tuple[torch.Tensor, Spent]:
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
        The caller's 64-bit secret (``None``: fresh from the OS); never recorded in the
        ``Spent`` (it would undo the noise).
    mask : torch.Tensor, optional
        The nodes that report a label (default: all): an ``(n,)`` bool mask or a 1-D tensor
        of distinct node ids (made the bool mask).  A node's own mask bit enters its report
        key (it changes its output law).
    user_keys, dataset : optional
        Who each row is and the dataset's name (see :func:`ldpfast.mechanisms.grr`): row
        ``i``'s report is keyed to user ``user_keys[i]`` (default ``row_offset + i``), its own
        label and mask bit, ``eps`` and ``num_classes``.
    backend : {"cpp", "numba", "cuda"}, optional
        Kernel backend (default: CUDA kernels for CUDA tensors, else C++ if built, else Numba).
    row_offset : int
        Key of ``y[0]`` when ``user_keys`` is None (default 0): ``rr_labels(y[a:b], ...,
        row_offset=a)`` equals ``rr_labels(y, ...)[0][a:b]`` bit for bit (mask sliced alike).

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
    keying = keying_of(seed, user_keys, dataset, row_offset, _keying)
    n = y.shape[0]
    if mask is not None:
        mask = check_mask("mask", mask, n)
    device = _device_of(y=y, mask=mask)
    K, name = _kernels(device, backend)
    yc = y.detach().contiguous()
    m = (torch.ones(n, dtype=torch.bool, device=yc.device) if mask is None
         else mask.detach().contiguous())
    def check(first: int | None = None) -> None:
        # Numba: a torch pass before the kernel.  C++ and CUDA: the kernel's own pass flags the
        # first bad node (no second read of y); its output is dropped with the exception.
        if first is None:
            bad = m & ((yc < 0) | (yc >= c))
            first = int(torch.nonzero(bad)[0, 0]) if bool(bad.any()) else -1
        if first >= 0:
            raise ValueError(f"y: label {int(yc[first])} of node {first} is outside "
                             f"[0, num_classes) = [0, {c})")

    if name not in _FUSED:
        check()
    T = grr_threshold(eps, c)
    seeds = _seeds_for(keying, "rr_labels", {"eps": eps, "num_classes": c, "dtype": str(yc.dtype)}, yc, name,
                       extra=m)
    out = torch.empty_like(yc)
    view = _array_view(device)
    first = K.rr_labels(view(yc), view(m), c, T, _kernel_seeds(name, seeds), view(out))
    if name in _FUSED:  # the kernel checked the labels and derived the seeds (seeds: KernelKeys)
        check(first)
        keying.record(seeds)
    p, q = grr_probs(eps, c)
    spent = Spent("rr_labels", "labels", eps, guarantee="eps-LDP per node",
                  params={"num_classes": c, "p": p, "q": q, "num_randomised": int(m.sum()),
                          "backend": name,
                          "source": "LPGNN eq. (11); RGNN sec. IV-B"})
    return out, spent
