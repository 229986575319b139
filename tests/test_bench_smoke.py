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
