"""The recipes table: :func:`ldpfast.methods.pipeline.private_pipeline` (features, labels and
edges all private) on Cora, CiteSeer, Facebook and Twitch-DE at several budgets, beside the
non-private model, the public-graph model, the DPRR variant and the naive ``T.Compose`` of the
three randomisers with a plain GCN.  ``ldpfast reproduce pipeline`` runs :func:`reproduce_main`;
``docs/recipes.md`` holds the measured table and the commands that made it.
"""
from __future__ import annotations

import argparse
import copy
import math
import os
import platform
import time
import warnings
from pathlib import Path

import torch
import torch.nn.functional as F

from .._checks import check_int, check_real
from .._cli_args import existing_dir, integer, number, output_dir
from .._cli_args import seed as seed_arg
from ..cli import ArgumentParser, plain_text
from ..methods._common import fmt_eps, labelled_split, mean_std, sub_seed
from ..rng import resolve_seed
from ._report import (
    SECRET_SEED_HELP,
    markdown_table,
    public_command,
    resume_rows,
    save_figure,
    save_json,
)

__all__ = ["DATASETS", "grid", "naive_compose", "reproduce_main"]

#: The datasets of the table (all four offline).
DATASETS = ("cora", "citeseer", "facebook", "twitch-de")
INF = math.inf


def grid(node_eps, edge_eps, feature_share: float = 0.25, *, baselines: bool = True) -> list[dict]:
    """Rows of the table for one dataset: for every node budget ``B`` (``eps_x = share B``,
    ``eps_y = (1 - share) B``) and edge budget, the recipe; with ``baselines``, the
    non-private model, the public graph at the largest ``B``, and at the largest ``B`` and
    edge budget the DPRR variant, the naive ``T.Compose`` + GCN, the recipe with
    ``eps_y = 0.5`` (where the label warning starts) and with the node budget split evenly."""
    rows = []
    top_b, top_e = max(node_eps), max(edge_eps)
    split = lambda b: (feature_share * b, (1 - feature_share) * b)
    if baselines:
        rows.append({"kind": "non-private", "eps_x": INF, "eps_y": INF, "eps_edges": INF})
        rows.append({"kind": "public graph", "eps_x": split(top_b)[0], "eps_y": split(top_b)[1], "eps_edges": INF})
    for b in sorted(node_eps, reverse=True):
        for e in sorted(edge_eps):
            rows.append({"kind": "recipe", "eps_x": split(b)[0], "eps_y": split(b)[1], "eps_edges": e})
    if baselines:
        ex, ey = split(top_b)
        rows.append({"kind": "recipe, DPRR edges (or)", "eps_x": ex, "eps_y": ey, "eps_edges": top_e})
        rows.append({"kind": "naive T.Compose + GCN", "eps_x": ex, "eps_y": ey, "eps_edges": top_e})
        rows.append({"kind": "recipe, small eps_y", "eps_x": ex, "eps_y": 0.5, "eps_edges": top_e})
        rows.append({"kind": "recipe, even split", "eps_x": top_b / 2, "eps_y": top_b / 2, "eps_edges": top_e})
    return rows


def naive_compose(data, eps_x: float, eps_y: float, eps_edges: float, seed: int, epochs: int = 200,
                  split=(0.5, 0.25)) -> float:
    """What the transforms' docs suggested before the recipe: ``T.Compose([MultiBit(eps_x),
    RRLabels(eps_y), DPRR(eps_edges)])`` then a plain 2-layer GCN (16 hidden, Adam 0.01,
    weight decay 5e-4) trained by cross entropy on the noisy labels, the epoch of best
    accuracy against the validation nodes' noisy labels.  Returns the clean test accuracy."""
    import torch_geometric.transforms as T
    from torch_geometric.nn import GCNConv

    from ..transforms import DPRR, MultiBit, NoisyGraphWarning, RRLabels

    d = copy.copy(data)
    d.__dict__.pop("_ldpfast_csr", None)
    tr, va, te = labelled_split(d.y, sub_seed(seed, 1), *split)
    d.train_mask, d.val_mask, d.test_mask = tr, va, te
    y_clean = d.y
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", NoisyGraphWarning)
        d = T.Compose([MultiBit(eps_x, seed=sub_seed(seed, 2)), RRLabels(eps_y, seed=sub_seed(seed, 3)),
                       DPRR(eps_edges, seed=sub_seed(seed, 4))])(d)
    c = int(y_clean.max()) + 1
    torch.manual_seed(sub_seed(seed, 5))
    conv1, conv2 = GCNConv(d.num_features, 16), GCNConv(16, c)
    params = list(conv1.parameters()) + list(conv2.parameters())
    opt = torch.optim.Adam(params, lr=0.01, weight_decay=5e-4)

    def forward(train: bool):
        h = F.dropout(F.relu(conv1(d.x, d.edge_index)), 0.5, training=train)
        return conv2(h, d.edge_index)

    best = (-1.0, 0.0)
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(forward(True)[tr], d.y[tr]).backward()
        opt.step()
        with torch.no_grad():
            pred = forward(False).argmax(1)
            val = float((pred[va] == d.y[va]).float().mean())
            if val > best[0]:
                best = (val, float((pred[te] == y_clean[te]).float().mean()))
    return best[1]


def _machine() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cpu_count": os.cpu_count(), "torch_threads": torch.get_num_threads(),
            "loadavg_1_5_15m": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
            "time": time.strftime("%Y-%m-%d %H:%M:%S"), "torch": torch.__version__}


def _key(r: dict) -> tuple:
    return (r["dataset"], r["kind"], fmt_eps(float(r["eps_x"])), fmt_eps(float(r["eps_y"])),
            fmt_eps(float(r["eps_edges"])))


def _run_row(row: dict, data, ds: str, seed: int, a) -> dict:
    """One run of one row: accuracy and what the run chose and warned."""
    from ..methods.pipeline import PipelineWarning, collapse_risks, private_pipeline

    t0 = time.perf_counter()
    if row["kind"].startswith("naive"):
        acc = naive_compose(data, row["eps_x"], row["eps_y"], row["eps_edges"], seed, epochs=a.epochs)
        return {"accuracy": acc, "seconds": time.perf_counter() - t0, "warned": None}
    dprr = "DPRR" in row["kind"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", PipelineWarning)
        rep = private_pipeline(data, row["eps_x"], row["eps_y"], row["eps_edges"], edges="dprr" if dprr else "rr",
                               symmetrize="or" if dprr else "and", epochs=a.epochs, patience=a.patience, lr=a.lr,
                               seed=seed, dataset=ds)
    warned = sorted(collapse_risks(data, row["eps_y"], row["eps_edges"], "dprr" if dprr else "rr",
                                   "or" if dprr else "and"))
    assert warned == sorted(_tag(str(w.message)) for w in caught if issubclass(w.category, PipelineWarning))
    return {"accuracy": rep.accuracy, "seconds": time.perf_counter() - t0, "warned": warned,
            "k": [rep.k_x, rep.k_y], "majority": rep.majority, "spent": rep.spent,
            "true_fraction": rep.graph["expected_true_fraction"], "server_edges": rep.graph["edges"]}


def _tag(message: str) -> str:
    """The short name of a PipelineWarning: "graph" or "labels"."""
    return "graph" if "server graph" in message else "labels" if "eps_y" in message else message[:40]


def _plot(path: Path, rows: list[dict]):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dsets = [d for d in DATASETS if any(r["dataset"] == d for r in rows)]
    if not dsets:
        return None
    fig, axes = plt.subplots(1, len(dsets), figsize=(4.6 * len(dsets), 3.8), squeeze=False)
    for ax, ds in zip(axes[0], dsets):
        rs = [r for r in rows if r["dataset"] == ds]
        for node in sorted({r["eps_node"] for r in rs if r["kind"] == "recipe"}):
            pts = sorted((float(r["eps_edges"]), r["mean"], r["std"]) for r in rs
                         if r["kind"] == "recipe" and r["eps_node"] == node)
            ax.errorbar([p[0] for p in pts], [p[1] for p in pts], yerr=[p[2] for p in pts], marker="o",
                        capsize=3, label=f"recipe, eps_x + eps_y = {node:g}")
        styles = {"non-private": ("k", "--"), "public graph": ("tab:green", ":"),
                  "naive T.Compose + GCN": ("tab:red", "-."), "recipe, DPRR edges (or)": ("tab:purple", "-.")}
        for kind, (col, ls) in styles.items():
            for r in rs:
                if r["kind"] == kind:
                    lab = kind if kind == "non-private" else f"{kind} ({fmt_eps(r['eps_x'] + r['eps_y'])}"
                    lab += "" if kind in ("non-private", "public graph") else f", {r['eps_edges']})"
                    lab += ")" if kind == "public graph" else ""
                    ax.axhline(r["mean"], color=col, ls=ls, alpha=0.8, label=lab)
        maj = [r["majority"] for r in rs if r.get("majority") is not None]
        if maj:
            ax.axhline(100 * sum(maj) / len(maj), color="grey", lw=0.8, alpha=0.6, label="majority class")
        ax.set_xlabel("eps_edges (edge LDP per user)")
        ax.set_ylabel("test accuracy (%)")
        ax.set_title(ds)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6)
    return save_figure(fig, path)


def reproduce_main(argv: list[str] | None = None) -> int:
    """``ldpfast reproduce pipeline``: the recipe for private features, labels and edges
    (:func:`ldpfast.methods.pipeline.private_pipeline`) beside the non-private model, the
    public graph, DPRR edges and the naive ``T.Compose`` + GCN.

    Writes ``pipeline.json`` (every run, the machine, the commands), ``pipeline.md`` and
    ``pipeline_accuracy_vs_eps_edges.png`` to ``--out`` (default ``results/pipeline``),
    after every row; ``--resume`` keeps the rows already there (add datasets one by one).
    Run ``r`` uses seed ``--seed + r``-derived secrets; the seed is written nowhere.
    """
    from tqdm.auto import tqdm

    from ..datasets import load

    p = ArgumentParser(prog="ldpfast reproduce pipeline", allow_abbrev=False,
                                description=plain_text(reproduce_main.__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    p.add_argument("--node-eps", nargs="+", type=number(0), default=[4.0, 2.0],
                   help="node budgets eps_x + eps_y (split by --feature-share)")
    p.add_argument("--edge-eps", nargs="+", type=number(0), default=[3.0, 4.0, 6.0, 8.0], help="edge budgets")
    p.add_argument("--feature-share", type=number(0, hi=1, high_open=True), default=0.25, help="eps_x / (eps_x + eps_y)")
    p.add_argument("--runs", type=integer(1), default=2)
    p.add_argument("--epochs", type=integer(1), default=150)
    p.add_argument("--patience", type=integer(1), default=50)
    p.add_argument("--lr", type=number(0), default=0.01, help="Adam learning rate of every run")
    p.add_argument("--no-baselines", action="store_true", help="recipe rows only")
    p.add_argument("--quick", action="store_true", help="CI-sized: Cora, eps_x + eps_y = 4, eps_edges 4 and 8, "
                                                      "1 run, 60 epochs, no baselines")
    p.add_argument("--resume", action="store_true", help="keep the rows of --out already measured")
    p.add_argument("--root", type=existing_dir, default=None, help="data root (default: ldpfast.datasets.default_root())")
    p.add_argument("--out", type=output_dir, default="results/pipeline")
    p.add_argument("--threads", type=integer(1), default=None, help="torch intra-op threads (default: torch's)")
    p.add_argument("--seed", type=seed_arg, default=None, help=SECRET_SEED_HELP)
    a = p.parse_args(argv)
    if a.quick:
        a.datasets, a.node_eps, a.edge_eps, a.runs, a.epochs, a.patience = ["cora"], [4.0], [4.0, 8.0], 1, 60, 30
        a.no_baselines = True
    check_int("runs", a.runs, 1)
    check_int("epochs", a.epochs, 1)
    check_real("feature_share", a.feature_share, 0.0, 1.0)
    if not 0 < a.feature_share < 1:
        p.error(f"--feature-share: expected a number in (0, 1), got {a.feature_share}")
    for e in [*a.node_eps, *a.edge_eps]:
        if not e > 0:
            p.error(f"--node-eps / --edge-eps: expected numbers > 0, got {e}")
    if a.threads is not None:
        torch.set_num_threads(check_int("threads", a.threads, 1))
    master = resolve_seed(a.seed)
    out = Path(a.out)
    command = public_command("ldpfast reproduce pipeline", argv)
    rows, commands = resume_rows(out / "pipeline.json", command) if a.resume else ([], [command])
    done = {_key(r) for r in rows}
    todo = [(ds, r) for ds in a.datasets
            for r in grid(a.node_eps, a.edge_eps, a.feature_share, baselines=not a.no_baselines)
            if _key(dict(r, dataset=ds)) not in done]
    machines = []
    bar = tqdm(total=len(todo) * a.runs, desc="pipeline")
    data, loaded = None, None
    for ds, row in todo:
        if loaded != ds:
            data, loaded = load(ds, root=a.root), ds
        runs = []
        for r in range(a.runs):
            runs.append(_run_row(row, data, ds, sub_seed(master, r), a))
            bar.update(1)
        s = mean_std([x["accuracy"] for x in runs])
        maj = [x["majority"] for x in runs if x.get("majority") is not None]
        warned = sorted({w for x in runs for w in (x["warned"] or [])})
        rows.append({"dataset": ds, **row, "eps_node": row["eps_x"] + row["eps_y"],
                     "mean": round(s["mean"], 1), "std": round(s["std"], 1), "runs": a.runs,
                     "values": [round(v, 1) for v in s["values"]],
                     "k": [x.get("k") for x in runs], "majority": round(sum(maj) / len(maj), 3) if maj else None,
                     "true_fraction": runs[0].get("true_fraction"), "warned": warned or None,
                     "spent": runs[0].get("spent"), "seconds": round(sum(x["seconds"] for x in runs), 1)})
        machines.append(_machine())
        _save(out, rows, commands, machines, a)
    bar.close()
    _save(out, rows, commands, machines, a, final=True)
    return 0


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return fmt_eps(v) if (math.isinf(v) or v == round(v, 2)) else f"{v:.3g}"
    return str(v)


def _save(out: Path, rows, commands, machines, a, final: bool = False) -> None:
    prev = {}
    path = out / "pipeline.json"
    if path.exists():
        import json

        prev = json.loads(path.read_text())
    compute = prev.get("compute", []) + machines if final else prev.get("compute", [])
    save_json(path, {"commands": commands, "rows": rows, "compute": compute,
                     "settings": {"epochs": a.epochs, "patience": a.patience, "lr": a.lr, "runs": a.runs,
                                  "feature_share": a.feature_share}})
    if not final:
        return
    table = [dict(r, accuracy=f"{r['mean']:.1f} ± {r['std']:.1f}",
                  majority=None if r["majority"] is None else f"{100 * r['majority']:.1f}",
                  true_fraction=None if r["true_fraction"] is None else f"{100 * r['true_fraction']:.0f}%",
                  k=" ".join("/".join(map(str, k)) for k in r["k"] if k) or None,
                  warned=", ".join(r["warned"]) if r["warned"] else None)
             for r in rows]
    cols = ["dataset", "kind", "eps_x", "eps_y", "eps_edges", "accuracy", "majority", "true_fraction", "k",
            "warned", "runs", "seconds"]
    md = markdown_table(table, cols, _fmt)
    (out / "pipeline.md").write_text("# Private features, labels and edges: measured\n\nCommands: `"
                                     + "` ; `".join(commands) + "`\n\n" + "\n".join(md) + "\n")
    print("\n".join(md))
    _plot(out / "pipeline_accuracy_vs_eps_edges.png", rows)
    print(f"saved {out}/pipeline.json, pipeline.md, pipeline_accuracy_vs_eps_edges.png")
