"""Sparse propagation kernels with autograd: KProp (LPGNN Alg. 2) and masked aggregation.

:func:`propagate` applies ``K`` consecutive linear aggregations with no non-linearity in
between (LPGNN, Algorithm 2), over ``N(v) - {v}`` by default (no self loops, LPGNN
section 3.2: "we do not include self-loops").  Each step is

    y = diag(a) (A [+ I]) diag(b) x

computed by the C++ kernel ``spmm_scaled`` (Numba twin on request); the backward pass is
the same kernel on ``A^T`` with ``a`` and ``b`` swapped, so it trains under autograd.

Normalisations (``deg`` = number of neighbours, + 1 with self loops):

* ``"add"``:  y_i = sum_{j in N(i)} x_j
* ``"mean"``: y_i = (1 / c_i) sum_{j in N(i), j contributing} x_j, where c_i counts the
  contributing neighbours (0 contributing -> y_i = 0)
* ``"gcn"``:  y_i = sum_j x_j / sqrt(deg_i deg_j)  (Kipf & Welling; LPGNN uses it for both
  feature and label KProp, section 4.1)

``mask`` marks the nodes that contribute at the first step (e.g. labelled nodes when
propagating labels, RGNN Alg. 2 / LPGNN Drop): the others send all-zero vectors.  A node
contributes at step t > 1 if it received at least one contribution at step t - 1, so
"mean" always divides by the number of neighbours that actually carry a value, and
multi-hop paths through unlabelled nodes are kept.  For "add" and "gcn" this is the same
as zeroing the masked rows of ``x`` once.

Adjacency formats (see :func:`ldpfast.graph.as_adj_t`): ``edge_index`` (+ ``edge_weight``),
torch sparse COO / CSR / CSC (PyG's ``adj_t``), ``torch_sparse.SparseTensor`` and
:class:`ldpfast.graph.CSR`, all read with PyG's ``flow="source_to_target"``: node ``i``
aggregates the nodes ``j`` with an edge ``j -> i`` (row ``i`` of ``adj_t``).

Weighted adjacency (``edge_weight`` or sparse values ``w_ji`` of the edge ``j -> i``), as
PyG's ``gcn_norm`` and ``SimpleConv`` define it:

* ``"add"``:  y_i = sum_j w_ji x_j
* ``"mean"``: y_i = (1 / c_i) sum_j w_ji x_j with c_i the number of contributing neighbours
  (PyG's mean of the weighted messages ``w_ji x_j``)
* ``"gcn"``:  y_i = sum_j w_ji x_j / sqrt(deg_i deg_j) with the weighted in-degree
  deg_i = sum_j w_ji (+ 1 with self loops; a self loop has weight 1, as ``gcn_norm``)

The kernel takes the weight of each entry as a factor ``w * b[j]`` (``spmm_scaled``'s
``val``); without weights the unweighted kernel runs unchanged.  Gradients flow to ``x``
only, not to the edge weights (asking for them is an error).

CUDA tensors (x, adjacency and mask on one GPU) stay on the device: the CSR is built and
transposed there with torch (see :mod:`ldpfast.graph`), the per-step scales
(:func:`step_scales`) are torch ops on the graph's device, and each step is the CUDA kernel
``ldpfast._cuda.spmm_scaled`` (tensors by pointer, no host copy; a few host syncs for sizes
and checks, in building the CSR and planning its long rows).  With the graph, scales and plans
prepared once (:class:`ldpfast.nn.KProp` with ``cached=True``, see :func:`run`), a call
launches the kernels only.  Rows of at most ``_cuda.SPMM_CHUNK`` entries give the same bits
as the C++ kernel; longer rows (hubs) are summed in fixed chunks combined in order: deterministic, but
a different summation order, so close to and not bit-identical with the CPU result.
"""
from __future__ import annotations

import numpy as np
import torch

from . import _backend
from . import graph as _graph
from ._checks import check_int, check_mask
from .graph import CSR

#: The aggregations of :func:`propagate` (``"sum"`` is accepted as ``"add"``).
AGGRS = ("mean", "add", "gcn")
#: Other names accepted for an aggregation (PyG spells the sum "sum" as well as "add").
AGGR_ALIASES = {"sum": "add"}


def check_aggr(aggr) -> str:
    """The aggregation's canonical name (one of :data:`AGGRS`; ``"sum"`` is ``"add"``)."""
    if isinstance(aggr, str) and aggr in AGGR_ALIASES:
        return AGGR_ALIASES[aggr]
    if aggr not in AGGRS:
        raise ValueError(f"aggr: expected one of {AGGRS + tuple(AGGR_ALIASES)}, got {aggr!r}")
    return aggr


def _np(t):
    return None if t is None else t.numpy()


def _storage_np(t):
    """x / y for the C++ and Numba kernels: bfloat16 travels as its bits (int16; NumPy has no
    bfloat16)."""
    return t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy()


def arith_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the sums run in (and a, b, edge values are given in) for x of ``dtype``:
    bfloat16 storage is added up in float32."""
    return torch.float32 if dtype == torch.bfloat16 else dtype


def _inv_sqrt(t: torch.Tensor) -> torch.Tensor:
    """1 / sqrt(t), float64, correctly rounded on every device, so gcn scales (and float64
    KProp) have the same bits on CPU and GPU.  torch's CPU sqrt is not correctly rounded
    (52110 of 4M doubles differ from NumPy's: torch 2.13, AVX2; also on the AVX-512 host of
    an H200 machine), and its CPU and CUDA rsqrt disagreed there.  NumPy's sqrt is IEEE, and
    torch's CUDA 1 / sqrt gave NumPy's bits on the same 4M values (PTX has only the IEEE
    double sqrt); the division is IEEE on both (docs/gpu, 2026-11-26)."""
    if t.device.type == "cpu":
        return torch.from_numpy(1.0 / np.sqrt(t.double().numpy()))
    return 1.0 / t.double().sqrt()


def _contiguous(t: torch.Tensor) -> torch.Tensor:
    # Asked first (metadata only): the cached CUDA path must not call tensor ops it does not need.
    return t if t.is_contiguous() else t.contiguous()


def _step(csr: CSR, a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, self_loop: bool,
          backend: str | None, val: torch.Tensor | None = None, dev: str | None = None,
          plan=None) -> torch.Tensor:
    """One step y = diag(a) (A [+I]) diag(b) x.  ``plan``: the CUDA long-row plan of ``csr``
    (:func:`spmm_plan`), None to plan in the call (CUDA only; ignored on CPU)."""
    x = _contiguous(x)
    y = torch.empty_like(x)
    if dev is None:  # one device for x and the graph (mixing is an error)
        dev = _backend.device_of(x, csr.rowptr, csr.col, *(() if val is None else (val,)))
    k = _backend.get(dev, backend)
    if dev == "cuda":  # tensors by pointer, no host copy
        k.spmm_scaled(csr.rowptr, csr.col, _contiguous(a), _contiguous(b), x, y, bool(self_loop), val,
                      plan=plan)
        return y
    k.spmm_scaled(csr.rowptr.numpy(), csr.col.numpy(), a.numpy(), b.numpy(), _storage_np(x),
                  _storage_np(y), bool(self_loop), _np(val))
    return y


def spmm_plan(csr: CSR, dev: str | None = None):
    """What :func:`run` needs to launch only kernels on a CUDA graph, computed once (torch ops
    and host syncs): the long-row plan of ``ldpfast._cuda.cached_plan``.  None on the CPU."""
    if (dev or _backend.device_of(csr.rowptr, csr.col)) != "cuda":
        return None
    return _backend.get("cuda").cached_plan(csr.rowptr)


def _values(csr: CSR, dtype: torch.dtype) -> torch.Tensor | None:
    """The CSR's weights in the dtype of x (None when unweighted)."""
    if csr.value is None:
        return None
    return csr.value.to(arith_dtype(dtype)).contiguous()


def step_scales(csr: CSR, k: int, aggr: str, self_loops: bool, mask: torch.Tensor | None,
                dtype: torch.dtype, backend: str | None = None,
                dev: str | None = None) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The per-step (a, b) vectors of :func:`propagate` (see the module docstring), computed
    with torch on the graph's device; ``dev`` ('cpu' / 'cuda', default: from the graph)
    picks the kernels."""
    if dev is None:
        dev = _backend.device_of(csr.rowptr, csr.col)
    n = csr.num_nodes
    where = csr.rowptr.device  # computed where the graph is (torch ops on a CUDA graph)
    cnt_all = csr.degrees().to(torch.float64) + (1.0 if self_loops else 0.0)
    ones = torch.ones(n, dtype=torch.float64, device=where)
    m = ones if mask is None else mask.to(torch.float64)
    scales = []
    if aggr in ("add", "gcn"):
        deg = cnt_all
        if aggr == "gcn" and csr.value is not None:
            # Weighted in-degree sum_j w_ji (+1 for the self loop), by the kernel itself.
            val = csr.value.to(torch.float64)
            deg = _step(csr, ones, ones, ones[:, None], self_loops, backend, val, dev)[:, 0]
            if bool((deg < 0).any()):
                raise ValueError("edge_weight: aggr='gcn' needs non-negative weighted degrees "
                                 "(sum of the weights into each node)")
        # Rows that received nothing are zero, so masking them again changes nothing:
        # only the first step needs the mask.
        a = ones if aggr == "add" else torch.where(deg > 0, _inv_sqrt(deg.clamp(min=1e-300)), 0.0)
        for t in range(k):
            b = a if aggr == "gcn" else ones
            scales.append((a.to(arith_dtype(dtype)), (b * m if t == 0 else b).to(arith_dtype(dtype))))
        return scales
    for _ in range(k):
        if bool((m == 1).all()):
            cnt = cnt_all  # every neighbour contributes
        else:
            # Unweighted count of the contributing neighbours (PyG's mean divides by it).
            cnt = _step(csr, ones, m, m[:, None], self_loops, backend, None, dev)[:, 0]
        a = torch.where(cnt > 0, 1.0 / cnt.clamp(min=1), 0.0)
        scales.append((a.to(arith_dtype(dtype)), m.to(arith_dtype(dtype))))
        m = (cnt > 0).to(torch.float64)  # who carries a value after this step
    return scales


class _Propagate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, csr, val, t_fn, scales, self_loops, backend, dev, plan):
        # Inside forward autograd is off: x's data is read as it is (each step allocates anew).
        y = x if scales else x.detach()
        if dev is None:
            dev = _backend.device_of(x, csr.rowptr, csr.col)
        for a, b in scales:
            y = _step(csr, a, b, y, self_loops, backend, val, dev, plan)
        ctx.t_fn, ctx.scales, ctx.self_loops, ctx.backend = t_fn, scales, self_loops, backend
        ctx.dev = dev  # the backward runs where the forward ran
        return y

    @staticmethod
    def backward(ctx, gy):
        # (A^T, its values in the dtype of x[, its CUDA plan])
        csr_t, val_t, *plan_t = ctx.t_fn()
        plan_t = plan_t[0] if plan_t else None
        g = gy
        for a, b in reversed(ctx.scales):
            g = _step(csr_t, b, a, g, ctx.self_loops, ctx.backend, val_t, ctx.dev, plan_t)
        return g, None, None, None, None, None, None, None, None


def check_x(x, name: str = "x") -> None:
    """x: a 2-D float32/float64/bfloat16 tensor (CPU or CUDA)."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.layout != torch.strided:
        raise TypeError(f"{name}: expected a dense tensor, got layout {x.layout}")
    if x.dim() != 2:
        raise ValueError(f"{name}: expected shape (num_nodes, d), got {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float64, torch.bfloat16):
        raise TypeError(f"{name}: expected float32, float64 or bfloat16, got {x.dtype}")


def check_args(n: int, k, aggr, mask, x: torch.Tensor | None = None):
    """``(k, aggr, mask)`` checked: ``aggr`` by its canonical name (:func:`check_aggr`),
    ``mask`` as an ``(n,)`` bool tensor (a bool mask or node ids, :func:`ldpfast._checks.check_mask`)
    on the device of ``x``."""
    k = check_int("k", k, 0, 1024)
    aggr = check_aggr(aggr)
    if mask is not None:
        mask = check_mask("mask", mask, n)
        if x is not None and mask.device != x.device:
            raise ValueError(f"mask is on {mask.device} but x is on {x.device}; move both to one device")
    return k, aggr, mask


def transpose(csr: CSR, backend: str | None = None, dev: str | None = None) -> CSR:
    """CSR of A^T (O(|E|) counting sort, values carried along; on a CUDA graph a stable
    torch sort on the device).  ``dev``: 'cpu' / 'cuda' (default: the graph's device)."""
    return _graph.transpose(csr, backend=backend, on_device=None if dev is None else dev == "cuda")


def run(csr: CSR, x: torch.Tensor, scales, self_loops: bool, t_fn, backend: str | None = None,
        val: torch.Tensor | None = None, dev: str | None = None, plan=None) -> torch.Tensor:
    """Apply prepared steps (``step_scales``) under autograd; ``t_fn()`` returns
    ``(csr of A^T, its values in x's dtype)`` for the backward pass, optionally with a third
    item, the :func:`spmm_plan` of A^T.  ``plan``: :func:`spmm_plan` of ``csr`` (None: CUDA
    plans in every step).  With both plans, scales and values prepared (:class:`ldpfast.nn.KProp`
    with ``cached=True``), a CUDA forward and backward launch kernels only: no torch work
    besides allocating outputs, no host synchronisation.  Used by :func:`propagate` too."""
    return _Propagate.apply(x, csr, val, t_fn, scales, self_loops, backend, dev, plan)


def propagate(adj, x: torch.Tensor, k: int = 1, aggr: str = "mean", self_loops: bool = False,
              mask: torch.Tensor | None = None, *, edge_weight: torch.Tensor | None = None,
              csr_t: CSR | None = None, backend: str | None = None) -> torch.Tensor:
    """K-step propagation ``h(x, G; K)`` (LPGNN Algorithm 2), differentiable.

    Parameters
    ----------
    adj : edge_index, torch sparse tensor, torch_sparse.SparseTensor or CSR
        The graph, in any format of :func:`ldpfast.graph.as_adj_t`.  Node ``i``
        aggregates the nodes ``j`` with an edge ``j -> i``: the sources of
        ``edge_index`` (PyG's ``flow="source_to_target"``), row ``i`` of a sparse
        ``adj_t``, row ``i`` of a :class:`CSR` (for an undirected graph the CSR of
        ``edge_index`` itself).  Self loops in ``edge_index`` / sparse inputs are dropped
        (use ``self_loops``); a CSR is used as it is.
    x : Tensor
        (n, d) float32 / float64 node values, CPU or CUDA (the adjacency and mask on the
        same device; CUDA runs ``ldpfast._cuda.spmm_scaled``, data stays on the device).
        bfloat16 (opt-in, see :class:`ldpfast.nn.KProp` ``storage``): half the bytes
        gathered; each step sums in float32 and rounds its output to bfloat16 once (exactly
        the float32 step on the widened input, rounded), so K steps round K times.
    k : int
        Number of steps K >= 0 (K = 0 returns ``x`` masked).
    aggr : {"mean", "add", "gcn"}
        ``"sum"`` (PyG's name) is ``"add"``.
    self_loops : bool
        Aggregate over N(v) + {v} instead of N(v) - {v} (default False, as KProp).
    mask : Tensor, optional
        Nodes that contribute at the first step (the rest send zeros): an ``(n,)`` bool mask
        or a 1-D tensor of distinct node ids.
    edge_weight : Tensor, optional
        (E,) weights of an ``edge_index`` (see the module docstring for the weighted
        aggregations); sparse inputs carry their weights as values.
    csr_t : CSR, optional
        CSR of A^T for the backward pass (computed on demand when omitted; pass ``csr``
        for a symmetric graph).  Must carry the transposed weights of a weighted graph.
    backend : str, optional
        'cpp' or 'numba'.

    Raises
    ------
    TypeError, ValueError
        Bad ``x``, ``k``, ``aggr``, ``mask``, adjacency or ``edge_weight`` (format, shape,
        dtype, device), named in the message.
    """
    check_x(x)
    n = x.size(0)
    k, aggr, mask = check_args(n, k, aggr, mask, x)
    csr = _graph.as_adj_t(adj, n, edge_weight=edge_weight, backend=backend, device=x.device)
    if csr_t is not None:
        if not isinstance(csr_t, CSR):
            raise TypeError(f"csr_t: expected an ldpfast.graph.CSR, got {type(csr_t).__name__}")
        if csr_t.num_nodes != n or csr_t.nnz != csr.nnz or (csr_t.value is None) != (csr.value is None):
            raise ValueError("csr_t: expected the transpose of the adjacency (same nodes, entries "
                             "and weightedness)")
        _graph._check_csr(csr_t, "csr_t")
    if k == 0:
        return x if mask is None else x * mask[:, None].to(x.dtype)
    dev = _backend.device_of(x)  # the kernels of x's device (the graph is checked to be there)
    scales = step_scales(csr, k, aggr, self_loops, mask, x.dtype, backend, dev)
    dtype = x.dtype

    def t_fn():
        t = csr_t if csr_t is not None else transpose(csr, backend, dev)
        return t, _values(t, dtype), spmm_plan(t, dev)

    # planned once per direction, not once per step
    return run(csr, x, scales, self_loops, t_fn, backend, _values(csr, dtype), dev, spmm_plan(csr, dev))
