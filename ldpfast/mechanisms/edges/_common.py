"""Shared pieces of the edge randomisers: the result type, graph/CSR input checks, the
``public`` mask, the noise grid and the RR edge sampler (true edges by exact Bernoulli, false
edges by skip sampling) that DPRR and RR both call.

See :mod:`ldpfast.mechanisms.edges` for the guarantees and the randomness contract.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from ... import _backend
from ..._checks import check_mask
from ...graph import CSR, INT32_MAX, _is_sparse_tensor_like, csr_of, to_csr
from ...privacy.budget import Spent
from ...rng import Stream, epsilon_to_rational
from .server import DEFAULT_SYMMETRIZE, server_graph

GRANULARITY = 2.0 ** -10
"""Grid of the discrete Laplace noise (degrees and LocalLap entries)."""

_GUARANTEE = "edge eps-LDP (2*eps relationship DP, Prop. 1)"
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


@dataclass
class EdgeLDPResult:
    """Output of an edge-LDP randomiser.

    Attributes
    ----------
    noisy : CSR
        The noisy neighbour lists: row ``i`` is what user ``i`` sent (``a~_i``), sorted, no
        self loops (directed: ``a~_ij`` and ``a~_ji`` are independent).  For
        :func:`local_laplace` this is the server's undirected output graph.
    noisy_degrees : torch.Tensor
        int64, ``|a~_i|`` per user (the paper's ``d~_i``).
    d_star : torch.Tensor or None
        float64, the user's noisy degree ``d*_i`` (NaN for public users).
    q : torch.Tensor or None
        float64, the sampling probability ``q_i`` after ``Proj`` (NaN for public users);
        ``None`` where the mechanism has none.
    spent : Spent
        Privacy cost and parameters.
    symmetrize : str
        Server-side rule used by :attr:`edge_index` (see :func:`server_graph`);
        ``"symmetric"`` when ``noisy`` is already undirected (LocalLap).
    backend : str
        Kernel backend that produced the result (also used for :meth:`graph`).
    """

    noisy: CSR
    noisy_degrees: torch.Tensor
    d_star: torch.Tensor | None
    q: torch.Tensor | None
    spent: Spent
    symmetrize: str = DEFAULT_SYMMETRIZE
    backend: str | None = None
    _graph: CSR | None = field(default=None, init=False, repr=False)
    _edge_index: torch.Tensor | None = field(default=None, init=False, repr=False)

    def graph(self) -> CSR:
        """The server-side graph as CSR (computed once; see :func:`server_graph`)."""
        if self._graph is None:
            if self.symmetrize == "symmetric":  # already undirected (LocalLap)
                self._graph = self.noisy
            else:
                self._graph = server_graph(self.noisy, self.symmetrize, backend=self.backend)
        return self._graph

    @property
    def edge_index(self) -> torch.Tensor:
        """The server-side graph as a PyG ``edge_index`` (int64, computed on first access).

        For ``symmetrize="none"`` the entries are ``(j, i)`` for every ``j`` in user ``i``'s
        noisy list, so PyG's default ``source_to_target`` message passing makes node ``i``
        aggregate over its own noisy list (as GIN does in the authors' code).  Otherwise the
        graph is symmetric and both directions are listed.
        """
        if self._edge_index is None:
            self._edge_index = _edge_index_of(self.graph(), 0 if self.symmetrize == "none" else 1, self.backend)
        return self._edge_index


def _edge_index_of(g: CSR, layout: int, backend: str | None = None) -> torch.Tensor:
    """(2, nnz) int64 edge_index of ``g`` in one pass: layout 0 = (col, row), 1 = (row, col)."""
    dev = _backend.device_of(g.rowptr, g.col)
    k = _backend.get(dev, backend)
    if dev == "cuda":
        ei = torch.empty((2, g.nnz), dtype=torch.int64, device=g.rowptr.device)
        k.csr_to_edge_index(g.rowptr.contiguous(), g.col.contiguous(), ei, layout)
        return ei
    ei = torch.empty((2, g.nnz), dtype=torch.int64)
    k.csr_to_edge_index(g.rowptr.contiguous().numpy(), g.col.contiguous().numpy(), ei.numpy(), layout)
    return ei


# --------------------------------------------------------------------------------------------
# validation helpers
# --------------------------------------------------------------------------------------------
_FLAG_MSG = {
    1: "node ids outside [0, num_nodes)",
    2: "rows not strictly increasing (unsorted rows or duplicate edges)",
    4: "self loops (a_ii must be 0)",
    8: "an asymmetric adjacency (edge (i, j) present without (j, i)); pass an undirected graph, "
       "e.g. ldpfast.graph.to_csr(edge_index, n, symmetrize=True)",
}


def _same_graph_device(rowptr: torch.Tensor, col: torch.Tensor) -> None:
    if rowptr.device != col.device:
        raise ValueError(f"graph: CSR.col is on {col.device} but CSR.rowptr is on {rowptr.device}; "
                         "put both on one device")


def _device(csr: CSR) -> str:
    """'cuda' or 'cpu': where the edge mechanism runs (the graph's device)."""
    return _backend.device_of(csr.rowptr, csr.col)


def _check_csr_arrays(csr: CSR) -> None:
    rp, col = csr.rowptr, csr.col
    if not isinstance(rp, torch.Tensor) or not isinstance(col, torch.Tensor):
        raise TypeError("graph: CSR.rowptr and CSR.col must be torch tensors")
    _same_graph_device(rp, col)
    if rp.dtype != torch.int64 or rp.dim() != 1 or rp.numel() != csr.num_nodes + 1:
        raise ValueError(f"graph: CSR.rowptr must be int64 of length num_nodes + 1 = {csr.num_nodes + 1}, "
                         f"got {rp.dtype} shape {tuple(rp.shape)}")
    if col.dtype not in (torch.int32, torch.int64) or col.dim() != 1:
        raise ValueError(f"graph: CSR.col must be a 1-D int32/int64 tensor, got {col.dtype} {tuple(col.shape)}")
    if int(rp[0]) != 0 or int(rp[-1]) != col.numel() or bool((rp[1:] < rp[:-1]).any()):
        raise ValueError("graph: CSR.rowptr must start at 0, be non-decreasing and end at len(col)")


def _stored_csr(data) -> CSR | None:
    """``data.csr`` when a PyG Data stores its graph as an ldpfast CSR (see ``graph.csr_of``)."""
    if isinstance(data, torch.Tensor) or not hasattr(data, "__dict__"):
        return None
    c = data.__dict__.get("csr")
    if isinstance(c, CSR):
        return c
    try:
        c = data["csr"] if "csr" in data else None  # noqa: SIM401 - Data.csr() method shadows it
    except Exception:  # noqa: BLE001 - not a PyG Data: no stored CSR
        c = None
    return c if isinstance(c, CSR) else None


def _sorted_csr(ei: torch.Tensor, n: int, backend: str | None) -> CSR | None:
    """CSR of an ``edge_index`` sorted by (source, target) -- PyG's coalesced order, as after
    ``coalesce``, ``to_undirected`` or ``ldpfast.graph.clean_edge_index`` -- built and checked
    (range, order, repeats, self loops, symmetry) in one pass; ``None`` when any check fails,
    and the caller takes the general path (``csr_of``), which names the problem.  The CSR is
    the one ``to_csr`` would build, except that with the C++ backend its ``col`` is
    ``edge_index[1]`` itself (int64 as given, not a narrowed copy)."""
    if ei.layout != torch.strided or ei.dtype not in (torch.int32, torch.int64):
        return None
    if isinstance(n, bool) or n < 0:
        return None
    dev = _backend.device_of(ei)
    ei = ei.detach()
    if dev == "cpu" and type(ei) is not torch.Tensor:  # PyG's EdgeIndex: plain view
        ei = ei.as_subclass(torch.Tensor)
    rowptr = ei.new_empty(n + 1, dtype=torch.int64)  # beside ei
    k = _backend.get(dev, backend)
    if dev == "cpu" and _backend.resolve(dev, backend) == "cpp":
        # the CSR's columns are the edge_index's own target row (a view, read-only for every
        # kernel): the pass writes the rowptr alone.  A copy would be 4-8 bytes per edge of
        # fresh memory, whose first touch costs more than the pass itself on some VMs.
        col = ei[1].contiguous()
        flags = k.edges_sorted_csr(ei[0].contiguous().numpy(), col.numpy(), n, rowptr.numpy(),
                                   np.empty(0, dtype=col.numpy().dtype))
        return CSR(rowptr, col, n) if flags == 0 else None
    col = ei.new_empty(ei.size(1), dtype=torch.int32 if n <= INT32_MAX else torch.int64)
    if dev == "cuda":  # graph.cu sorted_csr_*: the same CSR and flags on the device
        flags = k.edges_sorted_csr(ei[0].contiguous(), ei[1].contiguous(), n, rowptr, col)
    else:
        flags = k.edges_sorted_csr(ei[0].contiguous().numpy(), ei[1].contiguous().numpy(), n,
                                   rowptr.numpy(), col.numpy())
    return CSR(rowptr, col, n) if flags == 0 else None


def _stored_adj_t(data):
    """PyG's ``data.adj_t`` (what ``T.ToSparseTensor()`` stores: a torch sparse CSR tensor, or a
    ``torch_sparse.SparseTensor`` when torch_sparse is installed; COO and CSC tensors too), or
    None when the Data has none."""
    if isinstance(data, (torch.Tensor, CSR)) or not hasattr(data, "__dict__"):
        return None
    try:
        a = data["adj_t"] if "adj_t" in data else None  # noqa: SIM401 - a PyG Data has no .get
    except Exception:  # noqa: BLE001 - not a PyG Data: no adj_t
        return None
    if a is None or _is_sparse_tensor_like(a) or (isinstance(a, torch.Tensor) and a.layout != torch.strided):
        return a
    raise TypeError("graph: data.adj_t must be a torch sparse tensor or a torch_sparse.SparseTensor "
                    f"(as T.ToSparseTensor() stores it), got {type(a).__name__}"
                    + (" with a dense layout" if isinstance(a, torch.Tensor) else ""))


def _adj_t_arrays(adj, n: int):
    """``(rowptr, col)`` of the sparsity pattern of ``adj_t`` read as rows, or ``(None, indices)``
    for a COO tensor (coalesced: sorted by row, then column, like a coalesced edge_index).

    An undirected graph's ``adj_t`` is its own transpose, so its rows are the neighbour lists
    whatever the layout (a CSC's column pointers included); the checks that follow refuse an
    asymmetric one.  The arrays are the tensor's own (no copy; an int32 rowptr is widened).
    Values are not read: the graph is the pattern (weights are dropped, as ``edge_weight`` is)."""
    if _is_sparse_tensor_like(adj):
        shape = tuple(int(s) for s in adj.sparse_sizes())
    else:
        shape = tuple(adj.shape)
    if shape != (n, n):
        raise ValueError(f"graph: data.adj_t must be ({n}, {n}) (num_nodes x num_nodes), got {shape}")
    if _is_sparse_tensor_like(adj):
        rp, col, _ = adj.csr()
        return rp.to(torch.int64), col
    if adj.layout == torch.sparse_csr:
        return adj.crow_indices().to(torch.int64), adj.col_indices()
    if adj.layout == torch.sparse_csc:
        return adj.ccol_indices().to(torch.int64), adj.row_indices()
    if adj.layout == torch.sparse_coo:
        return None, (adj if adj.is_coalesced() else adj.coalesce())._indices()
    raise TypeError(f"graph: data.adj_t has layout {adj.layout}; expected sparse_csr, sparse_csc or sparse_coo")


def _edge_index_csr(ei, n: int, backend: str | None, name: str, data=None) -> CSR:
    """Checked CSR of an ``edge_index`` (``name`` says where it came from, for the errors): one
    pass when it is sorted by (source, target), else ``to_csr`` (through ``csr_of``'s cache on
    ``data`` when the edge_index is ``data.edge_index``) and the general check."""
    if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2:
        raise ValueError(f"graph: {name} must be a (2, E) tensor")
    csr = _sorted_csr(ei, n, backend)
    if csr is not None:  # built and checked in one pass
        _check_csr_arrays(csr)
        if csr.num_nodes < 2:
            raise ValueError(f"graph: expected at least 2 nodes, got {csr.num_nodes}")
        return csr
    csr = csr_of(data, backend=backend) if data is not None else to_csr(ei, n, symmetrize=False, backend=backend)
    if csr.nnz != ei.size(1):  # to_csr dropped self loops or repeats: say which (only then)
        if bool((ei[0] == ei[1]).any()):
            raise ValueError(f"graph: {name} has self loops (a_ii must be 0); remove them first, "
                             "e.g. torch_geometric.utils.remove_self_loops")
        raise ValueError(f"graph: {name} has duplicate edges ({ei.size(1) - csr.nnz} repeats); "
                         "deduplicate first, e.g. torch_geometric.utils.coalesce")
    return _checked(csr, backend)


def _graph_csr(graph, backend: str | None) -> CSR:
    """CSR of ``graph`` (CSR or PyG Data), validated: symmetric, sorted, no self loops.

    A Data's graph is, in this order: ``data.csr`` (ldpfast's CSR-only graphs), ``data.edge_index``,
    ``data.adj_t`` (PyG's ``T.ToSparseTensor``; a stored CSR's arrays are used as they are)."""
    if isinstance(graph, CSR):
        return _checked(graph, backend)
    stored = _stored_csr(graph)
    if stored is not None:
        return _checked(stored, backend)
    adj = _stored_adj_t(graph)
    ei = getattr(graph, "edge_index", None) if hasattr(graph, "__dict__") else None
    if ei is None and adj is None:
        if hasattr(graph, "edge_index"):
            raise ValueError("graph: the Data holds no graph: expected data.edge_index (2, E), data.adj_t "
                             "(T.ToSparseTensor()) or data.csr (an ldpfast.graph.CSR)")
        raise TypeError(f"graph: expected an ldpfast.graph.CSR or a PyG Data, got {type(graph).__name__}")
    if graph.num_nodes is None:
        raise ValueError("graph: data.num_nodes is not set")
    n = int(graph.num_nodes)
    if ei is not None:
        return _edge_index_csr(ei, n, backend, "data.edge_index", graph)
    rp, col = _adj_t_arrays(adj, n)
    if rp is None:  # COO: its indices are an edge_index of the same (symmetric) graph
        return _edge_index_csr(col, n, backend, "data.adj_t")
    return _checked(CSR(rp, col, n), backend)


def _checked(csr: CSR, backend: str | None) -> CSR:
    """``csr`` after the structural checks and the kernel's simple-undirected-graph check."""
    _check_csr_arrays(csr)
    if csr.num_nodes < 2:
        raise ValueError(f"graph: expected at least 2 nodes, got {csr.num_nodes}")
    dev = _device(csr)
    k = _backend.get(dev, backend)
    if dev == "cuda":
        flags = int(k.edges_check_csr(csr.rowptr.contiguous(), csr.col.contiguous()))
    else:
        flags = int(k.edges_check_csr(csr.rowptr.contiguous().numpy(), csr.col.contiguous().numpy()))
    if flags:
        bad = [msg for bit, msg in _FLAG_MSG.items() if flags & bit]
        raise ValueError("graph: the neighbour lists must form a simple undirected graph; found " + "; ".join(bad))
    return csr


def _check_public_dev(public, n: int, csr: CSR):
    """Device graphs: uint8 tensor (length n) of non-private users on the graph's device, or
    None for none.  ``public`` must be a bool tensor on that device."""
    if public is None:
        return None
    if not isinstance(public, torch.Tensor):
        raise TypeError(f"public: expected a bool torch.Tensor on {csr.rowptr.device} (the graph's device), "
                        f"got {type(public).__name__}")
    if public.device != csr.rowptr.device:
        raise ValueError(f"public is on {public.device} but graph is on {csr.rowptr.device}; "
                         "put both on one device")
    if public.dtype != torch.bool:
        raise TypeError(f"public: expected a bool tensor, got dtype {public.dtype}")
    if public.dim() != 1 or public.shape[0] != n:
        raise ValueError(f"public: expected shape ({n},) (one flag per user), got {tuple(public.shape)}")
    return public.detach().to(torch.uint8).contiguous()


def _check_public(public, n: int) -> np.ndarray:
    """uint8 mask (length n) of non-private users, or an empty array for none."""
    if public is None:
        return np.zeros(0, dtype=np.uint8)
    if isinstance(public, torch.Tensor):
        if public.dtype != torch.bool:
            raise TypeError(f"public: expected a bool tensor, got dtype {public.dtype}")
        arr = public.detach().cpu().numpy()
    elif isinstance(public, np.ndarray):
        if public.dtype != np.bool_:
            raise TypeError(f"public: expected a bool array, got dtype {public.dtype}")
        arr = public
    else:
        raise TypeError(f"public: expected a bool torch.Tensor of shape (num_nodes,), got {type(public).__name__}")
    if arr.ndim != 1 or arr.shape[0] != n:
        raise ValueError(f"public: expected shape ({n},) (one flag per user), got {tuple(arr.shape)}")
    return np.ascontiguousarray(arr.astype(np.uint8))


def _num_public(pub) -> int:
    if pub is None:
        return 0
    return int(pub.sum()) if (pub.numel() if isinstance(pub, torch.Tensor) else pub.size) else 0


def _public_for(public, n: int, csr: CSR, dev: str):
    """``public`` checked for a graph on ``dev``: a uint8 tensor (or None) on the device, a
    uint8 array (empty for none) on the CPU.  Mixed devices name both.  A tensor of node ids
    (PyG holds node sets either way) is first made the bool mask."""
    if isinstance(public, torch.Tensor) and public.dtype != torch.bool:
        public = check_mask("public", public, n)
    if dev == "cuda":
        return _check_public_dev(public, n, csr)
    if isinstance(public, torch.Tensor) and public.device != csr.rowptr.device:
        raise ValueError(f"public is on {public.device} but graph is on {csr.rowptr.device}; "
                         "put both on one device")
    return _check_public(public, n)


def _graph_seed(keying, mechanism: str, params: dict, pub) -> int:
    """The one seed of a graph whose rows are its users (no user keys): derived from the
    caller's secret, the dataset, the graph's identity and every parameter of the output law,
    the public set included (:mod:`ldpfast.privacy.users`), so two settings never share bits.
    The kernels address draws by (seed, stream, row, col): one release of this graph."""
    from ...privacy.report_once import _digests, fingerprint_key

    pd = ""
    if pub is not None and len(pub):  # keyed digest, where the mask lives (16 bytes come back)
        header = f"public:uint8:{len(pub)}:".encode()  # the same for a host array and a device tensor
        pd = _digests([(header, pub)], fingerprint_key(keying.secret))[0].hex()
    keying.last_seeds = seed = keying.context(mechanism, {**params, "public": pd}).k_a  # (for the spec tests)
    return seed


def _grid(name: str, eps: float) -> tuple[float, int, int, float]:
    """(g, t, s, eps_used): discrete Laplace on grid g with P[k] ~ exp(-eps_used g |k|)."""
    g = GRANULARITY if eps * GRANULARITY >= 2.0 ** -20 else 1.0
    try:
        t, s, used = epsilon_to_rational(eps * g)
    except ValueError as exc:
        raise ValueError(f"{name}: {eps:g} is outside the range the exact discrete Laplace sampler "
                         f"supports ([2**-20, 2**31]): {exc}") from None
    return g, t, s, used / g


def _rr_probs(eps: float) -> tuple[float, float]:
    """(p, 1 - p) of Warner's RR, p = e^eps / (e^eps + 1), each computed without cancellation."""
    return 1.0 / (1.0 + math.exp(-eps)), 1.0 / (1.0 + math.exp(eps))


# --------------------------------------------------------------------------------------------
# the sparse sampler (kernel entry point)
# --------------------------------------------------------------------------------------------
def _rr_sample(csr: CSR, p_true, p_false, seed: int, *, streams=(Stream.DPRR_TRUE, 0, Stream.DPRR_FALSE, 0),
               public: np.ndarray | None = None, by_degree: bool = True, backend: str | None = None) -> CSR:
    """Noisy lists with P[a~_ij = 1] = p_true[i] (a_ij = 1) or p_false[i] (a_ij = 0), j != i.

    The kernel behind :func:`dprr` and :func:`rr_edges` (exposed for the tests, which check
    its output distribution against a bit-by-bit reference).  ``p_true`` / ``p_false``:
    float64 arrays of length n.  Public users' rows are copied unchanged.  One pass (every
    row drawn once into block buffers, then written); O(|E| + n + output) time and memory.
    """
    return _rr_sample_ei(csr, p_true, p_false, seed, streams=streams, public=public, by_degree=by_degree,
                         backend=backend)[0]


def _rr_args(csr, p_true, p_false, public, streams):
    rp = csr.rowptr.contiguous().numpy()
    col = csr.col.contiguous().numpy()
    pt = np.ascontiguousarray(p_true, dtype=np.float64)
    pf = np.ascontiguousarray(p_false, dtype=np.float64)
    pub = np.zeros(0, dtype=np.uint8) if public is None else public
    return rp, col, pt, pf, pub, tuple(int(x) for x in streams)


def _rr_sample_ei(csr: CSR, p_true, p_false, seed: int, *, streams, public, by_degree: bool,
                  backend: str | None, layout: int | None = None) -> tuple[CSR, torch.Tensor | None]:
    """:func:`_rr_sample`, plus the (2, nnz) int64 edge_index of the noisy lists written by
    the same kernel pass when ``layout`` is 0 ((col, row)) or 1 ((row, col)), else None.
    With an edge_index the CSR's ``col`` is its int64 column row (a view: the columns are
    written once, not also as a separate int32 copy)."""
    n = csr.num_nodes
    k = _backend.get("cpu", backend)
    rp, col, pt, pf, pub, (st_t, c_t, st_f, c_f) = _rr_args(csr, p_true, p_false, public, streams)
    orp = torch.empty(n + 1, dtype=torch.int64)
    sample = k.edges_rr_sample(rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub, orp.numpy(),
                                           bool(by_degree))
    none = np.empty(0, dtype=np.int64)
    if layout is None:  # int32 columns whenever the ids fit (to_csr's choice), whatever the input's
        ocol = torch.empty(sample.nnz, dtype=torch.int32 if n <= INT32_MAX else torch.int64)
        sample.write(ocol.numpy(), none, none, 0)
        return CSR(orp, ocol, n), None
    ei = torch.empty((2, sample.nnz), dtype=torch.int64)
    sample.write(np.empty(0, dtype=csr.col.numpy().dtype), none, ei.numpy(), layout)
    return CSR(orp, ei[0 if layout == 0 else 1], n), ei


def _rr_sample_two_pass(csr: CSR, p_true, p_false, seed: int, *, streams=(Stream.DPRR_TRUE, 0, Stream.DPRR_FALSE, 0),
                        public: np.ndarray | None = None, by_degree: bool = True, backend: str | None = None) -> CSR:
    """The reference of :func:`_rr_sample`: count, prefix-sum, fill (every draw made twice)."""
    n = csr.num_nodes
    k = _backend.get("cpu", backend)
    rp, col, pt, pf, pub, (st_t, c_t, st_f, c_f) = _rr_args(csr, p_true, p_false, public, streams)
    orp = torch.empty(n + 1, dtype=torch.int64)
    orp_np = orp.numpy()
    k.edges_rr_count(rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub, orp_np, bool(by_degree))
    np.cumsum(orp_np, out=orp_np)
    ocol = torch.empty(int(orp_np[n]), dtype=csr.col.dtype)
    k.edges_rr_fill(rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub, orp_np, ocol.numpy())
    return CSR(orp, ocol, n)


def _masked_csr(rowptr: torch.Tensor, col: torch.Tensor, mask: torch.Tensor, n: int) -> CSR:
    """The entries of a CSR (rowptr, col) where ``mask`` (bool, aligned with col) is set
    (torch ops: runs where the tensors are; on the CPU NumPy's, the same values: torch's
    boolean indexing and bool cumsum are 3x to 8x slower there on one core)."""
    if _backend.device_of(rowptr, col, mask) == "cpu":
        # row starts from the positions of the rarer side (LocalLap keeps all but ~10 sqrt(T) of
        # its picks): entries before rowptr[i] kept = searchsorted, no n-sized prefix sum
        m = mask.contiguous().numpy()
        r = rowptr.contiguous().numpy()
        if 2 * int(np.count_nonzero(m)) >= m.size:
            rp = r - np.searchsorted(np.flatnonzero(~m), r)
        else:
            rp = np.searchsorted(np.flatnonzero(m), r)
        return CSR(torch.from_numpy(rp), torch.from_numpy(col.contiguous().numpy()[m]), n)
    cs = torch.zeros(mask.numel() + 1, dtype=torch.int64, device=mask.device)
    torch.cumsum(mask, 0, out=cs[1:])
    return CSR(cs[rowptr].contiguous(), col[mask].contiguous(), n)
