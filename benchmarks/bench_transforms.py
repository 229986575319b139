"""Edge transforms end to end (issue 17, part 3): DPRR, RREdges and LocalLap from a PyG Data.

    python benchmarks/bench_transforms.py [--nodes 1000000] [--edges 10000000] [--threads 2]
        [--repeat 3] [--eps 1.0] [--rr-eps 11.0] [--out results]

Graph (built once, public seed 0): ``ei = torch.randint(0, nodes, (2, edges))``, made undirected,
deduplicated and self-loop free by ``ldpfast.graph.clean_edge_index`` (about 2 x edges directed
entries, sorted by (source, target) as PyG's ``coalesce`` leaves them), and its CSR.

Rows, all timed in one run, interleaved (A B C ..., A B C ...), median of ``--repeat``:

* ``sampler`` -- the edge sampler alone on the CSR with DPRR's per-user probabilities of
  this graph: the one-pass kernel (``one-pass``, also writing the edge_index: ``+ei``) and the
  two-pass kernel it replaced (``two-pass``: count, then fill, every draw made twice);
* ``mechanism`` -- ``ldpfast.mechanisms.edges.dprr`` / ``rr_edges`` / ``local_laplace`` on the
  CSR (checks, degree noise, sampling; output as CSR);
* ``transform`` from ``Data(edge_index=...)`` and from a ``Data`` holding only a CSR
  (``data.csr``, as ``ldpfast.datasets.orkut_like`` stores graphs, rows = message sources) and
  from a ``Data`` holding PyG's ``adj_t`` (``T.ToSparseTensor()``: a torch sparse CSR tensor,
  rows = targets): the input fingerprint, the CSR, the mechanism and the output
  ``edge_index`` (or ``csr``, or ``adj_t``);
* ``DPRR before`` -- the DPRR transform's steps as they ran before this change (fingerprint
  then CSR, one after the other; ``to_csr`` + self-loop pass + ``edges_check_csr``; two-pass
  sampler; ``torch.stack`` of the edge_index), checked bit for bit against the new transform.

Throughput is in millions of *input* directed edges per second (the issue's unit); output
sizes, peak RSS (``VmHWM`` reset before each call) and the 1-minute load average are
reported beside it.  Stage breakdowns of the DPRR transform and of the LocalLap mechanism (each
stage timed alone, wall and CPU seconds) say where the time goes.
"""
from __future__ import annotations

import argparse
import gc
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import ldpfast
from benchmarks.harness import (
    building,
    load_average,
    require_backend,
    time_interleaved,
    write_report,
)
from ldpfast.graph import CSR, clean_edge_index, to_csr
from ldpfast.mechanisms import edges as E
from ldpfast.privacy.report_once import fingerprint, fingerprint_key, graph_identity
from ldpfast.privacy.users import Keying
from ldpfast.rng import Stream

MIB = 2.0**20
SECRET = 12345  # the transforms' secret seed: a benchmark constant, not a user's secret


def nbytes(*ts) -> int:
    return sum(t.numel() * t.element_size() for t in ts if t is not None)


def csr_bytes(c: CSR) -> int:
    return nbytes(c.rowptr, c.col)


def build_graph(n: int, m: int):
    t0 = building("bench_transforms", f"randint graph n={n}, {m} random pairs -> clean_edge_index")
    g = torch.Generator().manual_seed(0)
    ei = torch.randint(0, n, (2, m), generator=g)
    ei = clean_edge_index(torch.cat([ei, ei.flip(0)], 1), n)
    csr = to_csr(ei, n)
    print(f"[bench_transforms] n={n}, {ei.size(1)} directed edges in {time.perf_counter() - t0:.1f} s", flush=True)
    return ei, csr


def data_ei(ei, n):
    from torch_geometric.data import Data

    return Data(edge_index=ei, num_nodes=n)


def adj_t_of(ei, n):
    """PyG's ``T.ToSparseTensor()`` of ``Data(edge_index=ei)`` (torch_sparse absent: a torch sparse
    CSR tensor, int64 indices, float32 unit values), built once outside the timing."""
    import warnings

    import torch_geometric.transforms as T
    from torch_geometric.data import Data

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return T.ToSparseTensor()(Data(edge_index=ei, num_nodes=n)).adj_t


def data_adj_t(adj_t, n):
    from torch_geometric.data import Data

    return Data(adj_t=adj_t, num_nodes=n)


def data_csr(csr):
    from torch_geometric.data import Data

    d = Data(num_nodes=csr.num_nodes)
    d.csr = csr
    d.__dict__["csr"] = csr  # how ldpfast.datasets stores CSR-only graphs
    return d


def dprr_probs(csr: CSR, eps: float, seed: int):
    """DPRR's per-user (p_true, p_false) for this graph (as ldpfast.mechanisms.edges._dprr)."""
    n = csr.num_nodes
    eps1, eps2 = E.dprr_budget(eps, n)
    g, t, s, _ = E._grid("eps1", eps1)
    k = ldpfast._backend.get("cpu", "cpp")
    noise = np.empty((n, 1), dtype=np.int64)
    k.fill_discrete_laplace(noise, seed, int(Stream.DPRR_DEGREE), 0, t, s)
    d_star = csr.degrees().numpy().astype(np.float64) + g * noise[:, 0].astype(np.float64)
    _, _, _, pt, pf = E._bit_probs(d_star, n, eps2)
    return pt, pf


def transform_seed(data, eps: float) -> int:
    """The seed the DPRR transform (no user keys, no public users, eq. 8 defaults) derives for
    ``data``: the graph's keyed identity and every parameter (ldpfast.privacy.users)."""
    n = int(data.num_nodes)
    eps1, eps2 = E.dprr_budget(eps, n)
    g, t, s, eps1_used = E._grid("eps1", eps1)
    while eps1_used + eps2 > eps:
        eps2 = math.nextafter(eps2, 0.0)
    law = {"eps1": eps1, "eps1_used": eps1_used, "eps2": eps2, "granularity": g, "dlap_t": t, "dlap_s": s}
    ky = Keying(SECRET, graph=graph_identity(SECRET, data))
    return E._graph_seed(ky, "dprr", {**law, "n": n, "n_max": n, "alpha": 0.9}, np.empty(0, np.uint8))


def dprr_before(data, eps: float):
    """The DPRR transform's work before issue 17 part 3, step by step (same output bits)."""
    import copy

    from ldpfast.privacy.budget import Ledger

    seed = transform_seed(data, eps)  # fingerprint first, alone
    ei = data.edge_index
    bool((ei[0] == ei[1]).any())  # the old self-loop pass
    csr = to_csr(ei, int(data.num_nodes))  # counting sort + sort/unique
    k = ldpfast._backend.get("cpu", "cpp")
    assert k.edges_check_csr(csr.rowptr.numpy(), csr.col.numpy()) == 0
    n = csr.num_nodes
    eps1, eps2 = E.dprr_budget(eps, n)
    g, t, s, _ = E._grid("eps1", eps1)
    noise = np.empty((n, 1), dtype=np.int64)
    k.fill_discrete_laplace(noise, seed, int(Stream.DPRR_DEGREE), 0, t, s)
    d_star = csr.degrees().numpy().astype(np.float64) + g * noise[:, 0].astype(np.float64)
    _, _, _, pt, pf = E._bit_probs(d_star, n, eps2)
    noisy = E._rr_sample_two_pass(csr, pt, pf, seed, backend="cpp")  # count + fill
    row = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(noisy.rowptr.numpy())))
    out = copy.copy(data)
    out.edge_index = torch.stack([noisy.col.to(torch.int64), row])
    out.ldp_ledger = Ledger(list(Ledger.of(data).entries))
    return out


def general_csr(ei, n, k):
    c = to_csr(ei, n)
    assert k.edges_check_csr(c.rowptr.numpy(), c.col.numpy()) == 0
    return c


def stages(ei, csr, eps, repeat):
    """Each stage of the DPRR transform timed alone (median wall, s)."""
    n = csr.num_nodes
    d = data_ei(ei, n)
    seed = transform_seed(d, eps)
    pt, pf = dprr_probs(csr, eps, seed)
    k = ldpfast._backend.get("cpu", "cpp")
    eps1, _ = E.dprr_budget(eps, n)
    _, t, s, _ = E._grid("eps1", eps1)
    noise = np.empty((n, 1), dtype=np.int64)
    steps = {
        "fingerprint (keyed, of the Data)": lambda: fingerprint(d, fingerprint_key(SECRET)),
        "CSR from the sorted edge_index, checked (one pass)": lambda: E._sorted_csr(ei, n, "cpp"),
        "CSR by to_csr + edges_check_csr (general path)": lambda: general_csr(ei, n, k),
        "degree noise (n exact discrete Laplace draws)": lambda: k.fill_discrete_laplace(
            noise, seed, int(Stream.DPRR_DEGREE), 0, t, s),
        "sampler, one pass, CSR only": lambda: E._rr_sample(csr, pt, pf, seed, backend="cpp"),
        "sampler, one pass, CSR + edge_index": lambda: E._rr_sample_ei(
            csr, pt, pf, seed, streams=(Stream.DPRR_TRUE, 0, Stream.DPRR_FALSE, 0), public=None, by_degree=True,
            backend="cpp", layout=0),
    }
    return [_stage("DPRR stage", name, fn, repeat) for name, fn in steps.items()]


def _stage(case, name, fn, repeat):
    """One stage timed alone: median wall and process CPU seconds (CPU time is what a loaded
    machine distorts least)."""
    fn()
    ts, cs = [], []
    for _ in range(repeat):
        c0, t0 = time.process_time(), time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
        cs.append(time.process_time() - c0)
    row = {"case": case, "impl": name, "median_s": float(np.median(ts)), "min_s": min(ts),
           "cpu_median_s": float(np.median(cs)), "loadavg_1m": load_average()[0]}
    print(f"[bench_transforms] {case.lower()} {name}: {row['median_s']:.3f} s (cpu {row['cpu_median_s']:.3f} s)",
          flush=True)
    return row


def locallap_stages(csr, eps, repeat):
    """The LocalLap mechanism's kernels timed alone (round 0, the usual single round): degree
    noise, the true upper entries' candidacy (values for the few candidates only), the zero
    candidates (skip sampling; exact values for the band below the split only) against the
    whole mechanism; the remainder is the top-T selection and the CSR assembly (torch and
    combine kernels)."""
    n = csr.num_nodes
    k = ldpfast._backend.get("cpu", "cpp")
    seed = 4321  # a benchmark constant
    _, t1, s1, _ = E._grid("eps1", eps / 10.0)
    res = E.local_laplace(csr, eps, seed=seed)
    P = res.spent.params
    g2, t2, s2, _ = E._grid("eps2", P["eps2"])
    G2 = round(1.0 / g2)
    lo = int(P["threshold"])
    pi = E._tail(s2 / t2, lo)
    E_u = csr.nnz // 2
    h = E._split_point(s2 / t2, s2, n * (n - 1) // 2 - E_u, E_u, G2, lo, P["T"])
    zhi, split = (E._I64_MAX, False) if h is None else (h, True)
    rp, col = csr.rowptr.numpy(), csr.col.numpy()
    noise = np.empty((n, 1), dtype=np.int64)
    vals = np.empty(csr.nnz, dtype=np.int64)

    def zero_candidates():
        orp = np.empty(n + 1, dtype=np.int64)
        smp = k.locallap_zero_sample(rp, col, seed, 0, pi, lo, zhi, split, t2, s2, orp)
        smp.write(np.empty(smp.nnz, dtype=col.dtype), np.empty(smp.nnz, dtype=np.int64), np.empty(0, np.int64), 0)

    steps = {
        f"degree noise ({n} exact discrete Laplace draws)": lambda: k.fill_discrete_laplace(
            noise, seed, int(Stream.LOCALLAP), 0, t1, s1),
        f"true upper entries ({csr.nnz // 2}: skip sampling, exact values for candidates only)":
            lambda: k.locallap_edge_values(rp, col, seed, t2, s2, G2, 0, lo, E._I64_MAX,
                                           E._tail(s2 / t2, lo - G2), vals),
        f"zero candidates, round 0 ({P['candidates']} candidates: skip sampling, split at {h}, band values)":
            zero_candidates,
        "whole mechanism (CSR)": lambda: E.local_laplace(csr, eps, seed=seed),
    }
    return [_stage("LocalLap stage", name, fn, repeat) for name, fn in steps.items()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nodes", type=int, default=1_000_000)
    ap.add_argument("--edges", type=int, default=10_000_000, help="random pairs before symmetrising")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--eps", type=float, default=1.0, help="DPRR and LocalLap budget")
    ap.add_argument("--rr-eps", type=float, default=11.0,
                    help="RREdges budget (RR outputs ~n^2/(e^eps+1) false edges: 11 keeps it near |E| at n=1M)")
    ap.add_argument("--skip", nargs="*", default=[], choices=["rr", "locallap", "before", "stages"])
    ap.add_argument("--out", default="results")
    args = ap.parse_args(argv)
    command = "python benchmarks/bench_transforms.py " + " ".join(argv if argv is not None else sys.argv[1:])
    require_backend("bench_transforms", "cpp")
    from ldpfast.transforms.edges import DPRR, LocalLap, RREdges

    ldpfast.set_num_threads(args.threads)
    torch.set_num_threads(args.threads)
    n = args.nodes
    ei, csr = build_graph(n, args.edges)
    E_in = ei.size(1)
    in_bytes = {"edge_index": nbytes(ei), "csr": csr_bytes(csr)}

    # same derived seed as the transform (of the Data with edge_index)
    seed = transform_seed(data_ei(ei, n), args.eps)
    pt, pf = dprr_probs(csr, args.eps, seed)
    max_rr = 10 * E_in + 10**8
    info: dict[str, dict] = {}

    def keep(name, out_ei=None, res=None, adj=None):
        if adj is not None:  # a torch sparse CSR adj_t: its three arrays
            info[name] = {"output_nnz": int(adj.col_indices().numel()), "output_adj_t_mib": nbytes(
                adj.crow_indices(), adj.col_indices(), adj.values()) / MIB}
            return
        info[name] = {"output_nnz": None if out_ei is None else int(out_ei.size(1)),
                      "output_edge_index_mib": None if out_ei is None else nbytes(out_ei) / MIB,
                      "output_csr_mib": None if res is None else csr_bytes(res) / MIB}

    adj_t = adj_t_of(ei, n)

    cases = {
        "sampler one-pass": lambda: keep("sampler one-pass", res=E._rr_sample(csr, pt, pf, seed, backend="cpp")),
        "sampler one-pass +ei": lambda: keep("sampler one-pass +ei", *E._rr_sample_ei(
            csr, pt, pf, seed, streams=(Stream.DPRR_TRUE, 0, Stream.DPRR_FALSE, 0), public=None, by_degree=True,
            backend="cpp", layout=0)[::-1]),
        "sampler two-pass": lambda: keep("sampler two-pass",
                                         res=E._rr_sample_two_pass(csr, pt, pf, seed, backend="cpp")),
        "DPRR mechanism(CSR)": lambda: keep("DPRR mechanism(CSR)", res=E.dprr(csr, args.eps, seed=seed).noisy),
        "DPRR transform(Data edge_index)": lambda: keep(
            "DPRR transform(Data edge_index)", DPRR(args.eps, seed=SECRET)(data_ei(ei, n)).edge_index),
        "DPRR transform(Data csr)": lambda: keep(
            "DPRR transform(Data csr)", res=DPRR(args.eps, seed=SECRET)(data_csr(csr)).csr),
        "DPRR transform(Data adj_t)": lambda: keep(
            "DPRR transform(Data adj_t)", adj=DPRR(args.eps, seed=SECRET)(data_adj_t(adj_t, n)).adj_t),
    }
    if "before" not in args.skip:
        cases["DPRR before (Data edge_index)"] = lambda: keep(
            "DPRR before (Data edge_index)", dprr_before(data_ei(ei, n), args.eps).edge_index)
    if "rr" not in args.skip:
        cases["RREdges mechanism(CSR)"] = lambda: keep("RREdges mechanism(CSR)", res=E.rr_edges(
            csr, args.rr_eps, seed=seed, max_output_edges=max_rr).noisy)
        cases["RREdges transform(Data edge_index)"] = lambda: keep(
            "RREdges transform(Data edge_index)",
            RREdges(args.rr_eps, seed=SECRET, max_output_edges=max_rr)(data_ei(ei, n)).edge_index)
        cases["RREdges transform(Data csr)"] = lambda: keep(
            "RREdges transform(Data csr)",
            res=RREdges(args.rr_eps, seed=SECRET, max_output_edges=max_rr)(data_csr(csr)).csr)
        cases["RREdges transform(Data adj_t)"] = lambda: keep(
            "RREdges transform(Data adj_t)",
            adj=RREdges(args.rr_eps, seed=SECRET, max_output_edges=max_rr)(data_adj_t(adj_t, n)).adj_t)
    if "locallap" not in args.skip:
        cases["LocalLap mechanism(CSR)"] = lambda: keep("LocalLap mechanism(CSR)",
                                                        res=E.local_laplace(csr, args.eps, seed=seed).noisy)
        cases["LocalLap transform(Data edge_index)"] = lambda: keep(
            "LocalLap transform(Data edge_index)", LocalLap(args.eps, seed=SECRET)(data_ei(ei, n)).edge_index)
        cases["LocalLap transform(Data csr)"] = lambda: keep(
            "LocalLap transform(Data csr)", res=LocalLap(args.eps, seed=SECRET)(data_csr(csr)).csr)
        cases["LocalLap transform(Data adj_t)"] = lambda: keep(
            "LocalLap transform(Data adj_t)", adj=LocalLap(args.eps, seed=SECRET)(data_adj_t(adj_t, n)).adj_t)

    # the baseline computes what the transform computes, bit for bit
    if "before" not in args.skip:
        a = dprr_before(data_ei(ei, n), args.eps).edge_index
        b = DPRR(args.eps, seed=SECRET)(data_ei(ei, n)).edge_index
        assert torch.equal(a, b), "DPRR before/after differ"
        del a, b
    gc.collect()

    print(f"[bench_transforms] timing {len(cases)} cases, {args.repeat} interleaved rounds, "
          f"load average {load_average()[0]:.2f}", flush=True)
    timed = time_interleaved(cases, repeat=args.repeat, warmup=1)
    rows = []
    for name, m in timed.items():
        row = {"case": name, "n": n, "input_nnz": E_in, "threads": args.threads, **info.get(name, {}), **m,
               "M_input_edges_per_s": E_in / m["median_s"] / 1e6,
               "M_input_edges_per_cpu_s": E_in / m["cpu_median_s"] / 1e6,
               "added_rss_mib": m["peak_rss_mib"] - m["base_rss_mib"]}
        rows.append(row)
        print(f"[bench_transforms] {name}: {m['median_s']:.3f} s -> {row['M_input_edges_per_s']:.1f} M edges/s "
              f"(cpu {m['cpu_median_s']:.2f} s of which sys {m['sys_median_s']:.2f} s, "
              f"{m['minor_faults_median'] / 1e3:.0f}k page faults, peak RSS {m['peak_rss_mib']:.0f} MiB, "
              f"load {m['loadavg_1m']:.2f})", flush=True)
    before = timed.get("DPRR before (Data edge_index)")
    if before:
        for r in rows:
            if r["case"].startswith("DPRR transform(Data edge_index)"):
                r["speedup_vs_before"] = before["median_s"] / r["median_s"]
    two = timed["sampler two-pass"]["median_s"]
    for r in rows:
        if r["case"].startswith("sampler one-pass"):
            r["speedup_vs_two_pass"] = two / r["median_s"]
    if "stages" not in args.skip:
        rows += stages(ei, csr, args.eps, args.repeat)
        if "locallap" not in args.skip:
            rows += locallap_stages(csr, args.eps, args.repeat)
    rows.append({"case": "input", "impl": "bytes", "edge_index_mib": in_bytes["edge_index"] / MIB,
                 "csr_mib": in_bytes["csr"] / MIB,
                 "adj_t_mib": nbytes(adj_t.crow_indices(), adj_t.col_indices(), adj_t.values()) / MIB,
                 "loadavg_1_5_15m": os.getloadavg()})
    write_report("bench_transforms", rows, args.out, command=command)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
