"""Label transform: randomized response on ``data.y`` (LPGNN eq. 11, RGNN section IV-B)."""
from __future__ import annotations

import torch

from .._checks import check_eps, check_int
from ..mechanisms.labels import rr_labels
from ..privacy.report_once import IDENTITY_DEFAULT
from ..privacy.users import DEFAULT_DOMAIN
from .base import ReportOnce, _record

__all__ = ["RRLabels"]


class RRLabels(ReportOnce):
    """Randomized response on ``data.y`` (LPGNN eq. 11, RGNN section IV-B).

    Parameters
    ----------
    eps : float
        Label budget ``eps_y``.
    mask : {"train_val", "train", "all"}, str attribute name, or bool tensor
        Nodes that report their label.  ``"train_val"`` (default): ``train_mask | val_mask``
        when the data has both (what LPGNN's and RGNN's code do; test labels stay clean),
        else all nodes.  Any other string names a bool attribute of ``data``.
    num_classes : int, optional
        Default: ``data.num_classes`` if set, else ``int(y.max()) + 1`` (the class count
        is treated as public).
    seed, user_key, dataset, store, identity
        Who the users are, the secret and the per-user ledger (see :class:`ReportOnce`).  A
        node's own mask bit enters its report key; split masks are not part of a graph's
        identity.
    backend : str, optional

    The mask used is stored as ``data.y_rr_mask``.  Users withheld by a store's budget get
    label -1 and are left out of ``y_rr_mask`` (``data.y_withheld`` marks them).
    Privacy: ``eps``-LDP per node.
    """

    def __init__(self, eps: float, mask="train_val", num_classes: int | None = None,
                 seed: int | None = None, backend: str | None = None, *,
                 user_key: str | None = None, dataset: str = DEFAULT_DOMAIN, store=None,
                 identity: str = IDENTITY_DEFAULT):
        check_eps("eps", eps)
        if num_classes is not None:
            check_int("num_classes", num_classes, 1, 1 << 31)
        if not isinstance(mask, (str, torch.Tensor)):
            raise TypeError(f"mask: expected 'train_val', 'train', 'all', an attribute name or a bool "
                            f"tensor, got {type(mask).__name__}")
        if isinstance(mask, torch.Tensor) and (mask.dtype != torch.bool or mask.dim() != 1):
            raise TypeError(f"mask: a tensor mask must be a 1-D bool tensor, got {mask.dtype} of shape "
                            f"{tuple(mask.shape)}")
        self.eps, self.mask, self.num_classes = eps, mask, num_classes
        self.backend = backend
        self._init_report_once(seed, identity, user_key, dataset, store)

    def _mask(self, data, n):
        mk = self.mask
        if isinstance(mk, torch.Tensor):
            return mk
        if mk == "all":
            return torch.ones(n, dtype=torch.bool, device=data.y.device)
        if mk == "train_val":
            tr, va = getattr(data, "train_mask", None), getattr(data, "val_mask", None)
            if tr is None or va is None:
                return torch.ones(n, dtype=torch.bool, device=data.y.device)
            return tr | va
        if mk == "train":
            mk = "train_mask"
        if isinstance(mk, str):
            t = getattr(data, mk, None)
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"mask: data has no bool tensor attribute {mk!r}")
            return t
        raise TypeError(f"mask: expected 'train_val', 'train', 'all', an attribute name or a bool "
                        f"tensor, got {type(mk).__name__}")

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
