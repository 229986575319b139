"""Reproduction of DPRR's Figs. 4, 5 and 7 (Hidano & Murakami, arXiv 2022; the method is
:mod:`ldpfast.methods.dprr`): an offline synthetic stand-in for the REDDIT graph-classification
data, the accuracy-vs-eps and accuracy-vs-alpha runs, the degree analysis of Fig. 7 and their
report (JSON, markdown, plots).  ``ldpfast reproduce dprr`` runs :func:`reproduce_main`.
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch

from .._checks import check_eps, check_int
from .._cli_args import existing_dir, integer, number, output_dir, seed
from ..cli import ArgumentParser, plain_text
from ..graph import CSR, to_csr
from ..methods._common import sub_seed
from ..methods.dprr import MODELS, _csr, expected_rr_edges, fit
from ..rng import resolve_seed
from ._report import (
    SECRET_SEED_HELP,
    fmt_eps,
    markdown_row,
    markdown_table,
    plot_curves,
    public_command,
    save_figure,
    save_json,
)

__all__ = ["LABELS", "degree_preservation", "plot_degree_preservation", "reproduce_main",
           "synthetic_graph_classification"]

#: Display name of each method in the tables and plots.
LABELS = {"dprr": "DPRR", "rr": "RR", "locallap": "LocalLap", "nonpriv_full": "NonPriv-Full",
          "nonpriv_part": "NonPriv-Part"}

# class c of the synthetic dataset, c = 0 .. C-1 interpolates between these two (see
# synthetic_graph_classification): (avg_degree, degree_exponent, max_degree / n)
_QA = (2.0, 2.1, 0.35)          # question/answer thread: star-like, a few hubs answer many
_DISCUSSION = (3.2, 3.2, None)  # discussion thread: denser, more even degrees


# --- data ------------------------------------------------------------------------------------
def synthetic_graph_classification(num_graphs: int = 200, classes: int = 2,
                                   nodes: tuple[int, int] = (100, 400), seed: int = 0) -> list:
    """Offline, unattributed graph-classification dataset whose classes differ in structure.

    Stands in for REDDIT-BINARY / REDDIT-MULTI-5K / Github StarGazers (paper Table III:
    unattributed social graphs, average degree 2.3-4.1, heavy-tailed degrees) where the
    user supplies no TU data.  Each graph is a Chung-Lu power-law graph from
    :func:`ldpfast.datasets.synthetic` (one planted node class, so no community structure);
    its graph label decides the degree law:

    * class 0, "question/answer" thread: mean degree 2.0, power-law exponent 2.1 and hubs up
      to ``0.35 n`` (a few users answer many);
    * class ``C-1``, "discussion" thread: mean degree 3.2, exponent 3.2, hubs capped at the
      Chung-Lu default ``sqrt(n * avg_degree)`` (more people talk to more people);
    * classes in between (``classes > 2``) interpolate the three parameters linearly.

    This mirrors the paper's observation (section V-B, Fig. 7 right) that in REDDIT-BINARY the
    discussion-based community has larger degrees than the Q&A-based one: the classes differ
    *only* in their degree distribution, which DPRR preserves and RR / LocalLap destroy.  The
    number of nodes is uniform on ``nodes`` independently of the class, so size alone carries
    no signal.  Labels are balanced (graph ``k`` has class ``k mod C`` before a shuffle).

    Parameters
    ----------
    num_graphs : int
        Number of graphs (>= 2 * classes).
    classes : int
        Number of graph classes (>= 2).
    nodes : (int, int)
        Inclusive range of the number of nodes per graph (``20 <= lo <= hi``).
    seed : int
        Seed; the dataset depends only on it.

    Returns
    -------
    list of torch_geometric.data.Data
        ``edge_index`` (undirected, both directions), ``y`` (shape (1,), int64), ``num_nodes``,
        ``x = None`` (unattributed), and ``csr`` (the sorted CSR).
    """
    from torch_geometric.data import Data

    from ..datasets import synthetic

    classes = check_int("classes", classes, lo=2)
    num_graphs = check_int("num_graphs", num_graphs, lo=2 * classes)
    seed = resolve_seed(seed)
    if not (isinstance(nodes, (tuple, list)) and len(nodes) == 2):
        raise TypeError(f"nodes: expected a (lo, hi) pair of ints, got {nodes!r}")
    lo = check_int("nodes", nodes[0], lo=20)
    hi = check_int("nodes", nodes[1], lo=lo)
    rng = np.random.default_rng([seed, 0xD9])
    labels = rng.permutation(np.arange(num_graphs) % classes)
    sizes = rng.integers(lo, hi + 1, size=num_graphs)
    out = []
    for k in range(num_graphs):
        c, n = int(labels[k]), int(sizes[k])
        t = c / (classes - 1)
        avg = (1 - t) * _QA[0] + t * _DISCUSSION[0]
        gamma = (1 - t) * _QA[1] + t * _DISCUSSION[1]
        cap_qa = _QA[2] * (n - 1)
        cap_default = math.sqrt(n * avg)
        cap = (1 - t) * cap_qa + t * cap_default
        cap = min(max(cap, avg * 1.01), n - 1)
        g = synthetic(n, avg, num_classes=1, homophily=1.0, degree_exponent=gamma, max_degree=cap,
                      seed=sub_seed(seed, 1, k))
        d = Data(edge_index=g.edge_index, y=torch.tensor([c], dtype=torch.int64), num_nodes=n)
        d.csr = g.csr if isinstance(getattr(g, "csr", None), CSR) else to_csr(g.edge_index, n, symmetrize=True)
        out.append(d)
    return out


# --- degree preservation (Fig. 7) ------------------------------------------------------------
def degree_preservation(graph, eps: float = 1.0, seed: int | None = None, *, rr_max_edges: int = 50_000_000) -> dict:
    """Original vs noisy degree of every user for DPRR, RR and LocalLap (paper Fig. 7, left).

    The noisy degree is ``|a~_i|`` (DPRR, RR: the length of user ``i``'s noisy list) or the
    degree in LocalLap's undirected output.  RR's noisy lists are materialised when their
    expected size is at most ``rr_max_edges``; above it (e.g. Facebook, ~1.4e8 entries at
    eps = 1) the noisy degree is drawn from its exact law ``Bin(d_i, p) + Bin(n-1-d_i, 1-p)``
    (NumPy generator keyed by ``seed``), which is what the list length would follow.

    Parameters
    ----------
    graph : torch_geometric.data.Data or ldpfast.graph.CSR
        One undirected graph.
    eps : float
    seed : int, optional
        Secret seed (``None``: from the OS); never recorded.

    Returns
    -------
    dict
        ``"degree"`` (int64 array), ``"dprr"``, ``"rr"``, ``"locallap"`` (noisy degrees),
        ``"mae"`` (mean absolute error per method), ``"corr"`` (Pearson correlation of
        ``log(1 + d)`` and ``log(1 + d~)`` per method: how much of the degree *ranking* survives,
        the property Fig. 7 shows), ``"mean"`` (mean noisy degree per method
        and ``"true"``), ``"rr_sampled"`` (whether RR's degrees came from the exact law),
        ``"privacy"`` (spent eps per method), ``"n"``.
    """
    from ..mechanisms.edges import dprr, expected_rr_output, local_laplace, rr_edges

    eps = check_eps("eps", eps)
    seed = resolve_seed(seed)
    if isinstance(graph, CSR):
        csr = graph
    elif hasattr(graph, "edge_index"):
        csr = _csr(graph)
    else:
        raise TypeError(f"graph: expected a torch_geometric Data or ldpfast.graph.CSR, got {type(graph).__name__}")
    n = csr.num_nodes
    deg = csr.degrees().numpy().astype(np.int64)
    r_d = dprr(csr, eps, seed=sub_seed(seed, 10))
    r_l = local_laplace(csr, eps, seed=sub_seed(seed, 11))
    sampled = expected_rr_output(csr, eps) > rr_max_edges
    if sampled:
        p = math.exp(eps) / (math.exp(eps) + 1.0)
        rng = np.random.default_rng([seed, 12])
        rr = rng.binomial(deg, p) + rng.binomial(n - 1 - deg, 1 - p)
        rr_eps = eps
    else:
        r_r = rr_edges(csr, eps, seed=sub_seed(seed, 12), max_output_edges=rr_max_edges)
        rr = r_r.noisy_degrees.numpy()
        rr_eps = r_r.spent.eps
    out = {"n": n, "eps": eps, "degree": deg, "dprr": r_d.noisy_degrees.numpy().astype(np.int64),
           "rr": np.asarray(rr, dtype=np.int64), "locallap": r_l.noisy_degrees.numpy().astype(np.int64),
           "rr_sampled": bool(sampled),
           "privacy": {"dprr": r_d.spent.eps, "rr": rr_eps, "locallap": r_l.spent.eps,
                       "dprr_eps1": r_d.spent.params["eps1_used"], "dprr_eps2": r_d.spent.params["eps2"]}}
    out["mae"] = {m: float(np.abs(out[m] - deg).mean()) for m in ("dprr", "rr", "locallap")}
    out["mean"] = {"true": float(deg.mean()), **{m: float(out[m].mean()) for m in ("dprr", "rr", "locallap")}}
    out["corr"] = {m: _corr(deg, out[m]) for m in ("dprr", "rr", "locallap")}
    return out


def _corr(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of log(1 + a) and log(1 + b) (NaN if either is constant)."""
    x, y = np.log1p(a.astype(np.float64)), np.log1p(b.astype(np.float64))
    if x.std() == 0 or y.std() == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def plot_degree_preservation(result: dict, path, title: str = "") -> Path:
    """Fig. 7-style scatter: original vs noisy degree, log-log (symlog near 0), one panel per method."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    path = Path(path)
    deg = result["degree"]
    fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharex=True, sharey=True)
    hi = max(int(deg.max()), *(int(result[m].max()) for m in ("dprr", "rr", "locallap")), 1)
    for ax, m in zip(axes, ("dprr", "rr", "locallap")):
        ax.scatter(deg, result[m], s=3, alpha=0.3)
        ax.plot([0, hi], [0, hi], "k--", lw=0.8)
        ax.set_xscale("symlog", linthresh=1)
        ax.set_yscale("symlog", linthresh=1)
        extra = " (exact-law sample)" if m == "rr" and result.get("rr_sampled") else ""
        ax.set_title(f"{LABELS[m]}{extra}\nMAE {result['mae'][m]:.1f}, mean {result['mean'][m]:.1f} "
                     f"(true {result['mean']['true']:.1f})", fontsize=8)
        ax.set_xlabel("original degree d_i")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("noisy degree d~_i")
    fig.suptitle(title or f"Degree preservation, eps = {result['eps']:g}, n = {result['n']}", fontsize=9)
    return save_figure(fig, path, dpi=110)


# --- reproduction ------------------------------------------------------------------------------
def reproduce_main(argv: list[str] | None = None) -> int:
    """``ldpfast reproduce dprr``: Figs. 4, 5 and 7 of the paper (accuracy vs alpha and eps, degrees)."""
    from tqdm.auto import tqdm

    p = ArgumentParser(prog="ldpfast reproduce dprr", allow_abbrev=False, description=plain_text(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tu-folder", type=existing_dir, default=None, help="folder with a TU dataset (e.g. REDDIT-BINARY/raw)")
    p.add_argument("--tu-name", default=None, help="TU dataset name, e.g. REDDIT-BINARY")
    p.add_argument("--graphs", type=integer(1), default=300, help="synthetic dataset: number of graphs")
    p.add_argument("--classes", type=integer(2), default=2, help="synthetic dataset: number of classes")
    p.add_argument("--nodes", type=integer(2), nargs=2, default=[100, 400], help="synthetic: node range")
    p.add_argument("--model", default="gin", choices=MODELS)
    p.add_argument("--runs", type=integer(1), default=3)
    p.add_argument("--epochs", type=integer(1), default=60)
    p.add_argument("--eps", type=number(0), nargs="+", default=[0.2, 0.5, 1.0, 2.0])
    p.add_argument("--alphas", type=number(0, low_open=False, hi=1, high_open=True), nargs="+", default=[0.0, 0.1, 0.2, 0.5])
    p.add_argument("--rr-max-edges", type=integer(0), default=50_000_000)
    p.add_argument("--degree-nodes", type=integer(2), default=None,
                   help="nodes of the synthetic Fig. 7 graph (default 10000; 2000 with --quick)")
    p.add_argument("--no-facebook", action="store_true", help="skip the Fig. 7 plot on Facebook")
    p.add_argument("--root", type=existing_dir, default=None, help="dataset root for Facebook")
    p.add_argument("--data-seed", type=seed, default=0, help="seed of the synthetic graphs (public data)")
    p.add_argument("--seed", type=seed, default=None, help=SECRET_SEED_HELP)
    p.add_argument("--threads", type=integer(1), default=1, help="torch threads for training (tiny graphs: 1)")
    p.add_argument("--quick", action="store_true",
                   help="CI-sized: 80 synthetic graphs of 80-250 nodes, 1 run, 25 epochs, eps {0.5, 1, 2}, "
                        "alpha {0, 0.2, 0.5}")
    p.add_argument("--out", type=output_dir, default="results/dprr")
    a = p.parse_args(argv)
    master = resolve_seed(a.seed)
    if (a.tu_folder is None) != (a.tu_name is None):
        p.error("--tu-folder and --tu-name go together")
    if a.quick:
        a.graphs, a.nodes, a.runs, a.epochs = 80, [80, 250], 1, 25
        a.eps, a.alphas = [0.5, 1.0, 2.0], [0.0, 0.2, 0.5]
    out = Path(a.out)
    if a.tu_folder:
        from ..datasets.loaders import load_tu

        graphs = load_tu(a.tu_folder, a.tu_name)
        ds_name = a.tu_name
    else:
        graphs = synthetic_graph_classification(a.graphs, a.classes, tuple(a.nodes), seed=a.data_seed)
        ds_name = f"synthetic-{a.classes}class-{a.graphs}x{a.nodes[0]}-{a.nodes[1]}"
    n_max = max(int(g.num_nodes) for g in graphs)
    cells = [("eps", "nonpriv_full", math.inf, 0.0)]
    cells += [("eps", m, e, 0.0) for e in a.eps for m in ("dprr", "rr", "locallap")]
    cells += [("alpha", m, 1.0, al) for al in a.alphas if al > 0
              for m in ("dprr", "rr", "locallap", "nonpriv_part")]
    rows, notes = [], []
    bar = tqdm(total=len(cells), desc=f"dprr {ds_name}")
    for panel, m, e, al in cells:
        row = {"panel": panel, "method": LABELS[m], "eps": fmt_eps(e), "alpha": al}
        if m == "rr":
            exp_out = expected_rr_edges(graphs, e, al)
            if exp_out > a.rr_max_edges:
                row.update(skipped=f"RR output ~{exp_out:.3g} edges > --rr-max-edges {a.rr_max_edges}")
                notes.append(f"RR at eps={e:g}, alpha={al:g} skipped: {row['skipped']}")
                rows.append(row)
                bar.update(1)
                continue
        try:
            rep = fit(graphs, m, 1.0 if math.isinf(e) else e, model=a.model, public_fraction=al, runs=a.runs,
                      epochs=a.epochs, seed=sub_seed(master, 1), rr_max_edges=max(a.rr_max_edges, 1),
                      threads=a.threads)
        except ValueError as exc:
            row.update(skipped=str(exc))
            notes.append(f"{LABELS[m]} at eps={e:g}, alpha={al:g} skipped: {exc}")
            rows.append(row)
            bar.update(1)
            continue
        s = rep.accuracy
        row.update(acc_mean=round(s["mean"], 1), acc_std=round(s["std"], 1), runs=s["runs"],
                   eps_spent=rep.privacy.get("eps"), eps1=rep.privacy.get("eps1"), eps2=rep.privacy.get("eps2"),
                   mean_server_degree=round(rep.stats["mean_server_degree"], 2),
                   mean_true_degree=round(rep.stats["mean_true_degree"], 2),
                   time_s=round(rep.timings["total_s"], 1), values=s["values"])
        rows.append(row)
        bar.update(1)
    bar.close()
    full = next((r for r in rows if r["method"] == "NonPriv-Full" and "acc_mean" in r), None)
    ref = full["acc_mean"] if full else None
    # alpha = 0 column of the alpha panel is the common setting of the eps panel at eps = 1
    cols = ["panel", "method", "eps", "alpha", "acc_mean", "acc_std", "runs", "eps_spent", "eps1", "eps2",
            "mean_true_degree", "mean_server_degree", "time_s"]

    def fmt(v):
        if v is None:
            return ""
        return f"{v:.4g}" if isinstance(v, float) else str(v)

    md = [f"# DPRR reproduction on {ds_name} ({a.model.upper()}, {a.runs} run(s), {a.epochs} epochs)", "",
          *markdown_table([], cols)]
    for r in rows:
        if "skipped" in r:
            md.append(f"| {r['panel']} | {r['method']} | {r['eps']} | {r['alpha']} | skipped: {r['skipped']} |"
                      + " |" * (len(cols) - 5))
        else:
            md.append(markdown_row(fmt(r.get(c)) for c in cols))
    # Fig. 7
    figs, deg_rows = [], []
    deg_graphs = []
    if not a.no_facebook:
        try:
            from ..datasets import load

            deg_graphs.append(("facebook", load("facebook", root=a.root)))
        except (OSError, RuntimeError, ValueError) as exc:  # offline without the data: say so, keep going
            notes.append(f"Fig. 7 on Facebook skipped: {exc}")
    from ..datasets import synthetic

    n_syn = a.degree_nodes or (2000 if a.quick else 10000)
    deg_graphs.append((f"synthetic-n{n_syn}", synthetic(n_syn, 20.0, num_classes=1, homophily=1.0,
                                                        degree_exponent=2.5, seed=a.data_seed)))
    for name, g in tqdm(deg_graphs, desc="fig7"):
        res = degree_preservation(g, 1.0, seed=sub_seed(master, 2), rr_max_edges=a.rr_max_edges)
        path = plot_degree_preservation(res, out / f"dprr_degrees_{name}.png",
                                        f"{name}: original vs noisy degree, eps = 1 (paper Fig. 7)")
        figs.append(path.name)
        deg_rows.append({"graph": name, "n": res["n"], "mean_true": res["mean"]["true"],
                         **{f"mean_{m}": res["mean"][m] for m in ("dprr", "rr", "locallap")},
                         **{f"mae_{m}": res["mae"][m] for m in ("dprr", "rr", "locallap")},
                         **{f"corr_{m}": res["corr"][m] for m in ("dprr", "rr", "locallap")},
                         "rr_sampled": res["rr_sampled"], "privacy": res["privacy"]})
    md += ["", "## Degree preservation (Fig. 7, eps = 1)", "",
           ("| graph | n | mean d | mean d~ DPRR | RR | LocalLap | MAE DPRR | RR | LocalLap | corr DPRR | RR | "
           "LocalLap |"), "|" + "---|" * 12]
    for r in deg_rows:
        md.append(f"| {r['graph']} | {r['n']} | {r['mean_true']:.2f} | {r['mean_dprr']:.2f} | {r['mean_rr']:.1f} | "
                  f"{r['mean_locallap']:.2f} | {r['mae_dprr']:.2f} | {r['mae_rr']:.1f} | {r['mae_locallap']:.2f} | "
                  f"{r['corr_dprr']:.3f} | {r['corr_rr']:.3f} | {r['corr_locallap']:.3f} |")
    md += ["", ("MAE = mean |d~_i - d_i|; corr = Pearson correlation of log(1+d) and log(1+d~). RR's degrees "
           "are drawn from their exact law when its output would exceed --rr-max-edges.")]
    if notes:
        md += ["", "## Notes", ""] + [f"- {x}" for x in notes]
    md += ["", ("Paper (section V-B): DPRR close to NonPriv-Full at eps = 1 (gap < 0.1 at alpha = 0.2), "
                "above RR (especially alpha > 0), LocalLap and NonPriv-Part; DPRR preserves degrees, RR "
                "densifies, LocalLap flattens them.")]
    (out / "dprr.md").parent.mkdir(parents=True, exist_ok=True)
    (out / "dprr.md").write_text("\n".join(md) + "\n")
    save_json(out / "dprr.json", {"command": public_command("ldpfast reproduce dprr", argv), "dataset": ds_name,
                                  "n_max": n_max, "graphs": len(graphs), "rows": rows, "degrees": deg_rows,
                                  "notes": notes,
                                  # the secret --seed stays out of the results (it rebuilds the noise)
                                  "settings": {k: v for k, v in vars(a).items() if k != "seed"}})
    # Fig. 5 (vs eps) and Fig. 4 (vs alpha) plots: linear x, NonPriv-Full as a dashed line
    lines = {"ref": ref, "ref_label": "NonPriv-Full", "log_x": False, "prefix": "", "title_size": 9}
    ok = [r for r in rows if "acc_mean" in r]
    curves = {}
    for m in ("DPRR", "RR", "LocalLap"):
        rs = [r for r in ok if r["panel"] == "eps" and r["method"] == m]
        if rs:
            curves[m] = ([float(r["eps"]) for r in rs], [r["acc_mean"] for r in rs], [r["acc_std"] for r in rs])
    plot_curves(out / "dprr_accuracy_vs_eps.png", curves, "eps (alpha = 0)",
                f"{ds_name}: accuracy vs eps (paper Fig. 5)", **lines)
    curves = {}
    for m in ("DPRR", "RR", "LocalLap", "NonPriv-Part"):
        rs = [r for r in ok if r["method"] == m and ((r["panel"] == "alpha") or
                                                      (r["panel"] == "eps" and r["eps"] == "1"))]
        if rs:
            curves[m] = ([r["alpha"] for r in rs], [r["acc_mean"] for r in rs], [r["acc_std"] for r in rs])
    plot_curves(out / "dprr_accuracy_vs_alpha.png", curves, "fraction of non-private users alpha (eps = 1)",
                f"{ds_name}: accuracy vs alpha (paper Fig. 4)", **lines)
    print("\n".join(md))
    print(f"saved {out}/dprr.json, dprr.md, dprr_accuracy_vs_eps.png, dprr_accuracy_vs_alpha.png, "
          + ", ".join(figs))
    return 0
