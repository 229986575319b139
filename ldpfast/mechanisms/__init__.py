"""User-side randomisers (local DP), each a compiled kernel over a whole matrix.

* :mod:`.features`: :func:`grr`, :func:`grr_fs` (RGNN), :func:`onebit`,
  :func:`multibit_encode` and the server-side :func:`multibit_rectify` (LPGNN).
* :mod:`.labels`: :func:`rr_labels` (LPGNN eq. 11, RGNN section IV-B).
* :mod:`.edges`: :func:`dprr` (DPRR, Algorithm 1), :func:`rr_edges` (Warner RR) and
  :func:`local_laplace` (LocalLap), in O(|E|).

Every randomiser returns ``(output, Spent)`` (:class:`ldpfast.privacy.Spent`): the
guarantee per node and the parameters used, seed included.
"""
from __future__ import annotations

from .edges import dprr, local_laplace, rr_edges
from .features import (
                       grr,
                       grr_fs,
                       multibit_encode,
                       multibit_rectify,
                       multibit_scale,
                       onebit,
                       optimal_m,
)
from .labels import rr_labels

__all__ = [
           "dprr",
           "grr",
           "grr_fs",
           "local_laplace",
           "multibit_encode",
           "multibit_rectify",
           "multibit_scale",
           "onebit",
           "optimal_m",
           "rr_edges",
           "rr_labels",
]
