"""Reproductions of the four papers' tables and figures, one module per paper:
:mod:`.rgnn`, :mod:`.lpgnn`, :mod:`.dprr`, :mod:`.heterpoisson`, and the recipes table of
:mod:`ldpfast.methods.pipeline` (:mod:`.pipeline`).  Each holds the paper's
numbers, the grid, the runs of :mod:`ldpfast.methods` and their report, and
``reproduce_main(argv)`` behind ``ldpfast reproduce METHOD``.  Shared table, plot and JSON
helpers: :mod:`._report`.

The modules are imported on first use (PEP 562): ``ldpfast.reproduce.rgnn`` works after
``import ldpfast.reproduce`` without loading the others.
"""
from __future__ import annotations

from .._lazy import lazy_submodules as _lazy_submodules

__all__ = ["dprr", "heterpoisson", "lpgnn", "pipeline", "rgnn"]
__getattr__, __dir__ = _lazy_submodules(__name__, __all__, globals())
