"""KProp forward throughput: ldpfast kernel vs torch.sparse.mm (CSR), PyG, torch_sparse.

    python benchmarks/bench_propagate.py [--nodes 1000000 --edges 20000000 --dim 64]
                                         [--ks 1 4 16] [--orkut] [--threads 2]
                                         [--cached [--cached-k 4 --aggr gcn]]

Graph: uniform random undirected edges (or the Orkut-like synthetic graph with --orkut).
Implementations are timed in interleaved rounds (A B C, A B C, ...: see
harness.time_interleaved) so load drift on a shared machine hits all of them alike; the
JSON has median and min wall time, process CPU time and the load average per row.
All implementations compute the same K-step mean aggregation without self loops; outputs
are checked to agree at K = 1 before timing (after many steps float32 results of different
summation orders drift apart by up to ~1e-3 on hubs of degree 10^4, for every library).  Baselines:
* torch.sparse.mm with a CSR tensor holding the row-normalised adjacency (values 1/deg),
  float32 (torch's CPU sparse.mm has no bfloat16: "not implemented for 'BFloat16'");
  the row "ldpfast bf16 storage" is ``KProp(storage=torch.bfloat16)``: x cast to bfloat16,
  K steps with float32 sums, the result cast back (both casts timed),
  torch's CSR sparse.mm is MKL's kernel, and MKL picks its variant by CPU vendor: the generic
  one on AMD, the AVX-512 one on Intel (about 2x faster on the same core).  The JSON records
  ``torch_mkl_intel_path``; ``benchmarks/mkl_intel_path.c`` (LD_PRELOAD) times the Intel
  variant on an AMD machine.  ``--skip-bf16`` leaves out the bf16 row,
* PyG SimpleConv(aggr="mean") (scatter-based message passing), K times,
* torch_sparse.matmul with a SparseTensor, when torch_sparse is installed,
* torch_scatter.scatter(reduce="mean") over the gathered rows, when torch_scatter is
  installed (skipped with --skip-pyg: it holds an E x d message tensor, as PyG does).
Optional baselines that are not installed are skipped with the reason printed.

--cached adds the layer comparison of issue 17 (same run, same graph):
* adjacency conversion from a PyG edge_index: ldpfast ``graph.as_adj_t`` (the CSR KProp
  reads), the whole ``KProp(cached=True)`` cache build (CSR + transpose + scales), torch's
  ``sparse_coo_tensor(...).coalesce().to_sparse_csr()``, PyG ``T.ToSparseTensor()`` and
  ``torch_sparse.SparseTensor(row=, col=)`` when installed;
* the layer end to end, forward and forward + backward, for ``KProp(cached=True)``,
  ``KProp(cached=False)`` (rebuilds its CSR every call), both given the edge_index, against
  ``torch.sparse.mm`` on a normalised CSR built once (backward: torch's own autograd, and a
  variant with A^T also built once) and torch_sparse.matmul when installed.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import add_ratios, building, time_interleaved, write_report
from ldpfast import graph, ops
from ldpfast.graph import to_csr


def _optional(name):
    """Import an optional baseline library, or print why it is skipped and return None."""
    try:
        return __import__(name)
    except ImportError as exc:
        print(f"[bench_propagate] {name} not installed ({exc}): skipping its baselines "
              f"(pip install {name.replace('_', '-')} builds it from source, 7-18 min)", flush=True)
    except Exception as exc:  # noqa: BLE001 - e.g. an extension built against another torch
        print(f"[bench_propagate] {name} unusable ({type(exc).__name__}: {exc}): skipping its "
              "baselines", flush=True)
    return None


def _row(case, impl, r, work=None):
    row = {"case": case, "impl": impl, "median_s": r["median_s"], "min_s": r["min_s"],
           "max_s": r["max_s"]}
    if work is not None:
        row["edges_per_s"] = work / r["median_s"]
    row["cpu_median_s"] = r["cpu_median_s"]
    row["repeat"] = r["repeat"]
    row["peak_rss_mib"] = r["peak_rss_mib"]
    row["loadavg_1m"] = r["loadavg_1m"]
    print(f"{case:44s} {impl:40s} {r['median_s']:.3f} s  (load {r['loadavg_1m']:.1f})", flush=True)
    return row


class _SpmmPrebuilt(torch.autograd.Function):
    """torch.sparse.mm with A^T also built once for the backward pass (the strongest torch
    baseline: torch's own autograd transposes A on every backward)."""

    @staticmethod
    def forward(ctx, h, A, At):
        ctx.At = At
        return torch.sparse.mm(A, h)

    @staticmethod
    def backward(ctx, g):
        return torch.sparse.mm(ctx.At, g), None, None


def cached_section(csr, name, a, rows):
    """Issue 17: conversion from edge_index, and the KProp layer cached / uncached against
    torch.sparse.mm (and torch_sparse) on an adjacency built once."""
    from ldpfast.nn import KProp

    n, d, k, aggr = csr.num_nodes, a.dim, a.cached_k, a.aggr
    # What a PyG user holds: a coalesced edge_index, sorted by source (the graph is
    # symmetric, so both directions are there); KProp buckets it by target.
    ei = csr.to_edge_index()
    E = ei.size(1)
    tsp = _optional("torch_sparse")

    # --- conversion ------------------------------------------------------------------
    case = f"{name} convert edge_index (E={E})"
    ones = torch.ones(E)

    def torch_conv():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch.sparse_coo_tensor(ei.flip(0), ones, (n, n)).coalesce().to_sparse_csr()

    def pyg_conv():
        import torch_geometric.transforms as T
        from torch_geometric.data import Data

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return T.ToSparseTensor()(Data(edge_index=ei, num_nodes=n)).adj_t

    def cache_build():
        c = graph.as_adj_t(ei, n)
        graph.transpose(c)
        return ops.step_scales(c, k, aggr, False, None, torch.float32)

    convs = {"ldpfast as_adj_t": lambda: graph.as_adj_t(ei, n),
             "ldpfast KProp cache (CSR+transpose+scales)": cache_build,
             "torch coo.coalesce().to_sparse_csr()": torch_conv,
             "pyg T.ToSparseTensor()": pyg_conv}
    if tsp is not None:
        convs["torch_sparse SparseTensor(row, col)"] = lambda: tsp.SparseTensor(
            row=ei[1], col=ei[0], sparse_sizes=(n, n))
    c0 = graph.as_adj_t(ei, n)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = torch_conv()
    assert torch.equal(c0.rowptr, ref.crow_indices()) and torch.equal(c0.col.long(), ref.col_indices())
    del ref
    for impl, r in time_interleaved(convs, a.repeat, a.warmup).items():
        rows.append(_row(case, impl, r, E))

    # --- the layer ---------------------------------------------------------------------
    deg = c0.degrees().to(torch.float64)
    if aggr == "gcn":
        dinv = torch.where(deg > 0, deg.clamp(min=1).rsqrt(), 0.0)
        row = torch.repeat_interleave(torch.arange(n), c0.degrees())
        vals = (dinv[row] * dinv[c0.col.long()]).float()
        del row
    elif aggr == "mean":
        vals = (1.0 / deg.clamp(min=1)).float().repeat_interleave(c0.degrees())
    else:
        vals = torch.ones(c0.nnz)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        A = torch.sparse_csr_tensor(c0.rowptr, c0.col.long(), vals, (n, n))
        At = A.t().to_sparse_csr()  # built once for the prebuilt-transpose baseline
    st = None
    if tsp is not None:
        st = tsp.SparseTensor(rowptr=c0.rowptr, col=c0.col.long(), value=vals, sparse_sizes=(n, n))
    del c0
    x = torch.rand(n, d)
    gy = torch.rand(n, d)
    cached, plain = KProp(k=k, aggr=aggr, cached=True), KProp(k=k, aggr=aggr)

    def spmm(h):
        for _ in range(k):
            h = torch.sparse.mm(A, h)
        return h

    def spmm_pre(h):
        for _ in range(k):
            h = _SpmmPrebuilt.apply(h, A, At)
        return h

    def tsp_mm(h):
        for _ in range(k):
            h = tsp.matmul(st, h)
        return h

    # same function: the cached layer agrees with torch at K = k (float32 rounding)
    torch.testing.assert_close(cached(x, ei), spmm(x), rtol=1e-3, atol=1e-4)
    layers = {"ldpfast KProp(cached=True)": lambda h: cached(h, ei),
              "ldpfast KProp(cached=False)": lambda h: plain(h, ei),
              "torch.sparse.mm(csr built once)": spmm}
    if st is not None:
        layers["torch_sparse.matmul(built once)"] = tsp_mm
    # The weighted kernel (one more load per edge): random weights, forward only.
    ew = torch.rand(E) + 0.5
    weighted = KProp(k=k, aggr=aggr, cached=True)
    fwd = dict(layers)
    fwd["ldpfast KProp(cached=True, edge_weight)"] = lambda h: weighted(h, ei, ew)
    case = f"{name} layer fwd d={d} K={k} {aggr}"
    res = time_interleaved({i: (lambda f=f: f(x)) for i, f in fwd.items()}, a.repeat, a.warmup)
    for impl, r in res.items():
        rows.append(_row(case, impl, r, c_nnz(A) * k))
    layers["torch.sparse.mm(csr, A^T built once)"] = spmm_pre
    case = f"{name} layer fwd+bwd d={d} K={k} {aggr}"
    def step(f):
        h = x.detach().requires_grad_(True)
        f(h).backward(gy)
        return h.grad

    # torch's own CSR backward is several times slower than its forward: one timed call,
    # no warm-up, is enough to show it (the A^T-built-once row is the fair baseline).
    slow = "torch.sparse.mm(csr built once)"
    res = time_interleaved({i: (lambda f=f: step(f)) for i, f in layers.items()}, a.repeat,
                           a.warmup, only={slow: (1, 0)})
    for impl, r in res.items():
        rows.append(_row(case, impl + (" [torch autograd, 1 call]" if impl == slow else ""), r,
                         2 * c_nnz(A) * k))


def c_nnz(A):
    return int(A.col_indices().numel())


def make_graph(n, e, seed=0):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e // 2), generator=g)
    return to_csr(ei, n, symmetrize=True)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nodes", type=int, default=1_000_000)
    p.add_argument("--edges", type=int, default=20_000_000, help="directed entries (approx.)")
    p.add_argument("--dim", type=int, default=64)
    p.add_argument("--ks", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--orkut", action="store_true", help="use the Orkut-like synthetic graph")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--warmup", type=int, default=1, help="untimed calls first (0 for --orkut)")
    p.add_argument("--skip-pyg", action="store_true")
    p.add_argument("--skip-bf16", action="store_true", help="leave out the bf16-storage row (long K = 16 Orkut runs)")
    p.add_argument("--cached", action="store_true",
                   help="also: conversion times and the KProp layer cached / uncached (issue 17)")
    p.add_argument("--cached-k", type=int, default=4, help="K of the --cached layer comparison")
    p.add_argument("--aggr", default="gcn", choices=list(ops.AGGRS),
                   help="aggregation of the --cached layer comparison (KProp's default: gcn)")
    p.add_argument("--out", default="results")
    a = p.parse_args(argv)
    import ldpfast

    if a.threads:
        ldpfast.set_num_threads(a.threads)
        torch.set_num_threads(a.threads)
    if a.orkut:
        from ldpfast.datasets import orkut_like

        building("bench_propagate", "orkut_like(seed=0)")
        csr = orkut_like(seed=0).csr
        name = "orkut_like"
    else:
        csr = make_graph(a.nodes, a.edges)
        name = f"random_n{a.nodes}_e{csr.nnz}"
    n, d = csr.num_nodes, a.dim
    x = torch.rand(n, d)
    deg = csr.degrees().clamp(min=1).to(torch.float32)
    vals = (1.0 / deg).repeat_interleave(csr.degrees())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch's "sparse CSR is beta" / invariant-check notes
        A = torch.sparse_csr_tensor(csr.rowptr, csr.col.to(torch.int64), vals, (n, n))
    ei = csr.to_edge_index().flip(0) if not a.skip_pyg else None
    torch_sparse = _optional("torch_sparse")
    st = None
    if torch_sparse is not None:
        st = torch_sparse.SparseTensor(rowptr=csr.rowptr, col=csr.col.to(torch.int64), value=vals,
                                       sparse_sizes=(n, n))
    torch_scatter = _optional("torch_scatter") if ei is not None else None
    if ei is None:
        print("[bench_propagate] --skip-pyg: PyG SimpleConv and torch_scatter (E x d message "
              "tensors) skipped", flush=True)
    rows = []
    for k in a.ks:
        case = f"{name} d={d} K={k}"

        def ours(k=k):
            return ops.propagate(csr, x, k, "mean", csr_t=csr)

        def spmm(k=k):
            h = x
            for _ in range(k):
                h = torch.sparse.mm(A, h)
            return h

        if k == a.ks[0]:  # same function: K=1 agrees to float32 rounding
            h1, r1 = ops.propagate(csr, x, 1, "mean", csr_t=csr), torch.sparse.mm(A, x)
            torch.testing.assert_close(h1, r1, rtol=1e-4, atol=1e-5)
            h16 = ops.propagate(csr, x.bfloat16(), 1, "mean", csr_t=csr).float()
            torch.testing.assert_close(h16, r1, rtol=1e-2, atol=1e-2)  # bf16: 8-bit mantissa
            del h1, r1, h16
        def ours_bf16(k=k):  # KProp(storage=torch.bfloat16): casts in and out included
            return ops.propagate(csr, x.bfloat16(), k, "mean", csr_t=csr).float()

        impls = {"ldpfast": ours, "ldpfast bf16 storage": ours_bf16, "torch.sparse.mm(csr)": spmm}
        if a.skip_bf16:
            del impls["ldpfast bf16 storage"]
        if ei is not None:
            from torch_geometric.nn import SimpleConv

            conv = SimpleConv(aggr="mean")

            def pyg(k=k, conv=conv):
                h = x
                for _ in range(k):
                    h = conv(h, ei)
                return h
            impls["pyg SimpleConv"] = pyg
        if st is not None:
            def tsp(k=k):
                h = x
                for _ in range(k):
                    h = torch_sparse.matmul(st, h)
                return h
            impls["torch_sparse"] = tsp
        if torch_scatter is not None:
            def tsc(k=k):
                h = x
                for _ in range(k):
                    h = torch_scatter.scatter(h[ei[0]], ei[1], dim=0, dim_size=n, reduce="mean")
                return h
            impls["torch_scatter mean"] = tsc
        for impl, r in time_interleaved(impls, a.repeat, a.warmup).items():
            rows.append(_row(case, impl, r, csr.nnz * k))
    if a.cached:
        cached_section(csr, name, a, rows)
    add_ratios(rows)
    add_ratios(rows, key="min_s", prefix="speedup_min_vs_")
    write_report(f"bench_propagate_{name}", rows, a.out)


if __name__ == "__main__":
    main()
