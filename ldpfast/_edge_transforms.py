"""PyG transforms for edge LDP: :class:`DPRR`, :class:`RREdges`, :class:`LocalLap`.

Thin wrappers around :mod:`ldpfast.mechanisms.edges` (paper: Hidano & Murakami, DPRR).
Each returns a *copy* of the input ``Data`` whose ``edge_index`` is the randomised graph
(the input is never modified), drops per-edge attributes that no longer match
(``edge_attr``, ``edge_weight``), and records the privacy cost: the returned object's
``ldp_ledger`` is the input's :class:`~ldpfast.privacy.budget.Ledger` (``Ledger.of``) plus one
:class:`~ldpfast.privacy.budget.Spent` entry.  The full mechanism output
(:class:`~ldpfast.mechanisms.edges.EdgeLDPResult`) of the last call is kept on the
transform as ``last_result``.

Like the feature and label transforms (:class:`ldpfast.transforms.ReportOnce`), each derives
the randomness of an input from its secret seed and the input's identity: re-applying it to
the same graph returns the same noisy graph, and two graphs never share degree noise or
edge draws.

CUDA graphs (an ``edge_index`` or stored ``csr`` on the GPU) stay on the device: the input
seed comes from the keyed fingerprint computed by the CUDA kernel, and the CSR is built and
checked with torch-native deterministic ops (:func:`_device_graph_csr`: a sorted
``edge_index`` becomes a CSR with ``searchsorted``, anything else goes through
:func:`ldpfast.graph.csr_of`'s device path; the range / order / self-loop / symmetry checks
are exact, by ``searchsorted`` of the reversed entries, where the C++ check hashes them).  The
randomisers themselves are ``ldpfast.mechanisms.edges``'s (CUDA kernels there), and the
output ``edge_index`` is expanded from the noisy CSR on the device.  Host syncs: the input
checks (one each) and sizes before allocations.
"""
from __future__ import annotations

import copy
from concurrent.futures import ThreadPoolExecutor

import torch

from . import _backend
from ._checks import check_eps
from .graph import CSR, INT32_MAX, csr_of
from .mechanisms import edges as _edges
from .privacy.budget import Ledger
from .privacy.report_once import IDENTITY_DEFAULT, whole_graph
from .transforms import ReportOnce

__all__ = ["DPRR", "LocalLap", "RREdges"]


def _public_of(data, public):
    if isinstance(public, str):
        if not hasattr(data, public):
            raise ValueError(f"public: the Data object has no attribute {public!r}")
        return getattr(data, public)
    return public


def _prepare(transform, data):
    """``(input seed, checked CSR)`` of ``data``.

    The seed needs the input's keyed fingerprint and the kernels need the seed, but building
    and checking the CSR does not: on the CPU the hash runs on a second thread meanwhile (the
    fingerprint and CSR kernels release the GIL).  Neither reads what the other writes (the
    CSR cache goes to ``data.__dict__["_ldpfast_csr"]``, which the fingerprint skips).  On
    CUDA both run in turn on the caller's stream, with torch-native CSR preparation
    (:func:`_device_graph_csr`).
    """
    whole_graph(data, type(transform).__name__)  # refuse sub-graphs before any work
    if _on_device(data):
        # CUDA: no second thread (torch's current stream is per thread, and the fingerprint
        # kernel must run on the caller's stream); the GPU overlaps the work anyway.
        seed = transform._input_seed(data)
        return seed, _device_graph_csr(data)
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(transform._input_seed, data)
        try:
            csr = _edges._graph_csr(data, transform.backend)
        finally:
            seed = fut.result()  # its errors (e.g. a missing identity attribute) come first, as before
    return seed, csr


# --- CUDA graphs: torch-native preparation ---------------------------------------------------
def _graph_tensors(data):
    csr = _edges._stored_csr(data)
    if csr is not None:
        rp, col = csr.rowptr, csr.col
        if isinstance(rp, torch.Tensor) and isinstance(col, torch.Tensor) and rp.device != col.device:
            raise ValueError(f"graph: data.csr.col is on {col.device} but data.csr.rowptr is on {rp.device}")
        return [rp, col]
    ei = getattr(data, "edge_index", None)
    return [ei] if isinstance(ei, torch.Tensor) else []


def _on_device(data) -> bool:
    """Whether the graph of ``data`` is on a CUDA device (decided by ``_backend.device_of``,
    which the routing tests patch)."""
    ts = _graph_tensors(data)
    return bool(ts) and _backend.device_of(*ts) == "cuda"


def _flags_value(bad_range, bad_order, loops, asym) -> int:
    """The ``edges_check_csr`` flags from four device booleans, in one host sync."""
    f = (bad_range.to(torch.int64) | (bad_order.to(torch.int64) << 1) | (loops.to(torch.int64) << 2)
         | ((asym & ~bad_range & ~bad_order).to(torch.int64) << 3))
    return int(f)


def _entries_flags(row, col, n: int) -> int:
    """Flags of the entries ``(row[k], col[k])`` listed in CSR order (1 range, 2 rows not
    strictly increasing, 4 self loops, 8 asymmetric), exactly: every reversed entry is
    looked up with ``searchsorted`` in the sorted keys ``row * n + col``."""
    if n > 3_037_000_499:  # row * n + col must fit in int64
        raise ValueError(f"graph: {n} nodes is more than the device checks support (3.0e9)")
    zero = torch.zeros((), dtype=torch.bool, device=col.device)
    if col.numel() == 0:
        return 0
    bad_range = ((col < 0) | (col >= n) | (row < 0) | (row >= n)).any()
    bad_order = ((row[1:] < row[:-1]) | ((row[1:] == row[:-1]) & (col[1:] <= col[:-1]))).any() \
        if col.numel() > 1 else zero
    key = row * n + col  # strictly increasing when the order and range are right
    loops = (row == col).any()
    rev = col * n + row
    pos = torch.searchsorted(key, rev).clamp_(max=key.numel() - 1)
    asym = (key[pos] != rev).any()
    return _flags_value(bad_range, bad_order, loops, asym)


def _raise_flags(flags: int) -> None:
    if flags:
        bad = [msg for bit, msg in _edges._FLAG_MSG.items() if flags & bit]
        raise ValueError("graph: the neighbour lists must form a simple undirected graph; found " + "; ".join(bad))


def _device_csr_arrays(csr: CSR) -> None:
    """The structural checks of ``mechanisms.edges._check_csr_arrays``, on any device."""
    rp, col = csr.rowptr, csr.col
    if not isinstance(rp, torch.Tensor) or not isinstance(col, torch.Tensor):
        raise TypeError("graph: CSR.rowptr and CSR.col must be torch tensors")
    if rp.device != col.device:
        raise ValueError(f"graph: CSR.col is on {col.device} but CSR.rowptr is on {rp.device}")
    if rp.dtype != torch.int64 or rp.dim() != 1 or rp.numel() != csr.num_nodes + 1:
        raise ValueError(f"graph: CSR.rowptr must be int64 of length num_nodes + 1 = {csr.num_nodes + 1}, "
                         f"got {rp.dtype} shape {tuple(rp.shape)}")
    if col.dtype not in (torch.int32, torch.int64) or col.dim() != 1:
        raise ValueError(f"graph: CSR.col must be a 1-D int32/int64 tensor, got {col.dtype} {tuple(col.shape)}")
    bad = (rp[0] != 0) | (rp[-1] != col.numel())
    if rp.numel() > 1:
        bad = bad | (rp[1:] < rp[:-1]).any()
    if bool(bad):  # one sync
        raise ValueError("graph: CSR.rowptr must start at 0, be non-decreasing and end at len(col)")


def _device_sorted_csr(ei: torch.Tensor, n: int) -> CSR | None:
    """The CSR of an ``edge_index`` sorted by (source, target), checked, on its device (the
    torch-native twin of ``mechanisms.edges._sorted_csr``); None when any check fails: the
    caller takes the general path, which names the problem."""
    if ei.layout != torch.strided or ei.dtype not in (torch.int32, torch.int64) or n < 0:
        return None
    ei = ei.detach()
    src, dst = ei[0].to(torch.int64), ei[1].to(torch.int64)
    if _entries_flags(src, dst, n):
        return None
    rowptr = torch.searchsorted(src, torch.arange(n + 1, dtype=torch.int64, device=src.device))
    return CSR(rowptr, dst.to(torch.int32 if n <= INT32_MAX else torch.int64), n)


def _device_graph_csr(data) -> CSR:
    """``mechanisms.edges._graph_csr`` for a graph on the device: the same checks and
    messages, with torch ops only (nothing reaches the host but the check results)."""
    stored = _edges._stored_csr(data)
    if stored is None:
        ei = data.edge_index
        if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2:
            raise ValueError("graph: data.edge_index must be a (2, E) tensor")
        if data.num_nodes is None:
            raise ValueError("graph: data.num_nodes is not set")
        n = int(data.num_nodes)
        csr = _device_sorted_csr(ei, n)
        if csr is not None:  # built and checked
            if n < 2:
                raise ValueError(f"graph: expected at least 2 nodes, got {n}")
            return csr
        csr = csr_of(data)  # ldpfast.graph's torch-native path: sorted, deduplicated, no self loops
        if csr.nnz != ei.size(1):  # to_csr dropped self loops or repeats: say which
            if bool((ei[0] == ei[1]).any()):
                raise ValueError("graph: data.edge_index has self loops (a_ii must be 0); remove them first, "
                                 "e.g. torch_geometric.utils.remove_self_loops")
            raise ValueError(f"graph: data.edge_index has duplicate edges ({ei.size(1) - csr.nnz} repeats); "
                             "deduplicate first, e.g. torch_geometric.utils.coalesce")
    else:
        csr = stored
    _device_csr_arrays(csr)
    if csr.num_nodes < 2:
        raise ValueError(f"graph: expected at least 2 nodes, got {csr.num_nodes}")
    n = csr.num_nodes
    row = torch.repeat_interleave(torch.arange(n, device=csr.col.device), csr.rowptr[1:] - csr.rowptr[:-1],
                                  output_size=csr.nnz)
    _raise_flags(_entries_flags(row, csr.col.to(torch.int64), n))
    return csr


def _device_edge_index(g: CSR, layout: int) -> torch.Tensor:
    """(2, nnz) int64 edge_index of a device CSR (layout 0 = (col, row), 1 = (row, col)): the
    torch-native twin of the ``csr_to_edge_index`` kernel."""
    row = torch.repeat_interleave(torch.arange(g.num_nodes, device=g.col.device), g.rowptr[1:] - g.rowptr[:-1],
                                  output_size=g.nnz)
    c = g.col.to(torch.int64)
    return torch.stack([c, row] if layout == 0 else [row, c])


def _result_edge_index(res) -> torch.Tensor:
    """``res.edge_index``; for a CUDA result not yet expanded, expanded here on the device."""
    if res._edge_index is None:
        g = res.graph()
        if _backend.device_of(g.rowptr, g.col) == "cuda":
            res._edge_index = _device_edge_index(g, 0 if res.symmetrize == "none" else 1)
    return res.edge_index


def _wants_edge_index(data) -> bool:
    """Whether _apply sets the output's edge_index (so the sampler may write it directly)."""
    return "edge_index" in data or _edges._stored_csr(data) is None


def _apply(data, res):
    out = copy.copy(data)
    stored = _edges._stored_csr(data) is not None
    if "edge_index" in data or not stored:
        out.edge_index = _result_edge_index(res)
    if stored:  # CSR-only graphs (ldpfast.datasets.orkut_like): keep them CSR-only
        g = res.graph()
        # rows = message sources, as ldpfast.graph.csr_of(edge_index) would build them
        csr = _edges.transpose(g, res.backend) if res.symmetrize == "none" else g
        out.csr = csr
        out.__dict__["csr"] = csr
    for key in ("edge_attr", "edge_weight"):
        if key in out:
            del out[key]
    out.__dict__.pop("_ldpfast_csr", None)
    out.ldp_ledger = Ledger(list(Ledger.of(data).entries)).add(res.spent)
    return out


class DPRR(ReportOnce):
    """Degree-Preserving Randomized Response on the edges (paper Algorithm 1).

    ``eps1 + eps2``-edge LDP per user (Proposition 2); see :func:`ldpfast.mechanisms.edges.dprr`
    for the parameters, the budget split (eq. 8 with ``eps2 = eps - eps1``) and the
    server-side rule (``symmetrize``; default ``"none"``: node ``i`` aggregates over its own
    noisy list, as in the authors' code).

    Parameters
    ----------
    public : bool tensor or str, optional
        Mask of non-private users, or the name of a ``Data`` attribute holding it.
    seed : int, optional
        Secret seed (see :class:`ldpfast.transforms.ReportOnce`); never recorded.
    identity : str
        How an input is identified (see :class:`ldpfast.transforms.ReportOnce`).
    """

    def __init__(self, eps: float, seed: int | None = None, eps1: float | None = None, public=None,
                 n_max: int | None = None, alpha: float = 0.9, symmetrize: str = _edges.DEFAULT_SYMMETRIZE,
                 backend: str | None = None, *, identity: str = IDENTITY_DEFAULT):
        self.eps, self.eps1, self.public = eps, eps1, public
        self.n_max, self.alpha, self.symmetrize, self.backend = n_max, alpha, symmetrize, backend
        self.last_result = None
        self._init_report_once(seed, identity)

    def forward(self, data):
        eps = check_eps("eps", self.eps)
        seed, csr = _prepare(self, data)
        res = _edges._dprr(csr, eps, seed, self.eps1, _public_of(data, self.public), self.n_max, self.alpha,
                           self.symmetrize, self.backend, edge_index=_wants_edge_index(data))
        self.last_result = res
        return _apply(data, res)

    def __repr__(self) -> str:
        return f"DPRR(eps={self.eps}, eps1={self.eps1}, symmetrize={self.symmetrize!r})"


class RREdges(ReportOnce):
    """Warner's randomized response on every neighbour-list bit (paper section V-A), eps-edge LDP.

    Refuses graphs whose expected output exceeds ``max_output_edges`` (RR is dense);
    see :func:`ldpfast.mechanisms.edges.rr_edges`.
    """

    def __init__(self, eps: float, seed: int | None = None, max_output_edges: int = 50_000_000, public=None,
                 symmetrize: str = _edges.DEFAULT_SYMMETRIZE, backend: str | None = None, *,
                 identity: str = IDENTITY_DEFAULT):
        self.eps, self.max_output_edges, self.public = eps, max_output_edges, public
        self.symmetrize, self.backend = symmetrize, backend
        self.last_result = None
        self._init_report_once(seed, identity)

    def forward(self, data):
        eps = check_eps("eps", self.eps)
        seed, csr = _prepare(self, data)
        res = _edges._rr_edges(csr, eps, seed, self.max_output_edges, _public_of(data, self.public),
                               self.symmetrize, self.backend, edge_index=_wants_edge_index(data))
        self.last_result = res
        return _apply(data, res)

    def __repr__(self) -> str:
        return f"RREdges(eps={self.eps}, symmetrize={self.symmetrize!r})"


class LocalLap(ReportOnce):
    """LocalLap baseline (local-model LAPGRAPH, paper section V-A), eps-edge LDP.

    Output graph is undirected; see :func:`ldpfast.mechanisms.edges.local_laplace`.
    """

    def __init__(self, eps: float, seed: int | None = None, backend: str | None = None, *,
                 identity: str = IDENTITY_DEFAULT):
        self.eps, self.backend = eps, backend
        self.last_result = None
        self._init_report_once(seed, identity)

    def forward(self, data):
        eps = check_eps("eps", self.eps)
        seed, csr = _prepare(self, data)
        res = _edges._local_laplace(csr, eps, seed, self.backend)
        self.last_result = res
        return _apply(data, res)

    def __repr__(self) -> str:
        return f"LocalLap(eps={self.eps})"
