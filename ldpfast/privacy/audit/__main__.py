"""``python -m ldpfast.privacy.audit``: the DP-SGD canary audit on a real dataset (:func:`main`)."""
from __future__ import annotations

from .heterpoisson import main

if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
