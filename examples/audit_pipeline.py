"""Audit a three-release pipeline: is what the report store charged a bound on what leaks?

The pipeline randomises features (MultiBit), labels (RRLabels) and edges (RREdges) with user
keys and a :class:`ldpfast.privacy.ReportStore`, three times, while the population changes
(``--change``: users join between releases, rows are shuffled, one attribute or edge is
edited, ...).  :func:`ldpfast.privacy.audit.audit_pipeline` plants canary users whose inputs
it controls, attacks the three releases (thresholds, majority votes, flips between releases,
output patterns; the test chosen on half of the canaries) and prints, per relation and number
of releases k, ``eps_lb`` (a lower bound on eps at 95% confidence, Clopper-Pearson) beside the
store's charge.  ``eps_lb`` above the charge refutes the charge; below it proves nothing.

    python examples/audit_pipeline.py [--change join edit] [--canaries 2000] [--json a.json] [--plot a.png] [--quick]

See docs/privacy_audit.md for what the bound means and how tight it is.
"""
from __future__ import annotations

import argparse
import json
import os

from ldpfast.privacy.audit import CHANGE_MODELS, audit_pipeline, plot_reports


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--change", nargs="+", default=["join", "edit"], choices=sorted(CHANGE_MODELS),
                    help="change models to audit, one audit each (default: join edit)")
    ap.add_argument("--releases", type=int, default=3)
    ap.add_argument("--canaries", type=int, default=2000, help="canary users per world (default 2000)")
    ap.add_argument("--eps-x", type=float, default=1.0, help="features (MultiBit), per user and report")
    ap.add_argument("--eps-y", type=float, default=1.0, help="labels (RRLabels), per user and report")
    ap.add_argument("--eps-edges", type=float, default=1.0, help="edges (RREdges), per user and report")
    ap.add_argument("--json", default=None, help="save the reports here")
    ap.add_argument("--plot", default=None, help="save eps_lb and the charge against k here (PNG)")
    ap.add_argument("--quick", action="store_true", help="300 canaries per world (seconds)")
    args = ap.parse_args(argv)
    canaries = 300 if args.quick else args.canaries
    stages = [("MultiBit", {"eps": args.eps_x}), ("RRLabels", {"eps": args.eps_y}),
              ("RREdges", {"eps": args.eps_edges})]
    reports, refuted = [], []
    for change in args.change:
        print(f"change model {change!r}: {CHANGE_MODELS[change]}")
        # a fresh secret per audit (os.urandom), a temporary store; seed: the canaries' placement
        res = audit_pipeline(stages, change=change, releases=args.releases, canaries=canaries,
                             secret=os.urandom(16), seed=0)
        for rel, rep in res.items():
            reports.append(rep)
            print(f"  {rel} ({rep.mechanism}), {rep.canaries} canaries per world:")
            for p in rep.points:
                mark = "REFUTED" if p.refuted else "ok"
                print(f"    releases k={p.releases}: eps_lb {p.eps_lb:6.3f}   charge {p.charge:6.3f}   {mark:8s}"
                      f" (test: {p.test})")
            if rep.refuted:
                refuted.append(f"{rel} under {change!r}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([r.to_dict() for r in reports], f, indent=1, default=str)
        print(f"saved {args.json}")
    if args.plot:
        plot_reports(reports, args.plot)
        print(f"saved {args.plot}")
    if refuted:
        print("the store's charge is refuted (eps_lb above it, 95% confidence) for: " + "; ".join(refuted))
    else:
        print("no charge refuted: every eps_lb is at most the store's charge (a lower bound, not a proof of privacy)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
