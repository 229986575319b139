"""pytest plugin: which CUDA kernels a test run launched, against ``ldpfast._cuda.KERNELS``.

    PYTHONPATH=tools python -m pytest -p launch_census [--census-require families|kernels]
                                      [--census-out F] ...

Wraps ``ldpfast._cuda._core._launch`` (after any other plugin has replaced it: the dry run's
emulated kernels, tools/gpu_dryrun.py) and counts each launch by module and kernel.  The
terminal summary names every listed kernel that never ran; ``--census-require families`` makes a
family (a ``csrc/cuda/<family>.cu``) with no launch a failure (exit status 1), ``kernels`` any
kernel, so a memcheck pass (tools/gpu_session.sh ``memcheck``) can show what it reached;
``--census-out`` writes the counts as JSON.

In a dry run (tools/gpu_dryrun.py) only tests that call ldpfast._cuda's launchers themselves
launch kernels: the public functions route by the tensors' real device, the CPU.
"""
from __future__ import annotations

import json

import pytest

_COUNTS: dict[str, dict[str, int]] = {}


def pytest_addoption(parser):
    g = parser.getgroup("launch_census")
    g.addoption("--census-require", choices=("families", "kernels"), default=None,
                help="fail unless every kernel family (or every kernel) of ldpfast._cuda.KERNELS was launched")
    g.addoption("--census-out", default=None, help="write the launch counts here (JSON)")


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    from ldpfast._cuda import _core

    inner = _core._launch

    def launch(module, kernel, n_threads, args, device=None):
        per = _COUNTS.setdefault(module, {})
        per[kernel] = per.get(kernel, 0) + 1
        return inner(module, kernel, n_threads, args, device)

    _core._launch = launch


def _missing() -> list[str]:
    from ldpfast._cuda import KERNELS

    return [f"{m}.{k}" for m, ks in KERNELS.items() for k in ks if k not in _COUNTS.get(m, {})]


def _missing_families() -> list[str]:
    from ldpfast._cuda import KERNELS

    return [m for m in KERNELS if not _COUNTS.get(m)]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    from ldpfast._cuda import KERNELS

    total = sum(len(ks) for ks in KERNELS.values())
    missing = _missing()
    fams = _missing_families()
    tr = terminalreporter
    tr.write_sep("=", "launch census")
    tr.write_line(f"launch census: {sum(sum(v.values()) for v in _COUNTS.values())} launches of "
                  f"{total - len(missing)} of {total} kernels; families never launched: {fams or 'none'}")
    if missing:
        tr.write_line(f"launch census: kernels never launched: {' '.join(missing)}")
    out = config.getoption("--census-out")
    if out:
        with open(out, "w") as f:
            json.dump({"counts": _COUNTS, "missing": missing}, f, indent=1, sort_keys=True)


def pytest_sessionfinish(session, exitstatus):
    need = session.config.getoption("--census-require")
    short = _missing_families() if need == "families" else _missing() if need == "kernels" else []
    if short and session.exitstatus == 0:
        session.exitstatus = 1
