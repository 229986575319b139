"""KProp: K-step linear aggregation as a PyG ``MessagePassing`` (LPGNN Algorithm 2)."""
from __future__ import annotations

import torch
from torch_geometric.nn import MessagePassing

from .. import ops
from .._checks import check_int
from ..graph import to_csr


class KProp(MessagePassing):
    """KProp layer: ``K`` aggregations over ``N(v) - {v}`` with no non-linearity between.

    Prepended to any PyG backbone (LPGNN section 3.2) it averages out the LDP noise of the
    features.  The work runs in the ldpfast C++ kernel (:func:`ldpfast.ops.propagate`),
    not in PyG's scatter-based message passing.

    Parameters
    ----------
    k : int
        Step parameter K >= 0 (K_x for features, K_y for labels).
    aggr : {"mean", "add", "gcn"}
        LPGNN uses "gcn" for both feature and label KProp (section 4.1).
    add_self_loops : bool
        Default False: self loops make each node count its own noise K times (section 3.2).

    Nothing is cached: the CSR is rebuilt from ``edge_index`` on every call (a linear-time
    counting sort), so a changed graph is never served stale structure.
    """

    def __init__(self, k: int = 1, aggr: str = "gcn", add_self_loops: bool = False):
        if aggr not in ops.AGGRS:
            raise ValueError(f"aggr: expected one of {ops.AGGRS}, got {aggr!r}")
        super().__init__(aggr="add")
        self.k = check_int("k", k, 0, 1024)
        self.norm = aggr
        self.add_self_loops = bool(add_self_loops)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor,
                mask: torch.Tensor | None = None) -> torch.Tensor:
        n = x.size(0)
        csr = to_csr(edge_index.flip(0), n)  # row i = sources that send to i
        return ops.propagate(csr, x, self.k, self.norm, self.add_self_loops, mask,
                             csr_t=None)

    def __repr__(self) -> str:
        return f"KProp(k={self.k}, aggr={self.norm!r}, add_self_loops={self.add_self_loops})"
