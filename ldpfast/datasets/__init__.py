"""Dataset loaders and synthetic graph generators.

* :func:`load` -- Cora (embedded in the package), CiteSeer, PubMed (Planetoid raw files),
  Facebook, Twitch-DE, LastFM Asia (MUSAE / FEATHER files): read from ``root=``,
  ``LDPFAST_DATA``, ``../shared/datasets`` or the user cache, else downloaded through PyG
  (:func:`locate` says where a dataset would come from); :func:`load_tu` -- TU-format
  graph classification data.
* :class:`GraphDataset` -- any of them as a PyG ``InMemoryDataset``, for
  ``transform=`` / ``pre_transform=``.
* :func:`synthetic`, :func:`orkut_like` -- power-law graphs with planted classes, generated
  by a C++ kernel in O(|E|).
"""
from __future__ import annotations

from .loaders import (  # noqa: F401
    cache_root,
    default_root,
    load,
    load_tu,
    locate,
    search_roots,
    top_classes,
)
from .pyg_dataset import GraphDataset  # noqa: F401
from .synthetic import orkut_like, synthetic  # noqa: F401
