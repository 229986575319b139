"""Regression benchmark: each kernel family's headline case, against baselines and against an older revision.

    python benchmarks/regress.py [--repeat 5] [--cases multibit grr_fs ...] [--json results/regress.json]
    python benchmarks/regress.py --against REV [--repeat 5] [--keep DIR]

Without ``--against``: every case runs in this process, each call next to its baseline in the
same process (``x.clone()`` of the input for the feature and label mechanisms, the unkeyed call
for the keyed one, ``torch.sparse.mm`` for KProp, torch's COO -> CSR for ``to_csr``), timed
alternately (implementation, baseline, implementation, ...), and the ratios are printed beside
the committed reference figures of ``benchmarks/regress_reference.json`` (with the machine they
came from: ratios travel between machines better than times, but only roughly).

With ``--against REV``: REV (any git revision) is checked out in a temporary git worktree, its
own ``ldpfast._C`` is built there (``python setup.py build_ext --inplace``, a few minutes on
2 cores; ``--keep DIR`` keeps the worktree in DIR and reuses the build next time), and two
worker processes run the cases, one importing REV's ldpfast, one this checkout's, in turn
(old, new, new, old, old, new, ...: each round swaps who goes first).  The cases call the public
API only, so an old revision runs the same code; a case the old revision cannot run (e.g. a
keyed call before per-user keys existed) prints "n/a".

Times are **process CPU seconds** (user + system of the worker, all threads: what sharing the
machine with other jobs disturbs least) and wall seconds; each figure is the median of
``--repeat`` calls after one warm-up.  The change is the median of the per-round ratios
new / old, and the noise band is half the spread (max - min) of those ratios (the one round
farthest from the median left out from 5 rounds on), or 3%, whichever is larger; a change
beyond the band is flagged "slower" / "faster".  The baselines run in both workers too (their
times are in the JSON: the same torch call on both sides shows the machine's drift).  JSON (``--json``)
holds every call's figures and the machine facts (CPU model, cores, load average, versions).

Sizes are chosen so that one plain run takes about a minute on the project's 2-core VM.
"""
from __future__ import annotations

import argparse
import inspect
import json
import math
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import ClassVar

ROOT = Path(__file__).resolve().parents[1]
REFERENCE = Path(__file__).with_name("regress_reference.json")
SECRET = bytes(range(1, 17))  # a benchmark constant (128 bits), not a user's secret
MIN_BAND = 0.03


# --- the cases ------------------------------------------------------------------------------------
# Each case: setup() -> state (built once per process, outside the timing), impl(state) (the
# ldpfast call), base(state) (the baseline, or None), and what the figures mean.

def _supports(fn, name: str) -> bool:
    try:
        return name in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def _graph(n: int, pairs: int, seed: int = 0):
    import torch

    from ldpfast.graph import clean_edge_index, to_csr

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, pairs), generator=g)
    ei = clean_edge_index(torch.cat([ei, ei.flip(0)], 1), n)
    return ei, to_csr(ei, n)


# --full: the sizes of the project's targets (BENCHMARKS.md) instead of the ~1 minute ones.
FULL = "--full" in sys.argv


class Case:
    name = ""
    family = ""
    what = ""
    base_name = ""
    extra: ClassVar[dict] = {}  # further baselines: name -> method name (timed in the same rounds, plain runs only)
    work = None  # (count, unit) for a throughput column, e.g. (directed edges, "M edges/s")

    def setup(self):
        raise NotImplementedError

    def impl(self, s):
        raise NotImplementedError

    def base(self, s):
        return None


class Multibit(Case):
    name, family, base_name = "multibit", "features", "x.clone()"
    n, d = (1_000_000 if FULL else 250_000), 128
    what = f"multibit_encode, float32 {n} x {d}, eps 1 (m = 1)"

    def setup(self):
        import torch

        return {"x": torch.rand(self.n, self.d, generator=torch.Generator().manual_seed(0))}

    def impl(self, s):
        from ldpfast.mechanisms import multibit_encode

        return multibit_encode(s["x"], 1.0, seed=1)

    def base(self, s):
        return s["x"].clone()


class MultibitKeyed(Multibit):
    name, base_name = "multibit_keyed", "the unkeyed call"
    what = f"multibit_encode with user keys, float32 {Multibit.n} x {Multibit.d}, eps 1 (m = 1)"

    def setup(self):
        import torch

        from ldpfast.mechanisms import multibit_encode

        if not _supports(multibit_encode, "user_keys"):
            raise NotImplementedError("multibit_encode has no user_keys")
        s = super().setup()
        s["keys"] = torch.randperm(self.n, generator=torch.Generator().manual_seed(1)) * 7 + 3
        return s

    def impl(self, s):
        from ldpfast.mechanisms import multibit_encode

        try:
            return multibit_encode(s["x"], 1.0, seed=SECRET, user_keys=s["keys"])
        except TypeError:  # a revision that takes int secrets only
            return multibit_encode(s["x"], 1.0, seed=1, user_keys=s["keys"])

    def base(self, s):
        return Multibit.impl(self, s)


class GrrFs(Case):
    name, family, base_name = "grr_fs", "features", "x.clone()"
    n, d, m = (1_000_000 if FULL else 250_000), 128, 10
    what = f"grr_fs, int64 binary {n} x {d}, eps_x 1, m = {m}"
    extra: ClassVar[dict] = {"vectorised torch (top-k sampling, as RGNN's code)": "torch"}

    def setup(self):
        import torch

        return {"x": (torch.rand(self.n, self.d, generator=torch.Generator().manual_seed(0)) < 0.3).to(torch.int64)}

    def impl(self, s):
        from ldpfast.mechanisms import grr_fs

        return grr_fs(s["x"], 2, 1.0, self.m, seed=1)

    def base(self, s):
        return s["x"].clone()

    def torch(self, s):
        import torch

        x, (n, d), gamma = s["x"], s["x"].shape, 2
        idx = torch.rand(n, d).topk(self.m, dim=1).indices
        sel = torch.zeros(n, d, dtype=torch.bool).scatter_(1, idx, True)
        del idx
        p = math.exp(1.0) / (math.exp(1.0) + gamma - 1)
        keep = torch.rand(n, d) < p
        other = torch.randint(0, gamma - 1, (n, d))
        other += (other >= x).to(other.dtype)
        grr = torch.where(keep, x, other)
        del keep, other
        return torch.where(sel, grr, torch.randint(0, gamma, (n, d)))


class RRLabels(Case):
    name, family, base_name = "rr_labels", "labels", "y.clone()"
    n = 4_000_000
    what = f"rr_labels, int64 {n} labels, 10 classes, eps 1"

    def setup(self):
        import torch

        return {"y": torch.randint(0, 10, (self.n,), generator=torch.Generator().manual_seed(0))}

    def impl(self, s):
        from ldpfast.mechanisms import rr_labels

        return rr_labels(s["y"], 10, 1.0, seed=1)

    def base(self, s):
        return s["y"].clone()


class Dprr(Case):
    name, family, base_name = "dprr", "edges", "edge_index.clone()"
    n, pairs = (1_000_000, 10_000_000) if FULL else (250_000, 2_500_000)
    work = (None, "M edges/s")
    what = f"DPRR transform on Data(edge_index), {n} nodes, ~{2 * pairs / 1e6:.0f}M directed edges, eps 1"

    def setup(self):
        from torch_geometric.data import Data

        ei, _ = _graph(self.n, self.pairs)
        self.work = (ei.shape[1], "M edges/s")
        return {"ei": ei, "Data": Data}

    def impl(self, s):
        from ldpfast.transforms.edges import DPRR

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NoisyGraphWarning: a random sparse graph at eps 1
            return DPRR(1.0, seed=12345)(s["Data"](edge_index=s["ei"], num_nodes=self.n)).edge_index

    def base(self, s):
        return s["ei"].clone()


class KProp(Case):
    name, family, base_name = "kprop", "propagate", "torch.sparse.mm, K times"
    n, pairs, d, k = (1_000_000, 10_000_000, 64, 4) if FULL else (250_000, 2_500_000, 64, 4)
    what = f"KProp mean, {n} nodes, ~{2 * pairs / 1e6:.0f}M entries, d = {d}, K = {k}"

    def setup(self):
        import torch

        _, csr = _graph(self.n, self.pairs)
        x = torch.rand(self.n, self.d, generator=torch.Generator().manual_seed(2))
        deg = csr.degrees().clamp(min=1).to(torch.float32)
        vals = (1.0 / deg).repeat_interleave(csr.degrees())
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            A = torch.sparse_csr_tensor(csr.rowptr, csr.col.to(torch.int64), vals, (self.n, self.n))
        return {"csr": csr, "x": x, "A": A}

    def impl(self, s):
        from ldpfast import ops

        return ops.propagate(s["csr"], s["x"], self.k, "mean", csr_t=s["csr"])

    def base(self, s):
        import torch

        h = s["x"]
        for _ in range(self.k):
            h = torch.sparse.mm(s["A"], h)
        return h


class ToCsr(Case):
    name, family, base_name = "to_csr", "graph", "torch COO coalesce + to_sparse_csr"
    n, pairs = 1_000_000, 5_000_000
    what = f"to_csr of a random edge_index, {n} nodes, {pairs / 1e6:.0f}M entries"

    def setup(self):
        import torch

        g = torch.Generator().manual_seed(3)
        return {"ei": torch.randint(0, self.n, (2, self.pairs), generator=g)}

    def impl(self, s):
        from ldpfast.graph import to_csr

        return to_csr(s["ei"], self.n)

    def base(self, s):
        import torch

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            v = torch.ones(s["ei"].shape[1])
            return torch.sparse_coo_tensor(s["ei"], v, (self.n, self.n)).coalesce().to_sparse_csr()


class RgnnReconstruct(Case):
    name, family = "rgnn", "reconstruct"
    n, pairs, d, gamma, k = 100_000, 1_000_000, 16, 4, 4
    what = f"RGNN reconstruct_features (counts), {n} nodes, ~{2 * pairs / 1e6:.0f}M entries, d = {d}, gamma = {gamma}, K = {k}"
    base_name = "KProp of the one-hot reports (d * gamma columns, K hops)"

    def setup(self):
        import torch

        from ldpfast.mechanisms import grr_fs

        _, csr = _graph(self.n, self.pairs)
        x = torch.randint(0, self.gamma, (self.n, self.d), generator=torch.Generator().manual_seed(4))
        rep, _ = grr_fs(x, self.gamma, 1.0, 4, seed=1)
        onehot = torch.nn.functional.one_hot(rep, self.gamma).reshape(self.n, -1).to(torch.float32)
        return {"csr": csr, "rep": rep, "onehot": onehot}

    def impl(self, s):
        from ldpfast.methods import rgnn

        return rgnn.reconstruct_features(s["rep"], s["csr"], self.gamma, 1.0, 4, self.k)

    def base(self, s):
        from ldpfast import ops

        return ops.propagate(s["csr"], s["onehot"], self.k, "mean", self_loops=True, csr_t=s["csr"])


CASES = {c.name: c for c in (Multibit(), MultibitKeyed(), GrrFs(), RRLabels(), Dprr(), KProp(), ToCsr(),
                             RgnnReconstruct())}


# --- timing ---------------------------------------------------------------------------------------
def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def timed(fn, *args) -> dict:
    """One call: process CPU seconds (all threads) and wall seconds."""
    import gc

    gc.collect()
    c0, w0 = _cpu(), time.perf_counter()
    out = fn(*args)
    w1, c1 = time.perf_counter(), _cpu()
    del out
    return {"cpu": c1 - c0, "wall": w1 - w0}


class Runner:
    """The cases of one process: states built on first use, then timed call by call."""

    def __init__(self, threads: int):
        import torch

        import ldpfast

        ldpfast.set_num_threads(threads)
        torch.set_num_threads(threads)
        self.states: dict = {}

    def state(self, name: str):
        if name not in self.states:
            try:
                self.states[name] = CASES[name].setup()
            except (NotImplementedError, ImportError, AttributeError, TypeError) as exc:
                self.states[name] = exc
        return self.states[name]

    def run(self, name: str, which: str) -> dict:
        s = self.state(name)
        if isinstance(s, Exception):
            return {"error": f"{type(s).__name__}: {s}"}
        fn = getattr(CASES[name], which)
        try:
            return timed(fn, s)
        except (NotImplementedError, TypeError, AttributeError, ImportError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}


def worker(threads: int) -> int:
    """--worker: answer one JSON request per line of stdin ({"case", "which"}) with its timing."""
    import ldpfast

    r = Runner(threads)
    print(json.dumps({"ready": str(Path(ldpfast.__file__).resolve().parent)}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        print(json.dumps(r.run(req["case"], req["which"])), flush=True)
    return 0


# --- machine facts and summaries --------------------------------------------------------------------
def machine() -> dict:
    import torch

    facts = {"platform": platform.platform(), "python": platform.python_version(), "torch": torch.__version__,
             "cores": os.cpu_count(), "load_avg": os.getloadavg()}
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            k, _, v = line.partition(":")
            k = k.strip()
            if k in ("model name", "cpu family", "model", "flags") and k not in facts:
                facts[k] = v.strip() if k != "flags" else ("avx512f" in v.split(), "avx2" in v.split())
    except OSError:
        pass
    if "flags" in facts:
        facts["avx512f"], facts["avx2"] = facts.pop("flags")
    return facts


def med(xs):
    return statistics.median(xs) if xs else math.nan


def fmt_s(v: float) -> str:
    return "n/a" if math.isnan(v) else (f"{v:.3f} s" if v >= 0.01 else f"{v * 1e3:.2f} ms")


def git(*args, cwd=ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


# --- one process: ratios against the baselines ------------------------------------------------------
def run_here(names, repeat: int, threads: int) -> dict:
    r = Runner(threads)
    res = {}
    for name in names:
        case = CASES[name]
        print(f"[regress] {name}: {case.what}", flush=True)
        whichs = ["impl", "base", *case.extra.values()]
        calls = {w: [] for w in whichs}
        for rnd in range(repeat + 1):  # round 0: warm-up; every other round in reverse order
            for which in whichs if rnd % 2 == 0 else whichs[::-1]:
                t = r.run(name, which)
                if "error" in t:
                    calls[which] = t
                    break
                if rnd:
                    calls[which].append(t)
            if any(isinstance(v, dict) for v in calls.values()):
                break
        res[name] = calls
    return res


def summarise_here(res: dict) -> tuple[list[dict], str]:
    ref = json.loads(REFERENCE.read_text()) if REFERENCE.exists() and not FULL else {}  # (default sizes)
    head = ("| case | ldpfast CPU (wall) | baseline CPU (wall) | ratio CPU (wall) | reference ratio CPU "
            "| other baselines: their time / ldpfast's, CPU (wall) |")
    rows, lines = [], [head, "|---|---|---|---|---|---|"]
    for name, calls in res.items():
        case = CASES[name]
        if isinstance(calls["impl"], dict) or isinstance(calls["base"], dict):
            err = calls["impl"] if isinstance(calls["impl"], dict) else calls["base"]
            lines.append(f"| {name} | n/a ({err['error']}) | | | | |")
            rows.append({"case": name, "error": err["error"]})
            continue
        ic, iw = med([t["cpu"] for t in calls["impl"]]), med([t["wall"] for t in calls["impl"]])
        bc, bw = med([t["cpu"] for t in calls["base"]]), med([t["wall"] for t in calls["base"]])
        rr = ref.get("cases", {}).get(name, {}).get("ratio_cpu")
        row = {"case": name, "what": case.what, "baseline": case.base_name, "impl_cpu_s": ic, "impl_wall_s": iw,
               "base_cpu_s": bc, "base_wall_s": bw, "ratio_cpu": ic / bc, "ratio_wall": iw / bw,
               "reference_ratio_cpu": rr, "calls": calls}
        others = []
        for label, which in case.extra.items():
            ec, ew = med([t["cpu"] for t in calls[which]]), med([t["wall"] for t in calls[which]])
            row.setdefault("others", {})[label] = {"cpu_s": ec, "wall_s": ew, "speedup_cpu": ec / ic,
                                                   "speedup_wall": ew / iw}
            others.append(f"{label}: {ec / ic:.1f}x ({ew / iw:.1f}x)")
        if case.work:
            row["throughput_wall"] = case.work[0] / iw / 1e6
            others.append(f"{row['throughput_wall']:.1f} {case.work[1]} (wall), {case.work[0] / (ic / 2) / 1e6:.1f} "
                          "per 2 CPU-seconds")
        rows.append(row)
        lines.append(f"| {name} (vs {case.base_name}) | {fmt_s(ic)} ({fmt_s(iw)}) | {fmt_s(bc)} ({fmt_s(bw)}) | "
                     f"{ic / bc:.2f} ({iw / bw:.2f}) | {'-' if rr is None else f'{rr:.2f}'} | {'; '.join(others)} |")
    if ref:
        lines.append(f"\nReference figures: {ref.get('when')} on {ref.get('machine', {}).get('model name')} "
                     f"({ref.get('machine', {}).get('cores')} cores).")
    return rows, "\n".join(lines)


# --- two revisions, interleaved ---------------------------------------------------------------------
def build_rev(rev: str, keep: str | None) -> tuple[Path, bool]:
    """REV checked out in a git worktree with its own ldpfast._C built in place; returns the
    worktree and whether to remove it afterwards."""
    sha = git("rev-parse", "--verify", f"{rev}^{{commit}}")
    if keep:
        wt = Path(keep).resolve()
        if (wt / ".git").exists() and git("rev-parse", "HEAD", cwd=wt) == sha and list(wt.glob("ldpfast/_C*.so")):
            print(f"[regress] reusing the build of {sha[:10]} in {wt}", flush=True)
            return wt, False
        if wt.exists():
            raise SystemExit(f"--keep {wt}: exists and is not a built worktree of {sha[:10]}; remove it first")
    else:
        wt = Path(tempfile.mkdtemp(prefix=f"ldpfast-regress-{sha[:10]}-")) / "tree"
    try:  # setup.py imports it; `pip install -e .` builds in an isolated environment, so the venv may lack it
        import pybind11  # noqa: F401
    except ImportError:
        raise SystemExit("[regress] --against builds REV with setup.py, which needs pybind11 in this environment: "
                         "pip install 'pybind11>=2.11' (it is in the [test] extra)") from None
    git("worktree", "add", "--detach", str(wt), sha)
    print(f"[regress] building {rev} ({sha[:10]}) in {wt} (setup.py build_ext --inplace) ...", flush=True)
    t0 = time.perf_counter()
    env = dict(os.environ, LDPFAST_BUILD_JOBS=os.environ.get("LDPFAST_BUILD_JOBS", str(os.cpu_count() or 1)))
    p = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=wt, env=env,
                       capture_output=True, text=True, check=False)
    if p.returncode:
        sys.stderr.write(p.stdout[-4000:] + p.stderr[-4000:])
        remove_rev(wt, not keep)
        raise SystemExit(f"[regress] building {rev} failed (exit {p.returncode})")
    print(f"[regress] built in {time.perf_counter() - t0:.0f} s", flush=True)
    return wt, not keep


def remove_rev(wt: Path, remove: bool) -> None:
    if remove:
        subprocess.run(["git", "worktree", "remove", "--force", str(wt)], cwd=ROOT, capture_output=True, check=False)
        shutil.rmtree(wt.parent, ignore_errors=True)


class Worker:
    def __init__(self, root: Path, threads: int):
        env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        env.pop("LDPFAST_BACKEND", None)
        self.p = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--worker", "--threads",
                                   str(threads), *(["--full"] if FULL else [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
                                  cwd=str(root))
        ready = json.loads(self.p.stdout.readline())
        if Path(ready["ready"]) != (root / "ldpfast").resolve():
            self.close()
            raise SystemExit(f"[regress] the worker for {root} imported ldpfast from {ready['ready']}")

    def run(self, name: str, which: str) -> dict:
        self.p.stdin.write(json.dumps({"case": name, "which": which}) + "\n")
        self.p.stdin.flush()
        return json.loads(self.p.stdout.readline())

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def run_against(names, repeat: int, threads: int, old_root: Path) -> dict:
    old, new = Worker(old_root, threads), Worker(ROOT, threads)
    sides = {"old": old, "new": new}
    res = {n: {s: {"impl": [], "base": []} for s in sides} for n in names}
    try:
        for name in names:
            print(f"[regress] {name}: {CASES[name].what}", flush=True)
            for rnd in range(repeat + 1):  # round 0: warm-up (and the states are built)
                order = ("old", "new") if rnd % 2 == 0 else ("new", "old")
                for which in ("impl", "base"):
                    for side in order:
                        if isinstance(res[name][side][which], dict):
                            continue  # this side cannot run it
                        t = sides[side].run(name, which)
                        if "error" in t:
                            res[name][side][which] = t
                        elif rnd:
                            res[name][side][which].append(t)
    finally:
        old.close()
        new.close()
    return res


def noise_band(ratios: list[float]) -> float:
    """Half the spread of the per-round ratios new / old (the round farthest from the median
    left out when there are 5 or more: one disturbed round), at least MIN_BAND."""
    r = sorted(ratios)
    if len(r) >= 5:
        m = med(r)
        r = r[1:] if m - r[0] > r[-1] - m else r[:-1]
    return max(MIN_BAND, (r[-1] - r[0]) / 2)


def summarise_against(res: dict, old_label: str) -> tuple[list[dict], str]:
    lines = [f"| case | old ({old_label}) CPU | new CPU | new/old CPU (wall) | noise band | verdict |",
             "|---|---|---|---|---|---|"]
    rows = []
    for name, r in res.items():
        o, n = r["old"]["impl"], r["new"]["impl"]
        if isinstance(o, dict) or isinstance(n, dict):
            why = (o if isinstance(o, dict) else n)["error"]
            lines.append(f"| {name} | {'n/a' if isinstance(o, dict) else fmt_s(med([t['cpu'] for t in o]))} | "
                         f"{'n/a' if isinstance(n, dict) else fmt_s(med([t['cpu'] for t in n]))} | n/a | | ({why}) |")
            rows.append({"case": name, "error": why, "calls": r})
            continue
        pr = [b["cpu"] / a["cpu"] for a, b in zip(o, n)]
        pw = [b["wall"] / a["wall"] for a, b in zip(o, n)]
        band = noise_band(pr)
        change = med(pr)
        verdict = "slower" if change > 1 + band else "faster" if change < 1 - band else "same"
        oc, nc = med([t["cpu"] for t in o]), med([t["cpu"] for t in n])
        rows.append({"case": name, "what": CASES[name].what, "old_cpu_s": oc, "new_cpu_s": nc,
                     "old_wall_s": med([t["wall"] for t in o]), "new_wall_s": med([t["wall"] for t in n]),
                     "change_cpu": change, "change_wall": med(pw), "band": band, "verdict": verdict, "calls": r})
        lines.append(f"| {name} | {fmt_s(oc)} | {fmt_s(nc)} | {change:.2f} ({med(pw):.2f}) | +-{band:.0%} | "
                     f"{verdict} |")
    return rows, "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--against", metavar="REV", help="git revision to compare with (built in a temporary worktree)")
    ap.add_argument("--keep", metavar="DIR", help="with --against: keep REV's worktree and build in DIR (reused)")
    ap.add_argument("--cases", nargs="+", choices=list(CASES), default=list(CASES))
    ap.add_argument("--repeat", type=int, default=5, help="timed calls per case and side (after one warm-up)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", metavar="PATH", help="write the figures and the machine facts as JSON")
    ap.add_argument("--full", action="store_true",
                    help="the targets' sizes (1M x 128 features, 1M nodes / 20M edges) instead of the ~1 minute ones")
    ap.add_argument("--summarise", metavar="JSON", help="print the table of a run saved with --json again")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.threads)
    if a.summarise:
        saved = json.loads(Path(a.summarise).read_text())
        res = {n: c["calls"] for n, c in saved["cases"].items()}
        table = (summarise_against(res, saved["old"]) if "old" in saved else summarise_here(res))[1]
        print(f"{saved['when']}, new = {saved['new']}, {saved['machine'].get('model name')}, load "
              f"{saved['machine']['load_avg'][0]:.1f} -> {saved['load_avg_end'][0]:.1f}\n\n{table}")
        return 0
    if a.repeat < 1:
        raise SystemExit("--repeat: expected an int >= 1")
    t0 = time.perf_counter()
    head = git("rev-parse", "--short", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    new_label = head + ("+changes" if dirty else "")
    out = {"when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "machine": machine(), "new": new_label,
           "threads": a.threads, "repeat": a.repeat, "command": "python benchmarks/regress.py " +
           " ".join(argv if argv is not None else sys.argv[1:])}
    if a.against:
        wt, remove = build_rev(a.against, a.keep)
        try:
            res = run_against(a.cases, a.repeat, a.threads, wt)
        finally:
            remove_rev(wt, remove)
        short = git("rev-parse", "--short", a.against)
        out["old"] = a.against if short.startswith(a.against) else f"{a.against} ({short})"
        rows, table = summarise_against(res, out["old"])
    else:
        rows, table = summarise_here(run_here(a.cases, a.repeat, a.threads))
    out["load_avg_end"] = os.getloadavg()
    out["seconds"] = time.perf_counter() - t0
    out["cases"] = {r["case"]: r for r in rows}
    print(f"\nnew = {new_label}; {a.threads} threads; medians of {a.repeat}; process CPU seconds; "
          f"load {out['machine']['load_avg'][0]:.1f} -> {out['load_avg_end'][0]:.1f}; {out['seconds']:.0f} s\n")
    print(table)
    if a.json:
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(out, indent=1, default=str))
        print(f"\n[regress] wrote {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
