"""Benchmark harness: time a function against baselines in one process.

* :func:`time_call` — warm-up, then ``repeat`` timed calls: median / min / max seconds, and
  the peak resident memory reached during the timed calls (Linux: the VmHWM high-water
  mark is reset before the call by writing 5 to /proc/self/clear_refs, so each case
  gets its own peak; elsewhere the process-wide ru_maxrss is reported).
* :func:`write_report` — JSON (machine-readable, with environment facts: CPU model, core
  count, cache sizes, load average, library versions) and a markdown table, to
  ``results/`` by default.

Ratios are always computed between implementations measured in the same run.
"""
from __future__ import annotations

import gc
import json
import math
import os
import platform
import resource
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

_CLEAR_REFS = Path("/proc/self/clear_refs")
_STATUS = Path("/proc/self/status")


def _reset_peak() -> bool:
    try:
        _CLEAR_REFS.write_text("5")
        return True
    except OSError:
        return False


def current_peak_rss_mib() -> float:
    """Peak RSS (MiB) since the last reset (VmHWM), or of the whole process."""
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def current_rss_mib() -> float:
    try:
        for line in _STATUS.read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return float("nan")


def require_backend(script: str, name: str = "cpp") -> None:
    """Stop at once, naming the reason and the fix, when the kernels this benchmark measures
    cannot be imported (rather than after minutes of preparation)."""
    import ldpfast
    from ldpfast import _backend

    why = _backend.available()[name]
    if why is not None:
        raise SystemExit(
            f"[{script}] this benchmark measures the {name!r} backend, which is not available "
            f"in the ldpfast imported from {Path(ldpfast.__file__).parent}: {why}\n"
            "Install the checkout with the README's command (pip install -e ., which builds "
            "ldpfast._C in place) and run the benchmark from the checkout again.")


def building(script: str, what: str, backend: str | None = None) -> float:
    """Say which long preparation step starts, on which backend; returns its start time."""
    from ldpfast import _backend

    be = _backend.resolve("cpu", backend)
    print(f"[{script}] building {what} ({be} backend) ...", flush=True)
    return time.perf_counter()


def time_call(fn: Callable[[], object], repeat: int = 5, warmup: int = 1) -> dict:
    """Run ``fn`` ``warmup`` times untimed, then ``repeat`` times timed.

    Returns ``dict(median_s, min_s, max_s, repeat, peak_rss_mib, base_rss_mib)``;
    ``peak_rss_mib`` is the high-water mark during the timed calls and ``base_rss_mib``
    the resident memory just before them (the difference is what the call added).
    """
    if repeat < 1:
        raise ValueError(f"repeat: expected >= 1, got {repeat}")
    for _ in range(max(0, warmup)):
        fn()
    gc.collect()
    base = current_rss_mib()
    _reset_peak()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return {
        "median_s": statistics.median(times),
        "min_s": min(times),
        "max_s": max(times),
        "repeat": repeat,
        "peak_rss_mib": current_peak_rss_mib(),
        "base_rss_mib": base,
        "loadavg_1m": load_average()[0],  # other processes on the cores inflate the times
    }


def time_interleaved(fns: dict[str, Callable[[], object]], repeat: int = 5, warmup: int = 1,
                     only: dict[str, tuple[int, int]] | None = None) -> dict[str, dict]:
    """Time several implementations in interleaved rounds (A B C, A B C, ...).

    On a shared machine the load drifts over minutes; interleaving exposes every
    implementation to the same drift, so the ratios between them are far less noisy than
    with back-to-back blocks of repeats.  ``only`` gives ``(repeat, warmup)`` overrides for
    very slow implementations.  Returns per name the ``time_call`` fields, plus
    ``cpu_median_s`` (process CPU time, all threads: insensitive to time spent waiting for a
    core, but counts spinning threads), ``sys_median_s`` (its kernel part) and
    ``minor_faults_median`` (first touches of fresh pages: on a VM that hands freed memory
    back to its host each costs several microseconds, see :func:`vm_memory_notes`) and the
    mean 1-minute load during its calls.
    """
    if repeat < 1:
        raise ValueError(f"repeat: expected >= 1, got {repeat}")
    only = only or {}
    plan = {k: only.get(k, (repeat, warmup)) for k in fns}
    for w in range(max((w for _, w in plan.values()), default=0)):
        for k, fn in fns.items():
            if w < plan[k][1]:
                fn()
    wall: dict[str, list[float]] = {k: [] for k in fns}
    cpu: dict[str, list[float]] = {k: [] for k in fns}
    peak = {k: 0.0 for k in fns}
    base = {k: float("nan") for k in fns}
    load: dict[str, list[float]] = {k: [] for k in fns}
    sys_t: dict[str, list[float]] = {k: [] for k in fns}
    flt: dict[str, list[int]] = {k: [] for k in fns}
    for rnd in range(max((r for r, _ in plan.values()), default=0)):
        for k, fn in fns.items():
            if rnd >= plan[k][0]:
                continue
            gc.collect()
            if rnd == 0:
                base[k] = current_rss_mib()
            _reset_peak()
            r0 = _rusage()
            c0, t0 = time.process_time(), time.perf_counter()
            fn()
            wall[k].append(time.perf_counter() - t0)
            cpu[k].append(time.process_time() - c0)
            r1 = _rusage()
            sys_t[k].append(r1[0] - r0[0])
            flt[k].append(r1[1] - r0[1])
            peak[k] = max(peak[k], current_peak_rss_mib())
            load[k].append(load_average()[0])
    return {k: {"median_s": statistics.median(wall[k]), "min_s": min(wall[k]),
                "max_s": max(wall[k]), "repeat": len(wall[k]),
                "cpu_median_s": statistics.median(cpu[k]), "peak_rss_mib": peak[k],
                "base_rss_mib": base[k], "loadavg_1m": statistics.fmean(load[k]),
                "sys_median_s": statistics.median(sys_t[k]),
                "minor_faults_median": statistics.median(flt[k])}
            for k in fns}


def _rusage() -> tuple[float, int]:
    """(system CPU seconds, minor page faults) of this process so far."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_stime, r.ru_minflt


def vm_memory_notes() -> dict:
    """What makes fresh memory slow on this machine: the kernel command line's free page
    reporting (a VM returning freed pages to its host, which must map them again on the next
    first touch), the transparent huge page mode and whether a balloon driver is bound."""
    def read(path):
        try:
            with open(path) as f:
                return f.read().strip()
        except OSError:
            return None
    cmd = read("/proc/cmdline") or ""
    return {"page_reporting": [w for w in cmd.split() if w.startswith("page_reporting")] or None,
            "virtio_balloon": os.path.isdir("/sys/bus/virtio/drivers/virtio_balloon"),
            "thp_enabled": read("/sys/kernel/mm/transparent_hugepage/enabled"),
            "thp_defrag": read("/sys/kernel/mm/transparent_hugepage/defrag")}


def load_average() -> tuple[float, float, float]:
    """1, 5 and 15 minute load averages (NaN where the OS does not report them)."""
    try:
        return os.getloadavg()
    except (OSError, AttributeError):
        return (float("nan"),) * 3


def cpu_info() -> dict:
    """CPU model, logical / physical core counts and cache sizes (Linux sysfs; best effort)."""
    info: dict = {"model": platform.processor() or platform.machine(), "logical_cores": os.cpu_count()}
    try:
        phys = set()
        for block in Path("/proc/cpuinfo").read_text().split("\n\n"):
            fields = dict(line.split(":", 1) for line in block.splitlines() if ":" in line)
            fields = {k.strip(): v.strip() for k, v in fields.items()}
            if "model name" in fields:
                info["model"] = fields["model name"]
                # VMs often hide the marketing name ("AMD EPYC"): family/model identify the core
                info["family_model_stepping"] = "/".join(
                    fields.get(k, "?") for k in ("cpu family", "model", "stepping"))
                flags = fields.get("flags", "").split()
                info["simd"] = [f for f in ("avx2", "fma", "avx512f") if f in flags]
            if "physical id" in fields and "core id" in fields:
                phys.add((fields["physical id"], fields["core id"]))
        if phys:
            info["physical_cores"] = len(phys)
    except OSError:
        pass
    try:
        info["affinity_cores"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        pass
    caches = {}
    for d in sorted(Path("/sys/devices/system/cpu/cpu0/cache").glob("index*")):
        try:
            level = (d / "level").read_text().strip()
            kind = (d / "type").read_text().strip()
            size = (d / "size").read_text().strip()
            shared = (d / "shared_cpu_list").read_text().strip()
        except OSError:
            continue
        tag = {"Data": "d", "Instruction": "i"}.get(kind, "")
        caches[f"L{level}{tag}"] = f"{size} (shared by cpus {shared})"
    if caches:
        info["caches"] = caches
    return info


def _mkl_intel_path(torch) -> bool | None:
    """Whether the MKL inside torch takes its Intel code paths (``mkl_serv_intel_cpu_true``).
    On AMD CPUs it does not: torch.sparse.mm's CSR kernel then runs MKL's generic ``_def``
    variant, about 2x slower than the ``_avx512`` one on the same Zen 4 core (BENCHMARKS.md,
    "KProp propagation"), so ratios against torch depend on this flag.  None: unknown."""
    import ctypes

    # the global scope first: a preloaded override (benchmarks/mkl_intel_path.c) is what MKL's
    # own calls resolve to, then the library's definition
    for lib in (None, str(Path(torch.__file__).parent / "lib" / "libtorch_cpu.so")):
        try:
            return bool(ctypes.CDLL(lib).mkl_serv_intel_cpu_true())
        except (OSError, AttributeError):
            continue
    return None


def environment() -> dict:
    """Facts about the run, stored next to every result."""
    import numpy as np

    env = {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "cpu": cpu_info(),
        "loadavg_1_5_15m": load_average(),
        "numpy": np.__version__,
        "time": time.strftime("%Y-%m-%d %H:%M:%S"),
        "memory": vm_memory_notes(),
    }
    malloc = {k: v for k, v in os.environ.items() if k.startswith("MALLOC_")}
    if malloc:  # glibc tunables change how often fresh pages are touched
        env["malloc_env"] = malloc
    try:
        import torch

        env["torch"] = torch.__version__
        env["torch_threads"] = torch.get_num_threads()
        env["torch_mkl_intel_path"] = _mkl_intel_path(torch)
    except ImportError:
        pass
    if os.environ.get("LD_PRELOAD"):
        env["ld_preload"] = os.environ["LD_PRELOAD"]
    for mod in ("torch_geometric", "torch_sparse", "torch_scatter"):
        try:
            env[mod] = __import__(mod).__version__
        except ImportError:
            env[mod] = "not installed"
        except Exception as exc:  # noqa: BLE001 - a broken optional extension: record why
            env[mod] = f"unusable: {type(exc).__name__}: {exc}"
    try:
        import ldpfast

        env["ldpfast_threads"] = ldpfast.get_num_threads()
    except Exception as exc:  # noqa: BLE001 - record why, keep benchmarking
        env["ldpfast_threads"] = f"unavailable: {exc}"
    return env


def _fmt(v) -> str:
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        return f"{v:.4g}"
    return str(v)


def markdown_table(rows: list[dict]) -> str:
    """A markdown table over the union of the rows' keys (first-seen order)."""
    cols: list[str] = []
    for r in rows:
        for k in r:
            if k not in cols:
                cols.append(k)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        lines.append("| " + " | ".join(_fmt(r.get(c, "")) for c in cols) + " |")
    return "\n".join(lines)


def write_report(name: str, rows: list[dict], out_dir: str | os.PathLike = "results",
                 command: str | None = None, quiet: bool = False) -> tuple[Path, Path]:
    """Write ``<out_dir>/<name>.json`` and ``<out_dir>/<name>.md``; print the table unless
    ``quiet`` (scripts that rewrite their report after every stage)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    command = command or " ".join([Path(sys.executable).name] + sys.argv)
    payload = {"name": name, "command": command, "environment": environment(), "rows": rows}
    jp = out / f"{name}.json"
    jp.write_text(json.dumps(payload, indent=2, default=str))
    table = markdown_table(rows)
    mp = out / f"{name}.md"
    mp.write_text(f"# {name}\n\nCommand: `{command}`\n\n{table}\n")
    if not quiet:
        print(table)
    return jp, mp


def add_ratios(rows: list[dict], key: str = "median_s", ours: str = "ldpfast",
               prefix: str = "speedup_vs_") -> list[dict]:
    """For each case, add ``<prefix><impl>`` = t(impl) / t(ours) to the ours row (rows
    without ``key`` are skipped)."""
    by_case: dict[str, list[dict]] = {}
    for r in rows:
        by_case.setdefault(r["case"], []).append(r)
    for group in by_case.values():
        mine = [r for r in group if r["impl"].startswith(ours)]
        for m in mine:
            for r in group:
                if r is not m and not r["impl"].startswith(ours) and key in r and key in m:
                    m[f"{prefix}{r['impl']}"] = r[key] / m[key]
    return rows
