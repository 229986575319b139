"""KProp forward throughput: ldpfast kernel vs torch.sparse.mm (CSR), PyG, torch_sparse.

    python benchmarks/bench_propagate.py [--nodes 1000000 --edges 20000000 --dim 64]
                                         [--ks 1 4 16] [--orkut] [--threads 2]

Graph: uniform random undirected edges (or the Orkut-like synthetic graph with --orkut).
All implementations compute the same K-step mean aggregation without self loops; outputs
are checked to agree at K = 1 before timing (after many steps float32 results of different
summation orders drift apart by up to ~1e-3 on hubs of degree 10^4, for every library).  Baselines:
* torch.sparse.mm with a CSR tensor holding the row-normalised adjacency (values 1/deg),
* PyG SimpleConv(aggr="mean") (scatter-based message passing), K times,
* torch_sparse.matmul with a SparseTensor, when torch_sparse is installed.
"""
from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import add_ratios, building, time_call, write_report
from ldpfast import ops
from ldpfast.graph import to_csr


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
    try:
        import torch_sparse

        st = torch_sparse.SparseTensor(rowptr=csr.rowptr, col=csr.col.to(torch.int64), value=vals,
                                       sparse_sizes=(n, n))
    except ImportError:
        st = None
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
            del h1, r1
        impls = {"ldpfast": ours, "torch.sparse.mm(csr)": spmm}
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
        for impl, fn in impls.items():
            r = time_call(fn, repeat=a.repeat, warmup=a.warmup)
            rows.append({"case": case, "impl": impl, "median_s": r["median_s"],
                         "min_s": r["min_s"], "max_s": r["max_s"],
                         "edges_per_s": csr.nnz * k / r["median_s"],
                         "peak_rss_mib": r["peak_rss_mib"]})
            print(f"{case:40s} {impl:22s} {r['median_s']:.3f} s", flush=True)
    add_ratios(rows)
    write_report(f"bench_propagate_{name}", rows, a.out)


if __name__ == "__main__":
    main()
