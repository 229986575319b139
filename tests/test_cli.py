"""The ``ldpfast`` command's errors: one line in argparse's form, naming the option and what it
accepts, exit status 2, for every sub-command; tracebacks only for bugs or with ``--debug``.
And ``ldpfast bench`` finds the benchmark scripts where a wheel puts them."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ldpfast import cli

ROOT = Path(__file__).resolve().parents[1]


def _err(capsys, argv) -> tuple[int, str]:
    """Exit status and stderr of ``ldpfast ARGV`` run in this process."""
    try:
        rc = cli.main(argv)
    except SystemExit as e:  # argparse's own errors exit
        rc = e.code
    err = capsys.readouterr().err
    return rc, err


def _one_line(err: str, prog: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line, got:\n{err}"
    assert lines[0].startswith(f"{prog}: error: "), lines[0]
    assert "Traceback" not in err and "usage:" not in err
    return lines[0]


@pytest.mark.parametrize("argv, prog, expect", [
    (["demo", "--eps-x", "-1"], "ldpfast demo", "--eps-x: expected a number > 0, got -1"),
    (["demo", "--eps-y", "abc"], "ldpfast demo", "--eps-y: expected a number > 0, got abc"),
    (["demo", "--eps-x", "inf"], "ldpfast demo", "--eps-x: expected a number > 0, got inf"),
    (["demo", "--device", "gpu"], "ldpfast demo", "--device: expected cpu, cuda or cuda:N, got gpu"),
    (["demo", "--epochs", "0"], "ldpfast demo", "--epochs: expected an integer >= 1, got 0"),
    (["demo", "--seed", "-1"], "ldpfast demo", "--seed: expected an integer in [0, 2**64), got -1"),
    (["demo", "--seed", str(2**64)], "ldpfast demo", "--seed: expected an integer in [0, 2**64)"),
    (["demo", "--root", "{tmp}/nope"], "ldpfast demo", "--root: expected an existing folder"),
    (["demo", "--json", "{tmp}/a_file/out.json"], "ldpfast demo", "--json: cannot write"),
    (["demo", "--bogus"], "ldpfast", "unrecognized arguments: --bogus"),
    (["randomize"], "ldpfast randomize", "the following arguments are required: input, output"),
    (["randomize", "{tmp}/nope", "{tmp}/out"], "ldpfast randomize", "input: expected an existing folder"),
    (["randomize", "{tmp}", "{tmp}/a_file"], "ldpfast randomize", "output: expected a folder"),
    (["randomize", "{tmp}", "{tmp}/out", "--edges", "dp"], "ldpfast randomize",
     "--edges: invalid choice: 'dp' (choose from"),
    (["randomize", "{tmp}", "{tmp}/out", "--edge-eps", "0"], "ldpfast randomize",
     "--edge-eps: expected a number > 0, got 0"),
    (["randomize", "{tmp}", "{tmp}/out", "--dprr-alpha", "1"], "ldpfast randomize",
     "--dprr-alpha: expected a number > 0 and < 1, got 1"),
    (["randomize", "{tmp}", "{tmp}/out", "--workers", "0"], "ldpfast randomize",
     "--workers: expected an integer >= 1, got 0"),
    (["randomize", "{tmp}", "{tmp}/out", "--seed-file", "{tmp}/nope"], "ldpfast randomize",
     "--seed-file: expected an existing file"),
    (["randomize", "{tmp}", "{tmp}/out", "--edges", "dprr"], "ldpfast randomize", "--edges needs --edge-eps"),
    (["randomize", "{tmp}", "{tmp}/out", "--features", "grr", "--feature-eps", "1"], "ldpfast randomize",
     "--features grr needs --k"),
    (["randomize", "{tmp}", "{tmp}/out", "--budget", "2"], "ldpfast randomize", "--budget caps"),
    (["randomize", "{tmp}", "{tmp}/out", "--seed", "1", "--seed-file", "{tmp}/a_file", "--no-store"], "ldpfast randomize",
     "give --seed or --seed-file, not both"),
    (["bench", "--dir", "{tmp}/nope"], "ldpfast bench", "--dir: expected an existing folder"),
    (["bench", "--dir", "{tmp}"], "ldpfast bench", "no benchmark scripts"),
    (["reproduce", "nope"], "ldpfast reproduce", "method: invalid choice: 'nope' (choose from"),
    (["reproduce", "lpgnn", "--runs", "0"], "ldpfast reproduce lpgnn", "--runs: expected an integer >= 1, got 0"),
    (["reproduce", "rgnn", "--eps-x", "-1"], "ldpfast reproduce rgnn", "--eps-x: expected a number > 0, got -1"),
    (["reproduce", "dprr", "--alphas", "1"], "ldpfast reproduce dprr",
     "--alphas: expected a number >= 0 and < 1, got 1"),
    (["reproduce", "heterpoisson", "--runs", "-1"], "ldpfast reproduce heterpoisson",
     "--runs: expected an integer >= 1, got -1"),
    (["reproduce", "heterpoisson", "--eps", "0"], "ldpfast reproduce heterpoisson",
     "--eps: expected a number > 0, got 0"),
])
def test_bad_input_is_one_line_naming_the_option(capsys, tmp_path, monkeypatch, argv, prog, expect):
    (tmp_path / "a_file").write_text("1\n")
    monkeypatch.chdir(tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    rc, err = _err(capsys, argv)
    line = _one_line(err, prog)
    assert rc == 2
    assert expect in line, line
    assert not (tmp_path / "out").exists() and not (tmp_path / "results").exists()  # nothing ran


def test_library_errors_after_parsing_are_one_line(capsys, tmp_path):
    """What only the library can check (here: a folder that is not a shard set) is the same
    one line, status 2, with the library's message; nothing is written."""
    rc, err = _err(capsys, ["randomize", str(tmp_path), str(tmp_path / "out"), "--edges", "dprr",
                            "--edge-eps", "1", "--no-progress", "--no-store"])
    line = _one_line(err, "ldpfast randomize")
    assert rc == 2 and "meta.json" in line
    assert not (tmp_path / "out").exists()


def test_value_errors_one_line_bugs_keep_their_traceback(capsys, monkeypatch):
    import ldpfast.demo

    def bad_input(**kw):
        raise ValueError("eps: expected a finite real number > 0, got -1.0")

    monkeypatch.setattr(ldpfast.demo, "run_demo", bad_input)
    rc, err = _err(capsys, ["demo", "--quick"])
    assert rc == 2 and _one_line(err, "ldpfast demo").endswith("eps: expected a finite real number > 0, got -1.0")
    with pytest.raises(ValueError, match="eps: expected"):  # --debug: the traceback
        cli.main(["--debug", "demo", "--quick"])
    monkeypatch.setenv("LDPFAST_DEBUG", "1")
    with pytest.raises(ValueError, match="eps: expected"):
        cli.main(["demo", "--quick"])
    monkeypatch.delenv("LDPFAST_DEBUG")

    def bug(**kw):
        raise RuntimeError("an internal bug")

    monkeypatch.setattr(ldpfast.demo, "run_demo", bug)
    with pytest.raises(RuntimeError, match="an internal bug"):  # not dressed up as bad input
        cli.main(["demo", "--quick"])


def test_missing_gpu_is_one_line_status_1(capsys, monkeypatch):
    import ldpfast.demo
    from ldpfast import BackendUnavailable

    def no_gpu(**kw):
        raise BackendUnavailable("cuda: no CUDA device (torch.cuda.is_available() is False)")

    monkeypatch.setattr(ldpfast.demo, "run_demo", no_gpu)
    rc, err = _err(capsys, ["demo", "--device", "cuda"])
    assert rc == 1 and "no CUDA device" in _one_line(err, "ldpfast demo")


def test_console_command_prints_one_line(tmp_path):
    """The real process (``python -m ldpfast``, as the ``ldpfast`` script): one line on
    stderr, nothing on stdout, status 2."""
    r = subprocess.run([sys.executable, "-m", "ldpfast", "demo", "--eps-x", "-1"], capture_output=True,
                       text=True, cwd=tmp_path, timeout=300, check=False)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "ldpfast demo: error: --eps-x: expected a number > 0, got -1\n"


@pytest.mark.skipif(not (ROOT / "benchmarks" / "harness.py").is_file(), reason="no source checkout")
def test_bench_runs_from_the_copy_a_wheel_carries(tmp_path):
    """A wheel carries benchmarks/ as ldpfast/_bench/benchmarks (setup.py's build_ext; the CI
    wheel smoke test runs one there).  Here: that layout without a checkout in reach, the
    scripts listed and one run (its --help: imports its harness) from the copy."""
    copy = tmp_path / "site" / "ldpfast" / "_bench" / "benchmarks"
    shutil.copytree(ROOT / "benchmarks", copy, ignore=shutil.ignore_patterns("__pycache__", "results"))
    work = tmp_path / "work"
    work.mkdir()
    code = f"""
import sys
from pathlib import Path
from ldpfast import cli
cli._bench_candidates = lambda: [Path({str(work / 'benchmarks')!r}), Path({str(copy)!r})]
assert cli.main(["bench", "--list"]) == 0
try:
    cli.main(["bench", "dprr", "--help"])
except SystemExit as e:
    assert e.code == 0, e.code
print("harness from", sys.modules["benchmarks.harness"].__file__)
"""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=work, env=env,
                       timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "benchmarks: " in r.stdout and "store" in r.stdout and "dprr" in r.stdout
    assert f"harness from {copy / 'harness.py'}" in r.stdout
