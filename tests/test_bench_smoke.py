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
    t = payload["targets"][0]  # one target line per mechanism row: copy fraction and torch ratio
    assert t["target"].startswith("rr_labels int64") and "of copy" in t["value"] and "x torch" in t["value"]
    assert t["met"] in (True, False)


def test_bench_gpu_sigterm_keeps_the_rows_measured(tmp_path, monkeypatch):
    # tools/gpu_session.sh stops a long run with `timeout` (SIGTERM): the rows measured so far
    # must still reach the JSON, marked interrupted, with a distinct exit status.
    import os
    import signal

    from benchmarks import bench_gpu

    real = bench_gpu.measure

    def measure_then_term(a, B, targets):
        B.copy_bandwidth(1 << 20)
        os.kill(os.getpid(), signal.SIGTERM)
        real(a, B, targets)  # never reached: the handler raises at the next bytecode

    monkeypatch.setattr(bench_gpu, "measure", measure_then_term)
    before = signal.getsignal(signal.SIGTERM)
    try:
        code = bench_gpu.main(["--cpu-dry-run", "--quick", "--repeat", "1", "--out", str(tmp_path)])
    finally:
        bench_gpu.DEV = "cuda"
    assert code == 3
    assert signal.getsignal(signal.SIGTERM) is before
    (report,) = tmp_path.glob("bench_gpu_quick_*cpu-dry-run.json")
    payload = json.loads(report.read_text())
    assert payload["environment"]["interrupted"].startswith("stopped by _Terminated after 1 rows")
    assert [r["family"] for r in payload["rows"]] == ["copy"]


def test_bench_orkut_tiny(tmp_path):
    # every pipeline end to end on a 3000-node graph; the report is rewritten after each stage
    from benchmarks import bench_orkut

    bench_orkut.main(["--preset", "tiny", "--epochs", "1", "--C", "8", "--out", str(tmp_path)])
    payload = json.loads((tmp_path / "bench_orkut_tiny.json").read_text())
    assert payload["environment"]["cpu"]["model"] and "loadavg_1_5_15m" in payload["environment"]
    rows = payload["rows"]
    stages = [r for r in rows if r["pipeline"] in bench_orkut.PIPELINES and r["stage"] != "TOTAL"]
    assert {r["pipeline"] for r in stages} == set(bench_orkut.PIPELINES)
    assert all(r["wall_s"] > 0 and r["peak_rss_mib"] >= r["rss_before_mib"] > 0 for r in stages)
    by = {(r["pipeline"], r["stage"].split(" (")[0]): r["details"] for r in stages}
    # the SAGE layers through ops.propagate equal PyG's SAGEConv
    assert by[("lpgnn", "train")]["sage_check_max_abs_err"] < 1e-4
    assert by[("rgnn", "train")]["sage_check_max_abs_err"] < 1e-4
    metis = by[("rgnn", "metis_bags")]
    assert 0 < metis["edge_cut"] < 1 and metis["bag_max_over_mean"] < 1.2
    assert by[("heterpoisson", "fit: 1 epoch DP-SGD")]["T"] >= 1  # T = ceil(1 / q_b)
    assert by[("dprr", "degree_preservation")]["mae_dprr"] < by[("dprr", "degree_preservation")]["mae_rr"]
    totals = [r for r in rows if r["stage"] == "TOTAL"]
    assert len(totals) == 4 and all(r["slowest_stage"] for r in totals)

    # stages are selectable: one pipeline, no METIS
    bench_orkut.main(["--preset", "tiny", "--pipelines", "rgnn", "--skip-metis", "--epochs", "1",
                      "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "bench_orkut_tiny_rgnn.json").read_text())["rows"]
    assert {r["pipeline"] for r in rows if r["stage"] != "build graph"} <= {"rgnn", "all"}
    assert not any("metis" in r["stage"] for r in rows)

    # METIS alone on the preset graph, both routes, with the edge cut beside the time
    bench_orkut.main(["--preset", "tiny", "--metis-only", "--plain-metis", "--C", "8",
                      "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "bench_orkut_tiny_metis.json").read_text())["rows"]
    metis = [r for r in rows if "metis_bags" in r["stage"]]
    assert len(metis) == 2 and all(0 < r["details"]["edge_cut"] < 1 for r in metis)


def test_bench_grad_paths_tiny(tmp_path):
    # the general-vs-fast benchmark runs end to end (its own check that both paths give the
    # same clipped sum included) and writes its rows; no timing is asserted
    from benchmarks import bench_grad_paths

    bench_grad_paths.main(["--datasets", "cora", "--models", "gcn", "--batch", "12", "--repeat", "1",
                           "--out", str(tmp_path)])
    rows = json.loads((tmp_path / "bench_grad_paths.json").read_text())["rows"]
    assert {r["impl"] for r in rows} == {"nonprivate", "fast", "general", "general_rerun"}
    assert all(r["median_s"] > 0 and r["fast_vs_general_rel_diff"] < 1e-5 for r in rows)


def test_dpsgd_utility_runs_and_tabulates(tmp_path, monkeypatch):
    # one DP and one non-private run of the utility sweep on a small planted graph, resumed
    # (nothing rerun), and the table from its JSON
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from test_heterpoisson import planted_graph

    from benchmarks import dpsgd_utility

    monkeypatch.setattr(dpsgd_utility, "load", lambda name: planted_graph(n=300))
    monkeypatch.setattr(dpsgd_utility, "GRIDS", {**dpsgd_utility.GRIDS, "gat": [{"M": 1.0, "lr": 0.03}]})
    out = tmp_path / "u.json"
    args = ["--datasets", "toy", "--methods", "gat", "--eps", "8", "--seeds", "1", "--batch", "64",
            "--out", str(out), "--table", str(tmp_path / "t.md")]
    dpsgd_utility.main(args)
    runs = json.loads(out.read_text())["runs"]
    assert [(r["method"], r["eps"]) for r in runs] == [("gat", 8.0), ("gat", None)]
    assert runs[0]["eps_spent"] <= 8.0 and 0 <= runs[0]["acc"] <= 1 and "acc_full" in runs[0]
    dpsgd_utility.main(args)  # resumes: nothing to do
    assert len(json.loads(out.read_text())["runs"]) == 2
    table = (tmp_path / "t.md").read_text()
    assert "### toy" in table and "| non-private |" in table and "(M=1)" in table
