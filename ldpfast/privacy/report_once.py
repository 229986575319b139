"""The identity of a graph whose rows are its users (transforms without ``user_key``).

With ``user_key`` every report is keyed to its user (:mod:`ldpfast.privacy.users`); without
one, the rows are the users *of this graph only*, and the graph's identity below enters every
report key, so that a re-access of the same graph returns the same reports and two graphs never
share bits.  (History: this module first derived one seed per input from this identity.)

An LDP report must be made once per user.  Two ways to break that with a seeded
transform:

* **a fixed seed across inputs**: if every graph is randomised with the same seed, node
  ``i`` of every graph draws the same random bits, so knowing one graph's inputs reveals the
  other's (the draws are addressed by ``(seed, stream, row, col)``);
* **fresh randomness on every application**: a transform used as a PyG ``transform=`` runs
  on every ``dataset[i]`` access; with new randomness each time, an observer collects many
  independent reports of the same users and a majority vote undoes the noise.

A transform therefore never hands its seed to the kernel.  Without user keys it mixes a stable
identity of the input into the report keys (:func:`graph_identity`; the derivation is in
:mod:`ldpfast.privacy.users`)::

    graph = "rows-of:" || identity of the input

* the same raw input (every re-access of ``dataset[i]``) gives the same identity, hence the
  same report: re-applying the transform releases nothing new;
* two different inputs (two graphs of a dataset, or two neighbouring graphs that differ in
  one edge) get independent randomness.

The identity is, by default, a **keyed fingerprint** of the input's content: every tensor,
number and string attribute of the ``Data`` except the split masks (a random split must
not change a user's report) and ldpfast's own bookkeeping.  Two graphs with exactly the same
content get the same report; if such duplicates belong to different users, give each
``Data`` an identifying attribute (e.g. ``graph_id``) or pass ``identity="graph_id"``.

The fingerprint (:func:`fingerprint`, kernel family ``fingerprint``: ``csrc/common/fingerprint.h``,
run by the C++, Numba and CUDA backends) hashes each tensor where it lives, so a CUDA input is
hashed on the GPU and never copied to the host (16 bytes per tensor come back: the seed is a
host integer).  Per tensor, a UMAC-style hash keyed by three 64-bit keys: NH (two lanes) on
each 256-byte block, then Philox4x32-10 of the block's NH value xor a Philox pad of its
position, summed mod 2^64 in two lanes (order-free, so the value does not depend on the
device, the backend or the thread count).  The keys are ``SHA-256(secret key || attribute
name, dtype, shape)``, with the secret key ``SHA-256(secret seed)``: an adversary who chooses
the inputs but not the seed finds two different inputs with one fingerprint with probability
about 2^-64 per pair (NH is 2^-32-almost-universal per lane; Philox is taken to behave as a
PRF under an unknown key), the same order as two 64-bit seeds colliding.  The per-tensor
results, names, dtypes, shapes and the other attributes' ``repr`` are then hashed with
SHA-256.  Unlike an unkeyed hash, the fingerprint of a public graph reveals nothing without
the secret, and nothing derived from it is kept.  Why NH first rather than one PRF call per
word (``sum_i Philox_k(i, w_i)``): Philox costs about 12 ns per call on a CPU core, one call
per 8 bytes is slower than SHA-256 with SHA extensions; NH costs one 32x32-bit multiply per
4 bytes and leaves two Philox calls per 256 bytes, so the keyed hash is faster than the
SHA-256 it replaced (20M-edge ``edge_index``, 320 MB: 0.12-0.2 s against 0.46-0.6 s, two
threads, on a shared machine with load 5-11).

This replaced (version 2 of the derivation) a plain SHA-256 of every tensor's bytes on the
host: the per-input seeds, hence the reports of a seeded transform, differ from those of
earlier versions for the same seed.

Sub-graphs of a larger graph (a ``Data`` with ``n_id``, as PyG's neighbour loaders make,
or a ``Batch``) are refused: one user would be reported once per mini-batch.  Randomise the
whole graph once, as a ``pre_transform``, and sample from the result.

Nothing derived here is ever stored: neither the seed nor the fingerprint (a hash of the raw
data) goes into a ledger, report or file.
"""
from __future__ import annotations

import hashlib
import numbers

import numpy as np
import torch

from .. import _backend
from .users import _secret_part

__all__ = ["IDENTITY_DEFAULT", "check_identity", "fingerprint", "fingerprint_key", "graph_identity",
           "whole_graph"]

#: The default graph identity: a keyed fingerprint of the graph's content.
IDENTITY_DEFAULT = "content"
_TAG = b"ldpfast/fingerprint/v2"
# Attributes that are not the user's data: split masks (a random split must not change a
# report) and ldpfast's own bookkeeping.
_SKIP = {"ldp_ledger", "y_rr_mask", "_ldpfast_csr"}


def _is_mask(key: str) -> bool:
    return key.endswith("_mask")


def fingerprint_key(secret_seed) -> bytes:
    """The 32-byte fingerprint key of a secret: ``SHA-256(tag || secret)`` (an int seed as its
    8 little-endian bytes, as before; a bytes secret as given)."""
    return hashlib.sha256(_TAG + b"/key" + _secret_part(secret_seed)).digest()


def _tensor_keys(key: bytes, header: bytes) -> tuple[int, int, int]:
    """(k_nh, k_pad, k_prf) of one tensor: SHA-256 of the secret key and the tensor's header
    (name, dtype, shape), so tensors of different names, dtypes or shapes hash independently."""
    d = hashlib.sha256(_TAG + b"/tensor" + key + header).digest()
    return tuple(int.from_bytes(d[8 * i:8 * i + 8], "little") for i in range(3))


def _flat_bytes(t):
    """The bytes of ``t`` in C order as a 1-D uint8 tensor (or NumPy array), on t's device:
    a view when ``t`` is contiguous, else one device-side copy."""
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.is_conj() or t.is_neg():
            t = t.resolve_conj().resolve_neg()
        if t.numel() == 0:  # (from_numpy of an empty array has stride 0: no byte view)
            return t.new_empty(0, dtype=torch.uint8)  # (new_empty keeps a tensor subclass)
        t = t.contiguous().reshape(-1)
        return t if t.dtype == torch.uint8 else t.view(torch.uint8)
    return np.ascontiguousarray(t).reshape(-1).view(np.uint8)


def _cpu_kernels(backend):
    b = _backend.requested(backend or None)
    return _backend.get("cpu", b if b in ("cpp", "numba") else "auto")


def _digests(parts, key: bytes, backend=None) -> list[bytes]:
    """16-byte keyed fingerprint of each ``(header, tensor or array)`` in ``parts``.

    CPU tensors and arrays run the C++ (or Numba) kernel on a view of their memory; CUDA
    tensors the CUDA kernel on the device, all results of one device read back at once
    (``2 * 8`` bytes per tensor, the only transfer)."""
    out: list[bytes | None] = [None] * len(parts)
    on_gpu: dict = {}
    for i, (header, t) in enumerate(parts):
        keys = _tensor_keys(key, header)
        if isinstance(t, torch.Tensor) and _backend.device_of(t) == "cuda":
            on_gpu.setdefault(t.device, []).append((i, _flat_bytes(t), keys))
            continue
        b = _flat_bytes(t)
        res = np.zeros(2, dtype=np.uint64)
        _cpu_kernels(backend).fingerprint(b.numpy() if isinstance(b, torch.Tensor) else b, *keys, res)
        out[i] = res.tobytes()
    for dev, items in on_gpu.items():
        k = _backend.get("cuda", "cuda")
        res = torch.zeros((len(items), 2), dtype=torch.int64, device=dev)
        for j, (_, b, keys) in enumerate(items):
            k.fingerprint(b, *keys, res[j])
        for (i, _, _), (s0, s1) in zip(items, res.tolist()):  # one sync per device
            out[i] = (s0 % 2**64).to_bytes(8, "little") + (s1 % 2**64).to_bytes(8, "little")
    return out


def _items(data):
    """``(key, value)`` pairs of a PyG ``Data`` (or any object with ``__dict__``), sorted."""
    if hasattr(data, "to_dict"):
        d = dict(data.to_dict())
    else:
        d = dict(vars(data))
    csr = getattr(data, "__dict__", {}).get("csr")
    if csr is not None and "csr" not in d:
        d["csr"] = csr
    return sorted(d.items(), key=lambda kv: kv[0])


def _components(v):
    """``(layout, [(name, tensor)])`` of a graph object that is not a dense tensor: an
    ldpfast ``CSR``, a torch sparse tensor (COO coalesced first, so equal matrices hash
    equally) or a ``torch_sparse.SparseTensor``; None for anything else."""
    if isinstance(v, torch.Tensor):
        if v.layout == torch.sparse_coo:
            v = v.detach().coalesce()
            return "sparse_coo", [("indices", v.indices()), ("values", v.values())]
        if v.layout in (torch.sparse_csr, torch.sparse_bsr):
            return str(v.layout), [("crow", v.crow_indices()), ("col", v.col_indices()), ("values", v.values())]
        if v.layout in (torch.sparse_csc, torch.sparse_bsc):
            return str(v.layout), [("ccol", v.ccol_indices()), ("row", v.row_indices()), ("values", v.values())]
        return None
    if hasattr(v, "rowptr") and hasattr(v, "col"):  # ldpfast.graph.CSR
        return "csr", [("rowptr", v.rowptr), ("col", v.col), ("value", getattr(v, "value", None))]
    if hasattr(v, "storage") and callable(getattr(v, "csr", None)):  # torch_sparse.SparseTensor
        rowptr, col, value = v.csr()
        return "sparse_tensor", [("rowptr", rowptr), ("col", col), ("value", value)]
    return None


def _header(name: str, t) -> bytes:
    return f"{name}:{t.dtype}:{tuple(t.shape)}:".encode()


def fingerprint(data, key: bytes, backend: str | None = None) -> bytes:
    """Keyed 32-byte fingerprint of the content of ``data`` (module docstring: what is
    covered, the construction and its collision bound).

    Parameters
    ----------
    data : torch_geometric.data.Data or any object with attributes
        Tensors (CPU or CUDA, each hashed where it lives) and NumPy arrays contribute their
        name, dtype, shape and bytes; numbers and strings their ``repr``; ldpfast ``CSR``
        objects, torch sparse tensors and ``torch_sparse.SparseTensor`` (e.g. PyG's
        ``adj_t``) their index and value arrays.  Other objects, split masks (``*_mask``)
        and ldpfast's bookkeeping are skipped.
    key : bytes
        The secret key, :func:`fingerprint_key` of the transform's seed.  Never stored.
    backend : str, optional
        ``"cpp"`` or ``"numba"`` for CPU tensors (default: automatic); CUDA tensors always
        use the CUDA kernel.  Every backend gives the same value.

    Returns
    -------
    bytes
        32 bytes, the same for the same content on every device, backend and thread count.
    """
    if not isinstance(key, (bytes, bytearray)) or len(key) < 16:
        raise TypeError("key: expected the secret fingerprint key (bytes, see fingerprint_key)")
    key = bytes(key)
    heads: list[bytes] = []  # in order; tensors' digests follow their header
    parts = []
    for name, v in _items(data):
        if name in _SKIP or _is_mask(name):
            continue
        if isinstance(v, np.ndarray) or (isinstance(v, torch.Tensor) and v.layout == torch.strided):
            parts.append((_header(name, v), v))
            heads.append(None)
        elif _components(v) is not None:  # CSR, sparse tensors: their index and value arrays
            layout, comps = _components(v)
            heads.append(f"{name}:{layout}:{tuple(getattr(v, 'shape', ()))}:".encode())
            for f, t in comps:
                if t is not None:
                    parts.append((_header(f"{name}.{f}", t), t))
                    heads.append(None)
        elif isinstance(v, (numbers.Number, str, bytes)) and not isinstance(v, bool):
            heads.append(f"{name}={v!r};".encode())
        elif isinstance(v, bool):
            heads.append(f"{name}={v};".encode())
    digests = iter(_digests(parts, key, backend))
    hdrs = iter(parts)
    h = hashlib.sha256(_TAG)
    for item in heads:
        if item is None:  # a tensor: its header, then its keyed digest
            h.update(next(hdrs)[0])
            h.update(next(digests))
        else:
            h.update(item)
    return h.digest()


def check_identity(identity) -> str:
    """Validate a transform's ``identity`` argument: ``"content"`` or an attribute name."""
    if not isinstance(identity, str) or not identity:
        raise TypeError(f"identity: expected 'content' or the name of a Data attribute that "
                        f"identifies the input (e.g. 'graph_id'), got {identity!r}")
    return identity


def whole_graph(data, transform: str) -> None:
    """Refuse sub-graphs and mini-batches (one user would be reported once per batch)."""
    if getattr(data, "n_id", None) is not None or type(data).__name__ == "Batch" or (
            getattr(data, "ptr", None) is not None and getattr(data, "batch", None) is not None):
        raise ValueError(
            f"data: {transform} got a sub-graph or mini-batch (it has 'n_id' or is a Batch). "
            "An LDP report is made once per user: randomise the whole graph once (e.g. as the "
            "dataset's pre_transform) and sample sub-graphs from the randomised graph.")


def _identity_bytes(data, identity: str, key: bytes, backend=None) -> bytes:
    content = b"content:" + fingerprint(data, key, backend)
    if identity == IDENTITY_DEFAULT:
        return content
    v = getattr(data, identity, None)
    if v is None:
        raise ValueError(f"identity: the Data has no attribute {identity!r} to identify it")
    # The attribute separates graphs of identical content; the content is always mixed in too, so
    # a graph whose rows shift under the same attribute gets fresh, independent bits (issue 37,
    # finding 14: addressed by row alone, user i+1 inherited user i's coins after a leave).
    if isinstance(v, (torch.Tensor, np.ndarray)):
        header = b"attr:" + _header(identity, v)
        return header + _digests([(header, v)], key, backend)[0] + content
    return f"attr:{identity}={v!r}".encode() + content


def graph_identity(secret_seed: int, data, identity: str = IDENTITY_DEFAULT, backend: str | None = None) -> bytes:
    """The identity of a graph whose rows are its users (no user keys), mixed into every report
    key of a transform applied to it (:class:`ldpfast.privacy.users.Keying`'s ``graph``):
    ``identity`` is ``"content"`` (keyed fingerprint of ``data``, see :func:`fingerprint`) or the
    name of an attribute of ``data`` that identifies it.  The same for the same content on
    every device and backend; secret (keyed), and never stored."""
    return b"rows-of:" + _identity_bytes(data, identity, fingerprint_key(secret_seed), backend)
