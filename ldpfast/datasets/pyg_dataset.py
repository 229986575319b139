"""A PyG dataset over :func:`ldpfast.datasets.load`, for ``transform=`` / ``pre_transform=``.

``GraphDataset(root, "cora", pre_transform=lf.transforms.MultiBit(eps=1.0))`` is used as
``Planetoid(root, "Cora", pre_transform=...)`` is, but reads the graph through
:func:`~ldpfast.datasets.load` (embedded Cora, local files, or a download), so it also runs
offline.  ``pre_transform`` is the way to apply a local randomiser: the randomised graph
(one LDP report per user) is made once, stored under ``root`` and read back on later runs,
never re-randomised.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

import torch
from torch_geometric.data import InMemoryDataset

from .._paths import cache_dir
from .loaders import _canonical, load

__all__ = ["GraphDataset"]


def _allow_ledger_in_weights_only_load() -> None:
    # PyG reads processed files with torch.load(weights_only=True); the privacy ledger the
    # transforms record is two plain data classes, allowed here instead of PyG falling
    # back to a full unpickle with a warning.
    from ..privacy.budget import Ledger, Spent

    add = getattr(torch.serialization, "add_safe_globals", None)
    if add is not None:
        add([Ledger, Spent])


class GraphDataset(InMemoryDataset):
    """One graph from :func:`ldpfast.datasets.load` as a PyG ``InMemoryDataset``.

    Parameters
    ----------
    root : str or os.PathLike, optional
        Folder for the processed (pre-transformed) graph; default
        ``<user cache>/processed`` (e.g. ``~/.cache/ldpfast/processed``).  Each
        ``pre_transform`` (by its ``repr``, which holds its parameters but never its seed)
        gets its own sub-folder, so changing ``eps`` never returns a graph randomised with
        the old one, and the same settings return the stored report.
    name : str
        A name accepted by :func:`~ldpfast.datasets.load` (default ``"cora"``, embedded).
    transform, pre_transform : callable, optional
        As in PyG: ``pre_transform`` runs once before saving, ``transform`` on every access.
    feature_dim : int, optional
        Passed to :func:`~ldpfast.datasets.load`.
    data_root : str or os.PathLike, optional
        Where the raw files are (``root=`` of :func:`~ldpfast.datasets.load`); default: its
        search order.
    download : bool, optional
        Passed to :func:`~ldpfast.datasets.load`.
    force_reload : bool
        Re-process (and so re-randomise) even if a processed file exists.
    """

    def __init__(self, root: str | os.PathLike | None = None, name: str = "cora",
                 transform=None, pre_transform=None, *, feature_dim: int | None = None,
                 data_root: str | os.PathLike | None = None, download: bool | None = None,
                 force_reload: bool = False, log: bool = True):
        self.name = _canonical(name)
        self.feature_dim, self.data_root, self.download_allowed = feature_dim, data_root, download
        root = Path(root) if root is not None else cache_dir() / "processed"
        _allow_ledger_in_weights_only_load()
        super().__init__(str(root), transform, pre_transform, force_reload=force_reload,
                         log=log)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self) -> list[str]:
        return []  # load() finds (or downloads) the files itself

    @property
    def processed_dir(self) -> str:
        tag = hashlib.sha256(repr(self.pre_transform).encode()).hexdigest()[:12]
        sub = self.name if self.feature_dim is None else f"{self.name}-d{self.feature_dim}"
        return os.path.join(self.root, sub, "processed", tag)

    @property
    def processed_file_names(self) -> list[str]:
        return ["data.pt"]

    def process(self) -> None:
        data = load(self.name, self.data_root, feature_dim=self.feature_dim,
                    download=self.download_allowed)
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])

    def __repr__(self) -> str:
        return f"GraphDataset({self.name!r}, pre_transform={self.pre_transform!r})"
