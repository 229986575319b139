"""HeterPoisson sub-graph sampling (node-level DP-SGD for GNNs).

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks", IEEE S&P 2024, Algorithm 2 (HeterPoisson),
Algorithm 3 (NeighborSampling) and section 4.4 (inference privacy).

One step of :class:`HeterPoisson` returns a batch of sub-graphs ``G = {G_i}``:

1. every candidate node ``i`` (the training nodes) becomes a *central* node independently
   with probability ``q_b`` (Alg. 2 lines 3-6);
2. every neighbour ``j in NB(i)`` (``j -> i`` is an edge) of a central node joins ``G_i`` as a
   *peripheral* node independently with probability ``min(1, M / D_ot(j))``, ``D_ot(j)`` the
   out-degree of ``j`` in the whole graph (Alg. 3), so that a node is expected to appear as a
   peripheral node ``q_b M`` times per step whatever its degree;
3. ``G_i`` is the sub-graph induced on ``{i} + N_i`` (Alg. 2 line 10);
4. a peripheral node that is itself a central node at this step never carries its
   information into another sub-graph (Alg. 2 lines 14-23): ``overlap="drop"`` (default)
   removes it from the other sub-graphs, ``overlap="zero"`` keeps it with an all-zero feature
   row, the literal text of line 20.

Which degrees (``degree_model``; the neighbouring relation, see
:mod:`ldpfast.privacy.accountants`):

* ``"s2_public_degrees"`` (default): ``D_ot(j)`` is the out-degree of ``j`` in the *whole*
  graph, public and fixed (the paper's model S2, Definition 4).  When ``data`` is only the
  training graph (inductive setting), pass the whole graph's out-degrees as ``out_degree``
  (:func:`out_degrees`); computing them on a graph that changes with the differing node lets
  that node change other nodes' sampling probabilities.
* ``"public_bound"`` (``degree_bound = D_pub``): every node joins with the constant
  probability ``min(1, M / D_pub)``, so a node influences only the sub-graphs that contain
  it, also when the structure is private.  The guarantee holds over graphs in which every
  node points to at most ``D_pub`` candidate central nodes; the sampler refuses other
  graphs (ValueError naming ``degree_bound``).  ``D_pub`` must be fixed without looking at
  the private graph.

Why ``drop`` is the default: Theorem 2's proof (case 1, Appendix B.1) needs the sub-graphs
of ``G'`` and ``G*`` to differ in the sub-graph centred on the differing node only.  With
zeroed features the node still sits in other sub-graphs with its edges, which changes the
degree normalisation of GCN / the mean of SAGE there (the paper says "modify this node to
be NULL"); dropping it makes those sub-graphs identical, so the sensitivity really is ``C``.
The authors' code also drops it.

The sub-graphs are returned as one block-diagonal graph (:class:`SubgraphBatch`): ``x``,
``edge_index`` with local ids, the node map ``n_id``, the sub-graph pointer ``ptr`` (central
node of sub-graph ``b`` at local index ``ptr[b]``), a PyG-style ``batch`` vector.

Kernels: ``csrc/cpu/sampling.cpp`` (Numba twin ``ldpfast/_numba/sampling.py``); for CUDA
data (``edge_index`` / ``data.csr`` on a GPU) :meth:`HeterPoisson.sample` and
:meth:`HeterPoisson.central` and :func:`inference_subgraphs` run ``csrc/cuda/sampling.cu``
(bodies shared with the C++ build in ``csrc/common/sampling.h``, so the same bits) and keep
the batch on the device.  Randomness
is counter-addressed (a node's central trial at step ``t`` is
``CellRng(seed, STREAM_HETER_CENTRAL, node, t)``, a peripheral trial is addressed by the CSR
position of the edge and ``t``), so a step's batch depends only on ``(seed, t)`` and the
graph: not on the thread count or the backend.  Work per step: one cheap trial per
candidate plus one per neighbour of the ``q_b |V|`` expected central nodes; the expected
output size is ``O(q_b |V| M)`` nodes.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from .. import _backend, _buckets
from .._checks import check_int, check_mask, check_prob, check_real
from ..graph import CSR, _cached_graph, to_csr
from ..privacy.accountants import check_degree_model, privacy_model
from ..rng import resolve_seed

__all__ = ["HeterPoisson", "SubgraphBatch", "candidate_out_degree", "inference_subgraphs", "neighbour_csr",
           "out_degrees", "singleton_batch"]

STEP_MAX = 2**32 - 1
OVERLAP_MODES = ("drop", "zero")


@dataclass
class SubgraphBatch:
    """A batch of sub-graphs as one block-diagonal graph (PyG conventions).

    Attributes
    ----------
    x : torch.Tensor or None
        ``(N, d)`` features of the batch nodes (``data.x[n_id]``; rows of peripheral nodes
        that are central elsewhere are zero when ``overlap="zero"``).
    edge_index : torch.Tensor
        ``(2, E)`` int64, local ids in ``[0, N)``; edges never cross sub-graphs.
    n_id : torch.Tensor
        ``(N,)`` int64 global id of every batch node (the node map).
    ptr : torch.Tensor
        ``(B + 1,)`` int64 sub-graph pointer: sub-graph ``b`` holds local nodes
        ``ptr[b] .. ptr[b+1]-1``, its central node first.
    batch : torch.Tensor
        ``(N,)`` int64 sub-graph id of every node.
    center : torch.Tensor
        ``(B,)`` int64 local index of each sub-graph's central node (``ptr[:-1]``).
    y : torch.Tensor or None
        ``(B,)`` labels of the central nodes.
    zeroed : torch.Tensor
        ``(N,)`` bool, peripheral nodes whose features were zeroed (Alg. 2 line 20).
    step : int
        The step (or inference round) this batch was drawn for.
    size_bins : tuple of int or None
        Host copy of the histogram of the sub-graph sizes' power-of-two bins
        (:mod:`ldpfast._buckets`), read by the CUDA sampler with the batch sizes so that
        per-sub-graph clipping needs no host read of its own; None: not known.
    """

    x: torch.Tensor | None
    edge_index: torch.Tensor
    n_id: torch.Tensor
    ptr: torch.Tensor
    batch: torch.Tensor
    center: torch.Tensor
    y: torch.Tensor | None
    zeroed: torch.Tensor
    step: int
    size_bins: tuple[int, ...] | None = None

    @property
    def num_subgraphs(self) -> int:
        return int(self.ptr.numel() - 1)

    @property
    def num_nodes(self) -> int:
        return int(self.n_id.numel())

    @property
    def central_nodes(self) -> torch.Tensor:
        """Global ids of the central nodes, ascending."""
        return self.n_id[self.center]

    def sizes(self) -> torch.Tensor:
        """Number of nodes of every sub-graph."""
        return self.ptr[1:] - self.ptr[:-1]

    def subgraph(self, b: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``(n_id, edge_index)`` of sub-graph ``b`` alone, local ids from 0."""
        b = check_int("b", b, 0, self.num_subgraphs - 1)
        lo, hi = int(self.ptr[b]), int(self.ptr[b + 1])
        m = (self.edge_index[1] >= lo) & (self.edge_index[1] < hi)
        return self.n_id[lo:hi], self.edge_index[:, m] - lo

    def split(self, max_subgraphs: int) -> list[SubgraphBatch]:
        """The batch cut into consecutive batches of at most ``max_subgraphs`` sub-graphs
        (at least one, empty for an empty batch): the physical batches of one logical batch
        (:class:`ldpfast.privacy.BatchMemoryManager`).  Each holds whole sub-graphs, so the
        per-sub-graph gradients, and their clipped sums added up, are those of the batch.
        """
        m = check_int("max_subgraphs", max_subgraphs, 1)
        B = self.num_subgraphs
        if B <= m:
            return [self]
        ptr = self.ptr.tolist()  # one host read of B + 1 offsets
        src = self.edge_index[0]
        out = []
        for b0 in range(0, B, m):
            b1 = min(B, b0 + m)
            lo, hi = ptr[b0], ptr[b1]
            keep = (src >= lo) & (src < hi)  # no edge crosses two sub-graphs
            sub_ptr = self.ptr[b0:b1 + 1] - lo
            sizes = sub_ptr[1:] - sub_ptr[:-1]
            bins = (tuple(_buckets.bin_histogram(_buckets.size_bins(sizes)).tolist())
                    if self.size_bins is not None else None)
            out.append(SubgraphBatch(
                x=None if self.x is None else self.x[lo:hi], edge_index=self.edge_index[:, keep] - lo,
                n_id=self.n_id[lo:hi], ptr=sub_ptr, batch=self.batch[lo:hi] - b0, center=sub_ptr[:-1].clone(),
                y=None if self.y is None else self.y[b0:b1], zeroed=self.zeroed[lo:hi], step=self.step,
                size_bins=bins))
        return out

    def to_data(self):
        """The batch as a ``torch_geometric.data.Data`` (same tensors, no copy)."""
        from torch_geometric.data import Data

        return Data(x=self.x, edge_index=self.edge_index, n_id=self.n_id, ptr=self.ptr,
                    batch=self.batch, center=self.center, y=self.y, zeroed=self.zeroed,
                    num_nodes=self.num_nodes)


def singleton_batch(data, nodes: torch.Tensor, step: int = 0) -> SubgraphBatch:
    """A :class:`SubgraphBatch` of one-node sub-graphs, one per node of ``nodes`` (global
    ids, on the device of ``data``), without edges: the examples of naive node-level DP-SGD
    (the baseline of the paper's Table II), where each example is one node's features and
    label."""
    B = int(nodes.numel())
    dev = nodes.device
    ar = torch.arange(B, device=dev)
    return SubgraphBatch(x=data.x[nodes], edge_index=torch.zeros(2, 0, dtype=torch.long, device=dev),
                         n_id=nodes.clone(), ptr=torch.arange(B + 1, device=dev), batch=ar, center=ar.clone(),
                         y=data.y[nodes], zeroed=torch.zeros(B, dtype=torch.bool, device=dev), step=int(step))


def _node_set(name: str, nodes, n: int) -> torch.Tensor:
    """A bool mask (n,), a copy, from a bool mask or node ids (tensor or sequence;
    :func:`ldpfast._checks.check_mask`)."""
    if nodes is None:
        return torch.ones(n, dtype=torch.bool)
    m = check_mask(name, torch.as_tensor(nodes), n)
    return m.clone() if m is nodes else m


def neighbour_csr(data, *, backend: str | None = None) -> CSR:
    """CSR of the neighbour lists ``NB(i) = {j : (j -> i) in E}`` (rows sorted, deduplicated,
    self loops dropped).

    For a graph stored only as ``data.csr`` (large synthetic graphs, undirected) that CSR is
    used as is; PyG's ``adj_t`` (``T.ToSparseTensor()``) is read when there is no
    ``edge_index``.  The result is cached on ``data`` (keyed like :func:`ldpfast.graph.csr_of`).
    """
    if getattr(data, "edge_index", None) is None:
        csr = getattr(data, "csr", None)
        if isinstance(csr, CSR):
            return csr
    return _cached_graph(data, "_ldpfast_nb_csr", lambda ei, n: to_csr(ei.flip(0), n, symmetrize=False, backend=backend))


def _out_degree(csr: CSR) -> torch.Tensor:
    # entry (i, j) of the neighbour CSR is the edge j -> i: count j's occurrences
    return torch.bincount(csr.col, minlength=csr.num_nodes).to(torch.int64)


def out_degrees(data, *, backend: str | None = None) -> torch.Tensor:
    """``D_ot`` of every node of ``data`` (int64, ``(n,)``; self loops and duplicate edges
    not counted), Alg. 3 line 5.  Under model S2 call it on the *whole* graph and pass the
    result (restricted to the training nodes) as ``out_degree`` when sampling on the
    training graph only."""
    return _out_degree(neighbour_csr(data, backend=backend))


def candidate_out_degree(csr: CSR, cand: torch.Tensor, allow: torch.Tensor | None = None) -> torch.Tensor:
    """Number of sub-graphs every node can join per step: its out-neighbours among the
    candidate central nodes (``cand``: bool ``(n,)``), 0 for nodes not allowed as peripheral
    (``allow``: bool ``(n,)`` or None).  The bound the ``"public_bound"`` model assumes."""
    n = csr.num_nodes
    row = torch.repeat_interleave(torch.arange(n, device=csr.rowptr.device), csr.rowptr[1:] - csr.rowptr[:-1])
    col = csr.col.to(torch.int64)
    m = cand[row] & (col != row)  # the kernel skips self loops
    d = torch.bincount(col[m], minlength=n).to(torch.int64)
    if allow is not None:
        d = torch.where(allow, d, torch.zeros_like(d))
    return d


def _check_step(step) -> int:
    return check_int("step", step, 0, STEP_MAX)


def _check_part(part):
    if part is None:
        return None
    if not isinstance(part, tuple) or len(part) != 2:
        raise TypeError(f"part: expected a (rank, world_size) tuple, got {part!r}")
    W = check_int("part[1] (world size)", part[1], 1)
    r = check_int("part[0] (rank)", part[0], 0, W - 1)
    return r, W


def _share(centers, part):
    """Share ``part = (r, W)`` of the ascending central nodes: ``[r B // W, (r + 1) B // W)``."""
    if part is None:
        return centers
    r, W = part
    B = centers.shape[0]
    return centers[r * B // W:(r + 1) * B // W]


def _edges(k, csr: CSR, n_id: np.ndarray, node_ptr: np.ndarray, induced: bool):
    B = node_ptr.shape[0] - 1
    counts = np.empty(B, dtype=np.int64)
    k.heter_edges(csr.rowptr.numpy(), csr.col.numpy(), n_id, node_ptr, bool(induced), counts,
                  np.empty(0, np.int64), np.empty(0, np.int64), False)
    edge_ptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(counts, out=edge_ptr[1:])
    src = np.empty(int(edge_ptr[B]), dtype=np.int64)
    dst = np.empty(int(edge_ptr[B]), dtype=np.int64)
    k.heter_edges(csr.rowptr.numpy(), csr.col.numpy(), n_id, node_ptr, bool(induced), edge_ptr,
                  src, dst, True)
    return torch.from_numpy(np.stack([src, dst]))


def _gather_rows(x: torch.Tensor, idx: np.ndarray, idx_t: torch.Tensor) -> torch.Tensor:
    # np.take is single-threaded and copies rows with memcpy: faster than torch's
    # index_select for these small batches, and immune to intra-op thread contention
    if x.device.type == "cpu" and not x.requires_grad and x.dtype in (torch.float32, torch.float64,
                                                                        torch.float16, torch.uint8,
                                                                        torch.int64, torch.int32, torch.bool):
        return torch.from_numpy(np.take(x.contiguous().numpy(), idx, axis=0))
    return torch.index_select(x, 0, idx_t.to(x.device))


def _assemble(data, n_id: np.ndarray, node_ptr: np.ndarray, zeroed: np.ndarray, edge_index,
              step: int, with_x: bool = True, counts: np.ndarray | None = None) -> SubgraphBatch:
    B = node_ptr.shape[0] - 1
    if counts is None:
        counts = np.diff(node_ptr)
    n_id_t = torch.from_numpy(n_id)
    ptr = torch.from_numpy(node_ptr)
    batch = torch.from_numpy(np.repeat(np.arange(B, dtype=np.int64), counts))
    z = torch.from_numpy(zeroed.view(bool))
    center = torch.from_numpy(node_ptr[:-1].copy())
    x = getattr(data, "x", None)
    if x is not None and with_x:
        x = _gather_rows(x, n_id, n_id_t)
        if zeroed.any():
            x[z] = 0
    else:
        x = None
    y = getattr(data, "y", None)
    if y is not None:
        y = torch.index_select(y, 0, torch.from_numpy(n_id[node_ptr[:-1]]))
    return SubgraphBatch(x=x, edge_index=edge_index, n_id=n_id_t, ptr=ptr, batch=batch,
                         center=center, y=y, zeroed=z, step=int(step))


def _assemble_dev(data, n_id, node_ptr, counts, zeroed, edge_index, step: int, with_x: bool,
                  size_bins: tuple[int, ...] | None = None) -> SubgraphBatch:
    """:func:`_assemble` for device tensors (torch ops where the tensors are, no host copy,
    no host read)."""
    B, total = node_ptr.numel() - 1, n_id.numel()
    batch = torch.repeat_interleave(torch.arange(B, dtype=torch.int64, device=n_id.device), counts,
                                    output_size=total)
    z = zeroed.bool()

    def near(t, other):  # features may live on another device than the graph
        return t if t.device == other.device else t.to(other.device)

    x = getattr(data, "x", None)
    if x is not None and with_x:
        x = torch.index_select(x, 0, near(n_id, x))
        # masked_fill_, not x[z] = 0: a boolean index would read its size on the host
        x.masked_fill_(near(z, x).view(-1, *([1] * (x.dim() - 1))), 0)
    else:
        x = None
    y = getattr(data, "y", None)
    if y is not None:
        y = torch.index_select(y, 0, near(n_id[node_ptr[:-1]], y))
    return SubgraphBatch(x=x, edge_index=edge_index, n_id=n_id, ptr=node_ptr, batch=batch,
                         center=node_ptr[:-1].clone(), y=y, zeroed=z, step=int(step), size_bins=size_bins)


class HeterPoisson:
    """HeterPoisson sampler (Alg. 2 + 3): an iterable over training steps.

    Parameters
    ----------
    data : torch_geometric.data.Data
        The whole graph ``G`` (``edge_index``: ``src -> dst``; or only ``data.csr`` for an
        undirected graph stored as CSR), optional ``x`` and ``y``.
    q_b : float
        Base sampling rate, in (0, 1]: probability that a candidate becomes a central node.
    M : float
        Neighbourhood sampling multiplier, > 0: a neighbour ``j`` joins with probability
        ``min(1, M / D_ot(j))`` (``min(1, M / degree_bound)`` under ``"public_bound"``).
    seed : int, optional
        64-bit seed; ``None`` draws a fresh one from the OS.  Step ``t``'s batch depends only
        on ``(seed, t)``.
    train_nodes : bool mask or index tensor, optional
        Candidates for central nodes (the sensitive training nodes; the input graph ``G^``
        of Alg. 2).  Default: every node.
    peripheral_nodes : bool mask or index tensor, optional
        Nodes allowed as peripheral nodes (default every node).  Pass the training nodes for
        the inductive setting when ``data`` is the whole graph.
    hops : int
        Neighbourhood depth; only 1 (Algorithm 2) is supported, because Theorem 2's
        accounting covers one-hop sampling only.
    num_steps : int, optional
        Number of steps ``T`` the iterator yields (required to iterate).
    overlap : {"drop", "zero"}
        Treatment of peripheral nodes that are central elsewhere (module docstring).
    induced : bool
        ``True``: the sub-graph induced on ``{i} + N_i`` (Alg. 2 line 10).  ``False``: only
        the edges between the central node and its peripheral nodes (a star).
    out_degree : torch.Tensor, optional
        ``D_ot`` of every node (int64, ``(n,)``, each >= the out-degree in ``data``); default
        the out-degree in ``data``, which is the whole graph's only when ``data`` is the whole
        graph.  Only with ``"s2_public_degrees"``.
    degree_model : {"s2_public_degrees", "public_bound"}
        Where the peripheral probabilities come from (module docstring).
    degree_bound : int, optional
        ``D_pub`` in ``[1, 2**31 - 1]``, required by (and only allowed with)
        ``"public_bound"``; must be >= every node's number of candidate out-neighbours
        (:func:`candidate_out_degree`).
    backend : str, optional
        ``"cpp"`` or ``"numba"`` (default automatic).

    Notes
    -----
    Privacy: with per-sub-graph clipping to ``C`` and Gaussian noise (Alg. 1), one step is
    dominated by the mixture of Gaussians of Theorem 2 *for the neighbouring relation*
    :attr:`privacy_model`; see :class:`ldpfast.privacy.accountants.HeterPoissonAccountant`
    (same ``degree_model`` / ``degree_bound``).
    """

    def __init__(self, data, q_b: float, M: float, seed: int | None = None, *, train_nodes=None,
                 peripheral_nodes=None, hops: int = 1, num_steps: int | None = None,
                 overlap: str = "drop", induced: bool = True, out_degree: torch.Tensor | None = None,
                 degree_model: str = "s2_public_degrees", degree_bound: int | None = None,
                 backend: str | None = None):
        self.q_b = check_prob("q_b", q_b, open_low=True)
        self.M = check_real("M", M, lo=0.0)
        if self.M <= 0:
            raise ValueError(f"M: expected a finite number > 0, got {M}")
        self.degree_model, self.degree_bound = check_degree_model(degree_model, degree_bound)
        if self.degree_model == "public_bound" and out_degree is not None:
            raise ValueError("out_degree: not used with degree_model='public_bound' (the probabilities must "
                             "not depend on degrees); leave it None")
        self.seed = resolve_seed(seed)
        hops = check_int("hops", hops, 1)
        if hops != 1:
            raise ValueError("hops: only hops=1 is supported (Algorithm 2 samples one-hop "
                             "neighbourhoods; Theorem 2's accounting does not cover more)")
        self.hops = hops
        if num_steps is not None:
            num_steps = check_int("num_steps", num_steps, 0, STEP_MAX + 1)
        self.num_steps = num_steps
        if overlap not in OVERLAP_MODES:
            raise ValueError(f"overlap: expected one of {OVERLAP_MODES}, got {overlap!r}")
        self.overlap = overlap
        if not isinstance(induced, bool):
            raise TypeError(f"induced: expected a bool, got {type(induced).__name__}")
        self.induced = induced
        self.backend = backend
        ei = getattr(data, "edge_index", None)
        # CUDA data (edge_index or data.csr on the GPU): the CUDA kernels, state on the device
        self._dev = _backend.device_of(ei if ei is not None else getattr(getattr(data, "csr", None), "rowptr", None))
        self._k = _backend.get(self._dev, backend)
        self.data = data
        self.csr = neighbour_csr(data, backend=backend)
        n = self.csr.num_nodes
        if n < 1:
            raise ValueError("data: the graph has no nodes")
        self.num_nodes = n
        cand = _node_set("train_nodes", train_nodes, n).to(self.csr.rowptr.device)
        self.cand_mask = cand.to(torch.uint8).contiguous()
        self.candidates = torch.nonzero(cand).flatten().contiguous()
        if self.candidates.numel() == 0:
            raise ValueError("train_nodes: no candidate central node")
        if peripheral_nodes is None:
            self.allow_mask = torch.empty(0, dtype=torch.uint8)
        else:
            self.allow_mask = _node_set("peripheral_nodes", peripheral_nodes, n).to(
                self.csr.rowptr.device, torch.uint8).contiguous()
        if self.degree_model == "public_bound":
            allow = None if peripheral_nodes is None else self.allow_mask.bool()
            dc = candidate_out_degree(self.csr, cand, allow)
            if int(dc.max()) > self.degree_bound:
                j = int(torch.argmax(dc))
                raise ValueError(
                    f"degree_bound: degree_model='public_bound' holds for graphs in which every node points to at "
                    f"most degree_bound candidate central nodes; node {j} points to {int(dc[j])}, so degree_bound "
                    f"must be in [{int(dc.max())}, {2**31 - 1}] for this graph, got {self.degree_bound}")
            # constant D_pub: the kernel's M / deg[j] is then M / D_pub for every node
            deg = torch.full((n,), self.degree_bound, dtype=torch.int64, device=self.csr.rowptr.device)
        elif out_degree is None:
            deg = _out_degree(self.csr)
        else:
            deg = torch.as_tensor(out_degree)
            if deg.device != self.csr.rowptr.device:
                deg = deg.to(self.csr.rowptr.device)
            if deg.dim() != 1 or deg.numel() != n or deg.dtype not in (torch.int32, torch.int64):
                raise ValueError(f"out_degree: expected an integer tensor of shape ({n},)")
            deg = deg.to(torch.int64)
            need = _out_degree(self.csr)
            if bool((deg < need).any()):
                raise ValueError("out_degree: must be >= the out-degree of every node in data")
        self.out_degree = deg.contiguous()
        self._cand_slots: torch.Tensor | None = None  # CUDA path: 1 + deg of every candidate

    @property
    def privacy_model(self) -> str:
        """The neighbouring relation under which the Theorem 2 accounting of these batches
        holds (:func:`ldpfast.privacy.accountants.privacy_model`)."""
        return privacy_model(self.degree_model, self.degree_bound)

    @property
    def peripheral_prob(self) -> torch.Tensor:
        """Exact probability (float64, ``(n,)``) that node ``j`` joins the sub-graph of a
        central node it points to: ``min(1, M / D_ot(j))`` (Alg. 3), ``min(1, M / D_pub)``
        under ``"public_bound"``."""
        d = self.out_degree.to(torch.float64)
        return torch.where(d > 0, torch.clamp(self.M / d.clamp_min(1.0), max=1.0), torch.ones_like(d))

    # ------------------------------------------------------------------ sampling
    @property
    def expected_batch_size(self) -> float:
        """Expected number of sub-graphs per step, ``q_b * #candidates``."""
        return self.q_b * int(self.candidates.numel())

    def central(self, step: int) -> torch.Tensor:
        """Global ids of the central nodes at ``step`` (ascending), Alg. 2 lines 3-6."""
        step = _check_step(step)
        if self._dev == "cuda":
            flags = torch.empty(self.candidates.numel(), dtype=torch.uint8, device=self.candidates.device)
            self._k.heter_central(self.candidates, self.seed, step, self.q_b, flags)
            return self.candidates[flags.bool()]
        cand = self.candidates.numpy()
        flags = np.empty(cand.shape[0], dtype=np.uint8)
        self._k.heter_central(cand, self.seed, step, self.q_b, flags)
        return torch.from_numpy(cand[flags.astype(bool)])

    def sample(self, step: int, *, with_x: bool = True, part: tuple[int, int] | None = None) -> SubgraphBatch:
        """The sub-graph batch of training step ``step`` (0-based, < 2**32).

        ``part = (r, W)``, ``0 <= r < W``: only the ``r``-th of ``W`` contiguous shares of the
        step's central nodes (ascending ids; share ``r`` is ``[r B // W, (r + 1) B // W)``).
        Each sub-graph depends only on ``(seed, step, centre)``, so the ``W`` shares together
        are exactly the whole batch (data-parallel training, :mod:`ldpfast.distributed.ddp`).
        """
        step = _check_step(step)
        part = _check_part(part)
        if self._dev == "cuda":
            return self._sample_cuda(step, with_x, part)
        cand = self.candidates.numpy()
        flags = np.empty(cand.shape[0], dtype=np.uint8)
        self._k.heter_central(cand, self.seed, step, self.q_b, flags)
        return self._build_cpu(step, _share(cand[flags.view(bool)], part), with_x)

    def subgraphs(self, step: int, centers: torch.Tensor, *, with_x: bool = True) -> SubgraphBatch:
        """The sub-graphs of the given central nodes at ``step`` (Alg. 2 lines 7-20 for
        every centre, peripheral nodes drawn as in :meth:`sample`).

        Not a Poisson sample: nothing here is accounted.  For debugging
        (``NodeDPEngine.make_private(poisson_sampling=False)``, marked non-private) and
        inspection.

        Parameters
        ----------
        step : int
            The step whose peripheral draws are used, in ``[0, 2**32)``.
        centers : torch.Tensor
            Distinct candidate node ids (int64), ascending.
        """
        step = _check_step(step)
        c = torch.as_tensor(centers, dtype=torch.int64).reshape(-1)
        if c.numel() and (bool((c[1:] <= c[:-1]).any()) or not bool(self.cand_mask[c.to(self.cand_mask.device)].all())):
            raise ValueError("centers: expected distinct candidate central nodes (train_nodes), ascending")
        if self._dev == "cuda":
            c = c.to(self.csr.rowptr.device)
            rp = self.csr.rowptr
            n_slots = int((rp[c + 1] - rp[c] + 1).sum()) if c.numel() else 0
            return self._build_cuda(step, c, n_slots, with_x)
        return self._build_cpu(step, c.cpu().numpy(), with_x)

    def _build_cpu(self, step: int, centers: np.ndarray, with_x: bool) -> SubgraphBatch:
        k, csr = self._k, self.csr
        B = centers.shape[0]
        rp = csr.rowptr.numpy()
        # one pass into slots of 1 + deg(centre) per sub-graph, then compaction
        ub_ptr = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(rp[centers + 1] - rp[centers] + 1, out=ub_ptr[1:])
        counts = np.empty(B, dtype=np.int64)
        n_ub = np.empty(int(ub_ptr[B]), dtype=np.int64)
        z_ub = np.empty(int(ub_ptr[B]), dtype=np.uint8)
        k.heter_nodes(rp, csr.col.numpy(), self.out_degree.numpy(), centers, self.cand_mask.numpy(),
                      self.allow_mask.numpy(), self.seed, step, self.q_b, self.M, self.overlap == "drop",
                      ub_ptr, counts, n_ub, z_ub)
        node_ptr = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(counts, out=node_ptr[1:])
        pos = np.repeat(ub_ptr[:-1] - node_ptr[:-1], counts) + np.arange(int(node_ptr[B]), dtype=np.int64)
        n_id, zeroed = n_ub[pos], z_ub[pos]
        ei = _edges(k, csr, n_id, node_ptr, self.induced)
        return _assemble(self.data, n_id, node_ptr, zeroed, ei, step, with_x, counts)

    def _sample_cuda(self, step: int, with_x: bool, part: tuple[int, int] | None = None) -> SubgraphBatch:
        # sample() on the device: the same passes as the C++ path (same kernels' bodies,
        # csrc/common/sampling.h), prefix sums and compaction with torch; no host copy.  Two
        # host reads per step, both sizes that decide allocations: (1) the number of central
        # nodes and of their node slots, (2) the batch's nodes and edges (with the histogram
        # of sub-graph size bins that per-sub-graph clipping pads by, ldpfast/_buckets.py).
        k, csr = self._k, self.csr
        dev = csr.rowptr.device
        rp, cand = csr.rowptr, self.candidates
        if self._cand_slots is None:  # 1 + deg(c) slots per candidate, fixed
            self._cand_slots = rp[cand + 1] - rp[cand] + 1
        flags = torch.empty(cand.numel(), dtype=torch.uint8, device=dev)
        k.heter_central(cand, self.seed, step, self.q_b, flags)
        f = flags.to(torch.int64)
        rank = torch.cumsum(f, 0)  # rank[i]: central candidates among cand[:i + 1]
        B_all, n_slots = k.host_ints(torch.stack([rank[-1], (f * self._cand_slots).sum()]))  # host read 1
        # the r-th central node is the first candidate of rank r (rank is non-decreasing)
        centers = cand[torch.searchsorted(rank, torch.arange(1, B_all + 1, device=dev))]
        return self._build_cuda(step, _share(centers, part), n_slots, with_x)

    def _build_cuda(self, step: int, centers: torch.Tensor, n_slots: int, with_x: bool) -> SubgraphBatch:
        """:meth:`_sample_cuda` from the central nodes on (``n_slots``: at least their ``1 + deg``)."""
        k, csr = self._k, self.csr
        dev = csr.rowptr.device
        rp = csr.rowptr
        B = centers.numel()
        ub_ptr = torch.zeros(B + 1, dtype=torch.int64, device=dev)
        torch.cumsum(rp[centers + 1] - rp[centers] + 1, 0, out=ub_ptr[1:])
        counts = torch.empty(B, dtype=torch.int64, device=dev)
        # n_slots covers the whole batch, so also any share of it (no read of the share's own)
        with _backend.oom_guard(f"HeterPoisson.sample: node slots of {B} sub-graphs", 9 * n_slots):
            n_ub = torch.empty(n_slots, dtype=torch.int64, device=dev)
            z_ub = torch.empty(n_slots, dtype=torch.uint8, device=dev)
        node_ptr = torch.zeros(B + 1, dtype=torch.int64, device=dev)
        if B == 0:
            return _assemble_dev(self.data, n_ub[:0], node_ptr, counts, z_ub[:0],
                                 torch.zeros(2, 0, dtype=torch.int64, device=dev), step, with_x, (0,) * _buckets.NUM_BINS)
        k.heter_nodes(rp, csr.col, self.out_degree, centers.contiguous(), self.cand_mask, self.allow_mask,
                      self.seed, step, self.q_b, self.M, self.overlap == "drop", ub_ptr, counts, n_ub, z_ub)
        torch.cumsum(counts, 0, out=node_ptr[1:])
        # compaction before the batch size is known: position i < N of the batch holds slot
        # ub_ptr[b] + i - node_ptr[b] of the sub-graph b with node_ptr[b] <= i < node_ptr[b + 1];
        # positions >= N hold clamped copies, never read, cut off below
        i = torch.arange(n_slots, device=dev)
        b = (torch.searchsorted(node_ptr, i, right=True) - 1).clamp_(0, B - 1)
        pos = (ub_ptr[b] + i - node_ptr[b]).clamp_(0, n_slots - 1)
        n_id, zeroed = n_ub[pos], z_ub[pos]
        edge_ptr = torch.zeros(B + 1, dtype=torch.int64, device=dev)
        torch.cumsum(k.heter_edge_counts(rp, csr.col, n_id, node_ptr, self.induced), 0, out=edge_ptr[1:])
        hist = _buckets.bin_histogram(_buckets.size_bins(counts))
        N, E, *bins = k.host_ints(torch.cat([node_ptr[-1:], edge_ptr[-1:], hist]))  # host read 2
        n_id, zeroed = n_id[:N], zeroed[:N]
        with _backend.oom_guard(f"HeterPoisson.sample: edges of {B} sub-graphs"):
            ei = k.heter_edges(rp, csr.col, n_id, node_ptr, self.induced, edge_ptr, E)
        return _assemble_dev(self.data, n_id, node_ptr, counts, zeroed, ei, step, with_x, tuple(bins))

    def __len__(self) -> int:
        if self.num_steps is None:
            raise TypeError("HeterPoisson: num_steps was not given, the iterator is unbounded")
        return self.num_steps

    def __iter__(self):
        if self.num_steps is None:
            raise TypeError("HeterPoisson: pass num_steps to iterate (or call sample(step))")
        for t in range(self.num_steps):
            yield self.sample(t)

    def __repr__(self) -> str:
        return (f"HeterPoisson(q_b={self.q_b:g}, M={self.M:g}, candidates={int(self.candidates.numel())}, "
                f"num_steps={self.num_steps}, overlap={self.overlap!r}, induced={self.induced}, "
                f"degree_model={self.degree_model!r}, degree_bound={self.degree_bound})")


def inference_subgraphs(data, nodes, n_test: int, *, peripheral_nodes=None, seed: int | None = None,
                        step: int = 0, induced: bool = True, backend: str | None = None,
                        with_x: bool = True) -> SubgraphBatch:
    """Sub-graphs for inference (paper section 4.4): one per node of ``nodes``.

    Each node ``v`` keeps ``min(n_test, #admissible)`` of its neighbours, drawn uniformly
    without replacement among the ``peripheral_nodes`` (in the transductive setting: the
    non-training nodes, so that "test nodes can only sample nodes within the test nodes set,
    not from the training nodes set" and inference touches no sensitive node).  The paper
    uses ``N_test = 13``.

    Parameters
    ----------
    data : torch_geometric.data.Data
        The graph (``edge_index`` or ``csr``), optional ``x``, ``y``.
    nodes : bool mask or index tensor
        The nodes to classify (central nodes, ascending ids in the output).
    n_test : int
        Neighbours per node, >= 0.
    peripheral_nodes : bool mask or index tensor, optional
        Admissible neighbours (default every node: no inference privacy).
    seed : int, optional
        Seed of the neighbour draw (``None``: fresh).
    step : int
        Round index (different rounds give independent draws).
    induced, backend, with_x
        As in :class:`HeterPoisson`.
    """
    n_test = check_int("n_test", n_test, 0)
    step = _check_step(step)
    seed = resolve_seed(seed)
    if not isinstance(induced, bool):
        raise TypeError(f"induced: expected a bool, got {type(induced).__name__}")
    ei_in = getattr(data, "edge_index", None)
    dev = _backend.device_of(ei_in if ei_in is not None else getattr(getattr(data, "csr", None), "rowptr", None))
    k = _backend.get(dev, backend)
    csr = neighbour_csr(data, backend=backend)
    n = csr.num_nodes
    if dev == "cuda":  # the CUDA kernels; the batch stays on the device
        d = csr.rowptr.device
        def on_d(m):  # host masks (index lists, CPU masks) go to the device; device masks stay
            return m if m.device == d else m.to(d)

        centers = torch.nonzero(on_d(_node_set("nodes", nodes, n))).flatten()
        allow = (None if peripheral_nodes is None
                 else on_d(_node_set("peripheral_nodes", peripheral_nodes, n)).to(torch.uint8).contiguous())
        node_ptr, n_id = k.heter_infer(csr.rowptr, csr.col, centers, allow, seed, step, n_test)
        ei = k.heter_edges(csr.rowptr, csr.col, n_id, node_ptr, induced)
        zeroed = torch.zeros(n_id.numel(), dtype=torch.uint8, device=d)
        return _assemble_dev(data, n_id, node_ptr, node_ptr[1:] - node_ptr[:-1], zeroed, ei, step, with_x)
    centers = torch.nonzero(_node_set("nodes", nodes, n)).flatten().numpy()
    allow = (np.empty(0, np.uint8) if peripheral_nodes is None
             else _node_set("peripheral_nodes", peripheral_nodes, n).to(torch.uint8).numpy())
    B = centers.shape[0]
    counts = np.empty(B, dtype=np.int64)
    k.heter_infer_nodes(csr.rowptr.numpy(), csr.col.numpy(), centers, allow, seed, step, n_test,
                        counts, np.empty(0, np.int64), False)
    node_ptr = np.zeros(B + 1, dtype=np.int64)
    np.cumsum(counts, out=node_ptr[1:])
    n_id = np.empty(int(node_ptr[B]), dtype=np.int64)
    k.heter_infer_nodes(csr.rowptr.numpy(), csr.col.numpy(), centers, allow, seed, step, n_test,
                        node_ptr, n_id, True)
    ei = _edges(k, csr, n_id, node_ptr, induced)
    return _assemble(data, n_id, node_ptr, np.zeros(n_id.shape[0], np.uint8), ei, step, with_x)
