"""PEP 562 lazy sub-modules, shared by the packages that expose theirs as attributes.

``import ldpfast`` must stay cheap (torch_geometric, dask and numba are slow to import), yet
``ldpfast.methods.lpgnn.fit(...)`` must work without importing the sub-module first.
"""
from __future__ import annotations

import importlib


def lazy_submodules(package: str, names, namespace: dict):
    """Return ``(__getattr__, __dir__)`` for ``package`` loading ``names`` on first access."""
    names = tuple(names)

    def __getattr__(name):
        if name in names:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
