"""The README's two install commands at the top are the ones CI (.ci/run) runs (no virtual
environment is created here: .ci/run does that), and the examples the docs list are the ones
in examples/.  Every code block of the README runs in tests/test_docs_snippets.py."""
from __future__ import annotations

import re
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
    """docs/api/reproductions.md lists every script of examples/, and only those."""
    listed = set(re.findall(r"python (examples/\w+\.py)", (ROOT / "docs" / "api" / "reproductions.md").read_text()))
    on_disk = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}
    assert listed and listed == on_disk
