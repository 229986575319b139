#!/usr/bin/env bash
# Issue 16 (GPU verification) in ONE device call that ends before a global deadline, with the
# logs and JSON tarred into $OUT/gpu.tgz (at most 8 files come back) and a running summary in
# $OUT/summary.txt.
#
# Before any GPU time, check the GPU tests' own logic here (tools/gpu_dryrun.py says how to read it):
#     PYTHONPATH=tools python -m pytest -p gpu_dryrun -m cuda -q --tb=line
# Here, once per session:
#     bash tools/gpu_session.sh --prepare     # cp312 wheels the GPU machine lacks -> .whl/,
#                                             # ../shared/datasets -> .gpu_data/ (both ignored)
# Then through the device tool, carry [".whl", ".gpu_data"], timeout_s about BUDGET + 40:
#     GPU_SESSION_BUDGET=520 bash tools/gpu_session.sh [STEP...]
#     STEP in: info cuda cpu bench demo repro ddp train (default: all but ddp and train; `cpu` runs
#     in the background beside `cuda`, and the benchmarks wait for it, keeping 90 s for themselves
#     and the rest, so their timings see a quiet host)
#     `train` (issue 32 part 5): benchmarks/bench_gpu_train.py, one training epoch of LPGNN and
#     HeterPoisson DP-SGD beside a plain PyG GCN epoch on the products-sized and Orkut-like
#     graphs, JSON/MD into the logs.  Never run yet; its time is estimated (not measured) at
#     2-4 minutes, so name it alone, e.g. GPU_SESSION_BUDGET=400 bash tools/gpu_session.sh info train
# Timings seen on an H200 (2026-11-26): build 31-38 s; -m cuda alone 75 s; the CPU suite under
# -n 10 227 s; bench 26 s (Orkut-like generated in 4 s); demo 17 s; repro cells 21 s.  So the
# default run fits BUDGET=480 (about 8.5 minutes of device time with the machine's start).
# Every step gets min(its own cap, what is left of the budget minus a reserve for the steps
# after it); a step cut short says so in the summary.  The GPU machine has python3.12, torch
# +cu130, torch_geometric, cupy-cuda13x, numba, pybind11, pytest(-xdist), scipy, matplotlib,
# pyarrow; pymetis, dp-accounting and dask[distributed] travel as wheels.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="pymetis==2025.2.2 dp-accounting==0.6.0 dm-tree==0.1.10 dask==2026.8.0 distributed==2026.8.0 \
partd==1.4.2 locket==1.0.0 tblib==3.2.2 zict==3.0.0 tornado==6.6.1 importlib_metadata==10.2.0"
if [[ "${1:-}" == "--prepare" ]]; then
    mkdir -p .git/info && touch .git/info/exclude
    for p in /.whl/ /.gpu_data/; do grep -qx "$p" .git/info/exclude || echo "$p" >> .git/info/exclude; done
    for w in $WHEELS; do
        python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
            --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
            --platform manylinux1_x86_64 --platform any -d .whl "$w" 2>/dev/null || echo "[gpu_session] could not fetch $w"
    done
    if [[ -d ../shared/datasets ]]; then mkdir -p .gpu_data && cp -r ../shared/datasets .gpu_data/; fi
    du -sh .whl .gpu_data 2>/dev/null
    exit 0
fi

T0=$(date +%s)
BUDGET=${GPU_SESSION_BUDGET:-520}
OUT=${OUT:-/tmp/gpu_out}
LOG=$OUT/logs
mkdir -p "$LOG"
SUM=$OUT/summary.txt
export PYTHONUNBUFFERED=1
left() { echo $((BUDGET - ($(date +%s) - T0))); }
# cap WANT RESERVE: seconds a step may take, keeping RESERVE for the steps after it (0: skip)
cap() { local w=$1 l=$(($(left) - $2)); ((l < w)) && w=$l; ((w < 10)) && w=0; echo $w; }
note() { echo "[gpu_session +$(($(date +%s) - T0))s] $*" | tee -a "$SUM"; }
# run NAME WANT RESERVE CMD...: one step under its cap, its status in the summary
run() {
    local name=$1 t; t=$(cap "$2" "$3"); shift 3
    if ((t == 0)); then note "$name: SKIPPED (no time left)"; return; fi
    note "$name: start (cap ${t}s)"
    timeout -k 5 "$t" "$@"
    local rc=$?
    ((rc == 124 || rc == 137)) && note "$name: CUT SHORT at its ${t}s cap" || note "$name: rc=$rc"
}
finish() {
    note "done; tarring logs"
    tar czf "$OUT/gpu.tgz" -C "$OUT" logs && rm -rf "$LOG"
    exit 0
}

if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
        > "$LOG/wheels.log" 2>&1 && export PYTHONPATH=/tmp/site || note "wheel install failed: $(tail -3 "$LOG/wheels.log")"
fi
[[ -d .gpu_data/datasets ]] && export LDPFAST_DATA=$PWD/.gpu_data/datasets
# setup.py compiles the extension's sources in parallel (one job per core)
note "build: start"
if [[ -z ${GPU_SESSION_SKIP_BUILD:-} ]]; then  # set it only to check this script's flow here
    python3 -m pip install -q --no-build-isolation --no-deps -e . > "$LOG/install.log" 2>&1 \
        || { note "build FAILED"; tail -40 "$LOG/install.log"; finish; }
fi
note "build: done"
stamp=$(date -u +%Y-%m-%d)_$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr ' ' '-')
steps=("$@"); [[ ${#steps[@]} -eq 0 ]] && steps=(info cuda cpu bench demo repro)
has() { [[ " ${steps[*]} " == *" $1 "* ]]; }

if has info; then
    { nvidia-smi -L; nvidia-smi; lscpu | head -20
      python3 -c "import torch, cupy; print('torch', torch.__version__, torch.version.cuda); print('cupy', cupy.__version__)"
      ldpfast info; } > "$LOG/${stamp}_info.log" 2>&1
    grep -E "backend cuda|^GPU|torch |cupy " "$LOG/${stamp}_info.log" | tee -a "$SUM"
    if ! grep -q "backend cuda  : available" "$LOG/${stamp}_info.log"; then
        note "cuda backend unavailable: stopping early (see info log)"; tail -30 "$LOG/${stamp}_info.log"; finish
    fi
fi
cpu_pid=
# wait_cpu SECONDS: wait for the background CPU suite at most that long; false if still running
wait_cpu() {
    local _
    for _ in $(seq "$1"); do kill -0 "$cpu_pid" 2>/dev/null || return 0; sleep 1; done
    ! kill -0 "$cpu_pid" 2>/dev/null
}
if has cpu; then
    # the CPU suite in the background on 10 of the 16 cores (xdist), one thread per worker
    ( t=$(cap 330 150); ((t == 0)) && { note "cpu suite: SKIPPED (no time left)"; exit; }
      note "cpu suite: start (cap ${t}s, -n 10)"
      OMP_NUM_THREADS=1 LDPFAST_NUM_THREADS=2 timeout -k 5 "$t" python3 -m pytest -q -p no:cacheprovider \
          -m "not cuda" -n 10 > "$LOG/${stamp}_pytest_cpu.log" 2>&1
      note "cpu suite: rc=$? $(tail -1 "$LOG/${stamp}_pytest_cpu.log")" ) &
    cpu_pid=$!
fi
if has cuda; then
    # -v: one line per test as it ends; failures' tracebacks land in the live log at once
    # (tools/pytest_live.py), and pytest-timeout (where installed) turns a hang into a failure
    # with its stack.  GPU_CUDA_K: ';'-separated -k expressions run one after another (an
    # order of priority); default: the whole -m cuda suite at once.
    export PYTEST_LIVE_LOG=$LOG/${stamp}_pytest_cuda_failures.log
    tmo=(); python3 -c "import pytest_timeout" 2>/dev/null && tmo=(--timeout "${GPU_TEST_TIMEOUT:-60}")
    IFS=';' read -ra groups <<< "${GPU_CUDA_K:-}"; [[ ${#groups[@]} -eq 0 ]] && groups=("")
    gi=0
    for k in "${groups[@]}"; do
        gi=$((gi + 1)); kk=(); [[ -n $k ]] && kk=(-k "$k")
        run "pytest -m cuda (group $gi)" "${GPU_CUDA_CAP:-200}" "${GPU_CUDA_RESERVE:-200}" \
            env PYTHONPATH="tools${PYTHONPATH:+:$PYTHONPATH}" python3 -m pytest -v -p no:cacheprovider \
            -p pytest_live -m cuda -rs "${tmo[@]}" "${kk[@]}" >> "$LOG/${stamp}_pytest_cuda.log" 2>&1
        note "cuda group $gi: $(grep -E "[0-9]+ (passed|failed|skipped|error)" "$LOG/${stamp}_pytest_cuda.log" | tail -1)"
    done
    grep -E "^tests/.*(PASSED|FAILED|ERROR|SKIPPED)" "$LOG/${stamp}_pytest_cuda.log" | grep -v PASSED | head -40
    [[ -f $PYTEST_LIVE_LOG ]] && grep -E "^=====|^E " "$PYTEST_LIVE_LOG" | head -80
fi
if has ddp; then  # the test that needs spawn once a GPU is visible
    run "pytest ddp" 90 20 python3 -m pytest -q -p no:cacheprovider tests/test_distributed_ddp.py \
        > "$LOG/${stamp}_pytest_ddp.log" 2>&1
    tail -3 "$LOG/${stamp}_pytest_ddp.log"
fi
if [[ -n $cpu_pid ]] && has bench; then  # a quiet host for the timings, but not at any price
    wait_cpu "$(cap 300 90)" || note "bench starts with the CPU suite still running (load $(cut -d' ' -f1-3 /proc/loadavg))"
fi
if has bench; then
    run bench_gpu 240 75 python3 benchmarks/bench_gpu.py --repeat 3 --out "$LOG" > "$LOG/${stamp}_bench_gpu.log" 2>&1
    grep -E "copy:|ERROR|skipped" "$LOG/${stamp}_bench_gpu.log" | head -40
    sed -n '/^Targets:/,$p' "$LOG/${stamp}_bench_gpu.log"
fi
has demo && { run "demo --device cuda" 60 35 ldpfast demo --device cuda --seed 7 --json "$LOG/${stamp}_demo.json" \
    > "$LOG/${stamp}_demo.log" 2>&1; tail -6 "$LOG/${stamp}_demo.log"; }
has repro && { run "repro cells" 60 8 python3 tools/gpu_repro_cells.py --out "$LOG" > "$LOG/${stamp}_repro.log" 2>&1
    tail -8 "$LOG/${stamp}_repro.log"; }
if has train; then  # after the rest: its rows only need a quiet host, not a reserve behind them
    [[ -n $cpu_pid ]] && { wait_cpu "$(cap 300 90)" || note "train starts with the CPU suite still running"; }
    run bench_gpu_train 300 6 python3 benchmarks/bench_gpu_train.py --repeat 3 --out "$LOG" \
        > "$LOG/${stamp}_bench_gpu_train.log" 2>&1
    grep -E "ERROR|skipped|exit status" "$LOG/${stamp}_bench_gpu_train.log" | head -20
    sed -n '/^| graph /,/^$/p' "$LOG/${stamp}_bench_gpu_train.log" | head -12
fi
if [[ -n $cpu_pid ]]; then
    wait_cpu "$(cap 300 6)" || { note "cpu suite still running at the deadline: stopping it"
        pkill -f "pytest -q -p no:cacheprovider -m not cuda"; }
    grep -E "^(FAILED|ERROR)" "$LOG/${stamp}_pytest_cpu.log" | head -30
    tail -2 "$LOG/${stamp}_pytest_cpu.log"
fi
finish
