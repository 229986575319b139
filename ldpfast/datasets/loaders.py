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
"""
from __future__ import annotations

import csv
import json
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from .._checks import check_int
from .._paths import cache_dir
from ..graph import clean_edge_index

__all__ = ["cache_root", "default_root", "load", "load_tu", "locate", "search_roots",
           "top_classes"]

ENV_VAR = "LDPFAST_DATA"
OFFLINE_ENV = "LDPFAST_OFFLINE"
_SVD_SEED = 0x5EED

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


# ----------------------------------------------------------------------------- Planetoid

def _load_planetoid(raw_dir: Path, prefix: str) -> Data:
    from torch_geometric.io import read_planetoid_data

    d = read_planetoid_data(str(raw_dir), prefix)
    n = int(d.y.numel())
    data = Data(x=d.x.to(torch.float32).contiguous(), edge_index=d.edge_index,
                y=d.y.to(torch.int64), num_nodes=n)
    data.train_mask, data.val_mask, data.test_mask = d.train_mask, d.val_mask, d.test_mask
    return data


# ----------------------------------------------------------------------------- MUSAE

def _read_edge_csv(path: Path, header: tuple[str, str]) -> torch.Tensor:
    with open(path, encoding="utf-8") as f:
        first = f.readline().strip().split(",")
        if tuple(c.strip() for c in first) != header:
            raise ValueError(f"{path}: expected header {','.join(header)}, got {','.join(first)}")
        body = f.read()
    arr = np.array(body.replace(",", " ").split(), dtype=np.int64)
    if arr.size % 2:
        raise ValueError(f"{path}: expected two integer columns")
    return torch.from_numpy(arr.reshape(-1, 2).T.copy())


def _read_multi_hot(path: Path, n: int) -> torch.Tensor:
    """Dense float32 multi-hot matrix (n, max_feature_id + 1) from a MUSAE JSON file."""
    with open(path, encoding="utf-8") as f:
        feats = json.load(f)
    keys = np.fromiter((int(k) for k in feats), dtype=np.int64, count=len(feats))
    if keys.size != n or not np.array_equal(np.sort(keys), np.arange(n)):
        raise ValueError(f"{path}: expected feature lists for node ids 0..{n - 1}")
    lens = np.fromiter((len(v) for v in feats.values()), dtype=np.int64, count=len(feats))
    cols = np.fromiter((c for v in feats.values() for c in v), dtype=np.int64,
                       count=int(lens.sum()))
    rows = np.repeat(keys, lens)
    if cols.size and cols.min() < 0:
        raise ValueError(f"{path}: negative feature id")
    m = int(cols.max()) + 1 if cols.size else 0
    x = torch.zeros(n, m, dtype=torch.float32)
    x[torch.from_numpy(rows), torch.from_numpy(cols)] = 1.0  # repeated ids stay 1 (multi-hot)
    return x


def _read_target(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _load_facebook(edges: Path, features: Path, target: Path) -> Data:
    rows = _read_target(target)
    n = len(rows)
    ids = np.array([int(r["id"]) for r in rows], dtype=np.int64)
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise ValueError(f"{target}: expected ids 0..{n - 1}")
    types = [r["page_type"] for r in rows]
    class_names = sorted(set(types))
    code = {c: i for i, c in enumerate(class_names)}
    y = np.empty(n, dtype=np.int64)
    y[ids] = [code[t] for t in types]
    data = Data(x=_read_multi_hot(features, n),
                edge_index=_read_edge_csv(edges, ("id_1", "id_2")),
                y=torch.from_numpy(y), num_nodes=n)
    data.class_names = class_names
    return data


def _load_lastfm(edges: Path, features: Path, target: Path) -> Data:
    rows = _read_target(target)
    n = len(rows)
    try:
        ids = np.array([int(r["id"]) for r in rows], dtype=np.int64)
        y = np.empty(n, dtype=np.int64)
        y[ids] = [int(r["target"]) for r in rows]
    except (KeyError, ValueError, IndexError) as e:
        raise ValueError(f"{target}: expected integer columns id,target with ids 0..{n - 1} "
                         f"({e})") from None
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise ValueError(f"{target}: expected ids 0..{n - 1}")
    return Data(x=_read_multi_hot(features, n),
                edge_index=_read_edge_csv(edges, ("node_1", "node_2")),
                y=torch.from_numpy(y), num_nodes=n)


def top_classes(data: Data, k: int) -> Data:
    """The subgraph induced by the nodes of the ``k`` most frequent classes, labels
    relabelled 0..k-1 by decreasing frequency (ties: smaller label first).  LPGNN Table 1
    restricts LastFM this way (7,083 nodes, 10 classes)."""
    from torch_geometric.utils import subgraph

    num = int(data.y.max()) + 1
    check_int("k", k, lo=1, hi=num)
    counts = torch.bincount(data.y, minlength=num)
    order = sorted(range(num), key=lambda c: (-int(counts[c]), c))[:k]
    remap = torch.full((num,), -1, dtype=torch.int64)
    remap[torch.tensor(order)] = torch.arange(k)
    keep = remap[data.y] >= 0
    ei, _ = subgraph(keep, data.edge_index, relabel_nodes=True, num_nodes=data.num_nodes)
    out = Data(x=data.x[keep], edge_index=ei, y=remap[data.y[keep]],
               num_nodes=int(keep.sum()))
    out.name = getattr(data, "name", None)
    return out


def _load_twitch(edges: Path, features: Path, target: Path) -> Data:
    rows = _read_target(target)
    n = len(rows)
    ids = np.array([int(r["new_id"]) for r in rows], dtype=np.int64)
    if not np.array_equal(np.sort(ids), np.arange(n)):
        raise ValueError(f"{target}: expected new_id values 0..{n - 1}")
    flags = {"true": 1, "false": 0}
    y = np.empty(n, dtype=np.int64)
    try:
        y[ids] = [flags[r["mature"].strip().lower()] for r in rows]
    except KeyError as e:
        raise ValueError(f"{target}: 'mature' must be True/False, got {e}") from None
    return Data(x=_read_multi_hot(features, n),
                edge_index=_read_edge_csv(edges, ("from", "to")),
                y=torch.from_numpy(y), num_nodes=n)


# ----------------------------------------------------------------------------- SVD

def _truncated_svd(x: torch.Tensor, k: int, *, oversample: int = 20, niter: int = 6,
                   seed: int = _SVD_SEED) -> torch.Tensor:
    """``U_k S_k`` of ``x`` by randomized SVD (Halko et al. 2011) with a seeded generator.

    Runs in float64 on a sparse copy of ``x``; signs are fixed so that the largest-magnitude
    entry of each right singular vector is positive (as scikit-learn's ``svd_flip``).
    """
    n, m = x.shape
    q = min(k + oversample, n, m)
    xs = x.to_sparse().coalesce().to(torch.float64)
    xt = xs.t().coalesce()
    gen = torch.Generator().manual_seed(seed)
    omega = torch.randn(m, q, generator=gen, dtype=torch.float64)
    basis = torch.linalg.qr(xs @ omega).Q
    for _ in range(niter):
        basis = torch.linalg.qr(xt @ basis).Q
        basis = torch.linalg.qr(xs @ basis).Q
    b = (xt @ basis).t()  # (q, m) = basis^T x
    ub, s, vh = torch.linalg.svd(b, full_matrices=False)
    u = (basis @ ub)[:, :k]
    vh = vh[:k]
    pivot = vh.abs().argmax(dim=1)
    signs = torch.sign(vh[torch.arange(k), pivot])
    signs[signs == 0] = 1.0
    return (u * (s[:k] * signs)).to(torch.float32).contiguous()


# ----------------------------------------------------------------------------- TU format

def _loadtxt(path: Path, dtype) -> np.ndarray:
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # empty file
        return np.loadtxt(path, delimiter=",", dtype=dtype, ndmin=2)


def load_tu(folder: str | os.PathLike, name: str) -> list[Data]:
    """Load a TU-format graph classification dataset from a user folder.

    The TU Dortmund format (chrsmrrs.github.io/datasets; e.g. REDDIT-BINARY, whose licence
    is set by its authors, Yanardag & Vishwanathan 2015) stores all graphs together:

    * ``<name>_A.txt`` -- one ``i, j`` line per edge, 1-based global node ids;
    * ``<name>_graph_indicator.txt`` -- graph id (1-based) of every node;
    * ``<name>_graph_labels.txt`` -- one label per graph;
    * optional ``<name>_node_labels.txt`` (one or more integer columns) and
      ``<name>_node_attributes.txt`` (comma-separated floats).

    Parsing is vectorised NumPy, O(total nodes + edges); only the final assembly loops over
    graphs.  Nothing is downloaded or written.

    Parameters
    ----------
    folder : str or os.PathLike
        Folder containing the files (the raw folder of the dataset).
    name : str
        File prefix, e.g. ``'REDDIT-BINARY'``.

    Returns
    -------
    list of torch_geometric.data.Data
        One per graph, in graph-id order: ``edge_index`` with local node ids, undirected,
        deduplicated, no self loops; ``y`` a 1-element int64 tensor with graph labels
        remapped to ``0..C-1`` (sorted order of the original labels); ``x`` = node
        attributes (float32) if present, else one-hot node labels (float32; categories
        shared by the whole dataset, one block per label column) if present, else None;
        ``num_nodes``.

    Raises
    ------
    FileNotFoundError
        A required file is missing (the message names each).
    ValueError
        Inconsistent files (ids out of range, an edge across two graphs, wrong row counts).
    """
    folder = Path(folder)
    if not isinstance(name, str) or not name:
        raise TypeError(f"name: expected a non-empty str, got {name!r}")
    req = {k: folder / f"{name}_{k}.txt" for k in ("A", "graph_indicator", "graph_labels")}
    missing = [str(p) for p in req.values() if not p.is_file()]
    if missing:
        raise FileNotFoundError(
            f"TU dataset {name!r}: missing file(s) in {str(folder)!r}:\n  "
            + "\n  ".join(missing)
            + f"\nexpected {name}_A.txt, {name}_graph_indicator.txt, {name}_graph_labels.txt "
            f"(optional {name}_node_labels.txt, {name}_node_attributes.txt)"
        )

    gi = _loadtxt(req["graph_indicator"], np.int64)[:, 0] - 1
    glab = _loadtxt(req["graph_labels"], np.int64)[:, 0]
    num_graphs, num_nodes = glab.size, gi.size
    if num_nodes and (gi.min() < 0 or gi.max() >= num_graphs):
        raise ValueError(f"{req['graph_indicator']}: graph ids must lie in [1, {num_graphs}] "
                         f"({num_graphs} graph labels)")
    _, y = np.unique(glab, return_inverse=True)

    edges = _loadtxt(req["A"], np.int64)
    if edges.size and edges.shape[1] != 2:
        raise ValueError(f"{req['A']}: expected two columns, got {edges.shape[1]}")
    edges = edges.reshape(-1, 2) - 1
    if edges.size and (edges.min() < 0 or edges.max() >= num_nodes):
        raise ValueError(f"{req['A']}: node ids must lie in [1, {num_nodes}]")
    if np.any(gi[edges[:, 0]] != gi[edges[:, 1]]):
        raise ValueError(f"{req['A']}: an edge joins nodes of two different graphs")

    # Relabel nodes so that each graph's nodes are contiguous: new = position in stable sort.
    counts = np.bincount(gi, minlength=num_graphs)
    ptr = np.zeros(num_graphs + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    perm = np.argsort(gi, kind="stable")
    new_id = np.empty(num_nodes, dtype=np.int64)
    new_id[perm] = np.arange(num_nodes)

    ei = clean_edge_index(torch.from_numpy(new_id[edges].T.copy()), num_nodes)
    src = ei[0].numpy()
    e_counts = np.bincount(gi[perm][src], minlength=num_graphs) if src.size else \
        np.zeros(num_graphs, dtype=np.int64)
    e_ptr = np.zeros(num_graphs + 1, dtype=np.int64)
    np.cumsum(e_counts, out=e_ptr[1:])

    x_all = _tu_features(folder, name, num_nodes)
    if x_all is not None:
        x_all = x_all[torch.from_numpy(perm)]

    out = []
    for g in range(num_graphs):
        lo, hi = int(ptr[g]), int(ptr[g + 1])
        e = ei[:, int(e_ptr[g]):int(e_ptr[g + 1])] - lo
        x = x_all[lo:hi] if x_all is not None else None
        out.append(Data(x=x, edge_index=e.contiguous(),
                        y=torch.tensor([int(y[g])], dtype=torch.int64), num_nodes=hi - lo))
    return out


def _tu_features(folder: Path, name: str, num_nodes: int) -> torch.Tensor | None:
    attr = folder / f"{name}_node_attributes.txt"
    lab = folder / f"{name}_node_labels.txt"
    if attr.is_file():
        a = _loadtxt(attr, np.float32)
        if a.shape[0] != num_nodes:
            raise ValueError(f"{attr}: expected {num_nodes} rows, got {a.shape[0]}")
        return torch.from_numpy(np.ascontiguousarray(a))
    if lab.is_file():
        lab_arr = _loadtxt(lab, np.int64)
        if lab_arr.shape[0] != num_nodes:
            raise ValueError(f"{lab}: expected {num_nodes} rows, got {lab_arr.shape[0]}")
        blocks = []
        for col in lab_arr.T:
            cats, inv = np.unique(col, return_inverse=True)
            block = np.zeros((num_nodes, cats.size), dtype=np.float32)
            block[np.arange(num_nodes), inv] = 1.0
            blocks.append(block)
        return torch.from_numpy(np.concatenate(blocks, axis=1))
    return None
