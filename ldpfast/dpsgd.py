"""Deprecated path: node-level DP-SGD moved to :mod:`ldpfast.privacy.dpsgd`.

``ldpfast.dpsgd.X`` still gives ``ldpfast.privacy.dpsgd.X``, with a ``DeprecationWarning``,
until ldpfast 0.2.0.
"""
from __future__ import annotations

from ._deprecated import moved
from .privacy import dpsgd as _dpsgd
from .privacy.dpsgd import clipping as _clipping
from .privacy.dpsgd import optimizer as _optimizer

__getattr__, __dir__ = moved(__name__, (_dpsgd, _clipping, _optimizer))
