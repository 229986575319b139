"""Cora, shipped inside the package (``ldpfast/datasets/data/cora.npz``, about 100 KB).

The demo, the examples and the quick tests run on it with no data folder and no network.
The file is derived from the Planetoid raw files by :func:`build_cora` and gives a ``Data``
equal, tensor for tensor, to ``ldpfast.datasets.load("cora", root=<folder with the raw
files>)`` (a test checks this when the raw files are present).  Provenance and licence:
``ldpfast/datasets/data/README.md``.

The format, its reader and writer are in :mod:`ldpfast.datasets._cora_npz` (what
:func:`ldpfast.datasets.load` reads); this module adds the rebuild from the raw files.

Regenerate with ``python -m ldpfast.datasets.embedded RAW_ROOT [OUT]`` (``RAW_ROOT`` laid out
as ``RAW_ROOT/planetoid/Cora/raw/ind.cora.*``).
"""
from __future__ import annotations

import sys
from pathlib import Path

from ._cora_npz import CORA_PATH, load_cora, write_cora
from .loaders import load

__all__ = ["CORA_PATH", "build_cora", "load_cora"]


def build_cora(raw_root: str | Path, out: str | Path = CORA_PATH) -> Path:
    """Write the embedded Cora file from the Planetoid raw files under ``raw_root``.

    Refuses (``ValueError``) anything the compact format cannot hold exactly: non-binary
    features, more than 65536 nodes or features, more than 256 classes.
    """
    return write_cora(load("cora", root=raw_root), out)


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        raise SystemExit("usage: python -m ldpfast.datasets.embedded RAW_ROOT [OUT]")
    print(build_cora(*sys.argv[1:]))
