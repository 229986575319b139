"""Offline dataset loaders and synthetic graph generators.

* :func:`load` — Cora, CiteSeer (Planetoid raw files), Facebook, Twitch-DE (MUSAE files),
  read from disk only; :func:`load_tu` — TU-format graph classification data.
* :func:`synthetic`, :func:`orkut_like` — power-law graphs with planted classes, generated
  by a C++ kernel in O(|E|).
"""
from __future__ import annotations

from .loaders import default_root, load, load_tu, top_classes  # noqa: F401
from .synthetic import orkut_like, synthetic  # noqa: F401
