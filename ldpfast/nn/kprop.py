"""KProp: K-step linear aggregation as a PyG ``MessagePassing`` (LPGNN Algorithm 2)."""
from __future__ import annotations

import warnings

import torch
from torch_geometric.nn import MessagePassing

from .. import _backend, ops
from .. import graph as _graph
from .._checks import check_int


def _adj_key(adj, edge_weight) -> tuple:
    """O(1) identity of an adjacency: its tensors' storage, shape and version counter.

    Used only to notice that a cached layer is handed a different graph; contents are not
    compared (that would cost what the cache saves).
    """
    def tkey(t):
        if t is None:
            return None
        if t.layout == torch.strided:
            return (t.data_ptr(), tuple(t.shape), t._version)
        if t.layout == torch.sparse_coo:
            return (tkey(t._indices()), tkey(t._values()))
        if t.layout == torch.sparse_csr:
            return (tkey(t.crow_indices()), tkey(t.col_indices()), tkey(t.values()))
        if t.layout == torch.sparse_csc:
            return (tkey(t.ccol_indices()), tkey(t.row_indices()), tkey(t.values()))
        return (id(t),)

    if isinstance(adj, _graph.CSR):
        parts = (tkey(adj.rowptr), tkey(adj.col), tkey(adj.value))
    elif isinstance(adj, torch.Tensor):
        parts = (tkey(adj),)
    else:  # torch_sparse.SparseTensor: the same object keeps the same storage
        parts = (id(adj),)
    return (type(adj).__name__, parts, tkey(edge_weight))


class KProp(MessagePassing):
    r"""KProp layer: ``K`` aggregations over ``N(v) - {v}`` with no non-linearity between.

    Prepended to any PyG backbone (LPGNN section 3.2) it averages out the LDP noise of the
    features.  The work runs in the ldpfast C++ kernel (:func:`ldpfast.ops.propagate`),
    not in PyG's scatter-based message passing.

    Parameters
    ----------
    k : int
        Step parameter K >= 0 (K_x for features, K_y for labels).
    aggr : {"mean", "add", "gcn"}
        LPGNN uses "gcn" for both feature and label KProp (section 4.1).  With edge
        weights: "add" sums ``w_ji x_j``, "mean" divides that sum by the number of
        neighbours (as PyG's ``SimpleConv``), "gcn" uses the weighted degrees (as
        ``gcn_norm``).
    add_self_loops : bool
        Default False: self loops make each node count its own noise K times (section 3.2).
    cached : bool
        As in PyG's ``GCNConv``: if True, the CSR of the graph, its normalisation scales and
        its transpose (for the backward pass) are built on the first call and reused on
        every later call, whatever adjacency is passed.  **Only for transductive
        learning** (one fixed graph).  When a later call passes an adjacency that is not the
        same tensor (storage, shape, version counter; contents are not compared), a
        ``UserWarning`` says the cached graph is used instead (once per cache).
        :meth:`reset_cache` or :meth:`reset_parameters` forget the cache.  A different
        number of nodes is an error.  Default False: the CSR is rebuilt on every call (a
        linear-time counting sort), so a changed graph is never served stale structure.
    storage : torch.dtype, optional
        ``torch.bfloat16``: propagate a bfloat16 copy of ``x`` and return the result in
        ``x``'s dtype (gradients flow through both casts).  Halves the memory of the
        propagated values; each step sums in float32 and rounds its output to bfloat16 once
        (relative error about 2^-9 per step; LDP noise is far larger).  Not faster on the
        CPUs measured (1.2-1.5x the float32 time on a Zen 4 VM: the conversions cost more
        than the halved gathers save; see BENCHMARKS.md).  Default None: ``x``'s own dtype,
        exact float32/float64 sums.

    Shapes
    ------
    ``forward(x, adj, edge_weight=None, mask=None)``: ``x`` (n, d) float32/float64/bfloat16;
    ``adj`` any adjacency of :func:`ldpfast.graph.as_adj_t`: ``edge_index`` (2, E) with
    messages ``edge_index[0] -> edge_index[1]``, PyG's ``adj_t`` from
    ``T.ToSparseTensor()`` (torch sparse CSR, or ``torch_sparse.SparseTensor`` when
    installed), any torch sparse COO/CSR/CSC ``adj_t``, or an ldpfast ``CSR`` (row ``i`` =
    sources of ``i``); ``edge_weight`` (E,) with an ``edge_index`` only; ``mask`` (n,) bool
    (nodes that contribute at the first step).  Output: (n, d).
    """

    def __init__(self, k: int = 1, aggr: str = "gcn", add_self_loops: bool = False,
                 cached: bool = False, storage: torch.dtype | None = None):
        if aggr not in ops.AGGRS:
            raise ValueError(f"aggr: expected one of {ops.AGGRS}, got {aggr!r}")
        if not isinstance(cached, bool):
            raise TypeError(f"cached: expected a bool, got {type(cached).__name__}")
        if storage not in (None, torch.bfloat16):
            raise ValueError(f"storage: expected None or torch.bfloat16, got {storage!r}")
        super().__init__(aggr="add")
        self.storage = storage
        self.k = check_int("k", k, 0, 1024)
        self.norm = aggr
        self.add_self_loops = bool(add_self_loops)
        self.cached = cached
        self._cache: dict | None = None

    def reset_cache(self) -> None:
        """Forget the cached graph (``cached=True``): the next call builds it again."""
        self._cache = None

    def reset_parameters(self) -> None:
        super().reset_parameters()
        self.reset_cache()

    def _cached_graph(self, adj, edge_weight, x: torch.Tensor) -> dict:
        key = _adj_key(adj, edge_weight)
        c = self._cache
        if c is None:
            csr = _graph.as_adj_t(adj, x.size(0), edge_weight=edge_weight, device=x.device)
            c = self._cache = {"key": key, "csr": csr, "csr_t": None, "scales": {}, "vals": {},
                               "warned": False}
            return c
        if c["csr"].num_nodes != x.size(0):
            raise ValueError(f"x: KProp(cached=True) holds a graph of {c['csr'].num_nodes} nodes, "
                             f"got x with {x.size(0)} rows; call reset_cache() for a new graph")
        if key != c["key"] and not c["warned"]:
            c["warned"] = True
            warnings.warn(
                "KProp(cached=True) reuses the graph cached on its first call; the adjacency "
                "passed now is a different tensor (or was modified) and is ignored. cached=True "
                "is for transductive learning on one fixed graph; call reset_cache() when the "
                "graph changes.", UserWarning, stacklevel=3)
        return c

    def _transpose(self, c: dict, dtype: torch.dtype, dev: str | None = None):
        if c["csr_t"] is None:
            csr = c["csr"]
            t = ops.transpose(csr, dev=dev)
            # A symmetric graph is its own transpose: keep one copy.
            same = torch.equal(t.rowptr, csr.rowptr) and torch.equal(t.col, csr.col) and (
                t.value is None or torch.equal(t.value, csr.value))
            c["csr_t"] = csr if same else t
        t = c["csr_t"]
        return t, self._vals(c, dtype, transposed=True)

    @staticmethod
    def _vals(c: dict, dtype: torch.dtype, transposed: bool = False):
        csr = c["csr_t"] if transposed else c["csr"]
        if csr.value is None:
            return None
        key = (dtype, transposed)
        if key not in c["vals"]:
            c["vals"][key] = ops._values(csr, dtype)
        return c["vals"][key]

    def forward(self, x: torch.Tensor, edge_index, edge_weight: torch.Tensor | None = None,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        if self.storage is not None and isinstance(x, torch.Tensor) and x.dtype != self.storage:
            ops.check_x(x)
            return self._forward(x.to(self.storage), edge_index, edge_weight, mask).to(x.dtype)
        return self._forward(x, edge_index, edge_weight, mask)

    def _forward(self, x, edge_index, edge_weight, mask):
        if not self.cached:
            return ops.propagate(edge_index, x, self.k, self.norm, self.add_self_loops, mask,
                                 edge_weight=edge_weight)
        ops.check_x(x)
        ops.check_args(x.size(0), self.k, self.norm, mask, x)
        c = self._cached_graph(edge_index, edge_weight, x)
        if self.k == 0:
            return x if mask is None else x * mask[:, None].to(x.dtype)
        # Scales depend on the mask: keep one entry per (dtype, masked?) and compare the
        # mask by value (O(n)), never by address, so a new mask is never served old scales.
        skey = (x.dtype, mask is not None)
        hit = c["scales"].get(skey)
        if hit is not None and (mask is None or torch.equal(hit[0], mask)):
            scales = hit[1]
        else:
            scales = ops.step_scales(c["csr"], self.k, self.norm, self.add_self_loops, mask, x.dtype,
                                     dev=_backend.device_of(x))
            c["scales"][skey] = (None if mask is None else mask.clone(), scales)
        dtype, dev = x.dtype, _backend.device_of(x)
        return ops.run(c["csr"], x, scales, self.add_self_loops,
                       lambda: self._transpose(c, dtype, dev), None, self._vals(c, dtype), dev)

    def __repr__(self) -> str:
        extra = "" if self.storage is None else f", storage={self.storage}"
        return (f"KProp(k={self.k}, aggr={self.norm!r}, add_self_loops={self.add_self_loops}, "
                f"cached={self.cached}{extra})")
