"""RGNN server-side reconstruction at scale (paper 000, Algorithms 1-3; DESIGN.md "Scale").

    python benchmarks/bench_rgnn.py [--preset orkut|small] [--dim 64] [--domain 4] [--k 4]
                                    [--metis-nodes 1000000] [--threads 2] [--out results]

1. ``reconstruct_features`` (Algorithm 1: ``K`` hops of ``MEAN({v} u N(v))`` over the
   GRR-FS reports, the eq. (5) estimator and the argmax) with each ``--methods`` entry:
   ``counts`` (default; blockwise over features, first hop = category counts of the
   reports, ``--block`` value columns per block, one row per value given) and ``onehot``
   (the reference: one propagation of the whole one-hot float matrix) on the preset graph with ``d`` categorical features of domain
   ``gamma``: ``orkut`` is :func:`ldpfast.datasets.orkut_like` (3.07M nodes, 117M
   undirected edges, CSR only), ``small`` a 100k-node synthetic power-law graph with the
   same mean degree.  Features are class-dependent (value ``proto[y, i]`` with probability
   0.8, else uniform), reported with GRR-FS (``eps_x``, ``m``); the reconstruction accuracy
   next to the raw reports' is printed as a sanity check.
2. ``reconstruct_labels`` (Algorithm 2, masked propagation of 75% labelled nodes, ``K``
   hops) on the same graph.
3. ``metis_bags`` (pymetis, ``C`` bags) on a separate synthetic graph of ``--metis-nodes``
   nodes (default 1M, mean degree 20): METIS on the 117M-edge Orkut graph would need its
   own copy of the graph in METIS' int64 format plus the multilevel coarsening hierarchy
   (several times the 1.9 GB adjacency) and tens of minutes on one core, so it is measured
   on the smaller graph and reported separately.
4. ``small`` preset only: the same reconstruction written as Algorithm 1 reads (a Python
   loop over the d features, each propagated on its own with ``torch.sparse.mm`` on the
   row-normalised CSR adjacency with self loops), as a baseline.

Each case reports median time (1 run on ``orkut``), peak RSS during the call (VmHWM reset
before it; the whole process, graph and reports included) and the RSS before it.  The
reports are held as int8 (``n x d`` bytes) once GRR-FS has run.  ``--skip-labels`` and
``--skip-metis`` leave out steps 2 and 3.
"""
from __future__ import annotations

import argparse
import gc
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ldpfast
from benchmarks.harness import add_ratios, building, time_call, write_report
from ldpfast.graph import CSR, csr_of
from ldpfast.mechanisms import grr_fs, rr_labels
from ldpfast.methods import rgnn

ORKUT_N = 3_072_441
ORKUT_E = 117_185_083
MIB = 2.0**20


def load_graph(preset: str):
    from ldpfast.datasets import orkut_like, synthetic

    if preset == "orkut":
        name = "orkut_like(seed=0)"
        t0 = building("bench_rgnn", name)
        data = orkut_like(seed=0)
    else:
        name = "synthetic(100000, avg_degree=76.3, seed=0)"
        t0 = building("bench_rgnn", name)
        data = synthetic(100_000, avg_degree=2 * ORKUT_E / ORKUT_N, num_classes=2, seed=0,
                         edge_index=False)
    csr = data.csr if isinstance(getattr(data, "csr", None), CSR) else csr_of(data)
    y = data.y
    del data
    gc.collect()
    print(f"[bench_rgnn] loaded {name}: n={csr.num_nodes}, nnz={csr.nnz} in "
          f"{time.perf_counter() - t0:.1f} s", flush=True)
    return csr, y, name


def class_features(y: torch.Tensor, d: int, gamma: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    c = int(y.max()) + 1
    proto = torch.randint(0, gamma, (c, d), generator=g, dtype=torch.int32)
    x = proto[y]
    noise = torch.rand(x.shape, generator=g) >= 0.8
    x[noise] = torch.randint(0, gamma, (int(noise.sum()),), generator=g, dtype=torch.int32)
    return x


def loop_reference(xr: torch.Tensor, csr: CSR, gamma: int, eps: float, m: int, k: int):
    """Algorithm 1 as written: one feature at a time, torch.sparse.mm mean aggregation."""
    from ldpfast.privacy.ldp import grr_probs

    warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
    n, d = xr.shape
    ei = csr.to_edge_index()
    loops = torch.arange(n)
    row = torch.cat([ei[0], loops])
    col = torch.cat([ei[1], loops])
    deg = torch.bincount(row, minlength=n).to(torch.float32)
    A = torch.sparse_coo_tensor(torch.stack([row, col]), 1.0 / deg[row], (n, n),
                                check_invariants=True).to_sparse_csr()
    p, q = grr_probs(eps, gamma)
    out = torch.empty(n, d, dtype=torch.int64)
    for i in range(d):
        lam = torch.nn.functional.one_hot(xr[:, i].long(), gamma).to(torch.float32)
        for _ in range(k):
            lam = A @ lam
        pi = lam * d / (m * (p - q)) + (m - d - m * gamma * q) / (m * gamma * (p - q))
        out[:, i] = pi.argmax(1)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", choices=["orkut", "small"], default="orkut")
    ap.add_argument("--dim", type=int, default=64, help="categorical features d")
    ap.add_argument("--domain", type=int, default=4, help="domain size gamma of every feature")
    ap.add_argument("--k", type=int, default=4, help="hops K_x = K_y")
    ap.add_argument("--m", type=int, default=10)
    ap.add_argument("--eps-x", type=float, default=1.0)
    ap.add_argument("--eps-y", type=float, default=1.0)
    ap.add_argument("--C", type=int, default=128, help="METIS bags")
    ap.add_argument("--metis-nodes", type=int, default=None,
                    help="nodes of the METIS graph (default 1M for orkut, 100k for small)")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--methods", nargs="+", default=["counts"], choices=["counts", "onehot"])
    ap.add_argument("--block", type=int, nargs="+", default=[None],
                    help="value columns per block of the counts method (default: the library's)")
    ap.add_argument("--index-dtype", default="int64", choices=["int64", "int32", "int16", "int8"],
                    help="dtype of the reconstructed indices (reconstruct_features(index_dtype=))")
    ap.add_argument("--skip-labels", action="store_true")
    ap.add_argument("--skip-metis", action="store_true")
    ap.add_argument("--out", default="results")
    a = ap.parse_args(argv)
    if a.threads:
        ldpfast.set_num_threads(a.threads)
        torch.set_num_threads(a.threads)
    repeat = a.repeat or (1 if a.preset == "orkut" else 3)
    warmup = 0 if a.preset == "orkut" else 1
    command = "python benchmarks/bench_rgnn.py " + " ".join(argv if argv is not None else sys.argv[1:])
    rows = []

    csr, y, gname = load_graph(a.preset)
    n, d, g = csr.num_nodes, a.dim, a.domain
    x = class_features(y, d, g)
    t0 = time.perf_counter()
    xr, _ = grr_fs(x, g, a.eps_x, a.m, seed=1)
    t_grr = time.perf_counter() - t0
    print(f"[bench_rgnn] GRR-FS on {n} x {d}: {t_grr:.2f} s", flush=True)
    if g <= 127:  # n x d bytes from here on (the reports' int32 copy alone is 4x that)
        x, xr = x.to(torch.int8), xr.to(torch.int8)
    gc.collect()
    base = {"graph": gname, "n": n, "nnz": csr.nnz, "d": d, "gamma": g, "K": a.k, "m": a.m,
            "threads": ldpfast.get_num_threads()}

    # 1. Algorithm 1
    res = {}
    acc_raw = float((xr == x).float().mean())
    onehot_mib = n * d * (g - 1) * 4 / MIB
    ref = None
    for method in a.methods:
        for blk in (a.block if method == "counts" else [None]):
            t = time_call(lambda xr=xr, csr=csr, method=method, blk=blk: res.__setitem__(
                "rec", rgnn.reconstruct_features(xr, csr, g, a.eps_x, a.m, a.k, output="index",
                                                 method=method, block=blk,
                                                 index_dtype=getattr(torch, a.index_dtype))),
                repeat=repeat, warmup=warmup)
            rec = res.pop("rec")
            acc_rec = float((rec == x).float().mean())
            row = {"case": f"reconstruct_features {a.preset}", "impl": f"ldpfast {method}",
                   "method": method, "block": blk, "index_dtype": a.index_dtype, **base, **t,
                   "nnz_cols_per_s": csr.nnz * d * (g - 1) * a.k / t["median_s"],
                   "onehot_mib": onehot_mib, "acc_raw": acc_raw, "acc_reconstructed": acc_rec}
            if ref is None:
                ref = rec.to(torch.int8 if g <= 127 else torch.int64)
            else:  # every method and block gives the same bits
                row["identical_to_first"] = bool(torch.equal(rec.to(ref.dtype), ref))
            rows.append(row)
            print(f"[bench_rgnn] features ({method}, block {blk}): {t['median_s']:.1f} s, peak "
                  f"{t['peak_rss_mib']:.0f} MiB (base {t['base_rss_mib']:.0f}), load "
                  f"{t['loadavg_1m']:.2f}; accuracy raw {acc_raw:.3f} -> reconstructed "
                  f"{acc_rec:.3f}", flush=True)
            del rec
            gc.collect()
    if a.preset == "small":
        t = time_call(lambda xr=xr, csr=csr: res.__setitem__(
            "ref", loop_reference(xr, csr, g, a.eps_x, a.m, a.k)), repeat=1, warmup=0)
        # float32 sums in another order: an argmax may flip on near-ties, nothing more
        agree = float((res.pop("ref") == ref).float().mean())
        assert agree > 0.999, f"loop reference disagrees on {1 - agree:.2%} of the entries"
        rows.append({"case": f"reconstruct_features {a.preset}",
                     "impl": "torch loop over features (sparse.mm)", **base, **t,
                     "argmax_agreement": agree})
    del ref, x, xr
    gc.collect()

    # 2. Algorithm 2
    if a.skip_labels and a.skip_metis:
        write_report(f"bench_rgnn_{a.preset}", add_ratios(rows), a.out, command=command)
        return
    mask = torch.rand(n, generator=torch.Generator().manual_seed(2)) < 0.75
    c = int(y.max()) + 1
    yr, _ = rr_labels(y, c, a.eps_y, seed=3, mask=mask)
    t = time_call(lambda yr=yr, mask=mask, csr=csr: res.__setitem__(
        "lab", rgnn.reconstruct_labels(yr, mask, csr, c, a.eps_y, a.k)), repeat=repeat,
        warmup=warmup)
    lab = res.pop("lab")
    rows.append({"case": f"reconstruct_labels {a.preset}", "impl": "ldpfast", **base, "d": c,
                 **t, "acc_raw": float((yr[mask] == y[mask]).float().mean()),
                 "acc_reconstructed": float((lab[mask] == y[mask]).float().mean())})
    print(f"[bench_rgnn] labels: {t['median_s']:.1f} s, peak {t['peak_rss_mib']:.0f} MiB",
          flush=True)
    del csr, y, yr, lab, mask
    gc.collect()

    # 3. METIS bags on a smaller graph
    from ldpfast.datasets import synthetic

    mn = a.metis_nodes or (1_000_000 if a.preset == "orkut" else 100_000)
    gm = synthetic(mn, avg_degree=20.0, num_classes=2, seed=0, edge_index=False).csr
    tm: dict = {}
    t = time_call(lambda: rgnn.metis_bags(gm, a.C, 0, timings=tm), repeat=1, warmup=0)
    rows.append({"case": "metis_bags", "impl": "pymetis k-way", "graph":
                 f"synthetic({mn}, avg_degree=20, seed=0)", "n": mn, "nnz": gm.nnz, "C": a.C,
                 **t, "metis_only_s": tm["metis_s"]})
    print(f"[bench_rgnn] METIS: {tm['metis_s']:.1f} s on n={mn}, nnz={gm.nnz}", flush=True)

    write_report(f"bench_rgnn_{a.preset}", add_ratios(rows), a.out, command=command)


if __name__ == "__main__":
    main()
