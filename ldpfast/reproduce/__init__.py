"""Reproductions of the four papers' tables and figures, one module per paper:
:mod:`.rgnn`, :mod:`.lpgnn`, :mod:`.dprr`, :mod:`.heterpoisson`.  Each holds the paper's
numbers, the grid, the runs of :mod:`ldpfast.methods` and their report, and
``reproduce_main(argv)`` behind ``ldpfast reproduce METHOD``.  Shared table, plot and JSON
helpers: :mod:`._report`.

The modules are imported on first use (PEP 562): ``ldpfast.reproduce.rgnn`` works after
``import ldpfast.reproduce`` without loading the others.
"""
from __future__ import annotations

import importlib

_SUBMODULES = ("dprr", "heterpoisson", "lpgnn", "rgnn")
__all__ = list(_SUBMODULES)


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
