"""Sub-graph samplers for node-level DP-SGD.

* :class:`HeterPoisson` -- Algorithm 2 + 3 of Xiang, Wang & Wang ("Preserving Node-level
  Privacy in Graph Neural Networks"): Poisson central nodes, out-degree-adjusted Poisson
  neighbours, one block-diagonal :class:`SubgraphBatch` per step.
* :func:`inference_subgraphs` -- section 4.4: test-time sub-graphs whose neighbours are drawn
  only among non-training nodes.
* :func:`singleton_batch` -- one-node sub-graphs (naive node-level DP-SGD, one example per node).
"""
from __future__ import annotations

from .heterpoisson import (
    HeterPoisson,
    SubgraphBatch,
    inference_subgraphs,
    neighbour_csr,
    singleton_batch,
)

__all__ = ["HeterPoisson", "SubgraphBatch", "inference_subgraphs", "neighbour_csr", "singleton_batch"]
