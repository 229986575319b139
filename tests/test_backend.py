"""Backend selection, the extension's linkage, and the CLI."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfast
from ldpfast import _backend


def test_auto_picks_cpp_for_cpu():
    assert _backend.resolve("cpu", None) in ("cpp", "numba")
    assert _backend.resolve("cpu", "numba") == "numba"


def test_env_override(monkeypatch):
    monkeypatch.setenv("LDPFAST_BACKEND", "numba")
    assert _backend.resolve("cpu") == "numba"
    monkeypatch.setenv("LDPFAST_BACKEND", "bogus")
    with pytest.raises(ValueError, match="backend"):
        _backend.resolve("cpu")


def test_unavailable_backend_is_a_clear_error():
    with pytest.raises(_backend.BackendUnavailable, match="cuda"):
        _backend.get("cpu", "cuda")
    if _backend.available()["cuda"] is not None:
        with pytest.raises(_backend.BackendUnavailable, match="not available"):
            _backend.get("cuda", "cuda")


def test_set_num_threads_validates():
    with pytest.raises(ValueError, match="n:"):
        ldpfast.set_num_threads(0)


def test_extension_does_not_link_libtorch():
    import ldpfast._C as C

    out = subprocess.run(["ldd", C.__file__], capture_output=True, text=True, check=False).stdout
    assert out, "ldd printed nothing"
    for lib in ("libtorch", "libc10", "libgomp"):
        assert lib not in out, f"{lib} linked:\n{out}"


REPO = Path(__file__).resolve().parents[1]


def _cli(*args, cwd=None):
    # Default cwd outside the checkout, so `python -m` imports the installed package
    # (with its compiled _C), not the source tree.
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "ldpfast", *args], capture_output=True,
                          text=True, env=env, timeout=300, cwd=cwd or Path.home(), check=False)


def test_cli_info():
    r = _cli("info", "--json")
    assert r.returncode == 0, r.stderr
    import json

    info = json.loads(r.stdout)
    assert "cpp" in info["backends"] and info["threads"] >= 1


def test_cli_bench_list():
    if not (Path(__file__).resolve().parents[1] / "benchmarks" / "harness.py").exists():
        pytest.skip("no source checkout")
    r = _cli("bench", "--list", cwd=REPO)
    assert r.returncode == 0 and "benchmarks:" in r.stdout


def test_cli_unknown_bench():
    if not (Path(__file__).resolve().parents[1] / "benchmarks" / "harness.py").exists():
        pytest.skip("no source checkout")
    r = _cli("bench", "nope", cwd=REPO)
    assert r.returncode == 2 and "unknown benchmark" in r.stderr
