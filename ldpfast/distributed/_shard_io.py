"""The shard store of :mod:`ldpfast.distributed.shards`: the on-disk layout (``meta.json`` and
row-block Parquet files, described there), writing shards from an in-memory graph, reading
them back, and the atomic writes the tasks use."""
from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .._checks import check_int

#: The shard store's format tag, in ``meta.json`` (a store of another format is refused).
FORMAT = "ldpfast-shards/1"


def _require_pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - the extra is missing
        raise ImportError("ldpfast.distributed.shards needs pyarrow and dask[distributed]: "
                          "pip install 'ldpfast[distributed]'") from exc
    return pa, pq


# ----------------------------------------------------------------------------- shard I/O
def _write_atomic(table, path: Path) -> None:
    """Parquet ``table`` to ``path`` through a temporary name in the same folder."""
    _, pq = _require_pyarrow()
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        pq.write_table(table, tmp)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _edges_table(rowptr: np.ndarray, col: np.ndarray, row0: int):
    pa, _ = _require_pyarrow()
    counts = np.diff(rowptr)
    src = np.repeat(np.arange(row0, row0 + counts.shape[0], dtype=np.int64), counts)
    return pa.table({"src": src, "dst": col.astype(np.int64, copy=False)})


#: Per-node columns of a nodes file besides ``x`` (input: user_id, y, y_mask; output: the masks of
#: the randomised labels and of the users a store withheld).
NODE_COLUMNS = ("user_id", "y", "y_mask", "y_rr_mask", "x_withheld", "y_withheld", "edge_withheld")


def _nodes_table(x: np.ndarray | None = None, **columns):
    """A nodes table: ``x`` as fixed-size lists, then the 1-D ``columns`` (NODE_COLUMNS) given."""
    pa, _ = _require_pyarrow()
    cols = {}
    if x is not None:
        d = x.shape[1]
        cols["x"] = pa.FixedSizeListArray.from_arrays(pa.array(np.ascontiguousarray(x).reshape(-1)), d)
    for name, v in columns.items():
        if name not in NODE_COLUMNS:
            raise ValueError(f"nodes: unknown column {name!r}")
        if v is not None:
            cols[name] = pa.array(v)
    return pa.table(cols)


def _read_nodes(path: Path, m: int) -> dict[str, np.ndarray]:
    _, pq = _require_pyarrow()
    t = pq.read_table(path)
    if t.num_rows != m:
        raise ValueError(f"{path.name}: expected {m} rows (one per node of the shard), got {t.num_rows}")
    out = {}
    if "x" in t.column_names:
        col = t.column("x").combine_chunks()
        d = col.type.list_size
        out["x"] = col.values.to_numpy(zero_copy_only=False).reshape(m, d)
    for name in NODE_COLUMNS:
        if name in t.column_names:
            out[name] = t.column(name).to_numpy()
    return out


def _read_edges(path: Path, a: int, b: int, n: int):
    """Local CSR (rowptr of length b - a + 1, int64 col) of a shard, checked: src in [a, b)
    and sorted (column order, range, loops and symmetry are checked by ``check_rows``)."""
    _, pq = _require_pyarrow()
    t = pq.read_table(path, columns=["src", "dst"])
    src = t.column("src").to_numpy()
    dst = t.column("dst").to_numpy().astype(np.int64, copy=False)
    if src.shape[0] and (int(src.min()) < a or int(src.max()) >= b):
        raise ValueError(f"graph: {path.name} holds rows [{a}, {b}) but lists src values in "
                         f"[{int(src.min())}, {int(src.max())}]")
    if src.shape[0] > 1 and bool((src[1:] < src[:-1]).any()):
        raise ValueError(f"graph: {path.name} is not sorted by src")
    rowptr = np.zeros(b - a + 1, dtype=np.int64)
    np.cumsum(np.bincount(src - a, minlength=b - a), out=rowptr[1:])
    col = dst.astype(np.int32) if n <= np.iinfo(np.int32).max else dst
    return rowptr, np.ascontiguousarray(col)


def write_shards(graph, path, num_shards: int, *, x: torch.Tensor | None = None, y: torch.Tensor | None = None,
                 y_mask: torch.Tensor | None = None, user_id: torch.Tensor | None = None) -> dict:
    """Store a graph (and optional node data) as row-block Parquet shards (module docstring).

    For tests and for owners who still hold the graph in one place; a graph that never was
    on one machine is written in the same layout by its producer.

    Parameters
    ----------
    graph : ldpfast.graph.CSR or torch_geometric.data.Data
        Simple undirected graph (checked as by the edge mechanisms).
    path : str or Path
        Output folder (created; must not hold a meta.json already).
    num_shards : int
        Number of row blocks, in [1, n]; cut so that each holds about ``(|E| + n) / num_shards``
        entries plus rows.
    x, y, y_mask : torch.Tensor, optional
        ``(n, d)`` features, ``(n,)`` labels and the bool mask of nodes that report a label.
    user_id : torch.Tensor, optional
        ``(n,)`` int64 user keys (distinct, in ``[0, 2^63)``; dense for the edge mechanisms):
        :func:`randomize` then keys every report to its user (see :mod:`ldpfast.privacy.users`).

    Returns
    -------
    dict
        The meta.json written.
    """
    from ..mechanisms.edges import _graph_csr

    pa, _ = _require_pyarrow()
    csr = _graph_csr(graph, None)
    n = csr.num_nodes
    num_shards = check_int("num_shards", num_shards, 1, n)
    for name, t, dims in (("x", x, 2), ("y", y, 1), ("y_mask", y_mask, 1), ("user_id", user_id, 1)):
        if t is not None and (not isinstance(t, torch.Tensor) or t.dim() != dims or t.shape[0] != n):
            raise ValueError(f"{name}: expected a {dims}-D tensor with {n} rows")
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    if (path / "meta.json").exists():
        raise FileExistsError(f"path: {path} already holds a shard set (meta.json); choose an empty folder")
    rp = csr.rowptr.numpy()
    col = csr.col.numpy()
    weight = rp + np.arange(n + 1)
    cuts = np.searchsorted(weight, np.linspace(0, weight[-1], num_shards + 1), side="left")
    cuts[0], cuts[-1] = 0, n
    cuts = np.maximum.accumulate(cuts)
    shards = []
    for s in range(num_shards):
        a, b = int(cuts[s]), int(cuts[s + 1])
        e_name = f"edges-{s:05d}.parquet"
        _write_atomic(_edges_table(rp[a:b + 1] - rp[a], col[rp[a]:rp[b]], a), path / e_name)
        nodes = None
        if x is not None or y is not None or user_id is not None:
            nodes = f"nodes-{s:05d}.parquet"
            part = {k: None if v is None else v[a:b].numpy() for k, v in
                    (("y", y), ("y_mask", y_mask), ("user_id", None if user_id is None else user_id.to(torch.int64)))}
            _write_atomic(_nodes_table(None if x is None else x[a:b].numpy(), **part), path / nodes)
        shards.append({"row_start": a, "row_end": b, "nnz": int(rp[b] - rp[a]), "edges": e_name, "nodes": nodes})
    meta = {"format": FORMAT, "num_nodes": n, "num_edges": int(csr.nnz), "shards": shards,
            "x": None if x is None else {"dtype": str(x.dtype).replace("torch.", ""), "d": int(x.shape[1])},
            "y": y is not None, "user_id": user_id is not None, "pyarrow": pa.__version__}
    (path / "meta.json").write_text(json.dumps(meta, indent=1))
    return meta


def read_shards(path) -> dict[str, Any]:
    """Gather a shard set into memory: ``{"edge_index": (2, E) int64, "num_nodes": n}`` plus
    ``x`` and the per-node columns stored (``y``, ``y_mask``, ``user_id``; in an output:
    ``y_rr_mask``, the nodes whose label was randomised, and the ``*_withheld`` masks).  For
    tests and small outputs only (it is the one function here that gathers)."""
    _, pq = _require_pyarrow()
    path = Path(path)
    meta = _load_meta(path)
    src, dst, nodes = [], [], []
    for sh in meta["shards"]:
        if sh.get("edges"):
            t = pq.read_table(path / sh["edges"], columns=["src", "dst"])
            src.append(t.column("src").to_numpy())
            dst.append(t.column("dst").to_numpy())
        if sh.get("nodes"):
            nodes.append(_read_nodes(path / sh["nodes"], sh["row_end"] - sh["row_start"]))
    out: dict[str, Any] = {"num_nodes": meta["num_nodes"], "meta": meta}
    if src:
        out["edge_index"] = torch.from_numpy(np.stack([np.concatenate(src), np.concatenate(dst)]))
    for key in ("x",) + NODE_COLUMNS:
        if nodes and key in nodes[0]:
            out[key] = torch.from_numpy(np.concatenate([nd[key] for nd in nodes]))
    return out


def _load_meta(path: Path) -> dict:
    f = path / "meta.json"
    if not f.exists():
        raise FileNotFoundError(f"in_dir: {path} has no meta.json (not a complete shard set)")
    meta = json.loads(f.read_text())
    if meta.get("format") != FORMAT:
        raise ValueError(f"in_dir: {f} has format {meta.get('format')!r}, expected {FORMAT!r}")
    n = check_int("num_nodes (meta.json)", meta["num_nodes"], 2)
    prev = 0
    for sh in meta["shards"]:
        a, b = int(sh["row_start"]), int(sh["row_end"])
        if a != prev or b < a:
            raise ValueError(f"in_dir: meta.json shards must cover [0, {n}) in order; got a shard [{a}, {b}) "
                             f"after row {prev}")
        prev = b
    if prev != n:
        raise ValueError(f"in_dir: meta.json shards end at row {prev}, expected num_nodes = {n}")
    return meta

