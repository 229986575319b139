"""DPRR, degree-preserving randomized response (Hidano & Murakami, Algorithm 1): noisy degrees by the
discrete Laplace mechanism (``eps1``), then RR with per-user sampling ``q_i`` (``eps2``).

See :mod:`ldpfast.mechanisms.edges` for the guarantees and the randomness contract.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ... import _backend
from ..._checks import check_eps, check_int, check_prob
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
    _grid,
    _num_public,
    _public_for,
    _rr_probs,
    _rr_sample_ei,
)
from .server import DEFAULT_SYMMETRIZE, _check_rule


def dprr_budget(eps: float, n_max: int, alpha: float = 0.9, eps1: float | None = None) -> tuple[float, float]:
    """Budget split ``(eps1, eps2)`` of DPRR.

    ``eps1 = max(sqrt(8 / (n_max - 1)), (1 - alpha) eps)`` (paper eq. 8) unless ``eps1`` is
    given, and ``eps2 = eps - eps1`` in both cases (the paper's experiments use
    ``eps2 = alpha eps``, which exceeds the budget when the first term of eq. 8 wins).

    Raises
    ------
    ValueError
        If ``eps1 >= eps`` (nothing left for Warner's RR).
    """
    eps = check_eps("eps", eps)
    if eps1 is None:
        n_max = check_int("n_max", n_max, lo=2)
        alpha = check_prob("alpha", alpha, open_low=True, open_high=True)
        eps1 = max(math.sqrt(8.0 / (n_max - 1)), (1.0 - alpha) * eps)
        how = (f"the paper's allocation (eq. 8) gives eps1 = max(sqrt(8/(n_max-1)), (1-alpha)*eps) = "
               f"max({math.sqrt(8.0 / (n_max - 1)):.6g}, {(1.0 - alpha) * eps:.6g}) with n_max={n_max}, "
               f"alpha={alpha:g}; use a larger eps, or pass eps1 < eps explicitly")
    else:
        eps1 = check_eps("eps1", eps1)
        how = "pass eps1 < eps"
    if eps1 >= eps:
        raise ValueError(f"eps1: eps1 = {eps1:.6g} >= eps = {eps:.6g} leaves no budget for Warner's RR "
                         f"(eps2 = eps - eps1 must be > 0); {how}")
    return eps1, eps - eps1


def dprr(
    graph,
    eps: float,
    seed: int | None = None,
    eps1: float | None = None,
    public=None,
    n_max: int | None = None,
    alpha: float = 0.9,
    symmetrize: str = DEFAULT_SYMMETRIZE,
    backend: str | None = None,
    *,
    user_keys=None,
    dataset: str = DEFAULT_DOMAIN,
    _keying=None,
) -> EdgeLDPResult:
    """Degree-Preserving Randomized Response (paper Algorithm 1), for every user at once.

    For each private user ``i`` (``d_i = |a_i|``)::

        d*_i = d_i + g * DLap                          # line 2, Lap(1/eps1) on the 2^-10 grid
        p    = e^eps2 / (e^eps2 + 1)                   # line 3
        q_i  = Proj(d*_i / (d*_i (2p-1) + (n-1)(1-p))) # lines 4-5, eq. (6); q_i = 0 if d*_i <= 0
        a~_i = EdgeSampling(RR(a_i, p), q_i)           # lines 6-7: P[a~_ij=1] = p q_i or (1-p) q_i

    sampled in O(d_i + |a~_i|) without visiting the ``n - 1 - d_i`` non-neighbours one by one
    (true edges: one Bernoulli(p q_i) each; false edges: geometric skips with probability
    ``(1-p) q_i`` over the non-neighbours).  Total time and memory O(|E| + n + output).

    Parameters
    ----------
    graph : ldpfast.graph.CSR or torch_geometric.data.Data
        Simple undirected graph; row ``i`` is user ``i``'s neighbour list.
    eps : float
        Total budget per user, ``eps1 + eps2``.
    seed : int, optional
        The caller's 64-bit secret; ``None`` draws a fresh one from the OS.  Same secret, same
        output on every backend and thread count.  The randomness is derived from it, the
        ``dataset`` name and every parameter below (two settings never share bits).
    eps1 : float, optional
        Budget of the noisy degree.  Default: paper eq. (8).  ``eps2 = eps - eps1`` always.
    public : bool tensor of shape (n,) or tensor of node ids, optional
        Non-private users (customized setting, section IV-A): their lists are sent
        unchanged and they spend nothing; the guarantee covers the private users.
    n_max : int, optional
        Maximum number of nodes over the graphs of the task (eq. 8); default ``n``.
    alpha : float
        Constant of eq. (8) in (0, 1); paper: 0.9.
    symmetrize : {"none", "or", "and", "lower", "upper"}
        Server-side rule for :attr:`EdgeLDPResult.edge_index` (see :func:`server_graph`).
    backend : {"cpp", "numba", "cuda"}, optional
        Default: ``"cuda"`` for a CUDA graph, else ``"cpp"`` (see :mod:`ldpfast._backend`).
    user_keys : 1-D int tensor, optional
        One distinct, dense key per user (see :mod:`ldpfast.mechanisms.edges._keyed`): every
        bit ``(i, j)`` is then addressed by user ``i``'s seed and user ``j``'s key, user ``i``'s
        seed being derived from their key and their whole neighbour set, so an unchanged user
        keeps their report when others join, leave or are reordered, and a changed list is a
        wholly fresh report (charged).  With user keys, eq. (6) uses ``n_max`` when it is given
        (so ``q_i`` does not move as the graph grows); without ``n_max`` it uses ``n``, and a
        new ``n`` is a new setting: every user's report is then fresh, and charged.
        On CUDA data the keyed sampler runs on the device (same bits).  Default: rows are the
        users of this graph only (one release).
    dataset : str
        Dataset name (domain separator; default ``"default"``).

    Returns
    -------
    EdgeLDPResult
        ``spent.eps = eps1_used + eps2 <= eps`` where ``eps1_used <= eps1`` is the rate the
        exact discrete Laplace sampler realises.

    Notes
    -----
    Privacy (Proposition 2, Appendix A): the noisy degree is ``eps1_used``-edge LDP (a change
    of one bit moves ``d_i`` by 1 = 1024 grid steps; the grid pmf ratio is at most
    ``exp(1024 * eps1_used * g)``), ``q_i`` is post-processing of it, RR is ``eps2``-edge LDP
    and the sampling is post-processing; by sequential composition (Lemma 1) DPRR is
    ``(eps1_used + eps2)``-edge LDP.
    """
    eps = check_eps("eps", eps)
    keying = keying_of(seed, user_keys, dataset, 0, _keying)
    return _dprr(_graph_csr(graph, backend), eps, keying, eps1, public, n_max, alpha, symmetrize, backend)


def _dprr(csr: CSR, eps: float, keying, eps1, public, n_max, alpha, symmetrize, backend,
          edge_index: bool = False) -> EdgeLDPResult:
    """:func:`dprr` on a checked CSR (``_graph_csr``) and a checked ``eps``; ``edge_index``:
    also write :attr:`EdgeLDPResult.edge_index` in the sampler's pass (rule ``"none"`` only;
    the other rules build it from the server graph when asked)."""
    n = csr.num_nodes
    dev = _device(csr)
    pub = _public_for(public, n, csr, dev)
    n_max_given = n_max is not None
    if n_max is None:
        n_max = n
    else:
        n_max = check_int("n_max", n_max, lo=max(n, 2))
    alpha = check_prob("alpha", alpha, open_low=True, open_high=True)
    symmetrize = _check_rule(symmetrize)
    allocation = "paper eq. 8 (eps2 = eps - eps1)" if eps1 is None else "given eps1 (eps2 = eps - eps1)"
    eps1, eps2 = dprr_budget(eps, n_max, alpha, eps1)
    g, t, s, eps1_used = _grid("eps1", eps1)
    while eps1_used + eps2 > eps:  # floating point: never report more than eps
        eps2 = math.nextafter(eps2, 0.0)
    backend_name = _backend.resolve(dev, backend)
    k = _backend.get(dev, backend)
    p, pm = _rr_probs(eps2)
    streams = (int(Stream.DPRR_TRUE), 0, int(Stream.DPRR_FALSE), 0)
    law = {"eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "granularity": g, "dlap_t": t, "dlap_s": s}
    keyed = keying.user_keys is not None
    n_q = n_max if keyed and n_max_given else n  # eq. (6)'s n
    if not keyed:
        seed = _graph_seed(keying, "dprr", {**law, "n": n, "n_max": n_max, "alpha": alpha}, pub)

    if keyed:
        noisy, ei, d_star_t, q_t = _dprr_keyed(csr, keying, law, pub, p, pm, n_q, backend)
    elif dev == "cuda":  # everything on the device; the only host read is the output size
        rp = csr.rowptr.contiguous()
        noise = torch.empty((n, 1), dtype=torch.int64, device=rp.device)
        k.fill_discrete_laplace(noise, seed, int(Stream.DPRR_DEGREE), 0, t, s)
        d_star_t, q_t, p_true, p_false = k.dprr_probs(rp, noise.view(-1), g, p, pm)
        del noise
        orp, ocol = k.edges_rr(rp, csr.col.contiguous(), seed, *streams, p_true, p_false, pub)
        del p_true, p_false
        noisy, ei = CSR(orp, ocol, n), None  # edge_index: csr_to_edge_index on first access
        if pub is not None:
            m = pub.to(torch.bool)
            d_star_t = torch.where(m, torch.full_like(d_star_t, float("nan")), d_star_t)
            q_t = torch.where(m, torch.full_like(q_t, float("nan")), q_t)
    else:
        # lines 1-2: noisy degrees on the grid, CellRng(seed, DPRR_DEGREE, i, 0); lines 3-7: p,
        # q_i (eq. 6) + Proj and the per-bit probabilities of eq. (7) (edges::dprr_probs)
        noise = np.empty((n, 1), dtype=np.int64)
        k.fill_discrete_laplace(noise, seed, int(Stream.DPRR_DEGREE), 0, t, s)
        rp = csr.rowptr.contiguous().numpy()
        d_star, q, p_true, p_false = (np.empty(n, dtype=np.float64) for _ in range(4))
        k.dprr_probs(rp, noise.reshape(-1), g, p, pm, d_star, q, p_true, p_false)  # a view: (n, 1) is contiguous
        del noise
        noisy, ei = _rr_sample_ei(csr, p_true, p_false, seed, streams=streams, public=pub, by_degree=True,
                                  backend=backend, layout=0 if edge_index and symmetrize == "none" else None)
        del p_true, p_false
        if pub.size:
            m = pub.astype(bool)
            d_star[m] = np.nan
            q[m] = np.nan
        d_star_t, q_t = torch.from_numpy(d_star), torch.from_numpy(q)
    spent = Spent(
        mechanism="dprr",
        target="edges",
        eps=eps1_used + eps2,
        guarantee=_GUARANTEE,
        params={
            "eps": eps, "eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "p": p, "flip_prob": pm, "granularity": g, "dlap_t": t, "dlap_s": s, "n": n, "n_max": n_max, "alpha": alpha,
            "allocation": allocation, "num_public": _num_public(pub),
            "symmetrize": symmetrize, "user_keys": keyed, "n_q": n_q,
        },
    )
    res = EdgeLDPResult(noisy=noisy, noisy_degrees=noisy.degrees(), d_star=d_star_t, q=q_t, spent=spent,
                        symmetrize=symmetrize, backend=backend_name)
    res._edge_index = ei
    return res


def _dprr_keyed(csr: CSR, keying, law: dict, pub, p: float, pm: float, n_q: int, backend):
    """DPRR keyed to users (:mod:`._keyed`) on a whole graph, on the graph's device."""
    n = csr.num_nodes
    rows = _keyed.graph_rows(csr, keying.keys(n, csr.rowptr.device), _device(csr))
    orp, ocol, d_star, q = (_keyed.tensor(a) for a in dprr_keyed_rows(keying, law, *rows, n_q=n_q, p=p, pm=pm,
                                                                       pub=pub, backend=backend))
    noisy = CSR(orp, ocol.to(torch.int32) if csr.col.dtype == torch.int32 else ocol, n)
    m = _keyed.public_mask(pub)
    if m is not None:
        nan = torch.full_like(d_star, float("nan"))
        d_star, q = torch.where(m, nan, d_star), torch.where(m, nan, q)
    return noisy, None, d_star, q


def dprr_keyed_rows(keying, law: dict, rp, col, keys, *, n_q: int, p: float, pm: float, pub=None, backend=None,
                    row0: int = 0):
    """DPRR keyed to users on rows ``[row0, row0 + m)`` of a graph (a whole graph, or a shard of
    :func:`ldpfast.distributed.shards.randomize`): ``rp`` local, ``col`` global ids, ``keys``
    every user's key (host arrays, or device tensors: the CUDA sampler), ``keying`` the rows'
    Keying.  Degree noise, coins and report ids from one seed per user (key, neighbour set,
    parameters, ``n_q``), q by eq. (6) with ``n_q``.  Returns ``(rowptr, col, d_star, q)``."""
    pubm = _keyed.public_mask(pub)
    # one seed per user for the degree noise (stream DPRR_DEGREE) and every RR coin (DPRR_TRUE /
    # DPRR_FALSE), from the key, the whole neighbour set and every parameter of the law (n_q
    # included: eq. (6)'s q moves with it): a changed list or setting is a wholly fresh report
    coins = _keyed.list_seeds(keying, "dprr", {**law, "n_q": int(n_q), "levels": _keyed.L_TOP}, rp, col, keys, pubm)
    on_dev = _keyed.on_device(rp)
    noise = _keyed.degree_noise(coins if on_dev else torch.from_numpy(coins.view(np.int64)), law["dlap_t"],
                                law["dlap_s"], backend, on_dev)
    d_star = _keyed.noisy_degrees(rp, noise, law["granularity"])
    q = _q_of(d_star, n_q, p, pm)
    orp, ocol = _keyed.sample_rows(rp, col, keys, _keyed.key_table(keys, "dprr"), coins, mode=1,
                                   st_t=int(Stream.DPRR_TRUE), st_f=int(Stream.DPRR_FALSE), p_true=p * q, p_false=q,
                                   pm=pm, pub=pub, backend=backend, row0=row0)
    return orp, ocol, d_star, q


def _bit_probs(d_star: np.ndarray, n: int, eps2: float):
    """(p, 1-p, q, p q, (1-p) q): RR probabilities, eq. (6) + Proj, and eq. (7) per user.

    The NumPy reference of the kernels' ``dprr_probs`` (``edges::dprr_probs`` in
    ``csrc/common/edges.h``, which :func:`dprr` runs on every backend; tests check the bits
    agree); the benchmarks use it to reproduce DPRR's probabilities."""
    p, pm = _rr_probs(eps2)
    q = _q_of(d_star, n, p, pm)
    return p, pm, q, p * q, pm * q


def _q_of(d_star, n: int, p: float, pm: float):
    """Eq. (6) with Proj onto [0, 1]; q = 0 where d* <= 0.  (p - pm) is 2p - 1.  A tensor (the
    keyed CUDA path) gets the same IEEE operations where it lives."""
    if isinstance(d_star, torch.Tensor):
        pos = d_star > 0
        ds = torch.where(pos, d_star, torch.ones_like(d_star))
        q = ds / (ds * (p - pm) + (n - 1) * pm)
        return torch.clamp(torch.where(pos, q, torch.zeros_like(q)), 0.0, 1.0)
    pos = d_star > 0
    ds = np.where(pos, d_star, 1.0)
    q = ds / (ds * (p - pm) + (n - 1) * pm)
    q = np.where(pos, q, 0.0)
    return np.clip(q, 0.0, 1.0)
