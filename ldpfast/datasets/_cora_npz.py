"""The file format of the embedded Cora (``ldpfast/datasets/data/cora.npz``): read and write.

``numpy.savez_compressed``, read with ``allow_pickle=False`` (unlike the pickled
``ind.cora.*`` files): the cleaned, sorted ``edge_index`` as CSR (``edge_rowptr`` int32,
``edge_col`` uint16), the binary bag-of-words features as CSR of the non-zero columns
(``x_rowptr`` int32, ``x_col`` uint16; every stored value is 1), ``y`` uint8, the three
Planetoid masks bit-packed (``np.packbits``), ``num_features`` and ``format``.

Kept apart from :mod:`.embedded` (which rebuilds the file from the raw files through
:func:`ldpfast.datasets.load`) so that :mod:`.loaders` can read the file without an import
cycle.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torch_geometric.data import Data

__all__ = ["CORA_PATH", "load_cora", "write_cora"]

#: The embedded Cora (``ldpfast/datasets/data/cora.npz``, inside the installed package).
CORA_PATH = Path(__file__).resolve().parent / "data" / "cora.npz"
_FORMAT = 1
_MASKS = ("train_mask", "val_mask", "test_mask")


def _csr(rows: np.ndarray, cols: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """CSR of (rows, cols) pairs already sorted by row (order within a row is kept)."""
    if rows.size and np.any(np.diff(rows) < 0):
        raise ValueError("rows must be sorted")
    rowptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=n), out=rowptr[1:])
    return rowptr.astype(np.int32), cols.astype(np.uint16)


def write_cora(data: Data, out: str | Path = CORA_PATH) -> Path:
    """Write ``data`` (Cora as :func:`ldpfast.datasets.load` returns it) to ``out`` in this format.

    Refuses (``ValueError``) anything the compact format cannot hold exactly: non-binary
    features, more than 65536 nodes or features, more than 256 classes.
    """
    n, d = int(data.num_nodes), int(data.x.size(1))
    if max(n, d) > 2**16 or int(data.y.max()) >= 256:
        raise ValueError("cora: too large for the uint16 / uint8 embedded format")
    x = data.x.numpy()
    if not np.isin(x, (0.0, 1.0)).all():
        raise ValueError("cora: features are not binary; the embedded format stores indices only")
    ei = data.edge_index.numpy()
    e_ptr, e_col = _csr(ei[0], ei[1], n)
    xr, xc = np.nonzero(x)  # row-major order: sorted by row, then column
    x_ptr, x_col = _csr(xr, xc, n)
    arrays = {
        "format": np.array(_FORMAT, dtype=np.int64),
        "num_features": np.array(d, dtype=np.int64),
        "edge_rowptr": e_ptr, "edge_col": e_col,
        "x_rowptr": x_ptr, "x_col": x_col,
        "y": data.y.numpy().astype(np.uint8),
    }
    for key in _MASKS:
        arrays[key] = np.packbits(getattr(data, key).numpy())
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as f:  # a file object: savez would append ".npz" to other names
        np.savez_compressed(f, **arrays)
    return out


def load_cora(path: str | Path = CORA_PATH) -> Data:
    """The embedded Cora as the ``Data`` that :func:`ldpfast.datasets.load` returns."""
    with np.load(path, allow_pickle=False) as z:
        if int(z["format"]) != _FORMAT:
            raise ValueError(f"{path}: embedded format {int(z['format'])}, expected {_FORMAT}")
        d = int(z["num_features"])
        e_ptr, e_col = z["edge_rowptr"].astype(np.int64), z["edge_col"].astype(np.int64)
        x_ptr, x_col = z["x_rowptr"].astype(np.int64), z["x_col"].astype(np.int64)
        y = z["y"].astype(np.int64)
        packed = {k: z[k] for k in _MASKS}
    n = y.size
    src = np.repeat(np.arange(n, dtype=np.int64), np.diff(e_ptr))
    x = torch.zeros(n, d, dtype=torch.float32)
    x_rows = torch.from_numpy(np.repeat(np.arange(n, dtype=np.int64), np.diff(x_ptr)))
    x[x_rows, torch.from_numpy(x_col)] = 1.0
    data = Data(x=x, edge_index=torch.from_numpy(np.stack([src, e_col])),
                y=torch.from_numpy(y), num_nodes=n)
    for key in _MASKS:
        data[key] = torch.from_numpy(np.unpackbits(packed[key], count=n).astype(bool))
    data.name = "cora"
    return data
