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
    Runs ``benchmarks/bench_NAME.py`` (``--list`` lists them): the source checkout's, else the
    copy that ships inside the installed package.
``reproduce METHOD``
    Paper reproductions: ``reproduce_main`` of :mod:`ldpfast.reproduce.<METHOD>` (the
    arguments after METHOD are its own; ``ldpfast reproduce METHOD --help`` lists them).
``randomize IN OUT``
    Sharded randomisation of a row-block Parquet shard set on a Dask cluster
    (``--scheduler tcp://host:8786``; default a local cluster), bit-identical to the
    single-machine mechanisms (:mod:`ldpfast.distributed.shards`; the scaling guide).  Needs
    ``pip install 'ldpfast[distributed]'``.
``audit MECHANISM [MECHANISM ...]``
    Empirical privacy audit (:mod:`ldpfast.privacy.audit`, docs/privacy_audit.md): canary
    users, ``k`` releases under a change model, attacks; prints eps_lb beside what the report
    store charged, per relation; exit status 1 when a charge is refuted.

Errors
------
A bad value is refused before any work, in one line naming the option and what it accepts
(``ldpfast demo: error: --eps-x: expected a number > 0, got -1``), exit status 2; so are the
errors the library raises for the input (a missing file, a parameter out of range).  A GPU or
device memory that is not there: one line, status 1.  ``ldpfast --debug CMD ...`` (or
``LDPFAST_DEBUG=1``) shows the traceback instead.
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

from ._cli_args import (
    ArgumentParser,
    UsageError,
    device,
    existing_dir,
    existing_file,
    integer,
    number,
    output_dir,
    output_file,
    run_command,
    seed,
)

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


def _bench_candidates() -> list[Path]:
    """Where the benchmark scripts are: the source checkout (editable install), the working
    directory, then the copy a wheel carries (``ldpfast/_bench/benchmarks``, made by setup.py)."""
    here = Path(__file__).resolve().parent
    return [here.parent / "benchmarks", Path.cwd() / "benchmarks", here / "_bench" / "benchmarks"]


def _bench_dir(explicit: str | None) -> Path:
    cands = [Path(explicit)] if explicit else _bench_candidates()
    for c in cands:
        if (c / "harness.py").is_file():
            return c
    raise UsageError(
        "no benchmark scripts (benchmarks/harness.py and bench_*.py) in "
        + ", ".join(str(c) for c in cands) + ": they ship in the source checkout and in the wheels "
        "built by setup.py; pass --dir with a checkout's benchmarks/ folder")


def cmd_bench(args, rest) -> int:
    """``ldpfast bench NAME [args]``: run ``benchmarks/bench_NAME.py`` of the checkout with its own arguments."""
    bdir = _bench_dir(args.dir)
    names = sorted(p.stem[len("bench_"):] for p in bdir.glob("bench_*.py"))
    if args.list or not args.name:
        print("benchmarks: " + ", ".join(names))
        return 0
    if args.name not in names:
        raise UsageError(f"unknown benchmark {args.name!r}; expected one of: {', '.join(names)}")
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
        raise UsageError(f"{args.method}: this method's pipeline is not implemented yet")
    return int(mod.reproduce_main(rest) or 0)


def _randomize_seed(args):
    if args.seed is not None and args.seed_file is not None:
        raise UsageError("give --seed or --seed-file, not both")
    if args.seed_file is None:
        return args.seed
    raw = Path(args.seed_file).read_bytes()
    try:  # a key file of `ldpfast secret new` (raw bytes), or one integer as text (unkeyed runs only)
        return int(raw.decode("ascii").strip(), 0)
    except (UnicodeDecodeError, ValueError):
        pass
    if len(raw) < 16:
        raise UsageError("--seed-file: expected a secret of at least 16 bytes (make one with `ldpfast secret new "
                         f"FILE`) or one integer in [0, 2**64) in {args.seed_file}")
    return raw


def cmd_secret(args) -> int:
    """``ldpfast secret new PATH``: a fresh 256-bit secret in a new key file (mode 0600)."""
    from ldpfast.privacy.secret import new_secret

    try:
        new_secret(args.path)
    except FileExistsError as e:
        raise UsageError(str(e)) from None
    print(f"wrote a new 256-bit secret to {args.path} (mode 0600): keep it, never publish it; pass it as "
          f"--seed-file {args.path} or seed=ldpfast.privacy.load_secret({str(args.path)!r})")
    return 0


def cmd_randomize(args) -> int:
    """``ldpfast randomize IN OUT``: sharded randomisation on Dask (:func:`ldpfast.distributed.shards.randomize`)."""
    from ldpfast.distributed.shards import randomize

    edges = features = labels = None
    if args.edges:
        if args.edge_eps is None:
            raise UsageError("--edges needs --edge-eps")
        edges = {"mechanism": args.edges, "eps": args.edge_eps}
        if args.edges == "dprr":
            edges.update(eps1=args.eps1, n_max=args.n_max, alpha=args.dprr_alpha)
        elif args.edges == "rr":
            edges["max_output_edges"] = args.max_output_edges
    if args.features:
        if args.feature_eps is None:
            raise UsageError("--features needs --feature-eps")
        features = {"mechanism": args.features, "eps": args.feature_eps}
        if args.features in ("grr", "grr_fs"):
            if args.k is None:
                raise UsageError(f"--features {args.features} needs --k (domain size)")
            features["k"] = args.k
        else:
            features["alpha"], features["beta"] = args.range
        if args.features in ("grr_fs", "multibit"):
            features["m"] = args.m
    if args.labels is not None:
        if args.label_eps is None:
            raise UsageError("--labels needs --label-eps")
        labels = {"num_classes": args.labels, "eps": args.label_eps, "use_mask": not args.no_label_mask}
    store = None
    if args.store is not None and args.no_store:
        raise UsageError("give --store or --no-store, not both")
    if args.store is not None:
        from ldpfast.privacy import ReportStore

        try:
            store = ReportStore(args.store, budget=args.budget, create=args.create_store)
        except FileNotFoundError:
            raise UsageError(f"--store: no report store at {args.store}; pass --create-store to start a new one "
                             "(only the first time: a lost store would otherwise open empty and release every "
                             "capped user again)") from None
        except ValueError as e:
            raise UsageError(f"--store: {e}") from None
    elif args.budget is not None:
        raise UsageError("--budget caps each user's total in a report store: give --store too")
    elif not args.no_store:
        # fail closed (issue 37, item 7): a run that forgets its store would release every user again
        # with nothing adding the releases up
        raise UsageError("no --store: without a report store nothing accounts this release beside earlier ones "
                         "(a re-run releases every user again). Give --store FILE (--create-store the first "
                         "time), or --no-store if this is a one-off release")
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


def cmd_audit(args) -> int:
    """``ldpfast audit MECHANISM ...``: eps lower bound vs the charge (:mod:`ldpfast.privacy.audit`)."""
    from ldpfast.privacy.audit._cli import run

    return run(args)


def _audit_parser(sub) -> None:
    """The ``audit`` subcommand's arguments (run by :func:`cmd_audit`)."""
    pa = sub.add_parser("audit", help="empirical privacy audit: eps lower bound vs the charge",
                        description="Plant canary users, run the mechanisms (a pipeline when several are named) "
                                    "over K releases under a change model, attack the outputs, and print eps_lb "
                                    "(a lower bound at --confidence) beside what the report store charged. Exit "
                                    "status 1 when a charge is refuted. See docs/privacy_audit.md.")
    pa.add_argument("mechanism", nargs="+", help="transforms (GRRFS, MultiBit, OneBit, RRLabels, RREdges, DPRR, "
                                                 "LocalLap) or functions (grr, grr_fs, onebit, multibit_encode, "
                                                 "rr_labels, rr_edges, dprr, local_laplace)")
    pa.add_argument("--eps", type=float, nargs="+", default=None, help="budget, one or one per mechanism (default 1)")
    pa.add_argument("--param", action="append", metavar="[MECH.]NAME=VALUE", help="another argument (repeatable)")
    pa.add_argument("--change", action="append", default=None, help="change model (repeatable; default static): "
                    "static, join, leave, permute, edit, sweep, add_column")
    pa.add_argument("--releases", type=int, default=3, help="releases K (default 3)")
    pa.add_argument("--canaries", type=int, default=1000, help="canary users per world (default 1000)")
    pa.add_argument("--eps-sweep", type=float, nargs="+", default=None, help="sweep: eps multiplier per release")
    pa.add_argument("--no-keys", action="store_true", help="rows are the users (no user keys; implies --no-store)")
    pa.add_argument("--no-store", action="store_true", help="no report store: the charge is the ledger's sum")
    pa.add_argument("--store", default=None, metavar="SQLITE", help="a new store file to keep (default: temporary)")
    pa.add_argument("--confidence", type=float, default=0.95, help="confidence of each bound (default 0.95)")
    pa.add_argument("--seed", type=int, default=0, help="seeds the audit (canaries, split, secret)")
    pa.add_argument("--json", default=None, help="save the reports as JSON")
    pa.add_argument("--plot", default=None, help="save eps_lb and the charge against k as a PNG")
    pa.add_argument("--quiet", action="store_true")


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
    """The ``ldpfast`` argument parser (subcommands info, demo, bench, randomize, reproduce, audit, secret)."""
    p = ArgumentParser(prog="ldpfast", description=plain_text(__doc__),
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=_version())
    p.add_argument("--debug", action="store_true",
                   help="show the traceback of an error instead of its one-line message")
    sub = p.add_subparsers(dest="cmd", required=True)
    pi = sub.add_parser("info", help="backends, threads, versions")
    pi.add_argument("--json", action="store_true", help="print JSON")
    pd = sub.add_parser("demo", help="private features + labels on Cora, GraphSAGE")
    pd.add_argument("--eps-x", type=number(0), default=3.0, help="feature budget, > 0 (default 3)")
    pd.add_argument("--eps-y", type=number(0), default=3.0, help="label budget, > 0 (default 3)")
    pd.add_argument("--epochs", type=integer(1), default=None,
                    help="training epochs of every model, the LPGNN fit included (default: 200 for "
                         "GraphSAGE, the paper's 500 with early stopping for LPGNN)")
    pd.add_argument("--quick", action="store_true",
                    help="a smoke test: every model, the LPGNN fit included, trains for a few "
                         "epochs (unless --epochs is given)")
    pd.add_argument("--seed", type=seed, default=None,
                    help="secret seed of the randomisers, in [0, 2**64) (default: from the OS); never saved")
    pd.add_argument("--root", type=existing_dir, default=None,
                    help="read Cora's raw Planetoid files from this data root (default: the "
                         "copy embedded in the package)")
    pd.add_argument("--json", type=output_file, default=None, help="also save the report to this JSON file")
    pd.add_argument("--device", type=device, default=None,
                    help="cpu (default) or cuda / cuda:N: where data, randomisers and models run")
    # Everything after NAME / METHOD (--help included) goes to that script's own parser.
    pb = sub.add_parser("bench", help="run benchmarks/bench_NAME.py (extra args passed on)",
                        description="Run benchmarks/bench_NAME.py; the arguments after NAME are its "
                                    "own (ldpfast bench NAME --help lists them).")
    pb.add_argument("--list", action="store_true")
    pb.add_argument("--dir", type=existing_dir, default=None,
                    help="benchmarks folder (default: the checkout's, else the installed copy)")
    pb.add_argument("name", nargs="?")
    pb.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pr = sub.add_parser("reproduce", help="reproduce a paper's tables (extra args passed on)",
                        description="Reproduce a paper's tables; the arguments after METHOD are its "
                                    "own (ldpfast reproduce METHOD --help lists them).")
    pr.add_argument("method", choices=REPRODUCIBLE)
    pr.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    pz = sub.add_parser("randomize", help="sharded randomisation on Dask (bit-identical to one machine)")
    pz.add_argument("input", type=existing_dir, help="input shard folder (meta.json + Parquet row blocks)")
    pz.add_argument("output", type=output_dir, help="output folder (must not hold output yet)")
    pz.add_argument("--scheduler", default=None, help="Dask scheduler address, e.g. tcp://host:8786 "
                                                      "(default: a local cluster)")
    pz.add_argument("--workers", type=integer(1), default=2, help="local cluster: worker processes (default 2)")
    pz.add_argument("--memory-limit", default="4GiB", help="local cluster: memory per worker (default 4GiB)")
    pz.add_argument("--edges", choices=("dprr", "rr", "locallap"), default=None)
    pz.add_argument("--edge-eps", type=number(0), default=None, help="edge budget per user, > 0")
    pz.add_argument("--eps1", type=number(0), default=None, help="DPRR degree budget (default: paper eq. 8)")
    pz.add_argument("--n-max", type=integer(2), default=None, help="DPRR n_max of eq. 8 (default: num_nodes)")
    pz.add_argument("--dprr-alpha", type=number(0, hi=1, high_open=True), default=0.9,
                    help="DPRR alpha of eq. 8, in (0, 1) (default 0.9)")
    pz.add_argument("--max-output-edges", type=integer(0), default=50_000_000, help="RR output guard")
    pz.add_argument("--features", choices=("grr", "grr_fs", "onebit", "multibit"), default=None)
    pz.add_argument("--feature-eps", type=number(0), default=None,
                    help="feature budget (grr: per value; grr_fs: eps_x; onebit/multibit: per node)")
    pz.add_argument("--k", type=integer(1), default=None, help="grr / grr_fs: domain size of every column")
    pz.add_argument("--m", type=integer(1), default=None, help="grr_fs: sampled features; multibit: sampled dims")
    pz.add_argument("--range", type=number(), nargs=2, default=(0.0, 1.0), metavar=("ALPHA", "BETA"),
                    help="onebit / multibit: public feature range (default 0 1)")
    pz.add_argument("--labels", type=integer(1), default=None, metavar="NUM_CLASSES", help="randomise labels")
    pz.add_argument("--label-eps", type=number(0), default=None, help="label budget per user, > 0")
    pz.add_argument("--no-label-mask", action="store_true", help="randomise every label (ignore y_mask)")
    pz.add_argument("--seed", type=seed, default=None,
                    help="secret seed in [0, 2**64) (default: from the OS); never written to the output")
    pz.add_argument("--seed-file", type=existing_file, default=None,
                    help="read the secret from this key file instead (`ldpfast secret new FILE` makes one; needed "
                         "with user ids or --store, where an int seed is refused)")
    pz.add_argument("--dataset", default="default",
                    help="the dataset's name: two datasets under one secret never share bits (default 'default')")
    pz.add_argument("--store", type=output_file, default=None, metavar="SQLITE",
                    help="per-user report store (needs shards with user_id): unchanged users cost nothing, new "
                         "reports are charged to each user across runs")
    pz.add_argument("--create-store", action="store_true",
                    help="with --store: create the store if the file does not exist (only the first time: a "
                         "missing store is otherwise an error, so that a lost store is noticed)")
    pz.add_argument("--no-store", action="store_true",
                    help="release without a report store (a one-off release: nothing accounts it across runs)")
    pz.add_argument("--budget", type=number(0), default=None,
                    help="with --store: cap on each user's total per privacy relation; users over it are withheld")
    pz.add_argument("--engine", choices=("cpp", "numba"), default="cpp",
                    help="DPRR/RR sampler per shard: cpp (fast, 32 bytes per node per task) or numba "
                         "(shard rows only); same output")
    pz.add_argument("--no-progress", action="store_true")
    _audit_parser(sub)
    ps = sub.add_parser("secret", help="make a secret key file for memoised reports")
    ss = ps.add_subparsers(dest="secret_cmd", required=True)
    psn = ss.add_parser("new", help="write a fresh 256-bit secret to a new key file (mode 0600)")
    psn.add_argument("path", help="the key file to create (never overwritten)")
    return p


def _line_buffered() -> None:
    """Progress lines reach a pipe as they are printed, not when the process ends."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.reconfigure(line_buffering=True)
        except (AttributeError, ValueError, OSError):  # not a text file (a test's capture)
            pass


def _run(argv: list[str] | None, parsed: dict) -> int:
    """Parse and run one command (:func:`main` turns the input errors into one line)."""
    _line_buffered()
    parser = build_parser()
    args = parser.parse_args(argv)
    parsed["args"] = args
    if args.cmd == "info":
        return cmd_info(args)
    if args.cmd == "demo":
        return cmd_demo(args)
    if args.cmd == "bench":
        return cmd_bench(args, args.args)
    if args.cmd == "randomize":
        return cmd_randomize(args)
    if args.cmd == "audit":
        return cmd_audit(args)
    if args.cmd == "secret":
        return cmd_secret(args)
    return cmd_reproduce(args, args.args)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``ldpfast`` command; returns the exit status (2: bad input, in one
    line; ``--debug`` for the traceback)."""
    parsed: dict = {}
    return run_command(lambda: _run(argv, parsed), parsed)


if __name__ == "__main__":
    raise SystemExit(main())
