"""Every code block of the README and the docs runs (the rules: tests/docs_snippets.py).

One test per block, so a broken block fails the build under its page and line.  The blocks
run in one child process per session (torch and PyG imported once): the default run skips the
blocks marked slow; ``pytest -m slow`` runs every block.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docs_snippets as S
import pytest

ROOT = Path(__file__).resolve().parents[1]
if not (ROOT / "README.md").is_file() or not (ROOT / "docs").is_dir():
    pytest.skip("README.md and docs/ are not next to the tests (an installed copy)", allow_module_level=True)

BLOCKS = S.collect() + S.doctest_blocks()


def _id(b: dict) -> str:
    return f"{b['page']}:{b['line']}"


def _run_child(blocks: list[dict], slow: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LDPFAST_DATA"}
    env["LDPFAST_OFFLINE"] = "1"
    # one torch thread: the blocks are small, and on a shared machine two threads per process
    # oversubscribe the cores (a Cora GCN epoch: 0.09 s with one thread, 0.6 s with two there)
    env.setdefault("OMP_NUM_THREADS", "1")
    r = subprocess.run([sys.executable, str(Path(S.__file__))], input=json.dumps({"blocks": blocks, "slow": slow}),
                       capture_output=True, text=True, env=env, cwd=ROOT, timeout=1800, check=False)
    results = {}
    for line in r.stdout.splitlines():
        if line.startswith("SNIPPET "):
            res = json.loads(line[len("SNIPPET "):])
            results[f"{res['page']}:{res['line']}"] = res
    if r.returncode != 0 or len(results) != len(blocks):
        raise AssertionError(f"the snippet runner stopped (status {r.returncode}) after {len(results)} of "
                             f"{len(blocks)} blocks:\n{r.stderr[-5000:]}")
    return results


@pytest.fixture(scope="session")
def fast_results():
    return _run_child(BLOCKS, slow=False)


@pytest.fixture(scope="session")
def all_results():
    return _run_child(BLOCKS, slow=True)


def test_blocks_found():
    pages = {b["page"] for b in BLOCKS}
    assert "README.md" in pages and any(p.startswith("docs/api/") for p in pages)
    assert sum(b["lang"] == "python" for b in BLOCKS) >= 10


def test_every_fence_says_its_language():
    """A fence without a language (or with an unknown one) would not be run: say ``text`` for
    output and listings."""
    bad = [f"{_id(b)} ({b['lang'] or 'no language'})" for b in BLOCKS
           if b["lang"] not in S.RUN_LANGS | S.TEXT_LANGS | {"doctest", "directive"}]
    assert not bad, "fences without a known language: " + ", ".join(bad)


def test_every_skip_gives_its_reason():
    bad = [_id(b) for b in BLOCKS if b["mark"] == "skip" and len(b["reason"].strip()) < 8]
    assert not bad, "<!-- snippet: skip: REASON --> needs its reason: " + ", ".join(bad)


def test_sphinx_rst_pages_hold_no_code():
    """The docs pages with code are markdown (run here); an rst page with a code block would
    escape the check."""
    bad = [p.name for p in (ROOT / "docs" / "api").rglob("*.rst")
           if "reference" not in p.parts and ("code-block::" in p.read_text() or ".. code::" in p.read_text())]
    assert not bad, bad


def _check(b: dict, results: dict) -> None:
    res = results[_id(b)]
    if res["status"] == "not run":
        pytest.skip(f"{b['mark']}: {b['reason']}" if b["mark"] else f"{b['lang']} block: not code")
    assert res["status"] == "passed", (
        f"{_id(b)} ({b['lang']} block) failed after {res['seconds']} s:\n{b['code']}\n--- output ---\n{res['output']}")


RUNNABLE = [b for b in BLOCKS if b["lang"] in S.RUN_LANGS | {"doctest"}]


@pytest.mark.parametrize("block", [b for b in RUNNABLE if b["mark"] != "slow"], ids=_id)
def test_block_runs(block, fast_results):
    _check(block, fast_results)


@pytest.mark.slow
@pytest.mark.parametrize("block", [b for b in RUNNABLE if b["mark"] == "slow"], ids=_id)
def test_slow_block_runs(block, all_results):
    _check(block, all_results)


def test_a_broken_block_fails(tmp_path):
    """The runner reports a failing python block, a failing bash block and a failing doctest;
    a skipped block is not run; a page's blocks share their namespace, README blocks do not."""
    page = ("# t\n\n```python\nx = 1\n```\n\n```python\nassert x == 1\n```\n\n```bash\nfalse\n```\n\n"
            "<!-- snippet: skip: needs a GPU -->\n```python\nraise SystemExit(3)\n```\n\n"
            "```python\nraise ValueError('broken')\n```\n")
    blocks = S.fences(page)
    for k, b in enumerate(blocks):
        b.update(page="docs/t.md", index=k)
    readme = [dict(b, page="README.md") for b in S.fences("```python\ny = 1\n```\n\n```python\nprint(y)\n```\n")]
    res = _run_child(blocks + readme, slow=False)
    by_line = {r["line"]: r["status"] for r in res.values() if r["page"] == "docs/t.md"}
    assert [by_line[b["line"]] for b in blocks] == ["passed", "passed", "failed", "not run", "failed"]
    assert "ValueError: broken" in res[f"docs/t.md:{blocks[-1]['line']}"]["output"]
    assert [res[f"README.md:{b['line']}"]["status"] for b in readme] == ["passed", "failed"]
    assert blocks[3]["reason"] == "needs a GPU"
