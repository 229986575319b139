"""End-to-end pipelines, one per paper: :mod:`.lpgnn`, :mod:`.rgnn`, :mod:`.dprr`,
:mod:`.heterpoisson`.  Each holds the paper's algorithm and ``fit(...)``, returning a report
(accuracy, the privacy spent, the settings).  :func:`private_pipeline` (:mod:`.pipeline`) is
the recipe for features, labels *and* edges all private, in one call.  The reproductions of the papers' tables
(``ldpfast reproduce METHOD``) are :mod:`ldpfast.reproduce`.

The four modules are attributes of this package (``ldpfast.methods.lpgnn.fit(...)`` works
after ``import ldpfast``), imported on first use (PEP 562) so that importing the package
stays cheap.
"""
from __future__ import annotations

from .._lazy import lazy_submodules as _lazy_submodules
from ._common import random_split
from .pipeline import private_pipeline, private_transforms

__all__ = ["dprr", "heterpoisson", "lpgnn", "pipeline", "private_pipeline", "private_transforms", "random_split",
           "rgnn"]

__getattr__, __dir__ = _lazy_submodules(__name__, ("dprr", "heterpoisson", "lpgnn", "rgnn"), globals())
