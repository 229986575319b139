"""Warner's randomized response on every adjacency bit (the RR baseline of DPRR's paper, Hidano & Murakami), by skip
sampling: O(|E| + output) instead of O(n^2).

See :mod:`ldpfast.mechanisms.edges` for the guarantees and the randomness contract.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ... import _backend
from ..._checks import check_eps, check_int
from ...graph import CSR
from ...privacy.budget import Spent
from ...privacy.users import DEFAULT_DOMAIN, keying_of
from ...rng import Stream
from . import _keyed
from ._common import (
    _GUARANTEE,
    EdgeLDPResult,
    _device,
    _graph_csr,
    _graph_seed,
    _num_public,
    _public_for,
    _rr_probs,
    _rr_sample_ei,
)
from .server import DEFAULT_SYMMETRIZE, _check_rule


def expected_rr_output(csr: CSR, eps: float, public=None) -> float:
    """Expected number of directed entries Warner's RR outputs: sum_i d_i p + (n-1-d_i)(1-p)
    over the private users, plus d_i for the public ones.  Computed from exact integer sums
    (degree totals, user counts), so it is the same double on every device."""
    n = csr.num_nodes
    p, pm = _rr_probs(eps)
    deg = csr.degrees()
    if isinstance(public, torch.Tensor) and public.numel():
        m = public.to(torch.bool)
    elif not isinstance(public, torch.Tensor) and public is not None and len(public):
        m = torch.from_numpy(np.asarray(public).astype(bool))
    else:
        m = None
    total = int(deg.sum())
    pub_deg = int(deg[m].sum()) if m is not None else 0
    n_priv = n - (int(m.sum()) if m is not None else 0)
    priv_deg = total - pub_deg
    return p * priv_deg + pm * ((n - 1) * n_priv - priv_deg) + pub_deg


def rr_edges(
    graph,
    eps: float,
    seed: int | None = None,
    max_output_edges: int = 50_000_000,
    public=None,
    symmetrize: str = DEFAULT_SYMMETRIZE,
    backend: str | None = None,
    *,
    user_keys=None,
    dataset: str = DEFAULT_DOMAIN,
    _keying=None,
) -> EdgeLDPResult:
    """Warner's randomized response on every bit of every neighbour list (paper section V-A).

    Each ``a_ij`` (``j != i``) is kept with probability ``p = e^eps / (e^eps + 1)`` and flipped
    otherwise; ``eps``-edge LDP (section III-B).  Same sparse sampler as :func:`dprr` (true
    edges kept w.p. ``p``, false edges by geometric skips w.p. ``1 - p``), but the output
    itself has about ``n (n-1) / (e^eps + 1)`` entries: it is refused when the expected size
    exceeds ``max_output_edges`` (raise it to proceed).

    Parameters
    ----------
    graph, seed, public, symmetrize, backend, user_keys, dataset
        As in :func:`dprr`.
    eps : float
        Budget per user.
    max_output_edges : int
        Upper bound on the expected number of directed output entries.
    """
    eps = check_eps("eps", eps)
    keying = keying_of(seed, user_keys, dataset, 0, _keying)
    return _rr_edges(_graph_csr(graph, backend), eps, keying, max_output_edges, public, symmetrize, backend)


def rr_keyed_rows(keying, eps: float, rp, col, keys, *, pub=None, backend=None, row0: int = 0):
    """Warner's RR keyed to users on rows ``[row0, row0 + m)`` of a graph (as
    :func:`~ldpfast.mechanisms.edges.degree_preserving.dprr_keyed_rows`; host arrays or device
    tensors): every coin of a user's report, and its report id, from the user's key and the
    keyed digest of their whole neighbour set (a changed list is a wholly fresh report:
    :mod:`._keyed`).  Returns ``(rowptr, col)``."""
    m = rp.shape[0] - 1
    p, pm = _rr_probs(eps)
    pubm = _keyed.public_mask(pub)
    coins = _keyed.list_seeds(keying, "rr_edges", {"eps": eps}, rp, col, keys, pubm)
    return _keyed.sample_rows(rp, col, keys, _keyed.key_table(keys, "rr_edges"), coins, mode=0,
                              st_t=int(Stream.RR_EDGES), st_f=int(Stream.RR_EDGES), p_true=_keyed.per_row(rp, m, p),
                              p_false=_keyed.per_row(rp, m, pm), pm=pm, pub=pub, backend=backend, row0=row0)


def _rr_edges(csr: CSR, eps: float, keying, max_output_edges, public, symmetrize, backend,
              edge_index: bool = False) -> EdgeLDPResult:
    """:func:`rr_edges` on a checked CSR and ``eps`` (``edge_index``: as :func:`_dprr`)."""
    n = csr.num_nodes
    dev = _device(csr)
    pub = _public_for(public, n, csr, dev)
    max_output_edges = check_int("max_output_edges", max_output_edges, lo=0)
    symmetrize = _check_rule(symmetrize)
    expected = expected_rr_output(csr, eps, pub)
    if expected > max_output_edges:
        item = csr.col.element_size()
        raise ValueError(
            f"rr_edges: Warner's RR would output about {expected:.4g} directed edges for n={n} at eps={eps:g} "
            f"(flip probability {1.0 / (1.0 + math.exp(eps)):.4g}): ~{expected * item / 2**30:.3g} GiB as CSR "
            f"columns, ~{expected * 16 / 2**30:.3g} GiB as a PyG edge_index; this exceeds max_output_edges="
            f"{max_output_edges}. RR makes a sparse graph dense (O(n^2) output, paper section IV-F); pass a "
            f"larger max_output_edges to run it anyway, or use dprr().")
    p, pm = _rr_probs(eps)
    num_public = _num_public(pub)
    keyed = keying.user_keys is not None
    if keyed:  # every bit addressed by the two users' keys (._keyed), on the graph's device
        rows = _keyed.graph_rows(csr, keying.keys(n, csr.rowptr.device), dev)
        orp, ocol = (_keyed.tensor(a) for a in rr_keyed_rows(keying, eps, *rows, pub=pub, backend=backend))
        noisy, ei = CSR(orp, ocol.to(torch.int32) if csr.col.dtype == torch.int32 else ocol, n), None
    elif dev == "cuda":
        seed = _graph_seed(keying, "rr_edges", {"eps": eps, "n": n}, pub)
        k = _backend.get(dev, backend)
        rp = csr.rowptr
        full = [torch.full((n,), v, dtype=torch.float64, device=rp.device) for v in (p, pm)]
        orp, ocol = k.edges_rr(rp.contiguous(), csr.col.contiguous(), seed, int(Stream.RR_EDGES), 0,
                               int(Stream.RR_EDGES), 1, full[0], full[1], pub)
        noisy, ei = CSR(orp, ocol, n), None
    else:
        seed = _graph_seed(keying, "rr_edges", {"eps": eps, "n": n}, pub)
        noisy, ei = _rr_sample_ei(csr, np.full(n, p), np.full(n, pm), seed,
                                  streams=(Stream.RR_EDGES, 0, Stream.RR_EDGES, 1), public=pub, by_degree=False,
                                  backend=backend, layout=0 if edge_index and symmetrize == "none" else None)
    spent = Spent(
        mechanism="rr_edges", target="edges", eps=eps, guarantee=_GUARANTEE,
        params={"eps": eps, "p": p, "flip_prob": pm, "n": n, "expected_output": expected,
                "num_public": num_public, "symmetrize": symmetrize, "user_keys": keyed},
    )
    res = EdgeLDPResult(noisy=noisy, noisy_degrees=noisy.degrees(), d_star=None, q=None, spent=spent,
                        symmetrize=symmetrize, backend=_backend.resolve(dev, backend))
    res._edge_index = ei
    return res
