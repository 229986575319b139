"""Readers of the raw dataset files behind :func:`ldpfast.datasets.load`: the Planetoid split
files, the MUSAE / FEATHER csv and json files (Facebook, Twitch-DE, LastFM Asia),
:func:`top_classes`, and the seeded truncated SVD of ``feature_dim=``."""
from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from .._checks import check_int

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


_SVD_SEED = 0x5EED


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


