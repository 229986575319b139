"""No import cycles inside ``ldpfast/`` (issue 12).

The graph is built with the standard ``ast`` module from every ``.py`` file of the package:
module-level *and* function-level imports (``ast.walk`` visits every node), ``import a.b``,
``from a import b``, relative imports resolved against the importing module's package,
``from . import x`` resolved to the sub-module ``x`` when there is one, and
``importlib.import_module`` with a literal name.  Only edges between ``ldpfast`` modules
count (the compiled ``ldpfast._C`` has no source and is left out); importing ``a.b.c`` is an
edge to ``a.b.c`` only (its parent packages run first, but a
package's ``__init__`` importing its own sub-modules is not a cycle).
"""
from __future__ import annotations

import ast
import textwrap
from itertools import pairwise
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "ldpfast"

def module_names(root: Path) -> dict[str, Path]:
    """``{dotted module name: file}`` for every ``.py`` file under the package ``root``."""
    out = {}
    for f in sorted(root.rglob("*.py")):
        parts = list(f.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _resolve_relative(module: str, is_package: bool, level: int, target: str | None) -> str:
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join(base + ([target] if target else []))


def imports_of(module: str, path: Path, modules) -> set[str]:
    """The ``ldpfast`` modules that ``module`` imports, anywhere in its body."""
    pkg = modules[module].name == "__init__.py"
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: set[str] = set()

    def add(name: str | None):
        if name in modules:  # not the compiled ldpfast._C (no source, imports nothing of ours)
            found.add(name)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                add(a.name)
        elif isinstance(node, ast.ImportFrom):
            base = (_resolve_relative(module, pkg, node.level, node.module) if node.level
                    else node.module)
            for a in node.names:
                sub = f"{base}.{a.name}"
                add(sub if sub in modules else base)
        elif (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)
              and ((isinstance(node.func, ast.Attribute) and node.func.attr == "import_module")
                   or (isinstance(node.func, ast.Name) and node.func.id == "import_module"))):
            name = node.args[0].value
            if name.startswith("."):
                level = len(name) - len(name.lstrip("."))
                name = _resolve_relative(module, pkg, level, name.lstrip(".") or None)
            add(name)
    found.discard(module)
    return found


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    modules = module_names(root)
    return {m: imports_of(m, f, modules) for m, f in modules.items()}


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components with more than one module (iterative)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def a_cycle(graph: dict[str, set[str]], comp: list[str]) -> list[str]:
    """One concrete cycle through the component (for the failure message)."""
    members, start = set(comp), comp[0]
    prev, frontier = {start: None}, [start]
    while frontier:  # BFS inside the component back to start
        nxt = []
        for v in frontier:
            for w in sorted(graph[v] & members):
                if w == start:  # v closes the cycle: walk back from v to start
                    path = [v]
                    while prev[path[-1]] is not None:
                        path.append(prev[path[-1]])
                    return path[::-1] + [start]
                if w not in prev:
                    prev[w] = v
                    nxt.append(w)
        frontier = nxt
    raise AssertionError("not a cycle")  # pragma: no cover


def cycles(graph, allowed=frozenset()) -> list[list[str]]:
    """A concrete cycle per strongly connected component not exactly an allowed pair."""
    allowed_sets = [set(p) for p in allowed]
    return [a_cycle(graph, c) for c in strongly_connected(graph) if set(c) not in allowed_sets]


# --------------------------------------------------------------------------- the package
def test_ldpfast_has_no_import_cycle():
    graph = import_graph()
    assert len(graph) > 50 and "ldpfast.transforms.edges" in graph  # the walk saw the package
    found = cycles(graph)
    assert not found, "import cycles in ldpfast/:\n" + "\n".join(" -> ".join(c) for c in found)


def test_walk_sees_every_kind_of_import(tmp_path):
    """A synthetic package with each import form; every cycle must be found."""
    pkg = tmp_path / "ldpfast"
    (pkg / "sub").mkdir(parents=True)
    files = {
        "__init__.py": "",
        "a.py": "def f():\n    from .b import g  # function-level\n",
        "b.py": "from . import a\n",                                   # from . import module
        "c.py": "import ldpfast.sub.d as d\n",                           # absolute, aliased
        "sub/__init__.py": "from .d import X\n",
        "sub/d.py": "class K:\n    def m(self):\n        from ..c import y\n",  # level 2, in a method
        "e.py": "import importlib\nM = importlib.import_module('ldpfast.f')\n",
        "f.py": "from ldpfast import e\n",
        "g.py": "from .sub import d\n",                                  # no cycle
        "h.py": "from . import g\nfrom .sub import X\n",              # attribute of a package
    }
    for name, body in files.items():
        (pkg / name).write_text(textwrap.dedent(body))
    graph = import_graph(pkg)
    assert graph["ldpfast.b"] == {"ldpfast.a"}
    assert graph["ldpfast.a"] == {"ldpfast.b"}
    assert graph["ldpfast.h"] == {"ldpfast.g", "ldpfast.sub"}
    found = {frozenset(c) for c in cycles(graph)}
    assert found == {frozenset({"ldpfast.a", "ldpfast.b"}), frozenset({"ldpfast.c", "ldpfast.sub.d"}),
                     frozenset({"ldpfast.e", "ldpfast.f"})}
    for c in cycles(graph):  # each reported path is a real cycle of the graph
        assert c[0] == c[-1] and all(w in graph[v] for v, w in pairwise(c))
    assert cycles(graph, {("ldpfast.a", "ldpfast.b"), ("ldpfast.c", "ldpfast.sub.d"),
                          ("ldpfast.e", "ldpfast.f")}) == []


@pytest.mark.parametrize("longer", [False, True])
def test_reported_cycle_is_a_path_of_the_graph(longer):
    g = {"x": {"y"}, "y": {"z"}, "z": {"x"} if longer else {"y"}}
    (comp,) = strongly_connected(g)
    c = a_cycle(g, comp)
    assert c[0] == c[-1] and all(w in g[v] for v, w in pairwise(c))
