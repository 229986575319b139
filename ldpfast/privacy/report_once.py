"""One LDP report per user: the randomness a transform uses for an input.

An LDP report must be made once per user.  Two ways to break that with a seeded
transform (audit findings F2a and F2b, issue 15):

* **a fixed seed across inputs**: if every graph is randomised with the same seed, node
  ``i`` of every graph draws the same random bits, so knowing one graph's inputs reveals the
  other's (the draws are addressed by ``(seed, stream, row, col)``);
* **fresh randomness on every application**: a transform used as a PyG ``transform=`` runs
  on every ``dataset[i]`` access; with new randomness each time, an observer collects many
  independent reports of the same users and a majority vote undoes the noise.

A transform therefore never hands its seed to the kernel.  It derives the seed of each
input from its own secret seed and a stable identity of that input::

    input_seed = SHA-256(secret seed || transform tag || identity)[:8]

* the same raw input (every re-access of ``dataset[i]``) gives the same identity, hence the
  same report: re-applying the transform releases nothing new;
* two different inputs (two graphs of a dataset) get independent randomness.

The identity is, by default, a SHA-256 fingerprint of the input's content: every tensor,
number and string attribute of the ``Data`` except the split masks (a random split must
not change a user's report) and ldpfast's own bookkeeping.  Two graphs with exactly the same
content get the same report; if such duplicates belong to different users, give each
``Data`` an identifying attribute (e.g. ``graph_id``) or pass ``identity="graph_id"``.

Sub-graphs of a larger graph (a ``Data`` with ``n_id``, as PyG's neighbour loaders make,
or a ``Batch``) are refused: one user would be reported once per mini-batch.  Randomise the
whole graph once, as a ``pre_transform``, and sample from the result.

Nothing derived here is ever stored: neither the seed nor the fingerprint (a hash of the raw
data) goes into a ledger, report or file.
"""
from __future__ import annotations

import hashlib
import numbers
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from ..rng import resolve_seed

__all__ = ["IDENTITY_DEFAULT", "check_identity", "fingerprint", "input_seed", "whole_graph"]

IDENTITY_DEFAULT = "content"
_CHUNK = 1 << 26  # 64 MiB: big buffers are hashed in chunks on two threads (hashlib frees the GIL)
# Attributes that are not the user's data: split masks (a random split must not change a
# report) and ldpfast's own bookkeeping.
_SKIP = {"ldp_ledger", "y_rr_mask", "_ldpfast_csr"}


def _is_mask(key: str) -> bool:
    return key.endswith("_mask")


def _buffer(t) -> memoryview:
    if isinstance(t, torch.Tensor):
        t = t.detach()
        if t.device.type != "cpu":
            t = t.cpu()
        t = t.contiguous()
        if t.dtype == torch.bfloat16:  # no NumPy dtype; hash the raw 16-bit words
            t = t.view(torch.int16)
        a = t.numpy()
    else:
        a = np.ascontiguousarray(t)
    return memoryview(a.reshape(-1).view(np.uint8))


def _digest(buf: memoryview, pool: ThreadPoolExecutor | None) -> bytes:
    if pool is None or len(buf) <= _CHUNK:
        return hashlib.sha256(buf).digest()
    parts = [buf[i:i + _CHUNK] for i in range(0, len(buf), _CHUNK)]
    return hashlib.sha256(b"".join(pool.map(lambda b: hashlib.sha256(b).digest(), parts))).digest()


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


def fingerprint(data) -> bytes:
    """SHA-256 over the content of ``data`` (see the module docstring for what is covered).

    Tensors contribute their dtype, shape and bytes; numbers and strings their ``repr``;
    ldpfast ``CSR`` objects their ``rowptr`` and ``col``.  Other objects are skipped.
    """
    h = hashlib.sha256(b"ldpfast/fingerprint/v1")
    with ThreadPoolExecutor(2) as pool:
        for key, v in _items(data):
            if key in _SKIP or _is_mask(key):
                continue
            if isinstance(v, (torch.Tensor, np.ndarray)):
                h.update(f"{key}:{v.dtype}:{tuple(v.shape)}:".encode())
                h.update(_digest(_buffer(v), pool))
            elif hasattr(v, "rowptr") and hasattr(v, "col"):  # ldpfast.graph.CSR
                h.update(f"{key}:csr:".encode())
                h.update(_digest(_buffer(v.rowptr), pool))
                h.update(_digest(_buffer(v.col), pool))
            elif isinstance(v, (numbers.Number, str, bytes)) and not isinstance(v, bool):
                h.update(f"{key}={v!r};".encode())
            elif isinstance(v, bool):
                h.update(f"{key}={v};".encode())
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


def _identity_bytes(data, identity: str) -> bytes:
    if identity == IDENTITY_DEFAULT:
        return b"content:" + fingerprint(data)
    v = getattr(data, identity, None)
    if v is None:
        raise ValueError(f"identity: the Data has no attribute {identity!r} to identify it")
    if isinstance(v, (torch.Tensor, np.ndarray)):
        return f"attr:{identity}:{v.dtype}:{tuple(v.shape)}:".encode() + hashlib.sha256(
            _buffer(v)).digest()
    return f"attr:{identity}={v!r}".encode()


def input_seed(secret_seed: int, tag: str, data, identity: str = IDENTITY_DEFAULT) -> int:
    """The 64-bit seed of one input: ``SHA-256(secret_seed || tag || identity of data)``.

    ``tag`` names the transform (so two transforms of one input draw independent bits);
    ``identity`` is ``"content"`` (fingerprint of ``data``) or the name of an attribute of
    ``data`` that identifies it.
    """
    secret_seed = resolve_seed(secret_seed)
    h = hashlib.sha256(b"ldpfast/input-seed/v1")
    h.update(secret_seed.to_bytes(8, "little"))
    h.update(tag.encode() + b"\0")
    h.update(_identity_bytes(data, identity))
    return int.from_bytes(h.digest()[:8], "little")
