"""A PyG dataset over :func:`ldpfast.datasets.load`, for ``transform=`` / ``pre_transform=``.

``GraphDataset(root, "cora", pre_transform=lf.transforms.MultiBit(eps=1.0))`` is used as
``Planetoid(root, "Cora", pre_transform=...)`` is, but reads the graph through
:func:`~ldpfast.datasets.load` (embedded Cora, local files, or a download), so it also runs
offline.  ``pre_transform`` is the way to apply a local randomiser: the randomised graph
(one LDP report per user) is made once, stored under ``root`` and read back on later runs,
never re-randomised.  The stored graph is found by a keyed digest of every parameter of the
``pre_transform`` (:mod:`._cache_key`), never by its ``repr``.
"""
from __future__ import annotations

import hmac
import json
import os
import warnings
from pathlib import Path

import torch
from torch_geometric.data import InMemoryDataset

from .._paths import cache_dir
from ._cache_key import FORMAT, describe, dumps, root_key
from .loaders import _canonical, load

__all__ = ["GraphDataset"]

_PARAMS_FILE = "cache_params.json"
_ON_MISMATCH = ("reprocess", "raise")


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
        ``pre_transform`` gets its own sub-folder, named by a keyed digest of all its
        parameters (see *Cache key* below), so changing ``eps``, ``accounting``, a mask or
        a public set never returns a graph randomised under the old setting, and the same
        settings return the stored report.
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
    on_mismatch : {"reprocess", "raise"}
        What to do when the folder holds a processed file whose stored parameters
        (``cache_params.json``) are missing or differ from the request (a digest
        collision, or a file written by an older version): ``"reprocess"`` (default)
        warns and re-processes, overwriting it; ``"raise"`` raises ``RuntimeError``.

    Raises
    ------
    TypeError
        If a parameter of ``pre_transform`` cannot be described (see below).

    Notes
    -----
    **Cache key.**  The ``pre_transform`` is described as canonical JSON:

    * ``None``, ``bool``, ``int``, ``str`` as themselves; ``float`` as its ``repr`` (exact:
      it parses back to the same double); NumPy scalars as the Python value;
    * lists, tuples, dicts (sorted), sets (sorted), recursively;
    * tensors and arrays as dtype, shape and ``HMAC-SHA256(root key, bytes)``; ``bytes``
      as length and HMAC; dtypes, devices, enums, classes and modules by name;
    * functions by qualified name, an HMAC of their code and constants, their defaults,
      closure variables and the module globals they name (what those read in turn, e.g.
      a file, is not part of the key: prefer a transform object);
    * any other object (PyG's ``Compose`` and every ldpfast or PyG ``BaseTransform``) by
      its type's qualified name and its public attributes (``vars()`` without names
      starting with ``_``, nor those in the class's ``_cache_ignore``; ``nn.Module``
      adds its sub-modules, parameters and buffers), or by ``cache_params()`` when its class
      defines ``cache_params(self) -> dict``.  An object whose state is all private (other
      than a ``_seed``), or is not in ``__dict__``, is refused with a ``TypeError``.

    The transform's secret seed (``_seed``) is never part of the key: with ``seed=None`` a
    new secret is drawn every run and the stored report must still be found.  Attributes
    whose names contain ``key``, ``secret``, ``seed``, ``token`` or ``password`` enter the
    key only as an HMAC of their description.

    The root key is 32 random bytes from :mod:`secrets`, created once in
    ``<root>/.ldpfast_cache_key`` (mode 0600).  The folder name is the HMAC of the whole
    description, and ``cache_params.json`` beside ``data.pt`` holds the description
    itself: readable public parameters, keyed digests of tensor contents.  Without the
    key neither reveals anything about a mask or public set (not even whether two roots
    used the same one).  Deleting the key file starts new folders; the old ones are then
    never read.  Folders written by an older keying scheme are never read either: the
    scheme's version is part of every folder name.
    """

    def __init__(self, root: str | os.PathLike | None = None, name: str = "cora",
                 transform=None, pre_transform=None, *, feature_dim: int | None = None,
                 data_root: str | os.PathLike | None = None, download: bool | None = None,
                 force_reload: bool = False, log: bool = True, on_mismatch: str = "reprocess"):
        if on_mismatch not in _ON_MISMATCH:
            raise ValueError(f"on_mismatch: expected one of {_ON_MISMATCH}, got {on_mismatch!r}")
        self.name = _canonical(name)
        self.feature_dim, self.data_root, self.download_allowed = feature_dim, data_root, download
        root = Path(root).expanduser() if root is not None else cache_dir() / "processed"
        key = root_key(root)
        # Described once, before processing: a transform's state may change when it runs.
        self._cache_params = {"format": FORMAT, "dataset": self.name,
                              "feature_dim": feature_dim,
                              "pre_transform": describe(pre_transform, key)}
        text = dumps(self._cache_params)
        tag = hmac.new(key, text.encode(), "sha256").hexdigest()[:16]
        sub = self.name if feature_dim is None else f"{self.name}-d{feature_dim}"
        self._processed_dir = os.path.join(str(root), sub, "processed", f"v{FORMAT}-{tag}")
        if not force_reload:
            force_reload = self._stale(text, on_mismatch)
        _allow_ledger_in_weights_only_load()
        super().__init__(str(root), transform, pre_transform, force_reload=force_reload,
                         log=log)
        self.load(self.processed_paths[0])

    @property
    def raw_file_names(self) -> list[str]:
        return []  # load() finds (or downloads) the files itself

    @property
    def processed_dir(self) -> str:
        return self._processed_dir

    @property
    def processed_file_names(self) -> list[str]:
        return ["data.pt"]

    def _stale(self, text: str, on_mismatch: str) -> bool:
        """Whether a processed file exists that was not made for this request (then
        warn, or raise if ``on_mismatch="raise"``)."""
        folder = Path(self._processed_dir)
        if not (folder / "data.pt").exists():
            return False
        try:
            stored = dumps(json.loads((folder / _PARAMS_FILE).read_text()))
        except (OSError, ValueError):
            stored = None
        if stored == text:
            return False
        why = ("has no readable cache_params.json" if stored is None
               else "was made with other parameters than requested")
        msg = f"GraphDataset: the processed file in {folder} {why} (a stale or colliding cache folder)"
        if on_mismatch == "raise":
            raise RuntimeError(msg + "; pass force_reload=True or on_mismatch='reprocess' to "
                               "re-process it")
        warnings.warn(msg + "; re-processing it", UserWarning, stacklevel=3)
        return True

    def process(self) -> None:
        data = load(self.name, self.data_root, feature_dim=self.feature_dim,
                    download=self.download_allowed)
        if self.pre_transform is not None:
            data = self.pre_transform(data)
        self.save([data], self.processed_paths[0])
        # Written after data.pt (atomically): a crash in between leaves a file without
        # parameters, which the next run re-processes.
        path = Path(self._processed_dir) / _PARAMS_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(self._cache_params, sort_keys=True, indent=1) + "\n")
        os.replace(tmp, path)

    def __repr__(self) -> str:
        return f"GraphDataset({self.name!r}, pre_transform={self.pre_transform!r})"
