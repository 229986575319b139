"""Power-of-two size bins of sub-graphs, shared by the HeterPoisson sampler (which reads the
bin histogram back with its batch sizes, in the same host read) and per-sub-graph clipping
(which pads the sub-graphs of bin ``k`` to ``2**k`` rows, one ``bmm`` per bin).

Bin of a size ``L >= 1``: ``k = ceil(log2(L))`` computed in float64, as clipping always did;
size 0 (no row) is in no bin.  A histogram is :data:`NUM_BINS` counts.
"""
from __future__ import annotations

import torch

NUM_BINS = 64


def size_bins(counts: torch.Tensor) -> torch.Tensor:
    """``ceil(log2(counts))`` (int64), :data:`NUM_BINS` for empty blocks (no bin)."""
    nz = counts > 0
    k = torch.ceil(torch.log2(torch.where(nz, counts, torch.ones_like(counts)).double())).long()
    return torch.where(nz, k, torch.full_like(k, NUM_BINS))


def bin_histogram(bins: torch.Tensor) -> torch.Tensor:
    """Counts of every bin (int64, ``(NUM_BINS,)``) on the device, no host read."""
    # sort + searchsorted: CUDA bincount would read max(bins) on the host
    edges = torch.searchsorted(torch.sort(bins).values, torch.arange(NUM_BINS + 1, device=bins.device))
    return edges[1:] - edges[:-1]
