"""Server side of the edge randomisers: ``transpose`` and ``server_graph`` (the symmetrisation
rules applied to the noisy lists), and the row-wise CSR combination kernels behind them.

See :mod:`ldpfast.mechanisms.edges` for the guarantees and the randomness contract.
"""
from __future__ import annotations

import numpy as np
import torch

from ... import _backend
from ...graph import CSR
from ...graph import transpose as graph_transpose

#: The rules of :func:`server_graph` for turning the noisy lists into the server's graph.
SYMMETRIZE_RULES = ("none", "or", "and", "lower", "upper")
#: The default rule: the noisy lists as they are (what the authors' code does).
DEFAULT_SYMMETRIZE = "none"
_COMBINE_MODE = {"or": 0, "and": 1, "lower": 2, "upper": 3}


def _check_rule(symmetrize: str) -> str:
    if symmetrize not in SYMMETRIZE_RULES:
        raise ValueError(f"symmetrize: expected one of {SYMMETRIZE_RULES}, got {symmetrize!r}")
    return symmetrize


def transpose(csr: CSR, backend: str | None = None) -> CSR:
    """``A^T`` of a CSR in O(|E| + n) (rows sorted; the parallel counting sort of
    :func:`ldpfast.graph.transpose`)."""
    return graph_transpose(CSR(csr.rowptr, csr.col, csr.num_nodes), backend=backend)


def server_graph(noisy: CSR, symmetrize: str = DEFAULT_SYMMETRIZE, backend: str | None = None) -> CSR:
    """The graph the server trains on, from the noisy lists ``A~`` (row i = user i's list).

    Rules (O(|E~| + n), C++/Numba kernels):

    ``"none"``  (default; what the authors' code does)
        ``A~`` itself, directed: user ``i`` keeps her own noisy list.
    ``"or"``
        ``A~ OR A~^T``: an edge if either endpoint reported it.
    ``"and"``
        ``A~ AND A~^T``: an edge if both endpoints reported it.
    ``"lower"``
        Keep ``a~_ij`` for ``j < i`` (reported by the larger id) and mirror it, as Imola et
        al.'s ARR; every undirected pair is decided by exactly one user.
    ``"upper"``
        Keep ``a~_ij`` for ``j > i`` and mirror it.

    The paper states no rule (section IV-A: "the server calculates a noisy adjacency matrix
    A~ corresponding to a~_1..a~_n").  The result is symmetric except for ``"none"``.
    """
    _check_rule(symmetrize)
    if symmetrize == "none":
        return noisy
    return _csr_combine(noisy, transpose(noisy, backend), _COMBINE_MODE[symmetrize], backend)


# --------------------------------------------------------------------------------------------
# DPRR
# --------------------------------------------------------------------------------------------
def _csr_union(a: CSR, b: CSR, backend: str | None = None) -> CSR:
    """Row-wise union of two CSRs with sorted rows (O(|A| + |B| + n))."""
    return _csr_combine(a, b, _COMBINE_MODE["or"], backend)


def _csr_combine(a: CSR, b: CSR, mode: int, backend: str | None = None) -> CSR:
    """Row-wise combination of two CSRs with sorted rows (``csr_combine`` modes; count, fill)."""
    n = a.num_nodes
    dev = _backend.device_of(a.rowptr, a.col, b.rowptr, b.col)
    k = _backend.get(dev, backend)
    if dev == "cuda":
        orp, oc = k.csr_combine(a.rowptr.contiguous(), a.col.contiguous(), b.rowptr.contiguous(),
                                b.col.to(a.col.dtype).contiguous(), mode)
        return CSR(orp, oc, n)
    ca = a.col.contiguous().numpy()
    cb = b.col.to(a.col.dtype).contiguous().numpy()
    ra, rb = a.rowptr.contiguous().numpy(), b.rowptr.contiguous().numpy()
    orp = torch.empty(n + 1, dtype=torch.int64)
    k.csr_combine(ra, ca, rb, cb, mode, orp.numpy(), np.empty(0, dtype=ca.dtype), False)
    np.cumsum(orp.numpy(), out=orp.numpy())
    oc = torch.empty(int(orp[n]), dtype=a.col.dtype)
    k.csr_combine(ra, ca, rb, cb, mode, orp.numpy(), oc.numpy(), True)
    return CSR(orp, oc, n)
