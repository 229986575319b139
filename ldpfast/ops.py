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
"""
from __future__ import annotations

import torch

from . import _backend
from ._checks import check_int
from .graph import CSR, to_csr

AGGRS = ("mean", "add", "gcn")


def _step(csr: CSR, a: torch.Tensor, b: torch.Tensor, x: torch.Tensor, self_loop: bool,
          backend: str | None) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    k = _backend.get("cpu", backend)
    k.spmm_scaled(csr.rowptr.numpy(), csr.col.numpy(), a.numpy(), b.numpy(), x.numpy(),
                  y.numpy(), bool(self_loop))
    return y


def step_scales(csr: CSR, k: int, aggr: str, self_loops: bool, mask: torch.Tensor | None,
                dtype: torch.dtype) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The per-step (a, b) vectors of :func:`propagate` (see the module docstring)."""
    n = csr.num_nodes
    deg = csr.degrees().to(torch.float64) + (1.0 if self_loops else 0.0)
    ones = torch.ones(n, dtype=torch.float64)
    m = ones if mask is None else mask.to(torch.float64)
    scales = []
    if aggr in ("add", "gcn"):
        # Rows that received nothing are zero, so masking them again changes nothing:
        # only the first step needs the mask.
        a = ones if aggr == "add" else torch.where(deg > 0, deg.clamp(min=1).rsqrt(), 0.0)
        for t in range(k):
            b = a if aggr == "gcn" else ones
            scales.append((a.to(dtype), (b * m if t == 0 else b).to(dtype)))
        return scales
    for _ in range(k):
        if bool((m == 1).all()):
            cnt = deg  # every neighbour contributes
        else:
            cnt = _step(csr, ones, m, m[:, None], self_loops, None)[:, 0]
        a = torch.where(cnt > 0, 1.0 / cnt.clamp(min=1), 0.0)
        scales.append((a.to(dtype), m.to(dtype)))
        m = (cnt > 0).to(torch.float64)  # who carries a value after this step
    return scales


class _Propagate(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, csr, csr_t_fn, scales, self_loops, backend):
        y = x.detach()
        for a, b in scales:
            y = _step(csr, a, b, y, self_loops, backend)
        ctx.csr_t_fn, ctx.scales, ctx.self_loops, ctx.backend = csr_t_fn, scales, self_loops, backend
        return y

    @staticmethod
    def backward(ctx, gy):
        csr_t = ctx.csr_t_fn()
        g = gy.contiguous()
        for a, b in reversed(ctx.scales):
            g = _step(csr_t, b, a, g, ctx.self_loops, ctx.backend)
        return g, None, None, None, None, None


def _validate(csr, x, k, aggr, mask):
    if not isinstance(csr, CSR):
        raise TypeError(f"csr: expected an ldpfast.graph.CSR, got {type(csr).__name__}")
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"x: expected a torch.Tensor, got {type(x).__name__}")
    if x.dim() != 2 or x.size(0) != csr.num_nodes:
        raise ValueError(f"x: expected shape (num_nodes={csr.num_nodes}, d), got {tuple(x.shape)}")
    if x.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"x: expected float32 or float64, got {x.dtype}")
    if x.device.type != "cpu":
        raise ValueError("x: CUDA propagation is not available yet; use a CPU tensor")
    check_int("k", k, 0, 1024)
    if aggr not in AGGRS:
        raise ValueError(f"aggr: expected one of {AGGRS}, got {aggr!r}")
    if mask is not None:
        if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool:
            raise TypeError("mask: expected a bool tensor of shape (num_nodes,)")
        if mask.shape != (csr.num_nodes,):
            raise ValueError(f"mask: expected shape ({csr.num_nodes},), got {tuple(mask.shape)}")


def transpose(csr: CSR) -> CSR:
    """CSR of A^T (O(|E|) counting sort)."""
    ei = csr.to_edge_index()
    return to_csr(ei.flip(0), csr.num_nodes, drop_self_loops=False)


def propagate(csr: CSR, x: torch.Tensor, k: int = 1, aggr: str = "mean", self_loops: bool = False,
              mask: torch.Tensor | None = None, *, csr_t: CSR | None = None,
              backend: str | None = None) -> torch.Tensor:
    """K-step propagation ``h(x, G; K)`` (LPGNN Algorithm 2), differentiable.

    Parameters
    ----------
    csr : CSR
        Row ``i`` lists the neighbours whose values node ``i`` aggregates (for a PyG
        ``edge_index`` with messages source -> target, that is the CSR of
        ``edge_index.flip(0)``; for undirected graphs the CSR of ``edge_index`` itself).
    x : Tensor
        (n, d) float32 / float64 node values.
    k : int
        Number of steps K >= 0 (K = 0 returns ``x`` masked).
    aggr : {"mean", "add", "gcn"}
    self_loops : bool
        Aggregate over N(v) + {v} instead of N(v) - {v} (default False, as KProp).
    mask : bool Tensor, optional
        Nodes that contribute at the first step (the rest send zeros).
    csr_t : CSR, optional
        CSR of A^T for the backward pass (computed on demand when omitted; pass ``csr`` for
        a symmetric graph).
    """
    _validate(csr, x, k, aggr, mask)
    if k == 0:
        return x if mask is None else x * mask[:, None].to(x.dtype)
    scales = step_scales(csr, k, aggr, self_loops, mask, x.dtype)
    if csr_t is not None:
        def csr_t_fn():
            return csr_t
    else:
        def csr_t_fn():
            return transpose(csr)
    return _Propagate.apply(x, csr, csr_t_fn, scales, self_loops, backend)
