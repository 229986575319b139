"""benchmarks/bench_gpu_train.py without a GPU: its help, its refusal, and its whole flow on
the CPU (the hidden --cpu-dry-run, figures meaningless), so a typo does not surface first on
the GPU machine.  No timing is compared: only the report's shape and the exit status."""
import importlib.util
import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import bench_gpu, bench_gpu_train

# the graphs and every model need torch_geometric (its absence has its own test)
needs_pyg = pytest.mark.skipif(importlib.util.find_spec("torch_geometric") is None,
                               reason="torch_geometric is not installed")


def _report(tmp_path):
    (js,) = tmp_path.glob("bench_gpu_train_quick_*cpu-dry-run.json")
    (md,) = tmp_path.glob("bench_gpu_train_quick_*cpu-dry-run.md")
    return json.loads(js.read_text()), md.read_text()


def test_help_and_refusal_without_gpu(capsys):
    with pytest.raises(SystemExit) as e:
        bench_gpu_train.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    for opt in ("--quick", "--graphs", "--methods", "--repeat", "--out", "products", "heterpoisson"):
        assert opt in out
    assert "--cpu-dry-run" not in out  # hidden
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as e:
            bench_gpu_train.main(["--quick"])
        msg = str(e.value.code)
        assert e.value.code not in (0, None) and "needs an NVIDIA GPU" in msg and "[bench_gpu_train]" in msg


@needs_pyg
def test_cpu_dry_run_writes_one_row_per_graph_and_method(tmp_path):
    t0 = time.perf_counter()
    code = bench_gpu_train.main(["--cpu-dry-run", "--quick", "--out", str(tmp_path)])
    wall = time.perf_counter() - t0
    assert code == 0
    assert bench_gpu.DEV == "cuda"  # the shared module's device is restored
    # ~20-40 s on 2 idle cores; the bound only catches full-size graphs slipping into the dry run
    assert wall < 180
    payload, md = _report(tmp_path)
    rows = payload["rows"]
    pairs = [(r["graph"], r["method"]) for r in rows]
    assert sorted(pairs) == sorted(itertools.product(bench_gpu_train.GRAPHS, bench_gpu_train.METHODS))
    for r in rows:
        assert "error" not in r and "skipped" not in r, r
        assert r["median_s"] > 0 and r["setup_warmup_s"] > 0 and r["repeat"] == 1
        assert "peak_mem_GiB" in r and "resident_GiB" in r  # None on the CPU
        assert r["time_vs_gcn"] > 0
    by = {(r["graph"], r["method"]): r for r in rows}
    for g in bench_gpu_train.GRAPHS:
        assert by[(g, "gcn")]["time_vs_gcn"] == 1.0
        assert by[(g, "lpgnn")]["train_step_s"] > 0 and by[(g, "lpgnn")]["k_y"] >= 0
        hp = by[(g, "heterpoisson")]  # one epoch = ceil(1 / q_b) steps, q_b = 256 / #train
        assert hp["steps_per_epoch"] == math.ceil(hp["train_nodes"] / 256) == 10
    env = payload["environment"]
    assert env["gpu"]["name"] == "cpu-dry-run" and env["torch"] == torch.__version__ and "torch_cuda" in env
    assert payload["date"] and "--cpu-dry-run" in payload["command"]
    assert payload["graphs"]["products"]["classes"] == 47 and payload["graphs"]["orkut"]["features"] == 100
    assert md.count("\n| products |") == 3 and md.count("\n| orkut |") == 3 and "time_vs_gcn" in md


@needs_pyg
def test_failing_rows_are_recorded_and_exit_2(tmp_path, monkeypatch):
    def oom(G, a):
        raise RuntimeError("CUDA out of memory (simulated)")

    real_graph = bench_gpu_train.Graph

    def graph(name, quick, gen_device):
        if name == "orkut":
            raise RuntimeError("orkut generation failed (simulated)")
        return real_graph(name, quick, gen_device)

    monkeypatch.setitem(bench_gpu_train.PREPARE, "lpgnn", oom)
    monkeypatch.setattr(bench_gpu_train, "Graph", graph)
    code = bench_gpu_train.main(["--cpu-dry-run", "--methods", "lpgnn", "gcn", "--out", str(tmp_path)])
    assert code == 2
    payload, _ = _report(tmp_path)
    by = {(r["graph"], r["method"]): r for r in payload["rows"]}
    assert len(by) == len(payload["rows"]) == 4 and payload["rows_in_error"] == 3
    assert by[("products", "gcn")]["median_s"] > 0 and "error" not in by[("products", "gcn")]
    assert "simulated" in by[("products", "lpgnn")]["error"] and "median_s" not in by[("products", "lpgnn")]
    for m in ("gcn", "lpgnn"):
        assert "orkut generation failed" in by[("orkut", m)]["error"]
    assert "orkut generation failed" in payload["graphs"]["orkut"]["error"]


@needs_pyg
def test_sigterm_keeps_the_rows_measured(tmp_path, monkeypatch):
    real = bench_gpu_train.measure_row

    def row_then_term(B, G, method, a):
        real(B, G, method, a)
        os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(bench_gpu_train, "measure_row", row_then_term)
    before = signal.getsignal(signal.SIGTERM)
    code = bench_gpu_train.main(["--cpu-dry-run", "--methods", "gcn", "--out", str(tmp_path)])
    assert code == 3 and signal.getsignal(signal.SIGTERM) is before
    payload, _ = _report(tmp_path)
    assert payload["environment"]["interrupted"].startswith("stopped by _Terminated after 1 rows")
    assert [(r["graph"], r["method"]) for r in payload["rows"]] == [("products", "gcn")]


def test_without_torch_geometric_every_row_is_skipped(tmp_path):
    code = ("import sys; sys.modules['torch_geometric'] = None\n"
            "from benchmarks import bench_gpu_train as b\n"
            f"sys.exit(b.main(['--cpu-dry-run', '--out', {str(tmp_path)!r}]))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    payload, _ = _report(tmp_path)
    rows = payload["rows"]
    assert len(rows) == len(bench_gpu_train.GRAPHS) * len(bench_gpu_train.METHODS)
    assert all("torch_geometric is not installed" in r["skipped"] for r in rows)
