"""The TU-format graph classification loader (:func:`load_tu`, e.g. REDDIT-BINARY)."""
from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

from ..graph import clean_edge_index


def _loadtxt(path: Path, dtype) -> np.ndarray:

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
