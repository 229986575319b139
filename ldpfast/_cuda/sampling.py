"""Launchers of the HeterPoisson sub-graph sampler (``csrc/cuda/sampling.cu``).
"""
from __future__ import annotations

import numpy as np

from ._core import NULL, _col_suffix, _prefix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


# --- HeterPoisson sampling (sampling.cu) -------------------------------------------------------
# Same names and arguments as the C++ entry points (csrc/cpu/sampling.cpp) where they exist;
# data arguments are CUDA tensors.  Prefix sums (cumsum) are torch ops on the device.

def heter_central(cand, seed, step, q_b, flags) -> None:
    """flags[i] = central trial of candidate cand[i] at step (no host read: the sampler
    counts the flags on the device and reads the count with its other sizes)."""
    m = cand.numel()
    _launch("sampling", "heter_central", m,
            (_ptr(cand), np.int64(m), np.uint64(seed), np.uint32(step), np.float64(q_b), _ptr(flags)),
            cand.device)


def host_ints(t) -> list[int]:
    """The values of a small int64 device tensor on the host: the sampler's one read per
    batch (its sizes), a single device-to-host copy."""
    return [int(v) for v in t.tolist()]


def heter_nodes(rowptr, col, deg, centers, cand_mask, allow_mask, seed, step, q_b, M, drop, ub_ptr,
                counts, n_id, zeroed) -> None:
    """Node lists into slots ub_ptr[b] (>= 1 + deg(centers[b])), sizes into counts; allow_mask
    None or empty: every node may be peripheral.  Centres are trusted to be valid node ids
    (the sampler draws them from its candidates)."""
    B = centers.numel()
    allow = NULL if allow_mask is None or allow_mask.numel() == 0 else _ptr(allow_mask)
    _launch("sampling", f"heter_nodes_{_col_suffix(col)}", B,
            (_ptr(rowptr), _ptr(col), _ptr(deg), _ptr(centers), np.int64(B), _ptr(cand_mask), allow,
             np.uint64(seed), np.uint32(step), np.float64(q_b), np.float64(M), np.int32(bool(drop)),
             _ptr(ub_ptr), _ptr(counts), _ptr(n_id), _ptr(zeroed)), centers.device)


def heter_infer(rowptr, col, centers, allow_mask, seed, step, n_test):
    """Inference sub-graphs (section 4.4) of the test nodes ``centers`` as (node_ptr, n_id):
    count pass, cumsum, fill pass, the same node lists as the C++ heter_infer_nodes.
    allow_mask None or empty: every neighbour admissible."""
    import torch

    if n_test < 0:
        raise ValueError("n_test: expected >= 0")
    B = centers.numel()
    dev = centers.device
    allow = NULL if allow_mask is None or allow_mask.numel() == 0 else _ptr(allow_mask)
    kern = f"heter_infer_{_col_suffix(col)}"
    counts = torch.zeros(B, dtype=torch.int64, device=dev)
    head = (_ptr(rowptr), _ptr(col), _ptr(centers), np.int64(B), allow, np.uint64(seed), np.uint32(step),
            np.int64(n_test))
    _launch("sampling", kern, B, head + (_ptr(counts), NULL, NULL, np.int32(0)), dev)
    node_ptr = _prefix(counts)
    n_id = torch.empty(int(node_ptr[-1]), dtype=torch.int64, device=dev)
    _launch("sampling", kern, B, head + (NULL, _ptr(node_ptr), _ptr(n_id), np.int32(1)), dev)
    return node_ptr, n_id


def heter_edge_counts(rowptr, col, n_id, node_ptr, induced):
    """Count pass of :func:`heter_edges`: (B,) int64 edges of every sub-graph, no host read.
    Only ``n_id[node_ptr[0]:node_ptr[B]]`` is read (``n_id`` may be longer)."""
    import torch

    B = node_ptr.numel() - 1
    dev = n_id.device
    counts = torch.zeros(B, dtype=torch.int64, device=dev)
    _launch("sampling", f"heter_edges_{_col_suffix(col)}", B,
            (_ptr(rowptr), _ptr(col), _ptr(n_id), _ptr(node_ptr), np.int64(B), np.int32(bool(induced)), NULL,
             _ptr(counts), NULL, NULL, np.int32(0)), dev)
    return counts


def heter_edges(rowptr, col, n_id, node_ptr, induced, edge_ptr=None, num_edges=None):
    """(2, E) int64 edge_index (block-diagonal local ids) of the induced (or star) sub-graph of
    every node list: count pass, cumsum, fill pass, as the C++ sampler.  With ``edge_ptr``
    (the cumsum of :func:`heter_edge_counts`) and ``num_edges`` (its last value, read by the
    caller) only the fill pass runs: no host read here."""
    import torch

    B = node_ptr.numel() - 1
    dev = n_id.device
    kern = f"heter_edges_{_col_suffix(col)}"
    if edge_ptr is None:
        counts = heter_edge_counts(rowptr, col, n_id, node_ptr, induced)
        edge_ptr = torch.zeros(B + 1, dtype=torch.int64, device=dev)
        torch.cumsum(counts, 0, out=edge_ptr[1:])
        num_edges = int(edge_ptr[-1])
    E = int(num_edges)
    out = torch.empty(2, E, dtype=torch.int64, device=dev)
    src, dst = out[0], out[1]  # contiguous rows of a (2, E) tensor
    _launch("sampling", kern, B, (_ptr(rowptr), _ptr(col), _ptr(n_id), _ptr(node_ptr), np.int64(B),
                                  np.int32(bool(induced)), _ptr(edge_ptr), NULL, _ptr(src), _ptr(dst),
                                  np.int32(1)), dev)
    return out
