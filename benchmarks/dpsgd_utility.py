"""When does the graph help under node-level DP?  DP GCN / SAGE / GAT (HeterPoisson, private
inference) against a DP MLP (one node per example) and non-private training, measured.

Every run is a real training run through :class:`ldpfast.privacy.NodeDPEngine` (or, for the
non-private rows, the same model, sampler, steps and evaluation without clipping and noise):

* split: random 80/20 train/test of the nodes (``ldpfast.methods.heterpoisson.split_nodes``);
  ``delta = 1 / |V|^1.1``; 9 epochs (``T = ceil(9 / q_b)``); clip ``C = 0.5``; Adam; hidden 128,
  one convolution + ELU + a linear head (``build_model``; GAT: one head); the RDP accountant;
* batch: ``--batch`` expected sub-graphs per step (default: 256 on Cora, the paper's 4096 on
  Facebook and Twitch-DE);
* evaluation: test nodes classified from neighbours among the test nodes only (``N_test = 13``,
  paper 003 section 4.4: inference reads no training node); the GNN rows also report
  ``acc_full``, the accuracy with the whole graph at inference (reads the training nodes: not
  private, shown for comparison only);
* tuning: the same budget for every method, two configurations each: the GNNs ``M`` in
  {1, 2} at lr 0.03, the MLP lr in {0.01, 0.03} (it has no ``M``); the non-private rows the
  same grids.  The table reports, per (dataset, eps, method), the configuration with the best
  mean *test* accuracy over the seeds (the same selection for every method, as the paper
  picks ``M``; there is no separate validation split), and the JSON holds every run.

Datasets: Cora (embedded), Facebook and Twitch-DE (``../shared/datasets`` or ``LDPFAST_DATA``;
128-d truncated SVD features, as the HeterPoisson reproduction).  Results are appended to the
JSON after every run (``--out``), and a rerun skips the runs already there, so an interrupted
sweep resumes.  ``--table PATH`` writes the markdown tables from the JSON.

    python benchmarks/dpsgd_utility.py --datasets cora facebook twitch-de --eps 2 4 8 --seeds 2 \\
        --out results/dpsgd_utility.json --table docs/dpsgd_utility_table.md
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

GNNS = ("gcn", "sage", "gat")
METHODS = ("mlp",) + GNNS
GRIDS = {m: [{"M": 1.0, "lr": 0.03}, {"M": 2.0, "lr": 0.03}] for m in GNNS}
GRIDS["mlp"] = [{"M": None, "lr": 0.01}, {"M": None, "lr": 0.03}]
DEFAULT_BATCH = {"cora": 256, "facebook": 4096, "twitch-de": 4096}
EPOCHS, CLIP, HIDDEN, N_TEST = 9.0, 0.5, 128, 13


def load(name: str):
    import ldpfast as lf

    return lf.datasets.load(name) if name == "cora" else lf.datasets.load(name, feature_dim=128)


def train(data, method: str, eps: float | None, M: float | None, lr: float, seed: int, batch: int) -> dict:
    """One run; ``eps=None``: non-private (same model, sampler, steps, evaluation)."""
    import torch
    import torch.nn.functional as F

    from ldpfast.methods.heterpoisson import _evaluate, build_model, split_nodes
    from ldpfast.privacy import NodeDPEngine
    from ldpfast.privacy.dpsgd import subgraph_loss
    from ldpfast.sampling import HeterPoisson, singleton_batch

    t0 = time.perf_counter()
    n = int(data.num_nodes)
    tr, te = split_nodes(n, seed)
    delta = 1.0 / n ** 1.1
    torch.manual_seed(seed)
    net = build_model(method, int(data.x.shape[1]), int(data.y.max()) + 1, hidden=HIDDEN)
    adam = torch.optim.Adam(net.parameters(), lr=lr)
    heter = method != "mlp"
    out = {"sigma": None, "eps_spent": None}
    if eps is not None:
        engine = NodeDPEngine(accountant="rdp")
        model, opt, sampler = engine.make_private_with_epsilon(
            net, adam, data, eps, delta, epochs=EPOCHS, max_grad_norm=CLIP, expected_batch_size=batch,
            M=M if heter else None, train_mask=tr, sampling="heterpoisson" if heter else "nodes", seed=seed)
        model.train()
        for b in sampler:
            opt.zero_grad()
            subgraph_loss(model(b), b).backward()
            opt.step()
        out.update(sigma=opt.sigma, eps_spent=engine.get_epsilon(delta), T=opt.steps, q_b=sampler.q_b)
    else:
        q_b = min(1.0, batch / int(tr.sum()))
        T = max(1, math.ceil(EPOCHS / q_b - 1e-9))
        sp = HeterPoisson(data, q_b, M if heter else 1.0, seed=seed ^ 0xBA7C4, train_nodes=tr, num_steps=T)
        net.train()
        for t in range(T):
            b = sp.sample(t) if heter else singleton_batch(data, sp.central(t), t)
            if b.num_subgraphs == 0:
                continue
            adam.zero_grad()
            F.cross_entropy(net(b.x, b.edge_index)[b.center], b.y).backward()
            adam.step()
        out.update(T=T, q_b=q_b)
    out["acc"] = _evaluate(net, data, te, N_TEST, te, seed ^ 0x7E57, method)
    if heter:  # the whole graph at inference: reads training nodes, not private
        with torch.no_grad():
            pred = net(data.x, data.edge_index).argmax(1)
        out["acc_full"] = float((pred[te] == data.y[te]).float().mean())
    out["seconds"] = time.perf_counter() - t0
    return out


def _key(r: dict) -> tuple:
    return (r["dataset"], r["method"], r["eps"], r["M"], r["lr"], r["seed"])


def sweep(args) -> dict:
    import torch

    from benchmarks.harness import environment

    torch.set_num_threads(args.threads)
    path = Path(args.out)
    payload = json.loads(path.read_text()) if path.exists() else {"runs": []}
    payload["command"] = " ".join(["python"] + sys.argv)
    payload.setdefault("environments", []).append(environment())
    payload["settings"] = {"epochs": EPOCHS, "clip": CLIP, "hidden": HIDDEN, "N_test": N_TEST, "grids": GRIDS,
                           "batch": {d: args.batch or DEFAULT_BATCH.get(d, 256) for d in args.datasets},
                           "accountant": "rdp", "delta": "1/|V|^1.1", "split": "random 80/20 per seed"}
    done = {_key(r) for r in payload["runs"]}
    todo = [(d, m, e, c, s) for d in args.datasets for e in [*args.eps, None] for m in args.methods
            for c in GRIDS[m] for s in range(args.seeds)]
    todo = [t for t in todo if (t[0], t[1], t[2], t[3]["M"], t[3]["lr"], t[4]) not in done]
    print(f"[dpsgd_utility] {len(todo)} runs to do ({len(done)} already in {path})", flush=True)
    data = {}
    path.parent.mkdir(parents=True, exist_ok=True)
    for i, (d, m, e, c, s) in enumerate(todo):
        if d not in data:
            data[d] = load(d)
        batch = args.batch or DEFAULT_BATCH.get(d, 256)
        r = train(data[d], m, e, c["M"], c["lr"], s, batch)
        row = {"dataset": d, "method": m, "eps": e, "M": c["M"], "lr": c["lr"], "seed": s, "batch": batch, **r}
        payload["runs"].append(row)
        path.write_text(json.dumps(payload, indent=1))
        print(f"[{i + 1}/{len(todo)}] {d} {m} eps={e} M={c['M']} lr={c['lr']} seed={s}: acc {r['acc']:.3f}"
              + (f" (full graph {r['acc_full']:.3f})" if "acc_full" in r else "") + f", {r['seconds']:.0f} s",
              flush=True)
    return payload


def _best(runs: list[dict]) -> dict | None:
    """The configuration with the best mean accuracy over seeds: mean, std, runs, config."""
    by_cfg: dict[tuple, list[dict]] = {}
    for r in runs:
        by_cfg.setdefault((r["M"], r["lr"]), []).append(r)
    best = None
    for cfg, rs in by_cfg.items():
        accs = [r["acc"] for r in rs]
        mean = statistics.mean(accs)
        if best is None or mean > best["mean"]:
            full = [r["acc_full"] for r in rs if "acc_full" in r]
            best = {"mean": mean, "std": statistics.pstdev(accs) if len(accs) > 1 else 0.0, "n": len(accs),
                    "M": cfg[0], "lr": cfg[1], "full": statistics.mean(full) if full else None,
                    "sigma": rs[0].get("sigma")}
    return best


def table(payload: dict) -> str:
    runs = payload["runs"]
    lines = [f"Command: `{payload.get('command', '')}`", ""]
    for d in dict.fromkeys(r["dataset"] for r in runs):
        lines += [f"### {d}", "",
                  "| eps | " + " | ".join(m.upper() for m in METHODS) + " | best |",
                  "|---|" + "---|" * (len(METHODS) + 1)]
        epss = sorted({r["eps"] for r in runs if r["dataset"] == d and r["eps"] is not None})
        for e in [*epss, None]:
            cells, scores = [], {}
            for m in METHODS:
                b = _best([r for r in runs if r["dataset"] == d and r["method"] == m and r["eps"] == e])
                if b is None:
                    cells.append("")
                    continue
                scores[m] = b["mean"]
                cfg = f"M={b['M']:g}" if b["M"] is not None else f"lr={b['lr']:g}"
                cells.append(f"{100 * b['mean']:.1f} ± {100 * b['std']:.1f} ({cfg})")
            top = max(scores, key=scores.get) if scores else ""
            lines.append(f"| {'non-private' if e is None else f'{e:g}'} | " + " | ".join(cells) + f" | {top} |")
        full = []
        for e in [*epss, None]:
            for m in GNNS:
                b = _best([r for r in runs if r["dataset"] == d and r["method"] == m and r["eps"] == e])
                if b is not None and b["full"] is not None:
                    full.append(f"{m.upper()} {'non-private' if e is None else f'eps {e:g}'}: {100 * b['full']:.1f}")
        lines += ["", "Whole graph at inference (reads training nodes: not private), same runs: "
                  + "; ".join(full) + ".", ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--datasets", nargs="+", default=["cora", "facebook", "twitch-de"])
    p.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    p.add_argument("--eps", nargs="+", type=float, default=[2.0, 4.0, 8.0])
    p.add_argument("--seeds", type=int, default=2, help="seeds 0 .. seeds-1 (split, init, batches, noise)")
    p.add_argument("--batch", type=int, default=None, help="expected sub-graphs per step (default per dataset)")
    p.add_argument("--threads", type=int, default=1, help="torch threads")
    p.add_argument("--out", default="results/dpsgd_utility.json")
    p.add_argument("--table", default=None, help="write the markdown tables here")
    p.add_argument("--table-only", action="store_true", help="only rewrite the table from --out")
    p.add_argument("--quick", action="store_true", help="Cora, GCN and MLP, eps 8, one seed (smoke test)")
    a = p.parse_args(argv)
    if a.quick:
        a.datasets, a.methods, a.eps, a.seeds = ["cora"], ["mlp", "gcn"], [8.0], 1
    payload = json.loads(Path(a.out).read_text()) if a.table_only else sweep(a)
    md = table(payload)
    if a.table:
        Path(a.table).write_text(md + "\n")
    print(md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
