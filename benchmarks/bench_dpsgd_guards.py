"""The cost of the guards that keep node-level DP-SGD on its accounting (issue 37, item 5).

    python benchmarks/bench_dpsgd_guards.py [--dataset cora] [--steps 30] [--repeat 5]
                                            [--batch 256] [--hidden 64] [--out results]

One DP-SGD step of :class:`ldpfast.privacy.NodeDPEngine` (HeterPoisson sub-graphs, a GCN
with ``--hidden`` units and a linear head, Adam, clip 0.5) measured per step over ``--steps``
steps, in interleaved rounds (every variant sees the same load drift), for:

* ``recheck 0`` (the baseline): the sub-graph independence check on the first batch only;
* ``recheck 0.05`` (the default), ``0.25`` and ``1``: re-run on that fraction of later steps;
* ``store``: ``recheck 0`` plus the write-ahead record of every step in a
  :class:`~ldpfast.privacy.ReportStore` (SQLite, ``synchronous=FULL``) on the local disk;
* ``check alone``: one :func:`~ldpfast.privacy.dpsgd.check_subgraph_independence` on a batch;
* ``record_node_dp alone``: one write-ahead record (a committed SQLite transaction, fsync).

The batch provenance check and the disabled optimizer cost an identity comparison and a
step pre-hook: they are in every variant.  Reported: median seconds per step, the ratio to
the baseline measured in the same run, and the expected ratio ``1 + f * check / step``.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import load_average, write_report


class GCN(torch.nn.Module):
    def __init__(self, d_in: int, hidden: int, classes: int):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv = GCNConv(d_in, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x, edge_index):
        return self.head(F.elu(self.conv(x, edge_index)))


def _engine(data, a, recheck: float, store=None, run: str | None = None):
    from ldpfast.privacy import NodeDPEngine

    torch.manual_seed(0)
    net = GCN(int(data.x.shape[1]), a.hidden, int(data.y.max()) + 1)
    kw = {} if store is None else {"store": store, "dataset": a.dataset, "run": run}
    return NodeDPEngine().make_private(net, torch.optim.Adam(net.parameters(), lr=0.03), data, sigma=1.0,
                                       steps=a.steps, M=2.0, expected_batch_size=a.batch, seed=1,
                                       recheck_fraction=recheck, **kw)


def _loop(model, opt, sampler) -> float:
    from ldpfast.privacy.dpsgd import subgraph_loss

    model.train()
    t0 = time.perf_counter()
    for batch in sampler:
        opt.zero_grad()
        subgraph_loss(model(batch), batch).backward()
        opt.step()
    return (time.perf_counter() - t0) / opt.steps


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="cora")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--batch", type=float, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--out", default="results")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    from ldpfast.datasets import load
    from ldpfast.privacy import ReportStore
    from ldpfast.privacy.dpsgd import check_subgraph_independence

    data = load(a.dataset)
    tmp = tempfile.TemporaryDirectory()
    store = ReportStore(Path(tmp.name) / "spend.sqlite", create=True)
    variants = {"recheck 0": 0.0, "recheck 0.05": 0.05, "recheck 0.25": 0.25, "recheck 1": 1.0, "store": 0.0}
    per_step: dict[str, list[float]] = {k: [] for k in variants}
    checks: dict[str, list[int]] = {k: [] for k in variants}
    loads = []
    for rnd in range(a.repeat + 1):  # round 0 warms up
        for name, f in variants.items():
            st = store if name == "store" else None
            model, opt, sampler = _engine(data, a, f, st, f"run-{rnd}")
            s = _loop(model, opt, sampler)
            if rnd:
                per_step[name].append(s)
                checks[name].append(model.independence_checks)
        loads.append(load_average()[0])
    model, opt, sampler = _engine(data, a, 0.0)
    batch = max((sampler.sample(t) for t in range(5)), key=lambda b: b.num_subgraphs)
    gsm = model
    check_s = []
    for _ in range(a.repeat + 1):
        t0 = time.perf_counter()
        check_subgraph_independence(gsm._module.train(), batch.x, batch.edge_index, batch.batch, batch.num_subgraphs)
        check_s.append(time.perf_counter() - t0)
    check = statistics.median(check_s[1:])
    base = statistics.median(per_step["recheck 0"])
    rows = []
    for name, f in variants.items():
        med = statistics.median(per_step[name])
        rows.append({"case": "dp-sgd step", "impl": name, "recheck_fraction": f, "median_s_per_step": med,
                     "ratio_vs_recheck_0": med / base,
                     "expected_ratio": 1 + f * (a.steps - 1) / a.steps * check / base if name != "store" else None,
                     "checks_per_run_median": statistics.median(checks[name]), "steps": a.steps})
    rows.append({"case": "independence check", "impl": "check alone", "median_s": check,
                 "ratio_vs_step": check / base, "subgraphs": batch.num_subgraphs})
    writes = []
    for i in range(max(20, 4 * a.repeat)):  # one write-ahead record (a committed SQLite transaction)
        t0 = time.perf_counter()
        store.record_node_dp(a.dataset, "write-alone", steps=i + 1, params={"bench": True})
        writes.append(time.perf_counter() - t0)
    w = statistics.median(writes)
    rows.append({"case": "store write-ahead", "impl": "record_node_dp alone", "median_s": w,
                 "ratio_vs_step": w / base, "max_s": max(writes)})
    for r in rows:
        r["loadavg_1m"] = statistics.fmean(loads)
    write_report(f"bench_dpsgd_guards_{a.dataset}", rows, a.out)
    store.close()
    tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
