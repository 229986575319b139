"""Launchers of the graph checks, the edge_index writer and the sorted CSR builder
(``csrc/cuda/graph.cu``).
"""
from __future__ import annotations

import numpy as np

from ._core import _col_suffix, _via_core

_launch, _ptr = _via_core("_launch"), _via_core("_ptr")


def edges_check_csr(rowptr, col) -> int:
    """Flags of a CSR (1 range, 2 unsorted / duplicate, 4 self loop, 8 asymmetric), as the C++
    edges_check_csr; one host read of two words."""
    import torch

    n = rowptr.numel() - 1
    out = torch.zeros(2, dtype=torch.int64, device=rowptr.device)
    _launch("graph", f"check_csr_{_col_suffix(col)}", n, (_ptr(rowptr), _ptr(col), np.int64(n), _ptr(out)),
            rowptr.device)
    f, h = (int(v) for v in out.tolist())
    return f | (8 if h != 0 else 0)


def csr_to_edge_index(rowptr, col, out_ei, layout) -> None:
    """(2, nnz) int64 edge_index of a CSR into out_ei: layout 0 (col, row), 1 (row, col)."""
    if layout not in (0, 1):
        raise ValueError("layout: expected 0 (col, row) or 1 (row, col)")
    n = rowptr.numel() - 1
    if tuple(out_ei.shape) != (2, col.numel()):
        raise ValueError(f"out_ei: expected shape (2, {col.numel()})")
    _launch("graph", f"csr_to_edge_index_{_col_suffix(col)}", n,
            (_ptr(rowptr), _ptr(col), np.int64(n), _ptr(out_ei), np.int32(layout)), rowptr.device)


SORTED_CHUNK = 32  # edges per thread of sorted_csr_* (graph.cu)


def edges_sorted_csr(src, dst, n, out_rowptr, out_col) -> int:
    """CSR of an edge_index sorted by (source, target) into out_rowptr / out_col, checked in the
    same pass; returns the edges_check_csr flags (flags & 3: outputs not built), as the C++
    edges_sorted_csr.  One host read of two words."""
    import torch

    E = src.numel()
    if dst.numel() != E or dst.dtype != src.dtype:
        raise ValueError(f"dst: expected {E} values of dtype {src.dtype} (as src)")
    if out_rowptr.numel() != n + 1 or out_col.numel() != E:
        raise ValueError(f"out_rowptr, out_col: expected {n + 1} and {E} elements")
    if n < 0:
        raise ValueError("n: expected >= 0")
    if E == 0:
        out_rowptr.zero_()
        return 0
    out = torch.zeros(2, dtype=torch.int64, device=src.device)
    kern = f"sorted_csr_{_col_suffix(src)}_{_col_suffix(out_col)}"
    _launch("graph", kern, (E + SORTED_CHUNK - 1) // SORTED_CHUNK,
            (_ptr(src), _ptr(dst), np.int64(E), np.int64(n), _ptr(out_rowptr), _ptr(out_col), _ptr(out)),
            src.device)
    f, h = (int(v) for v in out.tolist())
    if f & 3:
        return f
    return f | (8 if h != 0 else 0)
