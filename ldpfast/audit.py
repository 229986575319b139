"""Deprecated path: the privacy audit moved to :mod:`ldpfast.privacy.audit`.

``ldpfast.audit.X`` still gives ``ldpfast.privacy.audit.X``, and ``python -m ldpfast.audit``
still runs ``python -m ldpfast.privacy.audit``, with a ``DeprecationWarning``, until
ldpfast 0.2.0.
"""
from __future__ import annotations

import warnings

from ._deprecated import REMOVED_IN, moved
from .privacy import audit as _audit

__getattr__, __dir__ = moved(__name__, (_audit,))

if __name__ == "__main__":
    warnings.warn("python -m ldpfast.audit is deprecated and will be removed in ldpfast "
                  f"{REMOVED_IN}: run python -m ldpfast.privacy.audit", DeprecationWarning, stacklevel=1)
    raise SystemExit(_audit.main())
