"""Deprecated path: the accountants moved to :mod:`ldpfast.privacy.accountants`.

``ldpfast.privacy.accountant.X`` still gives the same object from
``ldpfast.privacy.accountants`` (or, for private names, from its sub-module), with a
``DeprecationWarning``, until ldpfast 0.2.0.
"""
from __future__ import annotations

from .._deprecated import moved
from . import accountants as _accountants
from .accountants import base as _base
from .accountants import heterpoisson as _heterpoisson
from .accountants import mixture as _mixture
from .accountants import pld as _pld
from .accountants import rdp as _rdp

__getattr__, __dir__ = moved(__name__, (_accountants, _heterpoisson, _rdp, _mixture, _base, _pld))
