"""The public-name table of ARCHITECTURE.md, generated from the source with ``ast``.

    python tools/public_api.py           # print the table
    python tools/public_api.py --write   # replace the table in ARCHITECTURE.md
    python tools/public_api.py --check   # exit 1 if ARCHITECTURE.md's table is out of date

A public module is one whose dotted path has no part starting with ``_``.  Its public names
are its ``__all__`` when it has one, else what it defines at top level (``def``, ``class``,
assignments) plus, in a package ``__init__``, what it re-exports (``from .x import name``),
leaving out names starting with ``_``.  Each name is listed once, in the row of the module
that defines it, with the public modules that re-export it.  Deprecated shims (modules that
use ``ldpfast._deprecated``) and sub-module names are left out.  Nothing is imported, so
the table needs neither torch nor the compiled extension.
"""
from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "ldpfast"
DOC = REPO / "ARCHITECTURE.md"
BEGIN, END = "<!-- public-api:begin -->", "<!-- public-api:end -->"


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PKG.rglob("*.py")):
        parts = list(f.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


def _resolve(module: str, is_pkg: bool, level: int, target: str | None) -> str:
    if not level:
        return target or ""
    base = module.split(".") if is_pkg else module.split(".")[:-1]
    base = base[: len(base) - (level - 1)] if level > 1 else base
    return ".".join(base + ([target] if target else []))


def _scan(module: str, path: Path, modules):
    """(public names, {name: defining module, original name}, is a deprecated shim)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    is_pkg = path.name == "__init__.py"
    defined, imported, all_ = set(), {}, None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        defined.add(n.id)
                        if n.id == "__all__" and node.value is not None:
                            all_ = list(ast.literal_eval(node.value))
        elif isinstance(node, ast.ImportFrom):
            src = _resolve(module, is_pkg, node.level, node.module)
            if src == "ldpfast._deprecated":
                return [], {}, True
            for a in node.names:
                if src.startswith("ldpfast") and f"{src}.{a.name}" not in modules:
                    imported[a.asname or a.name] = (src, a.name)
    if all_ is not None:
        names = all_
    else:
        names = sorted(n for n in defined | (set(imported) if is_pkg else set())
                       if not n.startswith("_"))
    names = [n for n in names if f"{module}.{n}" not in modules]  # sub-modules have their own row
    return names, imported, False


def entries() -> list[tuple[str, str, str, list[str]]]:
    """Every public name as ``(defining module, name there, shown name, re-exporters)``.

    The shown name is ``"orig (as pkg.alias)"`` where a public module re-exports the name
    under another one.  Sorted by module, then name (case-insensitive), as in the table;
    ``docs/api/conf.py`` builds the reference pages from this list.
    """
    modules = _modules()
    scans = {m: _scan(m, f, modules) for m, f in modules.items()}
    rows: dict[str, dict[str, tuple[str, set]]] = {}  # defining module -> {shown: (orig, re-exporters)}

    def home(mod: str, name: str, seen=()):
        """Follow re-exports to the module that defines ``name``."""
        _, imported, _ = scans.get(mod, ([], {}, False))
        if name in imported and mod not in seen:
            src, orig = imported[name]
            if src in scans:
                return home(src, orig, (*seen, mod))
        return mod, name

    public = [m for m in modules if not any(p.startswith("_") for p in m.split("."))]
    for m in public:
        names, _, shim = scans[m]
        if shim:
            continue
        for n in names:
            where, orig = home(m, n)
            shown = orig if orig == n else f"{orig} (as {m}.{n})"
            _, reexp = rows.setdefault(where, {}).setdefault(shown, (orig, set()))
            if where != m:
                reexp.add(m)
    return [(mod, orig, shown, sorted(reexp))
            for mod in sorted(rows)
            for shown, (orig, reexp) in sorted(rows[mod].items(), key=lambda kv: kv[0].lower())]


def table() -> str:
    rows: dict[str, list[tuple[str, list[str]]]] = {}
    for mod, _, shown, reexp in entries():
        rows.setdefault(mod, []).append((shown, reexp))
    lines = ["| module | public names | also importable from |", "|---|---|---|"]
    for mod, names in rows.items():
        via = sorted(set().union(*(r for _, r in names)))
        lines.append(f"| `{mod}` | {', '.join(f'`{n}`' for n, _ in names)} | "
                     f"{', '.join(f'`{v}`' for v in via)} |")
    return "\n".join(lines)


def current() -> str:
    text = DOC.read_text(encoding="utf-8")
    return text.split(BEGIN, 1)[1].split(END, 1)[0].strip()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--write", action="store_true")
    g.add_argument("--check", action="store_true")
    a = p.parse_args(argv)
    t = table()
    if a.write:
        text = DOC.read_text(encoding="utf-8")
        head, rest = text.split(BEGIN, 1)
        DOC.write_text(f"{head}{BEGIN}\n{t}\n{END}{rest.split(END, 1)[1]}", encoding="utf-8")
    elif a.check:
        if current() != t:
            print("ARCHITECTURE.md: the public-name table is out of date; run python tools/public_api.py --write",
                  file=sys.stderr)
            return 1
    else:
        print(t)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
