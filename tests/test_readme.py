"""The README's code runs: every ```python block verbatim in a fresh process, and the two
install commands at the top are the ones CI (.ci/run) runs.  (No virtual environment is
created here: .ci/run does that.)"""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CI = ROOT / ".ci" / "run"

if not README.is_file():  # tests run from an installed copy without the checkout
    pytest.skip("README.md not found next to the tests", allow_module_level=True)

TEXT = README.read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", TEXT, flags=re.MULTILINE | re.DOTALL)


PYTHON_BLOCKS = _blocks("python")
VENV = ["python3 -m venv .venv", ". .venv/bin/activate", "pip install torch==2.13.0"]


def _steps(cmd: str) -> list[str]:
    return [s.strip() for s in cmd.strip().split("&&")]


def test_readme_has_python_examples():
    assert len(PYTHON_BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(PYTHON_BLOCKS)))
def test_python_block_runs(index, tmp_path):
    code = PYTHON_BLOCKS[index]
    env = dict(os.environ, LDPFAST_OFFLINE="1", LDPFAST_CACHE=str(tmp_path / "cache"))
    env.pop("LDPFAST_DATA", None)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=600, check=False)
    assert r.returncode == 0, f"README python block {index}:\n{code}\nstderr:\n{r.stderr}"


def test_top_commands_install_and_run():
    bash = _blocks("bash")
    assert len(bash) >= 2, "the README starts with the demo and the test command"
    demo, tests = _steps(bash[0]), _steps(bash[1])
    assert demo == [*VENV, "pip install -e .", "ldpfast demo"]
    assert tests == [*VENV, 'pip install -e ".[test]"', "pytest"]
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'ldpfast = "ldpfast.cli:main"' in pyproject  # the `ldpfast` command
    assert re.search(r"^test = \[.*pytest", pyproject, flags=re.MULTILINE)  # the [test] extra


def test_ci_runs_the_readme_test_command():
    tests = _steps(_blocks("bash")[1])
    lines = [ln.strip() for ln in CI.read_text().splitlines()
             if ln.strip() and not ln.strip().startswith("#")]
    quiet = [re.sub(r" -q\b", "", ln) for ln in lines]
    assert any(ln.startswith("python3 -m venv ") for ln in lines)
    for step in tests[2:4]:  # the torch pin and the editable install with the test extra
        assert step in quiet, f".ci/run does not run {step!r}"
    runs = [ln.split()[0] for ln in quiet]
    assert "pytest" in runs, ".ci/run does not run pytest"
    assert not any(ln.startswith("python -m pytest") for ln in quiet)


def test_examples_listed_exist():
    listed = set(re.findall(r"python (examples/\w+\.py)", TEXT))
    on_disk = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}
    assert listed and listed == on_disk
