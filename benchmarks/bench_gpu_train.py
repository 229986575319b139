"""One training epoch per private method on one NVIDIA GPU, beside a plain PyG GCN epoch.

    python benchmarks/bench_gpu_train.py [--quick] [--graphs products orkut]
                                         [--methods gcn lpgnn heterpoisson] [--repeat 3]
                                         [--long-epoch-s 15] [--gen-device cpu] [--out results]

Issue 32, part 5.  Needs a CUDA GPU visible to torch and the ldpfast cuda backend; without
one it exits with status 1 and the reason.  NOT YET RUN ON A GPU: no figure exists.

Graphs (both generated with seed 0 by ``--gen-device`` (default: the CPU, the path every
other benchmark uses; ``cuda`` builds them on the GPU), then moved to the GPU; CSR only):

* ``products``: ``ldpfast.datasets.synthetic`` at the size of ogbn-products: 2,449,029 nodes,
  exactly 61,859,140 undirected edges (mean degree 50.5), 47 planted classes, d = 100
  continuous features in [0, 1];
* ``orkut``: ``ldpfast.datasets.orkut_like(seed=0)`` (3,072,441 nodes, 117,185,083 edges,
  its 2 planted classes) with d = 100 continuous features.

Methods (each row: the graph, features and labels resident on the GPU; its model, optimiser
and caches built before the timing and freed after it):

* ``gcn``: the baseline.  A plain PyG 2-layer ``GCNConv`` (d -> ``--hidden`` -> classes, ReLU,
  dropout 0.5), full batch, cross entropy on the training nodes, Adam: one epoch = forward,
  backward, step.  The graph is PyG's sparse ``adj_t`` (a torch CSR tensor, normalised once
  per graph by PyG's ``gcn_norm`` with self loops, then ``GCNConv(normalize=False)``: the
  work ``GCNConv(cached=True)`` does on its first call only).  ``edge_index`` message
  passing is not used: its message tensor alone is E x hidden floats (64 GB at products
  size, hidden 128).
* ``lpgnn``: LPGNN (Sajadmanesh & Gatica-Perez, CCS 2021) composed as
  ``ldpfast.methods.lpgnn`` does, with the same GCN as the baseline as its backbone,
  eps_x = eps_y = 1 and the authors' K_x, K_y, lr, weight decay for that budget
  (``paper_settings``; Cora's table, as for any dataset it lacks).  The timed epoch is the
  FIRST epoch, everything LPGNN adds included: ``multibit_encode`` + ``multibit_rectify`` of
  all features, ``rr_labels`` of the labelled (train + val) nodes, KProp of the features
  (K_x steps, ``ops.propagate``, GCN aggregator), label denoising (eq. 12, K_y steps), then
  one training step with the Drop loss (eqs. 13-14: a further K_y-step KProp forward and
  backward).  ``train_step_s`` is the later epochs' cost (the randomised, propagated inputs
  reused), timed the same way.
* ``heterpoisson``: node-level DP-SGD through the one-call API,
  ``NodeDPEngine().make_private`` (HeterPoisson sub-graphs, induced, ``M = 1``, per-sub-graph
  clipping at 0.5, noise multiplier 1.0 (the time does not depend on it), Adam) with the
  paper's 1-layer GCN (hidden 128; ``methods.heterpoisson.build_model``), 80% training
  nodes, ``expected_batch_size = 4096`` (quick: 256).  **One epoch = T = ceil(1 / q_b)
  steps**, ``q_b = expected_batch_size / #training nodes``: the number of steps whose
  expected central nodes add up to the training set once (the engine's ``epochs=1``).

Timing: everything between ``torch.cuda.synchronize()`` calls by CUDA events
(``benchmarks/bench_gpu.py``'s ``cuda_time``).  Per row, a warm-up first (setup + one epoch
for ``gcn`` and ``lpgnn``, setup + 5 steps for ``heterpoisson``; its wall time is
``setup_warmup_s``), then ``--repeat`` epochs and their median, or ONE epoch when the
warm-up puts an epoch above ``--long-epoch-s`` (the row's ``repeat`` says which).
``peak_mem_GiB`` = ``torch.cuda.max_memory_allocated()`` over the timed epochs, after
``reset_peak_memory_stats()``; it includes what is resident (``resident_GiB``: graph,
features, model, caches when the timing starts).  ``time_vs_gcn`` = the row's median / the
``gcn`` row's median on the same graph (``train_step_vs_gcn`` likewise for LPGNN's later
epochs).

A row that raises (e.g. out of memory on the Orkut-like graph) is recorded with its error and
the run goes on; the exit status is then 2 (3 when stopped by SIGTERM, whose rows so far are
still written).  Without torch_geometric every row is recorded as skipped, with the reason.
The JSON (``--out``) records the GPU, torch/CUDA/CuPy versions, the command line and the date.
"""
from __future__ import annotations

import argparse
import json
import math
import signal
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import bench_gpu
from benchmarks.bench_gpu import Bench, free
from benchmarks.harness import environment, markdown_table

DEV = "cuda"  # "cpu" only for --cpu-dry-run (checks the flow; its figures mean nothing)
GRAPHS = ("products", "orkut")
METHODS = ("gcn", "lpgnn", "heterpoisson")  # gcn first: the others' ratios refer to it
PRODUCTS_NODES, PRODUCTS_EDGES, PRODUCTS_CLASSES = 2_449_029, 61_859_140, 47  # ogbn-products
NUM_FEATURES = 100
EPS_X = EPS_Y = 1.0
HP_WARM_STEPS = 5  # DP-SGD steps of the warm-up (kernels compiled, allocator warm)
SIGMA, CLIP, M_NEIGH = 1.0, 0.5, 1.0


def log(msg: str) -> None:
    print(f"[bench_gpu_train {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- what bench_gpu.py does not expose reusably (to share later, see BENCHMARKS.md) -----------
def _use_device(dev: str) -> str:
    """Point bench_gpu's module-level device (read by ``cuda_time`` and ``free``) at ``dev``;
    returns the previous value.  To share: ``cuda_time``/``free`` should take the device."""
    previous, bench_gpu.DEV = bench_gpu.DEV, dev
    return previous


def _require_gpu() -> None:
    """bench_gpu.require_gpu with this script's name in the message."""
    try:
        bench_gpu.require_gpu()
    except SystemExit as exc:
        raise SystemExit(str(exc.code).replace("[bench_gpu]", "[bench_gpu_train]")) from None


def _sync() -> None:
    if DEV != "cpu":
        torch.cuda.synchronize()


def _gib(nbytes: int) -> float:
    return round(nbytes / 2**30, 3)


# --- graphs ------------------------------------------------------------------------------------
class Graph:
    """One benchmark graph on the device: CSR, features, labels and facts for the JSON."""

    def __init__(self, name: str, quick: bool, gen_device: str):
        from ldpfast.datasets import orkut_like, synthetic
        from ldpfast.graph import CSR

        t0 = time.perf_counter()
        if name == "products":
            n, m = (3_000, 30_000) if quick else (PRODUCTS_NODES, PRODUCTS_EDGES)
            data = synthetic(n, num_edges=m, num_classes=PRODUCTS_CLASSES, num_features=NUM_FEATURES,
                             feature_kind="continuous", seed=0, edge_index=False, device=gen_device)
            how = f"synthetic({n}, num_edges={m}, num_classes={PRODUCTS_CLASSES}, seed=0)"
        elif name == "orkut":
            kw = {"num_nodes": 3_000, "num_edges": 30_000, "max_degree": None} if quick else {}
            data = orkut_like(seed=0, num_features=NUM_FEATURES, feature_kind="continuous", device=gen_device, **kw)
            how = f"orkut_like(seed=0{''.join(f', {k}={v}' for k, v in kw.items())})"
        else:
            raise ValueError(f"graph: expected one of {GRAPHS}, got {name!r}")
        gen_s = time.perf_counter() - t0
        c = data.csr
        self.name = name
        self.csr = CSR(c.rowptr.to(DEV), c.col.to(DEV), c.num_nodes)
        self.x = data.x.to(DEV)
        self.y = data.y.to(DEV)
        del data, c
        self.n = self.csr.num_nodes
        self.num_classes = int(self.y.max()) + 1
        self.adj_norm = None  # PyG's normalised adj_t, built on first use (gcn, lpgnn)
        self.facts = {"nodes": self.n, "undirected_edges": self.csr.nnz // 2, "features": int(self.x.shape[1]),
                      "classes": self.num_classes, "generated_on": gen_device, "generate_s": round(gen_s, 2),
                      "generator": f"{how}, {NUM_FEATURES} continuous features"}

    def gcn_adj(self):
        """``gcn_norm`` (self loops, symmetric scaling) of the graph as a torch CSR ``adj_t``,
        once per graph (what ``GCNConv(cached=True)`` computes on its first call)."""
        if self.adj_norm is None:
            from torch_geometric.nn.conv.gcn_conv import gcn_norm

            from ldpfast.methods._common import quiet_sparse_csr

            csr = self.csr
            with quiet_sparse_csr():
                a = torch.sparse_csr_tensor(csr.rowptr, csr.col.long(), torch.ones(csr.nnz, device=DEV),
                                            (self.n, self.n))
                self.adj_norm, _ = gcn_norm(a, None, self.n, add_self_loops=True)
        return self.adj_norm


def _gcn(d_in: int, hidden: int, classes: int) -> torch.nn.Module:
    """The plain PyG 2-layer GCN (shared by the ``gcn`` and ``lpgnn`` rows)."""
    from torch_geometric.nn import GCNConv

    class GCN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = GCNConv(d_in, hidden, normalize=False)
            self.conv2 = GCNConv(hidden, classes, normalize=False)

        def forward(self, x, adj_t):
            h = torch.nn.functional.dropout(torch.relu(self.conv1(x, adj_t)), 0.5, self.training)
            return self.conv2(h, adj_t)

    torch.manual_seed(0)
    return GCN().to(DEV)


def _splits(G: Graph, train: float, val: float):
    from ldpfast.methods._common import random_split

    return [m.to(DEV) for m in random_split(G.n, 0, train, val)]


# --- methods: each returns {"epoch": fn, "warm": fn, "warm_epochs": float, extra fields} ---------
def prepare_gcn(G: Graph, a) -> dict:
    import torch.nn.functional as F

    adj = G.gcn_adj()
    train_mask = _splits(G, 0.5, 0.25)[0]
    net = _gcn(G.x.shape[1], a.hidden, G.num_classes)
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    net.train()

    def epoch():
        opt.zero_grad()
        F.cross_entropy(net(G.x, adj)[train_mask], G.y[train_mask]).backward()
        opt.step()
    return {"epoch": epoch, "warm": epoch, "warm_epochs": 1.0,
            "extra": {"model": f"PyG GCNConv x2, hidden {a.hidden}, adj_t (torch CSR), full batch"}}


def prepare_lpgnn(G: Graph, a) -> dict:
    from ldpfast import ops
    from ldpfast.mechanisms import multibit_encode, multibit_rectify, rr_labels
    from ldpfast.methods.lpgnn import paper_settings
    from ldpfast.nn.lpgnn import corrected_loss, denoise_labels, rr_transition

    hp = paper_settings(G.name, EPS_X, EPS_Y)
    adj = G.gcn_adj()
    train_mask, val_mask, _ = _splits(G, 0.5, 0.25)
    labelled = train_mask | val_mask
    c, csr = G.num_classes, G.csr
    P = rr_transition(c, EPS_Y).to(DEV)
    net = _gcn(G.x.shape[1], a.hidden, c)
    opt = torch.optim.Adam(net.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    net.train()
    state: dict = {}
    seeds = iter(range(1, 10**9))  # fresh randomness per epoch, as a new run would draw

    def kprop(v, k):  # the GCN-aggregator KProp of ldpfast.methods.lpgnn (symmetric graph: A^T = A)
        return ops.propagate(csr, v, k, "gcn", False, None, csr_t=csr)

    def kprop_y(v, _adj):
        return kprop(v, hp["k_y"])

    def train_step():
        opt.zero_grad()
        out = net(state["h"], adj)
        corrected_loss(out, state["y_tilde"], train_mask, P, kprop_y, csr).backward()  # Drop, eqs. 13-14
        opt.step()

    def first_epoch():
        state.clear()
        x_star, spent = multibit_encode(G.x, EPS_X, None, 0.0, 1.0, seed=next(seeds))
        x_rect = multibit_rectify(x_star, EPS_X, spent.params["m"], 0.0, 1.0)
        del x_star
        state["h"] = kprop(x_rect, hp["k_x"])
        del x_rect
        y_noisy, _ = rr_labels(G.y, c, EPS_Y, seed=next(seeds), mask=labelled)
        state["y_tilde"] = denoise_labels(y_noisy, labelled, csr, kprop_y, c)
        train_step()
    return {"epoch": first_epoch, "warm": first_epoch, "warm_epochs": 1.0, "train_step": train_step,
            "extra": {"model": f"multibit + RR labels + KProp + the gcn row's GCN, eps_x={EPS_X:g} eps_y={EPS_Y:g}",
                      "k_x": hp["k_x"], "k_y": hp["k_y"]}}


def prepare_heterpoisson(G: Graph, a) -> dict:
    from ldpfast.methods.heterpoisson import build_model, split_nodes
    from ldpfast.privacy.dpsgd import subgraph_loss
    from ldpfast.privacy.engine import NodeDPEngine

    train_mask = split_nodes(G.n, 0, 0.8)[0].to(DEV)
    ebs = 256 if a.quick else 4096
    n_train = int(train_mask.sum())
    q_b = min(1.0, ebs / n_train)  # as NodeDPEngine computes it from expected_batch_size
    T = max(1, math.ceil(1.0 / q_b - 1e-9))  # the engine's T for epochs=1
    data = bench_gpu._csr_data(G.csr, x=G.x, y=G.y)
    torch.manual_seed(0)
    net = build_model("gcn", int(G.x.shape[1]), G.num_classes, hidden=128).to(DEV)
    model, opt, sampler = NodeDPEngine().make_private(
        net, torch.optim.Adam(net.parameters(), lr=0.03), data, sigma=SIGMA, max_grad_norm=CLIP,
        expected_batch_size=ebs, steps=HP_WARM_STEPS + T * a.repeat, M=M_NEIGH, train_mask=train_mask, seed=1)
    if abs(sampler.q_b - q_b) > 1e-12 * q_b:
        raise RuntimeError(f"heterpoisson: the engine's q_b {sampler.q_b} is not {q_b}: the epoch definition "
                           "(T = ceil(1 / q_b)) no longer matches NodeDPEngine")
    model.train()

    def steps(k: int):
        for _ in range(k):
            b = sampler.sample(opt.steps)
            opt.zero_grad()
            subgraph_loss(model(b), b).backward()
            opt.step()
    return {"epoch": lambda: steps(T), "warm": lambda: steps(HP_WARM_STEPS), "warm_epochs": HP_WARM_STEPS / T,
            "extra": {"model": "NodeDPEngine.make_private, 1-layer GCN hidden 128, induced sub-graphs",
                      "steps_per_epoch": T, "q_b": q_b, "expected_batch_size": ebs, "train_nodes": n_train,
                      "M": M_NEIGH, "sigma": SIGMA, "max_grad_norm": CLIP}}


PREPARE = {"gcn": prepare_gcn, "lpgnn": prepare_lpgnn, "heterpoisson": prepare_heterpoisson}


# --- one row ----------------------------------------------------------------------------------
def _memory() -> dict:
    if DEV == "cpu":
        return {"peak_mem_GiB": None}
    return {"peak_mem_GiB": _gib(torch.cuda.max_memory_allocated())}


def measure_row(B: Bench, G: Graph, method: str, a) -> None:
    """Warm-up (setup + part of an epoch), then the timed epochs of ``method`` on ``G``: one
    row in ``B.rows``, its error or skip included (through ``Bench.run``)."""
    first = len(B.rows)
    box: dict = {}

    def warm():
        box.update(PREPARE[method](G, a))
        _sync()
        t0 = time.perf_counter()
        box["warm"]()
        _sync()
        box["epoch_estimate_s"] = (time.perf_counter() - t0) / box["warm_epochs"]
    r0 = B.run(G.name, f"{method} setup + warm-up", method, warm, None, repeat=1, warmup=0)
    if r0 is not None:
        B.rows.remove(r0)
        repeat = 1 if box["epoch_estimate_s"] > a.long_epoch_s else a.repeat
        mem: dict = {"resident_GiB": None}
        if DEV != "cpu":
            torch.cuda.synchronize()
            mem["resident_GiB"] = _gib(torch.cuda.memory_allocated())
            torch.cuda.reset_peak_memory_stats()
        r = B.run(G.name, f"{method} epoch", method, box["epoch"], None, repeat=repeat, warmup=0,
                  setup_warmup_s=r0["median_s"], **mem, **box["extra"])
        if r is not None:
            r.update(_memory())
            if "train_step" in box:  # LPGNN's later epochs (randomised, propagated inputs reused)
                s = B.run(G.name, f"{method} later epoch (inputs reused)", method, box["train_step"], None,
                          repeat=repeat, warmup=1)
                extra = B.rows.pop()  # folded into the row: its time, or its error (still counted)
                if s is not None:
                    r["train_step_s"] = s["median_s"]
                else:
                    r["train_step_error"] = extra.get("error") or extra.get("skipped")
    for row in B.rows[first:]:
        row["graph"], row["method"] = G.name, method
    box.clear()
    free()


def measure(a, B: Bench, graphs: dict) -> None:
    try:
        import torch_geometric  # noqa: F401 - the graphs (PyG Data) and every model need it
    except ImportError as exc:
        why = f"torch_geometric is not installed ({exc}): the graphs and every model need it"
        log(why + "; every row skipped")
        for g in a.graphs:
            for m in a.methods:
                B.rows.append({"family": g, "case": f"{m} epoch", "impl": m, "graph": g, "method": m,
                               "skipped": why})
        return
    for gname in a.graphs:
        log(f"graph {gname}: generating on {a.gen_device} ({'quick size' if a.quick else 'full size'}) ...")
        box: dict = {}

        def build(gname=gname, box=box):
            box["G"] = Graph(gname, a.quick, a.gen_device)
        if B.run(gname, "generate + move to the device", "ldpfast", build, None, repeat=1, warmup=0) is None:
            failed = B.rows.pop()  # one row per (graph, method): the graph's failure in each
            for m in a.methods:
                B.rows.append({**failed, "case": f"{m} epoch", "impl": m, "graph": gname, "method": m})
            if "error" in failed:  # Bench.run counted the popped row once
                B.errors += len(a.methods) - 1
            graphs[gname] = {"error": failed.get("error") or failed.get("skipped")}
            continue
        B.rows.pop()
        G = box.pop("G")
        graphs[gname] = G.facts
        log(f"graph {gname}: {G.n} nodes, {G.csr.nnz // 2} undirected edges, d={G.x.shape[1]}, "
            f"{G.num_classes} classes (generated in {G.facts['generate_s']} s)")
        for m in [m for m in METHODS if m in a.methods]:  # gcn first, each method once
            measure_row(B, G, m, a)
        base = next((r for r in B.rows if r.get("graph") == gname and r["method"] == "gcn" and "median_s" in r), None)
        for r in B.rows:
            if base is not None and r.get("graph") == gname and "median_s" in r:
                r["time_vs_gcn"] = r["median_s"] / base["median_s"]
                if "train_step_s" in r:
                    r["train_step_vs_gcn"] = r["train_step_s"] / base["median_s"]
        del G
        free()


# --- main -------------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="tiny graphs (seconds): a smoke test, figures meaningless")
    ap.add_argument("--graphs", nargs="+", choices=GRAPHS, default=list(GRAPHS))
    ap.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    ap.add_argument("--repeat", type=int, default=3, help="timed epochs per row (median reported)")
    ap.add_argument("--long-epoch-s", type=float, default=15.0,
                    help="time ONE epoch when the warm-up estimates an epoch longer than this")
    ap.add_argument("--hidden", type=int, default=128, help="hidden units of the full-batch GCN (gcn, lpgnn)")
    ap.add_argument("--gen-device", choices=("cpu", "cuda"), default="cpu",
                    help="where the graphs are generated (then moved to the GPU)")
    ap.add_argument("--out", default="results", help="folder for bench_gpu_train_<date>.json / .md")
    ap.add_argument("--cpu-dry-run", action="store_true", help=argparse.SUPPRESS)  # flow check only
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat: expected >= 1")
    if a.hidden < 1:
        ap.error("--hidden: expected >= 1")
    a.graphs, a.methods = list(dict.fromkeys(a.graphs)), list(dict.fromkeys(a.methods))  # each once
    global DEV
    if a.cpu_dry_run:
        DEV, a.quick, a.gen_device, a.repeat = "cpu", True, "cpu", 1
        log("DRY RUN ON THE CPU at --quick sizes, one timed epoch per row: checks the script's flow only; "
            "the figures mean nothing")
        facts = {"name": "cpu-dry-run", "capability": "-", "memory_GiB": 0}
    else:
        DEV = "cuda"
        _require_gpu()
        facts = bench_gpu.gpu_facts()
    previous_dev = _use_device(DEV)
    t_start = time.perf_counter()
    log(f"GPU: {facts['name']} ({facts['capability']}, {facts['memory_GiB']} GiB), torch {torch.__version__}, "
        f"CUDA {torch.version.cuda}; graphs {a.graphs}, methods {a.methods}, repeat {a.repeat}")
    B = Bench(a.repeat)
    graphs: dict = {}
    interrupted = None
    previous = signal.signal(signal.SIGTERM, bench_gpu._on_sigterm)  # `timeout` in tools/gpu_session.sh
    try:
        measure(a, B, graphs)
    except (bench_gpu._Terminated, KeyboardInterrupt) as exc:
        interrupted = f"stopped by {type(exc).__name__} after {len(B.rows)} rows"
        log(interrupted + "; writing what was measured")
    finally:
        signal.signal(signal.SIGTERM, previous)
        _use_device(previous_dev)
    return write_report(a, argv, B, facts, graphs, t_start, interrupted)


COLUMNS = ("graph", "method", "median_s", "repeat", "time_vs_gcn", "train_step_s", "train_step_vs_gcn",
           "peak_mem_GiB", "resident_GiB", "setup_warmup_s", "steps_per_epoch", "skipped", "error")


def write_report(a, argv, B: Bench, facts: dict, graphs: dict, t_start: float, interrupted: str | None) -> int:
    """``<out>/bench_gpu_train_[quick_]<date>_<gpu>.json`` and ``.md``; the exit status."""
    env = environment()
    env.update(gpu=facts, torch=torch.__version__, torch_cuda=torch.version.cuda, wall_s=time.perf_counter() - t_start,
               interrupted=interrupted, device=DEV)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = facts["name"].replace(" ", "_").replace("/", "_")
    name = f"bench_gpu_train_{'quick_' if a.quick else ''}{time.strftime('%Y%m%d_%H%M%S')}_{tag}"
    command = " ".join(["python", "benchmarks/bench_gpu_train.py", *(argv if argv is not None else sys.argv[1:])])
    settings = {"repeat": a.repeat, "long_epoch_s": a.long_epoch_s, "hidden": a.hidden, "gen_device": a.gen_device,
                "quick": a.quick, "eps_x": EPS_X, "eps_y": EPS_Y,
                "timing": ("perf_counter (CPU dry run: figures meaningless)" if DEV == "cpu" else
                           "CUDA events between synchronize() calls")
                + "; median of `repeat` epochs after the warm-up (one epoch when it estimates one > long_epoch_s)"}
    payload = {"name": name, "command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
               "environment": env, "settings": settings, "graphs": graphs, "rows_in_error": B.errors,
               "rows": B.rows}
    (out / f"{name}.json").write_text(json.dumps(payload, indent=2, default=str))
    table = markdown_table([{c: r[c] for c in COLUMNS if c in r} for r in B.rows])
    gl = "\n".join(f"- {g}: {f}" for g, f in graphs.items()) or "- (none)"
    (out / f"{name}.md").write_text(
        f"# {name}\n\nCommand: `{command}`\n\nDate: {payload['date']}; GPU: {facts['name']}; torch "
        f"{torch.__version__}, CUDA {torch.version.cuda}\n\nGraphs:\n{gl}\n\nSeconds per epoch (median of `repeat` "
        f"epochs after a warm-up); peak memory over the timed epochs; time_vs_gcn = median / the plain PyG "
        f"GCN epoch on the same graph.\n\n{table}\n")
    print(table, flush=True)
    status = 3 if interrupted else 2 if B.errors else 0  # bench_gpu.py's convention
    log(f"done in {env['wall_s']:.0f} s; wrote {out / name}.json and .md; {B.errors} row(s) in error "
        f"(see 'error' in the JSON); exit status {status}")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
