"""LocalLap (paper 001, the baseline of Qin et al.): discrete Laplace noise on every adjacency
entry and the ``T`` largest noisy entries kept, without enumerating the n(n-1)/2 entries.

See :mod:`ldpfast.mechanisms.edges` for the guarantees and the randomness contract.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ... import _backend
from ..._checks import check_eps, check_int
from ...graph import CSR, INT32_MAX
from ...graph import transpose as graph_transpose
from ...privacy.budget import Spent
from ...rng import Stream, resolve_seed
from ._common import (
    _GUARANTEE,
    _I64_MAX,
    _I64_MIN,
    EdgeLDPResult,
    _device,
    _graph_csr,
    _grid,
    _masked_csr,
)
from .server import _COMBINE_MODE, _csr_combine, _csr_union


def _tail(r: float, tau: float) -> float:
    """P[L >= tau] for the discrete Laplace P[L = k] ~ exp(-r |k|), tau an integer (or -inf)."""
    if tau == -math.inf:
        return 1.0
    if tau >= 1:
        return math.exp(-r * tau) / (1.0 + math.exp(-r))
    return 1.0 - math.exp(-r * (1.0 - tau)) / (1.0 + math.exp(-r))


def _threshold(r: float, n0: int, target: float) -> float:
    """Largest integer tau with n0 * P[L >= tau] >= target (-inf if even tau = -inf is short)."""
    if target >= n0:
        return -math.inf
    frac = target / n0
    if _tail(r, 1) >= frac:
        tau = math.floor(-math.log(frac * (1.0 + math.exp(-r))) / r)
    else:
        tau = math.floor(1.0 + math.log((1.0 - frac) * (1.0 + math.exp(-r))) / r)
    tau = max(tau, -(2**62))
    while tau > -(2**62) and n0 * _tail(r, tau) < target:
        tau -= 1
    while n0 * _tail(r, tau + 1) >= target:
        tau += 1
    return float(tau)


def local_laplace(graph, eps: float, seed: int | None = None, backend: str | None = None,
                  max_dense_entries: int = 200_000_000, _target: float | None = None) -> EdgeLDPResult:
    """LocalLap: the local-model LAPGRAPH baseline of the paper (section V-A).

    Each user sends ``d*_i = d_i + Lap(1/eps1)`` and ``a_ij + Lap(1/eps2)`` for ``j > i``
    (upper-triangular part of ``A``); the server sets ``T = sum_i d*_i / 2`` (floored and
    clipped to [0, n(n-1)/2], as in the authors' code) and keeps the ``T`` largest noisy
    entries as undirected edges.  ``eps1 = eps/10``, ``eps2 = 9 eps/10`` (paper).
    ``(eps1_used + eps2_used)``-edge LDP; both noises are exact discrete Laplace on the
    ``2^-10`` grid (module docstring).

    The ``n(n-1)/2`` entries are not enumerated.  The top ``T`` is drawn exactly from the
    same law: for a threshold ``tau`` with ``N0 P[L >= tau] >= T + 10 sqrt(T) + 100``
    (``N0`` = number of zero entries), the zero entries above ``tau`` are found by skip
    sampling with probability ``P[L >= tau]`` (their values drawn from the law of ``L``
    given ``L >= tau``), the true edges get their noise directly, and the ``T`` largest of
    these candidates are kept (ties at the boundary broken uniformly at random).  If fewer
    than ``T`` candidates come out (probability below ``e^-50``), ``tau`` is lowered and only
    the remaining entries are sampled, conditioned on lying below the previous threshold,
    so the result has the law of the dense algorithm, up to the skip sampler's gaps: they are
    within relative ``2^-49`` of Geometric(``P[L >= tau]``) factor by factor (``geom_draw``,
    module docstring), so every likelihood ratio is within ``e^(+-2^-46)`` of the dense
    algorithm's, the same negligible factor as RR's false edges.  Time O(|E| + n + T) expected;
    a final dense round (``tau = -inf``), needed only when ``T`` is close to ``n(n-1)/2``,
    visits every entry and is refused above ``max_dense_entries``.

    Returns
    -------
    EdgeLDPResult
        ``noisy`` is the undirected output graph; ``d_star`` the noisy degrees; ``q`` None.
    """
    eps = check_eps("eps", eps)
    return _local_laplace(_graph_csr(graph, backend), eps, seed, backend, max_dense_entries, _target)


def _local_laplace(csr: CSR, eps: float, seed, backend, max_dense_entries=200_000_000,
                   _target=None) -> EdgeLDPResult:
    """:func:`local_laplace` on a checked CSR and ``eps``.  A CUDA graph stays on the device:
    the kernels run there, the candidates and the top-T selection too (``_top_t_mask``); the
    host reads sizes and counts only (T, each round's number of candidates, the ties)."""
    n = csr.num_nodes
    max_dense_entries = check_int("max_dense_entries", max_dense_entries, lo=0)
    seed = resolve_seed(seed)
    dev = _device(csr)
    on_dev = dev == "cuda"
    k = _backend.get(dev, backend)
    eps1 = eps / 10.0
    eps2 = eps - eps1  # = 9 eps / 10 up to rounding
    g1, t1, s1, eps1_used = _grid("eps1", eps1)
    g2, t2, s2, eps2_used = _grid("eps2", eps2)
    while eps1_used + eps2_used > eps:  # floating point: never spend more than eps
        eps2 = math.nextafter(eps2, 0.0)
        g2, t2, s2, eps2_used = _grid("eps2", eps2)
    G1, G2 = round(1.0 / g1), round(1.0 / g2)
    r2 = s2 / t2  # rate per grid step of the entry noise
    # kernel arguments: tensors on the device, arrays on the host
    arr = (lambda t: t.contiguous()) if on_dev else (lambda t: t.contiguous().numpy())
    rp, col = csr.rowptr.contiguous(), csr.col.contiguous()
    dv = rp.device

    # noisy degrees, CellRng(seed, LOCALLAP, i, 0); T exactly, in integer arithmetic
    noise = torch.empty((n, 1), dtype=torch.int64, device=dv)
    k.fill_discrete_laplace(arr(noise), seed, int(Stream.LOCALLAP), 0, t1, s1)
    deg = csr.degrees()
    d_star = deg.to(torch.float64) + g1 * noise[:, 0].to(torch.float64)
    total_units = int(deg.sum()) * G1 + int(noise.sum())
    N = n * (n - 1) // 2
    T = min(max(total_units // (2 * G1), 0), N)
    del noise

    # true upper-triangular entries: 1 + noise (grid units), CellRng(seed, LOCALLAP, i, j)
    ones_val = torch.empty(col.numel(), dtype=torch.int64, device=dv)
    k.locallap_edge_values(arr(rp), arr(col), seed, t2, s2, G2, arr(ones_val))
    E_u = csr.nnz // 2
    N0 = N - E_u
    base_target = T + 10.0 * math.sqrt(T) + 100.0 if _target is None else float(_target)  # tests force rounds

    excl = csr  # rows listing the excluded positions (entries <= i are ignored by the kernel)
    rounds: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    hi, prev_tau, prev_tail = _I64_MAX, math.inf, 0.0
    zero_count, rnd = 0, 0
    while True:
        tau = _threshold(r2, N0, base_target * 4.0**rnd)
        if tau >= prev_tau:  # threshold did not move: ask for more next round
            rnd += 1
            continue
        if tau == -math.inf:
            lo, pi = _I64_MIN, 1.0
            rest = N0 - zero_count
            if rest > max_dense_entries:
                raise RuntimeError(
                    f"local_laplace: T={T} needs a dense pass over {rest} remaining zero entries (more than "
                    f"max_dense_entries={max_dense_entries}); T is close to n(n-1)/2 = {N}")
        else:
            lo = int(tau)
            pi = min(1.0, (_tail(r2, tau) - prev_tail) / (1.0 - prev_tail))
        if on_dev:
            orp, zc, zv = k.locallap_zero(excl.rowptr.contiguous(), excl.col.contiguous(), seed, rnd, pi, lo, hi,
                                          t2, s2)
        else:
            orp = torch.empty(n + 1, dtype=torch.int64)
            erp, ecol = excl.rowptr.contiguous().numpy(), excl.col.contiguous().numpy()
            sample = k.locallap_zero_sample(erp, ecol, seed, rnd, pi, lo, hi, t2, s2, orp.numpy())
            zc = torch.empty(sample.nnz, dtype=excl.col.dtype)
            zv = torch.empty(sample.nnz, dtype=torch.int64)
            sample.write(zc.numpy(), zv.numpy(), np.empty(0, dtype=np.int64), 0)
        rounds.append((orp, zc, zv))
        zero_count += zc.numel()
        # true upper entries above the threshold (entries j <= i hold INT64_MIN: below every
        # threshold but the dense round's, which takes every upper entry)
        ones_cand = ones_val >= lo if lo != _I64_MIN else ones_val != _I64_MIN
        ones_above = int(torch.count_nonzero(ones_cand))  # (a bool sum is 20x slower on CPU)
        if zero_count + ones_above >= T or tau == -math.inf:
            break
        # rare (probability < e^-50): lower the threshold; exclude this round's picks and draw
        # the remaining entries conditioned on lying below the current threshold
        excl = _csr_union(excl, CSR(orp, zc, n), backend)
        hi, prev_tau, prev_tail = lo, tau, _tail(r2, tau)
        rnd += 1

    # candidates (row < col, value), in the order round 0, 1, ..., true edges (the tie-break
    # of _top_t_mask counts ties in this order); then the T largest
    idx = torch.nonzero(ones_cand).flatten()
    vals = torch.cat([zv for _, _, zv in rounds] + [ones_val[idx]])
    del ones_val, ones_cand
    keep = _top_t_mask(vals, T, seed)
    # each source's kept entries as a CSR (rows sorted); the sources are disjoint (a round
    # excludes the true edges and earlier picks), so their union is the kept upper triangle U
    kept, off = [], 0
    for orp, zc, _ in rounds:
        kept.append(_masked_csr(orp, zc, keep[off:off + zc.numel()], n))
        off += zc.numel()
    kept.append(_masked_csr(torch.searchsorted(idx, rp), col[idx], keep[off:], n))
    U = kept[0]
    for part in kept[1:]:
        U = _csr_union(U, part, backend)
    if n <= INT32_MAX and U.col.dtype != torch.int32:  # as to_csr would store it
        U = CSR(U.rowptr, U.col.to(torch.int32), n)
    # undirected output: row i = (U^T row i, all < i) then (U row i, all > i)
    out = _csr_combine(graph_transpose(U, backend=backend), U, _COMBINE_MODE["lower"], backend)
    spent = Spent(
        mechanism="locallap", target="edges", eps=eps1_used + eps2_used, guarantee=_GUARANTEE,
        params={"eps": eps, "eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "eps2_used": eps2_used,
                "granularity_degree": g1, "granularity_entries": g2, "T": T, "n": n,
                "threshold": lo, "threshold_rounds": len(rounds), "candidates": int(vals.shape[0])},
    )
    return EdgeLDPResult(noisy=out, noisy_degrees=out.degrees(), d_star=d_star, q=None,
                         spent=spent, symmetrize="symmetric", backend=_backend.resolve(dev, backend))




def _tie_choice(n_ties: int, need: int, seed: int) -> np.ndarray:
    """Sorted ranks (among the ties, in index order) of the ``need`` tied candidates kept:
    ``need`` of ``n_ties`` without replacement from NumPy's Philox keyed by (seed, a LocalLap
    tag), the same on every backend and device (it sees only the two counts)."""
    rng = np.random.Generator(np.random.Philox(key=(int(seed) << 64) | 0x4C6F63616C4C6170))
    return np.sort(rng.choice(n_ties, size=need, replace=False))


def _kth_smallest(vals: torch.Tensor, kk: int) -> torch.Tensor:
    """The ``kk``-th smallest value (1-based), exactly ``torch.kthvalue(vals, kk)``.

    LocalLap keeps all but a few of its candidates (``kk = C - T + 1`` is about
    ``10 sqrt(T)``), so the quickselect runs on the values at most ``q``, a value that a
    strided sample puts a little above the answer: when at least ``kk`` values are ``<= q``
    the kk smallest are all among them.  Otherwise (a sample far off) the whole tensor."""
    C = vals.numel()
    if kk > C // 8:
        return torch.kthvalue(vals, kk).values
    stride = max(1, kk // 1000)
    samp = vals[::stride]
    q = torch.kthvalue(samp, min(samp.numel(), int(1.5 * kk / stride) + 64)).values
    sub = vals[vals <= q]
    if sub.numel() < kk:
        return torch.kthvalue(vals, kk).values
    return torch.kthvalue(sub, kk).values


def _top_t_mask(vals: torch.Tensor, T: int, seed: int) -> torch.Tensor:
    """Mask of the T largest values; ties at the boundary broken uniformly at random.

    Deterministic on every device: the boundary value ``v*`` (the T-th largest; values are
    exact int64) from a sort, ``vals > v*`` kept, and ``need`` of the tied positions, taken in
    index order, chosen by :func:`_tie_choice` (host, from the counts only).
    """
    C = vals.numel()
    if T <= 0:
        return torch.zeros(C, dtype=torch.bool, device=vals.device)
    if T >= C:
        return torch.ones(C, dtype=torch.bool, device=vals.device)
    vstar = _kth_smallest(vals, C - T + 1)  # the (C-T)-th smallest, 0-based
    keep = vals > vstar
    ties = torch.nonzero(vals == vstar).flatten()
    need = T - int(torch.count_nonzero(keep))
    sel = torch.from_numpy(_tie_choice(ties.numel(), need, seed)).to(vals.device)
    keep[ties[sel]] = True
    return keep
