"""ldpfast: fast local- and node-level differential privacy for graph learning.

Sub-modules: :mod:`ldpfast.rng` (counter-based randomness), :mod:`ldpfast.graph` (CSR
helpers), :mod:`ldpfast.datasets` (offline loaders, synthetic graphs),
:mod:`ldpfast.mechanisms`, :mod:`ldpfast.transforms`, :mod:`ldpfast.privacy`,
:mod:`ldpfast.methods` (each paper's algorithm and ``fit``), :mod:`ldpfast.reproduce` (the
papers' tables: ``ldpfast reproduce``) (each imported on first attribute access).
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

from ._backend import (  # noqa: F401
    BackendUnavailable,
    DeviceOutOfMemory,
    get_num_threads,
    set_num_threads,
)
from ._backend import available as available_backends  # noqa: F401

_LAZY = ("rng", "graph", "datasets", "mechanisms", "transforms", "privacy", "estimation",
         "methods", "reproduce", "nn", "ops", "sampling", "dpsgd", "audit", "cli", "demo")


def __getattr__(name):
    # Lazy sub-modules keep `import ldpfast` fast (torch_geometric import is slow).
    if name in _LAZY:
        return importlib.import_module(f"ldpfast.{name}")
    raise AttributeError(f"module 'ldpfast' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_LAZY))
