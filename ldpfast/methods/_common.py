"""Shared pieces of the method pipelines: seeds, device placement, splits, backbones, the
report every ``fit`` returns, accuracy summaries, and the deprecation of moved names.

The reproduction harness (paper numbers, grids, tables, plots, result files) lives in
:mod:`ldpfast.reproduce`; nothing here imports it.
"""
from __future__ import annotations

import contextlib
import copy
import math
import statistics
import warnings
from dataclasses import asdict, dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .. import _backend
from .._checks import check_real

BACKBONES = ("gcn", "sage", "gat")


def sub_seed(seed: int, *key: int) -> int:
    """A 63-bit seed for one part of a pipeline, derived from ``(seed, *key)`` (NumPy
    SeedSequence): the split, each randomiser and the model each get their own."""
    s = np.random.SeedSequence([int(seed) & (2**64 - 1), *[int(k) for k in key]])
    a, b = s.generate_state(2, dtype=np.uint32)
    return int((int(a) << 31) ^ int(b)) & (2**63 - 1)


# --- device placement of the pipelines (fit(..., device=)) --------------------------------------
DEVICE_HELP = ("device : str or torch.device, optional\n"
               "    Where the model, the data and every randomisation run: 'cpu', 'cuda' or\n"
               "    'cuda:N'.  Default (None): the device of ``data``.  CUDA needs the cuda backend\n"
               "    (CuPy and a GPU), else :class:`ldpfast.BackendUnavailable` with the reason.")


def _data_tensors(data) -> dict:
    """``{name: tensor}`` of the tensors a pipeline reads from a PyG Data (and ``data.csr``)."""
    from ..graph import CSR

    out = {}
    for key in ("x", "y", "edge_index", "edge_weight"):
        t = getattr(data, key, None)
        if isinstance(t, torch.Tensor):
            out[f"data.{key}"] = t
    c = data.__dict__.get("csr") if hasattr(data, "__dict__") else None
    if not isinstance(c, CSR):
        try:
            c = data["csr"] if "csr" in data else None  # noqa: SIM401 - Data.csr() shadows it
        except Exception:  # noqa: BLE001 - not a PyG Data
            c = None
    if isinstance(c, CSR):
        out["data.csr.rowptr"], out["data.csr.col"] = c.rowptr, c.col
    return out


def resolve_device(device, tensors: dict) -> tuple[str, torch.device]:
    """``(kind, torch_device)`` of a pipeline run: ``kind`` ('cpu' or 'cuda') picks the
    kernels, ``torch_device`` places tensors and the model.

    ``device`` None: the device of ``tensors`` (``{name: tensor}``; two different devices
    raise ValueError naming both tensors).  Else a str / torch.device of type cpu or cuda
    (ValueError / TypeError otherwise).  CUDA raises :class:`ldpfast.BackendUnavailable`
    with the reason when the cuda backend cannot run here.
    """
    ts = {k: t for k, t in tensors.items() if isinstance(t, torch.Tensor)}
    if device is None:
        first = None
        for name, t in ts.items():
            if first is None:
                first = (name, t)
            elif t.device != first[1].device:
                raise ValueError(f"data: {name} is on {t.device} but {first[0]} is on "
                                 f"{first[1].device}; move all of data to one device "
                                 "(data.to(...)) or pass device=")
        kinds = {_backend.device_of(t) for t in ts.values()}
        kind = "cuda" if "cuda" in kinds else "cpu"
        dev = first[1].device if first is not None else torch.device("cpu")
    else:
        if isinstance(device, str):
            try:
                dev = torch.device(device)
            except RuntimeError as exc:
                raise ValueError(f"device: expected 'cpu', 'cuda', 'cuda:N' or a torch.device, "
                                 f"got {device!r}") from exc
        elif isinstance(device, torch.device):
            dev = device
        else:
            raise TypeError(f"device: expected a str or torch.device, got {type(device).__name__}")
        if dev.type not in ("cpu", "cuda"):
            raise ValueError(f"device: expected a cpu or cuda device, got {str(dev)!r}")
        kind = dev.type
    if kind == "cuda":
        _backend.get("cuda", "cuda")  # BackendUnavailable with the reason
        if dev.type == "cuda":
            count = torch.cuda.device_count()
            index = torch.cuda.current_device() if dev.index is None else dev.index
            if not 0 <= index < count:
                raise ValueError(f"device: {str(dev)!r} does not exist; this machine has {count} "
                                 f"CUDA device(s): cuda:0 .. cuda:{count - 1}")
            dev = torch.device("cuda", index)
    return kind, dev


# The Raises entries every pipeline's fit(device=) shares (resolve_device, data_to, oom_guard).
_DEVICE_RAISES = """\
    ValueError, TypeError
        Bad arguments (named); ``data`` tensors on two devices (both named) with
        ``device=None``.
    ldpfast.BackendUnavailable
        ``device`` is CUDA and the cuda backend {unavailable}.
    ldpfast.DeviceOutOfMemory
        A CUDA allocation failed (the size asked for is given); ``data`` is unchanged."""
_DEVICE_RAISES_MARK = "    {device_raises}"


def device_raises(unavailable: str = "cannot run here (the reason is given)"):
    """Decorator for a pipeline's ``fit``: replaces the line ``{device_raises}`` of its
    docstring's Raises section with the entries of the device handling (bad arguments and
    split devices, :class:`ldpfast.BackendUnavailable`, :class:`ldpfast.DeviceOutOfMemory`).

    ``unavailable`` ends the BackendUnavailable sentence ("``device`` is CUDA and the cuda
    backend ...").  Raises RuntimeError at import when the docstring lacks the line (kept
    docstrings only: under ``python -OO`` there is none and ``fn`` is returned as is).
    """
    def deco(fn):
        if fn.__doc__ is not None:
            if _DEVICE_RAISES_MARK + "\n" not in fn.__doc__:
                raise RuntimeError(f"{fn.__qualname__}: docstring has no {_DEVICE_RAISES_MARK.strip()} line")
            fn.__doc__ = fn.__doc__.replace(_DEVICE_RAISES_MARK, _DEVICE_RAISES.format(unavailable=unavailable))
        return fn
    return deco


def with_edge_index(data):
    """``data`` itself, or, when it holds PyG's ``adj_t`` (``T.ToSparseTensor()``) and no
    ``edge_index``, a shallow copy in which ``adj_t`` is replaced by the ``edge_index`` it
    stands for (``edge_weight`` too when its values are not all 1): the pipelines read
    ``edge_index``.  ``data`` is not modified."""
    from ..graph import _edge_index_of_adj_t

    try:
        has_adj = getattr(data, "edge_index", None) is None and "adj_t" in data
    except TypeError:  # not a PyG Data
        return data
    if not has_adj:
        return data
    ei, w = _edge_index_of_adj_t(data.adj_t, int(data.num_nodes))
    out = copy.copy(data)
    del out.adj_t
    out.edge_index = ei
    if w is not None and "edge_weight" not in data:
        out.edge_weight = w
    return out


def data_to(data, dev: torch.device):
    """``data`` with every tensor (and ``data.csr``) on ``dev``: ``data`` itself when all
    are there already, else a shallow copy (``data`` is not modified).  Each copy runs under
    :func:`ldpfast._backend.oom_guard`."""
    from ..graph import CSR

    moves = {}
    for key, value in data.items() if hasattr(data, "items") else ():
        if isinstance(value, torch.Tensor) and value.device != dev:
            moves[key] = _backend.to_device(value, dev, f"data.{key}")
        elif isinstance(value, CSR) and value.rowptr.device != dev:
            moves[key] = CSR(*(None if t is None else _backend.to_device(t, dev, f"data.{key}.{f}")
                               for f, t in (("rowptr", value.rowptr), ("col", value.col))),
                             value.num_nodes,
                             None if value.value is None else
                             _backend.to_device(value.value, dev, f"data.{key}.value"))
    if not moves:
        return data
    out = copy.copy(data)
    for key, value in moves.items():
        out[key] = value
        if key in out.__dict__:  # e.g. data.csr, kept in __dict__ to shadow Data.csr()
            out.__dict__[key] = value
    # cached CSRs of the old tensors (graph.csr_of, sampling.neighbour_csr) are not carried over
    for key in ("_ldpfast_csr", "_ldpfast_nb_csr"):
        out.__dict__.pop(key, None)
    return out


def random_split(n: int, seed: int, train: float = 0.5, val: float = 0.25):
    """Random train/val/test node masks (LPGNN and RGNN use 50/25/25)."""
    check_real("train", train, 0.0, 1.0)
    check_real("val", val, 0.0, 1.0 - train)
    g = torch.Generator().manual_seed(int(seed))
    perm = torch.randperm(n, generator=g)
    a, b = round(train * n), round((train + val) * n)
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    masks[0][perm[:a]] = True
    masks[1][perm[a:b]] = True
    masks[2][perm[b:]] = True
    return masks


def labelled_split(y: torch.Tensor, seed: int, train: float = 0.5, val: float = 0.25):
    """:func:`random_split` over the labelled nodes only: PyG marks a node without a label by
    ``y = -1``, and such a node is in no mask (never trained on, validated or tested).  With
    every node labelled it is ``random_split(n, seed, train, val)``, mask for mask.  Returns
    CPU bool masks."""
    n = y.shape[0]
    lab = y >= 0
    if bool(lab.all()):  # one flag read back; the labels stay where they are
        return random_split(n, seed, train, val)
    bad = y < -1
    if bool(bad.any()):
        i = int(torch.nonzero(bad)[0, 0])
        raise ValueError(f"y: label {int(y[i])} of node {i}: expected a class in [0, num_classes) or -1 (unlabelled)")
    idx = torch.nonzero(lab.cpu()).flatten()  # the split is drawn on the CPU
    if not idx.numel():
        raise ValueError("y: every label is -1 (unlabelled); the split needs labelled nodes")
    masks = [torch.zeros(n, dtype=torch.bool) for _ in range(3)]
    for m, sub in zip(masks, random_split(idx.numel(), seed, train, val)):
        m[idx[sub]] = True
    return masks


class Backbone(torch.nn.Module):
    """Two graph convolutions (GCN / GraphSAGE / GAT with 4 heads), activation, dropout.

    LPGNN section 4.1 and RGNN section V use 2 layers with 16 hidden units (LPGNN: SeLU;
    RGNN: ReLU).  Returns logits.
    """

    def __init__(self, kind: str, d_in: int, d_hidden: int, d_out: int, dropout: float,
                 act: str = "selu"):
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv, SAGEConv

        if kind not in BACKBONES:
            raise ValueError(f"model: expected one of {BACKBONES}, got {kind!r}")
        if kind == "gcn":
            self.conv1, self.conv2 = GCNConv(d_in, d_hidden), GCNConv(d_hidden, d_out)
        elif kind == "sage":
            self.conv1, self.conv2 = SAGEConv(d_in, d_hidden), SAGEConv(d_hidden, d_out)
        else:
            self.conv1 = GATConv(d_in, d_hidden, heads=4)
            self.conv2 = GATConv(4 * d_hidden, d_out, heads=1)
        self.dropout = float(dropout)
        self.act = {"selu": F.selu, "relu": F.relu}[act]

    def forward(self, x, edge_index):
        return self.head(self.conv1(x, edge_index), edge_index)

    def head(self, z1, edge_index):
        """Everything after the first convolution, given its output ``z1`` (lets a caller
        compute the first layer in a cheaper but equal form, as LPGNN's factored input)."""
        x = F.dropout(self.act(z1), p=self.dropout, training=self.training)
        return self.conv2(x, edge_index)


@contextlib.contextmanager
def quiet_sparse_csr():
    """Silence torch's "sparse CSR support is in beta" notice around CSR construction."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def graph_input(edge_index: torch.Tensor, num_nodes: int, model: str):
    """What to pass a :class:`Backbone` as its graph: for GraphSAGE a CSR adjacency (PyG then
    aggregates with one sparse matmul, same result as gather/scatter on ``edge_index`` and
    ~3x faster on wide features); ``edge_index`` for the other models."""
    if model != "sage":
        return edge_index
    from torch_geometric.utils import to_torch_csr_tensor

    with quiet_sparse_csr():
        return to_torch_csr_tensor(edge_index.flip(0), size=(num_nodes, num_nodes))


def mean_std(values: list[float]) -> dict:
    """Mean, standard deviation and count of a list of accuracies (in %)."""
    vals = [100.0 * v for v in values]
    return {"mean": statistics.fmean(vals) if vals else math.nan,
            "std": statistics.stdev(vals) if len(vals) > 1 else 0.0, "runs": len(vals),
            "values": vals}


def fmt_eps(e: float) -> str:
    """A budget as text: ``"inf"`` or the shortest ``%g`` form (``1``, ``0.5``)."""
    return "inf" if math.isinf(e) else f"{e:g}"


# --- the report of a fit ------------------------------------------------------------------------
@dataclass(kw_only=True)
class FitReport:
    """What a pipeline's ``fit`` returns: the fields every method has.

    Each method adds its own fields in a subclass (:class:`ldpfast.methods.rgnn.RGNNReport`,
    :class:`ldpfast.methods.lpgnn.LPGNNReport`, :class:`ldpfast.methods.dprr.DPRRReport`).
    Keyword-only, so a subclass may add fields without defaults.

    Attributes
    ----------
    accuracy : float or dict
        Test accuracy: a fraction in [0, 1] for one run, or the :func:`mean_std` summary
        (in %) over several runs.
    privacy : dict
        The budget spent (the ledger's entries and the guarantee as text); never the seed.
    settings : dict
        Every setting the run used, defaults included; never the seed.
    timings : dict
        Seconds per phase (``total_s`` and method-specific parts).
    """

    accuracy: float | dict
    privacy: dict
    settings: dict
    timings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        """The report as plain dicts and lists (JSON-ready with ``default=str``)."""
        return asdict(self)
