"""The general path of per-sub-graph gradients: any differentiable module, by re-running the
model on every sub-graph alone.

The fast rules (:mod:`.grad_rules`) read per-sub-graph gradients off one backward of the
block-diagonal batch, but only for layers whose gradient is a sum of known per-row terms.
For every other trainable parameter, the per-sub-graph gradient is computed from its
definition.  With ``loss = sum_b f_b(out_b)`` and sub-graphs that do not mix (checked by
:mod:`.mixing`), the gradient of sub-graph ``b`` is the vector-Jacobian product of the model
run on ``G_b`` alone with the output gradient of ``b``'s rows in the batch's backward
(``g_out[b] = df_b/dout_b``, since only ``f_b`` reads ``out_b``)::

    g_b = d/dw <g_out[b], model(x_b, edge_index_b; w)>

so the loss function itself is never needed.

**Op-level rules first.**  Materialising ``g_b`` costs ``B x |w|`` numbers (188 MB for a
1433 x 128 weight and 256 sub-graphs), which dominated this path's cost.  So the batch is
first re-run *once*, whole (its sub-graphs do not mix: the same forward as the batch's),
under a :class:`~torch.overrides.TorchFunctionMode` that watches the parameters of this
path: where one is the weight (and bias) of ``F.linear`` on the batch's node rows (every
``torch.nn.Linear`` and PyG ``Linear``: GCN, SAGE, GAT, GIN, MLP heads), or added as a bias
to a ``(N, d)`` node-row tensor, the op's input ``A`` and the gradient ``G`` at its output
(one backward of the re-run with ``g_out``, to those outputs only) give the same per-row
terms as the fast rules: ``g_b(W) = G_b^T A_b`` (ghost norm, then book-keeping: the clipped
sum is one matmul) and ``g_b(bias) = sum_rows G_b``.  A parameter used by any other op (or
only partly so) keeps the re-run per sub-graph below; on the first step the op terms of every
parameter are also checked to add up to its gradient in the re-run, and one whose terms do
not (a use the mode cannot see, e.g. in code run under ``torch._C.DisableTorchFunction()``)
moves to the re-run for good (the same first-step policy as the fast rules' check).  With
randomness (dropout) ``A`` and ``G`` come from one draw of the re-run, so the bound holds.

The rest, per sub-graph.  Two ways to run it, chosen per model:

* **vmap by size bucket**: the sub-graphs of one power-of-two size bucket are padded to
  ``P`` nodes (at least one of them spare) and to the bucket's largest edge count (the extra
  edges are self-loops of a spare node, which no real node reads), and
  ``torch.func.vmap(torch.func.grad(...))`` runs the model once per bucket
  (``randomness="different"``).  Padding rows get a zero output gradient.  The first time,
  the result is compared with the loop below on four sub-graphs (when the model is
  deterministic), and the next two batches time both ways; a mismatch, a slower vmap (on a
  CPU, with large weights, whose per-sub-graph gradients dominate either way), or any error
  switches the model to the loop for good.  PyG drops self-loops with a boolean mask (``GCNConv``,
  ``GATConv``, ``GATv2Conv``, ``ChebConv``), a "dynamic shape" vmap refuses: during the
  vmapped run its ``remove_self_loops``, ``add_remaining_self_loops`` and ``gcn_norm`` are
  replaced by stand-ins that move an old self-loop to the spare node instead (or weigh it 0);
* **a loop over the sub-graphs**: one small forward and backward each, for any model (the
  total arithmetic is one batch's; the cost is Python and launch overhead per sub-graph).

``benchmarks/bench_grad_paths.py`` measures both against the fast rules.

Exactness: the same numbers as a Python loop over the sub-graphs, up to float summation
order, for any model whose training forward draws no random numbers.  With dropout (or any
other randomness) the re-run draws its own masks, so ``g_b`` is the gradient of another
draw than the batch's: still a function of sub-graph ``b`` alone, and clipped as a whole
with the fast parameters' terms, so the bound ``||clip(g_b)|| <= C`` and the accounting hold.
"""
from __future__ import annotations

import contextlib
import time
import warnings

import torch
from torch.overrides import TorchFunctionMode

__all__ = ["GeneralPath", "per_subgraph_gradients"]

_LINEAR_NAMES = ("linear",)
_ADD_NAMES = ("add", "__add__", "__radd__")
# reading these attributes of a parameter is not a use of its value (``w.T`` is: not listed)
_META = frozenset({"shape", "dtype", "device", "requires_grad", "is_leaf", "ndim", "layout", "grad_fn", "names",
                   "is_sparse", "is_cuda", "is_meta", "is_quantized", "data", "grad", "_grad", "_version"})
_METHODS = frozenset({"size", "dim", "numel", "nelement", "ndimension", "stride", "is_contiguous", "data_ptr",
                      "element_size", "is_floating_point", "is_complex", "__len__", "__hash__", "__format__",
                      "__repr__", "detach", "get_device"})


def _layout(seg: torch.Tensor, edge_index: torch.Tensor, B: int):
    """Nodes and edges of every sub-graph: ``(node order, node offsets, edges in local ids,
    edge offsets)``, the offsets on the host."""
    N = seg.numel()
    dev = seg.device
    order = torch.argsort(seg, stable=True)
    offs = torch.searchsorted(seg[order], torch.arange(B + 1, device=dev))
    local = torch.empty_like(seg)
    local[order] = torch.arange(N, device=dev) - offs[:-1][seg[order]]
    es = seg[edge_index[1]]
    if bool((seg[edge_index[0]] != es).any()):
        raise ValueError("edge_index: an edge joins two sub-graphs; the batch must be block-diagonal (the "
                         "HeterPoisson sampler's batches are)")
    eorder = torch.argsort(es, stable=True)
    eoffs = torch.searchsorted(es[eorder], torch.arange(B + 1, device=dev))
    return order, offs.tolist(), local[edge_index[:, eorder]], eoffs.tolist()


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _loop(model, x, layout, g_out, params, grads, subgraphs) -> None:
    """``grads[i][b]`` for ``b`` in ``subgraphs``: one forward and backward per sub-graph."""
    order, offs, ei_local, eoffs = layout
    with torch.enable_grad():
        for b in subgraphs:
            if offs[b] == offs[b + 1]:
                continue
            nodes = order[offs[b]:offs[b + 1]]
            out = _first(model(x[nodes], ei_local[:, eoffs[b]:eoffs[b + 1]]))
            if not out.requires_grad:
                continue
            if out.shape[0] != nodes.numel():
                raise ValueError(f"the general path needs node-level outputs: on a sub-graph of {nodes.numel()} "
                                 f"nodes the model returned {out.shape[0]} rows")
            gs = torch.autograd.grad(out, params, g_out[nodes].to(out.dtype), allow_unused=True)
            for acc, gi in zip(grads, gs):
                if gi is not None:
                    acc[b] = gi


# ----------------------------------------------------------------------------- vmap-safe PyG pieces
# PyG drops existing self-loops with a boolean mask (remove_self_loops, add_remaining_self_loops,
# inside gcn_norm, GATConv, GATv2Conv, ChebConv's get_laplacian): a data-dependent shape, which
# vmap refuses.  On padded sub-graphs there is a spare node no real node reads, so a self-loop
# can be *moved* to it instead (or, with an edge weight, given weight 0): the real nodes see
# exactly the graph without their old loops.  These stand-ins replace PyG's functions only while
# a vmapped re-run is under way; the first step's comparison with the loop checks the result.
def _vmap_safe(spare: list[int]) -> dict:
    """The stand-ins; ``spare[0]`` is the spare node of the bucket being run."""
    from torch_geometric.utils import scatter

    def remove_self_loops(edge_index, edge_attr=None):
        loop = edge_index[0] == edge_index[1]
        return torch.where(loop, torch.full_like(edge_index, spare[0]), edge_index), edge_attr

    def add_remaining_self_loops(edge_index, edge_attr=None, fill_value=None, num_nodes=None):
        if edge_attr is not None and (edge_attr.dim() != 1 or not isinstance(fill_value, (int, float))):
            raise NotImplementedError("vmap-safe add_remaining_self_loops: 1-d weights and a number fill only")
        N = int(num_nodes if num_nodes is not None else spare[0] + 1)
        loop = edge_index[0] == edge_index[1]
        loops = torch.arange(N, device=edge_index.device).view(1, -1).expand(2, N)
        if edge_attr is not None:  # an old loop's weight is its node's loop weight; the old edge weighs 0
            fill = 1.0 if fill_value is None else float(fill_value)
            base = torch.full((N + 1,), fill, dtype=edge_attr.dtype, device=edge_attr.device)
            at = torch.where(loop, edge_index[0], torch.full_like(edge_index[0], N))
            loop_w = torch.scatter(base, 0, at, edge_attr)[:N]
            edge_attr = torch.cat([torch.where(loop, torch.zeros_like(edge_attr), edge_attr), loop_w])
        edge_index = torch.where(loop, torch.full_like(edge_index, spare[0]), edge_index)
        return torch.cat([edge_index, loops], 1), edge_attr

    def gcn_norm(edge_index, edge_weight=None, num_nodes=None, improved=False, add_self_loops=True,
                 flow="source_to_target", dtype=None):
        if not isinstance(edge_index, torch.Tensor) or edge_index.layout != torch.strided:
            raise NotImplementedError("vmap-safe gcn_norm: edge_index tensors only")
        N = int(num_nodes if num_nodes is not None else spare[0] + 1)
        if add_self_loops:  # as PyG: without weights, the loops weigh 1 whatever improved says
            edge_index, edge_weight = add_remaining_self_loops(edge_index, edge_weight, 2.0 if improved else 1.0, N)
        if edge_weight is None:
            edge_weight = (edge_index[0] >= 0).to(dtype or torch.get_default_dtype())  # ones, batched like edges
        row, col = edge_index[0], edge_index[1]
        deg = scatter(edge_weight, col if flow == "source_to_target" else row, dim=0, dim_size=N, reduce="sum")
        dis = deg.pow(-0.5)
        dis = torch.where(torch.isinf(dis), torch.zeros_like(dis), dis)
        return edge_index, dis[row] * edge_weight * dis[col]

    return {"remove_self_loops": remove_self_loops, "add_remaining_self_loops": add_remaining_self_loops,
            "gcn_norm": gcn_norm}


_TARGETS: tuple[int, list[tuple]] = (-1, [])  # (len(sys.modules) when found, [(module, name, original)])


def _targets() -> list[tuple]:
    """Where PyG's modules hold the three functions (found again when modules were imported)."""
    import sys

    global _TARGETS
    if _TARGETS[0] == len(sys.modules):
        return _TARGETS[1]
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import add_remaining_self_loops, remove_self_loops

    originals = {"remove_self_loops": remove_self_loops, "add_remaining_self_loops": add_remaining_self_loops,
                 "gcn_norm": gcn_norm}
    found = [(mod, name, fn) for key, mod in list(sys.modules.items()) if key.startswith("torch_geometric") and mod
             for name, fn in originals.items() if getattr(mod, name, None) is fn]
    _TARGETS = (len(sys.modules), found)
    return found


class _Patched:
    """Swap PyG's self-loop functions for :func:`_vmap_safe`'s while the block runs;
    ``spare[0]`` says which node is spare."""

    def __init__(self):
        self.spare = [0]
        self.new = _vmap_safe(self.spare)
        self.saved: list[tuple] = []

    def __enter__(self):
        self.saved = _targets()
        for mod, name, _ in self.saved:
            setattr(mod, name, self.new[name])
        return self

    def __exit__(self, *exc):
        for mod, name, fn in self.saved:
            setattr(mod, name, fn)
        return False


def _vmapped(model, x, layout, g_out, names, params, grads, B) -> None:
    """``grads`` of every sub-graph, one ``vmap`` per padded size bucket."""
    from torch.func import functional_call, grad, vmap

    order, offs, ei_local, eoffs = layout
    dev, N, E_all = x.device, x.shape[0], ei_local.shape[1]
    sizes = [offs[b + 1] - offs[b] for b in range(B)]
    n_edges = [eoffs[b + 1] - eoffs[b] for b in range(B)]
    buckets: dict[int, list[int]] = {}
    for b in range(B):
        if sizes[b]:  # padded to 2^ceil(log2(size + 1)): at least one spare node
            buckets.setdefault(1 << sizes[b].bit_length(), []).append(b)
    offs_t, eoffs_t = torch.tensor(offs, device=dev), torch.tensor(eoffs, device=dev)
    fixed = dict(zip(names, (p.detach() for p in params)))
    xz = torch.cat([x, torch.zeros((1,) + tuple(x.shape[1:]), dtype=x.dtype, device=dev)])
    gz = torch.cat([g_out, torch.zeros((1,) + tuple(g_out.shape[1:]), dtype=g_out.dtype, device=dev)])

    def f(ps, xb, eib, gb):
        out = _first(functional_call(model, ps, (xb, eib)))
        return (out * gb.to(out.dtype)).sum()

    step = vmap(grad(f), in_dims=(None, 0, 0, 0), randomness="different")
    with torch.enable_grad(), _Patched() as patch:
        for P, ids in buckets.items():
            idt = torch.tensor(ids, device=dev)
            ar = torch.arange(P, device=dev)
            pos = offs_t[idt].unsqueeze(1) + ar
            rows = torch.where(ar < (offs_t[idt + 1] - offs_t[idt]).unsqueeze(1), order[pos.clamp(max=N - 1)],
                               torch.full_like(pos, N))  # N: the zero row
            E = max(1, max(n_edges[b] for b in ids))
            are = torch.arange(E, device=dev)
            epos = eoffs_t[idt].unsqueeze(1) + are
            ereal = are < (eoffs_t[idt + 1] - eoffs_t[idt]).unsqueeze(1)
            eis = torch.full((len(ids), 2, E), P - 1, dtype=torch.long, device=dev)  # a spare node's self-loop
            if E_all:
                eis = torch.where(ereal.unsqueeze(1), ei_local[:, epos.clamp(max=E_all - 1)].permute(1, 0, 2), eis)
            patch.spare[0] = P - 1
            got = step(fixed, xz[rows], eis, gz[rows])
            for acc, n in zip(grads, names):
                acc[idt] = got[n].detach().to(acc.dtype)


# ----------------------------------------------------------------------------- op-level rules
class _OpRecorder(TorchFunctionMode):
    """Watch the uses of ``params`` during one forward of the whole batch: ``F.linear`` on
    ``N`` node rows with a watched weight (and a watched bias or none), and a watched 1-d
    bias added to ``(N, d)`` node rows, are recorded (input, output); any other use of a
    watched parameter marks it ``other``."""

    def __init__(self, params, N: int):
        super().__init__()
        self.ids = {id(p): p for p in params}
        self.N = N
        self.uses: list[tuple] = []  # (kind, weight or None, bias or None, a, out)
        self.other: set[int] = set()

    def _watched(self, t) -> bool:
        return isinstance(t, torch.Tensor) and id(t) in self.ids

    def _mark(self, args, kwargs) -> None:
        for t in (*args, *kwargs.values()):
            if self._watched(t):
                self.other.add(id(t))
            elif isinstance(t, (tuple, list)):
                self._mark(t, {})

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        if name in _LINEAR_NAMES:
            x = args[0] if args else kwargs.get("input")
            w = args[1] if len(args) > 1 else kwargs.get("weight")
            b = args[2] if len(args) > 2 else kwargs.get("bias")
            if (self._watched(w) and w.dim() == 2 and isinstance(x, torch.Tensor) and x.dim() == 2
                    and x.shape[0] == self.N and (b is None or self._watched(b) or not b.requires_grad)):
                out = func(*args, **kwargs)
                self.uses.append(("linear", w, b if self._watched(b) else None, x.detach(), out))
                return out.clone()  # later in-place ops change the clone: out stays this op's output
        elif name in _ADD_NAMES and len(args) == 2 and not kwargs:
            t, b = (args[1], args[0]) if self._watched(args[0]) else args
            if (self._watched(b) and not self._watched(t) and b.dim() == 1 and isinstance(t, torch.Tensor)
                    and t.dim() == 2 and t.shape == (self.N, b.shape[0])):
                out = func(*args, **kwargs)
                self.uses.append(("bias", None, b, None, out))
                return out.clone()
        elif name == "__get__":
            if args and self._watched(args[0]) and getattr(getattr(func, "__self__", None), "__name__", "") in _META:
                return func(*args, **kwargs)
        elif name in _METHODS:
            return func(*args, **kwargs)
        self._mark(args, kwargs)
        return func(*args, **kwargs)


def _op_terms(model, x, edge_index, seg, g_out, params, check: bool):
    """The op-level terms ``(param, kind, seg, a, g)`` (kinds of :func:`.grad_rules.terms`)
    of the parameters whose every use is a recorded op, from one re-run of the batch; the
    others are returned apart.  ``check``: also compare each parameter's terms with its
    gradient in the re-run (first step); a mismatch moves it to the others."""
    N = seg.numel()
    rec = _OpRecorder(params, N)
    with torch.enable_grad():
        with rec:
            out = _first(model(x, edge_index))
        if out.shape[0] != N:
            raise ValueError(f"the general path needs node-level outputs (one row per batch node, {N}); the model "
                             f"returned {out.shape[0]} rows")
        users = {}
        for u in rec.uses:
            for p in (u[1], u[2]):
                if p is not None:
                    users.setdefault(id(p), []).append(u)
        # a weight recorded in one op and its bias in another kind (or unrecorded): the same rule either way
        mine = [p for p in params if id(p) in users and id(p) not in rec.other]
        if not mine:
            return [], list(params)
        outs = [u[4] for u in rec.uses]
        need = outs + (mine if check else [])
        got = torch.autograd.grad(out, need, g_out.to(out.dtype), allow_unused=True)
    G = {id(o): (torch.zeros_like(o) if g is None else g.detach()) for o, g in zip(outs, got[:len(outs)])}
    terms = []
    for u in rec.uses:
        _, w, b, a, o = u
        g = G[id(o)]
        if w is not None and id(w) in {id(p) for p in mine}:
            terms.append((w, "outer", seg, a, g))
        if b is not None and id(b) in {id(p) for p in mine}:
            terms.append((b, "rows", seg, None, g))
    rest = [p for p in params if not any(p is q for q in mine)]
    if check:  # the terms of each parameter must add up to its gradient in the re-run
        full = {id(p): g for p, g in zip(mine, got[len(outs):])}
        bad = set()
        for p in mine:
            want = torch.zeros_like(p, dtype=torch.float64) if full[id(p)] is None else full[id(p)].double()
            have = torch.zeros_like(want)
            for t in terms:
                if t[0] is p:
                    have += (t[4].t() @ t[3]).double() if t[1] == "outer" else t[4].sum(0).double()
            if float((have - want).norm()) > 1e-4 * max(float(have.norm()), float(want.norm())) + 1e-12:
                bad.add(id(p))
        if bad:
            terms = [t for t in terms if id(t[0]) not in bad]
            rest += [p for p in mine if id(p) in bad]
    return terms, rest


# ----------------------------------------------------------------------------- attribution check
# The per-row rules (the fast rules of .grad_rules and the op rules above) charge row r of a
# node-level tensor to node r's sub-graph, and the first-step checks compare only each
# parameter's *sum* of terms with its gradient.  A model that reorders its node rows around a
# layer (and back) passes that with terms charged to the wrong sub-graphs, hence wrong norms and
# a clipping bound that does not hold.  These pieces compare the terms on a few sub-graphs with
# the model run on each sub-graph alone; both callers (clipping.py for the fast rules, and
# _misattributed for the op rules) use them.
@contextlib.contextmanager
def probe(model: torch.nn.Module, x: torch.Tensor):
    """Run the block with ``model`` in eval mode (the question is structural; dropout would draw
    other masks in each run) and restore its parameters, buffers, train/eval flags and the RNG
    afterwards (a probe changes nothing the training sees)."""
    state = [t.detach().clone() for t in (*model.parameters(), *model.buffers())]
    modes = {m: m.training for m in model.modules()}
    cuda = [x.device.index if x.device.index is not None else torch.cuda.current_device()] if x.is_cuda else []
    try:
        with torch.random.fork_rng(devices=cuda), torch.enable_grad():
            model.eval()
            yield
    finally:
        with torch.no_grad():
            for t, s in zip((*model.parameters(), *model.buffers()), state):
                t.copy_(s)
        for m, flag in modes.items():
            m.training = flag


def probe_subgraphs(B: int, n_check: int = 8) -> list[int]:
    """``n_check`` sub-graph ids spread over ``range(B)`` (host arithmetic: no device read)."""
    return sorted({i * B // n_check for i in range(min(n_check, B))})


def alone_gradients(model, x, edge_index, seg, g_out, params, subs) -> dict[int, list[torch.Tensor]]:
    """``{b: [gradient of each parameter]}`` of the model run on sub-graph ``b`` alone with
    ``b``'s output gradient, for ``b`` in ``subs`` (masks, no host copy of a device tensor)."""
    ref = {}
    for b in subs:
        rows = seg == b
        local = torch.cumsum(rows.long(), 0) - 1
        ei = local[edge_index[:, rows[edge_index[0]] & rows[edge_index[1]]]]
        o = _first(model(x[rows], ei))
        gs = torch.autograd.grad(o, params, g_out[rows].to(o.dtype), allow_unused=True)
        ref[b] = [torch.zeros_like(p) if g is None else g for p, g in zip(params, gs)]
    return ref


def split_mismatch(params, terms, ref: dict, subs) -> set[int]:
    """Ids of the ``params`` whose ``(param, kind, seg, a, g)`` terms (kinds of
    :func:`.grad_rules.terms`) on the rows of a sub-graph in ``subs`` differ from ``ref``'s
    gradient of that sub-graph alone (relative 1e-4)."""
    bad = set()
    for i, p in enumerate(params):
        mine = [t for t in terms if t[0] is p]
        if not mine:
            continue
        for b in subs:
            have = torch.zeros(p.shape, dtype=torch.float64, device=p.device)
            for _, kind, sg, a, g in mine:
                rows = (sg == b).unsqueeze(1).to(g.dtype)
                if kind == "outer":
                    have += ((g * rows).t() @ a.to(g.dtype)).double().reshape(p.shape)
                elif kind == "rows":
                    have += (g * rows).sum(0).double().reshape(p.shape)
                else:  # "index"
                    have.index_add_(0, a, (g * rows).double())
            want = ref[b][i].double()
            if float((have - want).norm()) > 1e-4 * max(float(have.norm()), float(want.norm())) + 1e-12:
                bad.add(id(p))
                break
    return bad


def _misattributed(model, x, edge_index, seg, B: int, g_out, params, n_check: int = 8) -> set[int]:
    """First-step check that the op terms split by *sub-graph* as they should (the section
    above): ids of the parameters whose terms on ``n_check`` sub-graphs do not match."""
    subs = probe_subgraphs(B, n_check)
    with probe(model, x):
        terms, _ = _op_terms(model, x, edge_index, seg, g_out, params, False)
        ref = alone_gradients(model, x, edge_index, seg, g_out, params, subs)
    return split_mismatch(params, terms, ref, subs)


class GeneralPath:
    """The general path of one model: which way (vmap by bucket or loop) works for it,
    decided on its first calls and kept.

    In ``"auto"`` mode the first call runs vmap and checks it against the loop (an error or
    a mismatch: the loop for good); the next two calls time vmap and the loop on whole
    batches (the first vmap call also traces, so it is not timed), and the faster one is
    kept (:attr:`state`).

    Parameters
    ----------
    model : torch.nn.Module
    mode : {"auto", "vmap", "loop"}
        ``"auto"``: as above; ``"vmap"`` or ``"loop"``: that way only (to check or time it;
        errors of vmap are raised).
    ops : bool
        Use the op-level rules (module docstring) in :meth:`terms` before the re-run per
        sub-graph (default); ``False`` re-runs every parameter per sub-graph (to time it).

    Attributes
    ----------
    state : str
        ``"untried"``, ``"timing"``, ``"vmap"`` or ``"loop"`` (``"auto"`` mode).
    why_loop : str
        Why the loop was kept.
    """

    def __init__(self, model: torch.nn.Module, mode: str = "auto", ops: bool = True):
        if mode not in ("auto", "vmap", "loop"):
            raise ValueError(f"mode: expected 'auto', 'vmap' or 'loop', got {mode!r}")
        if not isinstance(ops, bool):
            raise TypeError(f"ops: expected a bool, got {type(ops).__name__}")
        self.mode = mode
        self.ops = ops
        self._op_checked: set[int] = set()  # parameters whose op terms were checked (first step)
        self._no_ops: set[int] = set()  # parameters left to the re-run per sub-graph for good
        self.model = model
        self.names = {id(p): n for n, p in model.named_parameters()}
        self.state = "untried"
        self.why_loop = ""
        self._seconds: dict[str, float] = {}  # per sub-graph, while timing
        self._buffers: dict[int, torch.Tensor] = {}  # reused across steps: fresh pages cost more than zeroing

    @property
    def vmap_ok(self) -> bool | None:
        """True when vmap was kept, False when the loop was, None while undecided."""
        return {"vmap": True, "loop": False}.get(self.state)

    def _zeros(self, p: torch.Tensor, B: int) -> torch.Tensor:
        buf = self._buffers.get(id(p))
        if buf is None or buf.shape[0] < B or buf.device != p.device or buf.dtype != p.dtype:
            buf = self._buffers[id(p)] = torch.empty((max(B, 1),) + tuple(p.shape), dtype=p.dtype, device=p.device)
        return buf[:B].zero_()

    def terms(self, x, edge_index, seg, num_subgraphs, g_out, params) -> list[tuple]:
        """Per-sub-graph gradient terms of ``params``: ``(param, kind, seg, a, g)`` as
        ``grad_rules.terms`` gives them (``"outer"``, ``"rows"``) for the parameters the
        op-level rules cover, then ``(param, "dense", None, None, (B, numel))`` from
        :meth:`gradients` for the others (module docstring)."""
        B = int(num_subgraphs)
        out: list[tuple] = []
        rest = list(params)
        cand = [p for p in params if id(p) not in self._no_ops] if self.ops and B else []
        if cand:
            check = any(id(p) not in self._op_checked for p in cand)
            out, left = _op_terms(self.model, x, edge_index, seg, g_out, cand, check)
            if check:  # decided once: a parameter the rules did not cover re-runs per sub-graph from now on
                covered = [p for p in cand if not any(p is q for q in left)]
                wrong = _misattributed(self.model, x, edge_index, seg, B, g_out, covered) if covered else set()
                if wrong:  # terms that add up but split wrongly across sub-graphs: the re-run for these
                    out = [t for t in out if id(t[0]) not in wrong]
                    left = list(left) + [p for p in covered if id(p) in wrong]
                self._op_checked |= {id(p) for p in cand}
                self._no_ops |= {id(p) for p in left}
            rest = [p for p in params if id(p) in self._no_ops or any(p is q for q in left)]
        if rest:
            dense = self.gradients(x, edge_index, seg, B, g_out, rest)
            out += [(p, "dense", None, None, d.reshape(d.shape[0], -1)) for p, d in zip(rest, dense)]
        return out

    @property
    def op_parameters(self) -> list[str]:
        """Names of the parameters the op-level rules cover (checked on the first step)."""
        return [n for n, p in self.model.named_parameters() if id(p) in self._op_checked and id(p) not in self._no_ops]

    def gradients(self, x, edge_index, seg, num_subgraphs, g_out, params) -> list[torch.Tensor]:
        """Per-sub-graph gradients of ``params`` (see :func:`per_subgraph_gradients`); the
        tensors returned are overwritten by the next call."""
        B, N = int(num_subgraphs), seg.numel()
        grads = [self._zeros(p, B) for p in params]
        if B == 0 or not params:
            return grads
        if g_out.shape[0] != N:
            raise ValueError(f"the general path needs node-level outputs (one row per batch node, {N}); the model "
                             f"returned {g_out.shape[0]} rows")
        layout = _layout(seg, edge_index, B)
        names = [self.names[id(p)] for p in params]
        if self.mode == "vmap":
            _vmapped(self.model, x, layout, g_out, names, params, grads, B)
            return grads
        if self.mode == "loop":
            _loop(self.model, x, layout, g_out, params, grads, range(B))
            return grads
        way = self.state
        timing = way == "timing"
        if timing:  # vmap first, then the loop
            way = "vmap" if "vmap" not in self._seconds else "loop"
        t0 = time.perf_counter()
        if way in ("untried", "vmap"):
            try:
                _vmapped(self.model, x, layout, g_out, names, params, grads, B)
            except Exception as e:  # noqa: BLE001 - any failure of vmap: the loop is always right
                self._keep_loop(f"{type(e).__name__}: {str(e).splitlines()[0][:200]}")
                for acc in grads:
                    acc.zero_()
                way = "loop"
            else:
                if self.state == "untried":
                    self._verify(x, layout, g_out, params, grads, B)
                    if self.state == "loop":
                        for acc in grads:
                            acc.zero_()
                        way = "loop"
        if way == "loop":
            t0 = time.perf_counter()
            _loop(self.model, x, layout, g_out, params, grads, range(B))
        if timing and self.state == "timing":
            self._seconds[way] = (time.perf_counter() - t0) / B
            if len(self._seconds) == 2:
                t_v, t_l = self._seconds["vmap"], self._seconds["loop"]
                if t_v <= t_l:
                    self.state = "vmap"
                else:
                    self._keep_loop(f"the loop is faster for this model here ({t_l * 1e3:.3g} ms against "
                                    f"{t_v * 1e3:.3g} ms per sub-graph)")
        return grads

    def _keep_loop(self, why: str) -> None:
        self.state, self.why_loop = "loop", why

    def _verify(self, x, layout, g_out, params, grads, B) -> None:
        """Compare vmap with the loop on four sub-graphs; the loop run twice tells whether the
        model is deterministic (else there is nothing to compare).  Then: timing."""
        subs = [b for b in range(B) if layout[1][b + 1] > layout[1][b]][:4]
        ref = [torch.zeros_like(g) for g in grads]
        again = [torch.zeros_like(g) for g in grads]
        _loop(self.model, x, layout, g_out, params, ref, subs)
        _loop(self.model, x, layout, g_out, params, again, subs)
        self.state = "timing"
        if all(torch.equal(r[subs], a[subs]) for r, a in zip(ref, again)):  # deterministic: compare
            # each sub-graph's whole gradient (what is clipped): a parameter whose gradient is
            # ~0 (one-node sub-graphs' attention) may differ in its rounding only
            d = sum((g[subs] - r[subs]).double().flatten(1).pow(2).sum(1) for r, g in zip(ref, grads)).sqrt()
            s = sum(r[subs].double().flatten(1).pow(2).sum(1) for r in ref).sqrt()
            if bool((d > 1e-4 * s + 1e-12).any()):
                self._keep_loop(f"vmap differs from the loop by {float((d / s.clamp_min(1e-300)).max()):.1e} "
                                "(relative)")
                warnings.warn(f"general path: vmap over padded sub-graphs gives other gradients than the loop "
                              f"for {type(self.model).__name__} ({self.why_loop}); using the loop", stacklevel=4)


def per_subgraph_gradients(model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, seg: torch.Tensor,
                           num_subgraphs: int, g_out: torch.Tensor,
                           params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """Per-sub-graph gradients of ``params`` by re-running ``model`` on each sub-graph (vmap
    by size bucket when the model allows it, else a loop; module docstring).

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(x_b, edge_index_b)``, in its current train/eval mode; its hooks
        must not record (the caller's job).
    x : torch.Tensor
        ``(N, ...)`` node features of the batch.
    edge_index : torch.Tensor
        ``(2, E)`` edges of the batch, none across sub-graphs.
    seg : torch.Tensor
        ``(N,)`` sub-graph id of every node.
    num_subgraphs : int
        ``B``.
    g_out : torch.Tensor
        ``(N, ...)`` gradient of the loss at the model's output in the batch's backward.
    params : list of torch.nn.Parameter
        The parameters to differentiate (parameters of ``model``).

    Returns
    -------
    list of torch.Tensor
        ``(B, *p.shape)`` per parameter (zeros for a sub-graph whose output does not reach it).

    Raises
    ------
    ValueError
        When an edge joins two sub-graphs, or the model's output is not node-level.
    """
    return GeneralPath(model).gradients(x, edge_index, seg, num_subgraphs, g_out, params)
