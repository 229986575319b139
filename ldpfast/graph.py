"""Graph helpers: PyG ``edge_index`` <-> CSR in O(|E| + n), cleaning, degrees.

Kernels (``csrc/cpu/graph.cpp``, Numba twin ``ldpfast/_numba/graph.py``) use a counting
sort, so conversion is linear in the number of edges; ``rowptr`` is always int64 so graphs
with more than 2**31 edges are supported, ``col`` is int32 when ``num_nodes < 2**31``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from . import _backend

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class CSR:
    """A graph in compressed sparse row form.

    Attributes
    ----------
    rowptr : torch.Tensor
        int64, shape ``(num_nodes + 1,)``; row ``i``'s neighbours are
        ``col[rowptr[i]:rowptr[i+1]]``, sorted ascending.
    col : torch.Tensor
        int32 (``num_nodes < 2**31``) or int64, shape ``(nnz,)``.
    num_nodes : int
    """

    rowptr: torch.Tensor
    col: torch.Tensor
    num_nodes: int

    @property
    def nnz(self) -> int:
        return int(self.col.numel())

    def degrees(self) -> torch.Tensor:
        """Out-degree of every node (int64)."""
        return self.rowptr[1:] - self.rowptr[:-1]

    def to_edge_index(self) -> torch.Tensor:
        """Back to a (2, nnz) int64 ``edge_index`` (row-major order)."""
        row = torch.repeat_interleave(torch.arange(self.num_nodes), self.degrees())
        return torch.stack([row, self.col.to(torch.int64)])


def _check_edge_index(edge_index, num_nodes):
    if not isinstance(edge_index, torch.Tensor):
        raise TypeError(f"edge_index: expected a torch.Tensor, got {type(edge_index).__name__}")
    if edge_index.dim() != 2 or edge_index.size(0) != 2:
        raise ValueError(f"edge_index: expected shape (2, E), got {tuple(edge_index.shape)}")
    if edge_index.dtype not in (torch.int32, torch.int64):
        raise TypeError(f"edge_index: expected an integer tensor, got {edge_index.dtype}")
    if isinstance(num_nodes, bool) or not isinstance(num_nodes, (int, np.integer)):
        raise TypeError(f"num_nodes: expected an int, got {type(num_nodes).__name__}")
    if num_nodes < 0:
        raise ValueError(f"num_nodes: expected >= 0, got {num_nodes}")
    if edge_index.numel() and (int(edge_index.min()) < 0 or int(edge_index.max()) >= num_nodes):
        raise ValueError(
            f"edge_index: node ids must lie in [0, num_nodes={num_nodes}), got range "
            f"[{int(edge_index.min())}, {int(edge_index.max())}]"
        )


def to_csr(
    edge_index: torch.Tensor,
    num_nodes: int,
    *,
    symmetrize: bool = False,
    drop_self_loops: bool = True,
    dedup: bool = True,
    backend: str | None = None,
) -> CSR:
    """Convert a PyG ``edge_index`` to sorted CSR in O(|E| + n).

    Parameters
    ----------
    edge_index : torch.Tensor
        (2, E) integer tensor of directed edges ``src -> dst``.
    num_nodes : int
        Number of nodes; every id must be in ``[0, num_nodes)``.
    symmetrize : bool
        Add the reverse of every edge (undirected graph).
    drop_self_loops, dedup : bool
        Remove ``(i, i)`` entries / repeated edges.  Rows are always sorted.
    backend : str, optional
        'cpp' or 'numba' (default: automatic, see :mod:`ldpfast._backend`).
    """
    _check_edge_index(edge_index, num_nodes)
    ei = edge_index.detach().to("cpu", torch.int64)
    if symmetrize:
        ei = torch.cat([ei, ei.flip(0)], dim=1)
    src = ei[0].contiguous().numpy()
    dst = ei[1].contiguous().numpy()
    col_dtype = torch.int32 if num_nodes <= INT32_MAX else torch.int64
    rowptr = torch.empty(num_nodes + 1, dtype=torch.int64)
    col = torch.empty(src.shape[0], dtype=col_dtype)
    k = _backend.get("cpu", backend)
    k.coo_to_csr(src, dst, int(num_nodes), rowptr.numpy(), col.numpy())
    if dedup or drop_self_loops:
        if not dedup:
            raise ValueError("drop_self_loops without dedup is not supported; pass dedup=True")
        nnz = k.csr_sort_unique(rowptr.numpy(), col.numpy(), bool(drop_self_loops))
        col = col[:nnz].clone()
    else:
        _sort_rows_only(rowptr, col)
    return CSR(rowptr, col, int(num_nodes))


def _sort_rows_only(rowptr, col):
    # Rare path (keep duplicates): sort by (row, col) with a stable key sort.
    row = torch.repeat_interleave(torch.arange(rowptr.numel() - 1), rowptr[1:] - rowptr[:-1])
    key = row * (int(col.max()) + 1 if col.numel() else 1) + col.to(torch.int64)
    col.copy_(col[torch.argsort(key, stable=True)])


def clean_edge_index(edge_index: torch.Tensor, num_nodes: int, *, symmetrize: bool = True,
                     backend: str | None = None) -> torch.Tensor:
    """Undirected, deduplicated, self-loop-free ``edge_index`` (sorted by source, target)."""
    return to_csr(edge_index, num_nodes, symmetrize=symmetrize, backend=backend).to_edge_index()


def degrees(edge_index: torch.Tensor, num_nodes: int) -> torch.Tensor:
    """Out-degree of every node of a (2, E) ``edge_index`` (counts repeated edges)."""
    _check_edge_index(edge_index, num_nodes)
    return torch.bincount(edge_index[0].to(torch.int64), minlength=num_nodes)


def is_symmetric(csr: CSR) -> bool:
    """True if for every entry (i, j) the entry (j, i) is present too."""
    ei = csr.to_edge_index()
    fwd = ei[0] * csr.num_nodes + ei[1]
    rev = ei[1] * csr.num_nodes + ei[0]
    return bool(torch.equal(torch.sort(fwd).values, torch.sort(rev).values))


def csr_of(data, *, backend: str | None = None) -> CSR:
    """CSR of a PyG ``Data``.

    Uses ``data.csr`` when the graph is stored only as CSR (large synthetic graphs);
    otherwise converts ``edge_index`` and caches the result on the object, keyed by the
    tensor's identity, shape and version counter so an edited ``edge_index`` is rebuilt.
    """
    if isinstance(getattr(data, "csr", None), CSR):
        return data.csr
    if "csr" in data and isinstance(data["csr"], CSR):  # PyG's Data.csr() method shadows it
        return data["csr"]
    ei = data.edge_index
    key = (ei.data_ptr(), tuple(ei.shape), int(data.num_nodes), ei._version)
    cached = data.__dict__.get("_ldpfast_csr")
    if cached is not None and cached[0] == key:
        return cached[1]
    csr = to_csr(ei, int(data.num_nodes), symmetrize=False, backend=backend)
    data.__dict__["_ldpfast_csr"] = (key, csr)
    return csr
