"""Accountants in seconds (issue 38, item 3): calibrating sigma for node-level DP-SGD.

    python benchmarks/bench_accountants.py [--graphs cora orkut] [--eps 4 8] [--methods rdp pld gdp]
                                           [--prv] [--reference] [--out results]

The accountant only needs sizes: ``|V|``, the training set (80% of the nodes, the paper's
split), the expected batch (Cora 256, as ``examples/heterpoisson.py``; the Orkut-like graph
4096, as ``ldpfast.methods.heterpoisson.fit``), ``M`` (2 and 1), 9 epochs (``T = ceil(9 /
q_b)``), ``delta = 1 / |V|^1.1``.  For each graph, target ``eps`` and method:
:meth:`HeterPoissonAccountant.calibrate_sigma` (wall and CPU seconds, the sigma found) and the
figure :meth:`~HeterPoissonAccountant.epsilon` reports at it.  ``--reference``: the time of
one PLD figure of one mixture through ``dp_accounting``'s own ``from_mixture_gaussian_mechanism``
(what every step of the old calibration did, 2-3 degrees per step), against ours.  ``--prv``
adds the PRV accountant (an independent check; slower for large ``T``).
"""
from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.harness import load_average, write_report

GRAPHS = {"cora": (2708, 256, 2.0), "orkut": (3_072_441, 4096, 1.0)}


def _timed(fn, *args, **kwargs):
    c0, t0 = time.process_time(), time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0, time.process_time() - c0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--graphs", nargs="+", default=list(GRAPHS), choices=list(GRAPHS))
    p.add_argument("--eps", nargs="+", type=float, default=[4.0, 8.0])
    p.add_argument("--methods", nargs="+", default=["rdp", "pld", "gdp"], choices=["rdp", "pld", "prv", "gdp"])
    p.add_argument("--prv", action="store_true", help="also the PRV accountant")
    p.add_argument("--reference", action="store_true", help="time one dp_accounting PLD figure (slow)")
    p.add_argument("--out", default="results")
    a = p.parse_args(argv)
    from ldpfast.privacy.accountants import HeterPoissonAccountant, heterpoisson_mixture
    from ldpfast.privacy.accountants.pld import _pld_eps, _pld_eps_reference

    methods = list(dict.fromkeys(a.methods + (["prv"] if a.prv else [])))
    rows = []
    for g in a.graphs:
        n, ebs, M = GRAPHS[g]
        n_train = int(0.8 * n)
        q = min(1.0, ebs / n_train)
        T = math.ceil(9 / q - 1e-9)
        delta = 1.0 / n ** 1.1
        for eps in a.eps:
            for m in methods:
                acc = HeterPoissonAccountant(q, M, n)  # a fresh accountant: no cache from another run
                sigma, wall, cpu = _timed(acc.calibrate_sigma, eps, delta, T, method=m)
                rep, wall_e, cpu_e = _timed(acc.epsilon, sigma, T, delta, method=m)
                row = {"case": f"{g} calibrate eps={eps:g}", "impl": m, "graph": g, "num_nodes": n, "q_b": q, "M": M,
                       "T": T, "delta": delta, "target_eps": eps, "sigma": sigma, "noise_multiplier_opacus": 2 * sigma,
                       "wall_s": wall, "cpu_s": cpu, "reported_eps": rep.eps, "epsilon_wall_s": wall_e,
                       "epsilon_cpu_s": cpu_e, "K": rep.K, "loadavg_1m": load_average()[0]}
                rows.append(row)
                print(f"[bench_accountants] {g} eps {eps:g} {m}: sigma {sigma:.5g} in {wall:.2f} s ({cpu:.2f} CPU-s); "
                      f"epsilon() {rep.eps:.4f} in {wall_e:.2f} s", flush=True)
        if a.reference:
            acc = HeterPoissonAccountant(q, M, n)
            sigma = acc.calibrate_sigma(a.eps[0], delta, T, method="pld")
            K = acc._k_for(T, delta, 10.0, 1e-3)
            c, pr = heterpoisson_mixture(q, M, math.inf, K)
            for impl, fn in (("ldpfast mog_pld", _pld_eps), ("dp_accounting from_mixture_gaussian_mechanism",
                                                               _pld_eps_reference)):
                e, wall, cpu = _timed(fn, c, pr, sigma, T, delta, 1e-3)
                rows.append({"case": f"{g} one PLD figure (Poisson limit, K={K})", "impl": impl, "wall_s": wall,
                             "cpu_s": cpu, "eps": e, "sigma": sigma, "T": T, "loadavg_1m": load_average()[0]})
                print(f"[bench_accountants] {g} one PLD figure, {impl}: {e:.6f} in {wall:.2f} s ({cpu:.2f} CPU-s)",
                      flush=True)
    write_report("bench_accountants", rows, a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
