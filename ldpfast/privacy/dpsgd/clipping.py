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

Guards on the training loop (each raises :class:`DPUsageError`, nothing changed): the loss
must be a *sum* of per-sub-graph losses (a mean over the sub-graphs, e.g. the default
``F.cross_entropy(out[batch.center], batch.y)``, divides every ``g_b`` by the batch size before
clipping: clipping then does nothing and the noise, calibrated to ``C``, swamps the signal),
so :meth:`SubgraphGradSampleModule.forward` returns its output as a tensor subclass that
refuses ``backward()`` through a mean over its rows; and :class:`DPOptimizer` releases only
after a training forward through the wrapper and its backward
(:meth:`SubgraphGradSampleModule.check_release`): calling the wrapped module itself, or
``step()`` without ``backward()``, used to release noise only, silently.  A whole graph
(``model(data)``) is refused in training (it is one example holding every node).

Numerics: norms are accumulated in float64; gradients are clipped to ``C (1 - 1e-5)`` so
that float32 rounding of the norm cannot push a clipped gradient above ``C``.

Devices: everything runs on the device of the batch and the model (CUDA included): norms,
buckets, the clipped sum.  No host sync: the number of sub-graphs of each padded size (needed
before its ``bmm`` is allocated) comes with the batch (``size_bins`` of a
:class:`ldpfast.sampling.SubgraphBatch`, read by the CUDA sampler together with its own sizes);
without it (a batch built by hand, rows repeated per node) it costs one host read per step
and row layout (``ldpfast/_syncs.py`` counts them).  The Gaussian noise of
:class:`DPOptimizer` is drawn on the parameters' device (:mod:`.optimizer`).
"""
from __future__ import annotations

import functools
import inspect
import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ... import _buckets
from ..._checks import check_eps
from .mixing import check_no_mixing_layers, check_subgraph_independence

__all__ = ["ClipStats", "DPUsageError", "SubgraphGradSampleModule", "clipped_sum_loop", "flat_grad",
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


class DPUsageError(RuntimeError):
    """The training loop does not give what per-sub-graph clipping and the accountant assume
    (a mean loss, no per-sub-graph gradients, a bypassed wrapper, a whole graph); raised
    before anything is changed or released."""


# ----------------------------------------------------------------------------- the mean-loss guard
_MEAN_REDUCTIONS = ("mean", "batchmean")
_BACKWARDS = {torch.Tensor.backward, torch.autograd.backward, torch.autograd.grad}


@functools.cache
def _reduction_param(func) -> inspect.Signature | None:
    """The signature of ``func`` when it has a ``reduction`` parameter (the torch losses)."""
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return None
    return sig if "reduction" in sig.parameters else None


def _mean_over_rows(func, args, kwargs) -> str | None:
    """How ``func(*args, **kwargs)`` averages over the rows of its input (the batch's nodes
    or sub-graphs), or ``None``: a loss with ``reduction="mean"`` (the default of every torch
    loss), or ``mean`` over dimension 0 or over all dimensions."""
    name = getattr(func, "__name__", "")
    if name.startswith("__"):  # indexing, arithmetic, attribute access: never a mean
        return None
    if name in ("mean", "nanmean"):
        x = args[0] if args else kwargs.get("input")
        dim = args[1] if len(args) > 1 else kwargs.get("dim")
        if not isinstance(x, torch.Tensor) or x.dim() == 0:
            return None
        if dim is None:
            return f"{name}()"
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        return f"{name}(dim={dim!r})" if any(isinstance(d, int) and d % x.dim() == 0 for d in dims) else None
    sig = _reduction_param(func)
    if sig is None:
        return None
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    a = bound.arguments
    red = a["reduction"]
    if a.get("size_average") is not None or a.get("reduce") is not None:  # the deprecated pair wins
        from torch.nn import _reduction

        red = _reduction.legacy_get_string(a.get("size_average"), a.get("reduce"), emit_warning=False)
    if red in _MEAN_REDUCTIONS:
        return f"{getattr(func, '__module__', 'torch')}.{name}(..., reduction={red!r})".replace(
            "torch.nn.functional.", "F.")
    return None


def _flags(obj, out: list[str]) -> None:
    """Collect the mean flags of the subgraph outputs in ``obj`` (args, nested once or twice)."""
    if isinstance(obj, _SubgraphOutput):
        why = getattr(obj, "_ldp_mean", None)
        if why is not None:
            out.append(why)
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _flags(o, out)
    elif isinstance(obj, dict):
        for o in obj.values():
            _flags(o, out)


class _SubgraphOutput(torch.Tensor):
    """The training output of :class:`SubgraphGradSampleModule` (the same tensor, same autograd
    graph): tensors computed from it remember a mean over its rows, and ``backward()`` through
    such a mean is refused (:class:`DPUsageError`)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        seen: list[str] = []
        _flags(args, seen)
        _flags(kwargs, seen)
        if func in _BACKWARDS and seen:
            raise DPUsageError(
                f"loss.backward(): the loss averages over the sub-graphs of the batch ({seen[0]}), which divides "
                "every per-sub-graph gradient by the batch size before clipping: clipping at max_grad_norm then does "
                "nothing and the noise, calibrated to max_grad_norm, swamps the shrunken signal. Node-level "
                "DP-SGD needs a sum of per-sub-graph losses: use ldpfast.privacy.dpsgd.subgraph_loss(out, batch) "
                "(the cross-entropy of every central node, summed) or reduction='sum'; the DP optimizer divides "
                "the noisy sum by the expected batch size itself")
        why = seen[0] if seen else _mean_over_rows(func, args, kwargs)
        out = super().__torch_function__(func, types, args, kwargs)
        if why is not None:
            for t in (out if isinstance(out, (tuple, list)) else (out,)):
                if isinstance(t, _SubgraphOutput):
                    t._ldp_mean = why
        return out


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
        training forward with at least two sub-graphs (four extra forwards without
        autograd; parameters, gradients, buffers, the RNG state and the batch are left as
        they were), and again on a random fraction ``recheck_fraction`` of the later ones.
        Default on; turn it off only for a model already checked.
    recheck_fraction : float
        In [0, 1]: each later training forward with at least two sub-graphs is checked
        again with this probability (default 0.05), drawn from a generator seeded by the OS
        and independent of the training's randomness, so that a model which starts mixing
        sub-graphs after a warm-up (a branch taken from step ``s`` on) is caught: ``k``
        mixing steps escape with probability ``(1 - f)^k`` (0.6% for ``k = 100`` at the
        default).  Cost (``benchmarks/bench_dpsgd_guards.py``): about ``f`` times one check
        per step, a check costing about one training step (and, on a GPU, the check's host
        reads on the steps it runs).  0 checks the first batch only.

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
    ``p.grad`` holds ``sum_b min(1, C/||g_b||) g_b``.  In eval mode or under
    ``torch.no_grad()`` the wrapper is the wrapped model (nothing recorded): ``gsm(data)``
    and ``gsm(x, edge_index)`` then work on a whole graph too.

    Guards (:class:`DPUsageError`): ``backward()`` through a mean over the rows of the
    training output (module docstring); :meth:`check_release` (called by
    :class:`DPOptimizer` before each release) when there are no per-sub-graph gradients.
    """

    def __init__(self, model: torch.nn.Module, *, check_independence: bool = True, recheck_fraction: float = 0.05):
        super().__init__()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(check_independence, bool):
            raise TypeError(f"check_independence: expected a bool, got {type(check_independence).__name__}")
        if isinstance(recheck_fraction, bool) or not isinstance(recheck_fraction, (int, float)) \
                or not 0.0 <= recheck_fraction <= 1.0:
            raise ValueError(f"recheck_fraction: expected a number in [0, 1], got {recheck_fraction!r}")
        self._module = model
        # the runtime check is pending until a training forward with >= 2 sub-graphs passed it
        self._independence_pending = check_independence
        self._check_independence = check_independence
        self.recheck_fraction = float(recheck_fraction)
        self._recheck_rng = random.Random()  # seeded by the OS: which steps are checked is not predictable
        self.independence_checks = 0  # runs of the check so far
        # set by NodeDPEngine: refuses a training batch its sampler did not draw for this step
        self._batch_guard = None
        self._recs: list[_Rec] = []
        self._active = False
        self._seg: torch.Tensor | None = None
        self._size_bins: tuple[int, ...] | None = None  # host histogram of the batch's size bins
        self._one_per_subgraph: torch.Tensor | None = None  # arange(B) of sub-graph-level rows
        self._num_subgraphs = 0
        # a training forward through the wrapper since the last release (clip_and_accumulate)
        self._pending = False
        # the first parameterised module that ran a training forward with autograd outside the
        # wrapper since the last forward through it or release (what bypassing the wrapper looks like)
        self._bypassed: str | None = None
        self._names = {m: n for n, m in model.named_modules()}
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
            a = self._one_per_subgraph
            if a is None or a.numel() != rows or a.device != self._device():
                a = self._one_per_subgraph = torch.arange(rows, device=self._device())
            return a
        raise RuntimeError(f"a parameterised layer saw {rows} rows: expected one per batch node "
                           f"({self._seg.numel() if self._seg is not None else '?'}) or one per sub-graph "
                           f"({self._num_subgraphs}); edge-level layers are not supported")

    def _device(self) -> torch.device:
        """Device of the last batch (its ``seg``), else of the parameters."""
        if self._seg is not None:
            return self._seg.device
        p = next(self._module.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def _outside(self, module) -> bool:
        """True (nothing to record) unless this call runs inside a recording forward; notes a
        training forward with autograd outside the wrapper (the wrapper bypassed)."""
        if self._active:
            return not torch.is_grad_enabled()
        if self._bypassed is None and module.training and torch.is_grad_enabled():
            self._bypassed = self._names.get(module, type(module).__name__) or type(module).__name__
        return True

    def _hook_linear(self, module, inputs, output):
        if self._outside(module):
            return
        a = inputs[0].detach()
        rec = _Rec(module, "linear", a.reshape(-1, a.shape[-1]) if a.dim() > 2 else a)
        if a.dim() > 2:
            rec.kind = ("linear", a.shape[0], a.numel() // (a.shape[0] * a.shape[-1]))
        self._recs.append(rec)
        self._grad_hook(output, rec)

    def _hook_out_bias(self, module, inputs, output):
        if self._outside(module):
            return
        rec = _Rec(module, "bias", None)
        self._recs.append(rec)
        self._grad_hook(output, rec)

    def _hook_gin_pre(self, module, inputs):
        if self._outside(module):
            return
        x = inputs[0]
        x_r = x[1] if isinstance(x, (tuple, list)) else x
        module._ldp_xr = None if x_r is None else x_r.detach()

    def _hook_gin_nn_pre(self, conv):
        def hook(module, inputs):
            if self._outside(conv):
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
        num_subgraphs)`` where ``seg`` (N,) is the sub-graph id of every node.  In training
        mode with autograd the output is returned as a tensor that refuses ``backward()``
        through a mean over its rows (:class:`DPUsageError`); otherwise nothing is recorded
        and a whole graph (``gsm(data)``, ``gsm(x, edge_index)``) is accepted.

        Raises
        ------
        TypeError
            In training, for a whole graph (an object without ``num_subgraphs``).
        ValueError
            In training, for ``(x, edge_index)`` without ``seg`` and ``num_subgraphs``.
        """
        record = self.training and torch.is_grad_enabled()
        if edge_index is None:
            num_subgraphs = getattr(batch, "num_subgraphs", None)
            if num_subgraphs is None:
                if record:
                    raise TypeError(
                        f"model(batch): got a {type(batch).__name__} without num_subgraphs (a whole graph?) in "
                        "training mode; node-level DP-SGD trains on sub-graph batches, one example per central "
                        "node: pass the batches of the sampler (for batch in sampler: out = model(batch)). A "
                        "whole graph is a single example holding every node, so clipping its gradient does not "
                        "bound one node's influence as the accountant assumes. To evaluate on a whole graph, "
                        "call model.eval() or use torch.no_grad() first")
                return self._module(batch.x, batch.edge_index)
            x, edge_index, seg = batch.x, batch.edge_index, batch.batch
            bins = getattr(batch, "size_bins", None)
            source = batch
        else:
            bins = None
            x, source = batch, None
            if seg is None or num_subgraphs is None:
                if record:
                    raise ValueError("seg, num_subgraphs: required when calling with (x, edge_index) in training "
                                     "mode (the sub-graph id of every node, and their number); a whole graph is "
                                     "only accepted in eval mode or under torch.no_grad()")
                return self._module(x, edge_index)
        if not record:  # evaluation: leave the recorded batch (if any) alone
            return self._module(x, edge_index)
        if self._batch_guard is not None:
            self._batch_guard(source)
        if self._check_independence and int(num_subgraphs) >= 2 and (
                self._independence_pending or self._recheck_rng.random() < self.recheck_fraction):
            check_subgraph_independence(self._module, x, edge_index, seg, int(num_subgraphs))
            self._independence_pending = False
            self.independence_checks += 1
        self._recs = []
        self._seg = seg
        self._size_bins = bins
        self._num_subgraphs = int(num_subgraphs)
        self._pending = True
        self._bypassed = None  # a bypass is what happens between this forward and the release
        self._active = True
        try:
            out = self._module(x, edge_index)
        finally:
            self._active = False
        return out.as_subclass(_SubgraphOutput) if type(out) is torch.Tensor else out

    def forward_empty(self) -> None:
        """Record an empty batch (a Poisson sample without sub-graphs): the next release is
        noise added to a zero sum (:meth:`DPOptimizer.noise_only_step` calls this)."""
        self._recs = []
        self._num_subgraphs = 0
        self._seg = None  # so that _device() is the parameters' device, not the last batch's
        self._seg = torch.zeros(0, dtype=torch.long, device=self._device())
        self._size_bins = None
        self._pending = True

    def check_release(self) -> None:
        """Refuse a release without per-sub-graph gradients (:class:`DPOptimizer` calls this
        before clipping).

        A release needs, since the previous one, a training forward through this wrapper and
        the backward of a loss computed from its output (or an empty batch: a forward on it,
        or :meth:`forward_empty`).  Without them the clipped sum is zero and the step would
        release noise only, silently: what happens when the loss comes from the wrapped module
        itself (the wrapper bypassed) or when ``step()`` follows no ``backward()``.

        Raises
        ------
        DPUsageError
            Saying which of the two happened and what to do; nothing is changed.
        """
        if self._pending and (self._num_subgraphs == 0 or any(r.g is not None for r in self._recs)):
            return
        how = ("Compute the loss from out = model(batch) with the wrapper (the SubgraphGradSampleModule that "
               "NodeDPEngine.make_private returns), in training mode, then loss.backward(), then optimizer.step(), "
               "once per batch")
        if self._bypassed is not None:
            raise DPUsageError(
                f"optimizer.step(): module {self._bypassed!r} ran a training forward with autograd outside the "
                "wrapper since the last step, so the wrapper recorded no per-sub-graph gradients and this step "
                "would release noise only (the gradients of that forward are not clipped per sub-graph and are "
                f"never released). The wrapper was bypassed: call the wrapper, not the model inside it. {how}")
        if not self._pending:
            raise DPUsageError(
                "optimizer.step(): no training forward through the wrapper since the last step, so there are no "
                f"per-sub-graph gradients to clip and this step would release noise only. {how}")
        raise DPUsageError(
            f"optimizer.step(): the last forward through the wrapper ({self._num_subgraphs} sub-graphs) got no "
            "gradient: call loss.backward() on a loss computed from its output before optimizer.step()")

    # ------------------------------------------------------------------ clipping
    def _per_param_terms(self):
        """(record, parameter, node inputs or None, node output-gradients) per captured use.

        ``a is None``: the parameter's per-sub-graph gradient is the sum of the rows of ``g``
        over the sub-graph's rows; otherwise it is ``sum_rows g^T a``.
        """
        if self._num_subgraphs == 0:  # an empty batch (zero-row gradients, if any): the clipped sum is 0
            return []
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

    def norms(self, per_parameter: bool = False) -> torch.Tensor:
        """Per-sub-graph L2 norms of the full gradient (float64, shape (B,)), or with
        ``per_parameter`` of each trainable parameter's part (shape (B, P), parameters in
        ``model.parameters()`` order: per-layer clipping)."""
        B = self._num_subgraphs
        col = {id(p): i for i, p in enumerate(p for p in self._module.parameters() if p.requires_grad)}
        sq_all = torch.zeros(B, len(col) if per_parameter else 1, dtype=torch.float64, device=self._device())
        # group the uses of each parameter: per-sub-graph gradients add up across uses
        groups: dict[int, list] = {}
        for r, p, a, g in self._per_param_terms():
            groups.setdefault(id(p), []).append((self._seg_rows(r, g.shape[0]), a, g))
        blocks: dict[int, _Blocks] = {}  # by segmentation: most weights share the batch's
        for pid, uses in groups.items():
            sq = sq_all[:, col[pid] if per_parameter else 0]  # a view: += accumulates in place
            seg = uses[0][0] if len(uses) == 1 else torch.cat([u[0] for u in uses])
            G = uses[0][2] if len(uses) == 1 else torch.cat([u[2] for u in uses])
            if uses[0][1] is None:
                s = torch.zeros(B, G.shape[1], dtype=torch.float64, device=G.device).index_add_(0, seg, G.double())
                sq += s.pow(2).sum(1)
            else:
                A = uses[0][1] if len(uses) == 1 else torch.cat([u[1] for u in uses])
                if id(seg) not in blocks:
                    blocks[id(seg)] = _Blocks(seg, B, self._known_bins(seg))
                sq += _weight_sq_norms(A, G, blocks[id(seg)], B)
        return sq_all.sqrt() if per_parameter else sq_all[:, 0].sqrt()

    def _known_bins(self, seg: torch.Tensor) -> tuple[int, ...] | None:
        """Host histogram of the size bins of ``seg`` without a host read, when known: the
        sampler's for the batch's own rows, all blocks of size 1 for one row per sub-graph."""
        if seg is self._seg and self._size_bins is not None:
            return self._size_bins
        if seg is self._one_per_subgraph:
            return (self._num_subgraphs,) + (0,) * (_buckets.NUM_BINS - 1)
        return None

    def clip_and_accumulate(self, max_grad_norm) -> ClipStats:
        """Write ``sum_b min(1, C/||g_b||) g_b`` into every parameter's ``.grad``.

        Must follow ``loss.backward()`` of a sum of per-sub-graph losses on the batch of the
        last :meth:`forward`.  ``max_grad_norm``: ``C`` (> 0), or a sequence of one ``C_k``
        per trainable parameter (per-layer clipping: each parameter's part of ``g_b`` is
        clipped to its own ``C_k``, so ``||g_b|| <= sqrt(sum C_k^2)``; the stats are then
        ``(B, P)``).
        """
        per_param = not isinstance(max_grad_norm, (int, float))
        params = [p for p in self._module.parameters() if p.requires_grad]
        if per_param:
            cs = [check_eps("max_grad_norm", c) for c in max_grad_norm]
            if len(cs) != len(params):
                raise ValueError(f"max_grad_norm: expected one clipping norm per trainable parameter ({len(params)}), "
                                 f"got {len(cs)}")
            C = torch.tensor(cs, dtype=torch.float64, device=self._device())
        else:
            C = check_eps("max_grad_norm", max_grad_norm)
        norms = self.norms(per_parameter=per_param)
        factors = torch.clamp(C * (1 - CLIP_MARGIN) / norms.clamp_min(1e-300), max=1.0)
        fac = factors.float()
        col = {id(p): i for i, p in enumerate(params)}
        for p in params:
            p.grad = torch.zeros_like(p)
        for r, p, a, g in self._per_param_terms():
            f = fac[:, col[id(p)]] if per_param else fac
            w = f[self._seg_rows(r, g.shape[0])].unsqueeze(1).to(g.dtype)
            if a is None:
                p.grad += (w * g).sum(0).reshape(p.shape).to(p.dtype)
            else:
                p.grad += ((w * g).t() @ a).to(p.dtype)
        self._recs = []
        self._pending = False
        self._bypassed = None
        return ClipStats(norms=norms, factors=factors)


class _Blocks:
    """Rows of one segmentation sorted by block, and the blocks grouped by padded size 2^k
    (:mod:`ldpfast._buckets`), shared by every parameter that uses the same rows.

    ``bins``: the host histogram of the size bins when known (the CUDA sampler reads it with
    the batch sizes), else read here: one host read per segmentation and step (a padded size
    must be known before its ``bmm`` is allocated).
    """

    def __init__(self, seg: torch.Tensor, B: int, bins: tuple[int, ...] | None):
        dev = seg.device
        self.order = torch.argsort(seg, stable=True)
        # block offsets by searchsorted on the sorted ids: CUDA bincount would read max(seg)
        self.offs = torch.searchsorted(seg[self.order], torch.arange(B + 1, device=dev))
        self.counts = self.offs[1:] - self.offs[:-1]
        k = _buckets.size_bins(self.counts)
        if bins is not None and (len(bins) != _buckets.NUM_BINS or sum(bins) > B):
            bins = None  # not this segmentation's: read it
        if bins is None:
            bins = tuple(_buckets.bin_histogram(k).tolist())
        # blocks in bin order, ascending ids within a bin (stable): bin kk is a slice
        by_bin = torch.argsort(k, stable=True)
        self.groups = []
        start = 0
        for kk, nb in enumerate(bins):
            if nb:
                self.groups.append((by_bin[start:start + nb], 1 << kk))
                start += nb


def _weight_sq_norms(A: torch.Tensor, G: torch.Tensor, blocks: _Blocks | torch.Tensor, B: int) -> torch.Tensor:
    """Per-block ||G_b^T A_b||_F^2 (float64, (B,)), ghost or materialised per bucket;
    ``blocks``: a :class:`_Blocks`, or the block id of every row (one host read)."""
    dev = A.device
    if isinstance(blocks, torch.Tensor):
        blocks = _Blocks(blocks, B, None)
    order, offs, counts = blocks.order, blocks.offs, blocks.counts
    Az = torch.cat([A[order], A.new_zeros(1, A.shape[1])])
    Gz = torch.cat([G[order], G.new_zeros(1, G.shape[1])])
    zero_row = A.shape[0]
    din, dout = A.shape[1], G.shape[1]
    # fail-safe against a histogram that does not describe these blocks (a batch edited after
    # sampling): a block with rows that no bin covers, or with more rows than its padding,
    # gets an infinite norm, so it is clipped to zero instead of being under-clipped
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=dev)
    out = torch.where(counts > 0, inf, torch.zeros((), dtype=torch.float64, device=dev))
    for ids, P in blocks.groups:  # padded sizes known on the host: no read here
        ar = torch.arange(P, device=dev)
        idx = offs[ids].unsqueeze(1) + ar.unsqueeze(0)
        idx = torch.where(ar.unsqueeze(0) < counts[ids].unsqueeze(1), idx, torch.full_like(idx, zero_row))
        Ab, Gb = Az[idx], Gz[idx]  # (nb, P, d)
        if P * (din + dout) < din * dout:
            s = (torch.bmm(Ab, Ab.transpose(1, 2)).double() * torch.bmm(Gb, Gb.transpose(1, 2)).double()).sum((1, 2))
        else:
            s = torch.bmm(Gb.transpose(1, 2), Ab).double().pow(2).sum((1, 2))
        out[ids] = torch.where(counts[ids] <= P, s, inf)
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
