#!/usr/bin/env bash
# Smoke test of an installed ldpfast wheel, run where the wheel is installed (CI's venv with
# no compiler on PATH, cibuildwheel's test-command): the package's compiled ldpfast._C
# imports (no fallback to Numba), py.typed ships, the Cora demo runs, and `ldpfast bench` finds
# the benchmark scripts the wheel carries and runs one (the report store's, --quick).
set -euo pipefail
cd "$(mktemp -d)"  # away from any checkout: the installed package is what gets imported
python - <<'PY'
import pathlib
import sys

import ldpfast
import ldpfast._C

where = pathlib.Path(ldpfast.__file__).parent
print(f"[wheel] ldpfast {ldpfast.__version__} from {where}; ldpfast._C: {ldpfast._C.__file__}")
reason = ldpfast.available_backends()["cpp"]
if reason is not None:
    sys.exit(f"[wheel] the C++ backend is unavailable: {reason}")
if not (where / "py.typed").is_file():
    sys.exit("[wheel] py.typed is missing from the installed package")
PY
# --quick where this version's demo has it, else the shortest run the demo accepts
help=$(ldpfast demo --help)
if grep -q -- "--quick" <<<"$help"; then
    ldpfast demo --quick
else
    ldpfast demo --epochs 1
fi
# the benchmarks ship inside the wheel (ldpfast/_bench/benchmarks): listed and run from here,
# where there is no checkout
ldpfast bench --list
ldpfast bench store --quick --out "$PWD/bench-results"
ls "$PWD"/bench-results/bench_store_quick*.json >/dev/null
