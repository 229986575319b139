"""Smoke test: the KProp benchmark script runs end to end on a tiny graph and writes its
report (timings are never asserted; see BENCHMARKS.md)."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def test_bench_propagate_tiny(tmp_path):
    from benchmarks import bench_propagate

    bench_propagate.main(["--nodes", "2000", "--edges", "20000", "--dim", "8", "--ks", "1", "3",
                          "--repeat", "1", "--out", str(tmp_path)])
    (report,) = tmp_path.glob("bench_propagate_*.json")
    rows = json.loads(report.read_text())["rows"]
    impls = {r["impl"] for r in rows}
    assert {"ldpfast", "torch.sparse.mm(csr)", "pyg SimpleConv"} <= impls
    assert all(r["median_s"] > 0 for r in rows)


def test_bench_gpu_imports_and_helps(capsys):
    # bench_gpu.py needs a GPU to measure anything; without one it must still import, show
    # its help, and refuse to run with the reason (exit status non-zero).
    import pytest
    import torch

    from benchmarks import bench_gpu

    with pytest.raises(SystemExit) as e:
        bench_gpu.main(["--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--quick" in out and "--out" in out and "copy bandwidth" in out
    if not torch.cuda.is_available():
        with pytest.raises(SystemExit) as e:
            bench_gpu.main(["--quick"])
        assert e.value.code not in (0, None)
        assert "needs an NVIDIA GPU" in str(e.value.code)


def test_bench_gpu_flow_on_cpu(tmp_path):
    # The script's flow (timing, rows, ratios, targets, JSON) with CPU tensors: a hidden dry
    # run whose figures mean nothing, so a typo does not surface first on the GPU machine.
    from benchmarks import bench_gpu

    try:
        bench_gpu.main(["--cpu-dry-run", "--quick", "--repeat", "1", "--families", "labels",
                        "--out", str(tmp_path)])
    finally:
        bench_gpu.DEV = "cuda"
    (report,) = tmp_path.glob("bench_gpu_quick_*cpu-dry-run.json")
    payload = json.loads(report.read_text())
    rows = payload["rows"]
    assert payload["environment"]["copy_bandwidth_GBps"] > 0
    ours = [r for r in rows if r["family"] == "labels" and r["impl"] == "ldpfast"]
    assert ours and all(r["median_s"] > 0 and "speedup_vs_torch" in r and 0 < r["copy_fraction"]
                        for r in ours)
    assert payload["targets"][0]["target"].startswith("memory-bound mechanisms")
