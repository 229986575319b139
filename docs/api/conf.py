"""Sphinx configuration of ldpfast's reference documentation.

Build (from the root of the checkout, after the README's install):

    pip install -r docs/api/requirements.txt
    python -m sphinx -W --keep-going -b html docs/api docs/api/_build/html

The guides and tutorials are markdown pages here (MyST); every code block in them runs in the
tests (tests/test_docs_snippets.py).  ``docs/api/generated/`` (not committed) holds copies of
the reproduction pages (docs/reproductions) and of the guides beside this folder that exist
(:data:`GUIDES`).

The reference pages (``docs/api/reference/``, not committed) are generated here from the
public-name table of ARCHITECTURE.md (``tools/public_api.py``), so every public name is
documented from its docstring, and a name without a docstring, or one that no longer
imports, is a warning (an error under ``-W``, as in CI).
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import re
import sys
from pathlib import Path

from sphinx.pycode import ModuleAnalyzer
from sphinx.util import logging

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))  # the checkout: with the editable install, the built package

project = "ldpfast"
author = "ldpfast authors"
copyright = "ldpfast authors"
release = version = importlib.import_module("ldpfast").__version__

extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"
html_theme = "alabaster"
html_static_path: list[str] = []
# The GPU packages are never needed to read the docstrings (ldpfast imports them lazily).
autodoc_mock_imports = ["cupy", "cupyx", "cupy_backends"]
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
# The docstrings' types are free-form ("1-D int tensor", '{"cpp", "numba"}'): shown as
# written, not turned into cross-references.
napoleon_use_param = False
napoleon_use_keyword = False
# A reference to an ldpfast name that is not documented is an error (under -W); references
# to other libraries (torch, numpy, PyG: no intersphinx, CI runs offline) and to private
# modules (``ldpfast.x._y``: not documented by design) are not checked.
nitpicky = True
nitpick_ignore_regex = [(r"py:.*", r".*\._.*")]  # + the non-ldpfast names, set below
myst_heading_anchors = 3
suppress_warnings = ["myst.header"]  # README sections included from their second level

log = logging.getLogger("ldpfast.docs")


# --- the reference pages, from ARCHITECTURE.md's public-name table ---------------------------
def _public_api():
    spec = importlib.util.spec_from_file_location("public_api", REPO / "tools" / "public_api.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


AREAS = {  # page -> (title, intro); a module's page is its first part after ``ldpfast.``
    "ldpfast": ("ldpfast (top level)", "Backends, threads and the errors every part raises."),
    "rng": ("ldpfast.rng", "Counter-based randomness (Philox4x32-10) and exact samplers."),
    "graph": ("ldpfast.graph", "CSR helpers and adjacency conversions."),
    "ops": ("ldpfast.ops", "Propagation (KProp) with autograd."),
    "nn": ("ldpfast.nn", "PyTorch modules."),
    "partition": ("ldpfast.partition", "Graph partitioning for RGNN's bags."),
    "datasets": ("ldpfast.datasets", "Offline loaders, the embedded Cora, synthetic graphs."),
    "mechanisms": ("ldpfast.mechanisms", "The local randomisers: features, labels, edges."),
    "estimation": ("ldpfast.estimation", "Server-side estimators (post-processing)."),
    "transforms": ("ldpfast.transforms", "PyG transforms around the mechanisms."),
    "sampling": ("ldpfast.sampling", "HeterPoisson sub-graph sampling."),
    "privacy": ("ldpfast.privacy",
                "Ledger, LDP bounds, users and the report store, DP-SGD and its accountants."),
    "methods": ("ldpfast.methods",
                "Helpers of the papers' methods (each method has its page under Methods)."),
    "reproduce": ("ldpfast.reproduce", "The papers' grids, numbers and reports."),
    "distributed": ("ldpfast.distributed", "Sharded randomisation and data-parallel DP-SGD."),
    "cli": ("ldpfast.cli", "The ``ldpfast`` command."),
    "demo": ("ldpfast.demo", "The Cora demo (``ldpfast demo``)."),
}


def _is_private(mod: str) -> bool:
    return any(p.startswith("_") for p in mod.split("."))


def _documented_at(mod: str, orig: str, shown: str, reexp: list[str]) -> tuple[str, str]:
    """(public module, name there) under which a name is documented: its defining module
    when that is public, else the shortest public module that re-exports it."""
    if not _is_private(mod):
        return mod, orig
    pub = min((m for m in reexp if not _is_private(m)), key=lambda m: (m.count("."), m))
    alias = re.search(r"\(as (\S+)\)$", shown)
    if alias and alias.group(1).rsplit(".", 1)[0] == pub:
        return pub, alias.group(1).rsplit(".", 1)[1]
    return pub, orig


def _directive(obj) -> str:
    if inspect.isclass(obj):
        return "autoclass"
    if inspect.isfunction(obj) or inspect.isbuiltin(obj) or callable(obj):
        return "autofunction"
    return "autodata"


PUBLIC: dict[str, str] = {}  # documented dotted name -> kind, for the docstring check
ALIASES: dict[str, str] = {}  # another path of a public name -> where it is documented
DEFINED_IN: dict[str, tuple[str, str]] = {}  # documented name -> (defining module, name there)


def _write_reference() -> None:
    out = HERE / "reference"
    out.mkdir(exist_ok=True)
    sections: dict[str, dict[str, list[tuple]]] = {}  # page -> module -> names
    for mod, orig, shown, reexp in _public_api().entries():
        where, name = _documented_at(mod, orig, shown, reexp)
        area = where.split(".")[1] if "." in where else "ldpfast"
        AREAS.setdefault(area, (f"ldpfast.{area}", ""))  # a new package: a page of its own
        also = [m for m in [mod, *reexp] if m != where and not _is_private(m)]
        for m in [mod, *reexp]:  # the other paths of the name, for cross-references
            alias = re.search(r"\(as (\S+)\)$", shown)
            other = alias.group(1) if alias and alias.group(1).startswith(m + ".") else f"{m}.{orig}"
            if other != f"{where}.{name}":
                ALIASES[other] = f"{where}.{name}"
        sections.setdefault(area, {}).setdefault(where, []).append((name, shown, also, mod, orig))
    api = _public_api()
    shims = {m for m, f in api._modules().items() if api._scan(m, f, api._modules())[2]}
    for m in api._modules():
        if not (_is_private(m) or m in shims or m.startswith("ldpfast.methods.") or m == "ldpfast"):
            AREAS.setdefault(m.split(".")[1], (f"ldpfast.{m.split('.')[1]}", ""))
            sections.setdefault(m.split(".")[1], {}).setdefault(m, [])
    pages = []
    for area, (title, intro) in AREAS.items():
        if area not in sections:
            continue
        lines = [title, "=" * len(title), "", *([intro, ""] if intro else [])]
        for where, names in sorted(sections[area].items()):
            head = f"``{where}``"
            lines += [head, "-" * len(head), "", f".. automodule:: {where}", ""]
            for name, shown, also, mod, orig in names:
                obj = _import(where, name)
                kind = _directive(obj)
                PUBLIC[f"{where}.{name}"] = kind
                DEFINED_IN[f"{where}.{name}"] = (mod, orig)
                lines.append(f".. {kind}:: {where}.{name}")
                if kind == "autoclass":
                    lines.append("   :members:")
                elif kind == "autodata" and (len(repr(obj)) > 80 or isinstance(obj, os.PathLike)):
                    lines.append("   :no-value:")
                lines.append("")
                if also:
                    lines += ["   Also importable from " + ", ".join(f"``{m}``" for m in also)
                              + (f" (table entry: ``{shown}``)." if shown != name else "."), ""]
        pages.append(area)
        _write(out / f"{area}.rst", "\n".join(lines))
    index = ["API reference", "=============", "",
             "Every public name of ARCHITECTURE.md's table (``tools/public_api.py``), from its",
             "docstring, grouped by package.", "", ".. toctree::", "   :maxdepth: 2", ""]
    _write(out / "index.rst", "\n".join(index + [f"   {p}" for p in pages]) + "\n")


def _import(module: str, name: str):
    return getattr(importlib.import_module(module), name)


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:  # unchanged: no rebuild
        path.write_text(text, encoding="utf-8")


_write_reference()


# --- pages from the markdown outside docs/api (``generated/``, not committed) -----------------
#: Guides beside this site (docs/NAME.md) shown in it when present, in this order.
GUIDES = {"recipes": "Recipes: accuracy when features, labels and edges are private",
          "dpsgd_opacus": "DP-SGD for Opacus users", "dpsgd_any_model": "DP-SGD for any PyG model",
          "dpsgd_utility": "What node-level DP-SGD reaches",
          "privacy_audit": "The privacy audit"}
_LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")


def _copy_page(src: Path, dst: Path, copied: set[Path]) -> None:
    """Copy a markdown page; a relative link to a file that is not copied beside it becomes
    its text and the repository path (the site has no page for it), so -W stays meaningful."""
    def fix(m):
        bang, text, target = m.groups()
        if re.match(r"^[a-z]+:|^#|^/", target):
            return m.group(0)
        path = (src.parent / target.split("#")[0]).resolve()
        if path in copied:
            return m.group(0)
        shown = path.relative_to(REPO).as_posix() if path.is_relative_to(REPO) else target
        return f"{text} (`{shown}`)" if not bang else f"(figure: `{shown}`)"

    _write(dst, _LINK.sub(fix, src.read_text(encoding="utf-8")))


def _write_generated() -> None:
    out = HERE / "generated"
    (out / "reproductions").mkdir(parents=True, exist_ok=True)
    repro = REPO / "docs" / "reproductions"
    files = sorted(repro.glob("*")) if repro.is_dir() else []
    copied = {f.resolve() for f in files}
    for f in files:
        if f.suffix == ".md":
            _copy_page(f, out / "reproductions" / f.name, copied)
        elif f.suffix in (".png", ".svg", ".jpg") and (not (out / "reproductions" / f.name).exists()
                                                     or (out / "reproductions" / f.name).read_bytes() != f.read_bytes()):
            (out / "reproductions" / f.name).write_bytes(f.read_bytes())
    present = [g for g in GUIDES if (REPO / "docs" / f"{g}.md").is_file()]
    for g in present:
        _copy_page(REPO / "docs" / f"{g}.md", out / f"{g}.md", set())
    lines = ["# Further guides", ""]
    if present:
        lines += ["```{toctree}", ":maxdepth: 1", "", *present, "```"]
    else:
        lines += ["None in this checkout."]
    _write(out / "guides.md", "\n".join(lines) + "\n")
    keep = ({out / "guides.md"} | {out / f"{g}.md" for g in present}
            | {out / "reproductions" / f.name for f in files})
    for stale in [p for p in out.rglob("*") if p.is_file() and p not in keep]:
        stale.unlink()  # a page whose source is gone: Sphinx would warn it is in no toctree


_write_generated()
# Checked: ``ldpfast.*`` targets, and bare or relative ones that name a public ldpfast name
# (``:func:`dprr``` in a docstring of ``ldpfast.mechanisms.edges``).
_BARE = sorted({t.rsplit(".", 1)[-1] for t in [*PUBLIC, *ALIASES, *_public_api()._modules()]})
_BARE_RE = "|".join(map(re.escape, _BARE))
nitpick_ignore_regex.append((r"py:.*", rf"(?!ldpfast\b)(?!\.?(?:[\w.]+\.)?(?:{_BARE_RE})$).*"))


# --- docstrings: free-form section titles, |E| notation, the undocumented-name check --------
# The docstrings are NumPy style; besides napoleon's sections (Parameters, Returns, ...) they
# use their own titles ("Papers", "Privacy", "Shapes", ...).  Each is registered as a napoleon
# section (a rubric), so that it also ends the section above it: napoleon would otherwise read
# a title that follows "Parameters" as one more parameter.
_KNOWN = {"args", "arguments", "attention", "attributes", "caution", "danger", "error",
          "example", "examples", "hint", "important", "keyword args", "keyword arguments",
          "methods", "note", "notes", "other parameters", "parameters", "receive", "receives",
          "return", "returns", "raise", "raises", "references", "see also", "tip", "todo",
          "warning", "warnings", "warn", "warns", "yield", "yields"}


def _docstring_titles() -> list:
    titles = set()
    for f in sorted((REPO / "ldpfast").rglob("*.py")):
        lines = f.read_text(encoding="utf-8").splitlines()
        for above, title, under in zip(lines, lines[1:], lines[2:]):
            indent = len(title) - len(title.lstrip())
            if (re.fullmatch(r"\s*-{3,}\s*", under) and title.strip() and not above.strip()
                    and len(under) - len(under.lstrip()) == indent
                    and title.strip().lower() not in _KNOWN):
                titles.add(title.strip())
    return [(t, "params_style") if t.startswith("Parameters") else t for t in sorted(titles)]


napoleon_custom_sections = _docstring_titles()

# ``|E|`` (the number of edges) and the like are notation in the docstrings, not reST
# substitutions: outside literals they are escaped.
_LITERAL = re.compile(r"(``.*?``|`[^`]*`)")
_BARS = re.compile(r"(?<![\\\w|])\|(?=\S)([^|`]{1,40}?)(?<=\S)\|(?![\w|])")


def _escape_bars(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        if "|" in line:
            parts = _LITERAL.split(line)
            parts[::2] = [_BARS.sub(r"\\|\1\\|", p) for p in parts[::2]]
            lines[i] = "".join(parts)


_RELATIVE = re.compile(r":(mod|func|class|meth|attr|data|obj|exc):`(~?)(\.[\w.]+)`")


def _relative_refs(app, what, name, obj, options, lines):
    """``:mod:`.features``` in a docstring of ``ldpfast.transforms.base`` means
    ``ldpfast.transforms.features``, as a relative import would (Sphinx would take any module
    whose name ends in ``.features``, and warn that there are two)."""
    module = name if what == "module" else getattr(obj, "__module__", None) or name
    mod = sys.modules.get(module)
    package = module if mod is not None and hasattr(mod, "__path__") else module.rsplit(".", 1)[0]

    def absolute(m):
        role, tilde, rel = m.groups()
        target = package + rel
        if not _exists(target):
            return m.group(0)
        return f":{role}:`{rel[1:] if tilde else rel} <{target}>`"

    for i, line in enumerate(lines):
        if ":`." in line or ":`~." in line:
            lines[i] = _RELATIVE.sub(absolute, line)


def _exists(dotted: str) -> bool:
    """A module, or an attribute path from one."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def _no_type_doc(app, what, name, obj, options, lines):
    """A constant's documentation is its ``#:`` comment (or the string after it) where it is
    defined, also when it is documented under a re-export; without one autodoc would show
    its type's docstring (``dict``'s)."""
    tdoc = inspect.getdoc(type(obj))
    if what in ("data", "attribute") and tdoc and "\n".join(lines).strip() == tdoc.strip():
        lines[:] = []
    if what == "data" and not "".join(lines).strip() and name in DEFINED_IN:
        module, attr = DEFINED_IN[name]
        lines[:] = ModuleAnalyzer.for_module(module).find_attr_docs().get(("", attr), [])


# Public names exempt from the docstring check (none: every public name is documented).
PENDING_DOCSTRINGS: set[str] = set()


def _undocumented(obj) -> bool:
    doc = obj.__dict__.get("__doc__") if inspect.isclass(obj) else getattr(obj, "__doc__", None)
    if inspect.isclass(obj) and doc and doc.startswith(f"{obj.__name__}("):
        return True  # a dataclass's generated signature
    return not (doc or "").strip()


def _check_documented(app, what, name, obj, options, lines):
    """A public function or class needs a docstring, a public constant a ``#:`` comment."""
    if name not in PUBLIC or name in PENDING_DOCSTRINGS:
        return
    if (_undocumented(obj) if what in ("function", "class", "exception")
            else not "".join(lines).strip()):
        log.warning("public name without documentation (a docstring; a ``#:`` comment for a "
                    "constant): %s", name, location=app.env.docname)


def _resolve_alias(app, env, node, contnode):
    """Resolve what Sphinx could not: a re-exported name (``ldpfast.mechanisms.grr`` is
    documented as ``ldpfast.mechanisms.features.grr``, where it is defined), and a bare or
    relative name as the docstring's module sees it (``:class:`CSR``` in ``ldpfast.ops``, which
    imports it from ``ldpfast.graph``)."""
    if node.get("refdomain") != "py":
        return None
    ref = node.get("reftarget", "")
    if ref.startswith("ldpfast."):
        return _resolve_absolute(app, env, node, ref, contnode)
    module = node.get("py:module") or ""
    parts = module.split(".")
    candidates = [".".join(parts[:i]) + "." + ref.lstrip(".") for i in range(len(parts), 0, -1)]
    obj = _lookup(module, ref.lstrip(".")) if module else None
    if getattr(obj, "__qualname__", None) and getattr(obj, "__module__", None):
        candidates.insert(0, f"{obj.__module__}.{obj.__qualname__}")
    for candidate in candidates:
        if candidate.startswith("ldpfast."):
            found = _resolve_absolute(app, env, node, candidate, contnode)
            if found is not None:
                return found
    return None


def _resolve_absolute(app, env, node, ref: str, contnode):
    target = ALIASES.get(ref)
    if target is None:  # a method or attribute of a re-exported class
        head = next((a for a in ALIASES if ref.startswith(a + ".")), None)
        target = head and ALIASES[head] + ref[len(head):]
    py = env.get_domain("py")
    for t in ([ref] if target is None else [ref, target]):
        found = py.resolve_xref(env, node["refdoc"], app.builder, node["reftype"], t,
                                _retarget(node, t), contnode)
        if found is not None:
            return found
    return None


def _lookup(module: str, dotted: str):
    obj = sys.modules.get(module)
    for attr in dotted.split("."):
        obj = getattr(obj, attr, None)
    return obj


def _retarget(node, target: str):
    node = node.deepcopy()
    node["reftarget"] = target
    node["refspecific"] = False
    return node


# A napoleon field list (Parameters, Returns, ...) whose entries are not names: a paragraph left
# under the last parameter, with no blank-line-and-title to end the section, is read as more
# parameters and renders as a bold list of sentence fragments.  -W alone does not see it.
_FIELD = re.compile(r"^:([\w ]+):(?: |$)")
_ENTRY = re.compile(r"^(?::[\w ]+: )?\s*\* \*\*(.*?)\*\*")
_NAME = r"(?:(?:\\?\*){0,2}[A-Za-z_]\w*|\.\.\.)"  # a name, *args, \*\*kw or ...
_NAMES = re.compile(rf"{_NAME}(?:, ?{_NAME})*")


def _check_fields(app, what, name, obj, options, lines):
    field = None
    for line in lines:
        m = _FIELD.match(line)
        if m:
            field = m.group(1)
        elif line and not line[0].isspace():
            field = None
        entry = _ENTRY.match(line) if field else None
        if entry and field in ("Parameters", "Other Parameters", "Keyword Arguments", "Attributes",
                               "Returns", "Yields", "Raises", "Warns") \
                and not _NAMES.fullmatch(entry.group(1)):
            log.warning("%s: the %s list has an entry that is not a name (%r): end the list with "
                        "a blank line and a section title, or move the text above it",
                        name, field, entry.group(1)[:60], location=app.env.docname)


_RAW_MARKUP = re.compile(r"``|(?<![\w`]):(?:func|class|meth|mod|attr|data|obj|exc|doc|ref):`")


def _check_raw_markup(app, doctree, docname):
    """Markup that reached the page as text (````x```` or ``:func:`x``` shown verbatim)."""
    from docutils import nodes

    for text in doctree.findall(nodes.Text):
        parent = text.parent
        if isinstance(parent, (nodes.literal, nodes.literal_block, nodes.raw, nodes.comment,
                               nodes.FixedTextElement)):
            continue
        m = _RAW_MARKUP.search(text.astext())
        if m:
            snippet = text.astext()[max(0, m.start() - 40):m.end() + 40].replace("\n", " ")
            log.warning("markup shown as text: %r", snippet, location=parent)


def setup(app):
    app.connect("doctree-resolved", _check_raw_markup)
    app.connect("autodoc-process-docstring", _check_fields, priority=650)  # after napoleon
    app.connect("missing-reference", _resolve_alias)
    app.connect("autodoc-process-docstring", _no_type_doc, priority=390)
    app.connect("autodoc-process-docstring", _check_documented, priority=400)  # before napoleon
    app.connect("autodoc-process-docstring", _relative_refs, priority=600)
    app.connect("autodoc-process-docstring", _escape_bars, priority=600)  # after napoleon
