"""LocalLap (the baseline of Qin et al. in DPRR's paper, Hidano & Murakami): discrete Laplace noise on every adjacency
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
from ...privacy.users import DEFAULT_DOMAIN, keying_of
from ...rng import Stream
from ._common import (
    _GUARANTEE,
    _I64_MAX,
    _I64_MIN,
    EdgeLDPResult,
    _device,
    _graph_csr,
    _graph_seed,
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


_LL_NOT_CAND = _I64_MIN + 1  # true upper entry below every threshold so far (edges.h LL_NOT_CAND)
_LL_HIGH = _I64_MAX  # zero pick above the split, value not drawn (edges.h LL_HIGH)
_MAX_ROUND = 254  # true entries of round r >= 1 use cell rows (r + 1) 2^40 + i < 2^48
_HIGH_ROW = 255 << 40  # cells (2^40 255 + k, 0) of the split's values, when needed (no other use)


def _next_round(r2: float, N0: int, N: int, T: int, base_target: float, rnd: int, prev_tau: float,
                prev_tail: float, zero_count: int, max_dense_entries: int) -> tuple[int, float, int, float]:
    """The threshold round after one at ``prev_tau`` (``inf`` before the first): ``(rnd, tau,
    lo, pi)`` of round ``rnd`` or of the first later one whose threshold moves (the target
    grows 4x a round), with ``lo`` its integer threshold and ``pi`` the skip sampler's rate for
    the zero entries not yet decided (conditioned below ``prev_tau``).  Shared by the
    single-machine loop and the sharded driver (``ldpfast.distributed.shards``)."""
    while True:
        tau = _threshold(r2, N0, base_target * 4.0**rnd)
        if tau < prev_tau:
            break
        rnd += 1  # threshold did not move: ask for more next round
    if rnd > _MAX_ROUND:  # unreachable: the target passes N0 (tau = -inf) long before
        raise RuntimeError(f"local_laplace: more than {_MAX_ROUND} threshold rounds (bug)")
    if tau == -math.inf:
        rest = N0 - zero_count
        if rest > max_dense_entries:
            raise RuntimeError(
                f"local_laplace: T={T} needs a dense pass over {rest} remaining zero entries (more than "
                f"max_dense_entries={max_dense_entries}); T is close to n(n-1)/2 = {N}")
        return rnd, tau, _I64_MIN, 1.0
    return rnd, tau, int(tau), min(1.0, (_tail(r2, tau) - prev_tail) / (1.0 - prev_tail))


def _split_point(r: float, s: int, n0: int, e_u: int, one: int, lo: int, T: int,
                 target: float | None = None) -> int | None:
    """Round 0's split: the smallest integer ``h > lo`` with ``n0 P[L >= h] + e_u P[L >= h - one]
    <= T - 10 sqrt(T) - 100`` (the expected number of candidates at or above ``h``), or None
    (no split: ``lo < 1``, ``T`` too small, or ``(h - lo) s`` past int64).  Only the speed and
    the chance of :func:`_resolve_high` drawing values depend on it, never the law."""
    target = T - 10.0 * math.sqrt(T) - 100.0 if target is None else target  # (tests force it)
    if lo < 1 or target <= 0:
        return None

    def f(x):
        return n0 * _tail(r, x) + e_u * _tail(r, x - one)

    th = _threshold(r, n0, target)
    a = lo if th == -math.inf else max(lo, int(th))  # f(a) >= target, or a = lo
    step = 1
    while f(a + step) > target:
        step *= 2
    lo_b, hi_b = a + step // 2, a + step  # f(hi_b) <= target
    while hi_b - lo_b > 1:
        mid = (lo_b + hi_b) // 2
        lo_b, hi_b = (lo_b, mid) if f(mid) <= target else (mid, hi_b)
    h = max(hi_b, lo + 1)
    return h if h - lo <= _I64_MAX // s else None


def _high_values(count: int, h: int, seed: int, t: int, s: int, k, dev, arr) -> torch.Tensor:
    """``count`` independent exact draws of ``L`` given ``L >= h`` (``h >= 1``: ``h`` plus the
    nonnegative draws, in order, of exact discrete Laplace cells ``(2^40 255 + k, 0)``: given
    ``L >= 0``, ``L`` is geometric with the rate of the tail above ``h``)."""
    got, row0, out = 0, _HIGH_ROW, []
    while got < count:
        m = 2 * (count - got) + 64
        buf = torch.empty((m, 1), dtype=torch.int64, device=dev)
        k.fill_discrete_laplace(arr(buf), seed, int(Stream.LOCALLAP), row0, t, s)
        y = buf[:, 0]
        y = y[y >= 0][:count - got]
        out.append(y)
        got += y.numel()
        row0 += m
    return torch.cat(out) + h


def _resolve_high(vals: torch.Tensor, n_round0: int, h: int, T: int, seed: int, t: int, s: int, k, arr) -> None:
    """Round 0's LL_HIGH picks (the first ``n_round0`` of ``vals``) stand for values ``>= h``,
    above every other candidate below ``h``.  When fewer than ``T`` candidates are ``>= h``
    they are all kept and the sentinel ranks them right; otherwise (probability below about
    e^-50 by the choice of ``h``) their values are drawn (:func:`_high_values`, in index
    order) into ``vals``."""
    high = vals[:n_round0] == _LL_HIGH
    n_high = int(torch.count_nonzero(high))
    if n_high == 0 or T <= 0 or n_high + int(torch.count_nonzero(vals[n_round0:] >= h)) < T:  # (T <= 0: none kept)
        return
    vals[:n_round0][high] = _high_values(n_high, h, seed, t, s, k, vals.device, arr)


def local_laplace(graph, eps: float, seed: int | None = None, backend: str | None = None,
                  max_dense_entries: int = 200_000_000, _target: float | None = None,
                  _split_target: float | None = None, *, user_keys=None, dataset: str = DEFAULT_DOMAIN,
                  _keying=None) -> EdgeLDPResult:
    """LocalLap: the local-model LAPGRAPH baseline of the paper (section V-A).

    Each user sends ``d*_i = d_i + Lap(1/eps1)`` and ``a_ij + Lap(1/eps2)`` for ``j > i``
    (upper-triangular part of ``A``); the server sets ``T = sum_i d*_i / 2`` (floored and
    clipped to [0, n(n-1)/2], as in the authors' code) and keeps the ``T`` largest noisy
    entries as undirected edges.  ``eps1 = eps/10``, ``eps2 = 9 eps/10`` (paper).
    ``(eps1_used + eps2_used)``-edge LDP; both noises are exact discrete Laplace on the
    ``2^-10`` grid (module docstring).

    The ``n(n-1)/2`` entries are not enumerated, and only the values that decide the top ``T``
    are drawn.  For a threshold ``tau`` with ``N0 P[L >= tau] >= T + 10 sqrt(T) + 100``
    (``N0`` = number of zero entries):

    * zero entries at or above ``tau`` are found by skip sampling with probability
      ``P[L >= tau]``.  With a split ``h > tau >= 1`` (the expected number of entries, true or
      zero, at or above ``h`` is at most ``T - 10 sqrt(T) - 100``), each pick is at or above
      ``h`` with exact probability ``P[L >= h | L >= tau] = exp(-r (h - tau))`` and then gets no
      value; the others get an exact value of ``L`` given ``tau <= L < h`` (the band).
    * each true upper entry is a candidate when ``G + L >= tau`` (``G = 1/g`` grid steps per
      unit, ``r`` the rate per step): for ``x = tau - G >= 1`` a row's candidates are found by
      skip sampling over its upper entries with probability ``P[L >= x]`` (as the zero
      entries), each with the exact value ``tau + geometric`` (memoryless) from its own cell;
      otherwise every entry gets its full exact draw.  Non-candidates get no value.
    * the ``T`` largest candidates are kept (ties at the boundary broken uniformly at random).
      When fewer than ``T`` candidates are at or above ``h`` (all but probability about
      ``e^-50``), every pick above the split is kept without a value; otherwise their values
      are drawn exactly from ``L`` given ``L >= h`` (:func:`_high_values`) first.

    If fewer than ``T`` candidates come out (probability below ``e^-50``), ``tau`` is lowered
    and only the remaining entries are decided, conditioned on lying below the previous
    threshold (true entries by an exact full draw from their round's own cell).  Exact, as in
    the dense algorithm: the split and every value drawn (integer arithmetic only, no
    rounding); within a factor: the skip sampler's gaps (zero entries, and true entries in
    round 0), within relative ``2^-49`` of Geometric(``p``) factor by factor (``geom_draw``,
    module docstring), ``p`` the double of the tail probability ``P[L >= tau]`` or
    ``P[L >= tau - G]``.  So every likelihood ratio is within ``e^(+-2^-46)`` of the dense algorithm's,
    the same negligible factor as RR's false edges; ``eps1_used + eps2_used`` is spent as the
    exact mechanism's.  Time O(|E| + n + T) expected, with exact values for about
    ``20 sqrt(T)`` band picks and the true candidates only; a final dense round
    (``tau = -inf``), needed only when ``T`` is close to ``n(n-1)/2``, visits every entry and
    is refused above ``max_dense_entries``.

    The randomness is derived from ``seed`` (the caller's secret), ``dataset`` and ``eps``:
    two settings never share bits.  Rows are the users of this graph (one release): LocalLap
    has no user-keyed path yet, and ``user_keys`` is refused.

    Returns
    -------
    EdgeLDPResult
        ``noisy`` is the undirected output graph; ``d_star`` the noisy degrees; ``q`` None.
    """
    eps = check_eps("eps", eps)
    keying = keying_of(seed, user_keys, dataset, 0, _keying)
    return _local_laplace(_graph_csr(graph, backend), eps, keying, backend, max_dense_entries, _target, _split_target)


def _local_laplace(csr: CSR, eps: float, keying, backend, max_dense_entries=200_000_000,
                   _target=None, _split_target=None, edge_index: bool = False) -> EdgeLDPResult:
    """:func:`local_laplace` on a checked CSR and ``eps``.  A CUDA graph stays on the device:
    the kernels run there, the candidates and the top-T selection too (``_top_t_mask``); the
    host reads sizes and counts only (T, each round's number of candidates, the ties).
    ``edge_index``: also build :attr:`EdgeLDPResult.edge_index` with the output (CPU; the
    CSR's col is then its int64 second row, a view)."""
    n = csr.num_nodes
    max_dense_entries = check_int("max_dense_entries", max_dense_entries, lo=0)
    if keying.user_keys is not None:
        raise ValueError("user_keys: LocalLap has no user-keyed path yet (its top-T selection couples every "
                         "user's noisy entries); use dprr or rr_edges with user keys, or randomise one release "
                         "of this graph without them")
    seed = _graph_seed(keying, "local_laplace", {"eps": eps, "n": n}, None)
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

    # true upper-triangular entries: 1 + noise (grid units), drawn round by round (ll_edge_value).
    # Round 0 on the skip path (the usual case) gives its few candidates alone (C++); the dense
    # per-entry values are made only when a later round needs them (round 0's from the same draws).
    ones_val, cand = None, None
    sparse0 = not on_dev and hasattr(k, "locallap_edge_candidates")
    round0 = None
    E_u = csr.nnz // 2
    N0 = N - E_u
    base_target = T + 10.0 * math.sqrt(T) + 100.0 if _target is None else float(_target)  # tests force rounds

    excl = csr  # rows listing the excluded positions (entries <= i are ignored by the kernel)
    rounds: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []
    hi, prev_tau, prev_tail = _I64_MAX, math.inf, 0.0
    zero_count, rnd, split_at = 0, 0, None
    while True:
        rnd, tau, lo, pi = _next_round(r2, N0, N, T, base_target, rnd, prev_tau, prev_tail, zero_count,
                                       max_dense_entries)
        # first round: zero picks at or above split_at are kept without a value (LL_HIGH)
        zhi = hi
        if not rounds:
            split_at = _split_point(r2, s2, N0, E_u, G2, lo, T, _split_target)
            zhi = _I64_MAX if split_at is None else split_at
        split = split_at is not None and not rounds
        # true upper entries at or above the threshold (the others hold LL_NOT_CAND, entries
        # j <= i INT64_MIN: both below every candidate value); first, so that the zero picks'
        # values can be written in front of them (separate cells: the order changes no draw)
        p_true = _tail(r2, lo - G2) if rnd == 0 and lo != _I64_MIN else 0.0  # (skip path's rate)
        if sparse0 and rnd == 0 and hi == _I64_MAX and lo != _I64_MIN and lo - G2 >= 1:  # edges.h ll_edge_fast
            i_np, v_np = k.locallap_edge_candidates(arr(rp), arr(col), seed, t2, s2, G2, lo, p_true)
            idx, true_vals = torch.from_numpy(i_np), torch.from_numpy(v_np)
            round0 = (lo, p_true)
        else:
            if ones_val is None:
                ones_val = torch.empty(col.numel(), dtype=torch.int64, device=dv)
                if round0 is not None:  # round 0 was sparse: its dense values first (same cells)
                    k.locallap_edge_values(arr(rp), arr(col), seed, t2, s2, G2, 0, round0[0], _I64_MAX, round0[1],
                                           arr(ones_val))
            k.locallap_edge_values(arr(rp), arr(col), seed, t2, s2, G2, rnd, lo, hi, p_true, arr(ones_val))
            idx = torch.nonzero(ones_val > _LL_NOT_CAND).flatten()
            true_vals = ones_val[idx]
        if on_dev:
            orp, zc, zv = k.locallap_zero(excl.rowptr.contiguous(), excl.col.contiguous(), seed, rnd, pi, lo, zhi,
                                          split, t2, s2)
        else:
            orp = torch.empty(n + 1, dtype=torch.int64)
            erp, ecol = excl.rowptr.contiguous().numpy(), excl.col.contiguous().numpy()
            sample = k.locallap_zero_sample(erp, ecol, seed, rnd, pi, lo, zhi, split, t2, s2, orp.numpy())
            zc = torch.empty(sample.nnz, dtype=torch.int32 if n <= INT32_MAX else torch.int64)
            # the candidate values in one buffer, this round's true ones last: with one round
            # (the usual case) it is the candidate array, with no concatenation
            cand = torch.empty(sample.nnz + true_vals.numel(), dtype=torch.int64)
            zv = cand[:sample.nnz]
            sample.write(zc.numpy(), zv.numpy(), np.empty(0, dtype=np.int64), 0)
            cand[sample.nnz:] = true_vals
        rounds.append((orp, zc, zv))
        zero_count += zc.numel()
        ones_above = idx.numel()
        if zero_count + ones_above >= T or tau == -math.inf:
            break
        # rare (probability < e^-50): lower the threshold; exclude this round's picks and draw
        # the remaining entries conditioned on lying below the current threshold
        excl = _csr_union(excl, CSR(orp, zc, n), backend)
        hi, prev_tau, prev_tail = lo, tau, _tail(r2, tau)
        rnd += 1

    # candidates (row < col, value), in the order round 0, 1, ..., true edges (the tie-break
    # of _top_t_mask counts ties in this order); then the T largest
    if len(rounds) == 1 and cand is not None:
        vals = cand  # zero values then true values, written in place
    else:
        vals = torch.cat([zv for _, _, zv in rounds] + [true_vals])
    del ones_val, true_vals, cand
    if split_at is not None:
        _resolve_high(vals, rounds[0][2].numel(), split_at, T, seed, t2, s2, k, arr)
    keep = _top_t_mask(vals, T, seed)
    n_cand = int(vals.shape[0])
    del vals
    # the sources of candidates, each a CSR of upper entries with its slice of keep; they are
    # disjoint (a round excludes the true edges and earlier picks), so the union of their kept
    # entries is the kept upper triangle U, T entries
    sources, off = [], 0
    for orp, zc, _ in rounds:
        sources.append((orp, zc, keep[off:off + zc.numel()]))
        off += zc.numel()
    sources.append((torch.searchsorted(idx, rp), col[idx], keep[off:]))
    out, ei = _symmetric_output(sources, T, n, k, backend, edge_index and not on_dev)
    spent = Spent(
        mechanism="locallap", target="edges", eps=eps1_used + eps2_used, guarantee=_GUARANTEE,
        params={"eps": eps, "eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "eps2_used": eps2_used,
                "granularity_degree": g1, "granularity_entries": g2, "T": T, "n": n,
                "threshold": lo, "threshold_rounds": len(rounds), "candidates": n_cand},
    )
    res = EdgeLDPResult(noisy=out, noisy_degrees=out.degrees(), d_star=d_star, q=None,
                        spent=spent, symmetrize="symmetric", backend=_backend.resolve(dev, backend))
    res._edge_index = ei
    return res


def _symmetric_output(sources, T: int, n: int, k, backend, edge_index: bool):
    """The undirected output graph ``U + U^T`` (row i: ``U^T`` row i, all ``< i``, then ``U`` row
    i, all ``> i``) of the kept entries of ``sources`` (``(rowptr, col, keep)``, disjoint upper
    triangles, ``T`` kept in all), and its ``(2, 2T)`` edge_index ``(row, col)`` when
    ``edge_index`` (else None).

    On the CPU one C++ kernel (``locallap_symmetric``) reads the sources twice and writes the
    rowptr and the columns, or the edge_index whose second row is then the CSR's col (a view,
    int64).  Elsewhere (CUDA, Numba) the same graph from masked CSRs, their union, a transpose
    and a row-wise combine."""
    small = n <= INT32_MAX  # int32 columns, as to_csr would store them
    if hasattr(k, "locallap_symmetric") and _backend.device_of(sources[0][0]) == "cpu":
        cdt = torch.int32 if small else torch.int64
        rps = [rp_.contiguous().numpy() for rp_, _, _ in sources]
        cols = [c.to(cdt).contiguous().numpy() for _, c, _ in sources]
        keeps = [m.contiguous().numpy() for _, _, m in sources]
        orp = torch.empty(n + 1, dtype=torch.int64)
        if edge_index:
            ei = torch.empty((2, 2 * T), dtype=torch.int64)
            k.locallap_symmetric(rps, cols, keeps, T, orp.numpy(), np.empty(0, dtype=cols[0].dtype), ei.numpy())
            return CSR(orp, ei[1], n), ei
        oc = torch.empty(2 * T, dtype=cdt)
        k.locallap_symmetric(rps, cols, keeps, T, orp.numpy(), oc.numpy(), np.empty(0, dtype=np.int64))
        return CSR(orp, oc, n), None
    kept = [_masked_csr(rp_, c, m, n) for rp_, c, m in sources]
    U = kept[0]
    for part in kept[1:]:
        U = _csr_union(U, part, backend)
    if small and U.col.dtype != torch.int32:
        U = CSR(U.rowptr, U.col.to(torch.int32), n)
    out = _csr_combine(graph_transpose(U, backend=backend), U, _COMBINE_MODE["lower"], backend)
    return out, None




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
