"""Throughput and peak memory of GRR-FS and the multi-bit encoder.

Cases: 1,000,000 x 128 and 3,072,441 x 64 (Orkut-sized node count).  For each case:

* ``ldpfast`` - the public API (:func:`ldpfast.mechanisms.grr_fs` /
  :func:`ldpfast.mechanisms.multibit_encode`), including full input validation and output
  allocation;
* ``torch_vectorised`` - a straightforward vectorised torch version written the way the
  papers' code does it (top-k of uniforms to sample ``m`` of ``d`` per row, then
  ``bernoulli`` / ``randint`` / ``where`` on whole matrices; the multi-bit one is LPGNN's
  ``MultiBit.__call__`` up to the rectification);
* ``torch_rgnn_loop`` (GRR-FS only, smaller case only unless ``--all``) - RGNN's own code
  structure: a Python loop over features with ``one_hot`` + ``multinomial``;
* ``memcpy_prealloc`` - ``out.copy_(x)`` into a preallocated tensor (same bytes as the
  input), and ``memcpy_clone`` - ``x.clone()`` (allocation + copy, like our call).

Run: ``python benchmarks/bench_mechanisms.py [--quick] [--threads N] [--out results]``.
Ratios: ``speedup_vs_<impl>`` = time(impl) / time(ldpfast) in the same run.
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import sys
from functools import partial

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import add_ratios, time_call, write_report

import ldpfast
from ldpfast.mechanisms import grr_fs, multibit_encode


# --- baselines --------------------------------------------------------------------------------
def torch_grr_fs(x: torch.Tensor, gamma: int, eps_x: float, m: int) -> torch.Tensor:
    """Vectorised GRR-FS: sample m of d by top-k of uniforms (as RGNN's perturb.py), GRR on
    the sampled entries, uniform values elsewhere."""
    n, d = x.shape
    idx = torch.rand(n, d).topk(m, dim=1).indices
    sel = torch.zeros(n, d, dtype=torch.bool).scatter_(1, idx, True)
    del idx
    e = math.exp(eps_x)
    p = e / (e + gamma - 1)
    keep = torch.rand(n, d) < p
    other = torch.randint(0, gamma - 1, (n, d))
    other += (other >= x).to(other.dtype)
    grr = torch.where(keep, x, other)
    del keep, other
    unif = torch.randint(0, gamma, (n, d))
    return torch.where(sel, grr, unif)


def torch_rgnn_loop(x: torch.Tensor, gamma: int, eps_x: float, m: int) -> torch.Tensor:
    """RGNN's perturb.GRRFS structure: per-feature one_hot + multinomial (binary domains)."""
    n, d = x.shape
    out = x.clone()
    idx = torch.rand(n, d).topk(m, dim=1).indices
    sel = torch.zeros(n, d, dtype=torch.bool).scatter_(1, idx, True)
    e = math.exp(eps_x)
    p = e / (e + gamma - 1)
    q = (1 - p) / (gamma - 1)
    for i in range(d):
        xm = torch.nn.functional.one_hot(x[:, i], num_classes=gamma)
        p_grr = xm * p + (1 - xm) * q
        p_unif = torch.full(xm.shape, 1.0 / gamma)
        grr = torch.multinomial(p_grr, 1).squeeze(1)
        unif = torch.multinomial(p_unif, 1).squeeze(1)
        col = out[:, i]
        col[sel[:, i]] = grr[sel[:, i]]
        col[~sel[:, i]] = unif[~sel[:, i]]
    return out


def torch_multibit(x: torch.Tensor, eps: float, m: int, alpha=0.0, beta=1.0) -> torch.Tensor:
    """LPGNN mechanisms.MultiBit.__call__ up to (not including) the rectifier."""
    BigS = torch.rand_like(x).topk(m, dim=1).indices
    s = torch.zeros_like(x, dtype=torch.bool).scatter(1, BigS, True)
    del BigS
    em = math.exp(eps / m)
    p = (x - alpha) / (beta - alpha)
    p = (p * (em - 1) + 1) / (em + 1)
    t = torch.bernoulli(p)
    return s * (2 * t - 1)


# --- run --------------------------------------------------------------------------------------
def bench_case(rows, name, impls, elements, repeat, warmup):
    for impl, fn, rep in impls:
        gc.collect()
        # a slow baseline given rep = 1 runs once, without warm-up
        r = time_call(fn, repeat=rep or repeat, warmup=0 if rep == 1 else warmup)
        rows.append({"case": name, "impl": impl, "median_s": r["median_s"], "min_s": r["min_s"],
                     "throughput_Melem_s": elements / r["median_s"] / 1e6,
                     "peak_rss_mib": r["peak_rss_mib"],
                     "added_rss_mib": r["peak_rss_mib"] - r["base_rss_mib"]})
        print(f"  {name:28s} {impl:18s} {r['median_s']:.3f} s", flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    ap.add_argument("--all", action="store_true", help="run the RGNN loop baseline on every case")
    ap.add_argument("--threads", type=int, default=None, help="threads for ldpfast and torch")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    if args.threads:
        ldpfast.set_num_threads(args.threads)
        torch.set_num_threads(args.threads)
    sizes = [(100_000, 128), (307_244, 64)] if args.quick else [(1_000_000, 128), (3_072_441, 64)]
    gamma, eps_x, m_fs = 2, 1.0, 10
    eps_mb = 1.0
    rows: list[dict] = []
    g = torch.Generator().manual_seed(0)
    for n, d in sizes:
        elements = n * d
        # GRR-FS on binary features (RGNN's grouped features), int64 as torch stores them.
        x = (torch.rand(n, d, generator=g) < 0.3).to(torch.int64)
        pre = torch.empty_like(x)
        impls = [
            ("ldpfast", partial(grr_fs, x, gamma, eps_x, m_fs, seed=1), None),
            ("torch_vectorised", partial(torch_grr_fs, x, gamma, eps_x, m_fs), None),
            ("memcpy_prealloc", partial(pre.copy_, x), None),
            ("memcpy_clone", x.clone, None),
        ]
        if args.all or (n, d) == sizes[0]:
            impls.insert(2, ("torch_rgnn_loop", partial(torch_rgnn_loop, x, gamma, eps_x, m_fs), 1))
        bench_case(rows, f"grr_fs int64 {n}x{d} m={m_fs}", impls, elements, args.repeat, 1)
        del x, pre
        gc.collect()
        # Multi-bit encoder on float32 features in [0, 1], m = m*(eps) = 1.
        xf = torch.rand(n, d, generator=g)
        pre = torch.empty_like(xf)
        m_mb = ldpfast.privacy.optimal_m(eps_mb, d)
        impls = [
            ("ldpfast", partial(multibit_encode, xf, eps_mb, seed=1), None),
            ("torch_vectorised", partial(torch_multibit, xf, eps_mb, m_mb), None),
            ("memcpy_prealloc", partial(pre.copy_, xf), None),
            ("memcpy_clone", xf.clone, None),
        ]
        bench_case(rows, f"multibit float32 {n}x{d} m={m_mb}", impls, elements, args.repeat, 1)
        del xf, pre
        gc.collect()
    add_ratios(rows)
    name = "bench_mechanisms_quick" if args.quick else "bench_mechanisms"
    write_report(name, rows, out_dir=args.out)


if __name__ == "__main__":
    main()
