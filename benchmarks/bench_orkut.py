"""Every pipeline end to end on the Orkut-like graph (issue 14, items 3 and 5).

    python benchmarks/bench_orkut.py [--preset orkut|small|tiny] [--nodes N]
        [--pipelines lpgnn rgnn heterpoisson dprr] [--epochs 3] [--dim 64] [--k 4]
        [--C 128] [--coarsen-to K] [--skip-metis] [--plain-metis] [--metis-only]
        [--metis-nodes N ...] [--threads 2] [--out results]

Graph: ``orkut`` is :func:`ldpfast.datasets.orkut_like` (3,072,441 nodes, 234M CSR entries,
CSR only); ``small`` a synthetic power-law graph of ``--nodes`` nodes (default 200k) with
the Orkut mean degree 76.3; ``tiny`` 3000 nodes (smoke test).  Labels: the graph's two
planted classes (homophily 0.8); ``d`` features built from the labels as in bench_rgnn
(value ``proto[y, i]`` of a domain of 4 with probability 0.8, else uniform), divided by 3
where a pipeline needs values in [0, 1].

Pipelines and their stages (each stage: wall time, RSS before, peak RSS with VmHWM reset
before it; the JSON and markdown are rewritten after every stage, so a cut-off run keeps
what it measured):

* ``lpgnn`` (paper 002): randomise (multi-bit encoder on the features, RR on the labels of
  the train + validation nodes), kprop (``h = KProp(rectify(x*), K)`` and the label KProp of
  eq. 12, ``ops.propagate`` with the GCN aggregator), train (``--epochs`` epochs of the
  2-layer GraphSAGE of :class:`ldpfast.methods._common.Backbone` with the Drop loss of
  Algorithm 3, eq. 13-14; one training and one evaluation forward per epoch as
  ``lpgnn.fit``).
* ``rgnn`` (paper 000): randomise (GRR-FS, m = 10, domain 4; RR labels), metis
  (``metis_bags`` coarsened to ``--coarsen-to`` clusters; with ``--plain-metis`` also plain
  pymetis; before the reconstruction as in Algorithm 3, lines 3-8, so the one-hot features
  do not exist yet), reconstruct (``reconstruct_features``, counts method, and
  ``reconstruct_labels``, K hops each; the one-hot of the argmax as the model input,
  Algorithm 1 line 19), train (``--epochs`` epochs: CE on ``y~`` + the LLP loss of
  Algorithm 3 over the bags).
* ``heterpoisson`` (paper 003): ``heterpoisson.fit(epochs=--hp-epochs)``, by default one
  epoch of DP-SGD as the paper defines it (``T = ceil(1 / q_b)`` steps,
  ``q_b = 4096 / #training nodes``), GCN, hidden 128, then its test-time inference (split
  into sampling, DP-SGD steps, rest from the report); then inference alone (``N_test = 13``
  sub-graphs of every test node, forward) with an untrained model.
* ``dprr`` (paper 001): ``dprr.degree_preservation`` (noisy degrees of DPRR, RR, LocalLap;
  mean absolute error and log-degree correlation), eps = 1.

The SAGE layers of lpgnn/rgnn training are computed as ``lin_l(mean_N(x)) + lin_r(x)`` with
``ops.propagate`` (the same function as PyG's ``SAGEConv``, checked on the tiny preset), and
the first layer's neighbour mean of the fixed input is computed once in the aggregation
stage, not per epoch: PyG's own SAGEConv on 256 one-hot columns would gather 234M x 256
floats per forward.

Per stage the script prints the Orkut-like extrapolation (time and added memory scaled by
the ratio of CSR entries; the CSR, the features and every per-node array grow with it at the
same mean degree).  Exception: HeterPoisson's sampler does O(n) work per step and an epoch
has ~n / 4096 steps, so that part grows as n^2 and the linear estimate understates it (on the
Orkut-like graph about 67 s of sampling instead of 13 s; BENCHMARKS.md).  Seeds are fixed
constants of the script and are never written out.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ldpfast
from benchmarks.bench_rgnn import class_features
from benchmarks.harness import building, current_rss_mib, time_call, write_report
from ldpfast import ops
from ldpfast.graph import CSR, csr_of

ORKUT_N = 3_072_441
ORKUT_NNZ = 2 * 117_185_083
MEAN_DEG = ORKUT_NNZ / ORKUT_N
GIB = 1024.0
PIPELINES = ("lpgnn", "rgnn", "heterpoisson", "dprr")


# --- graph -------------------------------------------------------------------------------------
def load_graph(preset: str, nodes: int | None):
    from ldpfast.datasets import orkut_like, synthetic

    if preset == "orkut":
        name = "orkut_like(seed=0)"
        t0 = building("bench_orkut", name)
        data = orkut_like(seed=0)
    else:
        n = nodes or (200_000 if preset == "small" else 3000)
        deg = MEAN_DEG if preset == "small" else 12.0
        name = f"synthetic({n}, avg_degree={deg:.1f}, seed=0)"
        t0 = building("bench_orkut", name)
        data = synthetic(n, avg_degree=deg, num_classes=2, seed=0, edge_index=False)
    csr = data.csr if isinstance(getattr(data, "csr", None), CSR) else csr_of(data)
    y = data.y
    del data
    gc.collect()
    t = time.perf_counter() - t0
    print(f"[bench_orkut] loaded {name}: n={csr.num_nodes}, nnz={csr.nnz} in {t:.1f} s",
          flush=True)
    return csr, y, name, t


def report_name(a) -> str:
    """``bench_orkut_<preset>``, plus the pipelines when not all run (separate processes per
    pipeline keep separate reports)."""
    extra = "" if set(a.pipelines) == set(PIPELINES) else "_" + "-".join(a.pipelines)
    return f"bench_orkut_{a.preset}{extra}"


class Run:
    """Runs stages, records a row per stage and rewrites the report after each."""

    def __init__(self, args, command, csr, gname, base_mib, name=None):
        self.a, self.command, self.rows = args, command, []
        self.name = name or report_name(args)
        self.n, self.nnz, self.gname = csr.num_nodes, csr.nnz, gname
        self.scale = ORKUT_NNZ / max(1, csr.nnz)
        self.base_mib = base_mib  # interpreter + libraries, not scaled

    def stage(self, pipeline: str, stage: str, fn, **extra):
        box = {}
        c0 = time.process_time()
        t = time_call(lambda: box.__setitem__("out", fn()), repeat=1, warmup=0)
        cpu = time.process_time() - c0
        out = box.pop("out")
        row = {"pipeline": pipeline, "stage": stage, "graph": self.gname, "n": self.n,
               "nnz": self.nnz, "wall_s": t["median_s"], "cpu_s": cpu,
               "rss_before_mib": t["base_rss_mib"],
               "peak_rss_mib": t["peak_rss_mib"],
               "added_mib": t["peak_rss_mib"] - t["base_rss_mib"],
               "loadavg_1m": t["loadavg_1m"],
               "orkut_est_s": t["median_s"] * self.scale,
               "orkut_est_cpu_s": cpu * self.scale,
               "orkut_est_peak_gib": (self.base_mib + (t["peak_rss_mib"] - self.base_mib)
                                      * self.scale) / GIB}
        row["details"] = dict(extra)
        self.rows.append(row)
        print(f"[bench_orkut] {pipeline}/{stage}: {row['wall_s']:.2f} s ({cpu:.2f} CPU-s), peak "
              f"{row['peak_rss_mib']:.0f} MiB (before {row['rss_before_mib']:.0f}), load "
              f"{row['loadavg_1m']:.2f}; Orkut-like est. {row['orkut_est_s']:.0f} s, "
              f"{row['orkut_est_peak_gib']:.1f} GiB", flush=True)
        self.write()
        return out

    def annotate(self, **kw):
        """Facts about the last stage (kept in its ``details``)."""
        self.rows[-1]["details"].update(kw)
        self.write()

    def write(self):
        write_report(self.name, self.rows, self.a.out, command=self.command, quiet=True)

    def summary(self):
        """The slowest stage of each pipeline, and the totals."""
        out = []
        for p in PIPELINES:
            rs = [r for r in self.rows if r["pipeline"] == p]
            if rs:
                slow = max(rs, key=lambda r: r["wall_s"])
                out.append({"pipeline": p, "stage": "TOTAL", "wall_s": sum(r["wall_s"] for r in rs),
                            "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                            "cpu_s": sum(r["cpu_s"] for r in rs),
                            "orkut_est_s": sum(r["orkut_est_s"] for r in rs),
                            "orkut_est_cpu_s": sum(r["orkut_est_cpu_s"] for r in rs),
                            "orkut_est_peak_gib": max(r["orkut_est_peak_gib"] for r in rs),
                            "slowest_stage": slow["stage"]})
        return out


def onehot_rows(idx: torch.Tensor, g: int, chunk: int = 1 << 16) -> torch.Tensor:
    """float32 ``(n, d * g)`` one-hot of ``(n, d)`` values in ``[0, g)``, built in row chunks
    (``F.one_hot`` would hold an int64 ``n x d x g`` temporary: 6.3 GB on Orkut-like)."""
    n, d = idx.shape
    h = torch.zeros(n, d * g, dtype=torch.float32)
    offs = torch.arange(d, dtype=torch.int64) * g
    for s in range(0, n, chunk):
        h[s:s + chunk].scatter_(1, idx[s:s + chunk].to(torch.int64) + offs, 1.0)
    return h


# --- SAGE layers through ops.propagate ----------------------------------------------------------
def mean_agg(csr: CSR, x: torch.Tensor) -> torch.Tensor:
    """SAGE's neighbour mean (differentiable; 0 for isolated nodes, as PyG's)."""
    return ops.propagate(csr, x, 1, "mean", csr_t=csr)


def sage_forward(net, h: torch.Tensor, agg_h: torch.Tensor, csr: CSR) -> torch.Tensor:
    """``net(h, adj)`` of a GraphSAGE :class:`Backbone` (PyG SAGEConv: ``lin_l(mean_N(x)) +
    lin_r(x)``), with the first layer's neighbour mean ``agg_h`` precomputed."""
    c1, c2 = net.conv1, net.conv2
    z1 = c1.lin_l(agg_h) + c1.lin_r(h)
    x1 = F.dropout(net.act(z1), p=net.dropout, training=net.training)
    return c2.lin_l(mean_agg(csr, x1)) + c2.lin_r(x1)


def check_sage_forward(net, h, agg_h, csr):
    """On small graphs: the precomputed form equals PyG's SAGEConv forward."""
    from torch_geometric.utils import to_torch_csr_tensor

    ei = csr.to_edge_index()
    adj = to_torch_csr_tensor(ei.flip(0), size=(csr.num_nodes, csr.num_nodes))
    net.eval()
    with torch.no_grad():
        ref = net(h, adj)
        ours = sage_forward(net, h, agg_h, csr)
    err = float((ref - ours).abs().max())
    assert err < 1e-4 * (1 + float(ref.abs().max())), f"SAGE forward differs from PyG by {err}"
    return err


# --- pipelines ---------------------------------------------------------------------------------
def train_and_test(net, opt, epochs: int, forward, loss_fn, y, test) -> float:
    """``epochs`` full-batch steps of ``loss_fn(forward())``, each followed by an evaluation
    forward (as the methods' ``fit`` do); the last one's test accuracy."""
    for _ in range(epochs):
        net.train()
        opt.zero_grad()
        loss_fn(forward()).backward()
        opt.step()
        net.eval()
        with torch.no_grad():
            pred = forward().argmax(1)
    return float((pred[test] == y[test]).float().mean())


def run_lpgnn(run: Run, csr, y, a):
    from ldpfast.mechanisms import multibit_encode, multibit_rectify, rr_labels
    from ldpfast.methods import random_split
    from ldpfast.methods._common import Backbone
    from ldpfast.methods.lpgnn import rr_transition

    n, c, K = csr.num_nodes, int(y.max()) + 1, a.k
    # large inputs are held here and popped by the stage that consumes them, so they are
    # freed as soon as it has run
    st = {"x": class_features(y, a.dim, 4).to(torch.float32) / 3.0}
    train, val, test = random_split(n, 11)
    lab = train | val

    def randomise():
        xs, spent = multibit_encode(st.pop("x"), a.eps_x, None, 0.0, 1.0, seed=12)
        yr, _ = rr_labels(y, c, a.eps_y, seed=13, mask=lab)
        st["m"] = spent.params["m"]
        return xs, yr

    st["x_star"], y_noisy = run.stage("lpgnn", "randomise (multi-bit, RR labels)", randomise)
    run.annotate(d=a.dim, m=st["m"], eps_x=a.eps_x, eps_y=a.eps_y)
    gc.collect()

    def kprop():
        xr = multibit_rectify(st.pop("x_star"), a.eps_x, st["m"], 0.0, 1.0)
        h = ops.propagate(csr, xr, K, "gcn", csr_t=csr)
        del xr
        Y = F.one_hot(y_noisy.clamp(min=0), c).to(torch.float32) * lab[:, None]
        agg = ops.propagate(csr, Y, K, "gcn", csr_t=csr)
        yt = torch.where(agg.abs().sum(1) > 0, agg.argmax(1), y_noisy)
        return h, mean_agg(csr, h), yt

    h, agg_h, y_tilde = run.stage("lpgnn", f"kprop (features and labels, K={K})", kprop)
    run.annotate(K=K, acc_y_tilde_train=float((y_tilde[train] == y[train]).float().mean()))
    gc.collect()

    torch.manual_seed(14)
    net = Backbone("sage", a.dim, 16, c, 0.5)
    sage_err = check_sage_forward(net, h, agg_h, csr) if n <= 20_000 else None
    P = rr_transition(c, a.eps_y)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)

    def drop_loss(logits):  # Algorithm 3's Drop loss (eq. 13-14), as lpgnn.fit
        p_t = F.softmax(ops.propagate(csr, F.softmax(logits, 1) @ P, K, "gcn", csr_t=csr), 1)
        return F.nll_loss(torch.log(p_t[train] + 1e-12), y_tilde[train])

    def train_epochs():
        return train_and_test(net, opt, a.epochs, lambda: sage_forward(net, h, agg_h, csr), drop_loss,
                              y, test)

    acc = run.stage("lpgnn", f"train ({a.epochs} epochs)", train_epochs)
    run.annotate(epochs=a.epochs, test_acc=acc, sage_check_max_abs_err=sage_err)


def run_rgnn(run: Run, csr, y, a):
    from ldpfast.mechanisms import grr_fs, rr_labels
    from ldpfast.methods import random_split
    from ldpfast.methods._common import Backbone
    from ldpfast.methods.rgnn import (
        bag_proportions,
        llp_loss,
        reconstruct_features,
        reconstruct_labels,
    )

    n, c, K, g = csr.num_nodes, int(y.max()) + 1, a.k, 4
    st = {"x": class_features(y, a.dim, g)}  # popped by the stage that consumes it
    train, val, test = random_split(n, 21)
    lab = train | val

    def randomise():
        xr, _ = grr_fs(st.pop("x"), g, a.eps_x, a.m, seed=22)
        yr, _ = rr_labels(y, c, a.eps_y, seed=23, mask=lab)
        return xr.to(torch.int8), yr  # n x d bytes from here on

    st["xr"], y_rep = run.stage("rgnn", "randomise (GRR-FS, RR labels)", randomise)
    run.annotate(d=a.dim, gamma=g, m=a.m, eps_x=a.eps_x, eps_y=a.eps_y)
    gc.collect()

    bags = None if a.skip_metis else metis_stages(run, "rgnn", csr, a)

    def reconstruct():
        idx = reconstruct_features(st.pop("xr"), csr, g, a.eps_x, a.m, K, output="index",
                                   method="counts")
        yt = reconstruct_labels(y_rep, lab, csr, c, a.eps_y, K)
        h = onehot_rows(idx, g)  # Algorithm 1, line 19
        del idx
        return h, mean_agg(csr, h), yt

    h, agg_h, y_tilde = run.stage("rgnn", f"reconstruct (counts, K={K}; labels)", reconstruct)
    run.annotate(K=K, acc_y_tilde_train=float((y_tilde[train] == y[train]).float().mean()))
    gc.collect()

    torch.manual_seed(24)
    net = Backbone("sage", h.shape[1], 16, c, 0.5, act="relu")
    sage_err = check_sage_forward(net, h, agg_h, csr) if n <= 20_000 else None
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    b_tilde = None
    if bags is not None:
        _, b_tilde, _ = bag_proportions(y_rep, bags, train, c, a.eps_y, a.C)
        b_tilde = b_tilde.to(torch.float32)

    def ce_llp_loss(logits):  # Algorithm 3 lines 9-15, as rgnn.fit
        loss = F.cross_entropy(logits[train], y_tilde[train])
        if b_tilde is not None:
            loss = loss + llp_loss(F.softmax(logits, 1), bags, b_tilde, train)
        return loss

    def train_epochs():
        return train_and_test(net, opt, a.epochs, lambda: sage_forward(net, h, agg_h, csr), ce_llp_loss,
                              y, test)

    acc = run.stage("rgnn", f"train ({a.epochs} epochs{', LLP' if bags is not None else ''})",
                    train_epochs)
    run.annotate(epochs=a.epochs, test_acc=acc, sage_check_max_abs_err=sage_err)


def run_heterpoisson(run: Run, csr, y, a):
    from torch_geometric.data import Data

    from ldpfast.methods import heterpoisson as hp

    n = csr.num_nodes
    x = class_features(y, a.dim, 4).to(torch.float32) / 3.0
    data = Data(x=x, y=y, num_nodes=n)
    # CSR only (no 234M-entry edge_index), stored as datasets.synthetic stores it
    data["csr"] = csr
    data.__dict__["csr"] = csr
    rep = run.stage("heterpoisson", f"fit: {a.hp_epochs:g} epoch DP-SGD (GCN) + test inference",
                    lambda: hp.fit(data, a.hp_eps, model="gcn", epochs=a.hp_epochs, seed=31))
    s = rep.settings
    run.annotate(eps=a.hp_eps, T=rep.T, q_b=rep.q_b, sigma=rep.sigma,
                 mean_subgraphs=s["mean_subgraphs"], sampling_s=s["seconds_sampling"],
                 dpsgd_steps_s=s["seconds_training"],
                 setup_and_inference_s=s["seconds_total"] - s["seconds_sampling"]
                 - s["seconds_training"], test_acc=rep.accuracy)
    _, test = hp.split_nodes(n, 31)
    net = hp.build_model("gcn", a.dim, int(y.max()) + 1)
    acc = run.stage("heterpoisson", "inference (N_test = 13, test nodes)",
                    lambda: hp._evaluate(net, data, test, 13, test, 32, "gcn"))
    run.annotate(test_nodes=int(test.sum()), untrained_acc=acc)


def run_dprr(run: Run, csr, y, a):
    from ldpfast.reproduce import dprr

    res = run.stage("dprr", "degree_preservation (DPRR, RR, LocalLap)",
                    lambda: dprr.degree_preservation(csr, a.dprr_eps, seed=41))
    run.annotate(eps=a.dprr_eps, rr_sampled=res["rr_sampled"],
                 **{f"mae_{m}": v for m, v in res["mae"].items()},
                 **{f"logdeg_corr_{m}": v for m, v in res["corr"].items()},
                 mean_degree=res["mean"]["true"], mean_dprr=res["mean"]["dprr"])


def metis_stages(run: Run, pipeline: str, csr, a) -> torch.Tensor:
    """``metis_bags`` coarsened to ``--coarsen-to`` clusters (and plain pymetis with
    ``--plain-metis``) as stages, with the edge cut and bag balance; returns the coarsened
    bags."""
    from ldpfast.methods.rgnn import metis_bags
    from ldpfast.partition import edge_cut

    ct = a.coarsen_to or min(csr.num_nodes, max(32 * a.C, 4096))
    out = None
    routes = [(f"coarsened to {ct}", ct)] + ([("plain pymetis", 0)] if a.plain_metis else [])
    for label, k in routes:
        tm: dict = {}
        bags = run.stage(pipeline, f"metis_bags ({label}, C={a.C})",
                         lambda k=k, tm=tm: metis_bags(csr, a.C, 0, timings=tm,
                                                       check_symmetric=False, coarsen_to=k))
        sizes = torch.bincount(bags, minlength=a.C).double()
        run.annotate(C=a.C, coarsen_to=k, edge_cut=edge_cut(csr, bags),
                     bag_max_over_mean=float(sizes.max() / sizes.mean()),
                     bag_min_over_mean=float(sizes.min() / sizes.mean()),
                     **{key: v for key, v in tm.items() if key != "levels"},
                     levels=" ".join(f"{lv['nodes']}/{lv['nnz']}" for lv in tm.get("levels", [])))
        if out is None:
            out = bags
        del bags
        gc.collect()
    return out


def metis_scaling(a, command):
    """``--metis-nodes``: coarsened (and with ``--plain-metis`` plain) ``metis_bags`` on
    synthetic graphs of the Orkut mean degree: time, CPU time, peak RSS, edge cut."""
    from ldpfast.datasets import synthetic

    rows = []
    for n in a.metis_nodes:
        csr = synthetic(n, avg_degree=MEAN_DEG, num_classes=2, seed=0, edge_index=False).csr
        gc.collect()
        run = Run(a, command, csr, f"synthetic({n}, avg_degree={MEAN_DEG:.1f}, seed=0)",
                  current_rss_mib(), name="bench_orkut_metis")
        run.rows = rows
        metis_stages(run, "metis-scaling", csr, a)
        del csr, run
        gc.collect()
    write_report("bench_orkut_metis", rows, a.out, command=command)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=["orkut", "small", "tiny"], default="orkut")
    ap.add_argument("--nodes", type=int, default=None, help="nodes of small/tiny")
    ap.add_argument("--pipelines", nargs="+", choices=PIPELINES, default=list(PIPELINES))
    ap.add_argument("--epochs", type=int, default=3, help="training epochs of lpgnn and rgnn")
    ap.add_argument("--dim", type=int, default=64, help="features d")
    ap.add_argument("--k", type=int, default=4, help="KProp / reconstruction hops")
    ap.add_argument("--m", type=int, default=10, help="GRR-FS sampled features")
    ap.add_argument("--eps-x", type=float, default=1.0)
    ap.add_argument("--eps-y", type=float, default=1.0)
    ap.add_argument("--hp-eps", type=float, default=4.0, help="HeterPoisson target eps")
    ap.add_argument("--hp-epochs", type=float, default=1.0,
                    help="HeterPoisson epochs (T = ceil(epochs / q_b) DP-SGD steps)")
    ap.add_argument("--dprr-eps", type=float, default=1.0)
    ap.add_argument("--C", type=int, default=128, help="METIS bags")
    ap.add_argument("--coarsen-to", type=int, default=None,
                    help="clusters before METIS (default max(32 C, 4096))")
    ap.add_argument("--skip-metis", action="store_true")
    ap.add_argument("--plain-metis", action="store_true",
                    help="also plain pymetis on the whole graph (hours on Orkut-like)")
    ap.add_argument("--metis-only", action="store_true",
                    help="only the METIS stage(s) on the preset graph (report "
                         "bench_orkut_<preset>_metis)")
    ap.add_argument("--metis-nodes", type=int, nargs="+", default=None,
                    help="only METIS scaling: synthetic graphs of these node counts at the "
                         "Orkut mean degree (no pipelines)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--out", default="results")
    a = ap.parse_args(argv)
    if a.threads:
        ldpfast.set_num_threads(a.threads)
        torch.set_num_threads(a.threads)
    command = "python benchmarks/bench_orkut.py " + " ".join(
        argv if argv is not None else sys.argv[1:])
    if a.metis_nodes:
        return metis_scaling(a, command)
    gc.collect()
    base = current_rss_mib()
    csr, y, gname, t_graph = load_graph(a.preset, a.nodes)
    run = Run(a, command, csr, gname, base,
              name=f"bench_orkut_{a.preset}_metis" if a.metis_only else None)
    run.rows.append({"pipeline": "-", "stage": "build graph", "graph": gname, "n": csr.num_nodes,
                     "nnz": csr.nnz, "wall_s": t_graph, "orkut_est_s": t_graph * run.scale})
    print(f"[bench_orkut] Orkut-like scale factor {run.scale:.1f} (CSR entries)", flush=True)
    if a.metis_only:
        metis_stages(run, "rgnn", csr, a)
        write_report(run.name, run.rows, a.out, command=command)
        return run.rows
    for p in a.pipelines:
        t0 = time.perf_counter()
        {"lpgnn": run_lpgnn, "rgnn": run_rgnn, "heterpoisson": run_heterpoisson,
         "dprr": run_dprr}[p](run, csr, y, a)
        gc.collect()
        print(f"[bench_orkut] {p} done in {time.perf_counter() - t0:.1f} s", flush=True)
    summary = run.summary()
    run.rows.extend(summary)
    total = sum(r["orkut_est_s"] for r in summary) + t_graph * run.scale
    run.rows.append({"pipeline": "all", "stage": "TOTAL (est. Orkut-like, incl. graph)",
                     "orkut_est_s": total})
    run.write()
    write_report(run.name, run.rows, a.out, command=command)
    print(f"[bench_orkut] estimated Orkut-like total: {total / 60:.1f} min", flush=True)
    return run.rows


if __name__ == "__main__":
    main()
