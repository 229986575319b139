"""Synthetic power-law graphs with planted classes, generated in O(|E| + n * C).

The model is the Chung-Lu expected-degree model (Chung & Lu 2002, "Connected components in
random graphs with given expected degree sequences") with a planted class structure, sampled
by the skip algorithm of Miller & Hagberg (2011, "Efficient generation of networks with given
expected degrees", WAW 2011) in time linear in the number of edges.  The kernels are
``csrc/cpu/synthetic.cpp`` (C++, per-row bodies in ``csrc/common/synthetic.h``),
``ldpfast/_numba/synthetic.py`` (Numba twin) and ``csrc/cuda/synthetic.cu`` (CUDA, the same
bodies); all give bit-identical graphs for one seed, independent of the thread count.

GPU path (``device="cuda"`` or ``backend="cuda"``; **compiled with nvcc and NVRTC, never yet
run on a GPU**): the node plan of steps 1-4 below (weights, classes, ids, the calibration of
``alpha``: O(n C log n), node arrays only) is computed on the host by the CPU backend and
uploaded once; the edges never touch the host.  The walk of step 5 runs as a count launch
(one thread per row), a device prefix sum, one host read of the total (the allocation size)
and a fill launch; the trim of step 6 is a stable ``torch.sort`` of the per-edge priorities
(``synth_priorities``, the same words): the ``drop`` lowest go, ties in edge order, which is
exactly the set the histogram trim removes; the CSR of step 7 is a ``torch.sort`` of the
distinct 64-bit keys ``row * n + col`` of both directions with ``torch.searchsorted`` row
pointers (a simple graph has no repeated key, so the result is the sorted adjacency the
counting sort builds).  Features are one thread per cell.  Peak device memory for the
Orkut-sized graph is estimated (not measured) at 8 to 10 GB: the sort of 234M int64 keys
(keys, sorted keys, sort indices and the sort's scratch).

Model
-----
1. **Target weights.**  ``W_r = c * (r + i0) ** (-1 / (gamma - 1))`` for ranks
   ``r = 0 .. n-1`` (a discrete power law whose degree distribution has tail exponent
   ``gamma``), ``c`` sets the mean to ``avg_degree``; the offset ``i0 >= 1`` is solved so
   that ``W_0 = max_degree`` (when the exponent allows it with ``i0 >= 1``), then weights
   are capped at ``max_degree``.  Computed with the library's deterministic log/exp (only
   IEEE ``+ - * /``) and an exactly rounded sum, so they do not depend on the platform's libm.
2. **Classes (stratified).**  Ranks are cut into blocks of ``num_classes`` consecutive
   ranks; each block gets a uniformly random permutation of the classes (Fisher-Yates with
   ``CellRng(seed, SYNTH_CLASS, block, 0)``).  Class sizes are balanced to within one node
   and every class receives the same share of the heavy tail, which is what the homophily
   factors below assume.
3. **Node ids.**  A uniformly random bijection between ranks and node ids (sort of 64-bit
   keys from ``CellRng(seed, SYNTH_DEGREE, rank, 0)``), so ids carry no information about
   degree or class.
4. **Edges.**  Each unordered pair ``{u, v}`` is an edge independently with probability
   ``p_uv = min(1, alpha * W_u * W_v * f(y_u, y_v) / S)``, ``S = sum(W)``,
   ``f = C h`` inside a class and ``C (1 - h) / (C - 1)`` across classes (``f = 1`` for
   ``C = 1``).  Without truncation this keeps every expected degree at ``alpha * W_u`` and
   makes a fraction ``h`` of the edges intra-class.  ``alpha`` (close to 1) is solved by
   Newton's method so that the *exact* expected number of edges,
   ``sum_{u<v} p_uv`` (computed in O(n C log n)), equals ``n * avg_degree / 2``: it
   compensates for the pairs truncated at probability 1 and for the excluded self pairs.
5. **Sampling.**  Nodes are ordered by (class, weight descending).  Row ``u`` walks the
   candidates ``v > u`` of each class segment by thinning (Miller & Hagberg 2011, Alg. 2):
   skip ``Geometric(pb)`` candidates, where ``pb`` bounds ``p_uv`` for every remaining ``v``
   (the weights descend), then accept the landing pair with probability ``p_uv / pb``.
   Miller & Hagberg reset ``pb`` after every candidate; here ``pb`` is reset (to the bound
   given by the largest weight of the landing block of 64 positions) only when that lowers
   it by more than 1/16, which saves a logarithm per candidate and rejects few of them
   (thinning is exact for any valid bound).  The acceptance test ``U * pb < p_uv`` is first
   decided with the block's smallest / largest weight (tables small enough for the cache);
   ``W_v`` itself is read only when they do not decide it, with the same outcome (rounding is
   monotone): this avoids a cache miss per candidate.  Row ``u`` uses its own generator
   ``CellRng(seed, SYNTH_EDGES, u, attempt * C + segment)``.  One pass: each thread writes
   its block of rows into its own region of the output (sized from the expected counts,
   10+ standard deviations of slack), then the regions are moved together; if a region
   overflowed, a count pass and a fill pass are run instead (same output).
6. **Exact edge count** (``num_edges``).  ``alpha`` is solved for an expected count of
   ``num_edges + 5 sqrt(num_edges) + 10`` (the count is Poisson-binomial, its standard
   deviation is below ``sqrt(num_edges)``); in the rare case the sample falls short, the
   sampling is repeated with a 4x larger margin and fresh randomness (``attempt += 1``),
   deterministically.  The surplus is then removed uniformly at random, so the result is a
   uniformly random ``num_edges``-subset of the sampled graph: the ``k``-th upper-triangle
   edge of row ``u`` gets as 32-bit priority the ``k``-th word of
   ``CellRng(seed, SYNTH_TRIM, u, 0)`` (one Philox block gives four priorities; one cell per
   edge would cost four times as much); the surplus with the lowest priorities goes, exact
   ties broken by edge order (earlier edges go first).  The threshold is found with a
   65536-bin histogram of the high 16 bits, then of the low 16 bits inside the boundary bin
   (O(|E|) time, O(1) extra memory per thread); rows are compacted in place.  Removing a
   uniform random subset scales every edge probability by the same factor (about
   ``1 - 5 / sqrt(num_edges)``).
7. **CSR.**  The symmetric CSR by node id (int64 ``rowptr``, int32 ``col``, rows sorted, no
   self loops, no duplicates) is built from the upper triangle by a parallel counting sort
   (per-thread counts become per-thread write offsets: no atomics, deterministic) and a
   per-row sort.  Peak memory: the upper triangle (4 bytes per edge, plus 3% slack) and
   the final CSR (8 bytes per undirected edge) plus O(n) arrays; for the Orkut-sized graph
   (117M edges) the process peaks at about 2 GiB.

Features (optional) are class-correlated and drawn per cell from
``CellRng(seed, SYNTH_FEATURES, node, feature)``: each (class, feature) has a prototype
``q = 0.5 + feature_signal * (U - 0.5)``.  ``"binary"``: ``x = Bernoulli(q[y])``;
``"continuous"``: ``x = clip(q[y] + U' - 0.5, 0, 1)`` (uniform noise, no Gaussian: a
Box-Muller transform uses libm functions that are not bit-identical across backends).
"""
from __future__ import annotations

import math
import time

import numpy as np
import torch

from .. import _backend, _checks
from ..graph import CSR
from ..rng import det_log, resolve_seed

__all__ = ["orkut_like", "synthetic"]

INT32_MAX = 2**31 - 1
_EM_EXACT_TERMS = 4096
_MAX_ATTEMPTS = 10

# Orkut (SNAP com-Orkut): 3,072,441 nodes, 117,185,083 undirected edges, max degree 33,313.
ORKUT_NODES = 3_072_441
ORKUT_EDGES = 117_185_083
ORKUT_MAX_DEGREE = 33_313

# --- deterministic exp / pow (IEEE +,-,*,/ only; twin of det_log in ldpfast.rng) ----------
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_EXP_COEF = [1.0 / math.factorial(i) for i in range(15)]


def _det_exp(x):
    x = np.asarray(x, dtype=np.float64)
    k = np.rint(x * _INV_LN2)
    r = (x - k * _LN2_HI) - k * _LN2_LO  # |r| <= 0.35
    p = np.full_like(r, _EXP_COEF[14])
    for c in reversed(_EXP_COEF[:14]):
        p = p * r + c
    return np.ldexp(p, k.astype(np.int64))


def _det_pow(x, a):
    """x ** a for x > 0 with platform-independent bits (a few ulp accuracy)."""
    return _det_exp(a * det_log(x))


def _fsum(x) -> float:
    return math.fsum(np.asarray(x, dtype=np.float64).tolist())


def _ratio_max_to_mean(n: int, beta: float, i0: float) -> float:
    """W_0 / mean(W) for W_r = (r + i0)^-beta: exact first terms + Euler-Maclaurin tail."""
    k = min(n, _EM_EXACT_TERMS)
    head = _det_pow(np.arange(k, dtype=np.float64) + i0, -beta)
    total = _fsum(head)
    if n > k:
        a, b = float(k) + i0, float(n - 1) + i0
        pa, pb = (float(v) for v in _det_pow(np.array([a, b]), -beta))
        qa, qb = (float(v) for v in _det_pow(np.array([a, b]), 1.0 - beta))
        integral = (qb - qa) / (1.0 - beta)
        d1 = (-beta * pb / b) - (-beta * pa / a)  # f'(b) - f'(a)
        c3 = -beta * (beta + 1.0) * (beta + 2.0)
        d3 = c3 * pb / (b * b * b) - c3 * pa / (a * a * a)
        total = _fsum([total, integral, 0.5 * (pa + pb), d1 / 12.0, -d3 / 720.0])
    return float(head[0]) * n / total


def _power_law_weights(n: int, avg_degree: float, gamma: float, max_degree: float):
    """Descending target weights with mean ``avg_degree`` and maximum ``max_degree``."""
    beta = 1.0 / (gamma - 1.0)
    target = max_degree / avg_degree
    if _ratio_max_to_mean(n, beta, 1.0) <= target:
        i0 = 1.0  # the exponent cannot reach max_degree with i0 >= 1: keep the natural max
    else:
        lo, hi = 1.0, 2.0
        while _ratio_max_to_mean(n, beta, hi) > target:
            lo, hi = hi, hi * 2.0
        for _ in range(200):
            mid = 0.5 * (lo + hi)
            if mid <= lo or mid >= hi or hi - lo <= 1e-12 * hi:
                break
            if _ratio_max_to_mean(n, beta, mid) > target:
                lo = mid
            else:
                hi = mid
        i0 = hi
    w = _det_pow(np.arange(n, dtype=np.float64) + i0, -beta)
    w *= avg_degree * n / _fsum(w)
    np.minimum(w, max_degree, out=w)
    np.minimum.accumulate(w, out=w)  # exactly non-increasing (the skip bound relies on it)
    return w, i0


def _homophily_factors(C: int, h: float) -> np.ndarray:
    if C == 1:
        return np.ones(1, dtype=np.float64)
    f = np.full((C, C), C * (1.0 - h) / (C - 1), dtype=np.float64)
    np.fill_diagonal(f, C * h)
    return f.reshape(-1)


def _reachable_pairs(n: int, class_sizes: np.ndarray, C: int, h: float) -> int:
    """Number of pairs with a non-zero edge probability."""
    total = n * (n - 1) // 2
    if C == 1 or 0.0 < h < 1.0:
        return total
    intra = int(sum(int(s) * (int(s) - 1) // 2 for s in class_sizes))
    return intra if h == 1.0 else total - intra


def _stratified_sizes(n: int, C: int) -> np.ndarray:
    sizes = np.full(C, n // C, dtype=np.int64)
    # the last partial block of n % C ranks: class sizes depend on the seed, but the
    # reachable-pair check needs only the worst case, so use the balanced split
    sizes[: n % C] += 1
    return sizes


class _Plan:
    """Everything the edge kernels need, in position order (class, then weight rank)."""

    def __init__(self, k, seed, n, C, h, avg_degree, gamma, max_degree, timings):
        t0 = time.perf_counter()
        w_rank, self.i0 = _power_law_weights(n, avg_degree, gamma, max_degree)
        timings["weights"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        cls_rank = np.empty(n, dtype=np.int32)
        key = np.empty(n, dtype=np.uint64)
        k.synth_nodes(seed, C, cls_rank, key)
        id_of_rank = np.empty(n, dtype=np.int32)
        id_of_rank[np.argsort(key, kind="stable")] = np.arange(n, dtype=np.int32)
        del key
        pos_rank = np.argsort(cls_rank, kind="stable")
        self.W = np.ascontiguousarray(w_rank[pos_rank])
        self.cls = np.ascontiguousarray(cls_rank[pos_rank])
        self.ids = np.ascontiguousarray(id_of_rank[pos_rank])
        self.seg = np.zeros(C + 1, dtype=np.int64)
        np.cumsum(np.bincount(cls_rank, minlength=C), out=self.seg[1:])
        self.y = np.empty(n, dtype=np.int64)
        self.y[id_of_rank] = cls_rank
        self.w_node = np.empty(n, dtype=np.float64)
        self.w_node[id_of_rank] = w_rank
        self.fmat = _homophily_factors(C, h)
        self.S = _fsum(w_rank)
        self.n, self.C = n, C
        self.prefix = np.zeros(n + 1, dtype=np.float64)
        np.cumsum(self.W, out=self.prefix[1:])
        self.erow = np.empty(n, dtype=np.float64)
        self.lrow = np.empty(n, dtype=np.float64)
        timings["nodes"] = time.perf_counter() - t0

    def expected(self, k, scale):
        return k.synth_expected(self.W, self.cls, self.seg, self.fmat, scale, self.prefix,
                                self.erow, self.lrow)

    def calibrate(self, k, target: float) -> float:
        """``scale = alpha / S`` with sum_{u<v} p_uv = target (Newton; E is concave)."""
        scale = 1.0 / self.S
        for _ in range(100):
            E, L = self.expected(k, scale)
            if abs(E - target) <= 1e-10 * target + 1e-9:
                break
            if not L > 0.0:
                raise ValueError("cannot reach the requested number of edges with these parameters")
            step = (target - E) * scale / L
            if scale + step == scale:
                break
            scale = scale + step
        return scale

    def work(self, uniform: bool) -> np.ndarray:
        """Prefix of estimated row costs (thread balance only)."""
        w = np.zeros(self.n + 1, dtype=np.int64)
        if uniform:
            w[1:] = np.arange(1, self.n + 1)
        else:
            np.cumsum(self.erow.astype(np.int64) + (self.C + 1), out=w[1:])
        return w

    def sample(self, k, seed: int, attempt: int, scale: float, uniform: bool):
        """Upper triangle (rowptr, col) by position; uniform=True for scale = inf."""
        n = self.n
        work = self.work(uniform)
        if not uniform:
            expect = np.zeros(n + 1, dtype=np.int64)
            np.cumsum(np.ceil(self.erow).astype(np.int64), out=expect[1:])
            e = int(expect[n])
            cap = e + e // 32 + 4096 * (max(1, int(k.get_num_threads())) + 1)
            rowptr = np.empty(n + 1, dtype=np.int64)
            col = np.empty(cap, dtype=np.int32)
            total = k.synth_edge_sample(seed, attempt, self.W, self.cls, self.seg, self.fmat,
                                        scale, work, expect, rowptr, col)
            if total >= 0:
                return rowptr, col[:total]
            del col
        # fallback (a region overflowed, or every pair is sampled): count, then fill
        rowptr = np.zeros(n + 1, dtype=np.int64)
        k.synth_edge_count(seed, attempt, self.W, self.cls, self.seg, self.fmat, scale, work,
                           rowptr[1:])
        np.cumsum(rowptr, out=rowptr)
        col = np.empty(int(rowptr[n]), dtype=np.int32)
        k.synth_edge_fill(seed, attempt, self.W, self.cls, self.seg, self.fmat, scale, work,
                          rowptr, col)
        return rowptr, col


def _weight_tables(W: np.ndarray):
    """Max / min of W over blocks of 64 positions (the bound tables of the walk, as the C++
    make_plan builds them; synth::BLOCK_SHIFT = 6)."""
    starts = np.arange(0, W.shape[0], 64)
    return np.maximum.reduceat(W, starts), np.minimum.reduceat(W, starts)


def _device_type(device, backend) -> str:
    """'cpu' or 'cuda': ``device`` if given, else 'cuda' when the backend asked for (argument,
    then LDPFAST_BACKEND) is 'cuda'."""
    if device is None:
        return "cuda" if _backend.requested(backend) == "cuda" else "cpu"
    try:
        t = torch.device(device).type
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device: expected 'cpu', 'cuda' or a torch.device, got {device!r}") from exc
    if t not in ("cpu", "cuda"):
        raise ValueError(f"device: expected 'cpu', 'cuda' or a torch.device, got {device!r}")
    return t


def _device_csr(k, seed: int, n: int, uptr, ucol, drop: int, ids):
    """Trim and symmetric CSR of a device upper triangle with torch ops (deterministic).

    The trim keeps the edges after the ``drop`` first of a stable sort of the priorities:
    the ``drop`` lowest go, exact ties in edge order, i.e. the edges ``synth_trim`` removes.
    The CSR is the sorted list of distinct keys ``row * n + col`` of both directions (a
    simple graph has no repeated key, so any sort gives the same bits), row pointers by
    ``searchsorted``: the sorted adjacency that ``synth_symmetrize`` builds."""
    dev = ucol.device
    total = ucol.numel()
    rows = torch.repeat_interleave(torch.arange(n, device=dev), uptr[1:] - uptr[:-1], output_size=total)
    if drop > 0:
        prio = k.synth_priorities(uptr, total, seed)
        kept = torch.sort(prio, stable=True).indices[drop:]
        del prio
        rows, ucol = rows[kept], ucol[kept]
        del kept
    a, b = ids[rows], ids[ucol.to(torch.int64)]
    del rows, ucol
    key = torch.cat([a * n + b, b * n + a])
    del a, b
    key = torch.sort(key).values
    rowptr = torch.searchsorted(key, torch.arange(n + 1, device=dev) * n)
    col = torch.remainder(key, n).to(torch.int32)
    return rowptr, col


def _validate(num_nodes, avg_degree, num_classes, homophily, degree_exponent, max_degree,
              num_features, feature_kind, feature_signal, feature_dtype, num_edges, edge_index):
    n = _checks.check_int("num_nodes", num_nodes, 2, INT32_MAX)
    C = _checks.check_int("num_classes", num_classes, 1, n)
    h = _checks.check_prob("homophily", homophily)
    gamma = _checks.check_real("degree_exponent", degree_exponent)
    if not gamma > 2.0:
        raise ValueError(f"degree_exponent: expected a finite number > 2, got {gamma}")
    M = None
    if num_edges is not None:
        M = _checks.check_int("num_edges", num_edges, 1, n * (n - 1) // 2)
    if avg_degree is None:
        if M is None:
            raise ValueError("avg_degree: required unless num_edges is given")
        d = min(2.0 * M / n, 0.99 * (n - 1))  # shapes the weights only (alpha does the rest)
    else:
        d = _checks.check_real("avg_degree", avg_degree)
        if not 0.0 < d < n - 1:
            raise ValueError(f"avg_degree: expected a number in (0, num_nodes - 1 = {n - 1}), got {d}")
    if max_degree is None:
        m = min(math.sqrt(n * d), n - 1.0)
    else:
        m = _checks.check_real("max_degree", max_degree)
        if not d < m <= n - 1:
            raise ValueError(f"max_degree: expected a number in (avg_degree = {d}, num_nodes - 1 = "
                             f"{n - 1}], got {m}")
    reach = _reachable_pairs(n, _stratified_sizes(n, C), C, h)
    if M is not None and M > reach:
        raise ValueError(f"num_edges: at most {reach} pairs can be edges with num_classes={C} and "
                         f"homophily={h}, got {M}")
    if M is None and n * d / 2.0 >= reach:
        raise ValueError(f"avg_degree: n * avg_degree / 2 must be below the {reach} pairs that can "
                         f"be edges with num_classes={C}, homophily={h}; got {d}")
    nf = _checks.check_int("num_features", num_features, 0)
    if feature_kind not in ("binary", "continuous"):
        raise ValueError(f"feature_kind: expected 'binary' or 'continuous', got {feature_kind!r}")
    sig = _checks.check_prob("feature_signal", feature_signal)
    if feature_dtype not in (torch.float32, torch.uint8):
        raise TypeError(f"feature_dtype: expected torch.float32 or torch.uint8, got {feature_dtype}")
    if feature_dtype == torch.uint8 and feature_kind != "binary":
        raise ValueError("feature_dtype: torch.uint8 is only for feature_kind='binary'")
    if not isinstance(edge_index, bool):
        raise TypeError(f"edge_index: expected a bool, got {type(edge_index).__name__}")
    return n, d, C, h, gamma, m, M, nf, sig


def synthetic(
    num_nodes: int,
    avg_degree: float | None = None,
    *,
    num_classes: int = 2,
    homophily: float = 0.8,
    degree_exponent: float = 2.5,
    max_degree: float | None = None,
    num_features: int = 0,
    feature_kind: str = "binary",
    feature_signal: float = 0.5,
    feature_dtype: torch.dtype = torch.float32,
    num_edges: int | None = None,
    seed: int | None = None,
    edge_index: bool = True,
    backend: str | None = None,
    device: str | torch.device | None = None,
    verbose: bool = False,
    timings: dict | None = None,
):
    """Undirected power-law graph with planted classes (Chung-Lu / Miller-Hagberg).

    Every pair ``{u, v}`` is an edge independently with probability
    ``min(1, alpha * W_u * W_v * f(y_u, y_v) / S)`` (Chung & Lu 2002), sampled in
    O(|E| + n * num_classes) time by geometric skips (Miller & Hagberg 2011); see the module
    docstring for the full model, the class assignment and the exact-count trim.

    Parameters
    ----------
    num_nodes : int
        Number of nodes, in ``[2, 2**31 - 1]``.
    avg_degree : float, optional
        Expected mean degree, in ``(0, num_nodes - 1)``: ``alpha`` is solved so that the
        exact expected edge count is ``num_nodes * avg_degree / 2``.  May be omitted when
        ``num_edges`` is given (then ``2 * num_edges / num_nodes``); if both are given,
        ``avg_degree`` only shapes the weight sequence.
    num_classes : int
        Number of planted classes ``C`` (labels ``y`` in ``[0, C)``), balanced to within one
        node (stratified over the degree ranks).
    homophily : float
        Expected fraction ``h`` of intra-class edges, in ``[0, 1]`` (``1 / C`` = no class
        structure).
    degree_exponent : float
        Power-law exponent ``gamma > 2`` of the degree distribution's tail.
    max_degree : float, optional
        Largest target degree, in ``(avg_degree, num_nodes - 1]``; default
        ``sqrt(num_nodes * avg_degree)`` (the Chung-Lu condition ``max w^2 <= sum w``).
    num_features : int
        Feature dimension ``d >= 0`` (0: ``x`` is None).
    feature_kind : {"binary", "continuous"}
        Bernoulli bits around class prototypes, or values in [0, 1] = clip(prototype +
        uniform noise).
    feature_signal : float
        Spread of the class prototypes in ``[0, 1]`` (0: features independent of the class).
    feature_dtype : torch.dtype
        ``torch.float32`` (default) or ``torch.uint8`` (binary only; 4x less memory: an
        Orkut-sized 3M x 64 matrix is 0.2 GB instead of 0.8 GB).
    num_edges : int, optional
        Exact number of undirected edges (see the module docstring: oversample by about
        ``5 sqrt(num_edges)``, then remove a uniformly random surplus).
    seed : int, optional
        64-bit seed; ``None`` draws a fresh one from the OS.  The graph depends only on the
        seed and the parameters, not on the backend or the thread count.
    edge_index : bool
        Also store ``edge_index`` (int64, both directions; 16 bytes per directed edge).  The
        CSR is always stored as ``data.csr`` (:class:`ldpfast.graph.CSR`).
    backend : str, optional
        ``"cpp"``, ``"numba"`` or ``"cuda"`` (default: ``LDPFAST_BACKEND``, else automatic);
        ``"cuda"`` (argument or environment) with no ``device`` means ``device="cuda"``.
    device : str or torch.device, optional
        ``"cpu"`` (default) or ``"cuda"``: build the graph on the GPU (``csrc/cuda/synthetic.cu``
        for the edge walk, trim priorities and features, torch ops for the trim and the CSR;
        see the module docstring).  Same bits as the CPU graph for one seed.  Raises
        :class:`ldpfast._backend.BackendUnavailable`, with the reason, where CUDA cannot run.
    verbose : bool
        Print the wall time of every phase.
    timings : dict, optional
        Filled with the wall time (seconds) of every phase and generation statistics
        (``alpha``, ``attempts``, ``generated_edges``, ``i0``).

    Returns
    -------
    torch_geometric.data.Data
        ``x`` (``(n, d)`` or None), ``y`` (int64 planted class), ``num_nodes``, ``csr`` and,
        if ``edge_index=True``, ``edge_index`` (sorted by source, then target).  ``data.csr``
        and ``data["csr"]`` are the :class:`ldpfast.graph.CSR` (PyG's ``Data`` also has a
        ``csr()`` method; the CSR is put in the instance dict so attribute access finds it).

    References
    ----------
    F. Chung, L. Lu. Connected components in random graphs with given expected degree
    sequences. Annals of Combinatorics 6, 2002.
    J. C. Miller, A. Hagberg. Efficient generation of networks with given expected degrees.
    WAW 2011, LNCS 6732.
    """
    from torch_geometric.data import Data

    n, d, C, h, gamma, m, M, nf, sig = _validate(
        num_nodes, avg_degree, num_classes, homophily, degree_exponent, max_degree, num_features,
        feature_kind, feature_signal, feature_dtype, num_edges, edge_index)
    dev_type = _device_type(device, backend)
    seed = resolve_seed(seed)
    k = _backend.get(dev_type, backend)
    # the node plan (weights, classes, ids, calibration) is host work on either path
    kh = k if dev_type == "cpu" else _backend.get("cpu", "auto")
    tm: dict = {} if timings is None else timings
    t_all = time.perf_counter()

    plan = _Plan(kh, seed, n, C, h, d, gamma, m, tm)
    if dev_type == "cuda":
        wmax, wmin = _weight_tables(plan.W)
        dp = k.synth_upload({"W": plan.W, "cls": plan.cls, "seg": plan.seg, "fmat": plan.fmat, "wmax": wmax,
                             "wmin": wmin, "ids": plan.ids.astype(np.int64), "y": plan.y},
                            "cuda" if device is None else device)
    reach = _reachable_pairs(n, np.diff(plan.seg), C, h)
    if M is not None and M > reach:
        raise ValueError(f"num_edges: at most {reach} pairs can be edges here, got {M}")
    tm["calibrate"] = tm["sample"] = 0.0
    margin = 5.0 * math.sqrt(M) + 10.0 if M is not None else 0.0
    for attempt in range(_MAX_ATTEMPTS):
        t0 = time.perf_counter()
        target = n * d / 2.0 if M is None else M + margin * 4.0**attempt
        if M is not None and target >= reach:
            scale, uniform = math.inf, True  # every reachable pair
        else:
            scale, uniform = plan.calibrate(kh, target), False
        tm["calibrate"] += time.perf_counter() - t0
        t0 = time.perf_counter()
        if dev_type == "cuda":
            uptr, ucol = k.synth_edges(dp["W"], dp["cls"], dp["seg"], dp["fmat"], dp["wmax"], dp["wmin"],
                                       scale, seed, attempt)
            total = ucol.numel()
        else:
            uptr, ucol = plan.sample(k, seed, attempt, scale, uniform)
            total = int(uptr[n])
        tm["sample"] += time.perf_counter() - t0
        if M is None or total >= M:
            break
        uptr = ucol = None  # free before the next attempt
    else:
        raise RuntimeError("synthetic: could not reach num_edges (please report this seed)")
    tm.update(alpha=scale * plan.S, attempts=attempt + 1, generated_edges=total, i0=plan.i0)
    del plan.prefix, plan.erow, plan.lrow

    drop = 0 if M is None else total - M
    if dev_type == "cuda":
        # on the device, trim and CSR are one step (torch ops); timings are launch times
        t0 = time.perf_counter()
        with _backend.oom_guard("synthetic: trim and symmetric CSR on the device"):
            rowptr, col = _device_csr(k, seed, n, uptr, ucol, drop, dp["ids"])
        del ucol, uptr
        nnz = 2 * (total - drop)
        tm["trim"], tm["csr"] = 0.0, time.perf_counter() - t0
        y, ydev = dp["y"], dp["y"]
    else:
        t0 = time.perf_counter()
        ucnt = np.empty(n, dtype=np.int64)
        k.synth_trim(seed, uptr, ucol, drop, ucnt)
        tm["trim"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        nnz = 2 * int(ucnt.sum())
        rowptr = torch.empty(n + 1, dtype=torch.int64)
        col = torch.empty(nnz, dtype=torch.int32)
        k.synth_symmetrize(uptr, ucnt, ucol, plan.ids, rowptr.numpy(), col.numpy())
        del ucol, ucnt, uptr
        tm["csr"] = time.perf_counter() - t0
        y, ydev = torch.from_numpy(plan.y), plan.y
    csr = CSR(rowptr, col, n)

    x = None
    t0 = time.perf_counter()
    if nf > 0:
        x = torch.empty((n, nf), dtype=feature_dtype, device=col.device)
        k.synth_features(seed, ydev, C, sig, 0 if feature_kind == "binary" else 1,
                         x if dev_type == "cuda" else x.numpy())
    tm["features"] = time.perf_counter() - t0
    del plan

    t0 = time.perf_counter()
    data = Data(x=x, y=y, num_nodes=n)
    if edge_index:
        data.edge_index = csr.to_edge_index()
    # PyG's Data has a GraphStore method named ``csr``: store the CSR in the attribute store
    # (``data["csr"]``, copied by clone/to) and in the instance dict, so that plain attribute
    # access ``data.csr`` (as in ldpfast.graph.csr_of) returns it rather than the method.
    data.csr = csr
    data.__dict__["csr"] = csr
    tm["edge_index"] = time.perf_counter() - t0
    tm["total"] = time.perf_counter() - t_all
    if verbose:
        phases = ("weights", "nodes", "calibrate", "sample", "trim", "csr", "features",
                  "edge_index")
        print("synthetic: " + ", ".join(f"{p} {tm[p]:.2f}s" for p in phases)
              + f"; total {tm['total']:.2f}s; {nnz // 2} edges (alpha {tm['alpha']:.4f}, "
              f"{tm['attempts']} attempt(s), {total} generated)")
    return data


def _edge_model(num_nodes, avg_degree=None, *, num_classes=2, homophily=0.8, degree_exponent=2.5,
                max_degree=None, seed=0, backend=None):
    """Per-node weights, classes and ``scale`` of :func:`synthetic` (for tests).

    ``P[u, v] = min(1, scale * w[u] * f[y_u, y_v] * w[v])`` is the edge probability of the
    graph ``synthetic(...)`` draws with the same arguments and no ``num_edges``.
    """
    n, d, C, h, gamma, m, _, _, _ = _validate(
        num_nodes, avg_degree, num_classes, homophily, degree_exponent, max_degree, 0, "binary",
        0.5, torch.float32, None, True)
    k = _backend.get("cpu", backend)
    plan = _Plan(k, resolve_seed(seed), n, C, h, d, gamma, m, {})
    scale = plan.calibrate(k, n * d / 2.0)
    return plan.w_node, plan.y, plan.fmat.reshape(C, C), scale


def orkut_like(seed: int | None = 0, *, num_features: int = 0, edge_index: bool = False, **kw):
    """Orkut-scale synthetic graph: 3,072,441 nodes, exactly 117,185,083 undirected edges.

    The size of SNAP's com-Orkut (mean degree 76.28), a power-law degree sequence with
    exponent 2.4 and maximum target degree 33,313 (Orkut's largest degree), two planted
    classes with homophily 0.8.  Any :func:`synthetic` keyword can be overridden through
    ``kw``.  By default only the CSR is stored (``data.csr``, about 0.96 GB): the
    ``edge_index`` of 234M directed edges would take 3.75 GB.

    Parameters
    ----------
    seed : int, optional
        64-bit seed (default 0, so benchmarks are reproducible); None for a fresh one.
    num_features : int
        Feature dimension (0: no features).
    edge_index : bool
        Also build the (2, 234M) int64 ``edge_index``.
    **kw
        Further arguments of :func:`synthetic` (``degree_exponent``, ``num_classes``,
        ``homophily``, ``feature_kind``, ``backend``, ``device``, ``verbose``, ...).
    """
    params = {"num_nodes": ORKUT_NODES, "num_edges": ORKUT_EDGES, "degree_exponent": 2.4,
                  "max_degree": ORKUT_MAX_DEGREE, "num_classes": 2, "homophily": 0.8}
    params.update(kw)
    return synthetic(seed=seed, num_features=num_features, edge_index=edge_index, **params)
