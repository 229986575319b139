"""``ldpfast audit``: the command behind :func:`ldpfast.cli.cmd_audit` (parser in ``ldpfast/cli.py``)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .releases import audit_pipeline
from .report import plot_reports


def _value(text: str):
    try:
        return json.loads(text)
    except ValueError:
        return text


def _stages(args) -> list[dict]:
    mechs = list(args.mechanism)
    eps = list(args.eps) if args.eps else [1.0]
    if len(eps) == 1:
        eps = eps * len(mechs)
    if len(eps) != len(mechs):
        raise SystemExit(f"ldpfast audit: --eps takes one value, or one per mechanism ({len(mechs)}), got {len(eps)}")
    stages = [{"mechanism": m, "eps": e} for m, e in zip(mechs, eps)]
    for p in args.param or []:
        name, sep, val = p.partition("=")
        if not sep or not name:
            raise SystemExit(f"ldpfast audit: --param expects NAME=VALUE or MECHANISM.NAME=VALUE, got {p!r}")
        mech, dot, key = name.rpartition(".")
        if not dot and len(stages) > 1:
            raise SystemExit("ldpfast audit: with several mechanisms, name the one a --param is for "
                             f"(MECHANISM.NAME=VALUE), got {p!r}")
        hit = [s for s in stages if not dot or s["mechanism"] == mech]
        if not hit:
            raise SystemExit(f"ldpfast audit: --param {p!r} names no mechanism of {mechs}")
        for s in hit:
            s[key] = _value(val)
    return stages


def run(args) -> int:
    """Run the audits the parsed ``args`` ask for; print a summary (or JSON); exit status 1 when a
    charge is refuted, else 0."""
    stages = _stages(args)
    keyed = not args.no_keys
    store = False if (args.no_store or not keyed) else (args.store or None)  # None: a temporary one where it can
    changes = args.change or ["static"]
    if args.store and len(changes) > 1:
        raise SystemExit("ldpfast audit: --store PATH holds one audit's canaries: give one --change")
    out, reports = [], []
    for change in changes:
        try:
            res = audit_pipeline(stages, change=change, releases=args.releases, canaries=args.canaries, keyed=keyed,
                                 store=store, seed=args.seed, confidence=args.confidence, eps_sweep=args.eps_sweep,
                                 progress=not args.quiet and sys.stderr.isatty())
        except (ValueError, TypeError) as exc:
            raise SystemExit(f"ldpfast audit: {exc}") from None
        for rep in res.values():
            reports.append(rep)
            out.append(rep.to_dict())
            if not args.quiet:
                print(rep.summary())
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
        print(f"saved {args.json}")
    if args.plot:
        plot_reports(reports, args.plot)
        print(f"saved {args.plot}")
    bad = [r for r in reports if r.refuted]
    for r in bad:
        print(f"ldpfast audit: {r.mechanism} [{r.relation}] change={r.change}: eps_lb {r.eps_lb:.3f} exceeds the "
              f"charge {r.charge:.4g}: the charge is refuted at {r.confidence:.3g} confidence", file=sys.stderr)
    return 1 if bad else 0
