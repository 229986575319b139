"""One quick reproduction cell per paper on the CPU and on the GPU, same seed (issue 16, step 5).

    python tools/gpu_repro_cells.py [--out DIR] [--methods lpgnn rgnn dprr heterpoisson]

Each cell runs ``methods.<paper>.fit`` twice with one seed, ``device="cpu"`` then
``device="cuda"``, and records both accuracies and wall times in ``gpu_repro_cells.json``.
Randomisation is bit-identical by construction (the ``-m cuda`` tests check the bits);
training may differ through cuDNN/cuSPARSE nondeterminism and float summation order, so the
accuracies are reported side by side, not asserted equal.  The seed is a constant of this
script (public test data), not a user's secret, and is not written to the JSON.
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch

SEED = 20261123


def _cells():
    from ldpfast.datasets import load
    from ldpfast.methods import dprr, heterpoisson, lpgnn, rgnn
    from ldpfast.reproduce.dprr import synthetic_graph_classification

    cora = load("cora")
    graphs = synthetic_graph_classification(80, 2, (80, 250), seed=0)
    return {
        "lpgnn": ("Cora, eps_x = eps_y = 1, Drop, 100 epochs",
                  lambda dev: lpgnn.fit(cora, 1.0, 1.0, epochs=100, patience=100, seed=SEED, device=dev)),
        "rgnn": ("Cora, eps_x = eps_y = 1, 50 epochs",
                 lambda dev: rgnn.fit(cora, 1.0, 1.0, epochs=50, seed=SEED, device=dev)),
        "dprr": ("synthetic 80 graphs (80-250 nodes), DPRR eps = 1, 1 run, 25 epochs",
                 lambda dev: dprr.fit(graphs, "dprr", 1.0, runs=1, epochs=25, seed=SEED, device=dev)),
        "heterpoisson": ("Cora, eps = 8, GCN, 1 epoch",
                         lambda dev: heterpoisson.fit(cora, 8.0, epochs=1.0, seed=SEED, device=dev)),
    }


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", default="results")
    p.add_argument("--methods", nargs="+", default=["lpgnn", "rgnn", "dprr", "heterpoisson"])
    p.add_argument("--devices", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda"])
    a = p.parse_args(argv)
    if "cuda" in a.devices and not torch.cuda.is_available():
        raise SystemExit("gpu_repro_cells: no CUDA device (torch.cuda.is_available() is False)")
    cells, rows = _cells(), []
    for name in a.methods:
        what, run = cells[name]
        row = {"method": name, "cell": what,
               "device_name": torch.cuda.get_device_name() if "cuda" in a.devices else "cpu"}
        for dev in a.devices:
            t0 = time.perf_counter()
            try:
                rep = run(dev)
                row[f"accuracy_{dev}"] = float(rep.accuracy if not isinstance(rep.accuracy, dict)
                                               else rep.accuracy.get("mean", float("nan")))
            except Exception as exc:  # noqa: BLE001 - record and go on: one long GPU run
                row[f"error_{dev}"] = f"{type(exc).__name__}: {exc}"
            row[f"time_s_{dev}"] = round(time.perf_counter() - t0, 2)
        print(json.dumps(row), flush=True)
        rows.append(row)
    Path(a.out).mkdir(parents=True, exist_ok=True)
    (Path(a.out) / "gpu_repro_cells.json").write_text(json.dumps({"rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
