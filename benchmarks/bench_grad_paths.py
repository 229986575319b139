"""Cost of the general per-sub-graph gradient path against the fast rules (issue 38, part 1).

One DP-SGD step without the noise: forward, backward of the summed loss, per-sub-graph
norms and the clipped sum (``SubgraphGradSampleModule.clip_and_accumulate``), on the same
HeterPoisson batches, for

* ``nonprivate``: forward and backward only (the floor);
* ``fast``: the fast rules (:mod:`ldpfast.privacy.dpsgd.grad_rules`);
* ``general``: every parameter on the general path (``grad_path="general"``,
  :mod:`ldpfast.privacy.dpsgd.general`): its op-level rules (one re-run of the batch, ghost
  norms for ``F.linear`` and added biases) and the model re-run per sub-graph for the rest;
* ``general_rerun``: the same without the op-level rules (every parameter re-run per
  sub-graph: what a model whose layers are all unknown to the rules costs);

with the paper's model (one convolution, hidden 128, ELU, a Linear head) for GCN, SAGE and
GAT, on Cora (1433 features) and on Facebook (128-d SVD features).  Timings are interleaved
(``benchmarks.harness.time_interleaved``) and every ratio is between implementations timed
in the same run; the JSON holds the machine facts (CPU, cores, load).  Before timing, the
two paths' clipped sums are compared (they must agree to 1e-5 relative).

    python benchmarks/bench_grad_paths.py [--datasets cora facebook] [--models gcn sage gat]
        [--batch 64 256] [--repeat 5] [--threads 1] [--out results]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _load(name: str):
    import ldpfast as lf

    return lf.datasets.load(name) if name == "cora" else lf.datasets.load(name, feature_dim=128)


def _step(gsm, batch, C=0.5):
    from ldpfast.privacy.dpsgd import subgraph_loss

    for p in gsm._module.parameters():
        p.grad = None
    subgraph_loss(gsm(batch), batch).backward()
    gsm.clip_and_accumulate(C)


def _nonprivate(net, batch):
    import torch.nn.functional as F

    for p in net.parameters():
        p.grad = None
    F.cross_entropy(net(batch.x, batch.edge_index)[batch.center], batch.y, reduction="sum").backward()


def main(argv=None) -> int:
    import torch

    from benchmarks.harness import time_interleaved, write_report
    from ldpfast.methods.heterpoisson import build_model
    from ldpfast.privacy.dpsgd import SubgraphGradSampleModule, flat_grad
    from ldpfast.sampling import HeterPoisson

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["cora", "facebook"])
    p.add_argument("--models", nargs="+", default=["gcn", "sage", "gat"])
    p.add_argument("--batch", nargs="+", type=int, default=[64, 256], help="expected sub-graphs per step")
    p.add_argument("--M", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="results")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    rows = []
    for d in a.datasets:
        data = _load(d)
        for bs in a.batch:
            q = min(1.0, bs / int(data.num_nodes))
            batches = [HeterPoisson(data, q, a.M, seed=7).sample(t) for t in range(a.repeat + 1)]
            for m in a.models:
                torch.manual_seed(0)
                net = build_model(m, int(data.x.shape[1]), int(data.y.max()) + 1, hidden=128)
                fast = SubgraphGradSampleModule(net, check_independence=False)
                gen = SubgraphGradSampleModule(net, check_independence=False, grad_path="general")
                rerun = SubgraphGradSampleModule(net, check_independence=False, grad_path="general")
                rerun._general_path.ops = False
                impls = {"nonprivate": None, "fast": fast, "general": gen, "general_rerun": rerun}
                for g in (fast, gen, rerun):
                    g.train()
                b0 = batches[0]
                _step(fast, b0)
                g_fast = flat_grad(net).clone()
                agree = 0.0
                for g in (gen, rerun):
                    _step(g, b0)
                    rel = float((g_fast - flat_grad(net)).norm() / g_fast.norm())
                    if rel > 1e-5:
                        raise SystemExit(f"{d} {m}: the general and fast clipped sums differ by {rel:.2e} (relative)")
                    agree = max(agree, rel)
                # every implementation sees the same batch sequence
                counters = {k: iter(range(10**9)) for k in impls}

                def run(kind, counters=counters, net=net, impls=impls, batches=batches):
                    b = batches[next(counters[kind]) % len(batches)]
                    if kind == "nonprivate":
                        _nonprivate(net, b)
                    else:
                        _step(impls[kind], b)
                res = time_interleaved({k: (lambda k=k: run(k)) for k in impls}, repeat=a.repeat, warmup=1)
                gp = rerun._general_path
                way = "vmap by size bucket" if gp.vmap_ok else f"loop ({gp.why_loop})"
                op_params = gen._general_path.op_parameters
                mean_b = sum(b.num_subgraphs for b in batches) / len(batches)
                mean_n = sum(b.num_nodes for b in batches) / len(batches)
                for k, r in res.items():
                    rows.append({"dataset": d, "model": m, "batch": bs, "impl": k, "subgraphs": round(mean_b, 1),
                                 "nodes": round(mean_n, 1), **r,
                                 "x_fast": r["median_s"] / res["fast"]["median_s"],
                                 "x_nonprivate": r["median_s"] / res["nonprivate"]["median_s"],
                                 "fast_vs_general_rel_diff": agree, "general_way": way,
                                 "general_op_parameters": op_params})
                print(f"{d} batch {bs} {m}: nonprivate {res['nonprivate']['median_s'] * 1e3:.1f} ms, fast "
                      f"{res['fast']['median_s'] * 1e3:.1f} ms, general {res['general']['median_s'] * 1e3:.1f} ms "
                      f"({res['general']['median_s'] / res['fast']['median_s']:.2f}x fast; op rules for "
                      f"{len(op_params)} of {sum(1 for _ in net.parameters())} parameters), general_rerun "
                      f"{res['general_rerun']['median_s'] * 1e3:.1f} ms "
                      f"({res['general_rerun']['median_s'] / res['fast']['median_s']:.1f}x fast; {way})", flush=True)
    write_report("bench_grad_paths", rows, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
