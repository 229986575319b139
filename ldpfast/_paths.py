"""Where ldpfast writes: one per-user cache folder, never inside the installed package.

Kept free of heavy imports: :mod:`ldpfast._numba` reads it before importing Numba.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

CACHE_ENV = "LDPFAST_CACHE"


def cache_dir() -> Path:
    """The user cache folder of ldpfast (not created here).

    ``LDPFAST_CACHE`` if set; else ``%LOCALAPPDATA%\\ldpfast\\Cache`` on Windows,
    ``~/Library/Caches/ldpfast`` on macOS, ``$XDG_CACHE_HOME/ldpfast`` or
    ``~/.cache/ldpfast`` elsewhere.  Holds Numba's compiled kernels (``numba/``) and
    downloaded datasets (``datasets/``).
    """
    env = os.environ.get(CACHE_ENV)
    if env:
        return Path(env).expanduser()
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA")
        if base:
            return Path(base) / "ldpfast" / "Cache"
    elif sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "ldpfast"
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "ldpfast"
