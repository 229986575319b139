"""KProp: K-step linear aggregation as a PyG ``MessagePassing`` (LPGNN Algorithm 2)."""
from __future__ import annotations

import warnings

import torch
from torch_geometric.nn import MessagePassing

from .. import _backend, ops
from .. import graph as _graph
from .._checks import check_int


def _tkey(t):
    """O(1) identity of a tensor: storage, shape, dtype, device and version counter (bumped by
    in-place changes); contents are not compared (that would cost what a cache saves)."""
    if t is None:
        return None
    if t.layout == torch.strided:
        return (t.data_ptr(), tuple(t.shape), t.dtype, str(t.device), t._version)
    if t.layout == torch.sparse_coo:
        return (_tkey(t._indices()), _tkey(t._values()))
    if t.layout == torch.sparse_csr:
        return (_tkey(t.crow_indices()), _tkey(t.col_indices()), _tkey(t.values()))
    if t.layout == torch.sparse_csc:
        return (_tkey(t.ccol_indices()), _tkey(t.row_indices()), _tkey(t.values()))
    return (id(t),)


def _adj_key(adj, edge_weight) -> tuple:
    """O(1) identity of an adjacency (:func:`_tkey` of its tensors).

    Used only to notice that a cached layer is handed a different graph.
    """
    tkey = _tkey
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
        ``"sum"`` (PyG's name) is ``"add"``.  LPGNN uses "gcn" for both feature and label
        KProp (section 4.1).  With edge weights: "add" sums ``w_ji x_j``, "mean" divides that sum by the number of
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
        On CUDA, a cached layer's later calls (forward and backward) launch ldpfast's SpMM
        kernels only, with no host synchronisation, as long as the ``mask`` is the same bool
        tensor as before (another mask, or node ids, is compared or converted first).
    cache_result : bool
        As PyG's ``SGConv(cached=True)``: if True, the output of the first call is kept and
        returned by every later call with the same ``x``, adjacency and mask (the same tensors,
        unmodified: storage, shape, version counter), so K steps run once.  For KProp as the
        first layer on fixed input features (transductive).  A call with another ``x``,
        graph or mask, or with an ``x`` that requires grad (its gradient would be lost), is
        an error; :meth:`reset_cache` forgets the result.  Default False.
    storage : torch.dtype, optional
        ``torch.bfloat16``: propagate a bfloat16 copy of ``x`` and return the result in
        ``x``'s dtype (gradients flow through both casts).  Halves the memory of the
        propagated values; each step sums in float32 and rounds its output to bfloat16 once
        (relative error about 2^-9 per step; LDP noise is far larger).  Not faster on the
        CPUs measured (1.2-1.5x the float32 time on a Zen 4 VM: the conversions cost more
        than the halved gathers save; see BENCHMARKS.md).  Default None: ``x``'s own dtype,
        exact float32/float64 sums.

    Which cache when
    ----------------
    * ``cache_result=True``: KProp on fixed features, inside the model (LPGNN's feature
      KProp in front of a GNN): propagated once, then free.  No dropout or learnable layer
      may come before it (its input would change every call).
    * ``cached=True``: one fixed graph, inputs that change every call (the label KProp over
      the model's predictions in LPGNN's loss, eq. 14; a KProp after a learnable layer):
      the graph's structure is built once, the K steps run on every call.
    * :class:`ldpfast.transforms.KPropFeatures`: propagate the features once in the dataset's
      ``pre_transform`` (stored with the dataset, SGC-style); the model then needs no KProp.
      Best when the propagated features are reused across runs or models.

    Shapes
    ------
    ``forward(x, adj, edge_weight=None, mask=None)``: ``x`` (n, d) float32/float64/bfloat16;
    ``adj`` any adjacency of :func:`ldpfast.graph.as_adj_t`: ``edge_index`` (2, E) with
    messages ``edge_index[0] -> edge_index[1]``, PyG's ``adj_t`` from
    ``T.ToSparseTensor()`` (torch sparse CSR, or ``torch_sparse.SparseTensor`` when
    installed), any torch sparse COO/CSR/CSC ``adj_t``, or an ldpfast ``CSR`` (row ``i`` =
    sources of ``i``); ``edge_weight`` (E,) with an ``edge_index`` only; ``mask`` (n,) bool or a
    tensor of node ids (nodes that contribute at the first step).  Output: (n, d).
    """

    def __init__(self, k: int = 1, aggr: str = "gcn", add_self_loops: bool = False,
                 cached: bool = False, storage: torch.dtype | None = None, *, cache_result: bool = False):
        aggr = ops.check_aggr(aggr)
        for name, v in (("cached", cached), ("cache_result", cache_result)):
            if not isinstance(v, bool):
                raise TypeError(f"{name}: expected a bool, got {type(v).__name__}")
        if storage not in (None, torch.bfloat16):
            raise ValueError(f"storage: expected None or torch.bfloat16, got {storage!r}")
        super().__init__(aggr="add")
        self.storage = storage
        self.k = check_int("k", k, 0, 1024)
        self.norm = aggr
        self.add_self_loops = bool(add_self_loops)
        self.cached = cached
        self.cache_result = cache_result
        self._cache: dict | None = None
        self._result: tuple | None = None

    def reset_cache(self) -> None:
        """Forget the cached graph (``cached=True``) and result (``cache_result=True``): the
        next call builds them again."""
        self._cache = None
        self._result = None

    def reset_parameters(self) -> None:
        super().reset_parameters()
        self.reset_cache()

    def _cached_graph(self, adj, edge_weight, x: torch.Tensor) -> dict:
        key = _adj_key(adj, edge_weight)
        c = self._cache
        if c is None:
            csr = _graph.as_adj_t(adj, x.size(0), edge_weight=edge_weight, device=x.device)
            # plan / plan_t: the CUDA long-row plans of the graph and its transpose, made once
            # (ops.spmm_plan), so that later calls launch kernels only.
            c = self._cache = {"key": key, "csr": csr, "csr_t": None, "scales": {}, "vals": {},
                               "warned": False, "plan": ops.spmm_plan(csr), "plan_t": None}
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
            c["plan_t"] = c["plan"] if same else ops.spmm_plan(c["csr_t"])
        t = c["csr_t"]
        return t, self._vals(c, dtype, transposed=True), c["plan_t"]

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
        if not self.cache_result:
            return self._stored(x, edge_index, edge_weight, mask)
        key = (_tkey(x) if isinstance(x, torch.Tensor) else None, _adj_key(edge_index, edge_weight),
               _tkey(mask) if isinstance(mask, torch.Tensor) else mask)
        if self._result is not None:
            if key != self._result[0]:
                raise ValueError(
                    "x: KProp(cache_result=True) holds the propagation of another input (x, the adjacency or "
                    "the mask is a different tensor, or was modified); cache_result is for one fixed input: "
                    "call reset_cache() first, or use cached=True (caches the graph only)")
            return self._result[1]
        if isinstance(x, torch.Tensor) and x.requires_grad:
            raise ValueError("x: requires grad, but KProp(cache_result=True) would return a cached result "
                             "without a gradient; use cached=True (caches the graph only)")
        out = self._stored(x, edge_index, edge_weight, mask)
        self._result = (key, out.detach())
        return self._result[1]

    def _stored(self, x, edge_index, edge_weight, mask):
        """forward without the result cache: in ``storage``'s dtype when one is set."""
        if self.storage is not None and isinstance(x, torch.Tensor) and x.dtype != self.storage:
            ops.check_x(x)
            return self._forward(x.to(self.storage), edge_index, edge_weight, mask).to(x.dtype)
        return self._forward(x, edge_index, edge_weight, mask)

    def _forward(self, x, edge_index, edge_weight, mask):
        if not self.cached:
            return ops.propagate(edge_index, x, self.k, self.norm, self.add_self_loops, mask,
                                 edge_weight=edge_weight)
        ops.check_x(x)
        _, _, mask = ops.check_args(x.size(0), self.k, self.norm, mask, x)
        c = self._cached_graph(edge_index, edge_weight, x)
        if self.k == 0:
            return x if mask is None else x * mask[:, None].to(x.dtype)
        # Scales depend on the mask: keep one entry per (dtype, masked?) and compare the
        # mask by value (O(n)), never by address, so a new mask is never served old scales.
        # The same mask tensor, unmodified since (version counter), is a hit without reading it:
        # torch.equal would make every call wait for the GPU.
        skey = (x.dtype, mask is not None)
        hit = c["scales"].get(skey)
        if hit is not None and (mask is None or (hit[2] is mask and hit[3] == mask._version)
                                or torch.equal(hit[0], mask)):
            scales = hit[1]
        else:
            scales = ops.step_scales(c["csr"], self.k, self.norm, self.add_self_loops, mask, x.dtype,
                                     dev=_backend.device_of(x))
            c["scales"][skey] = (None if mask is None else mask.clone(), scales, mask,
                                 None if mask is None else mask._version)
        dtype, dev = x.dtype, _backend.device_of(x)
        return ops.run(c["csr"], x, scales, self.add_self_loops,
                       lambda: self._transpose(c, dtype, dev), None, self._vals(c, dtype), dev, c["plan"])

    def __repr__(self) -> str:
        extra = "" if self.storage is None else f", storage={self.storage}"
        extra += ", cache_result=True" if self.cache_result else ""
        return (f"KProp(k={self.k}, aggr={self.norm!r}, add_self_loops={self.add_self_loops}, "
                f"cached={self.cached}{extra})")
