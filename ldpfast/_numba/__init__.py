"""Numba twins of the C++ kernels (fallback backend, and LDPFAST_BACKEND=numba).

Each module mirrors one file of ``csrc/cpu`` and uses :mod:`ldpfast._numba.rng`, the twin
of ``csrc/common/rng.h``, so outputs are bit-identical to the C++ kernels.

Numba's on-disk cache (``cache=True``) goes to ``<user cache>/numba`` (e.g.
``~/.cache/ldpfast/numba``), not to ``__pycache__`` inside the installed package: files
written there outlive ``pip uninstall`` and the left-over ``ldpfast/`` folder then shadows a
later install as an empty namespace package.  An existing ``NUMBA_CACHE_DIR`` is kept.
"""
import os
import sys

from .._paths import cache_dir

os.environ.setdefault("NUMBA_CACHE_DIR", str(cache_dir() / "numba"))
if "numba" in sys.modules:
    # Numba read its settings when it was first imported; the cache locator of every
    # @njit(cache=True) below reads them when the decorator runs, so refresh them now.
    sys.modules["numba"].core.config.reload_config()
