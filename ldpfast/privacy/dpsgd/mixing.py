"""Guards against models that let one sub-graph change another's output.

Per-sub-graph clipping (:mod:`.clipping`) bounds a node's influence by ``C`` per sub-graph
term only if every sub-graph's loss depends on that sub-graph alone: removing the sub-graph
of a central node must leave the other sub-graphs' gradients unchanged (Xiang, Wang & Wang, IEEE S&P 2024, Theorem 2,
case 1, sensitivity ``C``).  A layer that computes anything over the whole block-diagonal
batch breaks this silently: PyG's ``PairNorm`` / ``MeanSubtractionNorm`` /
``LayerNorm(mode="graph")`` / ``GraphNorm`` called as ``model(x, edge_index)`` (no ``batch``
vector, so the "graph" is the whole batch), BatchNorm in training mode, attention over all
nodes, global pooling.  On Cora, removing one central node then moved the clipped gradient
sum by 14-18 ``C`` while the accountant assumes ``C``.

Two guards, both used by :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule`:

* :data:`MIXING_LAYERS`, a deny-list checked when the wrapper is built
  (:func:`check_no_mixing_layers`);
* :func:`check_subgraph_independence`, a runtime check on the first training batch that
  catches what the list does not know (a custom ``x - x.mean(0)``, a functional global
  pooling): the forward is rerun without the largest sub-graph and with that sub-graph's
  features perturbed, and every other sub-graph's outputs must be unchanged.
"""
from __future__ import annotations

import importlib
import math
from collections.abc import Callable

import torch

__all__ = ["MIXING_LAYERS", "SubgraphMixingError", "check_no_mixing_layers", "check_subgraph_independence",
           "mixing_reason"]

_FIX = ("remove it, or replace it with a per-node layer (torch.nn.LayerNorm over the features, "
        "torch_geometric.nn.LayerNorm(mode='node'), or no normalisation)")

MIXING_LAYERS: tuple[tuple[str, str], ...] = (
    ("torch_geometric.nn.PairNorm", "subtracts the mean over all nodes of the batch"),
    ("torch_geometric.nn.MeanSubtractionNorm", "subtracts the mean over all nodes of the batch"),
    ("torch_geometric.nn.GraphNorm", "normalises with the mean and variance over all nodes of the batch"),
    ("torch_geometric.nn.GraphSizeNorm", "divides by the square root of the batch's node count"),
    ("torch_geometric.nn.DiffGroupNorm", "batch-normalises over all nodes of the batch"),
    ("torch_geometric.nn.BatchNorm", "normalises with the batch's statistics in training mode"),
    ("torch_geometric.nn.HeteroBatchNorm", "normalises with the batch's statistics in training mode"),
    ("torch_geometric.nn.InstanceNorm", "normalises over all nodes of the batch (one instance, no batch vector)"),
    ("torch_geometric.nn.LayerNorm", "with mode='graph' normalises over all nodes of the batch"),
    ("torch_geometric.nn.TopKPooling", "selects nodes by a ranking over the whole batch"),
    ("torch_geometric.nn.SAGPooling", "selects nodes by a ranking over the whole batch"),
    ("torch_geometric.nn.ASAPooling", "selects nodes by a ranking over the whole batch"),
    ("torch_geometric.nn.PANPooling", "selects nodes by a ranking over the whole batch"),
    ("torch_geometric.nn.EdgePooling", "contracts edges chosen over the whole batch"),
    ("torch_geometric.nn.MemPooling", "pools all nodes of the batch"),
    ("torch_geometric.nn.GPSConv", "attends over all nodes of the batch"),
    ("torch.nn.modules.batchnorm._BatchNorm", ("normalises with the batch's statistics in training mode (which "
                                              "training turns on)")),
    ("torch.nn.modules.instancenorm._InstanceNorm", "normalises over all nodes of the batch"),
    ("torch.nn.MultiheadAttention", "attends over all nodes of the batch"),
    ("torch.nn.TransformerEncoderLayer", "attends over all nodes of the batch"),
    ("torch.nn.TransformerDecoderLayer", "attends over all nodes of the batch"),
)
"""``(class path, why it mixes sub-graphs)`` of the layers refused by
:func:`check_no_mixing_layers` (subclasses included; PyG's ``LayerNorm`` only with
``mode="graph"``).  A class missing from the installed PyG version is skipped."""

# Only some instances of a listed class mix: the rest act per node.
_ONLY_IF: dict[str, Callable[[torch.nn.Module], bool]] = {
    "torch_geometric.nn.LayerNorm": lambda m: getattr(m, "mode", "graph") == "graph",
}


class SubgraphMixingError(TypeError):
    """The model lets one sub-graph of a batch change another sub-graph's output, so
    per-sub-graph clipping would not bound a node's influence by ``C``."""


def _resolve(path: str) -> type | None:
    mod, _, name = path.rpartition(".")
    try:
        return getattr(importlib.import_module(mod), name, None)
    except ImportError:  # optional PyG pieces (e.g. a missing extension)
        return None


_RESOLVED: list[tuple[str, type, str]] | None = None


def _deny_list() -> list[tuple[str, type, str]]:
    global _RESOLVED
    if _RESOLVED is None:
        _RESOLVED = [(p, t, why) for p, why in MIXING_LAYERS if (t := _resolve(p)) is not None]
    return _RESOLVED


def _label(name: str, kind: str) -> str:
    """How an error names a module: its qualified name in the model and its type."""
    return f"module {name!r} ({kind})" if name else f"the model ({kind})"


# what ldpfast.privacy.fix swaps for a per-node equivalent
_FIXABLE = ("torch_geometric.nn.BatchNorm", "torch.nn.modules.batchnorm._BatchNorm", "torch_geometric.nn.LayerNorm")


def mixing_reason(module: torch.nn.Module) -> tuple[str, bool] | None:
    """``(why module mixes sub-graphs, whether ldpfast.privacy.fix swaps it)`` for a layer of
    :data:`MIXING_LAYERS`, else ``None``."""
    for path, cls, why in _deny_list():
        if isinstance(module, cls) and _ONLY_IF.get(path, lambda _m: True)(module):
            return why, path in _FIXABLE
    return None


def check_no_mixing_layers(model: torch.nn.Module) -> None:
    """Refuse a model holding a layer of :data:`MIXING_LAYERS`.

    Raises
    ------
    SubgraphMixingError
        Naming the first such layer (qualified module name and type), why it mixes
        sub-graphs, and what to do.
    """
    for name, m in model.named_modules():
        found = mixing_reason(m)
        if found is not None:
            fix = " (ldpfast.privacy.fix(model) does this swap)" if found[1] else ""
            raise SubgraphMixingError(
                f"{_label(name, type(m).__name__)}: {found[0]}, so one node's sub-graph would change the "
                "gradients of other sub-graphs and per-sub-graph clipping would not bound its influence by "
                f"C, as the accountant assumes; {_FIX}{fix}")


# ----------------------------------------------------------------------------- runtime check
class _Layout:
    """Which rows of a node- (N), sub-graph- (B) or edge-level (E) tensor belong to the
    sub-graphs other than ``b0``."""

    def __init__(self, seg: torch.Tensor, edge_index: torch.Tensor, num_subgraphs: int, b0: int):
        self.node_keep = seg != b0
        self.sub_keep = torch.arange(num_subgraphs, device=seg.device) != b0
        self.edge_keep = self.node_keep[edge_index[0]] & self.node_keep[edge_index[1]]

    def others(self, base: torch.Tensor, other: torch.Tensor, removed: bool):
        """``(base rows, other rows)`` of the other sub-graphs, or ``None`` when ``other``
        cannot be matched to ``base`` (then it counts as changed)."""
        if base.dim():
            for keep in (self.node_keep, self.sub_keep, self.edge_keep):
                if base.shape[0] != keep.numel():
                    continue
                if removed:
                    want = (int(keep.sum()),) + tuple(base.shape[1:])
                    return (base[keep], other) if tuple(other.shape) == want else None
                return (base[keep], other[keep]) if other.shape == base.shape else None
        return (base, other) if other.shape == base.shape else None


def _float_tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj.detach()] if obj.is_floating_point() else []
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _float_tensors(o)]
    if isinstance(obj, dict):
        return [t for o in obj.values() for t in _float_tensors(o)]
    return []


def _close_finite(a: torch.Tensor, b: torch.Tensor, rtol: float, atol: float) -> bool | None:
    """The comparison of :func:`_changed` in the tensors' own precision (float32 at least), in
    four passes and one temporary: ``True`` when every difference is within tolerance and
    nothing is NaN or infinite, else ``None`` (then the float64 comparison, which handles NaN
    and infinities, decides).  A per-module check of a large batch spent most of its time in
    float64 copies otherwise."""
    if not (a.is_floating_point() and b.is_floating_point()):
        return None
    dt = torch.promote_types(torch.promote_types(a.dtype, b.dtype), torch.float32)
    a, b = a.to(dt), b.to(dt)
    d = float(torch.sub(a, b).abs_().max())
    lo_a, hi_a = torch.aminmax(a)
    lo_b, hi_b = torch.aminmax(b)
    scale = max(-float(lo_a), float(hi_a), -float(lo_b), float(hi_b))  # max |value|
    if not (math.isfinite(d) and math.isfinite(scale)):
        return None
    # float32 rounding of the difference is ~6e-8 of it: far inside rtol; a margin keeps a
    # borderline case (within 1e-6 of the bound) on the float64 comparison
    bound = atol + rtol * scale
    if d <= bound * (1 - 1e-6):
        return True
    return None


def _changed(base: list[torch.Tensor], other: list[torch.Tensor], layout: _Layout, removed: bool,
             rtol: float, atol: float) -> bool:
    if len(base) != len(other):
        return True
    for a, b in zip(base, other):
        pair = layout.others(a, b, removed)
        if pair is None:
            return True
        a, b = pair
        if a.numel() == 0:
            continue
        if _close_finite(a, b, rtol, atol) is True:
            continue
        a, b = a.double(), b.double()
        both_nan = torch.isnan(a) & torch.isnan(b)
        d = torch.where(both_nan, torch.zeros_like(a), (a - b).abs())
        scale = torch.nan_to_num(torch.maximum(a.abs(), b.abs()), nan=0.0, posinf=0.0).max()
        if not bool(d.max() <= atol + rtol * scale):  # NaN in d counts as changed
            return True
    return False


class _Recorder:
    """Forward hooks on every module: the first pass records each call's float inputs and
    outputs; a later pass finds the module that first changed the other sub-graphs' values:
    the first call whose outputs for them differ or, when its inputs already differed (the
    change came from code between modules), the module whose forward made that call."""

    def __init__(self, model: torch.nn.Module):
        self.model = model
        self.names = {m: n for n, m in model.named_modules()}
        self.calls: list[tuple[str, str, list[torch.Tensor], list[torch.Tensor]]] = []
        self.first: tuple[str, str] | None = None

    def _id(self, module) -> tuple[str, str]:
        return self.names[module], type(module).__name__

    def run(self, x, edge_index, compare: tuple[_Layout, bool, float, float] | None) -> list[torch.Tensor]:
        i = 0
        stack: list[torch.nn.Module] = []  # modules whose forward is running
        if compare is None:
            self.calls = []
        self.first = None

        def pre_hook(module, inputs):
            stack.append(module)

        def hook(module, inputs, output):
            nonlocal i
            stack.pop()
            here = self._id(module)
            ins, outs = _float_tensors(inputs), _float_tensors(output)
            if compare is None:
                self.calls.append((*here, ins, outs))
            elif self.first is None:
                if i >= len(self.calls) or self.calls[i][:2] != here:  # the control flow changed
                    self.first = here
                elif _changed(self.calls[i][3], outs, *compare):
                    before = stack and _changed(self.calls[i][2], ins, *compare)
                    self.first = self._id(stack[-1]) if before else here
            i += 1

        handles = [h for m in self.model.modules()
                   for h in (m.register_forward_pre_hook(pre_hook), m.register_forward_hook(hook))]
        try:
            return _float_tensors(self.model(x, edge_index))
        finally:
            for h in handles:
                h.remove()


def check_subgraph_independence(model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor,
                                seg: torch.Tensor, num_subgraphs: int, *, rtol: float = 1e-4,
                                atol: float = 1e-6) -> None:
    """Check that ``model(x, edge_index)`` computes every sub-graph's outputs from that
    sub-graph alone, on one block-diagonal batch.

    The largest sub-graph ``b0`` is (1) given large random features, in the model's current
    train/eval mode, and (2) removed from the batch, in eval mode (removal changes the
    shapes, hence the dropout masks of the others); each time the outputs of every other
    sub-graph (rows of node-, sub-graph- or edge-level outputs) must equal those of the
    unchanged batch in the same mode, to ``atol + rtol * max|output|``.  Four forwards
    without autograd, each from the RNG state (CPU and the batch's CUDA device) found on
    entry, which is restored on exit, as are the parameters, buffers and train/eval flags:
    training is unaffected.

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(x, edge_index)``.
    x : torch.Tensor
        ``(N, d)`` node features; integer features are only checked by removal.
    edge_index : torch.Tensor
        ``(2, E)`` edges, none across sub-graphs.
    seg : torch.Tensor
        ``(N,)`` sub-graph id of every node.
    num_subgraphs : int
        ``B``; with fewer than 2 sub-graphs there is nothing to compare.
    rtol, atol : float
        Tolerance of the comparison (float summation order may change with the batch).

    Raises
    ------
    SubgraphMixingError
        Naming the first module (in call order; the model itself when the mixing is in its
        own forward) whose outputs for the other sub-graphs changed.
    """
    B = int(num_subgraphs)
    if B < 2 or seg.numel() == 0:
        return
    b0 = int(torch.bincount(seg, minlength=B).argmax())
    layout = _Layout(seg, edge_index, B, b0)
    keep = layout.node_keep
    new_id = torch.cumsum(keep.long(), 0) - 1
    # (what, eval mode, removed, x, edge_index)
    runs = [("removing sub-graph", True, True, x[keep], new_id[edge_index[:, layout.edge_keep]])]
    if x.is_floating_point() and x.numel():
        g = torch.Generator().manual_seed(0x5B6)  # a local generator: the global RNG is untouched
        z = torch.randn(int((~keep).sum()), *x.shape[1:], generator=g).to(device=x.device, dtype=x.dtype)
        x_pert = x.clone()
        x_pert[~keep] = x[~keep] + 10.0 * (1.0 + x.abs().max()) * z
        runs.insert(0, ("perturbing the features of sub-graph", False, False, x_pert, edge_index))

    rec = _Recorder(model)
    state = [t.detach().clone() for t in (*model.parameters(), *model.buffers())]
    modes = {m: m.training for m in model.modules()}
    cuda = [x.device.index if x.device.index is not None else torch.cuda.current_device()] if x.is_cuda else []
    with torch.random.fork_rng(devices=cuda), torch.no_grad():
        rng = torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in cuda]

        def forward(x_, ei_, compare=None):
            torch.set_rng_state(rng[0])  # the same dropout masks in every pass of one shape
            for d, s in zip(cuda, rng[1]):
                torch.cuda.set_rng_state(s, d)
            return rec.run(x_, ei_, compare)

        try:
            for what, in_eval, removed, x2, ei2 in runs:
                if in_eval:
                    model.eval()
                base = forward(x, edge_index)
                if _changed(base, forward(x2, ei2, (layout, removed, rtol, atol)), layout, removed, rtol, atol):
                    name, kind = rec.first or ("", type(model).__name__)
                    if name:
                        where, fix = "", _FIX
                    else:
                        where = (" in its own forward, outside its sub-modules (e.g. a functional global pooling "
                                 "or x - x.mean(0)),")
                        fix = "compute nothing over all nodes of the batch in forward"
                    raise SubgraphMixingError(
                        f"{_label(name, kind)}{where} lets one sub-graph change the others: {what} {b0} of {B} "
                        f"({'eval' if in_eval else 'current'} mode) changed the outputs of the other sub-graphs. "
                        "Per-sub-graph clipping would then not bound one node's influence by C, as the accountant "
                        f"assumes; {fix}, so that every sub-graph's output depends on that sub-graph alone "
                        "(SubgraphGradSampleModule(..., check_independence=False) skips this check: only for a "
                        "model known to be per-node)")
        finally:
            for t, s in zip((*model.parameters(), *model.buffers()), state):
                t.copy_(s)
            for m, flag in modes.items():
                m.training = flag
