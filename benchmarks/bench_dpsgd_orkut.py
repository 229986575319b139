"""A node-level DP-SGD epoch on the Orkut-like graph against a non-private epoch of the same
model on the same batches (issue 38, "Speed and memory"): time and peak RSS, on the CPU.

Graph: ``ldpfast.datasets.orkut_like(seed=0, num_features=128)`` (3,072,441 nodes,
117,185,083 undirected edges, CSR only).  Sampler: HeterPoisson over every node, expected
batch 4096 sub-graphs (as ``benchmarks/bench_accountants.py``), ``M = 1``; an epoch is
``n / 4096 = 751`` steps.  Model: the paper's GCN (one GCNConv 128 -> 128, ELU, a Linear
head), Adam, two copies with the same initial weights:

* ``nonprivate``: ``cross_entropy(net(x, edge_index)[center], y, reduction="sum")``,
  ``backward()``, ``Adam.step()``;
* ``private``: the same loss through :class:`SubgraphGradSampleModule` (defaults: the
  independence check on the first batch and on 5% of the later ones) and
  :class:`DPOptimizer` (per-sub-graph clipping at C = 0.5, Gaussian noise, RDP accounting).

Both train on *the same batches*: at step ``t`` one batch ``sampler.sample(t)`` is drawn
(timed apart, ``sample``), then both steps run on it, in alternating order.  Epoch time of
each = the sum of its step times (+ the sampling, reported both ways).  ``--steps`` below a
full epoch measures that many steps and extrapolates (said in the JSON).  Peak RSS is the
whole process's (graph, sampler, both models), so an upper bound for a private run alone;
the JSON also holds the RSS before training.

    python benchmarks/bench_dpsgd_orkut.py [--steps 751] [--threads 2] [--out results]
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv=None) -> int:
    import torch
    import torch.nn.functional as F

    import ldpfast
    from benchmarks.harness import (
        building,
        current_peak_rss_mib,
        current_rss_mib,
        load_average,
        write_report,
    )
    from ldpfast.datasets import orkut_like
    from ldpfast.methods.heterpoisson import build_model
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
    from ldpfast.sampling import HeterPoisson

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=None, help="steps to time (default: one epoch)")
    p.add_argument("--batch", type=int, default=4096, help="expected sub-graphs per step")
    p.add_argument("--M", type=float, default=1.0)
    p.add_argument("--features", type=int, default=128)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--out", default="results")
    p.add_argument("--name", default="bench_dpsgd_orkut")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    ldpfast.set_num_threads(a.threads)

    t0 = building("bench_dpsgd_orkut", f"orkut_like(seed=0, num_features={a.features})")
    data = orkut_like(seed=0, num_features=a.features)
    t_gen = time.perf_counter() - t0
    n = int(data.num_nodes)
    q_b = a.batch / n
    t0 = time.perf_counter()
    sampler = HeterPoisson(data, q_b, a.M, seed=0)
    t_init = time.perf_counter() - t0
    epoch_steps = math.ceil(n / a.batch)
    steps = a.steps or epoch_steps
    n_cls = int(data.y.max()) + 1
    print(f"graph {t_gen:.1f} s, sampler {t_init:.1f} s, rss {current_rss_mib():.0f} MiB; {steps} of "
          f"{epoch_steps} steps", flush=True)

    torch.manual_seed(0)
    net_np = build_model("gcn", a.features, n_cls, hidden=128)
    net_dp = build_model("gcn", a.features, n_cls, hidden=128)
    net_dp.load_state_dict(net_np.state_dict())
    opt_np = torch.optim.Adam(net_np.parameters(), lr=0.01)
    gsm = SubgraphGradSampleModule(net_dp)
    opt_dp = DPOptimizer(torch.optim.Adam(net_dp.parameters(), lr=0.01), gsm, sigma=1.0, max_grad_norm=0.5,
                         expected_batch_size=q_b * n, seed=0)
    net_np.train()
    gsm.train()
    rss_before = current_rss_mib()

    def nonprivate(b):
        opt_np.zero_grad()
        F.cross_entropy(net_np(b.x, b.edge_index)[b.center], b.y, reduction="sum").backward()
        opt_np.step()

    def private(b):
        opt_dp.zero_grad()
        subgraph_loss(gsm(b), b).backward()
        opt_dp.step()

    times = {"sample": [], "nonprivate": [], "private": []}
    sizes = []
    loads = []
    rows: list[dict] = []

    def report(done: int) -> None:
        rows.clear()
        scale = epoch_steps / max(done, 1)
        samp = sum(times["sample"])
        for k in ("nonprivate", "private"):
            ts = sorted(times[k])
            tot = sum(ts)
            rows.append({
                "impl": k, "steps": done, "epoch_steps": epoch_steps, "extrapolated": done < epoch_steps,
                "steps_s": tot, "sample_s": samp, "median_step_s": ts[len(ts) // 2] if ts else float("nan"),
                "epoch_s_est": (tot + samp) * scale, "epoch_s_est_without_sampling": tot * scale,
                "x_nonprivate": tot / max(sum(times["nonprivate"]), 1e-300),
                "x_nonprivate_with_sampling": (tot + samp) / max(sum(times["nonprivate"]) + samp, 1e-300),
                "peak_rss_mib": current_peak_rss_mib(), "rss_before_training_mib": rss_before,
                "graph_s": t_gen, "sampler_init_s": t_init, "nodes": n, "expected_batch": a.batch, "M": a.M,
                "mean_subgraphs": sum(s[0] for s in sizes) / max(len(sizes), 1),
                "mean_batch_nodes": sum(s[1] for s in sizes) / max(len(sizes), 1),
                "independence_checks": gsm.independence_checks,
                "loadavg_1m_min_max": [min(loads), max(loads)] if loads else None,
                "threads": a.threads})
        write_report(a.name, rows, a.out, quiet=True)

    t_start = time.perf_counter()
    for t in range(steps):
        t0 = time.perf_counter()
        b = sampler.sample(t)
        times["sample"].append(time.perf_counter() - t0)
        sizes.append((b.num_subgraphs, b.num_nodes))
        order = ("nonprivate", "private") if t % 2 == 0 else ("private", "nonprivate")
        for k in order:
            t0 = time.perf_counter()
            (nonprivate if k == "nonprivate" else private)(b)
            times[k].append(time.perf_counter() - t0)
        del b
        if t % 10 == 0 or t == steps - 1:
            loads.append(load_average()[0])
            report(t + 1)
            np_s, dp_s = sum(times["nonprivate"]), sum(times["private"])
            print(f"step {t + 1}/{steps}: nonprivate {np_s:.1f} s, private {dp_s:.1f} s ({dp_s / np_s:.2f}x), "
                  f"sampling {sum(times['sample']):.1f} s, peak rss {current_peak_rss_mib():.0f} MiB, "
                  f"{time.perf_counter() - t_start:.0f} s so far", flush=True)
    report(steps)
    write_report(a.name, rows, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
