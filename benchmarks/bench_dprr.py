"""DPRR throughput and memory (paper 001, Hidano & Murakami; DESIGN.md performance target).

    python benchmarks/bench_dprr.py [--preset orkut|small] [--eps 1.0] [--threads 2] [--out results]

1. ``ldpfast.mechanisms.edges.dprr`` (C++ backend, ``--threads`` threads) on the preset graph:
   ``orkut`` is :func:`ldpfast.datasets.orkut_like` (3.07M nodes, 117M undirected edges,
   CSR only); ``small`` a 200k-node synthetic power-law graph with the same mean degree.
   Reported: median time, peak RSS during the timed calls, bytes of the input CSR and of
   the output CSR, and ``peak / (input + output)``.  Target on Orkut: < 20 s on 2 cores,
   peak RSS < 2 x (input CSR + output).
2. The bit-by-bit method of the paper (Algorithm 1 lines 6-7 applied to a dense ``n x n``
   adjacency: Warner RR on every bit, then sampling every 1 with ``q_i``), vectorised in
   torch, on graphs of growing ``n`` next to ldpfast's sparse sampler on the same graphs;
   the memory the dense method would need on Orkut (``n^2`` bits / bytes) is computed, not
   run.
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ldpfast
from benchmarks.harness import add_ratios, building, require_backend, time_call, write_report
from ldpfast.graph import CSR
from ldpfast.mechanisms import edges as E

ORKUT_N = 3_072_441
ORKUT_E = 117_185_083
MIB = 2.0**20


def csr_bytes(csr: CSR) -> int:
    return csr.rowptr.numel() * csr.rowptr.element_size() + csr.col.numel() * csr.col.element_size()


def load_graph(preset: str) -> tuple[CSR, str]:
    from ldpfast.datasets import orkut_like, synthetic

    if preset == "orkut":
        name = "orkut_like(seed=0)"
        t0 = building("bench_dprr", name)
        data = orkut_like(seed=0)
    else:
        name = "synthetic(200000, avg_degree=76.3, seed=0)"
        t0 = building("bench_dprr", name)
        data = synthetic(200_000, avg_degree=2 * ORKUT_E / ORKUT_N, seed=0)
    csr = data.csr if isinstance(getattr(data, "csr", None), CSR) else ldpfast.graph.csr_of(data)
    del data
    gc.collect()
    print(f"[bench_dprr] loaded {name}: n={csr.num_nodes}, nnz={csr.nnz} in {time.perf_counter() - t0:.1f} s",
          flush=True)
    return csr, name


def dense_dprr(adj: torch.Tensor, eps: float, gen: torch.Generator) -> torch.Tensor:
    """The paper's method bit by bit, vectorised: degree noise, q (eq. 6), RR, sampling."""
    n = adj.shape[0]
    eps1, eps2 = E.dprr_budget(eps, n)
    d = adj.sum(1, dtype=torch.float64)
    u = torch.rand(n, generator=gen, dtype=torch.float64) - 0.5
    d_star = d - (1 / eps1) * torch.sign(u) * torch.log1p(-2 * u.abs())
    p = math.exp(eps2) / (math.exp(eps2) + 1)
    q = (d_star / (d_star * (2 * p - 1) + (n - 1) * (1 - p))).clamp(0, 1)
    q = torch.where(d_star > 0, q, torch.zeros_like(q))
    keep = torch.rand(n, n, generator=gen) < p          # Warner RR: send each bit as is w.p. p
    noisy = adj == keep                                   # a if kept, 1 - a if flipped
    del keep
    noisy.fill_diagonal_(False)
    noisy &= torch.rand(n, n, generator=gen) < q.float()[:, None]  # edge sampling w.p. q_i
    return noisy


def dense_adj(csr: CSR) -> torch.Tensor:
    n = csr.num_nodes
    a = torch.zeros(n, n, dtype=torch.bool)
    row = torch.repeat_interleave(torch.arange(n), csr.degrees())
    a[row, csr.col.long()] = True
    return a


def bench_preset(args, repeat: int) -> tuple[dict, int]:
    """Time ldpfast's DPRR on the preset graph; the graph is freed on return."""
    csr, gname = load_graph(args.preset)
    in_bytes = csr_bytes(csr)
    box: dict = {}

    def run():
        c0 = time.process_time()
        res = E.dprr(csr, args.eps, seed=1, backend="cpp")
        box.setdefault("cpu", []).append(time.process_time() - c0)
        box["out_bytes"] = csr_bytes(res.noisy)
        box["nnz"] = res.noisy.nnz
        box["eps1"], box["eps2"] = res.spent.params["eps1"], res.spent.params["eps2"]

    load0 = os.getloadavg()[0]
    m = time_call(run, repeat=repeat, warmup=1)
    cpu = sorted(box["cpu"][1:])[len(box["cpu"][1:]) // 2]  # median over the timed calls
    out_bytes = box["out_bytes"]
    row = {
        "case": f"dprr {args.preset}", "impl": "ldpfast-cpp", "graph": gname, "n": csr.num_nodes,
        "input_nnz": csr.nnz, "output_nnz": box["nnz"], "eps": args.eps, "eps1": box["eps1"], "eps2": box["eps2"],
        "threads": args.threads, **m,
        "input_csr_mib": in_bytes / MIB, "output_csr_mib": out_bytes / MIB,
        "peak_over_in_plus_out": m["peak_rss_mib"] * MIB / (in_bytes + out_bytes),
        "added_over_in_plus_out": (m["peak_rss_mib"] - m["base_rss_mib"]) * MIB / (in_bytes + out_bytes),
        "edges_per_s": csr.nnz / m["median_s"],
        # CPU seconds of the whole process per call (all threads); on a shared machine
        # cpu_s / threads estimates the wall time on `threads` otherwise idle cores
        "cpu_s": cpu, "cpu_s_per_thread": cpu / args.threads,
        "loadavg_1min_before": load0, "loadavg_1min_after": os.getloadavg()[0],
    }
    print(f"[bench_dprr] dprr: {m['median_s']:.2f} s (median of {repeat}), peak RSS {m['peak_rss_mib']:.0f} MiB, "
          f"input {in_bytes / MIB:.0f} MiB + output {out_bytes / MIB:.0f} MiB -> ratio "
          f"{row['peak_over_in_plus_out']:.2f}; CPU {cpu:.2f} s ({cpu / args.threads:.2f} s per thread), "
          f"load average {load0:.1f}", flush=True)
    return row, csr.num_nodes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=["orkut", "small"], default="orkut")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=None, help="timed calls (default 3 orkut, 5 small)")
    ap.add_argument("--dense-sizes", default="1000,4000,16000",
                    help="comma-separated n for the dense bit-by-bit baseline ('' to skip)")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    command = "python benchmarks/bench_dprr.py " + " ".join(argv if argv is not None else sys.argv[1:])
    require_backend("bench_dprr", "cpp")

    ldpfast.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    repeat = args.repeat or (3 if args.preset == "orkut" else 5)
    rows: list[dict] = []

    # ---- 1. ldpfast DPRR on the preset graph --------------------------------------------------
    row, n_full = bench_preset(args, repeat)
    rows.append(row)
    gc.collect()

    # ---- 2. dense bit-by-bit baseline vs the sparse sampler, growing n ------------------------
    sizes = [int(s) for s in args.dense_sizes.split(",") if s.strip()]
    from ldpfast.datasets import synthetic

    for n in sizes:
        g = ldpfast.graph.csr_of(synthetic(n, avg_degree=min(2 * ORKUT_E / ORKUT_N, (n - 1) / 4), seed=0))
        case = f"dprr n={n}"
        ms = time_call(lambda g=g: E.dprr(g, args.eps, seed=1, backend="cpp"), repeat=3, warmup=1)
        rows.append({"case": case, "impl": "ldpfast-cpp", "n": n, "input_nnz": g.nnz, "threads": args.threads, **ms})
        need = n * n  # bool bytes of one n x n matrix; the method holds ~3 such + one float32 rand
        adj = dense_adj(g)
        gen = torch.Generator().manual_seed(0)
        try:
            md = time_call(lambda adj=adj, gen=gen: dense_dprr(adj, args.eps, gen), repeat=2, warmup=1)
            rows.append({"case": case, "impl": "torch-dense", "n": n, "input_nnz": g.nnz,
                         "threads": args.threads, **md, "dense_matrix_mib": need / MIB})
        except RuntimeError as exc:  # out of memory
            rows.append({"case": case, "impl": "torch-dense", "n": n, "error": str(exc)[:120]})
        del adj
        gc.collect()
    add_ratios(rows, ours="ldpfast")

    # ---- 3. what dense RR would need on Orkut (computed, not run) -----------------------------
    N = n_full if args.preset == "orkut" else ORKUT_N
    rows.append({
        "case": "dense RR on Orkut (computed)", "impl": "torch-dense", "n": N,
        "n2_bits_gib": N * N / 8 / 2**30, "n2_bool_bytes_gib": N * N / 2**30,
        "n2_float32_rand_gib": 4 * N * N / 2**30,
        "expected_rr_output_edges": (N - 1) * N / (math.exp(args.eps) + 1),
        "note": "not run: n^2 memory; the paper quotes ~1 TB for RR on Orkut",
    })
    write_report(f"bench_dprr_{args.preset}", rows, args.out, command=command)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
