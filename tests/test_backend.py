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


def test_cli_version(capsys):
    from ldpfast.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.strip() == f"ldpfast {ldpfast.__version__}"


def test_cli_help_is_plain_text_and_each_subcommands_own(capsys):
    """Top-level help without reStructuredText; `ldpfast reproduce lpgnn --help` prints lpgnn's
    own options, in plain text too (it needed `-- --help`)."""
    from ldpfast.cli import main

    with pytest.raises(SystemExit) as e:
        main(["--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "Commands:" in out and "reproduce METHOD --help" in out
    assert "``" not in out and ":mod:" not in out and "\n--------" not in out
    with pytest.raises(SystemExit) as e:
        main(["reproduce", "lpgnn", "--help"])
    out = capsys.readouterr().out
    assert e.value.code == 0 and "usage: ldpfast reproduce lpgnn" in out and "--datasets" in out
    assert "``" not in out and ":mod:" not in out
    with pytest.raises(SystemExit) as e:
        main(["reproduce", "--help"])  # no method: the generic help
    assert e.value.code == 0 and "{rgnn,lpgnn,dprr,heterpoisson,pipeline}" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        main(["demo", "--bogus"])
    assert e.value.code == 2 and "--bogus" in capsys.readouterr().err


def _fake_lpgnn_fit(calls):
    from types import SimpleNamespace

    def fit(data, eps_x, eps_y, **kw):
        calls.append(kw)
        return SimpleNamespace(accuracy=0.5, settings={"k_x": 1, "k_y": 1, "epochs": kw.get("epochs", 500)})
    return fit


def test_cli_demo_quick_covers_the_lpgnn_fit(monkeypatch, tmp_path):
    import json

    import ldpfast.demo
    from ldpfast.cli import main
    from ldpfast.methods import lpgnn

    sage, fits = [], []
    monkeypatch.setattr(ldpfast.demo, "train_eval", lambda *a: sage.append(a[6]) or 0.5)
    monkeypatch.setattr(lpgnn, "fit", _fake_lpgnn_fit(fits))
    assert main(["demo", "--quick", "--seed", "1", "--json", str(tmp_path / "r.json")]) == 0
    quick = ldpfast.demo.QUICK_EPOCHS
    assert sage == [quick, quick] and fits[-1]["epochs"] == quick
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["quick"] and rep["epochs"] == {"graphsage": quick, "lpgnn": quick}
    assert main(["demo", "--epochs", "3", "--seed", "1"]) == 0  # --epochs reaches the LPGNN fit too
    assert sage[-2:] == [3, 3] and fits[-1]["epochs"] == 3


_SLOW_DEMO = """
import time
from types import SimpleNamespace
import ldpfast.demo
from ldpfast.cli import main
from ldpfast.methods import lpgnn
ldpfast.demo.train_eval = lambda *a: time.sleep(1.0) or 0.5
lpgnn.fit = lambda *a, **k: SimpleNamespace(accuracy=0.5, settings={"k_x": 1, "k_y": 1})
raise SystemExit(main(["demo", "--epochs", "1", "--seed", "1"]))
"""


def test_cli_demo_progress_arrives_as_it_happens():
    """Piped stdout: each progress line arrives when its stage ends (two 1 s trainings apart
    here), not all together at exit."""
    import time

    p = subprocess.Popen([sys.executable, "-c", _SLOW_DEMO], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, cwd=Path.home())
    lines = [(time.monotonic(), ln) for ln in p.stdout]
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0, err
    assert "randomised" in lines[0][1] and "[randomisation" in lines[-1][1], lines
    assert lines[-1][0] - lines[0][0] > 1.5, lines

# ----------------------------------------------------------------------------- fallback warning

def test_auto_fallback_to_numba_warns_once_with_reason(monkeypatch):
    monkeypatch.setitem(_backend._cache, "cpp", ImportError("no module named ldpfast._C"))
    monkeypatch.setattr(_backend, "_warned_fallback", False)
    monkeypatch.delenv("LDPFAST_BACKEND", raising=False)
    with pytest.warns(_backend.BackendFallbackWarning, match="no module named ldpfast._C"):
        assert _backend.resolve("cpu") == "numba"
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert _backend.resolve("cpu") == "numba"  # once per process
        monkeypatch.setattr(_backend, "_warned_fallback", False)
        assert _backend.resolve("cpu", "numba") == "numba"  # asked for: silent
        monkeypatch.setenv("LDPFAST_BACKEND", "numba")
        assert _backend.resolve("cpu") == "numba"


# ----------------------------------------------------------------------------- Numba cache

_CACHE_PROBE = """
import os, sys
if sys.argv[1] == "numba-first":
    import numba  # noqa: F401  (imported before ldpfast: its settings must be refreshed)
from ldpfast._numba import graph
import ldpfast
fn = next(v for v in vars(graph).values() if hasattr(v, "_cache") and hasattr(v, "py_func"))
print(os.environ["NUMBA_CACHE_DIR"])
print(fn._cache._cache_path)
print(os.path.dirname(ldpfast.__file__))
"""


@pytest.mark.parametrize("mode", ["plain", "numba-first", "user-set"])
def test_numba_cache_goes_to_the_user_cache(tmp_path, mode):
    """Numba's cache=True files go under <user cache>/numba, never inside the package
    (left-overs there outlive `pip uninstall` and shadow a later install)."""
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    env["LDPFAST_CACHE"] = str(tmp_path / "cache")
    want = tmp_path / "cache" / "numba"
    if mode == "user-set":
        env["NUMBA_CACHE_DIR"] = str(tmp_path / "mine")
        want = tmp_path / "mine"
    r = subprocess.run([sys.executable, "-c", _CACHE_PROBE, mode], capture_output=True,
                       text=True, env=env, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    env_dir, cache_path, pkg = r.stdout.splitlines()
    assert Path(env_dir) == want
    assert Path(cache_path).is_relative_to(want)
    assert not Path(cache_path).is_relative_to(pkg)
