"""A graph re-released every night as it grows, accounted per user in a report store.

Each night the export holds more users (new rows and their edges), a few users have changed
their label, and the rows come in another order.  The graph is randomised with user keys
(``user_key="user_id"``: a stable id per user) and a :class:`ldpfast.privacy.ReportStore`:

* an unchanged user gets their identical report and the store charges nothing;
* a new user, or a user whose label changed, gets a new report, charged to them;
* with ``--budget``, a user whose next report would pass it is withheld (marked, not reported);
* node-level LDP of attributes (features, labels) and edge LDP are totalled apart.

After each release the script prints every relation's per-user total (max and median) and
what the release charged; ``--json`` saves them.

    python examples/growing_graph.py [--releases 3] [--budget 3] [--store reports.sqlite] [--quick]
"""
from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import torch
from torch_geometric.data import Data

import ldpfast as lf


def night(full: Data, users: torch.Tensor, g: torch.Generator) -> Data:
    """The export of one night: the rows of ``users`` (in a shuffled order) and their edges."""
    rows = users[torch.randperm(users.numel(), generator=g)]
    new = torch.full((full.num_nodes,), -1, dtype=torch.int64)
    new[rows] = torch.arange(rows.numel())
    ei = full.edge_index
    keep = (new[ei[0]] >= 0) & (new[ei[1]] >= 0)
    return Data(x=full.x[rows], y=full.y[rows], user_id=full.user_id[rows], edge_index=new[ei[:, keep]],
                num_nodes=rows.numel())


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--releases", type=int, default=3)
    ap.add_argument("--eps-x", type=float, default=1.0, help="features (MultiBit), per user and report")
    ap.add_argument("--eps-y", type=float, default=1.0, help="labels (RRLabels), per user and report")
    ap.add_argument("--eps-edges", type=float, default=4.0, help="edges (DPRR), per user and report")
    ap.add_argument("--budget", type=float, default=None, help="cap on each user's total per relation")
    ap.add_argument("--store", default=None, help="SQLite file of the store (default: a temporary one)")
    ap.add_argument("--secret", default=None,
                    help="key file of the secret (created on the first night with lf.privacy.load_secret(create=True); "
                         "default: a fresh secret for this run)")
    ap.add_argument("--json", default=None, help="save the per-release totals here")
    ap.add_argument("--root", default=None, help="(unused: Cora is embedded; kept for the examples' test)")
    ap.add_argument("--quick", action="store_true", help="the same run (it takes seconds)")
    args = ap.parse_args(argv)

    full = lf.datasets.load("cora")
    g = torch.Generator().manual_seed(0)
    n = full.num_nodes
    full.user_id = torch.randperm(n, generator=g)  # a stable, dense id per user (e.g. a sign-up number)
    join = torch.randperm(n, generator=g)  # the order in which users join
    # one 256-bit secret for every night (unchanged users keep their report); a small int is refused
    secret = lf.privacy.load_secret(args.secret, create=True) if args.secret else lf.privacy.new_secret()
    path = Path(args.store) if args.store else Path(tempfile.mkdtemp()) / "reports.sqlite"
    # create=True only when the file is new: a store that went missing must not silently restart at zero
    store = lf.privacy.ReportStore(path, budget=args.budget, create=not path.exists())
    kw = {"seed": secret, "user_key": "user_id", "dataset": "cora-nightly", "store": store}
    transforms = [lf.transforms.MultiBit(args.eps_x, **kw), lf.transforms.RRLabels(args.eps_y, mask="all", **kw),
                  lf.transforms.DPRR(args.eps_edges, n_max=n, **kw)]  # n_max: a public bound for every night
    history = []
    for r in range(args.releases):
        k = int(n * (0.8 + 0.2 * r / max(1, args.releases - 1)))
        if r:  # a few users changed their label since the last night
            changed = join[torch.randperm(k, generator=g)[:20]]
            full.y[changed] = (full.y[changed] + 1) % 7
        data = night(full, join[:k], g)
        for t in transforms:
            data = t(data)
        charged = {e.mechanism: e.params["store"] for e in data.ldp_ledger.entries}
        totals = store.summary("cora-nightly")
        history.append({"release": r + 1, "users": k, "charged": charged, "totals": totals})
        print(f"release {r + 1}: {k} users")
        for mech, c in charged.items():
            print(f"  {mech:9s} new reports {c['new']:5d}, unchanged (free) {c['reused']:5d}, "
                  f"withheld {c['withheld']}")
        for rel, v in totals.items():
            print(f"  per-user total, {rel}: max {v['max']:.3g}, median {v['median']:.3g} ({v['users']} users)")
    print(store.describe("cora-nightly"))
    print("privacy spent: " + "; ".join(f"{rel} max {v['max']:.3g}"
                                        for rel, v in store.summary("cora-nightly").items()))
    if args.json:
        Path(args.json).write_text(json.dumps(history, indent=1))
    store.close()
    return {"history": history}


if __name__ == "__main__":
    main()
