"""HeterPoisson benchmarks: sub-graph batch extraction and per-sub-graph clipped gradients.

    python benchmarks/bench_heterpoisson.py [--graphs facebook synthetic1m] [--orkut]
                                            [--threads 2] [--repeat 3] [--out results]

Cases (one DP-SGD step of the paper's setting: expected 4096 sub-graphs, M = 1):

* ``sample``: one HeterPoisson step (Alg. 2 + 3, induced sub-graphs, features gathered)
  by the C++ kernel and the Numba twin, against a clear Python-loop reference that follows
  the algorithm line by line (NumPy randomness, one vectorised Bernoulli draw per neighbour
  list as in the authors' code, induced edges by set lookups).
* ``clip``: per-sub-graph gradients clipped to C = 0.5 and summed, for a one-layer GCN
  (hidden 128, the paper's network) on one sampled batch: ldpfast's vectorised ghost /
  book-keeping clipping against a Python loop with one forward/backward per sub-graph
  (:func:`ldpfast.privacy.dpsgd.clipped_sum_loop`); the two sums are checked to agree (1e-5 relative).
* ``--orkut``: one full DP-SGD step (sample + forward/backward + clip + noise + Adam) on
  :func:`ldpfast.datasets.orkut_like` with 128 features; time and peak RSS.

Graphs: Facebook page-page (22,470 nodes, 128-d SVD features) and a 1M-node synthetic
power-law graph (:func:`ldpfast.datasets.synthetic`, mean degree 15, 4 classes, 128
features; a uniform random graph if that generator is unavailable).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import (
    add_ratios,
    building,
    current_peak_rss_mib,
    current_rss_mib,
    time_call,
    write_report,
)


# ----------------------------------------------------------------------------- graphs
def load_graph(name: str, root=None):
    if name == "facebook":
        from ldpfast.datasets import load

        return load("facebook", root=root, feature_dim=128)
    if name == "synthetic1m":
        try:
            from ldpfast.datasets import synthetic

            building("bench_heterpoisson", "synthetic(1000000, 128 features)")
            return synthetic(1_000_000, 15.0, num_classes=4, num_features=128, feature_kind="continuous", seed=0)
        except Exception as exc:  # noqa: BLE001 - fall back to a random graph
            print(f"synthetic generator unavailable ({type(exc).__name__}: {exc}); using a random graph")
            from torch_geometric.data import Data

            from ldpfast.graph import clean_edge_index

            g = torch.Generator().manual_seed(0)
            n = 1_000_000
            ei = clean_edge_index(torch.randint(0, n, (2, 7_500_000), generator=g), n)
            return Data(x=torch.randn(n, 128, generator=g), y=torch.randint(0, 4, (n,), generator=g),
                        edge_index=ei, num_nodes=n)
    raise ValueError(name)


# ----------------------------------------------------------------------------- reference
class LoopSampler:
    """Alg. 2 + 3 with Python loops (the baseline a researcher would write first)."""

    def __init__(self, data, q_b, M, seed=0):
        from ldpfast.sampling import neighbour_csr

        csr = neighbour_csr(data)
        rp, col = csr.rowptr.numpy(), csr.col.numpy().astype(np.int64)
        self.nb = [col[rp[i]:rp[i + 1]] for i in range(csr.num_nodes)]
        self.deg = np.bincount(col, minlength=csr.num_nodes)
        self.x, self.y = data.x, data.y
        self.q_b, self.M = q_b, M
        self.rng = np.random.default_rng(seed)
        self.n = csr.num_nodes

    def sample(self):
        rng = self.rng
        central = [v for v in range(self.n) if rng.random() < self.q_b]          # lines 3-6
        delta = set(central)                                                     # line 15
        n_id, ptr, src, dst = [], [0], [], []
        for v in central:
            nbrs = self.nb[v]
            keep = nbrs[rng.random(len(nbrs)) < self.M / self.deg[nbrs]]         # Alg. 3
            members = [v] + [j for j in keep.tolist() if j != v and j not in delta]  # lines 16-23
            local = {j: i for i, j in enumerate(members)}
            base = len(n_id)
            for lt, t in enumerate(members):                                     # line 10: induced
                for s in self.nb[t].tolist():
                    ls = local.get(s)
                    if ls is not None and s != t:
                        src.append(base + ls)
                        dst.append(base + lt)
            n_id += members
            ptr.append(len(n_id))
        n_id_t = torch.tensor(n_id, dtype=torch.long)
        return n_id_t, torch.tensor(ptr), torch.tensor([src, dst], dtype=torch.long), self.x[n_id_t]


# ----------------------------------------------------------------------------- cases
def bench_sample(data, gname, q_b, M, repeat, rows):
    from ldpfast import _backend
    from ldpfast.sampling import HeterPoisson

    samplers = {"ldpfast_cpp": "cpp", "ldpfast_numba": "numba"}
    out = {}
    for impl, be in samplers.items():
        if _backend.available()[be] is not None:
            continue
        s = HeterPoisson(data, q_b, M, seed=0, backend=be)
        s.sample(0)  # JIT / caches
        step = iter(range(1, 10**9))
        r = time_call(lambda s=s, step=step: s.sample(next(step)), repeat=repeat, warmup=1)
        b = s.sample(0)
        out[impl] = b
        rows.append({"case": f"sample/{gname}", "impl": impl, **r, "subgraphs": b.num_subgraphs,
                     "batch_nodes": b.num_nodes, "batch_edges": int(b.edge_index.shape[1])})
        print(rows[-1])
    ref = LoopSampler(data, q_b, M)
    r = time_call(ref.sample, repeat=max(1, repeat // 2), warmup=0)
    n_id, ptr, ei, _ = ref.sample()
    rows.append({"case": f"sample/{gname}", "impl": "python_loop", **r, "subgraphs": int(ptr.numel() - 1),
                 "batch_nodes": int(n_id.numel()), "batch_edges": int(ei.shape[1])})
    print(rows[-1])
    return out.get("ldpfast_cpp") or out.get("ldpfast_numba")


def bench_clip(data, gname, batch, repeat, rows):
    from ldpfast.methods.heterpoisson import build_model
    from ldpfast.privacy.dpsgd import (
        SubgraphGradSampleModule,
        clipped_sum_loop,
        flat_grad,
        subgraph_loss,
    )

    torch.manual_seed(0)
    net = build_model("gcn", int(data.x.shape[1]), int(data.y.max()) + 1, hidden=128)
    gsm = SubgraphGradSampleModule(net)

    def vec():
        out = gsm(batch)
        subgraph_loss(out, batch).backward()
        gsm.clip_and_accumulate(0.5)

    r = time_call(vec, repeat=repeat, warmup=1)
    got = flat_grad(net).double()
    rows.append({"case": f"clip/{gname}", "impl": "ldpfast_vectorised", **r, "subgraphs": batch.num_subgraphs})
    print(rows[-1])
    t0 = time.perf_counter()
    ref, _ = clipped_sum_loop(net, batch, 0.5)
    dt = time.perf_counter() - t0
    rel = float((got - ref).norm() / ref.norm())
    rows.append({"case": f"clip/{gname}", "impl": "python_loop", "median_s": dt, "min_s": dt, "max_s": dt,
                 "repeat": 1, "peak_rss_mib": current_peak_rss_mib(), "base_rss_mib": current_rss_mib(),
                 "subgraphs": batch.num_subgraphs, "rel_diff_vs_vectorised": rel})
    print(rows[-1])
    if rel > 1e-5:
        raise AssertionError(f"vectorised clipped sum differs from the loop: {rel}")


def bench_orkut_step(rows, seed=0):
    from ldpfast.datasets import orkut_like
    from ldpfast.methods.heterpoisson import build_model
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
    from ldpfast.sampling import HeterPoisson

    t0 = building("bench_heterpoisson", f"orkut_like(seed={seed}, num_features=128)")
    data = orkut_like(seed=seed, num_features=128)
    t_gen = time.perf_counter() - t0
    print(f"orkut_like generated in {t_gen:.1f}s, rss {current_rss_mib():.0f} MiB")
    n = int(data.num_nodes)
    q_b = 4096 / n
    t0 = time.perf_counter()
    s = HeterPoisson(data, q_b, 1.0, seed=seed)
    t_init = time.perf_counter() - t0
    torch.manual_seed(0)
    net = build_model("gcn", 128, int(data.y.max()) + 1, hidden=128)
    gsm = SubgraphGradSampleModule(net)
    opt = DPOptimizer(torch.optim.Adam(net.parameters(), lr=0.03), gsm, sigma=4.0, max_grad_norm=0.5,
                      expected_batch_size=q_b * n, seed=seed)
    step = iter(range(10**9))

    def one():
        b = s.sample(next(step))
        opt.zero_grad()
        out = gsm(b)
        subgraph_loss(out, b).backward()
        opt.step()

    r = time_call(one, repeat=3, warmup=1)
    rows.append({"case": "dpsgd_step/orkut_like", "impl": "ldpfast", **r, "nodes": n,
                 "edges_directed": int(s.csr.nnz), "generate_s": t_gen, "sampler_init_s": t_init})
    print(rows[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", nargs="+", default=["facebook", "synthetic1m"], choices=["facebook", "synthetic1m"])
    p.add_argument("--M", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=4096, help="expected sub-graphs per step")
    p.add_argument("--orkut", action="store_true", help="also one DP-SGD step on orkut_like (about 6 GB)")
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--root", default=None)
    p.add_argument("--out", default="results")
    a = p.parse_args(argv)
    import ldpfast

    if a.threads:
        ldpfast.set_num_threads(a.threads)
        torch.set_num_threads(a.threads)
    rows: list[dict] = []
    for gname in a.graphs:
        data = load_graph(gname, a.root)
        q_b = min(1.0, a.batch / int(data.num_nodes))
        batch = bench_sample(data, gname, q_b, a.M, a.repeat, rows)
        bench_clip(data, gname, batch, a.repeat, rows)
        del data
    if a.orkut:
        bench_orkut_step(rows)
    add_ratios(rows)
    write_report("bench_heterpoisson", rows, a.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
