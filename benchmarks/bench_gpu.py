"""Every kernel family on one NVIDIA GPU against the device's copy bandwidth and torch on the GPU.

    python benchmarks/bench_gpu.py [--quick] [--out results] [--repeat 5] [--families ...]
                                   [--no-orkut]

Needs a CUDA GPU visible to torch and CuPy (the cuda backend); without one it exits with
status 1 and the reason.  Everything is timed with CUDA events after warm-up calls (the first
call of a kernel compiles it through NVRTC; CuPy caches it on disk) and with
``torch.cuda.synchronize()`` around each timed call; medians over ``--repeat`` calls.

Per row: ``median_s``, ``bytes`` (the traffic the operation cannot avoid: inputs read once
and outputs written once, index arrays included; for propagation ``col`` + ``rowptr`` + ``x``
+ ``y`` per step, a lower bound since gathers re-read rows of ``x``), ``GBps`` = bytes /
time, ``copy_fraction`` = GBps / the copy bandwidth measured in the same run (a device-to-
device ``Tensor.copy_`` of a 1 GiB buffer, read + write counted), and on ldpfast rows
``speedup_vs_torch`` = t(torch baseline) / t(ldpfast).  Baselines, all on the same GPU:

* mechanisms (grr, grr_fs, onebit, multibit, rr_labels): straightforward vectorised torch
  (``rand`` / ``randint`` / ``bernoulli`` / ``where`` / ``topk`` on whole tensors, as the
  papers' code and benchmarks/bench_mechanisms.py), same output distribution;
* edges (dprr, rr_edges): a vectorised torch sparse RR (Bernoulli keep of true edges,
  binomial counts and uniform targets for false ones, collisions ignored, then a sort into
  CSR); local_laplace: the dense torch version (Laplace noise on the upper triangle, top-T),
  on the small graph only; DPRR with user keys (dense keys 0..n-1) against the un-keyed call
  (``speedup_vs_unkeyed``: the cost of keying every bit to its users);
* graph: to_csr against ``sparse_coo_tensor(...).coalesce().to_sparse_csr()``, transpose
  against ``to_sparse_csr()`` of the transposed COO;
* sampling: HeterPoisson (``induced=False``: star sub-graphs) against the same steps in torch
  (Bernoulli centres, ``repeat_interleave`` over their rows, Bernoulli peripherals);
  ``induced=True`` is reported without a baseline;
* propagate: K steps of mean aggregation, forward and forward + backward, against
  ``torch.sparse.mm`` with a CUDA CSR tensor (cuSPARSE, row-normalised values) and PyG
  ``SimpleConv(aggr="mean")`` (scatter) when torch_geometric is installed (random graph only:
  on the Orkut-like graph its message tensor alone is 60 GB).

Orkut-like graph (``ldpfast.datasets.orkut_like``, generated on the CPU, then moved):
DPRR (target < 0.5 s), KProp at d = 64 (target >= 1.5x ``torch.sparse.mm``, forward and
backward) and one HeterPoisson DP-SGD step (sample + forward/backward + per-sub-graph
clipping + noise + Adam, GCN with 128 features (random values on the device) and 128 hidden
units, 4096 expected sub-graphs; target < 10 ms).  Memory-bound mechanisms, at 1M x 128 and
8M x 64: each row >= 60% of the copy bandwidth and >= 2x its torch baseline (one target line
per row).  Each target is printed as met / not met with the measured value; a
family whose CUDA path is missing in this build is reported as skipped, with the reason; a
row that raises anything else is recorded with its error, the run goes on, and the exit
status is 2.

Default sizes are chosen to finish in under 5 minutes on an H100 (compiles included);
``--quick`` is a smoke-test size.  The JSON (``--out``) records the GPU, CUDA, torch and CuPy
versions, the CPU facts of benchmarks/harness.py and the load average.
"""
from __future__ import annotations

import argparse
import gc
import json
import math
import signal
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import environment, markdown_table

DEV = "cuda"  # "cpu" only for --cpu-dry-run (checks the script's flow; its timings mean nothing)
FAMILIES = ("mechanisms", "labels", "edges", "graph", "sampling", "propagate", "orkut")
COPY_TARGET = 0.60
MECH_TORCH_TARGET = 2.0  # each mechanism row against its torch baseline, same run
KPROP_TARGET = 1.5
DPRR_TARGET_S = 0.5
STEP_TARGET_S = 0.010


def log(msg: str) -> None:
    print(f"[bench_gpu {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def require_gpu() -> None:
    """Exit non-zero with the reason when the cuda backend cannot run here."""
    from ldpfast import _backend

    if not torch.cuda.is_available():
        raise SystemExit("[bench_gpu] needs an NVIDIA GPU: torch sees no CUDA device "
                         f"(torch {torch.__version__}, built for CUDA {torch.version.cuda})")
    why = _backend.available()["cuda"]
    if why is not None:
        raise SystemExit(f"[bench_gpu] the ldpfast cuda backend cannot run here: {why}")


def gpu_facts() -> dict:
    from ldpfast import _cuda

    dev = torch.cuda.current_device()
    p = torch.cuda.get_device_properties(dev)
    facts = {"name": torch.cuda.get_device_name(dev), "capability": f"sm_{p.major}{p.minor}",
             "memory_GiB": round(p.total_memory / 2**30, 1), "multiprocessors": p.multi_processor_count,
             "torch": torch.__version__, "torch_cuda": torch.version.cuda}
    facts.update({k: v for k, v in _cuda.gpu_info().items() if k != "devices"})
    return facts


# --- timing -----------------------------------------------------------------------------------
def cuda_time(fn, repeat: int, warmup: int = 2) -> dict:
    """Median / min seconds of ``fn`` by CUDA events, after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    if DEV == "cpu":  # --cpu-dry-run
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return {"median_s": statistics.median(times), "min_s": min(times), "repeat": repeat}
    torch.cuda.synchronize()
    times = []
    for _ in range(repeat):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return {"median_s": statistics.median(times), "min_s": min(times), "repeat": repeat}


class Bench:
    def __init__(self, repeat: int):
        self.repeat = repeat
        self.rows: list[dict] = []
        self.copy_GBps = float("nan")
        self.errors = 0  # rows that raised (recorded, and the exit status is 2)

    def copy_bandwidth(self, nbytes: int = 1 << 30) -> float:
        src = torch.empty(nbytes // 4, dtype=torch.float32, device=DEV).uniform_()
        dst = torch.empty_like(src)
        r = cuda_time(lambda: dst.copy_(src), max(self.repeat, 5), 3)
        self.copy_GBps = 2 * nbytes / r["median_s"] / 1e9
        self.rows.append({"family": "copy", "case": f"copy_ {nbytes >> 20} MiB", "impl": "torch copy_",
                          **r, "bytes": 2 * nbytes, "GBps": self.copy_GBps, "copy_fraction": 1.0})
        log(f"device-to-device copy: {self.copy_GBps:.0f} GB/s")
        return self.copy_GBps

    def run(self, family: str, case: str, impl: str, fn, nbytes: int | None, repeat=None, warmup=2,
            **extra) -> dict | None:
        """Time one implementation; a missing CUDA path (BackendUnavailable) becomes a skipped row."""
        from ldpfast import BackendUnavailable

        row = {"family": family, "case": case, "impl": impl}
        try:
            r = cuda_time(fn, repeat or self.repeat, warmup)
        except BackendUnavailable as exc:
            row["skipped"] = str(exc)
            self.rows.append(row)
            log(f"{family:10s} {case:38s} {impl:22s} skipped: {exc}")
            return None
        except Exception as exc:  # noqa: BLE001 - one failing row must not end the one GPU run
            row["error"] = f"{type(exc).__name__}: {exc}"[:2000]
            self.rows.append(row)
            self.errors += 1
            log(f"{family:10s} {case:38s} {impl:22s} ERROR {row['error'][:500]}")
            free()
            return None
        row.update(r)
        if nbytes:
            row["bytes"] = int(nbytes)
            row["GBps"] = nbytes / r["median_s"] / 1e9
            row["copy_fraction"] = row["GBps"] / self.copy_GBps
        row.update(extra)
        self.rows.append(row)
        bw = f"  {row['GBps']:7.0f} GB/s ({100 * row['copy_fraction']:.0f}% of copy)" if nbytes else ""
        log(f"{family:10s} {case:38s} {impl:22s} {1e3 * r['median_s']:9.3f} ms{bw}")
        return row

    def ratio(self, ours: dict | None, base: dict | None, key: str = "speedup_vs_torch") -> None:
        if ours is not None and base is not None and "median_s" in ours and "median_s" in base:
            ours[key] = base["median_s"] / ours["median_s"]


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


def free() -> None:
    gc.collect()
    if DEV != "cpu":
        torch.cuda.empty_cache()


# --- torch baselines --------------------------------------------------------------------------
def torch_grr(x, k: int, eps: float):
    e = math.exp(eps)
    keep = torch.rand(x.shape, device=x.device) < e / (e + k - 1)
    other = torch.randint(0, k - 1, x.shape, device=x.device, dtype=x.dtype)
    other += (other >= x).to(x.dtype)
    return torch.where(keep, x, other)


def torch_grr_fs(x, k: int, eps: float, m: int):
    n, d = x.shape
    idx = torch.rand(n, d, device=x.device).topk(m, dim=1).indices
    sel = torch.zeros(n, d, dtype=torch.bool, device=x.device).scatter_(1, idx, True)
    unif = torch.randint(0, k, x.shape, device=x.device, dtype=x.dtype)
    return torch.where(sel, torch_grr(x, k, eps), unif)


def torch_onebit(x, eps: float):
    e = math.exp(eps)
    p = (x * (e - 1) + 1) / (e + 1)
    return (2 * torch.bernoulli(p) - 1).to(torch.int8)


def torch_multibit(x, eps: float, m: int):
    idx = torch.rand_like(x).topk(m, dim=1).indices
    s = torch.zeros_like(x, dtype=torch.bool).scatter_(1, idx, True)
    em = math.exp(eps / m)
    t = torch.bernoulli((x * (em - 1) + 1) / (em + 1))
    return (s * (2 * t - 1)).to(torch.int8)


def torch_sparse_rr(rowptr, col, n: int, p: float, q: torch.Tensor):
    """Warner RR + sampling with q (DPRR; q = 1: RR on every bit) on a CSR, in torch: true edges
    kept w.p. p q_i, false edges by binomial counts and uniform targets (collisions ignored),
    then sorted into CSR."""
    dev = col.device
    deg = rowptr[1:] - rowptr[:-1]
    row = torch.repeat_interleave(torch.arange(n, device=dev), deg)
    keep = torch.rand(col.numel(), device=dev, dtype=torch.float64) < (p * q)[row]
    t_row, t_col = row[keep], col.long()[keep]
    cnt = torch.binomial((n - 1 - deg).double(), (1 - p) * q).long()
    f_row = torch.repeat_interleave(torch.arange(n, device=dev), cnt)
    f_col = torch.randint(0, n, (f_row.numel(),), device=dev)
    key = torch.cat([t_row, f_row]) * n + torch.cat([t_col, f_col])
    key = torch.sort(key).values
    out_rp = torch.zeros(n + 1, dtype=torch.int64, device=dev)
    torch.cumsum(torch.bincount(key // n, minlength=n), 0, out=out_rp[1:])
    return out_rp, (key % n).to(torch.int32)


def torch_dense_locallap(rowptr, col, n: int, eps: float, T: int):
    dev = col.device
    a = torch.zeros(n, n, dtype=torch.float32, device=dev)
    row = torch.repeat_interleave(torch.arange(n, device=dev), rowptr[1:] - rowptr[:-1])
    a[row, col.long()] = 1.0
    iu = torch.triu_indices(n, n, 1, device=dev)
    N = iu.shape[1]  # Laplace(1/eps) as a difference of two exponentials, on the device
    v = a[iu[0], iu[1]] + (torch.empty(N, device=dev).exponential_() - torch.empty(N, device=dev).exponential_()) / eps
    top = torch.topk(v, T).indices
    return iu[:, top]


def torch_star_sampler(rowptr, col, deg_out, cand, q_b: float, M: float):
    dev = col.device
    centers = cand[torch.rand(cand.numel(), device=dev) < q_b]
    d = rowptr[centers + 1] - rowptr[centers]
    owner = torch.repeat_interleave(torch.arange(centers.numel(), device=dev), d)
    start = torch.repeat_interleave(rowptr[centers], d)
    pos = torch.arange(owner.numel(), device=dev) - torch.repeat_interleave(torch.cumsum(d, 0) - d, d)
    nb = col[start + pos].long()
    keep = torch.rand(nb.numel(), device=dev, dtype=torch.float64) < (M / deg_out[nb].clamp(min=1)).clamp(max=1)
    return centers, owner[keep], nb[keep]


# --- families ---------------------------------------------------------------------------------
def bench_mechanisms(B: Bench, n: int, d: int, labels_only=False, labels=True):
    from ldpfast.mechanisms import grr, grr_fs, multibit_encode, onebit, rr_labels
    from ldpfast.privacy import optimal_m

    g = torch.Generator(device=DEV).manual_seed(0)
    if not labels_only:
        k, eps, m = 2, 1.0, 10
        x = (torch.rand(n, d, device=DEV, generator=g) < 0.3).to(torch.int64)
        case = f"int64 {n}x{d} k={k}"
        nb = 2 * nbytes(x)
        B.ratio(B.run("mechanisms", f"grr {case}", "ldpfast", lambda: grr(x, k, eps, seed=1), nb),
                B.run("mechanisms", f"grr {case}", "torch", lambda: torch_grr(x, k, eps), nb))
        B.ratio(B.run("mechanisms", f"grr_fs {case} m={m}", "ldpfast", lambda: grr_fs(x, k, eps, m, seed=1), nb),
                B.run("mechanisms", f"grr_fs {case} m={m}", "torch", lambda: torch_grr_fs(x, k, eps, m), nb))
        x = None  # freed before the next inputs
        free()
        xf = torch.rand(n, d, device=DEV, generator=g)
        nb = nbytes(xf) + n * d  # float32 in, int8 out
        case = f"float32 {n}x{d}"
        B.ratio(B.run("mechanisms", f"onebit {case}", "ldpfast", lambda: onebit(xf, 1.0, seed=1), nb),
                B.run("mechanisms", f"onebit {case}", "torch", lambda: torch_onebit(xf, 1.0), nb))
        mm = optimal_m(1.0, d)
        B.ratio(B.run("mechanisms", f"multibit {case} m={mm}", "ldpfast",
                      lambda: multibit_encode(xf, 1.0, mm, seed=1), nb),
                B.run("mechanisms", f"multibit {case} m={mm}", "torch", lambda: torch_multibit(xf, 1.0, mm), nb))
        xf = None
        free()
    if not labels:
        return
    c = 10
    y = torch.randint(0, c, (n * 16,), device=DEV, generator=g)
    nb = 2 * nbytes(y)
    B.ratio(B.run("labels", f"rr_labels int64 {n * 16} c={c}", "ldpfast", lambda: rr_labels(y, c, 1.0, seed=1), nb),
            B.run("labels", f"rr_labels int64 {n * 16} c={c}", "torch", lambda: torch_grr(y, c, 1.0), nb))
    y = None
    free()


def _csr_data(csr, **tensors):
    """A PyG Data holding only a CSR (as ldpfast.datasets.synthetic stores it)."""
    from torch_geometric.data import Data

    data = Data(num_nodes=csr.num_nodes, **tensors)
    data.csr = csr
    data.__dict__["csr"] = csr  # attribute access returns the CSR, not Data.csr()
    return data


def _synthetic_cuda(n: int, avg_degree: float, seed: int = 0):
    from ldpfast.datasets import synthetic

    data = synthetic(n, avg_degree, seed=seed, edge_index=False)
    csr = data.csr
    from ldpfast.graph import CSR

    return CSR(csr.rowptr.to(DEV), csr.col.to(DEV), csr.num_nodes), data.y.to(DEV)


def _secret():
    """The caller's secret for the keyed rows: 128 bits where the mechanisms take bytes, else an int."""
    from ldpfast.privacy.users import Keying

    try:
        Keying(b"\x01" * 16)
        return b"\x01" * 16
    except TypeError:
        return 1


def bench_edges(B: Bench, csr, name: str, small_csr, small_name: str):
    from ldpfast.mechanisms import edges as E

    n = csr.num_nodes
    eps = 1.0
    _, eps2 = E.dprr_budget(eps, n)
    p = math.exp(eps2) / (math.exp(eps2) + 1)
    d = (csr.rowptr[1:] - csr.rowptr[:-1]).double()
    q = (d / (d * (2 * p - 1) + (n - 1) * (1 - p))).clamp(0, 1)  # the noiseless q_i, for the baseline
    box = {}

    def ours():
        box["r"] = E.dprr(csr, eps, seed=1)
    ours_row = B.run("edges", f"dprr {name} eps={eps}", "ldpfast", ours, None)
    if ours_row is not None:
        r = box.pop("r")
        ours_row.update(bytes=nbytes(csr.rowptr, csr.col, r.noisy.rowptr, r.noisy.col))
        ours_row["GBps"] = ours_row["bytes"] / ours_row["median_s"] / 1e9
        ours_row["copy_fraction"] = ours_row["GBps"] / B.copy_GBps
        ours_row["output_nnz"] = r.noisy.nnz
        del r
    B.ratio(ours_row, B.run("edges", f"dprr {name} eps={eps}", "torch sparse RR",
                            lambda: torch_sparse_rr(csr.rowptr, csr.col, n, p, q), None))
    free()
    # DPRR keyed to users (edges_keyed.cu: hits per (row, level), a sort, a thread per coin) at
    # dense keys 0..n-1; its ratio is against the un-keyed call above (the cost of the keys).
    keys = torch.arange(n, dtype=torch.int64, device=DEV)
    B.ratio(B.run("edges", f"dprr {name} eps={eps} user keys", "ldpfast",
                  lambda: E.dprr(csr, eps, seed=_secret(), user_keys=keys), None), ours_row, key="speedup_vs_unkeyed")
    free()
    ns = small_csr.num_nodes
    eps_rr = 4.0
    p_rr = math.exp(eps_rr) / (math.exp(eps_rr) + 1)
    ones = torch.ones(ns, dtype=torch.float64, device=DEV)
    B.ratio(B.run("edges", f"rr_edges {small_name} eps={eps_rr}", "ldpfast",
                  lambda: E.rr_edges(small_csr, eps_rr, seed=1), None),
            B.run("edges", f"rr_edges {small_name} eps={eps_rr}", "torch sparse RR",
                  lambda: torch_sparse_rr(small_csr.rowptr, small_csr.col, ns, p_rr, ones), None))
    T = small_csr.nnz // 2
    B.ratio(B.run("edges", f"local_laplace {small_name} eps={eps}", "ldpfast",
                  lambda: E.local_laplace(small_csr, eps, seed=1), None, repeat=3),
            B.run("edges", f"local_laplace {small_name} eps={eps}", "torch dense",
                  lambda: torch_dense_locallap(small_csr.rowptr, small_csr.col, ns, eps, T), None, repeat=3))
    free()


def bench_graph(B: Bench, csr, name: str):
    from ldpfast import graph as G

    n = csr.num_nodes
    ei = csr.to_edge_index()
    ei = ei[:, torch.randperm(ei.shape[1], device=DEV)]  # unsorted input
    out_b = nbytes(csr.rowptr, csr.col)
    nb = nbytes(ei) + out_b
    ones = torch.ones(ei.shape[1], device=DEV)

    def torch_csr():
        return torch.sparse_coo_tensor(ei, ones, (n, n)).coalesce().to_sparse_csr()
    B.ratio(B.run("graph", f"to_csr {name}", "ldpfast", lambda: G.to_csr(ei, n), nb),
            B.run("graph", f"to_csr {name}", "torch coalesce+to_sparse_csr", torch_csr, nb))
    ei = ones = None
    free()
    nb = 2 * out_b
    row = torch.repeat_interleave(torch.arange(n, device=DEV), csr.rowptr[1:] - csr.rowptr[:-1])
    vals = torch.ones(csr.nnz, device=DEV)

    def torch_t():
        return torch.sparse_coo_tensor(torch.stack([csr.col.long(), row]), vals, (n, n)).coalesce().to_sparse_csr()
    B.ratio(B.run("graph", f"transpose {name}", "ldpfast", lambda: G.transpose(csr), nb),
            B.run("graph", f"transpose {name}", "torch coo.t coalesce+to_sparse_csr", torch_t, nb))
    row = vals = None
    free()


def bench_sampling(B: Bench, csr, y, name: str):
    from ldpfast.sampling import HeterPoisson

    n = csr.num_nodes
    data = _csr_data(csr, y=y)
    q_b, M = min(1.0, 4096 / n), 1.0
    step = iter(range(10**9))
    for induced in (False, True):
        sp = HeterPoisson(data, q_b, M, seed=1, induced=induced)
        box: dict = {}

        def ours(sp=sp, box=box):
            box["b"] = sp.sample(next(step))
        r = B.run("sampling", f"heterpoisson {name} induced={induced}", "ldpfast", ours, None)
        if not induced:
            def base_fn(deg=sp.out_degree, cand=sp.candidates):
                return torch_star_sampler(csr.rowptr, csr.col, deg, cand, q_b, M)
            B.ratio(r, B.run("sampling", f"heterpoisson {name} induced={induced}", "torch", base_fn, None))
        if r is not None:
            b = box.pop("b")
            r["subgraphs"], r["batch_nodes"] = b.num_subgraphs, int(b.n_id.numel())
            r["batch_edges"] = int(b.edge_index.shape[1])
        free()


def _norm_csr_tensor(csr):
    n = csr.num_nodes
    deg = (csr.rowptr[1:] - csr.rowptr[:-1]).clamp(min=1).float()
    row = torch.repeat_interleave(torch.arange(n, device=DEV), csr.rowptr[1:] - csr.rowptr[:-1])
    return torch.sparse_csr_tensor(csr.rowptr, csr.col.long(), 1.0 / deg[row], (n, n))


def bench_propagate(B: Bench, csr, name: str, d: int = 64, k: int = 2, pyg: bool = True) -> dict:
    from ldpfast import ops
    from ldpfast.graph import transpose

    n = csr.num_nodes
    x = torch.rand(n, d, device=DEV)
    csr_t = transpose(csr)
    A = _norm_csr_tensor(csr)
    step_b = nbytes(csr.rowptr, csr.col) + 2 * nbytes(x)
    out = {}

    def ldp_fwd():
        return ops.propagate(csr, x, k, "mean", csr_t=csr_t)

    def torch_fwd(xx=x):
        h = xx
        for _ in range(k):
            h = torch.sparse.mm(A, h)
        return h
    case = f"propagate fwd {name} d={d} K={k}"
    ours = B.run("propagate", case, "ldpfast", ldp_fwd, k * step_b)
    base = B.run("propagate", case, "torch.sparse.mm(csr)", torch_fwd, k * step_b)
    B.ratio(ours, base)
    out["fwd"] = ours.get("speedup_vs_torch") if ours else None
    pyg_conv = None
    if pyg:
        try:
            from torch_geometric.nn import SimpleConv

            pyg_conv = SimpleConv(aggr="mean")
            ei = csr.to_edge_index().flip(0)  # messages j -> i for row i's neighbours j

            def pyg_fwd(xx=x):
                h = xx
                for _ in range(k):
                    h = pyg_conv(h, ei)
                return h
            B.ratio(ours, B.run("propagate", case, "pyg SimpleConv(mean)", pyg_fwd, k * step_b),
                    "speedup_vs_pyg")
        except ImportError as exc:
            log(f"torch_geometric missing ({exc}): no PyG baseline")
    xg = x.clone().requires_grad_()

    def ldp_bwd():
        ops.propagate(csr, xg, k, "mean", csr_t=csr_t).sum().backward()

    def torch_bwd():
        torch_fwd(xg).sum().backward()
    case = f"propagate fwd+bwd {name} d={d} K={k}"
    ours = B.run("propagate", case, "ldpfast", ldp_bwd, 2 * k * step_b)
    base = B.run("propagate", case, "torch.sparse.mm(csr)", torch_bwd, 2 * k * step_b)
    B.ratio(ours, base)
    out["bwd"] = ours.get("speedup_vs_torch") if ours else None
    if pyg_conv is not None:
        def pyg_bwd():
            h = xg
            for _ in range(k):
                h = pyg_conv(h, ei)
            h.sum().backward()
        B.ratio(ours, B.run("propagate", case, "pyg SimpleConv(mean)", pyg_bwd, 2 * k * step_b),
                "speedup_vs_pyg")
    return out  # the caller frees the inputs (free())


def bench_dpsgd_step(B: Bench, csr, y, name: str, d: int = 128) -> dict | None:
    from ldpfast.methods.heterpoisson import build_model
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
    from ldpfast.sampling import HeterPoisson

    n = csr.num_nodes
    x = torch.rand(n, d, device=DEV)  # values do not change the work
    data = _csr_data(csr, x=x, y=y)
    q_b = 4096 / n
    sp = HeterPoisson(data, q_b, 1.0, seed=1)
    torch.manual_seed(0)
    net = build_model("gcn", d, int(y.max()) + 1, hidden=128).to(DEV)
    gsm = SubgraphGradSampleModule(net)
    opt = DPOptimizer(torch.optim.Adam(net.parameters(), lr=0.03), gsm, sigma=4.0, max_grad_norm=0.5,
                      expected_batch_size=q_b * n, seed=1)
    step = iter(range(10**9))

    def one():
        b = sp.sample(next(step))
        opt.zero_grad()
        subgraph_loss(gsm(b), b).backward()
        opt.step()
    return B.run("dpsgd", f"heterpoisson dp-sgd step {name} d={d}", "ldpfast", one, None, warmup=3)


# --- main -------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="smoke-test sizes (seconds), no Orkut-like graph")
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per row (median reported)")
    ap.add_argument("--families", nargs="+", choices=FAMILIES, default=list(FAMILIES))
    ap.add_argument("--no-orkut", action="store_true", help="skip the Orkut-like graph (DPRR, KProp, DP-SGD)")
    ap.add_argument("--out", default="results", help="folder for bench_gpu_<date>.json / .md")
    ap.add_argument("--cpu-dry-run", action="store_true", help=argparse.SUPPRESS)  # flow check only
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat: expected >= 1")
    global DEV
    if a.cpu_dry_run:
        DEV = "cpu"
        log("DRY RUN ON THE CPU: checks the script's flow only; the figures mean nothing")
        facts = {"name": "cpu-dry-run", "capability": "-", "memory_GiB": 0}
    else:
        require_gpu()
        facts = gpu_facts()
    t_start = time.perf_counter()
    log(f"GPU: {facts['name']} ({facts['capability']}, {facts['memory_GiB']} GiB), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}, CuPy {facts.get('cupy')}; kernels compile at first use "
        f"(cache {facts.get('kernel_cache')})")
    B = Bench(a.repeat)
    targets: list[dict] = []
    interrupted = None
    # `timeout` (tools/gpu_session.sh) sends SIGTERM: keep the rows measured so far.
    previous = signal.signal(signal.SIGTERM, _on_sigterm)
    try:
        measure(a, B, targets)
    except (_Terminated, KeyboardInterrupt) as exc:
        interrupted = f"stopped by {type(exc).__name__} after {len(B.rows)} rows"
        log(interrupted + "; writing what was measured")
    finally:
        signal.signal(signal.SIGTERM, previous)
    return write_report(a, argv, B, facts, targets, t_start, interrupted)


class _Terminated(Exception):
    pass


def _on_sigterm(signum, frame):
    raise _Terminated()


def measure(a, B: Bench, targets: list) -> None:
    fam = set(a.families)
    if a.quick:
        mech_n, mech_d, g_n, g_deg, small_n = 20_000, 64, 20_000, 10.0, 2_000
    else:
        mech_n, mech_d, g_n, g_deg, small_n = 1_000_000, 128, 1_000_000, 40.0, 20_000
    B.copy_bandwidth((1 << 26) if a.quick else (1 << 30))
    if "mechanisms" in fam or "labels" in fam:
        # the two shapes: 1M x 128 and 8M x 64 (labels once, at n * 16 of the first)
        shapes = [(mech_n, mech_d)] if a.quick else [(mech_n, mech_d), (8_000_000, 64)]
        for q, (sn, sd) in enumerate(shapes):
            log(f"mechanisms on {sn} x {sd}")
            if "mechanisms" in fam or q == 0:
                bench_mechanisms(B, sn, sd, labels_only="mechanisms" not in fam, labels=q == 0)
    csr = y = None
    if fam & {"edges", "graph", "sampling", "propagate"}:
        log(f"synthetic graph: {g_n} nodes, mean degree {g_deg} (generated on the CPU)")
        csr, y = _synthetic_cuda(g_n, g_deg)
        gname = f"synthetic n={g_n} nnz={csr.nnz}"
    if "graph" in fam:
        bench_graph(B, csr, gname)
    if "sampling" in fam:
        bench_sampling(B, csr, y, gname)
    if "propagate" in fam:
        bench_propagate(B, csr, gname, pyg=True)
        free()
    if "edges" in fam:
        small, _ = _synthetic_cuda(small_n, 20.0, seed=1)
        bench_edges(B, csr, gname, small, f"synthetic n={small_n} nnz={small.nnz}")
        del small
    del csr, y
    free()
    mech = [r for r in B.rows if r["family"] in ("mechanisms", "labels") and r["impl"] == "ldpfast"
            and "copy_fraction" in r]
    for r in mech:  # one line per row: both halves of the target, from this run
        sp = r.get("speedup_vs_torch")
        targets.append({"target": f"{r['case']}: >= {COPY_TARGET:.0%} of copy bandwidth and "
                                  f">= {MECH_TORCH_TARGET:g}x torch",
                        "value": f"{r['copy_fraction']:.0%} of copy, "
                                 + ("torch not measured" if sp is None else f"{sp:.2f}x torch"),
                        "met": None if sp is None else bool(r["copy_fraction"] >= COPY_TARGET
                                                            and sp >= MECH_TORCH_TARGET)})
    if "orkut" in fam and not a.quick and not a.no_orkut:
        from ldpfast.datasets import orkut_like
        from ldpfast.graph import CSR

        log("orkut_like(seed=0): generating on the CPU (3.07M nodes, 117M edges) ...")
        t0 = time.perf_counter()
        data = orkut_like(seed=0)
        log(f"generated in {time.perf_counter() - t0:.1f} s; moving the CSR to the GPU")
        ok = CSR(data.csr.rowptr.to(DEV), data.csr.col.to(DEV), data.csr.num_nodes)
        oy = data.y.to(DEV)
        del data
        gc.collect()
        from ldpfast.mechanisms import edges as E

        r = B.run("edges", "dprr orkut_like eps=1", "ldpfast", lambda: E.dprr(ok, 1.0, seed=1), None, repeat=3)
        targets.append({"target": f"DPRR on the Orkut-like graph < {DPRR_TARGET_S} s",
                        "value": "not measured: " + (B.rows[-1].get("skipped") or B.rows[-1].get("error", "")) if r is None
                        else f"{r['median_s']:.3f} s", "met": None if r is None else r["median_s"] < DPRR_TARGET_S})
        free()
        sp = bench_propagate(B, ok, "orkut_like", d=64, k=2, pyg=False)
        free()
        for key in ("fwd", "bwd"):
            v = sp.get(key)
            targets.append({"target": f"KProp {key} on Orkut-like, d=64: >= {KPROP_TARGET}x torch.sparse.mm",
                            "value": "not measured" if v is None else f"{v:.2f}x",
                            "met": None if v is None else v >= KPROP_TARGET})
        r = bench_dpsgd_step(B, ok, oy, "orkut_like")
        free()
        targets.append({"target": f"one HeterPoisson DP-SGD step on Orkut-like < {1e3 * STEP_TARGET_S:.0f} ms",
                        "value": "not measured" if r is None else f"{1e3 * r['median_s']:.2f} ms",
                        "met": None if r is None else r["median_s"] < STEP_TARGET_S})
        del ok, oy
        free()


def write_report(a, argv, B: Bench, facts: dict, targets: list, t_start: float,
                 interrupted: str | None) -> int:
    env = environment()
    env["gpu"] = facts
    env["copy_bandwidth_GBps"] = B.copy_GBps
    env["wall_s"] = time.perf_counter() - t_start
    env["interrupted"] = interrupted
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = facts["name"].replace(" ", "_").replace("/", "_")
    name = f"bench_gpu_{'quick_' if a.quick else ''}{time.strftime('%Y%m%d_%H%M%S')}_{tag}"
    command = " ".join(["python", "benchmarks/bench_gpu.py", *(argv if argv is not None else sys.argv[1:])])
    payload = {"name": name, "command": command, "environment": env, "targets": targets, "rows": B.rows}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str))
    cols = ["family", "case", "impl", "median_s", "GBps", "copy_fraction", "speedup_vs_torch", "speedup_vs_pyg",
            "skipped", "error"]
    table = markdown_table([{c: r[c] for c in cols if c in r} for r in B.rows])
    ttable = markdown_table([{**t, "met": {True: "met", False: "NOT met", None: "not measured"}[t["met"]]}
                             for t in targets]) if targets else "(no targets measured)"
    (out / f"{name}.md").write_text(f"# {name}\n\nCommand: `{command}`\n\nGPU: {facts['name']}, copy bandwidth "
                                    f"{B.copy_GBps:.0f} GB/s\n\n{table}\n\n## Targets\n\n{ttable}\n")
    print(table)
    print("\nTargets:\n" + ttable, flush=True)
    log(f"done in {env['wall_s']:.0f} s; wrote {out / name}.json and .md")
    if interrupted:
        return 3
    if B.errors:
        log(f"{B.errors} row(s) raised an error (see 'error' in the JSON): exit status 2")
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
