"""Smoke test: every script in examples/ runs with --quick, offline, on the embedded Cora,
in a fresh process, and prints the privacy it spent and a test accuracy."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = ("dprr", "heterpoisson", "lpgnn", "rgnn")
OTHERS = ("growing_graph",  # not a paper: a graph re-released as it grows, with a report store
          "audit_pipeline")  # the empirical privacy audit of a three-release pipeline
ENGINE = ("gat_dpsgd",)  # not a paper's method: a GAT through NodeDPEngine (node-level DP-SGD for any model)


def test_one_example_per_paper():
    assert sorted(p.stem for p in EXAMPLES.glob("*.py")) == sorted(NAMES + OTHERS + ENGINE)


def test_growing_graph_example_prints_each_release_and_saves_json(tmp_path):
    import json

    env = dict(os.environ, LDPFAST_OFFLINE="1", LDPFAST_CACHE=str(tmp_path / "cache"))
    out = tmp_path / "g.json"
    r = subprocess.run([sys.executable, str(EXAMPLES / "growing_graph.py"), "--quick", "--json", str(out)],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300, check=False)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    for k in (1, 2, 3):
        assert f"release {k}:" in r.stdout
    assert "per-user total, node-ldp: max" in r.stdout and "per-user total, edge-ldp: max" in r.stdout
    hist = json.loads(out.read_text())
    assert [h["users"] for h in hist] == sorted(h["users"] for h in hist) and len(hist) == 3
    # release 2: the users of release 1 with unchanged features are not charged again
    assert hist[1]["charged"]["multibit"]["reused"] == hist[0]["users"]


def test_audit_pipeline_example_prints_eps_lb_beside_the_charge(tmp_path):
    import json

    env = dict(os.environ, LDPFAST_OFFLINE="1", LDPFAST_CACHE=str(tmp_path / "cache"))
    out, png = tmp_path / "a.json", tmp_path / "a.png"
    r = subprocess.run([sys.executable, str(EXAMPLES / "audit_pipeline.py"), "--quick", "--json", str(out),
                        "--plot", str(png)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
                       check=False)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    for rel in ("node-ldp (MultiBit+RRLabels)", "edge-ldp (RREdges)"):
        assert rel in r.stdout
    assert len(re.findall(r"releases k=\d: eps_lb +[0-9.]+ +charge +[0-9.]+", r.stdout)) == 2 * 2 * 3
    reps = json.loads(out.read_text())
    assert [(x["change"], x["relation"]) for x in reps] == [("join", "node-ldp"), ("join", "edge-ldp"),
                                                             ("edit", "node-ldp"), ("edit", "edge-ldp")]
    assert all(x["charge_source"] == "store" for x in reps) and png.stat().st_size > 0


@pytest.mark.parametrize("name,extra", [(n, []) for n in NAMES + ENGINE] + [("dprr", ["--adj-t"])],
                         ids=list(NAMES + ENGINE) + ["dprr-adj_t"])
def test_example_quick(name, extra, tmp_path):
    env = dict(os.environ, LDPFAST_OFFLINE="1", LDPFAST_CACHE=str(tmp_path / "cache"))
    env.pop("LDPFAST_DATA", None)
    r = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--quick",
                        "--root", str(tmp_path / "data"), *extra],
                       capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300,
                       check=False)
    assert r.returncode == 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    assert "privacy spent:" in r.stdout
    acc = re.search(r"test accuracy(?: of| ?:)? (?:noisy graph )?([0-9.]+)", r.stdout)
    assert acc is not None and 0.0 <= float(acc.group(1)) <= 1.0, r.stdout
    assert "Traceback" not in r.stderr
    if extra == ["--adj-t"]:
        assert "(read from adj_t)" in r.stdout
