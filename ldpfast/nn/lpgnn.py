"""LPGNN's label denoising and corrected loss, for any PyG model.

Paper: S. Sajadmanesh and D. Gatica-Perez, "Locally Private Graph Neural Networks", CCS 2021
(section 3.3, eqs. 11-14).  The labelled nodes report ``y' = RR(y, eps_y)`` (eq. 11,
:class:`ldpfast.transforms.RRLabels`); the server

* denoises them by label propagation (eq. 12, :func:`denoise_labels`): ``y~`` is the class
  most present among the noisy labels within ``K_y`` hops;
* trains with the corrected loss (eqs. 13-14, :func:`corrected_loss`): the model's
  ``p(y|x)`` is mapped to ``p(y'|x) = p(y|x) P`` through RR's transition matrix ``P``
  (:func:`rr_transition`), then propagated like the labels, and scored against ``y~``.

:func:`ldpfast.methods.lpgnn.fit` (the paper's pipeline with its Drop model selection) is
built on these functions.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from .._checks import check_int, check_mask, check_tensor

__all__ = ["corrected_loss", "denoise_labels", "rr_transition"]


def rr_transition(num_classes: int, eps: float) -> torch.Tensor:
    """``P[y, y'] = p(y'|y)`` of randomized response (LPGNN eq. 11): ``e^eps / (e^eps + c - 1)``
    on the diagonal, ``1 / (e^eps + c - 1)`` elsewhere; the identity for ``eps = inf``."""
    c = check_int("num_classes", num_classes, 1)
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or math.isnan(eps) or eps <= 0:
        raise ValueError(f"eps: expected a number > 0 or math.inf, got {eps!r}")
    if math.isinf(eps):
        return torch.eye(c)
    denom = math.exp(eps) + c - 1
    P = torch.full((c, c), 1.0 / denom)
    P.fill_diagonal_(math.exp(eps) / denom)
    return P


def denoise_labels(y: torch.Tensor, mask, adj, kprop: Callable, num_classes: int | None = None) -> torch.Tensor:
    """LPGNN's label propagation (eq. 12): ``y~ = argmax KProp(onehot(y') * mask, K_y)``.

    Parameters
    ----------
    y : torch.Tensor
        ``(n,)`` integer noisy labels ``y'``.  Only the nodes in ``mask`` are read: the others
        may hold anything, e.g. PyG's ``-1`` for unlabelled nodes.
    mask : torch.Tensor
        The nodes that reported a label (LPGNN: train + val), a bool mask or node ids.
    adj
        The graph, as ``kprop`` takes it (``edge_index``, ``adj_t``, CSR).
    kprop : callable
        ``kprop(x, adj)``, e.g. ``ldpfast.nn.KProp(k=K_y, aggr="gcn", cached=True)`` (the
        paper's GCN aggregator).
    num_classes : int, optional
        Default ``y[mask].max() + 1``.

    Returns
    -------
    torch.Tensor
        ``(n,)`` int64 ``y~``.  A node that receives no label within ``K_y`` hops keeps its
        own ``y`` (``K_y = 0``: ``y~ = y'``).
    """
    check_tensor("y", y, dims=1, dtypes=(torch.int8, torch.int16, torch.int32, torch.int64))
    mask = check_mask("mask", mask, y.shape[0], device=y.device)
    sel = y[mask]
    c = (int(sel.max()) + 1 if sel.numel() else 1) if num_classes is None else check_int("num_classes", num_classes, 1)
    if sel.numel() and (int(sel.min()) < 0 or int(sel.max()) >= c):
        raise ValueError(f"y: labels of the masked nodes must lie in [0, num_classes) = [0, {c})")
    Y = F.one_hot(y.long().clamp(min=0), c).to(torch.float32) * mask[:, None]
    agg = kprop(Y, adj)
    return torch.where(agg.abs().sum(1) > 0, agg.argmax(1), y.long())


def corrected_loss(logits: torch.Tensor, y: torch.Tensor, mask, transition: torch.Tensor | None = None,
                   kprop: Callable | None = None, adj=None) -> torch.Tensor:
    """LPGNN's training loss (eqs. 13-14), and the forward-corrected loss it builds on.

    ``p = softmax(logits)`` is the model's ``p(y|x)``; with ``transition`` (``P`` of
    :func:`rr_transition`) it becomes ``p(y'|x) = p(y|x) P`` (eq. 13: forward correction,
    Patrini et al. 2017); with ``kprop`` too, ``p(y~|x) = softmax(kprop(p, adj))`` (eq. 14,
    the same propagation as :func:`denoise_labels`).  Returns the mean negative
    log-likelihood of ``y`` over ``mask``.

    * LPGNN training: ``corrected_loss(logits, y_tilde, train_mask, P, kprop_y, adj)``;
    * its validation loss (noisy validation labels): ``corrected_loss(logits, y_noisy,
      val_mask, P)``;
    * plain cross entropy on noisy labels: ``corrected_loss(logits, y_noisy, train_mask)``.

    Parameters
    ----------
    logits : torch.Tensor
        ``(n, c)`` model output.
    y : torch.Tensor
        ``(n,)`` integer targets; only those in ``mask`` are read (others may be ``-1``).
    mask : torch.Tensor
        The scored nodes: a bool mask or node ids.
    transition : torch.Tensor, optional
        ``(c, c)`` row-stochastic ``P[y, y'] = p(y'|y)``.
    kprop : callable, optional
        ``kprop(x, adj)``, e.g. ``ldpfast.nn.KProp(k=K_y, aggr="gcn", cached=True)``.
    adj : optional
        The graph passed to ``kprop``.
    """
    mask = check_mask("mask", mask, logits.shape[0], device=logits.device)
    p = F.softmax(logits, dim=1)
    if transition is not None:
        p = p @ transition.to(p.device, p.dtype)  # eq. 13
    if kprop is not None:
        p = F.softmax(kprop(p, adj), dim=1)  # eq. 14
    # log(p + 1e-12): p(y'|x) is a probability, not a log-softmax (the floor keeps it finite)
    return F.nll_loss(torch.log(p[mask] + 1e-12), y[mask])
