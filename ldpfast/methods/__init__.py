"""End-to-end pipelines, one per paper: :mod:`.lpgnn`, :mod:`.rgnn`, :mod:`.dprr`,
:mod:`.heterpoisson`.  Each holds the paper's algorithm and ``fit(...)``, returning a report
(accuracy, the privacy spent, the settings).  The reproductions of the papers' tables
(``ldpfast reproduce METHOD``) are :mod:`ldpfast.reproduce`.

The four modules are attributes of this package (``ldpfast.methods.lpgnn.fit(...)`` works
after ``import ldpfast``), imported on first use (PEP 562) so that importing the package
stays cheap.
"""
from __future__ import annotations

import importlib

from ._common import random_split

_SUBMODULES = ("dprr", "heterpoisson", "lpgnn", "rgnn")
__all__ = ["dprr", "heterpoisson", "lpgnn", "random_split", "rgnn"]


def __getattr__(name):
    if name in _SUBMODULES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_SUBMODULES))
