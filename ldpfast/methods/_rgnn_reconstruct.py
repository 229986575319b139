"""RGNN reconstruction, Algorithms 1 and 2 of Bhaila, Huang, Wu, Wu, "Local
differential privacy in graph neural networks: a reconstruction approach", SDM 2024: the server's
frequency estimates of every node's features (``f_X``, :func:`reconstruct_features`) and
labels (``f_Y``, :func:`reconstruct_labels`) from the GRR-FS / GRR reports of its
``K``-hop neighbourhood.  Post-processing of the reports: no privacy cost.

Public through :mod:`ldpfast.methods.rgnn` (``ldpfast.methods.rgnn.reconstruct_features``);
kept apart because the blockwise, kernel-backed form of Algorithm 1 (memory bounded on
multi-million-node graphs) is most of the code.
"""
from __future__ import annotations

import ctypes
import math
import sys

import numpy as np
import torch
import torch.nn.functional as F

from .. import _backend, ops
from .._checks import check_eps, check_int, check_mask, check_tensor
from ..graph import CSR, csr_of
from ..privacy.ldp import grr_probs

__all__ = ["encode_reports", "reconstruct_features", "reconstruct_labels"]


def _graph(graph) -> CSR:
    if isinstance(graph, CSR):
        return graph
    if hasattr(graph, "num_nodes") and (hasattr(graph, "edge_index") or hasattr(graph, "csr")):
        return csr_of(graph)
    raise TypeError(f"csr: expected an ldpfast.graph.CSR or a PyG Data, got {type(graph).__name__}")


def _domain(domain, d: int) -> np.ndarray:
    if isinstance(domain, bool):
        raise TypeError("domain: expected an int or a sequence of ints, got bool")
    if isinstance(domain, (int, np.integer)):
        gam = np.full(d, int(domain), dtype=np.int64)
    else:
        if isinstance(domain, torch.Tensor):
            if domain.dtype.is_floating_point or domain.dtype == torch.bool:
                raise TypeError(f"domain: expected integers, got {domain.dtype}")
            gam = domain.detach().cpu().numpy().astype(np.int64)
        else:
            try:
                gam = np.asarray(domain)
            except Exception as exc:
                raise TypeError("domain: expected an int or a sequence of ints") from exc
            if gam.dtype.kind not in "iu":
                raise TypeError(f"domain: expected integers, got dtype {gam.dtype}")
            gam = gam.astype(np.int64)
        if gam.ndim != 1 or gam.shape[0] != d:
            raise ValueError(f"domain: expected an int or {d} domain sizes, got shape {gam.shape}")
    if gam.size and int(gam.min()) < 2:
        raise ValueError(f"domain: every domain size must be >= 2, got {int(gam.min())}")
    return gam


def _onehot_tail(x: torch.Tensor, gam: np.ndarray, dtype: torch.dtype,
                 block: int = 1 << 18, out: torch.Tensor | None = None) -> torch.Tensor:
    """Indicators of the values ``1 .. gamma_i - 1`` of every column (value 0 is implied:
    its frequency is one minus the others').  ``(n, sum(gamma_i - 1))``, built in row blocks
    (vectorised within a block) so the temporary index tensor stays small.  ``out``: a
    preallocated ``(n, sum(gamma_i - 1))`` tensor of ``dtype`` to fill."""
    n = x.shape[0]
    if bool((gam == 2).all()):  # binary: the indicator of value 1 is the value itself
        return x.to(dtype) if out is None else out.copy_(x)
    w = torch.from_numpy(gam - 1)
    off = (torch.cumsum(w, 0) - w).to(torch.int64).to(x.device)  # first column of feature i
    z = torch.zeros(n, int(w.sum()), dtype=dtype, device=x.device) if out is None else out.zero_()
    for s in range(0, n, block):
        xb = x[s:s + block].to(torch.int64)
        idx = off.unsqueeze(0) + (xb - 1).clamp(min=0)  # value 0 adds 0 to the first slot
        z[s:s + block].scatter_add_(1, idx, (xb > 0).to(dtype))
    return z


_NARROW_ROWS = 1 << 18  # rows per chunk when narrowing output="index" (index_dtype)
_HUGE = 2 << 20  # bytes of a transparent huge page (x86-64, arm64 with 4 KiB base pages)
_MADV_HUGEPAGE = 14


def _huge_empty(n: int, w: int, dtype: torch.dtype) -> torch.Tensor:
    """``torch.empty(n, w, dtype)`` whose pages Linux may back with 2 MiB transparent huge
    pages (``madvise(MADV_HUGEPAGE)`` before the first touch; a no-op elsewhere or when the
    call fails).  The propagation gathers random rows of such blocks: with 4 KiB pages
    nearly every gather of a block larger than the TLB's reach misses the TLB (a nested page
    walk under a hypervisor).  Measured on a shared machine: 1.5x less CPU time for one hop
    of a 3M-node graph, no clear difference on a 1M-node one (BENCHMARKS.md)."""
    item = torch.empty(0, dtype=dtype).element_size()
    nbytes = n * w * item
    if nbytes < 4 * _HUGE or not sys.platform.startswith("linux"):
        return torch.empty(n, w, dtype=dtype)
    raw = torch.empty(nbytes + _HUGE, dtype=torch.uint8)
    addr = raw.data_ptr()
    off = (-addr) % _HUGE
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        libc.madvise(ctypes.c_void_p(addr + off), ctypes.c_size_t((nbytes + _HUGE - off) & ~4095),
                     _MADV_HUGEPAGE)
    except (OSError, AttributeError):
        pass  # advice only: the buffer works the same without it
    return raw[off:off + nbytes].view(dtype).view(n, w)


# --- Algorithm 1 -----------------------------------------------------------------------------
def reconstruct_features(x: torch.Tensor, csr, domain, eps_x: float, m: int, k_x: int = 4, *,
                         output: str = "features", dtype: torch.dtype = torch.float32,
                         method: str = "counts", block: int | None = None,
                         index_dtype: torch.dtype = torch.int64,
                         backend: str | None = None) -> torch.Tensor:
    """Node feature reconstruction ``f_X`` (RGNN Algorithm 1), all nodes and features at once.

    For every feature ``i`` and node ``v``: ``lambda'_v`` = proportions of the reported
    values of feature ``i`` in the ``K_x``-hop neighbourhood, computed as ``K_x`` steps of
    ``MEAN({v} u N(v))`` on the one-hot encoded reports (lines 5-11); ``pi~_vj`` = the
    GRR-FS frequency estimate of eq. (5) (lines 13-17,
    ``pi~_j = lambda'_j d / (m (p - q)) + (m - d - m gamma_i q) / (m gamma_i (p - q))``);
    the reconstructed value is ``argmax_j pi~_vj`` (line 19), or, for binary features, the
    estimate ``pi~_v1`` clipped to ``[0, 1]`` ("to incorporate the uncertainty of the
    estimates", section IV-A).

    Implementation (``method="counts"``, default): the features are processed in blocks.
    For each block, the first hop is per-node category counts over ``{v} u N(v)`` taken
    straight from the reports (kernel ``fs_counts``: the block's reports as indicator bytes,
    summed in integers, one multiplication by ``1 / (deg + 1)``), the other ``K_x - 1`` hops
    are float propagations of the block (kernel ``spmm_scaled``), then the estimator and the
    argmax write the block's output columns.  No ``n x sum(gamma_i - 1)`` float matrix is
    built: the working memory is about ``n * w * (2 * itemsize + 1)`` bytes for a block of
    ``w`` value columns, besides the output.  Value 0 of each feature is implied (the
    propagated proportions of one feature sum to 1).  The result is **bit-identical** to
    ``method="onehot"``: a float sum of 0/1 values is the exact count, every later element
    is summed by the same kernel in the same order, and the estimator works column by
    column.  ``method="onehot"`` (the reference) propagates the one-hot matrix of all
    features at once through :func:`ldpfast.ops.propagate`: about three
    ``n x sum(gamma_i - 1)`` matrices at the peak (9.8 GB on the Orkut-like graph with
    d = 64, gamma = 4).  A weighted CSR (``csr.value`` set) always takes the one-hot path.

    Parameters
    ----------
    x : torch.Tensor
        ``(n, d)`` integer GRR-FS reports, ``x[:, i]`` in ``[0, gamma_i)``.
    csr : ldpfast.graph.CSR or torch_geometric.data.Data
        The (public, undirected) graph; row ``v`` lists ``N(v)`` without ``v``.
    domain : int or sequence of d ints
        Domain sizes ``gamma_i >= 2`` (public).
    eps_x : float
        Budget of each sampled feature's GRR report (the ``eps_x`` of GRR-FS), > 0.
    m : int
        Number of features each node sampled, ``1 <= m <= d``.
    k_x : int
        Propagation hops ``K_x >= 0`` (0: the node's own report only).
    output : {"features", "index", "pi"}
        ``"features"`` (default): GNN input, one column per binary feature (clipped
        ``pi~_v1``) and a one-hot block of ``gamma_i`` columns per categorical feature
        (argmax); ``"index"``: int64 ``(n, d)`` argmax values; ``"pi"``: the raw estimates
        ``pi~`` (``(n, sum(gamma_i))``, unclipped, each feature's block sums to 1).
    dtype : torch.dtype
        float32 (default) or float64 for the propagation and the estimates.
    method : {"counts", "onehot"}
        ``"counts"`` (default): blockwise from the reports, as above; ``"onehot"``: the
        whole one-hot matrix in one propagation (reference; same output bits).
    block : int, optional
        ``"counts"`` only: at most this many value columns (``sum(gamma_i - 1)`` over the
        block's features) per block, >= 1; a feature with more values gets a block of its
        own.  Default 48: on the Orkut-like graph (d = 64, gamma = 4, K = 4, one run)
        24 / 48 / 96 columns took 112 / 64 / 49 s with peaks of 3746 / 3904 / 5855 MiB
        (int8 result): wider blocks gather longer rows, at ``n * w * 9`` bytes of working
        memory; 48 is the widest that stays under 4 GB there (3783 MiB in a fresh
        process).  See BENCHMARKS.md.
    index_dtype : torch.dtype
        ``output="index"`` only: the integer dtype of the result (default int64).  A narrower
        one (int8, uint8, int16, int32) must hold ``max(gamma_i) - 1``; same values, less
        memory: on the Orkut-like graph (d = 64) int8 holds the 3.07M x 64 result in 0.2 GB
        instead of 1.57 GB (BENCHMARKS.md, "RGNN reconstruction").
    backend : {"cpp", "numba"}, optional
        Kernels of ``"counts"`` (default: automatic).

    Returns
    -------
    torch.Tensor

    Privacy
    -------
    Post-processing of the GRR-FS reports and the public graph: no privacy cost.
    """
    check_tensor("x", x, dims=2, dtypes=(torch.int8, torch.uint8, torch.int16, torch.int32,
                                         torch.int64))
    n, d = x.shape
    if d < 1:
        raise ValueError("x: expected at least one feature column (d >= 1)")
    g = _graph(csr)
    if g.num_nodes != n:
        raise ValueError(f"x: expected {g.num_nodes} rows (one per node), got {n}")
    gam = _domain(domain, d)
    eps_x = check_eps("eps_x", eps_x)
    m = check_int("m", m, 1, d)
    k_x = check_int("k_x", k_x, 0, 1024)
    if output not in ("features", "index", "pi"):
        raise ValueError(f"output: expected 'features', 'index' or 'pi', got {output!r}")
    if dtype not in (torch.float32, torch.float64):
        raise TypeError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
    if method not in ("counts", "onehot"):
        raise ValueError(f"method: expected 'counts' or 'onehot', got {method!r}")
    block = 48 if block is None else check_int("block", block, 1)
    if index_dtype not in (torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64):
        raise TypeError(f"index_dtype: expected one of torch.int8, uint8, int16, int32, int64, got {index_dtype}")
    if output == "index" and d and int(gam.max()) - 1 > torch.iinfo(index_dtype).max:
        raise ValueError(f"index_dtype: {index_dtype} cannot hold the values 0 .. {int(gam.max()) - 1} of the "
                         f"largest domain; use a wider integer dtype")
    dev = x.device
    if n and (int(x.min()) < 0 or bool((x.to(torch.int64) >= torch.from_numpy(gam).to(dev)).any())):
        raise ValueError("x: every value must lie in [0, gamma_i) of its column")

    # lines 13-17: eq. (5), per column (p, q depend on gamma_i only)
    pq = {int(v): grr_probs(eps_x, int(v)) for v in np.unique(gam)}
    a = np.array([d / (m * (pq[int(v)][0] - pq[int(v)][1])) for v in gam])
    b = np.array([(m - d - m * int(v) * pq[int(v)][1]) / (m * int(v) * (pq[int(v)][0] - pq[int(v)][1]))
                  for v in gam])
    allbin = bool((gam == 2).all())
    # output layout: columns of feature i in [ostart[i], ostart[i] + owidth[i])
    if output == "index":
        owidth = np.ones(d, dtype=np.int64)
        out = torch.empty(n, d, dtype=index_dtype, device=dev)
    elif output == "pi":
        owidth = gam.copy()
        out = torch.empty(n, int(gam.sum()), dtype=dtype, device=dev)
    else:
        owidth = np.where(gam == 2, 1, gam) if not allbin else np.ones(d, dtype=np.int64)
        out = torch.empty(n, int(owidth.sum()), dtype=dtype, device=dev)
    ostart = np.cumsum(owidth) - owidth

    def emit(lam, c0, c1):  # estimator and argmax of features [c0, c1) into their columns
        blk = _estimate_block(lam, gam[c0:c1], a[c0:c1], b[c0:c1], allbin, output, dtype)
        s, e = int(ostart[c0]), int(ostart[c1 - 1] + owidth[c1 - 1])
        if s == 0 and e == out.shape[1]:
            return blk.to(out.dtype)
        out[:, s:e] = blk
        return None

    # The counts kernels read host memory (their CUDA twin, csrc/cuda/reconstruct.cu, is
    # compiled but not wired yet): a CUDA x takes the one-hot path, which runs on the device
    # (torch + the CUDA propagation kernel) and gives the same bits.
    if method == "onehot" or g.value is not None or _backend.device_of(x) == "cuda":
        # lines 5-11: lambda' for every (node, feature, value) in one propagation (x's device)
        with torch.no_grad():
            lam = ops.propagate(g, _onehot_tail(x, gam, dtype), k_x, "mean", True, csr_t=g)
        res = emit(lam, 0, d)
        return out if res is None else res

    K = _backend.get("cpu", backend)
    scales = ops.step_scales(g, max(k_x, 1), "mean", True, None, dtype, backend, "cpu")
    rp, col = g.rowptr.numpy(), g.col.numpy()
    np_dtype = np.float32 if dtype == torch.float32 else np.float64
    bufs: list[torch.Tensor] = []
    ebuf = None
    for c0, c1 in _feature_blocks(gam, block):
        w = int((gam[c0:c1] - 1).sum())
        if k_x == 0:
            lam = _onehot_tail(x[:, c0:c1], gam[c0:c1], dtype).contiguous()
        else:
            if not bufs or bufs[0].shape[1] != w:
                bufs = []  # free the previous width's first
                bufs = [_huge_empty(n, w, dtype) for _ in range(2 if k_x > 1 else 1)]
            if ebuf is None or ebuf.shape[1] != w:
                ebuf = None
                ebuf = _huge_empty(n, w, torch.uint8)
            e = _onehot_tail(x[:, c0:c1], gam[c0:c1], torch.uint8, out=ebuf)  # indicator bytes
            lam = bufs[0]
            K.fs_counts(rp, col, e.numpy(), scales[0][0].numpy(), lam.numpy(), True)
            del e
            for t in range(1, k_x):  # hops 2 .. K_x: float propagation of the block
                nxt = bufs[t % 2]
                a_t, b_t = scales[t]
                K.spmm_scaled(rp, col, a_t.numpy(), b_t.numpy(), lam.numpy(), nxt.numpy(), True,
                              None)
                lam = nxt
        if output == "index":  # fused kernel, same operations as emit's torch
            ga, aa, ba = gam[c0:c1], a[c0:c1].astype(np_dtype), b[c0:c1].astype(np_dtype)
            if index_dtype == torch.int64:
                K.fs_estimate_index(lam.numpy(), ga, aa, ba, allbin, out.numpy(), c0)
                continue
            # the kernels write int64: narrow through a small buffer, a row chunk at a time
            rows = _NARROW_ROWS
            wide = torch.empty(min(n, rows), c1 - c0, dtype=torch.int64)
            for r0 in range(0, n, rows):
                r1 = min(n, r0 + rows)
                K.fs_estimate_index(lam[r0:r1].numpy(), ga, aa, ba, allbin, wide[:r1 - r0].numpy(), 0)
                out[r0:r1, c0:c1] = wide[:r1 - r0]
            continue
        res = emit(lam, c0, c1)
        if res is not None:
            return res
    return out


def _feature_blocks(gam: np.ndarray, block: int) -> list[tuple[int, int]]:
    """Consecutive feature ranges whose value columns ``sum(gamma_i - 1)`` stay <= block
    (a wider feature alone)."""
    out, c0, w = [], 0, 0
    for i, v in enumerate(gam):
        if i > c0 and w + int(v) - 1 > block:
            out.append((c0, i))
            c0, w = i, 0
        w += int(v) - 1
    out.append((c0, len(gam)))
    return out


def _estimate_block(lam: torch.Tensor, gam: np.ndarray, a: np.ndarray, b: np.ndarray, allbin: bool,
                    output: str, dtype: torch.dtype) -> torch.Tensor:
    """Eq. (5) and line 19 for a block of features: ``lam`` holds the propagated proportions
    of their values 1 .. gamma_i - 1 (``n x sum(gamma_i - 1)``, overwritten).  Column by
    column, so a block gives the same bits as the same columns of the whole matrix."""
    n, d = lam.shape[0], len(gam)
    dev = lam.device
    if allbin:  # every feature of the input is binary (not only this block's)
        lam.mul_(torch.from_numpy(a).to(dev, dtype)).add_(torch.from_numpy(b).to(dev, dtype))  # pi~_v1
        if output == "features":
            return lam.clamp_(0.0, 1.0)
        if output == "index":
            return (lam > 0.5).to(torch.int64)  # pi~_v0 = 1 - pi~_v1
        return torch.stack([1.0 - lam, lam], dim=2).reshape(n, 2 * d)
    # per-column parameters: small host arrays, moved to x's device once
    w = torch.from_numpy(gam - 1).to(dev)
    seg = torch.repeat_interleave(torch.arange(d, device=dev), w)  # feature of every propagated column
    a_t, b_t = torch.from_numpy(a).to(dev, dtype), torch.from_numpy(b).to(dev, dtype)
    lam0 = 1.0 - torch.zeros(n, d, dtype=dtype, device=dev).index_add_(1, seg, lam)  # implied value 0
    pi0 = lam0.mul_(a_t).add_(b_t)
    lam.mul_(a_t[seg]).add_(b_t[seg])  # pi~ of values 1 .. gamma_i - 1
    if output == "pi":
        out = torch.empty(n, int(gam.sum()), dtype=dtype, device=dev)
        first = torch.from_numpy(np.cumsum(gam) - gam).to(dev)
        rest = torch.ones(int(gam.sum()), dtype=torch.bool, device=dev)
        rest[first] = False
        out[:, first] = pi0
        out[:, rest] = lam
        return out
    # line 19: argmax over each feature's values (pad the segments to max gamma)
    gmax = int(gam.max())
    if bool((gam == gmax).all()):
        rest_max, rest_arg = lam.view(n, d, gmax - 1).max(dim=2)
    else:
        pos = torch.arange(lam.shape[1], device=dev) - torch.repeat_interleave(torch.cumsum(w, 0) - w, w)
        padded = torch.full((n, d * (gmax - 1)), -math.inf, dtype=dtype, device=dev)
        padded[:, seg * (gmax - 1) + pos] = lam
        rest_max, rest_arg = padded.view(n, d, gmax - 1).max(dim=2)
        del padded
    idx = torch.where(pi0 >= rest_max, 0, rest_arg + 1)
    if output == "index":
        return idx
    # GNN input: binary -> clipped pi~_v1; categorical -> one-hot of the argmax
    width = torch.from_numpy(np.where(gam == 2, 1, gam)).to(dev)
    start = torch.cumsum(width, 0) - width
    out = torch.zeros(n, int(width.sum()), dtype=dtype, device=dev)
    cat = torch.from_numpy(gam > 2).to(dev)
    if bool(cat.any()):
        ci = torch.nonzero(cat).squeeze(1)
        out.scatter_(1, start[ci].unsqueeze(0) + idx[:, ci], 1.0)
    if bool((~cat).any()):
        bi = torch.nonzero(~cat).squeeze(1)
        out[:, start[bi]] = (1.0 - pi0[:, bi]).clamp_(0.0, 1.0)  # pi~_v1 = 1 - pi~_v0
    return out


def encode_reports(x: torch.Tensor, domain, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """GNN input made of the raw reports (no reconstruction): binary columns as 0/1,
    categorical columns one-hot (the layout of :func:`reconstruct_features` ``"features"``)."""
    check_tensor("x", x, dims=2)
    gam = _domain(domain, x.shape[1])
    if bool((gam == 2).all()):
        return x.to(dtype)
    dev = x.device
    width = torch.from_numpy(np.where(gam == 2, 1, gam)).to(dev)
    start = torch.cumsum(width, 0) - width
    out = torch.zeros(x.shape[0], int(width.sum()), dtype=dtype, device=dev)
    xi = x.to(torch.int64)
    cat = torch.from_numpy(gam > 2).to(dev)
    ci, bi = torch.nonzero(cat).squeeze(1), torch.nonzero(~cat).squeeze(1)
    if ci.numel():
        out.scatter_(1, start[ci].unsqueeze(0) + xi[:, ci], 1.0)
    if bi.numel():
        out[:, start[bi]] = xi[:, bi].to(dtype)
    return out


# --- Algorithm 2 -----------------------------------------------------------------------------
def _check_mask(name, mask, n, device):
    """The mask (a bool mask or node ids, :func:`ldpfast._checks.check_mask`) as an ``(n,)``
    bool tensor on ``device`` (the device of the data it selects from)."""
    return check_mask(name, mask, n, device=device)


def _check_labels(y, mask, c):
    check_tensor("y", y, dims=1, dtypes=(torch.int32, torch.int64))
    sel = y[mask]
    if sel.numel() and (int(sel.min()) < 0 or int(sel.max()) >= c):
        raise ValueError(f"y: labels of the masked nodes must lie in [0, num_classes) = [0, {c})")


def reconstruct_labels(y: torch.Tensor, mask: torch.Tensor, csr, num_classes: int, eps_y: float,
                       k_y: int = 4, *, return_pi: bool = False):
    """Node label reconstruction ``f_Y`` (RGNN Algorithm 2) with masked propagation.

    ``lambda'_v = onehot(y'_v)`` for the labelled nodes and the all-zero vector for the
    others (lines 4-5); ``K_y`` steps of ``MEAN({v} u N(v))`` over *all* nodes, the zero
    vectors included (lines 6-11); ``pi~_v = P^{-1} lambda'_v`` (eq. 14, lines 13-16) and
    ``y~_v = argmax pi~_v`` (line 17) for every labelled node.

    The zeroing is done on the input and the kernel runs unmasked
    (:func:`ldpfast.ops.propagate` with ``mask=None``): the kernel's own ``mask`` argument
    divides by the number of *contributing* neighbours, a different normaliser than the
    paper's ``|{v} u N(v)|``, which for ``K_y > 1`` is not a per-node rescaling and could
    change the argmax.  (``argmax P^{-1} lambda'`` is invariant to a positive per-node
    scaling of ``lambda'``, so only the relative weights matter.)

    Parameters
    ----------
    y : torch.Tensor
        ``(n,)`` int labels; only ``y[mask]`` (the GRR reports ``y'``) is read.
    mask : torch.Tensor
        The labelled nodes ``V^L`` (those that reported a label): an ``(n,)`` bool mask or
        a tensor of node ids.  Labels outside it are not read (PyG's ``-1`` is fine there).
    csr : ldpfast.graph.CSR or torch_geometric.data.Data
    num_classes : int
        ``c >= 2``.
    eps_y : float
        The label budget of the GRR reports, > 0.
    k_y : int
        Propagation hops ``K_y >= 0`` (0: ``y~ = y'``).
    return_pi : bool
        Also return the ``(n, c)`` float64 estimates ``pi~`` (rows of unlabelled nodes are
        computed too; they are not used by the paper).

    Returns
    -------
    torch.Tensor or (torch.Tensor, torch.Tensor)
        int64 ``(n,)`` reconstructed labels, ``-1`` outside ``mask``; optionally ``pi~``.

    Privacy
    -------
    Post-processing of the GRR label reports: no privacy cost.
    """
    from ..estimation import grr_estimate

    g = _graph(csr)
    n = g.num_nodes
    c = check_int("num_classes", num_classes, 2)
    eps_y = check_eps("eps_y", eps_y)
    k_y = check_int("k_y", k_y, 0, 1024)
    check_tensor("y", y, dims=1, dtypes=(torch.int32, torch.int64))
    mask = _check_mask("mask", mask, n, y.device)
    _check_labels(y, mask, c)
    if y.shape[0] != n:
        raise ValueError(f"y: expected {n} entries (one per node), got {y.shape[0]}")
    Y = F.one_hot(torch.where(mask, y.to(torch.int64), 0), c).to(torch.float64)
    Y[~mask] = 0.0  # line 5: unlabelled nodes carry all-zero vectors
    with torch.no_grad():
        lam = ops.propagate(g, Y, k_y, "mean", True, csr_t=g)
    pi = grr_estimate(lam, eps_y, c)  # eq. 14
    out = torch.where(mask, pi.argmax(1), torch.full((n,), -1, dtype=torch.int64, device=y.device))
    return (out, pi) if return_pi else out
