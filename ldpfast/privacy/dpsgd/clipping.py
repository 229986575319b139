"""Per-sub-graph gradient clipping for node-level DP-SGD on GNNs (Opacus' ``grad_sample``).

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks", Algorithm 1 lines 4-10: every sub-graph ``G_i`` of a HeterPoisson batch gives a
gradient ``g_i = grad f(G_i; w)``, clipped to ``g_i min(1, C / ||g_i||)`` (the paper uses
``C = 0.5``), summed, and released with Gaussian noise ``N(0, sigma^2 I)``.

How the per-sub-graph gradients are computed (and why not ``vmap``)
-------------------------------------------------------------------
A HeterPoisson batch is *one block-diagonal graph*: no edge crosses two sub-graphs and each
sub-graph's loss only reads its own central node.  With ``loss = sum_b loss_b``, one ordinary
forward/backward therefore gives, at every node-level layer input ``a_n`` and output-gradient
``g_n``, exactly the quantities of sub-graph ``b(n)``'s own backward pass.  Every parameter
gradient of the PyG layers used here is a sum over nodes of such local terms
(``W: sum_n g_n a_n^T``, biases ``sum_n g_n``, GIN's ``eps: sum_n <dL/dh_n, x_n>``), so

* the per-sub-graph gradient of ``W`` is ``G_b^T A_b`` (rows of sub-graph ``b``), and its
  squared norm is ``<A_b A_b^T, G_b G_b^T>`` ("ghost" norm: Goodfellow 2015, Li et al. 2022)
  when ``L_b (d_in + d_out) < d_in d_out`` (``L_b`` rows), else computed by materialising
  ``G_b^T A_b``; sub-graphs are bucketed by padded size (powers of two), one ``bmm`` per bucket;
* the clipped sum ``sum_b c_b G_b^T A_b = (c_{b(n)} g_n)^T A`` is one matmul per layer
  ("book-keeping", Bu et al. 2023): no second backward, no ``B x |params|`` tensor.

This is exact (the same numbers as a loop over sub-graphs, up to float summation order:
checked to 1e-5 relative in the tests) and works on the sparse block-diagonal batch with the
unmodified PyG layers ``GCNConv``, ``SAGEConv`` (mean / sum / max aggregation) and
``GINConv`` (any MLP of ``Linear`` layers, ``train_eps`` allowed), plus ``torch.nn.Linear``
heads.  ``torch.func.vmap`` (what the paper's code uses) needs one fixed padded size per
batch and a message passing that vmap can trace: PyG's ``GCNConv`` cannot be vmapped over
per-sub-graph ``edge_index`` (``add_remaining_self_loops`` indexes with a boolean mask:
"vmap: We do not support batching operators that can support dynamic shape"), so the authors
rewrote their GNNs as dense "mean over the rows" modules; padding also costs
``O(B L_max d)`` memory and ``O(B |params|)`` for the per-sample gradients.  Layers whose
parameters are not covered (LSTM aggregation, attention, ...) raise a clear error at wrap
time.

All of this assumes that every sub-graph's output depends on that sub-graph alone; a layer
computing over the whole batch (BatchNorm in training mode, PyG's ``PairNorm``,
``MeanSubtractionNorm``, ``LayerNorm(mode="graph")``, global pooling, ...) would let one
node's sub-graph move the others' gradients by far more than ``C``.  :mod:`.mixing` refuses
the known ones at wrap time and checks the first training batch for the rest.

Numerics: norms are accumulated in float64; gradients are clipped to ``C (1 - 1e-5)`` so
that float32 rounding of the norm cannot push a clipped gradient above ``C``.

Devices: everything runs on the device of the batch and the model (CUDA included): norms,
buckets, the clipped sum.  Host syncs per step are only the bucket sizes (a padded size must
be known before its ``bmm`` is allocated).  The Gaussian noise of :class:`DPOptimizer` is
drawn by its CPU generator (so a seed gives the same noise bits on every device) and moved to
the parameters' device in one asynchronous copy from pinned memory per step (``|params|``
floats; no device-to-host transfer).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ..._checks import check_eps
from .mixing import check_no_mixing_layers, check_subgraph_independence

__all__ = ["ClipStats", "SubgraphGradSampleModule", "clipped_sum_loop", "flat_grad",
           "per_subgraph_gradients_loop", "subgraph_loss"]

CLIP_MARGIN = 1e-5


def _linear_types():
    types = [torch.nn.Linear]
    try:
        from torch_geometric.nn.dense.linear import Linear as PygLinear

        types.append(PygLinear)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


@dataclass
class ClipStats:
    """Per-sub-graph gradient norms of the last step and the clipping factors applied."""

    norms: torch.Tensor
    factors: torch.Tensor

    @property
    def clipped_fraction(self) -> float:
        return float((self.factors < 1).float().mean()) if self.factors.numel() else 0.0


class _Rec:
    """Activations / output-gradients captured for one parameterised use of a module."""

    __slots__ = ("a", "g", "kind", "module")

    def __init__(self, module, kind, a):
        self.module, self.kind, self.a, self.g = module, kind, a, None


class SubgraphGradSampleModule(torch.nn.Module):
    """Wrap a PyG model so that a backward pass also yields per-sub-graph gradient norms and
    the clipped sum (the node-level analogue of Opacus' ``GradSampleModule``).

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(x, edge_index)`` and returning node-level outputs ``(N, C)``.
        Its trainable parameters must all live in ``Linear`` layers (``torch.nn.Linear`` or
        PyG's), in ``GCNConv.bias`` or in ``GINConv.eps``, and every sub-graph's output must
        depend on that sub-graph alone: layers of
        :data:`~ldpfast.privacy.dpsgd.mixing.MIXING_LAYERS` are refused.
    check_independence : bool
        Run :func:`~ldpfast.privacy.dpsgd.mixing.check_subgraph_independence` on the first
        training forward with at least two sub-graphs (three extra forwards without
        autograd, once; parameters, gradients, buffers, the RNG state and the batch are left
        as they were).  Default on; turn it off only for a model already checked.

    Raises
    ------
    SubgraphMixingError
        (a ``TypeError``) at construction for a layer of ``MIXING_LAYERS``, or on the first
        training forward when removing or perturbing one sub-graph changes another's
        outputs, naming the first module concerned.

    Use
    ---
    ``out = gsm(batch)`` (a :class:`ldpfast.sampling.SubgraphBatch`), then a loss that is a
    *sum* of per-sub-graph losses (:func:`subgraph_loss`), ``loss.backward()``, then
    :meth:`clip_and_accumulate` (or let :class:`DPOptimizer` do it): afterwards every
    ``p.grad`` holds ``sum_b min(1, C/||g_b||) g_b``.
    """

    def __init__(self, model: torch.nn.Module, *, check_independence: bool = True):
        super().__init__()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(check_independence, bool):
            raise TypeError(f"check_independence: expected a bool, got {type(check_independence).__name__}")
        self._module = model
        # the runtime check is pending until a training forward with >= 2 sub-graphs passed it
        self._independence_pending = check_independence
        self._recs: list[_Rec] = []
        self._active = False
        self._seg: torch.Tensor | None = None
        self._num_subgraphs = 0
        self._handles = []
        self._validate_and_hook()

    # ------------------------------------------------------------------ hooks
    def _validate_and_hook(self):
        from torch_geometric.nn import GCNConv, GINConv, SAGEConv

        check_no_mixing_layers(self._module)
        lin = _linear_types()
        covered: set[int] = set()
        for name, m in self._module.named_modules():
            own = [(n, p) for n, p in m.named_parameters(recurse=False) if p.requires_grad]
            if isinstance(m, lin):
                for n, p in own:
                    if isinstance(p, torch.nn.parameter.UninitializedParameter):
                        raise TypeError(f"{name}.{n}: lazy (uninitialised) parameter; give in_channels")
                    covered.add(id(p))
                self._handles.append(m.register_forward_hook(self._hook_linear))
            elif isinstance(m, GCNConv):
                if getattr(m, "cached", False):
                    raise ValueError(f"{name}: GCNConv(cached=True) caches the normalisation across batches")
                for n, p in own:
                    if n != "bias":
                        raise TypeError(f"{name}.{n}: unsupported GCNConv parameter")
                    covered.add(id(p))
                if own:
                    self._handles.append(m.register_forward_hook(self._hook_out_bias))
            elif isinstance(m, GINConv):
                for n, p in own:
                    covered.add(id(p))  # eps
                if own:
                    self._handles.append(m.register_forward_pre_hook(self._hook_gin_pre))
                    self._handles.append(m.nn.register_forward_pre_hook(self._hook_gin_nn_pre(m)))
            elif isinstance(m, SAGEConv):
                if type(getattr(m, "aggr_module", None)).__name__ == "LSTMAggregation":
                    raise TypeError(f"{name}: SAGEConv(aggr='lstm') is not supported")
            elif own:
                raise TypeError(
                    f"{name}: parameters {[n for n, _ in own]} of {type(m).__name__} are not supported by "
                    "per-sub-graph clipping (supported: Linear, GCNConv, SAGEConv, GINConv)")
        missing = [n for n, p in self._module.named_parameters() if p.requires_grad and id(p) not in covered]
        if missing:
            raise TypeError(f"parameters not covered by per-sub-graph clipping: {missing}")

    def _rows_seg(self, rows: int) -> torch.Tensor:
        if self._seg is not None and rows == self._seg.numel():
            return self._seg
        if rows == self._num_subgraphs:
            return torch.arange(rows, device=self._device())
        raise RuntimeError(f"a parameterised layer saw {rows} rows: expected one per batch node "
                           f"({self._seg.numel() if self._seg is not None else '?'}) or one per sub-graph "
                           f"({self._num_subgraphs}); edge-level layers are not supported")

    def _device(self) -> torch.device:
        """Device of the last batch (its ``seg``), else of the parameters."""
        if self._seg is not None:
            return self._seg.device
        p = next(self._module.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def _hook_linear(self, module, inputs, output):
        if not self._active or not torch.is_grad_enabled():
            return
        a = inputs[0].detach()
        rec = _Rec(module, "linear", a.reshape(-1, a.shape[-1]) if a.dim() > 2 else a)
        if a.dim() > 2:
            rec.kind = ("linear", a.shape[0], a.numel() // (a.shape[0] * a.shape[-1]))
        self._recs.append(rec)
        self._grad_hook(output, rec)

    def _hook_out_bias(self, module, inputs, output):
        if not self._active or not torch.is_grad_enabled():
            return
        rec = _Rec(module, "bias", None)
        self._recs.append(rec)
        self._grad_hook(output, rec)

    def _hook_gin_pre(self, module, inputs):
        if not self._active or not torch.is_grad_enabled():
            return
        x = inputs[0]
        x_r = x[1] if isinstance(x, (tuple, list)) else x
        module._ldp_xr = None if x_r is None else x_r.detach()

    def _hook_gin_nn_pre(self, conv):
        def hook(module, inputs):
            if not self._active or not torch.is_grad_enabled():
                return
            if getattr(conv, "_ldp_xr", None) is None:
                return
            rec = _Rec(conv, "gin_eps", conv._ldp_xr)
            conv._ldp_xr = None
            self._recs.append(rec)
            self._grad_hook(inputs[0], rec)
        return hook

    @staticmethod
    def _grad_hook(t: torch.Tensor, rec: _Rec):
        if not isinstance(t, torch.Tensor) or not t.requires_grad:
            return

        def store(g):
            rec.g = g.detach() if rec.g is None else rec.g + g.detach()

        t.register_hook(store)

    # ------------------------------------------------------------------ forward
    def forward(self, batch, edge_index: torch.Tensor | None = None, seg: torch.Tensor | None = None,
                num_subgraphs: int | None = None):
        """``model(x, edge_index)`` while recording what per-sub-graph clipping needs.

        Call with a :class:`ldpfast.sampling.SubgraphBatch`, or with ``(x, edge_index, seg,
        num_subgraphs)`` where ``seg`` (N,) is the sub-graph id of every node.
        """
        if edge_index is None:
            x, edge_index, seg, num_subgraphs = batch.x, batch.edge_index, batch.batch, batch.num_subgraphs
        else:
            x = batch
            if seg is None or num_subgraphs is None:
                raise ValueError("seg, num_subgraphs: required when calling with (x, edge_index)")
        if self._independence_pending and self.training and torch.is_grad_enabled() and int(num_subgraphs) >= 2:
            check_subgraph_independence(self._module, x, edge_index, seg, int(num_subgraphs))
            self._independence_pending = False
        self._recs = []
        self._seg = seg
        self._num_subgraphs = int(num_subgraphs)
        self._active = self.training
        try:
            return self._module(x, edge_index)
        finally:
            self._active = False

    # ------------------------------------------------------------------ clipping
    def _per_param_terms(self):
        """(record, parameter, node inputs or None, node output-gradients) per captured use.

        ``a is None``: the parameter's per-sub-graph gradient is the sum of the rows of ``g``
        over the sub-graph's rows; otherwise it is ``sum_rows g^T a``.
        """
        out = []
        for r in self._recs:
            if r.g is None:
                continue  # this output did not influence the loss
            if r.kind == "bias":
                out.append((r, r.module.bias, None, r.g.reshape(r.g.shape[0], -1)))
            elif r.kind == "gin_eps":
                v = (r.g * r.a).reshape(r.g.shape[0], -1).sum(1, keepdim=True)
                out.append((r, r.module.eps, None, v))
            else:
                g = r.g.reshape(-1, r.g.shape[-1])
                w = r.module.weight
                if w.requires_grad:
                    out.append((r, w, r.a, g))
                b = getattr(r.module, "bias", None)
                if isinstance(b, torch.nn.Parameter) and b.requires_grad:
                    out.append((r, b, None, g))
        return out

    def _seg_rows(self, r: _Rec, rows_g: int) -> torch.Tensor:
        if isinstance(r.kind, tuple):  # (N, ..., d) input: rows repeat per node
            _, n0, rep = r.kind
            return self._rows_seg(n0).repeat_interleave(rep)
        return self._rows_seg(rows_g)

    def norms(self) -> torch.Tensor:
        """Per-sub-graph L2 norms of the full gradient (float64, shape (B,))."""
        B = self._num_subgraphs
        sq = torch.zeros(B, dtype=torch.float64, device=self._device())
        # group the uses of each parameter: per-sub-graph gradients add up across uses
        groups: dict[int, list] = {}
        for r, p, a, g in self._per_param_terms():
            groups.setdefault(id(p), []).append((self._seg_rows(r, g.shape[0]), a, g))
        for uses in groups.values():
            seg = torch.cat([u[0] for u in uses])
            G = torch.cat([u[2] for u in uses])
            if uses[0][1] is None:
                s = torch.zeros(B, G.shape[1], dtype=torch.float64, device=G.device).index_add_(0, seg, G.double())
                sq += s.pow(2).sum(1)
            else:
                sq += _weight_sq_norms(torch.cat([u[1] for u in uses]), G, seg, B)
        return sq.sqrt()

    def clip_and_accumulate(self, max_grad_norm: float) -> ClipStats:
        """Write ``sum_b min(1, C/||g_b||) g_b`` into every parameter's ``.grad``.

        Must follow ``loss.backward()`` of a sum of per-sub-graph losses on the batch of the
        last :meth:`forward`.
        """
        C = check_eps("max_grad_norm", max_grad_norm)
        norms = self.norms()
        factors = torch.clamp(C * (1 - CLIP_MARGIN) / norms.clamp_min(1e-300), max=1.0)
        fac = factors.float()
        for p in self._module.parameters():
            if p.requires_grad:
                p.grad = torch.zeros_like(p)
        for r, p, a, g in self._per_param_terms():
            w = fac[self._seg_rows(r, g.shape[0])].unsqueeze(1).to(g.dtype)
            if a is None:
                p.grad += (w * g).sum(0).reshape(p.shape).to(p.dtype)
            else:
                p.grad += ((w * g).t() @ a).to(p.dtype)
        self._recs = []
        return ClipStats(norms=norms, factors=factors)


def _buckets(counts: torch.Tensor):
    """Blocks grouped by padded size 2^k: yields (block ids, padded size)."""
    nz = counts > 0
    size = torch.where(nz, counts, torch.ones_like(counts))
    k = torch.ceil(torch.log2(size.double())).long()
    for kk in torch.unique(k[nz]).tolist():
        ids = torch.nonzero(nz & (k == kk)).flatten()
        yield ids, 1 << int(kk)


def _weight_sq_norms(A: torch.Tensor, G: torch.Tensor, seg: torch.Tensor, B: int) -> torch.Tensor:
    """Per-block ||G_b^T A_b||_F^2 (float64, (B,)), ghost or materialised per bucket."""
    dev = A.device
    order = torch.argsort(seg, stable=True)
    counts = torch.bincount(seg, minlength=B)
    offs = torch.zeros(B + 1, dtype=torch.long, device=dev)
    offs[1:] = torch.cumsum(counts, 0)
    Az = torch.cat([A[order], A.new_zeros(1, A.shape[1])])
    Gz = torch.cat([G[order], G.new_zeros(1, G.shape[1])])
    zero_row = A.shape[0]
    din, dout = A.shape[1], G.shape[1]
    out = torch.zeros(B, dtype=torch.float64, device=dev)
    for ids, P in _buckets(counts):  # host sync: the padded sizes (allocation shapes)
        ar = torch.arange(P, device=dev)
        idx = offs[ids].unsqueeze(1) + ar.unsqueeze(0)
        idx = torch.where(ar.unsqueeze(0) < counts[ids].unsqueeze(1), idx, torch.full_like(idx, zero_row))
        Ab, Gb = Az[idx], Gz[idx]  # (nb, P, d)
        if P * (din + dout) < din * dout:
            s = (torch.bmm(Ab, Ab.transpose(1, 2)).double() * torch.bmm(Gb, Gb.transpose(1, 2)).double()).sum((1, 2))
        else:
            s = torch.bmm(Gb.transpose(1, 2), Ab).double().pow(2).sum((1, 2))
        out[ids] = s
    return out


def subgraph_loss(out: torch.Tensor, batch, *, reduction: str = "sum") -> torch.Tensor:
    """Cross-entropy of each sub-graph's central node, summed over sub-graphs (Alg. 1
    needs ``loss = sum_b f(G_b)`` so that the backward yields every ``g_b``)."""
    if reduction not in ("sum", "mean"):
        raise ValueError(f"reduction: expected 'sum' or 'mean', got {reduction!r}")
    return F.cross_entropy(out[batch.center], batch.y, reduction=reduction)


# ----------------------------------------------------------------------------- references
def per_subgraph_gradients_loop(model: torch.nn.Module, batch, loss_fn=None) -> torch.Tensor:
    """Reference: ``(B, |params|)`` per-sub-graph gradients by a Python loop over the
    sub-graphs (one forward/backward each), in ``model.parameters()`` order."""
    loss_fn = loss_fn or (lambda out, y: F.cross_entropy(out[:1], y.view(1), reduction="sum"))
    params = [p for p in model.parameters() if p.requires_grad]
    rows = []
    for b in range(batch.num_subgraphs):
        lo, hi = int(batch.ptr[b]), int(batch.ptr[b + 1])
        m = (batch.edge_index[1] >= lo) & (batch.edge_index[1] < hi)
        ei = batch.edge_index[:, m] - lo
        out = model(batch.x[lo:hi], ei)
        loss = loss_fn(out, batch.y[b])
        grads = torch.autograd.grad(loss, params, allow_unused=True)
        rows.append(torch.cat([(torch.zeros_like(p) if g is None else g).reshape(-1)
                               for g, p in zip(grads, params)]))
    if not rows:
        return torch.zeros(0, sum(p.numel() for p in params))
    return torch.stack(rows)


def clipped_sum_loop(model: torch.nn.Module, batch, max_grad_norm: float, loss_fn=None):
    """Reference: ``(sum_b min(1, C/||g_b||) g_b, norms)`` from :func:`per_subgraph_gradients_loop`."""
    g = per_subgraph_gradients_loop(model, batch, loss_fn).double()
    norms = g.norm(dim=1)
    f = torch.clamp(max_grad_norm * (1 - CLIP_MARGIN) / norms.clamp_min(1e-300), max=1.0)
    return (f.unsqueeze(1) * g).sum(0), norms


def flat_grad(model: torch.nn.Module) -> torch.Tensor:
    """Concatenated ``.grad`` of the trainable parameters (zeros where missing)."""
    return torch.cat([(torch.zeros_like(p) if p.grad is None else p.grad).reshape(-1)
                      for p in model.parameters() if p.requires_grad])
