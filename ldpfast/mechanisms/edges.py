"""Edge local differential privacy for GNN inputs: DPRR, Warner's RR, LocalLap.

Paper: S. Hidano and T. Murakami, "Degree-Preserving Randomized Response for Graph Neural
Networks under Local Differential Privacy" (``shared/papers/001_2c9d8609a94a377f.txt``).
Each user ``v_i`` holds her neighbour list ``a_i`` (row ``i`` of the symmetric adjacency
matrix, ``a_ii = 0``), randomises it locally and sends ``a~_i``; the server assembles the
noisy matrix ``A~`` (section IV-A, Fig. 1).

Guarantees (per user, edge LDP, Definition 1; by Proposition 1 the tuple of all users'
randomisers gives ``2 eps`` relationship DP on undirected graphs, common setting only):

* :func:`dprr` -- Algorithm 1 (DPRR): Laplace-noised degree with budget ``eps1``, sampling
  probability ``q_i`` by eq. (6) projected onto [0, 1], Warner's RR with
  ``p = e^eps2 / (e^eps2 + 1)`` then edge sampling with ``q_i`` (eq. 7).  ``eps1 + eps2``-edge
  LDP (Proposition 2).  Budget split by eq. (8) unless ``eps1`` is given.
* :func:`rr_edges` -- Warner's RR on every bit of the neighbour list (section V-A, "RR"),
  ``eps``-edge LDP.  Output is dense by nature: ``O(n^2)`` edges.
* :func:`local_laplace` -- LocalLap (section V-A): ``eps1 = eps/10`` for the noisy degrees,
  ``T = sum(d*_i)/2``, ``Lap(1/eps2)`` on every upper-triangular element of ``A``, the ``T``
  largest kept.  ``eps1 + eps2``-edge LDP.

Implementation choices (documented deviations from the paper's text)
--------------------------------------------------------------------
* **No floating-point Laplace.**  Every "Laplace" draw is the exact discrete Laplace on the
  grid ``g = 2^-10`` (``x + g * DLap``, ``P[DLap = k] ~ exp(-eps g |k|)``), sampled with integer
  arithmetic only (Canonne, Kamath & Steinke, NeurIPS 2020, Alg. 2; see
  :func:`ldpfast.rng.epsilon_to_rational`).  A change of 1 in the input is ``1/g = 1024`` grid
  steps, so the release is exactly ``eps_used``-DP with ``eps_used <= eps`` (rounded down to a
  rational rate); this removes the floating-point attack on textbook Laplace sampling
  (Mironov, CCS 2012: "snapping").  If ``eps * g < 2^-20`` the grid is ``g = 1`` (the plain
  geometric mechanism).  The paper (footnote 2) argues for Laplace over the geometric
  mechanism because the latter does not help when ``eps1 < 1``; the fine grid keeps the
  Laplace law's shape to within 2^-10 while being exactly sampleable.
* **Budget split never exceeds eps.**  The paper's experiments set ``eps2 = alpha * eps`` even
  when eq. (8) picks ``eps1 = sqrt(8/(n_max-1)) > (1-alpha) eps``, which would spend more
  than ``eps``.  Here ``eps2 = eps - eps1`` always (``eps1`` from eq. 8 or given), and a
  :class:`ValueError` is raised if ``eps1 >= eps``.  The spent budget is
  ``eps1_used + eps2 <= eps``.
* **q_i when d*_i <= 0.**  Eq. (6) can be negative or undefined there; we set ``q_i = 0``
  (the continuous branch of the projection: eq. 6 is <= 0 for ``0 >= d* > -(n-1)(1-p)/(2p-1)``,
  and ``d* <= 0`` is "no edges").  The authors' code clamps ``d*`` at 0 as well.
* **Server-side rule.**  The paper says only that the server "calculates a noisy adjacency
  matrix ``A~`` corresponding to ``a~_1..a~_n``" (section IV-A); it states no symmetrisation.
  The authors' code (github.com/DPRR-GNN/DPRR-GNN, ``insert_noise.py``) builds
  ``edge_mat = argwhere(A~)`` and GIN aggregates with ``Adj_block = A~`` (``models/graphcnn.py``),
  i.e. user ``i`` aggregates over her *own* noisy list and ``A~`` is used as a directed graph.
  That is the default here (``symmetrize="none"``), which keeps the degree-preservation
  property the method is built on.  ``"or"``, ``"and"``, ``"lower"`` (Imola et al.'s ARR
  convention: keep the entries ``a~_ij`` with ``j < i``, mirror them) and ``"upper"`` are
  available; see :func:`server_graph`.
* **Customized setting** (section IV-A): users flagged ``public`` send their list unchanged
  (the authors' code does the same); the guarantee then covers the private users only and
  relationship DP does not hold (paper, section IV-A).  Supported by :func:`dprr` and
  :func:`rr_edges`; :func:`local_laplace` implements the common setting only.
* **Authors' code vs paper.**  The released code runs DPRR with ``eps1 = eps/10`` always
  (``insert_noise_onlyDPRR_select_rand_final.c``), not eq. (8); we follow the paper (eq. 8)
  by default, and ``eps1=eps/10`` reproduces the code.  LocalLap's ``T`` is floored and
  clipped to ``[0, n(n-1)/2]`` as in the code.

Devices: a graph on a CUDA device (CSR tensors or ``data.edge_index`` there) runs the CUDA
kernels (``csrc/cuda/edges.cu``, ``graph.cu``; per-row bodies shared with the C++ build in
``csrc/common/edges.h`` and ``graph.h``, so the same bits for one seed) and every output stays
on the device: DPRR's degree noise, ``q_i`` and the noisy lists (count launch, device prefix
sum, fill launch: the host reads only the total size), LocalLap's candidates and its top-T
(``_top_t_mask``), the server rules.  ``public`` must then be a bool tensor on the same
device; tensors on different devices raise an error naming both.

Randomness and exactness: counter-based Philox streams (``Stream.DPRR_*``, ``RR_EDGES``,
``LOCALLAP``), so outputs depend only on the seed (not on backend or threads).  The per-bit
probabilities (``p q_i``, ``(1-p) q_i``, LocalLap's candidate rate) are computed as doubles;
given those doubles the draws are exact up to a negligible factor: kept true edges by an exact
Bernoulli (``P = p_true`` exactly), false edges and candidates by skip sampling with geometric
gaps whose law has full support and is within relative ``2^-49`` of Geometric(``p_false``),
factor by factor (``geom_draw`` in ``csrc/common/rng.h``).  So every likelihood ratio of a
user's report is within ``e^(+-2^-46)`` of the exact independent-Bernoulli mechanism's: pure
``eps``-edge LDP up to that factor and the rounding of the doubles.  (Until audit F5 the gaps
were ``floor(log U / log(1 - p))`` with a 53-bit ``U``, which has no gap beyond
``log(2^-54) / log(1 - p)`` and probability 0 for most gaps below ``2^-53``: only
``(eps, ~2^-53 / p_false)``.)
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from .. import _backend
from .._checks import check_eps, check_int, check_prob
from ..graph import CSR, INT32_MAX, csr_of
from ..graph import transpose as graph_transpose
from ..privacy.budget import Spent
from ..rng import Stream, epsilon_to_rational, resolve_seed

__all__ = [
    "GRANULARITY",
    "EdgeLDPResult",
    "dprr",
    "dprr_budget",
    "expected_rr_output",
    "local_laplace",
    "rr_edges",
    "server_graph",
    "transpose",
]

GRANULARITY = 2.0 ** -10
"""Grid of the discrete Laplace noise (degrees and LocalLap entries)."""

SYMMETRIZE_RULES = ("none", "or", "and", "lower", "upper")
DEFAULT_SYMMETRIZE = "none"
_COMBINE_MODE = {"or": 0, "and": 1, "lower": 2, "upper": 3}
_GUARANTEE = "edge eps-LDP (2*eps relationship DP, Prop. 1)"
_I64_MIN = -(2**63)
_I64_MAX = 2**63 - 1


# --------------------------------------------------------------------------------------------
# result
# --------------------------------------------------------------------------------------------
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
    the one ``to_csr`` would build."""
    if ei.layout != torch.strided or ei.dtype not in (torch.int32, torch.int64):
        return None
    if isinstance(n, bool) or n < 0:
        return None
    dev = _backend.device_of(ei)
    ei = ei.detach()
    if dev == "cpu" and type(ei) is not torch.Tensor:  # PyG's EdgeIndex: plain view
        ei = ei.as_subclass(torch.Tensor)
    rowptr = ei.new_empty(n + 1, dtype=torch.int64)  # beside ei
    col = ei.new_empty(ei.size(1), dtype=torch.int32 if n <= INT32_MAX else torch.int64)
    k = _backend.get(dev, backend)
    if dev == "cuda":  # graph.cu sorted_csr_*: the same CSR and flags on the device
        flags = k.edges_sorted_csr(ei[0].contiguous(), ei[1].contiguous(), n, rowptr, col)
    else:
        flags = k.edges_sorted_csr(ei[0].contiguous().numpy(), ei[1].contiguous().numpy(), n,
                                   rowptr.numpy(), col.numpy())
    return CSR(rowptr, col, n) if flags == 0 else None


def _graph_csr(graph, backend: str | None) -> CSR:
    """CSR of ``graph`` (CSR or PyG Data), validated: symmetric, sorted, no self loops."""
    if isinstance(graph, CSR):
        csr = graph
    elif hasattr(graph, "edge_index") or _stored_csr(graph) is not None:
        if _stored_csr(graph) is not None:
            csr = _stored_csr(graph)
        else:
            ei = graph.edge_index
            if not isinstance(ei, torch.Tensor) or ei.dim() != 2 or ei.size(0) != 2:
                raise ValueError("graph: data.edge_index must be a (2, E) tensor")
            if graph.num_nodes is None:
                raise ValueError("graph: data.num_nodes is not set")
            csr = _sorted_csr(ei, int(graph.num_nodes), backend)
            if csr is not None:  # built and checked in one pass
                _check_csr_arrays(csr)
                if csr.num_nodes < 2:
                    raise ValueError(f"graph: expected at least 2 nodes, got {csr.num_nodes}")
                return csr
            csr = csr_of(graph, backend=backend)
            if csr.nnz != ei.size(1):  # to_csr dropped self loops or repeats: say which (only then)
                if bool((ei[0] == ei[1]).any()):
                    raise ValueError("graph: data.edge_index has self loops (a_ii must be 0); remove them first, "
                                     "e.g. torch_geometric.utils.remove_self_loops")
                raise ValueError(f"graph: data.edge_index has duplicate edges ({ei.size(1) - csr.nnz} repeats); "
                                 "deduplicate first, e.g. torch_geometric.utils.coalesce")
    else:
        raise TypeError(f"graph: expected an ldpfast.graph.CSR or a PyG Data, got {type(graph).__name__}")
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
    uint8 array (empty for none) on the CPU.  Mixed devices name both."""
    if dev == "cuda":
        return _check_public_dev(public, n, csr)
    if isinstance(public, torch.Tensor) and public.device != csr.rowptr.device:
        raise ValueError(f"public is on {public.device} but graph is on {csr.rowptr.device}; "
                         "put both on one device")
    return _check_public(public, n)


def _check_rule(symmetrize: str) -> str:
    if symmetrize not in SYMMETRIZE_RULES:
        raise ValueError(f"symmetrize: expected one of {SYMMETRIZE_RULES}, got {symmetrize!r}")
    return symmetrize


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
    the same kernel pass when ``layout`` is 0 ((col, row)) or 1 ((row, col)), else None."""
    n = csr.num_nodes
    k = _backend.get("cpu", backend)
    rp, col, pt, pf, pub, (st_t, c_t, st_f, c_f) = _rr_args(csr, p_true, p_false, public, streams)
    orp = torch.empty(n + 1, dtype=torch.int64)
    sample = k.edges_rr_sample(rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub, orp.numpy(),
                                           bool(by_degree))
    ocol = torch.empty(sample.nnz, dtype=csr.col.dtype)
    ei = None if layout is None else torch.empty((2, sample.nnz), dtype=torch.int64)
    none = np.empty(0, dtype=np.int64)
    sample.write(ocol.numpy(), none, none if ei is None else ei.numpy(), 0 if layout is None else layout)
    return CSR(orp, ocol, n), ei


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


# --------------------------------------------------------------------------------------------
# server side
# --------------------------------------------------------------------------------------------
def transpose(csr: CSR, backend: str | None = None) -> CSR:
    """``A^T`` of a CSR in O(|E| + n) (rows sorted; the parallel counting sort of
    :func:`ldpfast.graph.transpose`)."""
    return graph_transpose(CSR(csr.rowptr, csr.col, csr.num_nodes), backend=backend)


def server_graph(noisy: CSR, symmetrize: str = DEFAULT_SYMMETRIZE, backend: str | None = None) -> CSR:
    """The graph the server trains on, from the noisy lists ``A~`` (row i = user i's list).

    Rules (O(|E~| + n), C++/Numba kernels):

    ``"none"``  (default; what the authors' code does)
        ``A~`` itself, directed: user ``i`` keeps her own noisy list.
    ``"or"``
        ``A~ OR A~^T``: an edge if either endpoint reported it.
    ``"and"``
        ``A~ AND A~^T``: an edge if both endpoints reported it.
    ``"lower"``
        Keep ``a~_ij`` for ``j < i`` (reported by the larger id) and mirror it, as Imola et
        al.'s ARR; every undirected pair is decided by exactly one user.
    ``"upper"``
        Keep ``a~_ij`` for ``j > i`` and mirror it.

    The paper states no rule (section IV-A: "the server calculates a noisy adjacency matrix
    A~ corresponding to a~_1..a~_n").  The result is symmetric except for ``"none"``.
    """
    _check_rule(symmetrize)
    if symmetrize == "none":
        return noisy
    return _csr_combine(noisy, transpose(noisy, backend), _COMBINE_MODE[symmetrize], backend)


# --------------------------------------------------------------------------------------------
# DPRR
# --------------------------------------------------------------------------------------------
def dprr_budget(eps: float, n_max: int, alpha: float = 0.9, eps1: float | None = None) -> tuple[float, float]:
    """Budget split ``(eps1, eps2)`` of DPRR.

    ``eps1 = max(sqrt(8 / (n_max - 1)), (1 - alpha) eps)`` (paper eq. 8) unless ``eps1`` is
    given, and ``eps2 = eps - eps1`` in both cases (the paper's experiments use
    ``eps2 = alpha eps``, which exceeds the budget when the first term of eq. 8 wins).

    Raises
    ------
    ValueError
        If ``eps1 >= eps`` (nothing left for Warner's RR).
    """
    eps = check_eps("eps", eps)
    if eps1 is None:
        n_max = check_int("n_max", n_max, lo=2)
        alpha = check_prob("alpha", alpha, open_low=True, open_high=True)
        eps1 = max(math.sqrt(8.0 / (n_max - 1)), (1.0 - alpha) * eps)
        how = (f"the paper's allocation (eq. 8) gives eps1 = max(sqrt(8/(n_max-1)), (1-alpha)*eps) = "
               f"max({math.sqrt(8.0 / (n_max - 1)):.6g}, {(1.0 - alpha) * eps:.6g}) with n_max={n_max}, "
               f"alpha={alpha:g}; use a larger eps, or pass eps1 < eps explicitly")
    else:
        eps1 = check_eps("eps1", eps1)
        how = "pass eps1 < eps"
    if eps1 >= eps:
        raise ValueError(f"eps1: eps1 = {eps1:.6g} >= eps = {eps:.6g} leaves no budget for Warner's RR "
                         f"(eps2 = eps - eps1 must be > 0); {how}")
    return eps1, eps - eps1


def dprr(
    graph,
    eps: float,
    seed: int | None = None,
    eps1: float | None = None,
    public=None,
    n_max: int | None = None,
    alpha: float = 0.9,
    symmetrize: str = DEFAULT_SYMMETRIZE,
    backend: str | None = None,
) -> EdgeLDPResult:
    """Degree-Preserving Randomized Response (paper Algorithm 1), for every user at once.

    For each private user ``i`` (``d_i = |a_i|``)::

        d*_i = d_i + g * DLap                          # line 2, Lap(1/eps1) on the 2^-10 grid
        p    = e^eps2 / (e^eps2 + 1)                   # line 3
        q_i  = Proj(d*_i / (d*_i (2p-1) + (n-1)(1-p))) # lines 4-5, eq. (6); q_i = 0 if d*_i <= 0
        a~_i = EdgeSampling(RR(a_i, p), q_i)           # lines 6-7: P[a~_ij=1] = p q_i or (1-p) q_i

    sampled in O(d_i + |a~_i|) without visiting the ``n - 1 - d_i`` non-neighbours one by one
    (true edges: one Bernoulli(p q_i) each; false edges: geometric skips with probability
    ``(1-p) q_i`` over the non-neighbours).  Total time and memory O(|E| + n + output).

    Parameters
    ----------
    graph : ldpfast.graph.CSR or torch_geometric.data.Data
        Simple undirected graph; row ``i`` is user ``i``'s neighbour list.
    eps : float
        Total budget per user, ``eps1 + eps2``.
    seed : int, optional
        64-bit seed; ``None`` draws a fresh one from the OS.  Same seed, same output on
        every backend and thread count.
    eps1 : float, optional
        Budget of the noisy degree.  Default: paper eq. (8).  ``eps2 = eps - eps1`` always.
    public : bool tensor of shape (n,), optional
        Non-private users (customized setting, section IV-A): their lists are sent
        unchanged and they spend nothing; the guarantee covers the private users.
    n_max : int, optional
        Maximum number of nodes over the graphs of the task (eq. 8); default ``n``.
    alpha : float
        Constant of eq. (8) in (0, 1); paper: 0.9.
    symmetrize : {"none", "or", "and", "lower", "upper"}
        Server-side rule for :attr:`EdgeLDPResult.edge_index` (see :func:`server_graph`).
    backend : {"cpp", "numba", "cuda"}, optional
        Default: ``"cuda"`` for a CUDA graph, else ``"cpp"`` (see :mod:`ldpfast._backend`).

    Returns
    -------
    EdgeLDPResult
        ``spent.eps = eps1_used + eps2 <= eps`` where ``eps1_used <= eps1`` is the rate the
        exact discrete Laplace sampler realises.

    Notes
    -----
    Privacy (Proposition 2, Appendix A): the noisy degree is ``eps1_used``-edge LDP (a change
    of one bit moves ``d_i`` by 1 = 1024 grid steps; the grid pmf ratio is at most
    ``exp(1024 * eps1_used * g)``), ``q_i`` is post-processing of it, RR is ``eps2``-edge LDP
    and the sampling is post-processing; by sequential composition (Lemma 1) DPRR is
    ``(eps1_used + eps2)``-edge LDP.
    """
    eps = check_eps("eps", eps)
    return _dprr(_graph_csr(graph, backend), eps, seed, eps1, public, n_max, alpha, symmetrize, backend)


def _dprr(csr: CSR, eps: float, seed, eps1, public, n_max, alpha, symmetrize, backend,
          edge_index: bool = False) -> EdgeLDPResult:
    """:func:`dprr` on a checked CSR (``_graph_csr``) and a checked ``eps``; ``edge_index``:
    also write :attr:`EdgeLDPResult.edge_index` in the sampler's pass (rule ``"none"`` only;
    the other rules build it from the server graph when asked)."""
    n = csr.num_nodes
    dev = _device(csr)
    pub = _public_for(public, n, csr, dev)
    if n_max is None:
        n_max = n
    else:
        n_max = check_int("n_max", n_max, lo=max(n, 2))
    alpha = check_prob("alpha", alpha, open_low=True, open_high=True)
    symmetrize = _check_rule(symmetrize)
    allocation = "paper eq. 8 (eps2 = eps - eps1)" if eps1 is None else "given eps1 (eps2 = eps - eps1)"
    eps1, eps2 = dprr_budget(eps, n_max, alpha, eps1)
    g, t, s, eps1_used = _grid("eps1", eps1)
    while eps1_used + eps2 > eps:  # floating point: never report more than eps
        eps2 = math.nextafter(eps2, 0.0)
    seed = resolve_seed(seed)
    backend_name = _backend.resolve(dev, backend)
    k = _backend.get(dev, backend)
    p, pm = _rr_probs(eps2)
    streams = (int(Stream.DPRR_TRUE), 0, int(Stream.DPRR_FALSE), 0)

    if dev == "cuda":  # everything on the device; the only host read is the output size
        rp = csr.rowptr.contiguous()
        noise = torch.empty((n, 1), dtype=torch.int64, device=rp.device)
        k.fill_discrete_laplace(noise, seed, int(Stream.DPRR_DEGREE), 0, t, s)
        d_star_t, q_t, p_true, p_false = k.dprr_probs(rp, noise.view(-1), g, p, pm)
        del noise
        orp, ocol = k.edges_rr(rp, csr.col.contiguous(), seed, *streams, p_true, p_false, pub)
        del p_true, p_false
        noisy, ei = CSR(orp, ocol, n), None  # edge_index: csr_to_edge_index on first access
        if pub is not None:
            m = pub.to(torch.bool)
            d_star_t = torch.where(m, torch.full_like(d_star_t, float("nan")), d_star_t)
            q_t = torch.where(m, torch.full_like(q_t, float("nan")), q_t)
    else:
        # lines 1-2: noisy degrees on the grid, CellRng(seed, DPRR_DEGREE, i, 0); lines 3-7: p,
        # q_i (eq. 6) + Proj and the per-bit probabilities of eq. (7) (edges::dprr_probs)
        noise = np.empty((n, 1), dtype=np.int64)
        k.fill_discrete_laplace(noise, seed, int(Stream.DPRR_DEGREE), 0, t, s)
        rp = csr.rowptr.contiguous().numpy()
        d_star, q, p_true, p_false = (np.empty(n, dtype=np.float64) for _ in range(4))
        k.dprr_probs(rp, noise[:, 0].copy(), g, p, pm, d_star, q, p_true, p_false)
        del noise
        noisy, ei = _rr_sample_ei(csr, p_true, p_false, seed, streams=streams, public=pub, by_degree=True,
                                  backend=backend, layout=0 if edge_index and symmetrize == "none" else None)
        del p_true, p_false
        if pub.size:
            m = pub.astype(bool)
            d_star[m] = np.nan
            q[m] = np.nan
        d_star_t, q_t = torch.from_numpy(d_star), torch.from_numpy(q)
    spent = Spent(
        mechanism="dprr",
        target="edges",
        eps=eps1_used + eps2,
        guarantee=_GUARANTEE,
        params={
            "eps": eps, "eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "p": p, "flip_prob": pm, "granularity": g, "dlap_t": t, "dlap_s": s, "n": n, "n_max": n_max, "alpha": alpha,
            "allocation": allocation, "num_public": _num_public(pub),
            "symmetrize": symmetrize,
        },
    )
    res = EdgeLDPResult(noisy=noisy, noisy_degrees=noisy.degrees(), d_star=d_star_t, q=q_t, spent=spent,
                        symmetrize=symmetrize, backend=backend_name)
    res._edge_index = ei
    return res


def _bit_probs(d_star: np.ndarray, n: int, eps2: float):
    """(p, 1-p, q, p q, (1-p) q): RR probabilities, eq. (6) + Proj, and eq. (7) per user.

    The NumPy reference of the kernels' ``dprr_probs`` (``edges::dprr_probs`` in
    ``csrc/common/edges.h``, which :func:`dprr` runs on every backend; tests check the bits
    agree); the benchmarks use it to reproduce DPRR's probabilities."""
    p, pm = _rr_probs(eps2)
    q = _q_of(d_star, n, p, pm)
    return p, pm, q, p * q, pm * q


def _q_of(d_star: np.ndarray, n: int, p: float, pm: float) -> np.ndarray:
    """Eq. (6) with Proj onto [0, 1]; q = 0 where d* <= 0.  (p - pm) is 2p - 1."""
    pos = d_star > 0
    ds = np.where(pos, d_star, 1.0)
    q = ds / (ds * (p - pm) + (n - 1) * pm)
    q = np.where(pos, q, 0.0)
    return np.clip(q, 0.0, 1.0)


# --------------------------------------------------------------------------------------------
# Warner's RR
# --------------------------------------------------------------------------------------------
def expected_rr_output(csr: CSR, eps: float, public=None) -> float:
    """Expected number of directed entries Warner's RR outputs: sum_i d_i p + (n-1-d_i)(1-p)
    over the private users, plus d_i for the public ones.  Computed from exact integer sums
    (degree totals, user counts), so it is the same double on every device."""
    n = csr.num_nodes
    p, pm = _rr_probs(eps)
    deg = csr.degrees()
    if isinstance(public, torch.Tensor) and public.numel():
        m = public.to(torch.bool)
    elif not isinstance(public, torch.Tensor) and public is not None and len(public):
        m = torch.from_numpy(np.asarray(public).astype(bool))
    else:
        m = None
    total = int(deg.sum())
    pub_deg = int(deg[m].sum()) if m is not None else 0
    n_priv = n - (int(m.sum()) if m is not None else 0)
    priv_deg = total - pub_deg
    return p * priv_deg + pm * ((n - 1) * n_priv - priv_deg) + pub_deg


def rr_edges(
    graph,
    eps: float,
    seed: int | None = None,
    max_output_edges: int = 50_000_000,
    public=None,
    symmetrize: str = DEFAULT_SYMMETRIZE,
    backend: str | None = None,
) -> EdgeLDPResult:
    """Warner's randomized response on every bit of every neighbour list (paper section V-A).

    Each ``a_ij`` (``j != i``) is kept with probability ``p = e^eps / (e^eps + 1)`` and flipped
    otherwise; ``eps``-edge LDP (section III-B).  Same sparse sampler as :func:`dprr` (true
    edges kept w.p. ``p``, false edges by geometric skips w.p. ``1 - p``), but the output
    itself has about ``n (n-1) / (e^eps + 1)`` entries: it is refused when the expected size
    exceeds ``max_output_edges`` (raise it to proceed).

    Parameters
    ----------
    graph, seed, public, symmetrize, backend
        As in :func:`dprr`.
    eps : float
        Budget per user.
    max_output_edges : int
        Upper bound on the expected number of directed output entries.
    """
    eps = check_eps("eps", eps)
    return _rr_edges(_graph_csr(graph, backend), eps, seed, max_output_edges, public, symmetrize, backend)


def _rr_edges(csr: CSR, eps: float, seed, max_output_edges, public, symmetrize, backend,
              edge_index: bool = False) -> EdgeLDPResult:
    """:func:`rr_edges` on a checked CSR and ``eps`` (``edge_index``: as :func:`_dprr`)."""
    n = csr.num_nodes
    dev = _device(csr)
    pub = _public_for(public, n, csr, dev)
    max_output_edges = check_int("max_output_edges", max_output_edges, lo=0)
    symmetrize = _check_rule(symmetrize)
    expected = expected_rr_output(csr, eps, pub)
    if expected > max_output_edges:
        item = csr.col.element_size()
        raise ValueError(
            f"rr_edges: Warner's RR would output about {expected:.4g} directed edges for n={n} at eps={eps:g} "
            f"(flip probability {1.0 / (1.0 + math.exp(eps)):.4g}): ~{expected * item / 2**30:.3g} GiB as CSR "
            f"columns, ~{expected * 16 / 2**30:.3g} GiB as a PyG edge_index; this exceeds max_output_edges="
            f"{max_output_edges}. RR makes a sparse graph dense (O(n^2) output, paper section IV-F); pass a "
            f"larger max_output_edges to run it anyway, or use dprr().")
    seed = resolve_seed(seed)
    p, pm = _rr_probs(eps)
    num_public = _num_public(pub)
    if dev == "cuda":
        k = _backend.get(dev, backend)
        rp = csr.rowptr
        full = [torch.full((n,), v, dtype=torch.float64, device=rp.device) for v in (p, pm)]
        orp, ocol = k.edges_rr(rp.contiguous(), csr.col.contiguous(), seed, int(Stream.RR_EDGES), 0,
                               int(Stream.RR_EDGES), 1, full[0], full[1], pub)
        noisy, ei = CSR(orp, ocol, n), None
    else:
        noisy, ei = _rr_sample_ei(csr, np.full(n, p), np.full(n, pm), seed,
                                  streams=(Stream.RR_EDGES, 0, Stream.RR_EDGES, 1), public=pub, by_degree=False,
                                  backend=backend, layout=0 if edge_index and symmetrize == "none" else None)
    spent = Spent(
        mechanism="rr_edges", target="edges", eps=eps, guarantee=_GUARANTEE,
        params={"eps": eps, "p": p, "flip_prob": pm, "n": n, "expected_output": expected,
                "num_public": num_public, "symmetrize": symmetrize},
    )
    res = EdgeLDPResult(noisy=noisy, noisy_degrees=noisy.degrees(), d_star=None, q=None, spent=spent,
                        symmetrize=symmetrize, backend=_backend.resolve(dev, backend))
    res._edge_index = ei
    return res


# --------------------------------------------------------------------------------------------
# LocalLap
# --------------------------------------------------------------------------------------------
def _tail(r: float, tau: float) -> float:
    """P[L >= tau] for the discrete Laplace P[L = k] ~ exp(-r |k|), tau an integer (or -inf)."""
    if tau == -math.inf:
        return 1.0
    if tau >= 1:
        return math.exp(-r * tau) / (1.0 + math.exp(-r))
    return 1.0 - math.exp(-r * (1.0 - tau)) / (1.0 + math.exp(-r))


def _threshold(r: float, n0: int, target: float) -> float:
    """Largest integer tau with n0 * P[L >= tau] >= target (-inf if even tau = -inf is short)."""
    if target >= n0:
        return -math.inf
    frac = target / n0
    if _tail(r, 1) >= frac:
        tau = math.floor(-math.log(frac * (1.0 + math.exp(-r))) / r)
    else:
        tau = math.floor(1.0 + math.log((1.0 - frac) * (1.0 + math.exp(-r))) / r)
    tau = max(tau, -(2**62))
    while tau > -(2**62) and n0 * _tail(r, tau) < target:
        tau -= 1
    while n0 * _tail(r, tau + 1) >= target:
        tau += 1
    return float(tau)


def local_laplace(graph, eps: float, seed: int | None = None, backend: str | None = None,
                  max_dense_entries: int = 200_000_000, _target: float | None = None) -> EdgeLDPResult:
    """LocalLap: the local-model LAPGRAPH baseline of the paper (section V-A).

    Each user sends ``d*_i = d_i + Lap(1/eps1)`` and ``a_ij + Lap(1/eps2)`` for ``j > i``
    (upper-triangular part of ``A``); the server sets ``T = sum_i d*_i / 2`` (floored and
    clipped to [0, n(n-1)/2], as in the authors' code) and keeps the ``T`` largest noisy
    entries as undirected edges.  ``eps1 = eps/10``, ``eps2 = 9 eps/10`` (paper).
    ``(eps1_used + eps2_used)``-edge LDP; both noises are exact discrete Laplace on the
    ``2^-10`` grid (module docstring).

    The ``n(n-1)/2`` entries are not enumerated.  The top ``T`` is drawn exactly from the
    same law: for a threshold ``tau`` with ``N0 P[L >= tau] >= T + 10 sqrt(T) + 100``
    (``N0`` = number of zero entries), the zero entries above ``tau`` are found by skip
    sampling with probability ``P[L >= tau]`` (their values drawn from the law of ``L``
    given ``L >= tau``), the true edges get their noise directly, and the ``T`` largest of
    these candidates are kept (ties at the boundary broken uniformly at random).  If fewer
    than ``T`` candidates come out (probability below ``e^-50``), ``tau`` is lowered and only
    the remaining entries are sampled, conditioned on lying below the previous threshold,
    so the result has the law of the dense algorithm, up to the skip sampler's gaps: they are
    within relative ``2^-49`` of Geometric(``P[L >= tau]``) factor by factor (``geom_draw``,
    module docstring), so every likelihood ratio is within ``e^(+-2^-46)`` of the dense
    algorithm's, the same negligible factor as RR's false edges.  Time O(|E| + n + T) expected;
    a final dense round (``tau = -inf``), needed only when ``T`` is close to ``n(n-1)/2``,
    visits every entry and is refused above ``max_dense_entries``.

    Returns
    -------
    EdgeLDPResult
        ``noisy`` is the undirected output graph; ``d_star`` the noisy degrees; ``q`` None.
    """
    eps = check_eps("eps", eps)
    return _local_laplace(_graph_csr(graph, backend), eps, seed, backend, max_dense_entries, _target)


def _local_laplace(csr: CSR, eps: float, seed, backend, max_dense_entries=200_000_000,
                   _target=None) -> EdgeLDPResult:
    """:func:`local_laplace` on a checked CSR and ``eps``.  A CUDA graph stays on the device:
    the kernels run there, the candidates and the top-T selection too (``_top_t_mask``); the
    host reads sizes and counts only (T, each round's number of candidates, the ties)."""
    n = csr.num_nodes
    max_dense_entries = check_int("max_dense_entries", max_dense_entries, lo=0)
    seed = resolve_seed(seed)
    dev = _device(csr)
    on_dev = dev == "cuda"
    k = _backend.get(dev, backend)
    eps1 = eps / 10.0
    eps2 = eps - eps1  # = 9 eps / 10 up to rounding
    g1, t1, s1, eps1_used = _grid("eps1", eps1)
    g2, t2, s2, eps2_used = _grid("eps2", eps2)
    while eps1_used + eps2_used > eps:  # floating point: never spend more than eps
        eps2 = math.nextafter(eps2, 0.0)
        g2, t2, s2, eps2_used = _grid("eps2", eps2)
    G1, G2 = round(1.0 / g1), round(1.0 / g2)
    r2 = s2 / t2  # rate per grid step of the entry noise
    # kernel arguments: tensors on the device, arrays on the host
    arr = (lambda t: t.contiguous()) if on_dev else (lambda t: t.contiguous().numpy())
    rp, col = csr.rowptr.contiguous(), csr.col.contiguous()
    dv = rp.device

    # noisy degrees, CellRng(seed, LOCALLAP, i, 0); T exactly, in integer arithmetic
    noise = torch.empty((n, 1), dtype=torch.int64, device=dv)
    k.fill_discrete_laplace(arr(noise), seed, int(Stream.LOCALLAP), 0, t1, s1)
    deg = csr.degrees()
    d_star = deg.to(torch.float64) + g1 * noise[:, 0].to(torch.float64)
    total_units = int(deg.sum()) * G1 + int(noise.sum())
    N = n * (n - 1) // 2
    T = min(max(total_units // (2 * G1), 0), N)
    del noise

    # true upper-triangular entries: 1 + noise (grid units), CellRng(seed, LOCALLAP, i, j)
    ones_val = torch.empty(col.numel(), dtype=torch.int64, device=dv)
    k.locallap_edge_values(arr(rp), arr(col), seed, t2, s2, G2, arr(ones_val))
    E_u = csr.nnz // 2
    N0 = N - E_u
    base_target = T + 10.0 * math.sqrt(T) + 100.0 if _target is None else float(_target)  # tests force rounds

    excl = csr  # rows listing the excluded positions (entries <= i are ignored by the kernel)
    rounds: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    hi, prev_tau, prev_tail = _I64_MAX, math.inf, 0.0
    zero_count, rnd = 0, 0
    while True:
        tau = _threshold(r2, N0, base_target * 4.0**rnd)
        if tau >= prev_tau:  # threshold did not move: ask for more next round
            rnd += 1
            continue
        if tau == -math.inf:
            lo, pi = _I64_MIN, 1.0
            rest = N0 - zero_count
            if rest > max_dense_entries:
                raise RuntimeError(
                    f"local_laplace: T={T} needs a dense pass over {rest} remaining zero entries (more than "
                    f"max_dense_entries={max_dense_entries}); T is close to n(n-1)/2 = {N}")
        else:
            lo = int(tau)
            pi = min(1.0, (_tail(r2, tau) - prev_tail) / (1.0 - prev_tail))
        if on_dev:
            orp, zc, zv = k.locallap_zero(excl.rowptr.contiguous(), excl.col.contiguous(), seed, rnd, pi, lo, hi,
                                          t2, s2)
        else:
            orp = torch.empty(n + 1, dtype=torch.int64)
            erp, ecol = excl.rowptr.contiguous().numpy(), excl.col.contiguous().numpy()
            sample = k.locallap_zero_sample(erp, ecol, seed, rnd, pi, lo, hi, t2, s2, orp.numpy())
            zc = torch.empty(sample.nnz, dtype=excl.col.dtype)
            zv = torch.empty(sample.nnz, dtype=torch.int64)
            sample.write(zc.numpy(), zv.numpy(), np.empty(0, dtype=np.int64), 0)
        rounds.append((orp, zc, zv))
        zero_count += zc.numel()
        # true upper entries above the threshold (entries j <= i hold INT64_MIN: below every
        # threshold but the dense round's, which takes every upper entry)
        ones_cand = ones_val >= lo if lo != _I64_MIN else ones_val != _I64_MIN
        ones_above = int(torch.count_nonzero(ones_cand))  # (a bool sum is 20x slower on CPU)
        if zero_count + ones_above >= T or tau == -math.inf:
            break
        # rare (probability < e^-50): lower the threshold; exclude this round's picks and draw
        # the remaining entries conditioned on lying below the current threshold
        excl = _csr_union(excl, CSR(orp, zc, n), backend)
        hi, prev_tau, prev_tail = lo, tau, _tail(r2, tau)
        rnd += 1

    # candidates (row < col, value), in the order round 0, 1, ..., true edges (the tie-break
    # of _top_t_mask counts ties in this order); then the T largest
    idx = torch.nonzero(ones_cand).flatten()
    vals = torch.cat([zv for _, _, zv in rounds] + [ones_val[idx]])
    del ones_val, ones_cand
    keep = _top_t_mask(vals, T, seed)
    # each source's kept entries as a CSR (rows sorted); the sources are disjoint (a round
    # excludes the true edges and earlier picks), so their union is the kept upper triangle U
    kept, off = [], 0
    for orp, zc, _ in rounds:
        kept.append(_masked_csr(orp, zc, keep[off:off + zc.numel()], n))
        off += zc.numel()
    kept.append(_masked_csr(torch.searchsorted(idx, rp), col[idx], keep[off:], n))
    U = kept[0]
    for part in kept[1:]:
        U = _csr_union(U, part, backend)
    if n <= INT32_MAX and U.col.dtype != torch.int32:  # as to_csr would store it
        U = CSR(U.rowptr, U.col.to(torch.int32), n)
    # undirected output: row i = (U^T row i, all < i) then (U row i, all > i)
    out = _csr_combine(graph_transpose(U, backend=backend), U, _COMBINE_MODE["lower"], backend)
    spent = Spent(
        mechanism="locallap", target="edges", eps=eps1_used + eps2_used, guarantee=_GUARANTEE,
        params={"eps": eps, "eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "eps2_used": eps2_used,
                "granularity_degree": g1, "granularity_entries": g2, "T": T, "n": n,
                "threshold": lo, "threshold_rounds": len(rounds), "candidates": int(vals.shape[0])},
    )
    return EdgeLDPResult(noisy=out, noisy_degrees=out.degrees(), d_star=d_star, q=None,
                         spent=spent, symmetrize="symmetric", backend=_backend.resolve(dev, backend))


def _csr_union(a: CSR, b: CSR, backend: str | None = None) -> CSR:
    """Row-wise union of two CSRs with sorted rows (O(|A| + |B| + n))."""
    return _csr_combine(a, b, _COMBINE_MODE["or"], backend)


def _csr_combine(a: CSR, b: CSR, mode: int, backend: str | None = None) -> CSR:
    """Row-wise combination of two CSRs with sorted rows (``csr_combine`` modes; count, fill)."""
    n = a.num_nodes
    dev = _backend.device_of(a.rowptr, a.col, b.rowptr, b.col)
    k = _backend.get(dev, backend)
    if dev == "cuda":
        orp, oc = k.csr_combine(a.rowptr.contiguous(), a.col.contiguous(), b.rowptr.contiguous(),
                                b.col.to(a.col.dtype).contiguous(), mode)
        return CSR(orp, oc, n)
    ca = a.col.contiguous().numpy()
    cb = b.col.to(a.col.dtype).contiguous().numpy()
    ra, rb = a.rowptr.contiguous().numpy(), b.rowptr.contiguous().numpy()
    orp = torch.empty(n + 1, dtype=torch.int64)
    k.csr_combine(ra, ca, rb, cb, mode, orp.numpy(), np.empty(0, dtype=ca.dtype), False)
    np.cumsum(orp.numpy(), out=orp.numpy())
    oc = torch.empty(int(orp[n]), dtype=a.col.dtype)
    k.csr_combine(ra, ca, rb, cb, mode, orp.numpy(), oc.numpy(), True)
    return CSR(orp, oc, n)


def _masked_csr(rowptr: torch.Tensor, col: torch.Tensor, mask: torch.Tensor, n: int) -> CSR:
    """The entries of a CSR (rowptr, col) where ``mask`` (bool, aligned with col) is set
    (torch ops: runs where the tensors are; on the CPU NumPy's, the same values: torch's
    boolean indexing and bool cumsum are 3x to 8x slower there on one core)."""
    if _backend.device_of(rowptr, col, mask) == "cpu":
        cs = np.zeros(mask.numel() + 1, dtype=np.int64)
        m = mask.contiguous().numpy()
        np.cumsum(m, out=cs[1:])
        return CSR(torch.from_numpy(cs)[rowptr].contiguous(), torch.from_numpy(col.contiguous().numpy()[m]), n)
    cs = torch.zeros(mask.numel() + 1, dtype=torch.int64, device=mask.device)
    torch.cumsum(mask, 0, out=cs[1:])
    return CSR(cs[rowptr].contiguous(), col[mask].contiguous(), n)


def _tie_choice(n_ties: int, need: int, seed: int) -> np.ndarray:
    """Sorted ranks (among the ties, in index order) of the ``need`` tied candidates kept:
    ``need`` of ``n_ties`` without replacement from NumPy's Philox keyed by (seed, a LocalLap
    tag), the same on every backend and device (it sees only the two counts)."""
    rng = np.random.Generator(np.random.Philox(key=(int(seed) << 64) | 0x4C6F63616C4C6170))
    return np.sort(rng.choice(n_ties, size=need, replace=False))


def _kth_smallest(vals: torch.Tensor, kk: int) -> torch.Tensor:
    """The ``kk``-th smallest value (1-based), exactly ``torch.kthvalue(vals, kk)``.

    LocalLap keeps all but a few of its candidates (``kk = C - T + 1`` is about
    ``10 sqrt(T)``), so the quickselect runs on the values at most ``q``, a value that a
    strided sample puts a little above the answer: when at least ``kk`` values are ``<= q``
    the kk smallest are all among them.  Otherwise (a sample far off) the whole tensor."""
    C = vals.numel()
    if kk > C // 8:
        return torch.kthvalue(vals, kk).values
    stride = max(1, kk // 1000)
    samp = vals[::stride]
    q = torch.kthvalue(samp, min(samp.numel(), int(1.5 * kk / stride) + 64)).values
    sub = vals[vals <= q]
    if sub.numel() < kk:
        return torch.kthvalue(vals, kk).values
    return torch.kthvalue(sub, kk).values


def _top_t_mask(vals: torch.Tensor, T: int, seed: int) -> torch.Tensor:
    """Mask of the T largest values; ties at the boundary broken uniformly at random.

    Deterministic on every device: the boundary value ``v*`` (the T-th largest; values are
    exact int64) from a sort, ``vals > v*`` kept, and ``need`` of the tied positions, taken in
    index order, chosen by :func:`_tie_choice` (host, from the counts only).
    """
    C = vals.numel()
    if T <= 0:
        return torch.zeros(C, dtype=torch.bool, device=vals.device)
    if T >= C:
        return torch.ones(C, dtype=torch.bool, device=vals.device)
    vstar = _kth_smallest(vals, C - T + 1)  # the (C-T)-th smallest, 0-based
    keep = vals > vstar
    ties = torch.nonzero(vals == vstar).flatten()
    need = T - int(torch.count_nonzero(keep))
    sel = torch.from_numpy(_tie_choice(ties.numel(), need, seed)).to(vals.device)
    keep[ties[sel]] = True
    return keep
