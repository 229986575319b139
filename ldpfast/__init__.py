"""ldpfast: fast local- and node-level differential privacy for graph learning.

Sub-modules: :mod:`ldpfast.rng` (counter-based randomness), :mod:`ldpfast.graph` (CSR
helpers), :mod:`ldpfast.datasets` (offline loaders, synthetic graphs),
:mod:`ldpfast.mechanisms`, :mod:`ldpfast.transforms`, :mod:`ldpfast.privacy`,
:mod:`ldpfast.methods` (each paper's algorithm and ``fit``), :mod:`ldpfast.reproduce` (the
papers' tables: ``ldpfast reproduce``) (each imported on first attribute access).
"""
from __future__ import annotations

from ._lazy import lazy_submodules as _lazy_submodules

__version__ = "0.1.0"

from ._backend import (  # noqa: F401
    BackendUnavailable,
    DeviceOutOfMemory,
    get_num_threads,
    set_num_threads,
)
from ._backend import available as available_backends  # noqa: F401

# dpsgd, audit: deprecated paths of ldpfast.privacy.dpsgd / ldpfast.privacy.audit (issue 12)
_LAZY = ("rng", "graph", "datasets", "mechanisms", "transforms", "privacy", "estimation",
         "methods", "reproduce", "distributed", "nn", "ops", "sampling", "dpsgd", "audit", "cli", "demo")

# Lazy sub-modules keep `import ldpfast` fast (torch_geometric import is slow).
__getattr__, __dir__ = _lazy_submodules("ldpfast", _LAZY, globals())
