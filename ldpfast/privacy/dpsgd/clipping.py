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
unmodified PyG layers.  The same per-row scheme covers the other layers with a *fast rule*
(:mod:`.grad_rules`: GAT/GATv2 attention vectors, ChebConv/TAGConv, GIN's ``eps``,
``Embedding``, per-node norms' affine weights); every other trainable parameter takes the
*general path* (:mod:`.general`: op-level rules for ``F.linear`` and added biases from
one re-run of the batch, else the model re-run on each sub-graph, by ``torch.func.vmap``
over sub-graphs padded to a size bucket or by a loop), chosen per parameter when the model
is wrapped (:func:`ldpfast.privacy.validate` shows the plan).  On the first step the fast
terms of every parameter are checked to add up to its batch gradient; a parameter whose terms
do not (used outside its module, a layer on edge rows) moves to the general path, with a
warning.  ``vmap`` alone would cost ``O(B L_max d)`` memory and ``O(B |params|)`` for the
per-sample gradients, and PyG's self-loop handling needs stand-ins under it (:mod:`.general`).

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
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from ... import _buckets
from ..._checks import check_eps
from . import general as _general
from . import grad_rules as _grad_rules
from .mixing import check_no_mixing_layers, check_subgraph_independence

__all__ = ["ClipStats", "DPUsageError", "SubgraphGradSampleModule", "clipped_sum_loop", "flat_grad",
           "per_subgraph_gradients_loop", "subgraph_loss"]

CLIP_MARGIN = 1e-5


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


_Rec = _grad_rules.Rec


class SubgraphGradSampleModule(torch.nn.Module):
    """Wrap a PyG model so that a backward pass also yields per-sub-graph gradient norms and
    the clipped sum (the node-level analogue of Opacus' ``GradSampleModule``).

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(x, edge_index)`` and returning node-level outputs ``(N, C)``.
        Any differentiable model whose every sub-graph's output depends on that sub-graph
        alone: layers of :data:`~ldpfast.privacy.dpsgd.mixing.MIXING_LAYERS`,
        ``GCNConv(cached=True)`` and lazy parameters are refused.  Each trainable parameter
        gets its per-sub-graph gradients from a fast rule or from the general path
        (:mod:`.grad_rules`, :mod:`.general`; :attr:`general_parameters` names the latter).
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
    grad_path : {"auto", "general"}
        ``"auto"``: the fast rule where there is one; ``"general"``: every parameter on the
        general path (to check it or time it against the fast rules).

    Raises
    ------
    SubgraphMixingError
        (a ``TypeError``) at construction for a layer of ``MIXING_LAYERS``, or on the first
        training forward when removing or perturbing one sub-graph changes another's
        outputs, naming the first module concerned.
    ValueError
        For ``GCNConv(cached=True)`` (``ldpfast.privacy.fix`` turns the cache off) or a bad
        ``grad_path``.
    TypeError
        For lazy (uninitialised) parameters.

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

    def __init__(self, model: torch.nn.Module, *, check_independence: bool = True, recheck_fraction: float = 0.05,
                 grad_path: str = "auto"):
        super().__init__()
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        if not isinstance(check_independence, bool):
            raise TypeError(f"check_independence: expected a bool, got {type(check_independence).__name__}")
        if grad_path not in ("auto", "general"):
            raise ValueError(f"grad_path: expected 'auto' or 'general', got {grad_path!r}")
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
        self._replaying = False  # the general path re-runs the model: nothing recorded then
        self._seg: torch.Tensor | None = None
        self._size_bins: tuple[int, ...] | None = None  # host histogram of the batch's size bins
        self._one_per_subgraph: torch.Tensor | None = None  # arange(B) of sub-graph-level rows
        self._num_subgraphs = 0
        self._inputs: tuple | None = None  # (x, edge_index) of the last training forward
        self._out_rec: _Rec | None = None  # the gradient at the model's output
        self._terms_cache: list | None = None
        # a training forward through the wrapper since the last release (clip_and_accumulate)
        self._pending = False
        # the first parameterised module that ran a training forward with autograd outside the
        # wrapper since the last forward through it or release (what bypassing the wrapper looks like)
        self._bypassed: str | None = None
        self._names = {m: n for n, m in model.named_modules()}
        self._validate_and_hook(grad_path)
        self._general_path = _general.GeneralPath(model)  # vmap by size bucket, or a loop
        # the first release checks that the fast terms add up to each parameter's gradient
        self._coverage_pending = bool(self._fast_params)
        self._grad_before: dict[int, torch.Tensor | None] | None = None

    # ------------------------------------------------------------------ hooks
    def _validate_and_hook(self, grad_path: str):
        """Refuse what cannot be trained (mixing layers, a cached normalisation, lazy
        parameters), choose each parameter's path (:func:`.grad_rules.plan`) and hook the
        fast ones."""
        check_no_mixing_layers(self._module)  # its historical messages for the mixing layers
        self.grad_plan = _grad_rules.plan(self._module, grad_path=grad_path)
        for st in self.grad_plan:
            if st.status == _grad_rules.REFUSED:
                where = f"{st.name or 'the model'} ({st.type})"
                if "lazy" in st.detail:
                    raise TypeError(f"{where}: {st.detail}")
                raise ValueError(f"{where}: {st.detail}")
        self._hooks = _grad_rules.Hooks(self, grad_path)
        fast, general = set(), set()
        for st in self.grad_plan:
            own = dict(st.module.named_parameters(recurse=False))
            fast |= {id(own[n]) for n in st.fast}
            general |= {id(own[n]) for n in st.general}
            self._hooks.install(st)
        general -= fast  # a parameter shared by a fast and another module: the first-step check decides
        self._fast_params = fast
        self._general_ids = general

    def _general_params(self) -> list[torch.nn.Parameter]:
        return [p for p in self._module.parameters() if p.requires_grad and id(p) in self._general_ids]

    @property
    def general_parameters(self) -> list[str]:
        """Names of the parameters on the general path (re-run per sub-graph,
        :mod:`.general`); the others have a fast rule (:mod:`.grad_rules`)."""
        return [n for n, p in self._module.named_parameters() if p.requires_grad and id(p) in self._general_ids]

    def _rows_seg(self, rows: int) -> torch.Tensor:
        if self._seg is not None and rows == self._seg.numel():
            return self._seg
        if rows == self._num_subgraphs:
            a = self._one_per_subgraph
            if a is None or a.numel() != rows or a.device != self._device():
                a = self._one_per_subgraph = torch.arange(rows, device=self._device())
            return a
        raise _grad_rules.Unmapped(rows)

    def _device(self) -> torch.device:
        """Device of the last batch (its ``seg``), else of the parameters."""
        if self._seg is not None:
            return self._seg.device
        p = next(self._module.parameters(), None)
        return p.device if p is not None else torch.device("cpu")

    def _outside(self, module) -> bool:
        """True (nothing to record) unless this call runs inside a recording forward; notes a
        training forward with autograd outside the wrapper (the wrapper bypassed)."""
        if self._replaying:
            return True
        if self._active:
            return not torch.is_grad_enabled()
        if self._bypassed is None and module.training and torch.is_grad_enabled():
            self._bypassed = self._names.get(module, type(module).__name__) or type(module).__name__
        return True

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
        self._terms_cache = None
        self._seg = seg
        self._size_bins = bins
        self._num_subgraphs = int(num_subgraphs)
        self._inputs = (x, edge_index)
        self._pending = True
        self._bypassed = None  # a bypass is what happens between this forward and the release
        if self._coverage_pending:  # the gradients before this batch's backward (usually none)
            self._grad_before = {id(p): None if p.grad is None else p.grad.detach().clone()
                                 for p in self._module.parameters() if id(p) in self._fast_params}
        self._active = True
        try:
            out = self._module(x, edge_index)
        finally:
            self._active = False
        # the output gradient, for the parameters on the general path
        self._out_rec = _Rec(self._module, "output")
        _grad_rules.grad_hook(out[0] if isinstance(out, (tuple, list)) else out, self._out_rec)
        return out.as_subclass(_SubgraphOutput) if type(out) is torch.Tensor else out

    def forward_empty(self) -> None:
        """Record an empty batch (a Poisson sample without sub-graphs): the next release is
        noise added to a zero sum (:meth:`DPOptimizer.noise_only_step` calls this)."""
        self._recs = []
        self._terms_cache = None
        self._out_rec = None
        self._inputs = None
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
        if self._pending and (self._num_subgraphs == 0 or any(r.g is not None for r in self._recs)
                              or (self._out_rec is not None and self._out_rec.g is not None)):
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
    def _move_to_general(self, params, why: str) -> None:
        """Put ``params`` on the general path from now on (their fast terms do not describe
        their gradient), with a warning naming them."""
        new = [p for p in params if id(p) not in self._general_ids]
        if not new:
            return
        self._general_ids |= {id(p) for p in new}
        self._fast_params -= {id(p) for p in new}
        names = [n for n, p in self._module.named_parameters() if any(p is q for q in new)]
        warnings.warn(f"per-sub-graph gradients of {names}: {why}; they take the general path from now on (the "
                      "model re-run on each sub-graph: exact, slower)", stacklevel=3)

    def _per_param_terms(self) -> list[tuple]:
        """``(parameter, kind, seg, a, g)`` per use of a parameter on the fast path
        (:func:`.grad_rules.terms`), then the general path's (:mod:`.general`): the same kinds
        for the parameters its op-level rules cover, one ``(parameter, "dense", None, None,
        (B, numel))`` for each other one; cached until the next forward."""
        if self._terms_cache is not None:
            return self._terms_cache
        if self._num_subgraphs == 0:  # an empty batch (zero-row gradients, if any): the clipped sum is 0
            return []
        fast = []
        for r in self._recs:
            if r.g is None:
                continue  # this output did not influence the loss
            try:
                fast += _grad_rules.terms(r, self._rows_seg)
            except _grad_rules.Unmapped as e:
                self._move_to_general(_grad_rules.rec_params(r),
                                      f"module {self._names.get(r.module)!r} saw {e.args[0]} rows, neither the "
                                      f"batch's nodes ({self._seg.numel()}) nor its sub-graphs ({self._num_subgraphs})")
        kinds: dict[int, set[str]] = {}
        for t in fast:
            kinds.setdefault(id(t[0]), set()).add(t[1])
        mixed = [t[0] for t in fast if len(kinds[id(t[0])]) > 1]
        if mixed:
            self._move_to_general(mixed, "shared by layers with different rules")
        if self._coverage_pending and self._grad_before is not None:
            self._check_coverage([t for t in fast if id(t[0]) not in self._general_ids])
            self._check_attribution([t for t in fast if id(t[0]) not in self._general_ids])
        out = [t for t in fast if id(t[0]) not in self._general_ids]
        gen = self._general_params()
        g_out = None if self._out_rec is None else self._out_rec.g
        if gen and g_out is not None:
            x, edge_index = self._inputs
            self._replaying = True
            try:
                out += self._general_path.terms(x, edge_index, self._seg, self._num_subgraphs, g_out, gen)
            finally:
                self._replaying = False
        self._terms_cache = out
        return out

    def param_sq_norms(self) -> dict[torch.nn.Parameter, torch.Tensor]:
        """Per-sub-graph squared L2 norm of each parameter's gradient (float64, ``(B,)``),
        for the parameters that got a gradient from the last batch."""
        B = self._num_subgraphs
        groups: dict[int, tuple] = {}  # the uses of each parameter: per-sub-graph gradients add up across uses
        for t in self._per_param_terms():
            groups.setdefault(id(t[0]), (t[0], t[1], []))[2].append(t)
        blocks: dict[int, _Blocks] = {}  # by segmentation: most weights share the batch's
        out = {}
        for p, kind, uses in groups.values():
            def cat(i, uses=uses):
                return uses[0][i] if len(uses) == 1 else torch.cat([u[i] for u in uses])
            if kind == "dense":  # (B, numel): torch's cascade summation, no float64 copy of the rows
                out[p] = torch.linalg.vector_norm(cat(4), dim=1).double().pow(2)
                continue
            seg, G = cat(2), cat(4)
            if kind == "rows":
                s = torch.zeros(B, G.shape[1], dtype=torch.float64, device=G.device).index_add_(0, seg, G.double())
                out[p] = s.pow(2).sum(1)
                continue
            if id(seg) not in blocks:
                blocks[id(seg)] = _Blocks(seg, B, self._known_bins(seg))
            fn = _weight_sq_norms if kind == "outer" else _index_sq_norms
            out[p] = fn(cat(3), G, blocks[id(seg)], B)
        return out

    def norms(self, per_parameter: bool = False) -> torch.Tensor:
        """Per-sub-graph L2 norms of the full gradient (float64, shape (B,)), or with
        ``per_parameter`` of each trainable parameter's part (shape (B, P), parameters in
        ``model.parameters()`` order: per-layer clipping)."""
        sq = self.param_sq_norms()
        if not per_parameter:
            tot = torch.zeros(self._num_subgraphs, dtype=torch.float64, device=self._device())
            for s in sq.values():
                tot += s
            return tot.sqrt()
        params = [p for p in self._module.parameters() if p.requires_grad]
        out = torch.zeros(self._num_subgraphs, len(params), dtype=torch.float64, device=self._device())
        for i, p in enumerate(params):
            s = sq.get(p)
            if s is not None:
                out[:, i] = s
        return out.sqrt()

    def _known_bins(self, seg: torch.Tensor) -> tuple[int, ...] | None:
        """Host histogram of the size bins of ``seg`` without a host read, when known: the
        sampler's for the batch's own rows, all blocks of size 1 for one row per sub-graph."""
        if seg is self._seg and self._size_bins is not None:
            return self._size_bins
        if seg is self._one_per_subgraph:
            return (self._num_subgraphs,) + (0,) * (_buckets.NUM_BINS - 1)
        return None

    @staticmethod
    def _accumulate(terms, fac: torch.Tensor, into: dict[int, torch.Tensor]) -> None:
        """``into[id(p)] += sum_b fac_b g_b(p)`` for every term."""
        for p, kind, seg, a, g in terms:
            acc = into[id(p)]
            if kind == "dense":
                acc += (fac.to(g.dtype) @ g).reshape(p.shape).to(p.dtype)
                continue
            wg = fac[seg].unsqueeze(1).to(g.dtype) * g
            if kind == "outer":
                acc += (wg.t() @ a).to(p.dtype)
            elif kind == "rows":
                acc += wg.sum(0).reshape(p.shape).to(p.dtype)
            else:  # "index": rows of an embedding table
                acc.index_add_(0, a, wg.to(p.dtype))

    def _check_coverage(self, terms) -> None:
        """First batch: the fast terms of every parameter must add up to the gradient the
        batch's backward gave it; a parameter whose terms do not (also used outside its
        module, e.g. functionally, or a layer calling a Linear's ``forward`` directly, which
        runs no hook) moves to the general path."""
        before, self._grad_before = self._grad_before, None
        self._coverage_pending = False
        params = [p for p in self._module.parameters() if id(p) in before and id(p) in self._fast_params]
        into = {id(p): torch.zeros_like(p) for p in params}
        ones = torch.ones(self._num_subgraphs, dtype=torch.float32, device=self._device())
        self._accumulate([t for t in terms if id(t[0]) in into], ones, into)
        bad = []
        for p in params:
            got = (p.grad if p.grad is not None else torch.zeros_like(p)).double()
            if before[id(p)] is not None:
                got = got - before[id(p)].double()
            want = into[id(p)].double()
            if float((got - want).norm()) > 1e-4 * max(float(got.norm()), float(want.norm())) + 1e-12:
                bad.append(p)
        if bad:
            self._move_to_general(bad, "the fast rules' terms do not add up to the batch's gradient (a parameter "
                                       "also used outside its module, e.g. functionally, or a Linear whose forward "
                                       "is called directly)")

    def _check_attribution(self, terms, n_check: int = 8) -> None:
        """First batch: the fast terms must split by *sub-graph* as they should, not only add
        up (:mod:`.general`, "attribution check": a model that reorders its node rows around a
        layer gives terms with the right sum charged to the wrong sub-graphs).  The terms are
        recorded again in eval mode and compared, on ``n_check`` sub-graphs, with the model run
        on each alone (parameters, buffers, RNG and flags restored; no host copies of device
        tensors).  A parameter that does not match moves to the general path (which checks its
        own terms the same way)."""
        params = list({id(t[0]): t[0] for t in terms}.values())
        g_out = None if self._out_rec is None else self._out_rec.g
        B = self._num_subgraphs
        if not params or g_out is None or B < 2 or self._inputs is None:
            return
        x, edge_index = self._inputs
        subs = _general.probe_subgraphs(B, n_check)
        saved = (self._recs, self._out_rec)
        try:
            with _general.probe(self._module, x):
                self._recs = []
                self._active = True
                try:
                    out = self._module(x, edge_index)
                finally:
                    self._active = False
                out = out[0] if isinstance(out, (tuple, list)) else out
                torch.autograd.grad(out, params, g_out.to(out.dtype), allow_unused=True)  # fills the records' g
                again = []
                for r in self._recs:
                    if r.g is not None:
                        again += _grad_rules.terms(r, self._rows_seg)
                self._replaying = True  # the runs on single sub-graphs record nothing
                try:
                    ref = _general.alone_gradients(self._module, x, edge_index, self._seg, g_out, params, subs)
                finally:
                    self._replaying = False
        except _grad_rules.Unmapped:
            return  # the terms themselves move such a module on the real batch
        finally:
            self._recs, self._out_rec = saved
        bad = _general.split_mismatch(params, again, ref, subs)
        if bad:
            self._move_to_general([p for p in params if id(p) in bad],
                                  "the fast rules' terms add up but are charged to the wrong sub-graphs (the model "
                                  "reorders node rows around the layer)")

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
        for p in params:
            p.grad = torch.zeros_like(p)
        into = {id(p): p.grad for p in params}
        terms = self._per_param_terms()
        if per_param:  # each parameter's terms scaled by its own column of factors
            for i, p in enumerate(params):
                self._accumulate([t for t in terms if t[0] is p], factors[:, i].float().contiguous(), into)
        else:
            self._accumulate(terms, factors.float(), into)
        self._recs = []
        self._terms_cache = None
        self._out_rec = None
        self._inputs = None
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


def _per_block_sq(blocks: _Blocks, B: int, rows: tuple[torch.Tensor, ...], pads: tuple, fn) -> torch.Tensor:
    """Per-block ``fn(*padded rows, P)`` (float64, (B,)) over the buckets of ``blocks``: the
    rows of ``rows`` (row-aligned tensors) of each block of bucket ``P`` gathered into
    ``(nb, P, ...)``, padded with ``pads`` (one value per tensor; ``None``: padding rows left
    as they are, for a tensor whose padding rows ``fn`` multiplies by another's zeros)."""
    dev = rows[0].device
    order, offs, counts = blocks.order, blocks.offs, blocks.counts
    N = rows[0].shape[0]
    if N == 0:  # no rows: every block's gradient is zero
        return torch.zeros(B, dtype=torch.float64, device=dev)
    # each bucket gathers its rows straight from the unsorted tensors with index_select (on a
    # CPU several times faster than advanced indexing, and no sorted or padded copy of the
    # batch); position N of ``src`` stands for a padding row, then filled with its pad
    src = torch.cat([order, order.new_zeros(1)])
    # fail-safe against a histogram that does not describe these blocks (a batch edited after
    # sampling): a block with rows that no bin covers, or with more rows than its padding,
    # gets an infinite norm, so it is clipped to zero instead of being under-clipped
    inf = torch.tensor(float("inf"), dtype=torch.float64, device=dev)
    out = torch.where(counts > 0, inf, torch.zeros((), dtype=torch.float64, device=dev))
    for ids, P in blocks.groups:  # padded sizes known on the host: no read here
        ar = torch.arange(P, device=dev)
        valid = ar.unsqueeze(0) < counts[ids].unsqueeze(1)
        r = src.index_select(0, torch.where(valid, offs[ids].unsqueeze(1) + ar.unsqueeze(0), N).reshape(-1))
        got = [t.index_select(0, r).reshape(valid.shape + tuple(t.shape[1:])) for t in rows]  # (nb, P, ...)
        for g, v in zip(got, pads):
            if v is not None:
                g.masked_fill_(~valid.reshape(valid.shape + (1,) * (g.dim() - 2)), v)
        s = fn(*got, P)
        out[ids] = torch.where(counts[ids] <= P, s, inf)
    return out


def _weight_sq_norms(A: torch.Tensor, G: torch.Tensor, blocks: _Blocks | torch.Tensor, B: int) -> torch.Tensor:
    """Per-block ||G_b^T A_b||_F^2 (float64, (B,)), ghost or materialised per bucket;
    ``blocks``: a :class:`_Blocks`, or the block id of every row (one host read)."""
    if isinstance(blocks, torch.Tensor):
        blocks = _Blocks(blocks, B, None)
    din, dout = A.shape[1], G.shape[1]

    def sq(Ab, Gb, P):
        if P * (din + dout) < din * dout:
            return (torch.bmm(Ab, Ab.transpose(1, 2)).double() * torch.bmm(Gb, Gb.transpose(1, 2)).double()).sum((1, 2))
        return torch.bmm(Gb.transpose(1, 2), Ab).double().pow(2).sum((1, 2))
    return _per_block_sq(blocks, B, (A, G), (None, 0), sq)  # zero rows of G zero a padding row's terms


def _index_sq_norms(idx: torch.Tensor, G: torch.Tensor, blocks: _Blocks, B: int) -> torch.Tensor:
    """Per-block squared norm of an embedding table's gradient ``sum_rows onehot(idx) g^T``
    (float64, (B,)): the ghost norm ``sum_{n, m} [idx_n = idx_m] <g_n, g_m>`` per bucket."""
    def sq(Ib, Gb, P):
        same = (Ib.unsqueeze(2) == Ib.unsqueeze(1)).double()
        return (same * torch.bmm(Gb, Gb.transpose(1, 2)).double()).sum((1, 2))
    return _per_block_sq(blocks, B, (idx, G), (None, 0), sq)  # zero rows of G zero a padding row's terms


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
