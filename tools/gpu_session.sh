#!/usr/bin/env bash
# Issue 16 (GPU verification) in one long run on the device machine, logs and JSON under
# $OUT (at most 8 files come back: they are tarred as gpu.tgz plus a summary).
#
# Here, once per session (downloads the cp312 wheels the GPU machine lacks into .whl/):
#     bash tools/gpu_session.sh --fetch-wheels
# Then, through the device tool, with carry [".whl"] (one call of at most 10 minutes):
#     bash tools/gpu_session.sh STEP...      STEP in: info tests cuda bench demo repro (default: all)
# The GPU machine has python3.12, torch+cu130, torch_geometric, cupy-cuda13x, numba, pybind11,
# pytest, scipy, matplotlib; pymetis, dp-accounting (and Dask/pyarrow for the distributed
# tests) travel as wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="pymetis==2025.2.2 dp-accounting==0.6.0 dask==2026.8.0 distributed==2026.8.0 pyarrow==26.0.1 \
cloudpickle fsspec partd locket toolz msgpack tblib zict sortedcontainers tornado psutil \
importlib_metadata zipp absl-py mpmath dm-tree attrs"
if [[ "${1:-}" == "--fetch-wheels" ]]; then
    mkdir -p .git/info && touch .git/info/exclude
    grep -qx '/.whl/' .git/info/exclude || echo /.whl/ >> .git/info/exclude
    for w in $WHEELS; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            --platform any -d .whl "$w" || echo "[gpu_session] could not fetch $w"
    done
    du -sh .whl
    exit 0
fi
OUT=${OUT:-/tmp/gpu_out}
LOG=$OUT/logs
mkdir -p "$LOG"
export PYTHONUNBUFFERED=1
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        && export PYTHONPATH=/tmp/site
fi
python3 -m pip install -q --no-build-isolation --no-deps -e . > "$LOG/install.log" 2>&1 || { tail -30 "$LOG/install.log"; exit 1; }
steps=("$@"); [[ ${#steps[@]} -eq 0 ]] && steps=(info tests cuda bench demo repro)
stamp=$(date -u +%Y-%m-%d)_$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')
for s in "${steps[@]}"; do
    echo "[gpu_session] $s ($(date -u +%T))"
    case $s in
        info) { nvidia-smi -L; nvidia-smi; python3 -c "import torch, cupy; print('torch', torch.__version__, torch.version.cuda); print('cupy', cupy.__version__)"; ldpfast info; } > "$LOG/${stamp}_info.log" 2>&1 ;;
        tests) timeout 560 python3 -m pytest -q -p no:cacheprovider -m "not cuda" > "$LOG/${stamp}_pytest_cpu.log" 2>&1
               tail -3 "$LOG/${stamp}_pytest_cpu.log" ;;
        cuda) timeout 560 python3 -m pytest -q -p no:cacheprovider -m cuda -rs > "$LOG/${stamp}_pytest_cuda.log" 2>&1
              tail -15 "$LOG/${stamp}_pytest_cuda.log" ;;
        bench) timeout 560 python3 benchmarks/bench_gpu.py --out "$LOG" > "$LOG/${stamp}_bench_gpu.log" 2>&1
               tail -25 "$LOG/${stamp}_bench_gpu.log" ;;
        demo) timeout 300 ldpfast demo --device cuda > "$LOG/${stamp}_demo.log" 2>&1; tail -5 "$LOG/${stamp}_demo.log" ;;
        repro) timeout 560 python3 tools/gpu_repro_cells.py --out "$LOG" > "$LOG/${stamp}_repro.log" 2>&1
               tail -6 "$LOG/${stamp}_repro.log" ;;
        *) echo "unknown step $s" ;;
    esac
done
tar czf "$OUT/gpu.tgz" -C "$OUT" logs && rm -rf "$LOG"
