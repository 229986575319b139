"""Sharded randomisation on a Dask LocalCluster (issue 13): time and peak memory per worker.

    python benchmarks/bench_distributed.py [--preset orkut|small] [--shards 8] [--workers 2]
        [--mechanism dprr|locallap|rr] [--eps 1.0] [--memory-limit 3GiB] [--check] [--out results]

Graph: ``orkut_like(seed=0)`` (3,072,441 nodes, 117,185,083 undirected edges = 234,370,166
directed entries; see BENCHMARKS.md) or ``synthetic(200000, avg_degree=76.3, seed=0)``
(``small``).  The driver writes it as ``--shards`` row-block Parquet shards
(:func:`ldpfast.distributed.shards.write_shards`, timed apart), frees it, starts a
LocalCluster of ``--workers`` single-threaded worker processes and runs
:func:`ldpfast.distributed.shards.randomize` (validation pass, then the randomisation pass;
each task reads its shard from Parquet and writes its output shard).  Reported: wall time per
pass, per-task seconds, each worker's busy seconds and input entries, the per-worker
throughput (input directed entries per busy second), each worker's peak RSS (``ru_maxrss``
of the worker process, which runs nothing else), and the load average before, during and
after.  ``--check`` also runs the single-machine mechanism and asserts the output is
identical (needs the graph in memory again: about 3 GB more on Orkut).
"""
from __future__ import annotations

import argparse
import gc
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import current_peak_rss_mib, load_average, write_report

ORKUT_N, ORKUT_E = 3_072_441, 117_185_083
MIB = 2**20


def _graph(preset: str):
    from ldpfast.datasets import orkut_like, synthetic

    if preset == "orkut":
        return orkut_like(seed=0), "orkut_like(seed=0)"
    return synthetic(200_000, avg_degree=2 * ORKUT_E / ORKUT_N, seed=0), "synthetic(200000, avg_degree=76.3, seed=0)"


class _Load(threading.Thread):
    """Samples the 1-minute load average every 5 s while the job runs."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples: list[float] = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.wait(5.0):
            self.samples.append(load_average()[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--preset", choices=["orkut", "small"], default="orkut")
    ap.add_argument("--shards", type=int, default=8)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--mechanism", choices=["dprr", "locallap", "rr"], default="dprr")
    ap.add_argument("--eps", type=float, default=1.0)
    ap.add_argument("--memory-limit", default="3GiB")
    ap.add_argument("--engine", choices=["cpp", "numba"], default="cpp")
    ap.add_argument("--work", default=None, help="folder for the shards (default: a temporary folder, removed)")
    ap.add_argument("--check", action="store_true", help="compare with the single-machine call")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    command = "python benchmarks/bench_distributed.py " + " ".join(argv if argv is not None else sys.argv[1:])

    from ldpfast.distributed import shards as SH

    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="ldpfast-bench-dist-"))
    load_before = load_average()
    t0 = time.perf_counter()
    data, name = _graph(args.preset)
    csr = data.csr
    n, nnz = csr.num_nodes, csr.nnz
    t_build = time.perf_counter() - t0
    print(f"[bench_distributed] {name}: n={n}, nnz={nnz} built in {t_build:.1f} s", flush=True)
    t0 = time.perf_counter()
    SH.write_shards(csr, work / "in", args.shards)
    t_write = time.perf_counter() - t0
    in_bytes = sum(f.stat().st_size for f in (work / "in").glob("*.parquet"))
    print(f"[bench_distributed] wrote {args.shards} shards ({in_bytes / MIB:.0f} MiB Parquet) in {t_write:.1f} s",
          flush=True)
    driver_peak_build = current_peak_rss_mib()
    if not args.check:
        del data, csr
        gc.collect()
    seed = int.from_bytes(os.urandom(8), "little")  # fresh secret seed: never printed or saved
    edges = {"mechanism": args.mechanism, "eps": args.eps}
    if args.mechanism == "rr":
        edges["max_output_edges"] = 10**10
    mon = _Load()
    mon.start()
    t0 = time.perf_counter()
    rep = SH.randomize(work / "in", work / "out", seed=seed, edges=edges, n_workers=args.workers,
                       memory_limit=args.memory_limit, progress=True, engine=args.engine)
    wall = time.perf_counter() - t0
    mon.stop.set()
    out_bytes = sum(f.stat().st_size for f in (work / "out").glob("*.parquet"))
    load_during = mon.samples or [load_average()[0]]
    shard_nnz = {s: sh["nnz"] for s, sh in enumerate(rep.meta["shards"])}
    in_nnz = {s: sh["nnz"] for s, sh in enumerate(__import__("json").loads((work / "in" / "meta.json").read_text())
                                                   ["shards"])}
    busy: dict[str, float] = {}
    entries: dict[str, int] = {}
    rows = []
    for t in rep.tasks:
        busy[t["worker"]] = busy.get(t["worker"], 0.0) + t["seconds"]
        if t["task"] in ("edge_task", "ll_write_task"):
            entries[t["worker"]] = entries.get(t["worker"], 0) + in_nnz[t["shard"]]
    for w in sorted(busy):
        rows.append({"case": f"{args.mechanism} {args.preset} {args.shards} shards {args.engine}", "worker": w,
                     "busy_s": busy[w], "input_entries": entries.get(w, 0),
                     "M_entries_per_busy_s": entries.get(w, 0) / busy[w] / 1e6 if busy[w] else float("nan"),
                     "peak_rss_mib": rep.peak_rss[w] / MIB})
    rows.append({"case": f"{args.mechanism} {args.preset} {args.shards} shards {args.engine}", "worker": "all (wall)",
                 "wall_s": wall, "validate_s": rep.seconds.get("validate"), "randomize_s": rep.seconds.get("randomize"),
                 "input_entries": nnz, "output_entries": rep.num_edges_out,
                 "M_entries_per_wall_s": nnz / wall / 1e6, "workers": args.workers,
                 "input_parquet_mib": in_bytes / MIB, "output_parquet_mib": out_bytes / MIB,
                 "write_shards_s": t_write, "graph_build_s": t_build, "driver_peak_rss_mib": driver_peak_build,
                 "load_before": load_before[0], "load_during_mean": float(np.mean(load_during)),
                 "load_during_max": float(np.max(load_during)), "load_after": load_average()[0]})
    for t in sorted(rep.tasks, key=lambda t: (t["task"], t["shard"])):
        rows.append({"case": "task", "worker": t["worker"], "task": t["task"], "shard": t["shard"],
                     "seconds": t["seconds"], "input_entries": in_nnz[t["shard"]],
                     "output_entries": shard_nnz[t["shard"]] if t["task"] in ("edge_task", "ll_write_task") else None,
                     "rss_mib": t["rss"] / MIB})
    if args.check:
        from ldpfast.mechanisms import dprr, local_laplace, rr_edges

        t0 = time.perf_counter()
        if args.mechanism == "dprr":
            ref = dprr(csr, args.eps, seed).noisy
        elif args.mechanism == "rr":
            ref = rr_edges(csr, args.eps, seed, max_output_edges=10**10).noisy
        else:
            ref = local_laplace(csr, args.eps, seed).noisy
        t_single = time.perf_counter() - t0
        got = SH.read_shards(work / "out")["edge_index"].numpy()
        rp, col = ref.rowptr.numpy(), ref.col.numpy().astype(np.int64)
        src = np.repeat(np.arange(n, dtype=np.int64), np.diff(rp))
        if args.mechanism == "locallap":
            m = src < col
            src, col = src[m], col[m]
        same = bool(np.array_equal(got[0], src) and np.array_equal(got[1], col))
        rows.append({"case": "check vs single machine", "identical": same, "single_machine_s": t_single})
        print(f"[bench_distributed] identical to the single-machine call: {same}", flush=True)
        if not same:
            raise SystemExit("bench_distributed: sharded output differs from the single-machine call")
    write_report(f"bench_distributed_{args.mechanism}_{args.preset}_{args.engine}", rows, args.out, command=command)
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
