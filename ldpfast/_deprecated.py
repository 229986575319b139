"""Old import paths kept for one release after the issue-12 re-layout.

(:func:`moved_names`: the names that moved from ``ldpfast.methods.<paper>`` to
``ldpfast.reproduce.<paper>``.)  :func:`moved` builds the module ``__getattr__`` / ``__dir__`` of a thin shim module: each
attribute of the old module resolves to the same object in its new home, with a
``DeprecationWarning`` naming the new path (on every access, so that each old use is seen).
The shims import their new modules explicitly, so the import graph (``tests/
test_import_cycles.py``) sees what they depend on.
"""
from __future__ import annotations

import importlib
import warnings
from types import ModuleType

REMOVED_IN = "0.2.0"


def moved(old: str, modules: tuple[ModuleType, ...]):
    """``(__getattr__, __dir__)`` for the shim module ``old`` whose names now live in
    ``modules`` (the new public package first, then the sub-modules that hold private names).

    The warning names the new public package when the name is in its ``__all__``, else the
    module that defines it.  Dunder names are not forwarded (the import system asks a module
    for ``__path__``: a shim must not pass for the package it points to).
    """

    def _lookup(name: str):
        hits = [m for m in modules if name in vars(m)]
        if not hits or (name.startswith("__") and name.endswith("__")):
            raise AttributeError(f"module {old!r} has no attribute {name!r}")
        obj = vars(hits[0])[name]
        home = getattr(obj, "__module__", None)
        for m in hits:
            if name in getattr(m, "__all__", ()):
                return m, obj
        for m in hits:
            if m.__name__ == home:
                return m, obj
        return hits[0], obj

    def __getattr__(name: str):
        mod, obj = _lookup(name)
        warnings.warn(f"{old} is deprecated and will be removed in ldpfast {REMOVED_IN}: "
                      f"import {name} from {mod.__name__} instead",
                      DeprecationWarning, stacklevel=2)
        return obj

    def __dir__():
        return sorted({n for mod in modules for n in vars(mod) if not n.startswith("__")})

    return __getattr__, __dir__


def moved_names(old_module: str, new_module: str, names):
    """A module ``__getattr__`` (PEP 562) for names that moved from ``old_module`` to
    ``new_module``: reading one warns (DeprecationWarning naming the new path) and returns
    the moved object itself; other names raise AttributeError as usual.

    The new module is imported by name (``importlib``), on first use of a moved name only:
    a method module never imports the reproduction harness, which imports it.  Remove the
    shim, and this helper, in the release after the move.
    """
    names = frozenset(names)

    def __getattr__(name: str):
        if name not in names:
            raise AttributeError(f"module {old_module!r} has no attribute {name!r}")
        warnings.warn(f"{old_module}.{name} has moved to {new_module}.{name}; the old path "
                      f"will be removed in ldpfast {REMOVED_IN}", DeprecationWarning, stacklevel=2)
        return getattr(importlib.import_module(new_module), name)

    return __getattr__
