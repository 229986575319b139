"""The code blocks of the README and the docs, extracted and run (tests/test_docs_snippets.py).

Which blocks: every fenced block of ``README.md`` and of the markdown pages under ``docs/``
(the Sphinx pages in ``docs/api`` and the guides beside them), and every ``>>>`` example in
the docstrings of the ``ldpfast`` package (they are rendered on the reference pages).

* ``python`` blocks run; ``bash`` / ``sh`` / ``shell`` blocks run under ``bash -e -o pipefail``;
  ``console`` blocks run their ``$ `` lines.  Any other language (``text``, ``json``, ...) is
  output or a listing and is not run.  A fence without a language is an error: say ``text``.
* The README's blocks stand alone: each runs in a fresh namespace and a fresh folder, as a
  reader copies one.  A docs page is read top to bottom: its blocks run in order, sharing one
  namespace and one working folder (a python block may write the files a later bash block
  reads), like a notebook.
* A block is left out only with a visible reason, an HTML comment on the line above its fence:
  ``<!-- snippet: skip: needs a GPU -->``.  ``<!-- snippet: slow -->`` runs it only in the
  slow run (``pytest -m slow``).
* Each page (and each README block) runs in its own temporary folder with ``examples/`` and
  ``benchmarks/`` linked from the checkout, offline (``LDPFAST_OFFLINE=1``), with the dataset
  cache in that folder.

Run as a script, it runs the blocks it is given (a JSON list on stdin) and prints one JSON
result per block: tests/test_docs_snippets.py runs it once per session, in one process, so
that torch and PyG are imported once.
"""
from __future__ import annotations

import contextlib
import doctest
import io
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RUN_LANGS = {"python", "py", "bash", "sh", "shell", "console"}
TEXT_LANGS = {"text", "json", "toml", "yaml", "ini", "csv", "diff", "markdown", "md", "rst", "cpp", "c", "cuda",
              "output", "none"}
MARK = re.compile(r"^\s*<!--\s*snippet:\s*(skip|slow)\s*(?::\s*(.*?))?\s*-->\s*$")


def doc_files() -> list[Path]:
    """README.md, then every markdown page under docs/ (sorted)."""
    files = [ROOT / "README.md"] if (ROOT / "README.md").is_file() else []
    built = {"_build", "reference", "generated"}  # what the Sphinx build writes into docs/api
    return files + sorted(p for p in (ROOT / "docs").rglob("*.md")
                          if not built & set(p.relative_to(ROOT / "docs").parts[:2]))


def fences(text: str) -> list[dict]:
    """The fenced blocks of a markdown text: language, code, first line, marker."""
    out, inside, lines = [], None, text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"^(\s*)(`{3,}|~{3,})(.*)$", line)
        if inside is None and m:
            info = m.group(3).strip()
            lang = info.split()[-1] if info.startswith("{code") and len(info.split()) > 1 else info.split(" ")[0]
            if info.startswith("{") and not info.startswith("{code"):
                lang = "directive"  # a MyST directive ({toctree}, {note}, ...): not code
            j = i - 1
            while j >= 0 and not lines[j].strip():
                j -= 1
            mark = MARK.match(lines[j]) if j >= 0 and i - j <= 2 else None
            inside = {"lang": lang.lower(), "line": i + 1, "indent": len(m.group(1)), "fence": m.group(2),
                      "body": [], "mark": mark.group(1) if mark else None,
                      "reason": (mark.group(2) or "") if mark else ""}
        elif inside is not None and m and m.group(2).startswith(inside["fence"]) and not m.group(3).strip():
            inside["code"] = "\n".join(ln[inside["indent"]:] if ln[:inside["indent"]].isspace() else ln
                                       for ln in inside.pop("body")) + "\n"
            del inside["fence"], inside["indent"]
            out.append(inside)
            inside = None
        elif inside is not None:
            inside["body"].append(line)
    return out


def doctest_blocks() -> list[dict]:
    """Every ``>>>`` example in the docstrings of ldpfast's public modules (one block per
    docstring that has one; found by a scan of the sources, then by doctest)."""
    import importlib

    out = []
    for f in sorted((ROOT / "ldpfast").rglob("*.py")):
        rel = f.relative_to(ROOT).with_suffix("")
        if any(p.startswith("_") and p != "__init__" for p in rel.parts) or ">>> " not in f.read_text("utf-8"):
            continue
        name = ".".join(rel.parts[:-1] if rel.name == "__init__" else rel.parts)
        try:
            mod = importlib.import_module(name)
        except ImportError:  # an optional dependency (e.g. Dask) is missing: its docs are not run here
            continue
        for test in doctest.DocTestFinder(exclude_empty=True).find(mod):
            if test.examples and (test.filename or "").endswith(f.name):
                out.append({"page": f"{rel.as_posix()}.py", "lang": "doctest", "line": (test.lineno or 0) + 1,
                            "code": test.name, "mark": None, "reason": "", "index": None})
    return out


def collect() -> list[dict]:
    """Every block, with its page (path relative to the checkout) and index on that page."""
    blocks = []
    for f in doc_files():
        rel = f.relative_to(ROOT).as_posix()
        for k, b in enumerate(fences(f.read_text(encoding="utf-8"))):
            b.update(page=rel, index=k)
            blocks.append(b)
    return blocks


# --- running ---------------------------------------------------------------------------------
def _workdir() -> Path:
    d = Path(tempfile.mkdtemp(prefix="ldpfast-snippet-"))
    for name in ("examples", "benchmarks"):
        if (ROOT / name).is_dir():
            (d / name).symlink_to(ROOT / name)
    (d / "cache").mkdir()
    return d


def _run_shell(code: str, lang: str, cwd: Path) -> tuple[bool, str]:
    if lang == "console":
        code = "\n".join(ln[2:] for ln in code.splitlines() if ln.startswith("$ "))
    r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=cwd, capture_output=True, text=True,
                       timeout=900, check=False)
    return r.returncode == 0, (r.stdout[-3000:] + r.stderr[-6000:])


def _run_doctest(name: str) -> tuple[bool, str]:
    import importlib

    mod_name = name
    while mod_name:
        try:
            mod = importlib.import_module(mod_name)
            break
        except ImportError:
            mod_name = mod_name.rsplit(".", 1)[0]
    tests = [t for t in doctest.DocTestFinder().find(mod) if t.name == name]
    out = io.StringIO()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    for t in tests:
        runner.run(t, out=out.write)
    return runner.failures == 0 and bool(tests), out.getvalue() or ("" if tests else f"no doctest named {name}")


def run(blocks: list[dict], slow: bool) -> list[dict]:
    """Run the blocks in order: a page's blocks share a namespace and a folder, a README block
    gets its own; returns one result per block."""
    results, ns, cwd, page = [], {}, None, None
    home = os.getcwd()
    for b in blocks:
        standalone = b["page"] == "README.md" or b["lang"] == "doctest"
        if standalone or b["page"] != page:
            page, ns, cwd = b["page"], {"__name__": "__main__"}, _workdir()
        res = {"page": b["page"], "index": b.get("index"), "line": b["line"], "status": "passed", "output": "",
               "seconds": 0.0}
        if b["mark"] == "skip" or (b["mark"] == "slow" and not slow) or b["lang"] not in RUN_LANGS | {"doctest"}:
            res["status"] = "not run"
            results.append(res)
            continue
        t0 = time.perf_counter()
        os.environ["LDPFAST_CACHE"] = str(cwd / "cache")
        os.chdir(cwd)
        try:
            if b["lang"] in ("python", "py"):
                buf = io.StringIO()
                try:
                    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
                        exec(compile(b["code"], f"{b['page']}:{b['line']}", "exec"), ns)  # noqa: S102
                except BaseException:  # noqa: BLE001 - report whatever the block raised
                    res["status"] = "failed"
                    res["output"] = buf.getvalue()[-3000:] + "\n" + traceback.format_exc()[-6000:]
                else:
                    res["output"] = buf.getvalue()[-3000:]
            elif b["lang"] == "doctest":
                ok, out = _run_doctest(b["code"])
                res["status"], res["output"] = ("passed" if ok else "failed"), out[-6000:]
            else:
                ok, out = _run_shell(b["code"], b["lang"], cwd)
                res["status"], res["output"] = ("passed" if ok else "failed"), out
        finally:
            os.chdir(home)
        res["seconds"] = round(time.perf_counter() - t0, 2)
        results.append(res)
    return results


def main() -> int:
    req = json.load(sys.stdin)
    os.environ["LDPFAST_OFFLINE"] = "1"
    os.environ.pop("LDPFAST_DATA", None)
    for r in run(req["blocks"], req["slow"]):
        print("SNIPPET " + json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
