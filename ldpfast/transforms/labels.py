"""Label transform: randomized response on ``data.y`` (LPGNN eq. 11, RGNN section IV-B)."""
from __future__ import annotations

import torch

from .._backend import check_backend
from .._checks import check_eps, check_int, check_mask
from ..mechanisms.features import MAX_DOMAIN
from ..mechanisms.labels import rr_labels
from ..privacy.report_once import IDENTITY_DEFAULT
from ..privacy.users import DEFAULT_DOMAIN
from .base import ReportOnce, _record

__all__ = ["RRLabels"]


class RRLabels(ReportOnce):
    """Randomized response on ``data.y`` (LPGNN eq. 11, RGNN section IV-B).

    The mask used is stored as ``data.y_rr_mask``.  Users withheld by a store's budget get
    label -1 and are left out of ``y_rr_mask`` (``data.y_withheld`` marks them).
    Privacy: ``eps``-LDP per node.

    Parameters
    ----------
    eps : float
        Label budget ``eps_y``.
    mask : {"train_val", "train", "all"}, str attribute name, or tensor
        Nodes that report their label.  ``"train_val"`` (default): ``train_mask | val_mask``
        when the data has both (what LPGNN's and RGNN's code do; test labels stay clean),
        else all nodes.  Any other string names an attribute of ``data``.  A tensor, given
        or read from ``data``, is a bool mask of one entry per node or a 1-D tensor of
        distinct node ids (as PyG code holds node sets either way); its length is checked
        against ``data.y``.
    num_classes : int, optional
        Default: ``data.num_classes`` if set, else ``int(y.max()) + 1`` (the class count
        is treated as public).  Nodes outside the mask may hold any label, e.g. PyG's ``-1``
        for unlabelled nodes: they are neither checked nor changed.
    seed, user_key, dataset, store, identity
        Who the users are, the secret and the per-user ledger (see :class:`ReportOnce`).  A
        node's own mask bit enters its report key; split masks are not part of a graph's
        identity.
    backend : {"cpp", "numba", "cuda"}, optional
        Kernel backend (default: the input's device decides: CUDA kernels for CUDA tensors,
        else C++ if built, else Numba).
    """

    def __init__(self, eps: float, mask="train_val", num_classes: int | None = None,
                 seed: int | None = None, backend: str | None = None, *,
                 user_key: str | None = None, dataset: str = DEFAULT_DOMAIN, store=None,
                 identity: str = IDENTITY_DEFAULT):
        check_eps("eps", eps)
        if num_classes is not None:
            check_int("num_classes", num_classes, 1, MAX_DOMAIN)
        if isinstance(mask, torch.Tensor):
            # dtype, rank, negative or repeated ids now; the length against data.y in forward
            check_mask("mask", mask, None)
        elif not isinstance(mask, str) or not mask:
            got = repr(mask) if isinstance(mask, str) else type(mask).__name__
            raise TypeError(f"mask: expected 'train_val', 'train', 'all', an attribute name, a bool mask or "
                            f"a tensor of node ids, got {got}")
        self.eps, self.mask, self.num_classes = eps, mask, num_classes
        self.backend = check_backend(backend)
        self._init_report_once(seed, identity, user_key, dataset, store)

    def _mask(self, data, n: int) -> torch.Tensor:
        """The (n,) bool mask of the reporting nodes; each mask read from ``data`` is checked
        under its own name (a wrong-length ``data.train_mask`` says so)."""
        mk, dev = self.mask, data.y.device
        if isinstance(mk, torch.Tensor):
            return check_mask("mask", mk, n)
        if mk == "all":
            return torch.ones(n, dtype=torch.bool, device=dev)
        if mk == "train_val":
            tr, va = getattr(data, "train_mask", None), getattr(data, "val_mask", None)
            if tr is None or va is None:
                return torch.ones(n, dtype=torch.bool, device=dev)
            return check_mask("data.train_mask", tr, n) | check_mask("data.val_mask", va, n)
        name = "train_mask" if mk == "train" else mk
        t = getattr(data, name, None)
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"mask: data has no tensor attribute {name!r} (a bool mask or node ids)")
        return check_mask(f"data.{name}", t, n)

    def forward(self, data):
        y = getattr(data, "y", None)
        if y is None:
            raise ValueError("data.y: the transform needs node labels")
        c = self.num_classes
        if c is None:
            c = getattr(data, "num_classes", None)
            if not isinstance(c, int):
                c = int(y.max()) + 1 if y.numel() else 1
        mask = self._mask(data, y.shape[0])
        keying = self._keying(data, y.shape[0], y.device)
        out, spent = rr_labels(y, c, self.eps, mask=mask, backend=self.backend, _keying=keying)
        withheld, spent = self._release(keying, spent, reported=mask)
        if withheld is not None:
            w = torch.from_numpy(withheld).to(y.device)
            out = torch.where(w, torch.full_like(out, -1), out)
            mask = mask & ~w
            data.y_withheld = w
        data.y = out
        data.y_rr_mask = mask
        _record(data, spent)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(eps={self.eps}, mask={self.mask!r})"
