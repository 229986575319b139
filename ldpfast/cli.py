"""The ``ldpfast`` command line (also ``python -m ldpfast``).

Commands
--------
``info``
    Live backends (and why the others are not), thread count, versions, where datasets are
    searched, the cache folder.
``demo``
    Cora (embedded in the package: no data folder, no network) with locally private
    features and labels, a 2-layer GraphSAGE, accuracy and the privacy spent (about a
    minute on 2 cores; ``--quick``: a few seconds).
``bench NAME [args]``
    Runs ``benchmarks/bench_NAME.py`` from the source checkout (``--list`` lists them).
``reproduce METHOD``
    Paper reproductions: ``reproduce_main`` of :mod:`ldpfast.reproduce.<METHOD>` (the
    arguments after METHOD are its own; ``ldpfast reproduce METHOD --help`` lists them).
``randomize IN OUT``
    Sharded randomisation of a row-block Parquet shard set on a Dask cluster
    (``--scheduler tcp://host:8786``; default a local cluster), bit-identical to the
    single-machine mechanisms (:mod:`ldpfast.distributed.shards`, docs/scaling.md).  Needs
    ``pip install 'ldpfast[distributed]'``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import runpy
import sys
import time
from pathlib import Path

#: The methods ``ldpfast reproduce`` runs (one per paper).
REPRODUCIBLE = ("rgnn", "lpgnn", "dprr", "heterpoisson", "pipeline")


def _versions() -> dict:
    import numpy as np

    out = {"python": sys.version.split()[0], "numpy": np.__version__}
    for mod in ("torch", "torch_geometric", "numba", "pymetis", "dp_accounting", "cupy",
                "torch_scatter", "torch_sparse"):
        try:
            m = __import__(mod)
            out[mod] = getattr(m, "__version__", "installed")
        except Exception:  # noqa: BLE001 - absence is what we report
            out[mod] = None
    return out


def cmd_info(args) -> int:
    """``ldpfast info``: live backends, threads, versions and where datasets are searched."""
    import ldpfast
    from ldpfast import _backend
    from ldpfast._paths import cache_dir
    from ldpfast.datasets import default_root, search_roots

    info = {
        "ldpfast": ldpfast.__version__,
        "backends": {k: ("available" if v is None else f"unavailable ({v})")
                     for k, v in _backend.available().items()},
        "default_cpu_backend": _backend.resolve("cpu"),
        "threads": _backend.get_num_threads(),
        "versions": _versions(),
        "data_root": str(default_root()) if default_root() else None,
        "data_search": ["embedded cora"] + [f"{p} ({origin})" for p, origin in search_roots()],
        "cache": str(cache_dir()),
        # set when the Numba kernels are imported (by available() above)
        "numba_cache": os.environ.get("NUMBA_CACHE_DIR"),
    }
    from ldpfast._cuda import gpu_info

    info["gpu"] = gpu_info()
    so = Path(ldpfast.__file__).parent.glob("_C*.so")
    info["extension"] = [str(p) for p in so]
    if args.json:
        print(json.dumps(info, indent=2))
    else:
        print(f"ldpfast {info['ldpfast']}")
        for k, v in info["backends"].items():
            print(f"  backend {k:6s}: {v}")
        print(f"  default CPU backend: {info['default_cpu_backend']}")
        print(f"  threads: {info['threads']}")
        print(f"  data root: {info['data_root']}")
        print("  datasets searched in: " + "; ".join(info["data_search"]))
        print(f"  cache: {info['cache']} (numba: {info['numba_cache']})")
        print("  versions: " + ", ".join(f"{k}={v}" for k, v in info["versions"].items()))
        print("  gpu: " + ", ".join(f"{k}={v}" for k, v in info["gpu"].items()))
    return 0


def cmd_demo(args) -> int:
    """``ldpfast demo``: the Cora demo (private features and labels, GraphSAGE); ``--quick`` for a short run."""
    from ldpfast.demo import run_demo

    report = run_demo(eps_x=args.eps_x, eps_y=args.eps_y, epochs=args.epochs, seed=args.seed,
                      root=args.root, device=args.device, quick=args.quick)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, indent=2))
        print(f"saved {args.json}")
    return 0


def _bench_dir(explicit: str | None) -> Path:
    cands = [Path(explicit)] if explicit else [
        Path(__file__).resolve().parents[1] / "benchmarks", Path.cwd() / "benchmarks"]
    for c in cands:
        if (c / "harness.py").is_file():
            return c
    raise SystemExit(
        "ldpfast bench: cannot find the benchmarks/ folder of the source checkout (looked in "
        + ", ".join(str(c) for c in cands) + "); run from the repository root or pass --dir")


def cmd_bench(args, rest) -> int:
    """``ldpfast bench NAME [args]``: run ``benchmarks/bench_NAME.py`` of the checkout with its own arguments."""
    bdir = _bench_dir(args.dir)
    names = sorted(p.stem[len("bench_"):] for p in bdir.glob("bench_*.py"))
    if args.list or not args.name:
        print("benchmarks: " + ", ".join(names))
        return 0
    if args.name not in names:
        print(f"ldpfast bench: unknown benchmark {args.name!r}; known: {', '.join(names)}",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(bdir.parent))
    sys.argv = [f"bench_{args.name}.py"] + rest
    t0 = time.perf_counter()
    runpy.run_path(str(bdir / f"bench_{args.name}.py"), run_name="__main__")
    print(f"[ldpfast bench {args.name}: {time.perf_counter() - t0:.1f} s]")
    return 0


def cmd_reproduce(args, rest) -> int:
    """``ldpfast reproduce METHOD [args]``: a paper's grid (``ldpfast.reproduce.<METHOD>.reproduce_main``)."""
    import importlib

    try:
        mod = importlib.import_module(f"ldpfast.reproduce.{args.method}")
    except ModuleNotFoundError:
        mod = None
    if mod is None or not hasattr(mod, "reproduce_main"):
        print(f"ldpfast reproduce {args.method}: this method's pipeline is not implemented yet",
              file=sys.stderr)
        return 2
    return int(mod.reproduce_main(rest) or 0)


def _randomize_seed(args) -> int | None:
    if args.seed is not None and args.seed_file is not None:
        raise SystemExit("ldpfast randomize: give --seed or --seed-file, not both")
    if args.seed_file is None:
        return args.seed
    txt = Path(args.seed_file).read_text().strip()
    try:
        return int(txt, 0)
    except ValueError:
        raise SystemExit("ldpfast randomize: --seed-file must hold one integer in [0, 2**64)") from None


def cmd_randomize(args) -> int:
    """``ldpfast randomize IN OUT``: sharded randomisation on Dask (:func:`ldpfast.distributed.shards.randomize`)."""
    from ldpfast.distributed.shards import randomize

    edges = features = labels = None
    if args.edges:
        if args.edge_eps is None:
            raise SystemExit("ldpfast randomize: --edges needs --edge-eps")
        edges = {"mechanism": args.edges, "eps": args.edge_eps}
        if args.edges == "dprr":
            edges.update(eps1=args.eps1, n_max=args.n_max, alpha=args.dprr_alpha)
        elif args.edges == "rr":
            edges["max_output_edges"] = args.max_output_edges
    if args.features:
        if args.feature_eps is None:
            raise SystemExit("ldpfast randomize: --features needs --feature-eps")
        features = {"mechanism": args.features, "eps": args.feature_eps}
        if args.features in ("grr", "grr_fs"):
            if args.k is None:
                raise SystemExit(f"ldpfast randomize: --features {args.features} needs --k (domain size)")
            features["k"] = args.k
        else:
            features["alpha"], features["beta"] = args.range
        if args.features in ("grr_fs", "multibit"):
            features["m"] = args.m
    if args.labels is not None:
        if args.label_eps is None:
            raise SystemExit("ldpfast randomize: --labels needs --label-eps")
        labels = {"num_classes": args.labels, "eps": args.label_eps, "use_mask": not args.no_label_mask}
    store = None
    if args.store is not None:
        from ldpfast.privacy import ReportStore

        store = ReportStore(args.store, budget=args.budget)
    elif args.budget is not None:
        raise SystemExit("ldpfast randomize: --budget caps each user's total in a report store: give --store too")
    try:
        rep = randomize(args.input, args.output, seed=_randomize_seed(args), edges=edges, features=features,
                        labels=labels, dataset=args.dataset, store=store, scheduler=args.scheduler,
                        n_workers=args.workers, memory_limit=args.memory_limit, progress=not args.no_progress,
                        engine=args.engine)
        summary = None if store is None else store.summary(args.dataset)
    finally:
        if store is not None:
            store.close()
    print(json.dumps({"output": str(args.output), "num_edges_out": rep.num_edges_out,
                      "spent": [sp.to_dict() for sp in rep.spent], "seconds": rep.seconds,
                      "peak_rss_per_worker": rep.peak_rss, "store": summary}, indent=1, default=str))
    return 0


def plain_text(rst: str) -> str:
    """A docstring's reStructuredText as terminal text: roles (``:mod:`x```) and literals
    (````x````) become their text, a section title ``Title`` over its underline ``Title:``."""
    txt = re.sub(r":\w+:`~?([^`]+)`", r"\1", rst)
    lines = re.sub(r"``([^`]+)``", r"\1", txt).splitlines()
    out = []
    for ln in lines:
        if re.fullmatch(r"\s*[-=~]{3,}\s*", ln) and out:
            out[-1] += ":"
        else:
            out.append(ln)
    return "\n".join(out)


def _version() -> str:
    from ldpfast import __version__

    return f"ldpfast {__version__}"


def build_parser() -> argparse.ArgumentParser:
    """The ``ldpfast`` argument parser (subcommands info, demo, bench, randomize, reproduce)."""
    p = argparse.ArgumentParser(prog="ldpfast", description=plain_text(__doc__),
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("info", help="backends, threads, versions")
    pi.add_argument("--json", action="store_true", help="print JSON")
    pd = sub.add_parser("demo", help="private features + labels on Cora, GraphSAGE")
    pd.add_argument("--eps-x", type=float, default=3.0, help="feature budget (default 3)")
    pd.add_argument("--eps-y", type=float, default=3.0, help="label budget (default 3)")
    pd.add_argument("--epochs", type=int, default=None,
                    help="training epochs of every model, the LPGNN fit included (default: 200 for "
                         "GraphSAGE, the paper's 500 with early stopping for LPGNN)")
    pd.add_argument("--quick", action="store_true",
                    help="a smoke test: every model, the LPGNN fit included, trains for a few "
                         "epochs (unless --epochs is given)")
    pd.add_argument("--seed", type=int, default=None,
                    help="secret seed of the randomisers (default: from the OS); never saved")
    pd.add_argument("--root", default=None,
                    help="read Cora's raw Planetoid files from this data root (default: the "
                         "copy embedded in the package)")
    pd.add_argument("--json", default=None, help="also save the report to this JSON file")
    pd.add_argument("--device", default=None,
                    help="cpu (default) or cuda / cuda:N: where data, randomisers and models run")
    # Everything after NAME / METHOD (--help included) goes to that script's own parser.
    pb = sub.add_parser("bench", help="run benchmarks/bench_NAME.py (extra args passed on)",
                        description="Run benchmarks/bench_NAME.py; the arguments after NAME are its "
                                    "own (ldpfast bench NAME --help lists them).")
    pb.add_argument("--list", action="store_true")
    pb.add_argument("--dir", default=None, help="benchmarks folder (default: the checkout's)")
    pb.add_argument("name", nargs="?")
    pb.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pr = sub.add_parser("reproduce", help="reproduce a paper's tables (extra args passed on)",
                        description="Reproduce a paper's tables; the arguments after METHOD are its "
                                    "own (ldpfast reproduce METHOD --help lists them).")
    pr.add_argument("method", choices=REPRODUCIBLE)
    pr.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pz = sub.add_parser("randomize", help="sharded randomisation on Dask (bit-identical to one machine)")
    pz.add_argument("input", help="input shard folder (meta.json + Parquet row blocks)")
    pz.add_argument("output", help="output folder (must not hold output yet)")
    pz.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://host:8786 "
                                                      "(default: a local cluster)")
    pz.add_argument("--workers", type=int, default=2, help="local cluster: worker processes (default 2)")
    pz.add_argument("--memory-limit", default="4GiB", help="local cluster: memory per worker (default 4GiB)")
    pz.add_argument("--edges", choices=("dprr", "rr", "locallap"), default=None)
    pz.add_argument("--edge-eps", type=float, default=None, help="edge budget per user")
    pz.add_argument("--eps1", type=float, default=None, help="DPRR degree budget (default: paper eq. 8)")
    pz.add_argument("--n-max", type=int, default=None, help="DPRR n_max of eq. 8 (default: num_nodes)")
    pz.add_argument("--dprr-alpha", type=float, default=0.9, help="DPRR alpha of eq. 8 (default 0.9)")
    pz.add_argument("--max-output-edges", type=int, default=50_000_000, help="RR output guard")
    pz.add_argument("--features", choices=("grr", "grr_fs", "onebit", "multibit"), default=None)
    pz.add_argument("--feature-eps", type=float, default=None,
                    help="feature budget (grr: per value; grr_fs: eps_x; onebit/multibit: per node)")
    pz.add_argument("--k", type=int, default=None, help="grr / grr_fs: domain size of every column")
    pz.add_argument("--m", type=int, default=None, help="grr_fs: sampled features; multibit: sampled dims")
    pz.add_argument("--range", type=float, nargs=2, default=(0.0, 1.0), metavar=("ALPHA", "BETA"),
                    help="onebit / multibit: public feature range (default 0 1)")
    pz.add_argument("--labels", type=int, default=None, metavar="NUM_CLASSES", help="randomise labels")
    pz.add_argument("--label-eps", type=float, default=None)
    pz.add_argument("--no-label-mask", action="store_true", help="randomise every label (ignore y_mask)")
    pz.add_argument("--seed", type=int, default=None,
                    help="secret seed in [0, 2**64) (default: from the OS); never written to the output")
    pz.add_argument("--seed-file", default=None, help="read the secret seed from this file instead")
    pz.add_argument("--dataset", default="default",
                    help="the dataset's name: two datasets under one secret never share bits (default 'default')")
    pz.add_argument("--store", default=None, metavar="SQLITE",
                    help="per-user report store (needs shards with user_id): unchanged users cost nothing, new "
                         "reports are charged to each user across runs")
    pz.add_argument("--budget", type=float, default=None,
                    help="with --store: cap on each user's total per privacy relation; users over it are withheld")
    pz.add_argument("--engine", choices=("cpp", "numba"), default="cpp",
                    help="DPRR/RR sampler per shard: cpp (fast, 32 bytes per node per task) or numba "
                         "(shard rows only); same output")
    pz.add_argument("--no-progress", action="store_true")
    return p


def _line_buffered() -> None:
    """Progress lines reach a pipe as they are printed, not when the process ends."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError, OSError):  # not a text file (a test's capture)
            pass


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ldpfast`` command; returns the exit status."""
    _line_buffered()
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.cmd == "info":
        return cmd_info(args)
    if args.cmd == "demo":
        return cmd_demo(args)
    if args.cmd == "bench":
        return cmd_bench(args, args.args)
    if args.cmd == "randomize":
        return cmd_randomize(args)
    return cmd_reproduce(args, args.args)


if __name__ == "__main__":
    raise SystemExit(main())
