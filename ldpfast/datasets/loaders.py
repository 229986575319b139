"""Loaders for the real graphs used in tests, demos, examples and reproductions.

Where a dataset comes from (:func:`load`, in this order):

1. ``cora`` with no ``root=``: the copy embedded in the package
   (:mod:`ldpfast.datasets.embedded`, read by :mod:`._cora_npz`; equal to the one read from the raw files);
2. ``root=`` if given: the raw files there (and nowhere else);
3. otherwise the first of: the folder in the environment variable ``LDPFAST_DATA``,
   ``../shared/datasets`` (from the working directory, then beside the source checkout),
   and the user cache ``<cache>/datasets`` (:func:`cache_root`, earlier downloads);
4. if none holds it: a download through PyG's own dataset class (``Planetoid``,
   ``FacebookPagePage``, ``Twitch``, ``LastFMAsia``) into ``root=`` if given, else into the
   user cache.  ``download=False`` or ``LDPFAST_OFFLINE=1`` turns this off; offline, the
   error names the files to fetch and where to put them.

Local files are only read (nothing is written next to them).  Every graph returned is
undirected, deduplicated and free of self loops (:func:`ldpfast.graph.clean_edge_index`).

Datasets, sources and licences
------------------------------
* ``cora``, ``citeseer``, ``pubmed`` -- Planetoid split files ``ind.<name>.*`` (Yang,
  Cohen & Salakhutdinov 2016), from kimiyoung/planetoid on GitHub, MIT licence (Cora: Sen
  et al. 2008).  Cora is embedded (``ldpfast/datasets/data/README.md``).
* ``facebook`` -- Facebook page-page network (MUSAE; Rozemberczki, Allen & Sarkar 2021),
  from benedekrozemberczki/MUSAE on GitHub, GPL-3.0.
* ``twitch-de`` -- Twitch DE social network (MUSAE), same source and licence.
* ``lastfm`` (LastFM Asia; Rozemberczki & Sarkar 2020, benedekrozemberczki/FEATHER,
  GPL-3.0).
* Downloads of ``facebook``, ``twitch-de`` and ``lastfm`` through PyG get PyG's processed
  files (graphmining.ai), whose features are the MUSAE authors' 128-dimensional ones, not
  the raw multi-hot features of the local files (a warning says so).
* :func:`load_tu` -- any TU-format graph classification dataset (e.g. REDDIT-BINARY, from
  the TU Dortmund collection, chrsmrrs.github.io/datasets; licences vary per dataset).

Layout: this module finds a dataset (roots, cache, downloads) and cleans what it loads; the
raw-file readers (Planetoid, MUSAE / FEATHER), :func:`top_classes` and the SVD are in
``_raw.py``, :func:`load_tu` in ``_tu.py`` (both re-exported here, under the same names).
"""
from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import torch
from torch_geometric.data import Data

from .._checks import check_int
from .._paths import cache_dir
from ..graph import clean_edge_index
from ._raw import (
    _load_facebook,
    _load_lastfm,
    _load_planetoid,
    _load_twitch,
    _truncated_svd,
    top_classes,
)
from ._tu import load_tu

__all__ = ["cache_root", "default_root", "load", "load_tu", "locate", "search_roots",
           "top_classes"]

ENV_VAR = "LDPFAST_DATA"
OFFLINE_ENV = "LDPFAST_OFFLINE"

# canonical name -> (sub-folder, file names, layout line for error messages)
_PLANETOID_PARTS = ("x", "tx", "allx", "y", "ty", "ally", "graph", "test.index")
_DATASETS = {
    "cora": (
        "planetoid/Cora/raw",
        tuple(f"ind.cora.{p}" for p in _PLANETOID_PARTS),
        "<root>/planetoid/Cora/raw/ind.cora.{x,tx,allx,y,ty,ally,graph,test.index}",
    ),
    "citeseer": (
        "planetoid/CiteSeer/raw",
        tuple(f"ind.citeseer.{p}" for p in _PLANETOID_PARTS),
        "<root>/planetoid/CiteSeer/raw/ind.citeseer.{x,tx,allx,y,ty,ally,graph,test.index}",
    ),
    "pubmed": (
        "planetoid/PubMed/raw",
        tuple(f"ind.pubmed.{p}" for p in _PLANETOID_PARTS),
        "<root>/planetoid/PubMed/raw/ind.pubmed.{x,tx,allx,y,ty,ally,graph,test.index}",
    ),
    "lastfm": (
        "lastfm_asia",
        ("lastfm_asia_edges.csv", "lastfm_asia_features.json", "lastfm_asia_target.csv"),
        "<root>/lastfm_asia/lastfm_asia_{edges.csv,features.json,target.csv}",
    ),
    "facebook": (
        "musae/facebook",
        ("musae_facebook_edges.csv", "musae_facebook_features.json",
         "musae_facebook_target.csv"),
        "<root>/musae/facebook/musae_facebook_{edges.csv,features.json,target.csv}",
    ),
    "twitch-de": (
        "musae/twitch/DE",
        ("musae_DE_edges.csv", "musae_DE_features.json", "musae_DE_target.csv"),
        "<root>/musae/twitch/DE/musae_DE_{edges.csv,features.json,target.csv}",
    ),
}
# canonical name -> (torch_geometric.datasets class, its name argument, the class's root
# under a data root, the raw file the class downloads relative to that root).  Planetoid's
# layout is ours, so its downloads are read by the raw-file loader like local files.
_PYG = {
    "cora": ("Planetoid", "Cora", "planetoid", "Cora/raw/ind.cora.graph"),
    "citeseer": ("Planetoid", "CiteSeer", "planetoid", "CiteSeer/raw/ind.citeseer.graph"),
    "pubmed": ("Planetoid", "PubMed", "planetoid", "PubMed/raw/ind.pubmed.graph"),
    "facebook": ("FacebookPagePage", None, "pyg/facebook", "raw/facebook.npz"),
    "twitch-de": ("Twitch", "DE", "pyg/twitch", "DE/raw/DE.npz"),
    "lastfm": ("LastFMAsia", None, "pyg/lastfm_asia", "raw/lastfm_asia.npz"),
}
_SOURCES = {
    "cora": "https://github.com/kimiyoung/planetoid/tree/master/data (ind.cora.*)",
    "citeseer": "https://github.com/kimiyoung/planetoid/tree/master/data (ind.citeseer.*)",
    "pubmed": "https://github.com/kimiyoung/planetoid/tree/master/data (ind.pubmed.*)",
    "facebook": "https://github.com/benedekrozemberczki/MUSAE (input/edges, features, "
                "target of 'facebook'; also in snap.stanford.edu/data/facebook_large.zip)",
    "twitch-de": "https://github.com/benedekrozemberczki/MUSAE (Twitch DE; also in "
                 "snap.stanford.edu/data/twitch.zip)",
    "lastfm": "https://github.com/benedekrozemberczki/FEATHER (LastFM Asia; also in "
              "snap.stanford.edu/data/lastfm_asia.zip)",
}
_ALIASES = {
    "cora": "cora",
    "citeseer": "citeseer",
    "cite-seer": "citeseer",
    "facebook": "facebook",
    "facebook-page-page": "facebook",
    "facebookpagepage": "facebook",
    "musae-facebook": "facebook",
    "twitch-de": "twitch-de",
    "twitchde": "twitch-de",
    "pubmed": "pubmed",
    "lastfm": "lastfm",
    "lastfm-asia": "lastfm",
    "musae-twitch-de": "twitch-de",
}


def _shared_candidates() -> tuple[Path, ...]:
    # The offline data folder of a development checkout: ../shared/datasets seen from the
    # working directory, then from the folder holding the source tree.
    return (Path.cwd() / ".." / "shared" / "datasets",
            Path(__file__).resolve().parents[2] / ".." / "shared" / "datasets")


def default_root() -> Path | None:
    """The folder of local raw files, or ``None`` if there is none (the embedded Cora and
    the user cache are not data roots in this sense).

    ``LDPFAST_DATA`` if set (returned even if the folder does not exist, so a wrong setting
    shows up in ``ldpfast info`` and in errors); else the first existing folder of
    ``Path.cwd() / "../shared/datasets"`` and ``<checkout>/../shared/datasets``.

    Returns
    -------
    pathlib.Path or None
    """
    env = os.environ.get(ENV_VAR)
    if env:
        return Path(env).expanduser()
    for c in _shared_candidates():
        if c.is_dir():
            return c.resolve()
    return None


def cache_root() -> Path:
    """Where datasets are downloaded when no ``root=`` is given: ``<cache>/datasets``, with
    ``<cache>`` the user cache folder (``LDPFAST_CACHE``, else e.g. ``~/.cache/ldpfast``)."""
    return cache_dir() / "datasets"


def search_roots(root: str | os.PathLike | None = None) -> list[tuple[Path, str]]:
    """The data roots :func:`load` searches, in order, each with where it came from.

    ``[(root, "root=")]`` if ``root`` is given; else ``LDPFAST_DATA`` (if set), the existing
    ``../shared/datasets`` folders, and :func:`cache_root`.
    """
    if root is not None:
        return [(Path(root).expanduser(), "root=")]
    out: list[tuple[Path, str]] = []
    env = os.environ.get(ENV_VAR)
    if env:
        out.append((Path(env).expanduser(), ENV_VAR))
    for c in _shared_candidates():
        if c.is_dir() and all(c.resolve() != p.resolve() for p, _ in out):
            out.append((c.resolve(), "../shared/datasets"))
    out.append((cache_root(), "user cache"))
    return out


def _canonical(name) -> str:
    if not isinstance(name, str):
        raise TypeError(f"name: expected a str, got {type(name).__name__}")
    key = name.strip().lower().replace("_", "-").replace(" ", "-")
    if key not in _ALIASES:
        raise ValueError(
            f"name: unknown dataset {name!r}; known names: {sorted(_DATASETS)} "
            f"(aliases: {sorted(set(_ALIASES) - set(_DATASETS))}); for TU-format data use "
            "load_tu(folder, name)"
        )
    return _ALIASES[key]


def _raw_paths(name: str, root: Path) -> list[Path]:
    sub, files, _ = _DATASETS[name]
    return [root / sub / f for f in files]


def _pyg_root(name: str, root: Path) -> Path:
    return root / _PYG[name][2]


def _find(name: str, root) -> tuple[str, Path] | None:
    """``("raw", root)`` or ``("pyg", root)`` of the first searched root holding ``name``."""
    for r, _ in search_roots(root):
        if all(p.is_file() for p in _raw_paths(name, r)):
            return "raw", r
        if _PYG[name][0] != "Planetoid" and (_pyg_root(name, r) / _PYG[name][3]).is_file():
            return "pyg", r
    return None


def locate(name: str, root: str | os.PathLike | None = None) -> str | None:
    """Where :func:`load` would read ``name`` from without a network: ``"embedded"``, the
    folder of its files, or ``None`` (it would have to be downloaded)."""
    canon = _canonical(name)
    if canon == "cora" and root is None:
        return "embedded"
    hit = _find(canon, root)
    if hit is None:
        return None
    kind, r = hit
    return str(r / _DATASETS[canon][0] if kind == "raw" else _pyg_root(canon, r))


def _download_allowed(download: bool | None) -> tuple[bool, str]:
    if download is not None:
        if not isinstance(download, bool):
            raise TypeError(f"download: expected a bool or None, got {type(download).__name__}")
        return download, "download=False"
    off = os.environ.get(OFFLINE_ENV, "").strip().lower() not in ("", "0", "false", "no")
    return not off, f"{OFFLINE_ENV}={os.environ.get(OFFLINE_ENV)}"


def _fetch_hint(name: str, dest: Path) -> str:
    cls, arg, sub, _ = _PYG[name]
    call = f"{cls}({str(dest / sub)!r}" + (f", {arg!r})" if arg else ")")
    return (f"to fetch it, run on a machine with a network:\n"
            f"  python -c \"from torch_geometric.datasets import {cls}; {call}\"\n"
            f"and copy {dest} here; or get the raw files from {_SOURCES[name]}\n"
            f"and lay them out as\n  {_DATASETS[name][2]}\n"
            f"then pass root=<root> or set {ENV_VAR}=<root>")


def _missing_error(name: str, root, reason: str) -> FileNotFoundError:
    lines = [f"dataset {name!r} not found; searched:"]
    for r, origin in search_roots(root):
        if not r.is_dir():
            lines.append(f"  {r} ({origin}): no such folder")
            continue
        missing = [p for p in _raw_paths(name, r) if not p.is_file()]
        lines.append(f"  {r} ({origin}): missing " + ", ".join(str(p) for p in missing))
    dest = Path(root).expanduser() if root is not None else cache_root()
    lines.append(f"not downloaded: {reason}")
    lines.append(_fetch_hint(name, dest))
    return FileNotFoundError("\n".join(lines))


def _download(name: str, dest: Path) -> None:
    """Download ``name`` through its PyG dataset class into ``dest`` (a data root)."""
    import torch_geometric.datasets as pyg_datasets

    cls, arg, _, _ = _PYG[name]
    target = _pyg_root(name, dest)
    print(f"ldpfast: dataset {name!r} not found locally; downloading it with "
          f"torch_geometric.datasets.{cls} into {target}", file=sys.stderr, flush=True)
    ds_cls = getattr(pyg_datasets, cls)
    if arg is None:
        ds_cls(str(target))
    else:
        ds_cls(str(target), arg)


def _from_pyg(name: str, root: Path) -> Data:
    """A downloaded PyG ``facebook`` / ``twitch-de`` / ``lastfm`` in our conventions."""
    import torch_geometric.datasets as pyg_datasets

    cls, arg, _, _ = _PYG[name]
    ds_cls = getattr(pyg_datasets, cls)
    target = str(_pyg_root(name, root))
    d = (ds_cls(target) if arg is None else ds_cls(target, arg))[0]
    warnings.warn(f"dataset {name!r}: read from PyG's {cls} files under {target}; their "
                  "features are PyG's 128-dimensional ones, not the raw multi-hot features "
                  "of the local MUSAE files, and class ids follow PyG's file",
                  UserWarning, stacklevel=3)
    return Data(x=d.x.to(torch.float32).contiguous(), edge_index=d.edge_index,
                y=d.y.to(torch.int64), num_nodes=int(d.y.numel()))


def load(name: str, root: str | os.PathLike | None = None, *,
         feature_dim: int | None = None, download: bool | None = None) -> Data:
    """Load a real graph: embedded (Cora), local raw files, or a PyG download.

    Parameters
    ----------
    name : str
        Case-insensitive; ``'_'``/``'-'``/space are interchangeable.

        ``'cora'``, ``'citeseer'``, ``'pubmed'``
            Planetoid split files ``<root>/planetoid/<Cora|CiteSeer|PubMed>/raw/ind.<name>.*``
            (kimiyoung/planetoid, MIT licence), read with
            :func:`torch_geometric.io.read_planetoid_data`.  Keeps PyG's standard
            ``train_mask`` / ``val_mask`` / ``test_mask`` (20 per class / 500 / 1000).
            Cora: 2708 nodes, 10556 directed edges, 1433 features, 7 classes; without
            ``root=`` it comes from the copy embedded in the package.  CiteSeer: 3327
            nodes, 9104 directed edges, 3703 features, 6 classes.  PubMed: 19717 nodes,
            500 features, 3 classes.  The ``ind.*`` files are Python pickles: load only
            trusted files (the embedded Cora is not a pickle).
        ``'facebook'`` (alias ``'facebook-page-page'``)
            MUSAE Facebook page-page (benedekrozemberczki/MUSAE, GPL-3.0) from
            ``<root>/musae/facebook/``.  ``y`` is ``page_type`` mapped to 0..3 in sorted
            order of the class names, stored on ``data.class_names``.  22470 nodes,
            4714 raw multi-hot features, 4 classes.  No standard split (no masks).
        ``'lastfm'`` (alias ``'lastfm-asia'``)
            LastFM Asia from ``<root>/lastfm_asia/``:
            ``lastfm_asia_edges.csv`` (node_1,node_2), ``lastfm_asia_features.json``,
            ``lastfm_asia_target.csv`` (id,target); 7624 nodes, 18 classes.  LPGNN keeps
            the 10 largest classes: :func:`top_classes`.
        ``'twitch-de'``
            MUSAE Twitch DE (same source and licence) from ``<root>/musae/twitch/DE/``,
            nodes indexed by ``new_id``; ``y`` is the ``mature`` column (True -> 1).
            9498 nodes, 3170 raw multi-hot features, 2 classes.  No masks.

        Downloaded through PyG (see the module docstring), ``facebook``, ``twitch-de``
        and ``lastfm`` are PyG's processed versions: 128 features, no ``class_names``.
    root : str or os.PathLike, optional
        Data root: only this folder is searched (and downloaded into).  Default: the embedded
        Cora; for the others ``LDPFAST_DATA``, ``../shared/datasets``, the user cache
        (:func:`search_roots`), then a download into the user cache.
    feature_dim : int, optional
        If given, replace ``x`` by a ``feature_dim``-column truncated SVD of the raw
        features, ``x = U_k S_k`` (uncentred, like scikit-learn's ``TruncatedSVD``),
        computed by a randomized SVD with a fixed seed and a deterministic sign convention,
        so repeated loads give equal tensors (an approximation: the singular values agree
        with an exact SVD to about 1% on these datasets).  Must satisfy
        ``1 <= feature_dim <= min(num_nodes, num_raw_features)``.  This derivation is ours:
        the 128-dimensional Facebook/Twitch features shipped by PyG (and used by
        HeterPoisson) were made differently by the MUSAE authors, so results on them are
        not directly comparable.
    download : bool, optional
        Allow a download when no searched folder holds the dataset.  Default: yes, unless
        the environment variable ``LDPFAST_OFFLINE`` is set (to anything but ``0``).

    Returns
    -------
    torch_geometric.data.Data
        ``x`` (float32: raw dense multi-hot / bag-of-words, or the SVD reduction), ``y``
        (int64), ``edge_index`` (undirected, deduplicated, no self loops, sorted by
        source then target), ``num_nodes``, ``name`` (canonical name); plus the masks for
        Planetoid and ``class_names`` for Facebook from local files.

    Raises
    ------
    ValueError
        Unknown name (the message lists the known names) or ``feature_dim`` out of range.
    FileNotFoundError
        Not found and not downloaded (offline, or downloads turned off): the message names
        each folder searched, the missing files, the expected layout and how to fetch them.
    """
    canon = _canonical(name)
    if feature_dim is not None:
        check_int("feature_dim", feature_dim, lo=1)
    allowed, why_not = _download_allowed(download)
    if canon == "cora" and root is None:
        from ._cora_npz import load_cora

        data = load_cora()
    else:
        hit = _find(canon, root)
        if hit is None:
            if not allowed:
                raise _missing_error(canon, root, f"downloads are off ({why_not})")
            dest = Path(root).expanduser() if root is not None else cache_root()
            try:
                _download(canon, dest)
            except Exception as exc:  # offline, HTTP or disk errors: the message says which
                raise _missing_error(canon, root, f"the download failed: "
                                     f"{type(exc).__name__}: {exc}") from exc
            hit = _find(canon, dest)
            if hit is None:
                raise _missing_error(canon, root, f"the download into {dest} did not produce "
                                     "the expected files")
        kind, r = hit
        data = _read_raw(canon, r) if kind == "raw" else _from_pyg(canon, r)
    n = int(data.num_nodes)
    data.edge_index = clean_edge_index(data.edge_index, n)
    if feature_dim is not None:
        hi = min(n, int(data.x.size(1)))
        check_int("feature_dim", feature_dim, lo=1, hi=hi)
        data.x = _truncated_svd(data.x, int(feature_dim))
    data.name = canon
    data.validate(raise_on_error=True)
    return data


def _read_raw(canon: str, root: Path) -> Data:
    paths = _raw_paths(canon, root)
    if canon in ("cora", "citeseer", "pubmed"):
        return _load_planetoid(paths[0].parent, canon)
    if canon == "facebook":
        return _load_facebook(*paths)
    if canon == "lastfm":
        return _load_lastfm(*paths)
    return _load_twitch(*paths)


