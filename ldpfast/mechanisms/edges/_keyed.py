"""Edge LDP keyed to users: Warner RR and DPRR whose every bit (i, j) is addressed by user i's
seed and user j's key (kernels: ``csrc/common/edges_keyed.h``).  Used by
:func:`~ldpfast.mechanisms.edges.rr_edges` and :func:`~ldpfast.mechanisms.edges.dprr` when they
are given user keys.

Positions are the user keys themselves: the false-edge fields are skip sampled over
``[0, max key]``, so keys must be dense enough (e.g. registration numbers ``0..N-1``); the
work per row is ``O(d_i + p_false * (max key + 1))`` and a ``max key + 1`` table maps a key to
its row.

**A user's report is drawn whole** (issue 37, finding 1).  Per release of a mechanism, one
derivation (:mod:`ldpfast.privacy.users`) gives each user one seed from (secret, dataset, user
key, mechanism, every parameter of the law, public flag, keyed digest of the *set* of the
user's neighbours' keys); every coin of the report (each true edge's, the false-edge fields,
DPRR's degree noise) comes from that seed, and the report id from the same chain.  So:

* an unchanged user (same list, same parameters) gets the same seed, hence the same report:
  when others join or leave, the report over the users present in both releases is identical,
  a joining user's bit being drawn from the same seed (the report is a function over the whole
  key space, of which each release shows the users present);
* a changed list (or setting) gets a fresh seed: every bit is redrawn, independently of the
  earlier report, and charged in full.  (Before, each bit kept its own coin across releases,
  so only the changed bits could flip and two releases showed exactly which bits changed.)

What two releases still show is whether a user's list changed (their report changed or did
not): the privacy model states the relation under which the store's sum of charges is a
bound (releases with the same equality pattern), in ``docs/api/privacy_model.md``.
"""
from __future__ import annotations

import numpy as np
import torch

from ... import _backend
from ...privacy.users import Keying

__all__: list[str] = []

#: Levels of DPRR's nested false-edge fields (csrc/common/edges_keyed.h: L_TOP).
L_TOP = 48

#: Largest key range a keyed edge mechanism walks (positions are keys: see the module docstring).
MAX_KEY_SPACE = 1 << 32


def key_table(keys, name: str):
    """``row_of_key`` (int64, -1 where no user) over ``[0, max key]``: a host array for host keys,
    a device tensor for device keys (one host read: the max key)."""
    n = keys.shape[0]
    dev = isinstance(keys, torch.Tensor)
    S = (int(keys.max()) + 1) if n else 0
    if S > MAX_KEY_SPACE or S > 64 * n + (1 << 20):
        raise ValueError(
            f"user_keys: {name} skip-samples each user's false edges over the key range [0, max key], so the keys "
            f"must be dense: max key {S - 1} for {n} users (allowed: below min(2^32, 64 n + 2^20)). Map your "
            "user ids to dense keys that never change (e.g. a registration number 0, 1, 2, ...).")
    if dev:
        table = torch.full((S,), -1, dtype=torch.int64, device=keys.device)
        table[keys] = torch.arange(n, dtype=torch.int64, device=keys.device)
        return table
    table = np.full(S, -1, np.int64)
    table[keys] = np.arange(n, dtype=np.int64)
    return table


def list_seeds(keying: Keying, mechanism: str, params: dict, rp, col, keys, public: torch.Tensor | None):
    """Per-user seeds of rows ``[row0, row0 + m)`` (``rp`` local, ``col`` global ids into ``keys``,
    every user's key; host arrays or device tensors): the user's key, the keyed digest of their
    neighbour set and every parameter; records the release's report ids in ``keying.last`` (for
    a store).  A uint64 host array, or an int64 tensor on the device."""
    seeds = keying.set_seeds(mechanism, params, tensor(rp), tensor(col), extra=public, node_keys=tensor(keys))
    return seeds if on_device(rp) else seeds.cpu().numpy().view(np.uint64)


def sample_rows(rp: np.ndarray, col: np.ndarray, keys: np.ndarray, table: np.ndarray, coins: np.ndarray, *,
                mode: int, st_t: int, st_f: int, p_true, p_false, pm: float, pub, backend: str | None,
                row0: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The keyed sampler on rows ``[row0, row0 + m)`` of a graph (``rp`` local, ``col`` global
    ids, ``keys`` every user's key, ``table`` from :func:`key_table`; ``coins``, ``p_true``,
    ``p_false``, ``pub`` per local row): count, prefix sum, fill (C++: in one pass).  Returns (rowptr, int64 col).
    Device tensors (the CUDA path: coins an int64 tensor of the seeds' bits) go to the CUDA
    sampler, which gives the same bits (``ldpfast/_cuda/edges_keyed.py``)."""
    if on_device(rp):
        pb = None if pub is None or not pub.numel() else pub.to(torch.uint8).contiguous()
        return _backend.get("cuda", backend).keyed_rr(
            rp.contiguous(), col.contiguous(), keys.contiguous(), table, coins, st_t, st_f, mode, p_true.contiguous(),
            p_false.contiguous(), float(pm), pb, row0)
    k = _backend.get("cpu", backend)
    m = rp.shape[0] - 1
    pt = np.ascontiguousarray(p_true, np.float64)
    pf = np.ascontiguousarray(p_false, np.float64)
    pb = None if pub is None or not np.asarray(pub).size else np.ascontiguousarray(pub, np.uint8)
    orp = np.zeros(m + 1, np.int64)
    if hasattr(k, "keyed_rr_rows"):  # C++: count and fill in one pass, the same bits
        return orp, k.keyed_rr_rows(rp, col, keys, table, coins, st_t, st_f, mode, pt, pf, float(pm), pb, orp, row0)
    k.keyed_rr(rp, col, keys, table, coins, st_t, st_f, mode, pt, pf, float(pm), pb, orp, None, row0)
    np.cumsum(orp, out=orp)
    ocol = np.empty(int(orp[m]), np.int64)
    k.keyed_rr(rp, col, keys, table, coins, st_t, st_f, mode, pt, pf, float(pm), pb, orp, ocol, row0)
    return orp, ocol


def degree_noise(seeds: torch.Tensor, t: int, s: int, backend: str | None, device: bool = False):
    """DPRR's discrete Laplace noise of each user's degree, from per-user seeds (int64 out: a
    host array, or with ``device`` a tensor beside the seeds, by the CUDA kernel)."""
    if device:
        out = torch.empty(seeds.shape[0], dtype=torch.int64, device=seeds.device)
        _backend.get("cuda", backend).keyed_dlap(seeds.contiguous(), t, s, out)
        return out
    k = _backend.get("cpu", backend)
    out = np.empty(seeds.shape[0], np.int64)
    k.keyed_dlap(seeds.cpu().numpy().view(np.uint64), t, s, out)
    return out


# --- host arrays or device tensors ------------------------------------------------------------
# The keyed row functions (rr_keyed_rows, dprr_keyed_rows) take host arrays (the CPU path, a
# shard's rows) or device tensors (the CUDA path): the same derivation either way, the sampler
# chosen by where the graph lives.

def on_device(a) -> bool:
    """Whether ``a`` is a device (CUDA) tensor."""
    return isinstance(a, torch.Tensor) and _backend.device_of(a) == "cuda"


def tensor(a) -> torch.Tensor:
    """A host array (without a copy) or a tensor, as a tensor."""
    return a.contiguous() if isinstance(a, torch.Tensor) else torch.from_numpy(np.ascontiguousarray(a))


def public_mask(pub) -> torch.Tensor | None:
    """The public flags as a bool tensor where they live, None for nobody public."""
    if pub is None or not (pub.numel() if isinstance(pub, torch.Tensor) else pub.size):
        return None
    return pub.to(torch.bool) if isinstance(pub, torch.Tensor) else torch.from_numpy(pub.astype(bool))


def per_row(rp, m: int, v: float):
    """``m`` float64 copies of ``v`` beside ``rp`` (host array or device tensor)."""
    if isinstance(rp, torch.Tensor):
        return torch.full((m,), v, dtype=torch.float64, device=rp.device)
    return np.full(m, v)


def noisy_degrees(rp, noise, g: float):
    """DPRR's d* = degree + g noise, float64, the same IEEE operations on either side."""
    if isinstance(rp, torch.Tensor):
        return (rp[1:] - rp[:-1]).to(torch.float64) + g * noise.to(torch.float64)
    return np.diff(rp).astype(np.float64) + g * noise.astype(np.float64)


def graph_rows(csr, keys: torch.Tensor, dev: str):
    """(rowptr, col, keys) of a whole graph for the keyed row functions: host arrays for a CPU
    graph, the device tensors themselves for a CUDA one (``dev``: the graph's device type)."""
    rp, col = csr.rowptr.contiguous(), csr.col.contiguous()
    if dev == "cuda":
        return rp, col, keys
    return rp.numpy(), col.numpy(), keys.numpy()
