"""Benchmark of the synthetic graph generator (ldpfast.datasets.synthetic).

Usage::

    python benchmarks/bench_synthetic.py --preset orkut [--threads 2] [--out results/bench_synthetic.json]
    python benchmarks/bench_synthetic.py --preset small
    python benchmarks/bench_synthetic.py --preset orkut --device cuda   # built on the GPU

Reports the wall time of every generation phase, the total, the peak RSS of the process
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``, KiB on Linux) and graph statistics, prints a
markdown table and writes JSON.  Standalone: no dependency on the shared harness.  With
``--device cuda`` the graph is built on the GPU (the wall time ends with a device
synchronisation; phase times after ``calibrate`` are mostly launch times there) and the peak
device memory (``torch.cuda.max_memory_allocated``) is reported too.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time

PRESETS = {
    # Orkut-scale: 3,072,441 nodes, exactly 117,185,083 undirected edges (CSR only).
    "orkut": {"kind": "orkut_like", "kwargs": {"seed": 0}},
    "small": {"kind": "synthetic",
                  "kwargs": {"num_nodes": 200_000, "avg_degree": 20.0, "num_edges": 2_000_000, "seed": 0,
                              "edge_index": False}},
}
PHASES = ("weights", "nodes", "calibrate", "sample", "trim", "csr", "features", "edge_index")


def _rss_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _intra_fraction(csr, y, chunk_rows: int = 1 << 16) -> float:
    """Fraction of intra-class edges, row block by row block (bounded extra memory)."""
    same = 0
    n = csr.num_nodes
    for b in range(0, n, chunk_rows):
        e = min(n, b + chunk_rows)
        lo, hi = int(csr.rowptr[b]), int(csr.rowptr[e])
        rows = y[b:e].repeat_interleave(csr.rowptr[b + 1:e + 1] - csr.rowptr[b:e])
        same += int((rows == y[csr.col[lo:hi].long()]).sum())
    return same / csr.nnz if csr.nnz else float("nan")


def run(preset: str, threads: int | None, backend: str | None, num_features: int,
        device: str = "cpu") -> dict:
    import ldpfast
    from ldpfast.datasets import orkut_like, synthetic

    if threads:
        ldpfast.set_num_threads(threads)
    spec = PRESETS[preset]
    kwargs = dict(spec["kwargs"], backend=backend, num_features=num_features, device=device)
    cuda = device == "cuda"
    if cuda:
        import torch

        if torch.cuda.is_available():  # else synthetic() raises BackendUnavailable, with the reason
            torch.cuda.reset_peak_memory_stats()
    rss_before = _rss_kib()
    timings: dict = {}
    from ldpfast import _backend

    print(f"[bench_synthetic] building preset {preset!r} ({spec['kind']}, "
          f"{'cuda' if cuda else _backend.resolve('cpu', backend)} backend) ...", flush=True)
    t0 = time.perf_counter()
    if spec["kind"] == "orkut_like":
        data = orkut_like(timings=timings, **kwargs)
    else:
        data = synthetic(timings=timings, **kwargs)
    if cuda:
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    rss_peak = _rss_kib()
    csr = data.csr
    deg = csr.degrees()
    y = data.y
    intra = _intra_fraction(csr, y)
    csr_bytes = csr.rowptr.numel() * 8 + csr.col.numel() * csr.col.element_size()
    return {
        "benchmark": "synthetic",
        "preset": preset,
        "params": {k: v for k, v in kwargs.items() if k not in ("backend", "device")},
        "backend": backend or "auto",
        "threads": ldpfast.get_num_threads(),
        "num_nodes": int(data.num_nodes),
        "num_edges": csr.nnz // 2,
        "mean_degree": float(deg.double().mean()),
        "max_degree": int(deg.max()),
        "min_degree": int(deg.min()),
        "isolated_nodes": int((deg == 0).sum()),
        "intra_class_fraction": intra,
        "phases_s": {p: round(float(timings.get(p, 0.0)), 4) for p in PHASES},
        "generator_total_s": round(float(timings["total"]), 4),
        "wall_s": round(wall, 4),
        "alpha": float(timings["alpha"]),
        "attempts": int(timings["attempts"]),
        "generated_edges": int(timings["generated_edges"]),
        "csr_bytes": int(csr_bytes),
        "peak_rss_kib": int(rss_peak),
        "device": device,
        "peak_device_bytes": int(torch.cuda.max_memory_allocated()) if cuda else None,
        "rss_before_kib": int(rss_before),
        "machine": {"python": sys.version.split()[0], "platform": platform.platform(),
                    "cpus": os.cpu_count()},
    }


def markdown(r: dict) -> str:
    title = (f"### synthetic graph generator: preset `{r['preset']}` ({r['threads']} threads, "
             f"backend {r['backend']}, device {r.get('device', 'cpu')})")
    lines = [title, "", "| phase | seconds |", "|---|---:|"]
    for p, s in r["phases_s"].items():
        lines.append(f"| {p} | {s:.2f} |")
    lines += [f"| **total** | **{r['generator_total_s']:.2f}** |", "",
              "| metric | value |", "|---|---:|",
              f"| nodes | {r['num_nodes']:,} |",
              f"| undirected edges | {r['num_edges']:,} |",
              f"| generated before trim | {r['generated_edges']:,} |",
              (f"| mean / max / min degree | {r['mean_degree']:.2f} / {r['max_degree']:,} / "
               f"{r['min_degree']} |"),
              f"| intra-class edge fraction | {r['intra_class_fraction']:.4f} |",
              f"| CSR size | {r['csr_bytes'] / 2**30:.2f} GiB |",
              f"| peak RSS | {r['peak_rss_kib'] / 2**20:.2f} GiB |",
              f"| wall time | {r['wall_s']:.2f} s |"]
    if r.get("peak_device_bytes") is not None:
        lines.append(f"| peak device memory | {r['peak_device_bytes'] / 2**30:.2f} GiB |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=sorted(PRESETS), default="small")
    ap.add_argument("--threads", type=int, default=None, help="kernel threads (default: all cores)")
    ap.add_argument("--backend", choices=["cpp", "numba"], default=None)
    ap.add_argument("--num-features", type=int, default=0)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="build the graph on this device (cuda: csrc/cuda/synthetic.cu)")
    ap.add_argument("--out", default=None, help="JSON output path")
    args = ap.parse_args(argv)
    r = run(args.preset, args.threads, args.backend, args.num_features, args.device)
    print(markdown(r))
    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as fh:
            json.dump(r, fh, indent=2)
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
