"""The per-user report store (``ldpfast.privacy.ReportStore``) at the Orkut-like graph's size.

3,072,441 users (``ldpfast.datasets.orkut_like``'s node count), each with a label report:

* ``derive report ids``: the per-user report ids of one release (the ``userkey`` kernels: a
  keyed digest of each user's label, the key chain; what a transform computes for a store);
* ``release 1 (all new)``: the first release, every user charged (one SQLite transaction);
* ``release 2 (unchanged)``: the same reports again, every user found and nothing charged;
* ``release 3 (1% changed)``: 1% of the users changed their label: those are charged;
* ``summary``: every user's total per relation, max / median / p99 (reads every total);
* ``epsilon(user) x 1000``: point lookups;
* ``numpy_save`` baseline: writing the (user, report id) arrays with ``np.save`` (the bytes
  the store must at least move), in the same run.

File size (database plus write-ahead log) after each release is in the JSON.

Run: ``python benchmarks/bench_store.py [--users N] [--quick] [--out results]``.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import current_peak_rss_mib, write_report

from ldpfast.privacy import ReportStore
from ldpfast.privacy.users import context, report_keys

ORKUT_USERS = 3_072_441


def _size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*")) / 2**20


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--users", type=int, default=ORKUT_USERS)
    ap.add_argument("--quick", action="store_true", help="100,000 users (smoke test)")
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    n = 100_000 if args.quick else args.users
    g = torch.Generator().manual_seed(0)
    users = torch.randperm(n, generator=g)
    y = torch.randint(0, 7, (n,), generator=g)
    ctx = context(12345, "orkut-like", "rr_labels", {"eps": 1.0, "num_classes": 7, "dtype": "torch.int64"})
    rows: list[dict] = []

    def row(case, seconds, **extra):
        rows.append({"case": case, "impl": "ldpfast", "seconds": seconds, "users": n,
                     "Musers_s": n / seconds / 1e6 if seconds > 0 else float("nan"), **extra})
        print(f"  {case:28s} {seconds:8.3f} s  {extra}", flush=True)

    t = time.perf_counter()
    _, rids = report_keys(ctx, users, y, ids=True)
    row("derive report ids", time.perf_counter() - t)
    ukeys = users.numpy()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "reports.sqlite"
        store = ReportStore(path, create=True)
        kw = {"dataset": "orkut-like", "mechanism": ctx.mechanism, "params_digest": ctx.params_digest, "params": ctx.params,
                  "relation": "node-ldp", "eps": 1.0, "delta": 0.0}
        t = time.perf_counter()
        r = store.release(users=ukeys, rids=rids, **kw)
        row("release 1 (all new)", time.perf_counter() - t, new=int(r.new.sum()), file_mib=_size_mib(path))
        t = time.perf_counter()
        r = store.release(users=ukeys, rids=rids, **kw)
        row("release 2 (unchanged)", time.perf_counter() - t, new=int(r.new.sum()), file_mib=_size_mib(path))
        y2 = y.clone()
        changed = torch.randperm(n, generator=g)[: n // 100]
        y2[changed] = (y2[changed] + 1) % 7
        _, rids2 = report_keys(ctx, users, y2, ids=True)
        t = time.perf_counter()
        r = store.release(users=ukeys, rids=rids2, **kw)
        row("release 3 (1% changed)", time.perf_counter() - t, new=int(r.new.sum()), file_mib=_size_mib(path))
        t = time.perf_counter()
        s = store.summary("orkut-like")["node-ldp"]
        row("summary", time.perf_counter() - t, max_eps=s["max"], median_eps=s["median"])
        pick = ukeys[np.random.default_rng(1).integers(0, n, 1000)]
        t = time.perf_counter()
        for u in pick:
            store.epsilon(int(u), dataset="orkut-like")
        row("epsilon(user) x 1000", time.perf_counter() - t)
        store.close()
        base = Path(tmp) / "ids.npy"
        t = time.perf_counter()
        np.save(base, np.stack([ukeys, rids.view(np.int64)]))
        rows.append({"case": "release 1 (all new)", "impl": "numpy_save", "seconds": time.perf_counter() - t,
                     "users": n, "file_mib": base.stat().st_size / 2**20})
    rows[1]["ratio_to_numpy_save"] = rows[1]["seconds"] / rows[-1]["seconds"]
    rows[1]["peak_rss_mib"] = current_peak_rss_mib()
    write_report("bench_store_quick" if args.quick else "bench_store", rows, out_dir=args.out)
    return rows


if __name__ == "__main__":
    main()
