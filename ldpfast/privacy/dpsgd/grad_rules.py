"""Which per-sub-graph gradient path every module's parameters take, and the fast rules.

:class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule` gets the per-sub-graph gradient of
every trainable parameter by one of two paths, chosen per parameter when the model is
wrapped (:func:`plan`):

* a **fast rule** (this module): one ordinary forward/backward of the block-diagonal batch,
  with hooks that keep, at every use of the parameter, the quantities whose per-row terms add
  up to its gradient; the per-sub-graph gradient is the sum of the rows of that sub-graph
  (:mod:`.clipping` module docstring).  The rules, exact for any batch:

  ===============================================  =====================================================
  layer                                            per-row term of the gradient
  ===============================================  =====================================================
  ``Linear`` (torch, PyG)                          ``W: g_n a_n^T``, ``b: g_n`` (ghost norms by bucket)
  ``GCNConv``, ``ChebConv``, ``TAGConv`` bias      ``g_n`` at the layer output
  ``GATConv`` ``att_src`` / ``att_dst``, bias      ``dL/dalpha_n[h] x_n[h, :]`` per node (and ``g_n``)
  ``GATv2Conv`` ``att``, bias                      ``dL/de_k[h] z_k[h, :]`` per edge ``k`` (its target's
                                                   sub-graph), ``z = leaky_relu(x_i + x_j)``
  ``GINConv`` ``eps``                              ``<dL/dh_n, x_n>``
  ``Embedding``                                    ``g_n`` at row ``idx_n`` (sparse; ghost norms)
  ``LayerNorm`` (torch; PyG ``mode="node"``),      ``weight: g_n * xhat_n``, ``bias: g_n``, ``xhat`` the
  ``RMSNorm``, ``GroupNorm`` affine weights        normalised input, recomputed in the hook
  ===============================================  =====================================================

  The attention vectors are read through an *expanded* view: while the layer runs, the
  parameter ``(1, H, C)`` is replaced by ``att.expand(R, H, C)`` (``R`` nodes or edges), a
  view whose gradient is exactly the ``R`` per-row terms (and flows on to ``att`` as usual);
* the **general path** (:mod:`.general`) for every other trainable parameter: the model is
  run again on each sub-graph alone and differentiated against the output gradient the
  batch's backward gave that sub-graph's rows.  Exact for any differentiable module whose
  forward draws no random numbers (with dropout, a re-run draws other masks: still a function
  of that sub-graph alone, clipped as a whole, but not the batch's gradient); one forward and
  backward per sub-graph.

A parameter whose fast-rule terms turn out not to describe its gradient (it is also used
outside its module, e.g. functionally, or a layer sees rows that are not the batch's nodes,
such as an edge MLP) moves to the general path on the first step (see
``SubgraphGradSampleModule``).  Layers that mix sub-graphs are refused whichever path their
parameters take (:mod:`.mixing`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

__all__ = ["FAST", "GENERAL", "NONE", "REFUSED", "ModuleStatus", "plan"]

FAST = "fast"
"""Status of a module whose trainable parameters all have a fast rule."""
GENERAL = "general"
"""Status of a module with trainable parameters on the general path (re-run per sub-graph)."""
REFUSED = "refused"
"""Status of a module that cannot be trained with node-level DP-SGD as it is."""
NONE = "no parameters"
"""Status of a module without trainable parameters of its own (its children have theirs)."""


@dataclass
class ModuleStatus:
    """How one module's own trainable parameters get their per-sub-graph gradients.

    Attributes
    ----------
    name : str
        Qualified name in the model (``""`` for the model itself).
    type : str
        Class name.
    status : str
        :data:`FAST`, :data:`GENERAL`, :data:`REFUSED` or :data:`NONE`.
    params : tuple of str
        The module's own trainable parameters.
    fast : tuple of str
        Those with a fast rule.
    general : tuple of str
        Those on the general path.
    detail : str
        The rule, or why the module is refused.
    fixable : bool
        Refused, but :func:`ldpfast.privacy.fix` swaps it for a safe equivalent.
    owner : str or None
        The parent whose rule covers this module's parameters (the ``Linear`` layers of
        ``ChebConv`` and ``TAGConv``, which call their ``forward`` directly, so that no hook of
        their own would run).
    module : torch.nn.Module or None
        The module itself.
    """

    name: str
    type: str
    status: str
    params: tuple[str, ...] = ()
    fast: tuple[str, ...] = ()
    general: tuple[str, ...] = ()
    detail: str = ""
    fixable: bool = False
    owner: str | None = None
    module: torch.nn.Module | None = field(default=None, repr=False, compare=False)


# ----------------------------------------------------------------------------- layer types
def _pyg(name: str):
    try:
        import torch_geometric.nn as pyg

        return getattr(pyg, name, None)
    except ImportError:  # pragma: no cover
        return None


def linear_types() -> tuple[type, ...]:
    """``torch.nn.Linear`` and PyG's ``Linear``."""
    types = [torch.nn.Linear]
    try:
        from torch_geometric.nn.dense.linear import Linear as PygLinear

        types.append(PygLinear)
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)


def _types(*names: str) -> tuple[type, ...]:
    return tuple(t for t in (_pyg(n) for n in names) if t is not None)


def _norm_types() -> tuple[type, ...]:
    ts = [torch.nn.LayerNorm, torch.nn.GroupNorm]
    if hasattr(torch.nn, "RMSNorm"):
        ts.append(torch.nn.RMSNorm)
    return tuple(ts)


# ----------------------------------------------------------------------------- the plan
def _own(m: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter]]:
    return [(n, p) for n, p in m.named_parameters(recurse=False) if p.requires_grad]


def _rule(m: torch.nn.Module) -> tuple[set[str], str, str | None]:
    """``(parameters with a fast rule, the rule, why refused or None)`` for one module."""
    own = {n for n, _ in _own(m)}
    GCN, GIN, SAGE = _types("GCNConv"), _types("GINConv"), _types("SAGEConv")
    OUT_BIAS = _types("GCNConv")
    POLY = _types("ChebConv", "TAGConv")
    GAT, GATv2 = _types("GATConv"), _types("GATv2Conv")
    PygLayerNorm = _types("LayerNorm")
    if GCN and isinstance(m, GCN) and getattr(m, "cached", False):
        return set(), "", ("GCNConv(cached=True) keeps the normalisation of the first batch for every later batch "
                           "(fix: cached=False)")
    if isinstance(m, linear_types()):
        return own & {"weight", "bias"}, "Linear: g a^T per row, ghost norms per size bucket", None
    if OUT_BIAS and isinstance(m, OUT_BIAS):
        return own & {"bias"}, "GCNConv: bias from the output gradient (weight in its Linear)", None
    if POLY and isinstance(m, POLY):
        how = (f"{type(m).__name__}: lins[k] from g x_k^T with the propagated inputs x_k (from its propagate calls), "
               "bias from the output gradient")
        return own & {"bias"}, how, None
    if GAT and isinstance(m, GAT):
        return (own & {"att_src", "att_dst", "bias"},
                "GATConv: att_src/att_dst per node through an expanded view, bias from the output gradient", None)
    if GATv2 and isinstance(m, GATv2):
        return own & {"att", "bias"}, "GATv2Conv: att per edge through an expanded view, bias from the output gradient", None
    if GIN and isinstance(m, GIN):
        return own & {"eps"}, "GINConv: eps from <dL/dh, x> per node", None
    if SAGE and isinstance(m, SAGE):
        return set(), "SAGEConv: weights in its Linear layers", None
    if isinstance(m, torch.nn.Embedding):
        if m.scale_grad_by_freq:
            return set(), "Embedding(scale_grad_by_freq=True): counts over the whole batch; general path", None
        return own & {"weight"}, "Embedding: g at the looked-up row, ghost norms per size bucket", None
    if PygLayerNorm and isinstance(m, PygLayerNorm):
        if getattr(m, "mode", "graph") == "node":
            return own & {"weight", "bias"}, "LayerNorm(mode='node'): affine weights from g * xhat per node", None
        return set(), "", None  # graph mode: refused by the mixing guard
    if isinstance(m, _norm_types()):
        return own & {"weight", "bias"}, f"{type(m).__name__}: affine weights from g * xhat per node", None
    return set(), "", None


def plan(model: torch.nn.Module, *, grad_path: str = "auto") -> list[ModuleStatus]:
    """The path of every module's own trainable parameters (see the module docstring).

    Parameters
    ----------
    model : torch.nn.Module
    grad_path : {"auto", "general"}
        ``"general"`` puts every parameter on the general path (to check or time it).

    Returns
    -------
    list of ModuleStatus
        One per module, in ``named_modules()`` order.
    """
    from .mixing import mixing_reason

    if grad_path not in ("auto", "general"):
        raise ValueError(f"grad_path: expected 'auto' or 'general', got {grad_path!r}")
    out = []
    POLY = _types("ChebConv", "TAGConv")
    owned = {}  # Linear layers whose forward their parent calls directly: the parent's rule covers them
    if grad_path == "auto" and POLY:
        for name, m in model.named_modules():
            if isinstance(m, POLY):
                owned.update({id(lin): name for lin in m.lins})
    for name, m in model.named_modules():
        own = _own(m)
        names = tuple(n for n, _ in own)
        kind = type(m).__name__
        mix = mixing_reason(m)
        if mix is not None:
            out.append(ModuleStatus(name, kind, REFUSED, names, detail=mix[0], fixable=mix[1], module=m))
            continue
        lazy = [n for n, p in own if isinstance(p, torch.nn.parameter.UninitializedParameter)]
        if lazy:
            out.append(ModuleStatus(name, kind, REFUSED, names, module=m,
                                    detail=f"lazy (uninitialised) parameters {lazy}: give in_channels"))
            continue
        if id(m) in owned and names:
            out.append(ModuleStatus(name, kind, FAST, names, names, (), f"by the rule of its parent "
                                    f"{owned[id(m)]!r}", owner=owned[id(m)], module=m))
            continue
        fast, how, refused = _rule(m)
        if refused is not None:
            out.append(ModuleStatus(name, kind, REFUSED, names, detail=refused, fixable=True, module=m))
            continue
        if grad_path == "general":
            fast = set()
        f = tuple(n for n in names if n in fast)
        g = tuple(n for n in names if n not in fast)
        if not names:
            out.append(ModuleStatus(name, kind, NONE, detail=how, module=m))
        elif g:
            why = "re-run per sub-graph" + (f" (no fast rule for {type(m).__name__}.{', '.join(g)})"
                                            if grad_path == "auto" else " (grad_path='general')")
            out.append(ModuleStatus(name, kind, GENERAL, names, f, g, f"{how}; {why}" if f else why, module=m))
        else:
            out.append(ModuleStatus(name, kind, FAST, names, f, (), how, module=m))
    return out


# ----------------------------------------------------------------------------- records
class Rec:
    """What a hook kept for one use of a module: ``a`` (inputs, normalised inputs, indices),
    ``g`` (the gradient at the layer's output or at an expanded view), ``rows`` (how its rows
    map to the batch's nodes), ``param`` (for expanded views)."""

    __slots__ = ("a", "g", "kind", "module", "param", "rows")

    def __init__(self, module, kind, a=None, rows=None, param=None):
        self.module, self.kind, self.a, self.g, self.rows, self.param = module, kind, a, None, rows, param


class Unmapped(Exception):
    """A layer's rows are not the batch's nodes, its sub-graphs, or nodes repeated."""


def grad_hook(t, rec: Rec) -> None:
    """Keep (sum) the gradient reaching ``t`` in ``rec.g``."""
    if not isinstance(t, torch.Tensor) or not t.requires_grad:
        return

    def store(g):
        rec.g = g.detach() if rec.g is None else rec.g + g.detach()

    t.register_hook(store)


def _first(output):
    return output[0] if isinstance(output, (tuple, list)) else output


class Hooks:
    """Installs the fast rules' hooks on the modules of a plan; ``owner`` is the
    :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule` (its ``_outside(module)`` says
    whether a call records, ``_recs`` collects the records)."""

    def __init__(self, owner, grad_path: str = "auto"):
        self.owner = owner
        self.grad_path = grad_path
        self.handles: list = []

    def install(self, st: ModuleStatus) -> None:
        m, fast = st.module, set(st.fast)
        POLY = _types("ChebConv", "TAGConv")
        poly = bool(POLY) and isinstance(m, POLY) and self.grad_path == "auto"  # its rule covers its Linears
        if st.owner is not None or not (fast or poly):
            return
        GIN, GAT, GATv2 = _types("GINConv"), _types("GATConv"), _types("GATv2Conv")
        h = self.handles
        if poly:
            h.append(m.register_forward_pre_hook(self._poly_pre))
            h.append(m.register_propagate_forward_hook(self._poly_propagated))
            h.append(m.register_forward_hook(self._poly))
        elif isinstance(m, linear_types()):
            h.append(m.register_forward_hook(self._linear))
        elif GIN and isinstance(m, GIN):
            h.append(m.register_forward_pre_hook(self._gin_pre))
            h.append(m.nn.register_forward_pre_hook(self._gin_nn_pre(m)))
        elif isinstance(m, torch.nn.Embedding):
            h.append(m.register_forward_hook(self._embedding))
        elif isinstance(m, _norm_types() + _types("LayerNorm")):
            h.append(m.register_forward_hook(self._norm))
        elif GAT and isinstance(m, GAT):
            if fast & {"att_src", "att_dst"}:
                h.append(m.register_forward_pre_hook(self._gat_expand, with_kwargs=True))
                h.append(m.register_forward_hook(self._restore, always_call=True))
            if "bias" in fast:
                h.append(m.register_forward_hook(self._out_bias))
        elif GATv2 and isinstance(m, GATv2):
            if "att" in fast:
                h.append(m.register_edge_update_forward_pre_hook(self._gatv2_expand))
                h.append(m.register_edge_update_forward_hook(lambda mod, inputs, out: self._restore(mod)))
                h.append(m.register_forward_hook(self._restore, always_call=True))
            if "bias" in fast:
                h.append(m.register_forward_hook(self._out_bias))
        elif "bias" in fast:  # GCNConv, ChebConv, TAGConv: out = ... + bias
            h.append(m.register_forward_hook(self._out_bias))

    def remove(self) -> None:
        for x in self.handles:
            x.remove()
        self.handles = []

    # -- hooks
    def _add(self, rec: Rec, t) -> None:
        self.owner._recs.append(rec)
        grad_hook(t, rec)

    def _linear(self, module, inputs, output):
        if self.owner._outside(module):
            return
        a = inputs[0].detach()
        if a.dim() > 2:
            self._add(Rec(module, "linear", a.reshape(-1, a.shape[-1]),
                          rows=(a.shape[0], a.numel() // (a.shape[0] * a.shape[-1]))), output)
        else:
            self._add(Rec(module, "linear", a), output)

    def _out_bias(self, module, inputs, output):
        if self.owner._outside(module):
            return
        self._add(Rec(module, "bias"), _first(output))

    def _gin_pre(self, module, inputs):
        if self.owner._outside(module):
            return
        x = inputs[0]
        x_r = x[1] if isinstance(x, (tuple, list)) else x
        module._ldp_xr = None if x_r is None else x_r.detach()

    def _gin_nn_pre(self, conv):
        def hook(module, inputs):
            if self.owner._outside(conv):
                return
            if getattr(conv, "_ldp_xr", None) is None:
                return
            rec = Rec(conv, "gin_eps", conv._ldp_xr)
            conv._ldp_xr = None
            self._add(rec, inputs[0])
        return hook

    def _poly_pre(self, module, inputs):
        if self.owner._outside(module):
            return
        module.__dict__["_ldp_xs"] = [inputs[0].detach()]

    def _poly_propagated(self, module, inputs, output):
        xs = module.__dict__.get("_ldp_xs")
        if xs is not None and not self.owner._outside(module):
            xs.append(output.detach())

    def _poly(self, module, inputs, output):
        xs = module.__dict__.pop("_ldp_xs", None)
        if xs is None or self.owner._outside(module):
            return
        if type(module).__name__ == "ChebConv":  # T_k = 2 L T_{k-1} - T_{k-2}: propagate gives L T_{k-1}
            for k in range(2, len(xs)):
                xs[k] = 2.0 * xs[k] - xs[k - 2]
        if len(xs) != len(module.lins):
            raise RuntimeError(f"{type(module).__name__}: {len(xs)} propagated inputs for {len(module.lins)} "
                               "Linear layers; this PyG version computes it otherwise (use grad_path='general')")
        self._add(Rec(module, "poly", xs), output)

    def _embedding(self, module, inputs, output):
        if self.owner._outside(module):
            return
        idx = inputs[0].detach()
        n0 = idx.shape[0] if idx.dim() else 1
        self._add(Rec(module, "embedding", idx.reshape(-1), rows=(n0, idx.numel() // max(n0, 1))), output)

    def _norm(self, module, inputs, output):
        if self.owner._outside(module):
            return
        x = inputs[0].detach()
        with torch.no_grad():
            if isinstance(module, torch.nn.GroupNorm):
                xhat = F.group_norm(x, module.num_groups, None, None, module.eps)
            elif hasattr(torch.nn, "RMSNorm") and isinstance(module, torch.nn.RMSNorm):
                xhat = F.rms_norm(x, module.normalized_shape, None, module.eps)
            elif isinstance(module, torch.nn.LayerNorm):
                xhat = F.layer_norm(x, module.normalized_shape, None, None, module.eps)
            else:  # PyG LayerNorm(mode="node")
                xhat = F.layer_norm(x, (module.in_channels,), None, None, module.eps)
        self._add(Rec(module, "norm", xhat), output)

    # expanded views: the parameter is swapped for att.expand(R, ...) while the layer runs
    def _swap(self, module, name: str, rows: int, nodes, index=None) -> None:
        p = module._parameters.get(name)
        if not isinstance(p, torch.nn.Parameter) or not p.requires_grad:
            return
        view = p.expand(rows, *p.shape[1:])
        swapped = module.__dict__.setdefault("_ldp_swapped", {})
        swapped.setdefault(name, p)
        module._parameters[name] = view
        rec = Rec(module, "expand", a=index, rows=nodes, param=p)
        self._add(rec, view)

    def _restore(self, module, *args, **kwargs):
        for name, p in module.__dict__.pop("_ldp_swapped", {}).items():
            module._parameters[name] = p

    def _gat_expand(self, module, args, kwargs):
        if self.owner._outside(module):
            return
        x = args[0] if args else kwargs.get("x")
        xs, xd = (x[0], x[1]) if isinstance(x, (tuple, list)) else (x, x)
        self._swap(module, "att_src", xs.shape[0], xs.shape[0])
        if xd is not None:
            self._swap(module, "att_dst", xd.shape[0], xd.shape[0])

    def _gatv2_expand(self, module, inputs):
        if self.owner._outside(module):
            return
        edge_index, _size, kwargs = inputs
        if "index" in kwargs and kwargs.get("dim_size") is not None:  # PyG's generated edge_updater
            index, nodes = kwargs["index"], int(kwargs["dim_size"])
        else:  # the plain one: the arguments of the call
            if not isinstance(edge_index, torch.Tensor) or edge_index.layout != torch.strided:
                return  # a sparse adjacency: left to the first-step check (then the general path)
            x = kwargs.get("x")
            x_r = x[1] if isinstance(x, (tuple, list)) else x
            index, nodes = edge_index[1 if module.flow == "source_to_target" else 0], x_r.shape[0]
        self._swap(module, "att", index.shape[0], nodes, index=index)


# ----------------------------------------------------------------------------- terms
def rec_params(rec: Rec) -> list[torch.nn.Parameter]:
    """The trainable parameters a record gives terms for."""
    if rec.kind == "expand":
        return [rec.param]
    if rec.kind == "poly":
        ps = [getattr(m, n, None) for m in (*rec.module.lins, rec.module) for n in ("weight", "bias")]
        return [p for p in ps if isinstance(p, torch.nn.Parameter) and p.requires_grad]
    names = {"linear": ("weight", "bias"), "bias": ("bias",), "gin_eps": ("eps",), "embedding": ("weight",),
             "norm": ("weight", "bias")}[rec.kind]
    ps = [getattr(rec.module, n, None) for n in names]
    return [p for p in ps if isinstance(p, torch.nn.Parameter) and p.requires_grad]


def terms(rec: Rec, rows_seg) -> list[tuple]:
    """The per-row gradient terms of one record: ``(param, kind, seg, a, g)`` with ``kind``

    * ``"outer"``: per sub-graph ``sum_rows g^T a`` (``a`` (R, din), ``g`` (R, dout), a
      ``(dout, din)`` weight);
    * ``"rows"``: per sub-graph the sum of the rows of ``g`` (R, numel);
    * ``"index"``: rows of ``g`` (R, d) added at the rows ``a`` (R,) of the parameter.

    ``rows_seg(n)`` is the sub-graph id of each of ``n`` node- or sub-graph-level rows (raises
    :class:`Unmapped`).
    """
    g, m = rec.g, rec.module

    def seg_of(rows):
        if rows is None:
            return rows_seg(g.shape[0])
        n0, rep = rows
        s = rows_seg(n0)
        return s if rep == 1 else s.repeat_interleave(rep)

    if rec.kind == "linear":
        g2 = g.reshape(-1, g.shape[-1])
        seg = seg_of(rec.rows)
        out = []
        if m.weight.requires_grad:
            out.append((m.weight, "outer", seg, rec.a, g2))
        b = getattr(m, "bias", None)
        if isinstance(b, torch.nn.Parameter) and b.requires_grad:
            out.append((b, "rows", seg, None, g2))
        return out
    if rec.kind == "bias":
        g2 = g.reshape(g.shape[0], -1)
        return [(m.bias, "rows", rows_seg(g2.shape[0]), None, g2)]
    if rec.kind == "poly":  # out = sum_k lins[k](x_k) + bias
        seg = rows_seg(g.shape[0])
        out = []
        for lin, xk in zip(m.lins, rec.a):
            if lin.weight.requires_grad:
                out.append((lin.weight, "outer", seg, xk, g))
            if isinstance(lin.bias, torch.nn.Parameter) and lin.bias.requires_grad:
                out.append((lin.bias, "rows", seg, None, g))
        if isinstance(m.bias, torch.nn.Parameter) and m.bias.requires_grad:
            out.append((m.bias, "rows", seg, None, g))
        return out
    if rec.kind == "gin_eps":
        v = (g * rec.a).reshape(g.shape[0], -1).sum(1, keepdim=True)
        return [(m.eps, "rows", rows_seg(v.shape[0]), None, v)]
    if rec.kind == "embedding":
        g2 = g.reshape(-1, g.shape[-1])
        if m.padding_idx is not None:  # no gradient at the padding row
            g2 = g2 * (rec.a != m.padding_idx).unsqueeze(1).to(g2.dtype)
        return [(m.weight, "index", seg_of(rec.rows), rec.a, g2)]
    if rec.kind == "norm":
        w, b = getattr(m, "weight", None), getattr(m, "bias", None)
        P = w.numel() if isinstance(w, torch.Tensor) else b.numel()
        n0 = g.shape[0]
        if isinstance(m, torch.nn.GroupNorm):  # (N, C, *): one weight per channel
            gw = (g * rec.a).reshape(n0, P, -1).sum(2)
            gb = g.reshape(n0, P, -1).sum(2)
        else:  # the last dims are the weight's; the dims between them and the rows are summed
            gw = (g * rec.a).reshape(n0, -1, P).sum(1)
            gb = g.reshape(n0, -1, P).sum(1)
        seg = rows_seg(n0)
        out = []
        if isinstance(w, torch.nn.Parameter) and w.requires_grad:
            out.append((w, "rows", seg, None, gw))
        if isinstance(b, torch.nn.Parameter) and b.requires_grad:
            out.append((b, "rows", seg, None, gb))
        return out
    if rec.kind == "expand":
        g2 = g.reshape(g.shape[0], -1)
        seg = rows_seg(rec.rows)
        if rec.a is not None:  # per edge: the sub-graph of its target node
            seg = seg[rec.a]
        return [(rec.param, "rows", seg, None, g2)]
    raise AssertionError(rec.kind)  # pragma: no cover
