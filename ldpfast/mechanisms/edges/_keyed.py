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


def key_table(keys: np.ndarray, name: str) -> np.ndarray:
    """``row_of_key`` (int64, -1 where no user) over ``[0, max key]``."""
    n = keys.shape[0]
    if n == 0:
        return np.full(0, -1, np.int64)
    S = int(keys.max()) + 1
    if S > MAX_KEY_SPACE or S > 64 * n + (1 << 20):
        raise ValueError(
            f"user_keys: {name} skip-samples each user's false edges over the key range [0, max key], so the keys "
            f"must be dense: max key {S - 1} for {n} users (allowed: below min(2^32, 64 n + 2^20)). Map your "
            "user ids to dense keys that never change (e.g. a registration number 0, 1, 2, ...).")
    table = np.full(S, -1, np.int64)
    table[keys] = np.arange(n, dtype=np.int64)
    return table


def list_seeds(keying: Keying, mechanism: str, params: dict, rp: np.ndarray, col: np.ndarray, keys: np.ndarray,
               public: torch.Tensor | None) -> np.ndarray:
    """Per-user seeds (uint64) of rows ``[row0, row0 + m)`` (``rp`` local, ``col`` global ids into
    ``keys``, every user's key): the user's key, the keyed digest of their neighbour set and
    every parameter; records the release's report ids in ``keying.last`` (for a store)."""
    seeds = keying.set_seeds(mechanism, params, torch.from_numpy(rp), torch.from_numpy(col), extra=public,
                             node_keys=torch.from_numpy(keys))
    return seeds.cpu().numpy().view(np.uint64)


def sample_rows(rp: np.ndarray, col: np.ndarray, keys: np.ndarray, table: np.ndarray, coins: np.ndarray, *,
                mode: int, st_t: int, st_f: int, p_true, p_false, pm: float, pub, backend: str | None,
                row0: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """The keyed sampler on rows ``[row0, row0 + m)`` of a graph (``rp`` local, ``col`` global
    ids, ``keys`` every user's key, ``table`` from :func:`key_table`; ``coins``, ``p_true``,
    ``p_false``, ``pub`` per local row): count, prefix sum, fill.  Returns (rowptr, int64 col)."""
    k = _backend.get("cpu", backend)
    m = rp.shape[0] - 1
    pt = np.ascontiguousarray(p_true, np.float64)
    pf = np.ascontiguousarray(p_false, np.float64)
    pb = None if pub is None or not np.asarray(pub).size else np.ascontiguousarray(pub, np.uint8)
    orp = np.zeros(m + 1, np.int64)
    k.keyed_rr(rp, col, keys, table, coins, st_t, st_f, mode, pt, pf, float(pm), pb, orp, None, row0)
    np.cumsum(orp, out=orp)
    ocol = np.empty(int(orp[m]), np.int64)
    k.keyed_rr(rp, col, keys, table, coins, st_t, st_f, mode, pt, pf, float(pm), pb, orp, ocol, row0)
    return orp, ocol


def degree_noise(seeds: torch.Tensor, t: int, s: int, backend: str | None) -> np.ndarray:
    """DPRR's discrete Laplace noise of each user's degree, from per-user seeds (int64 out)."""
    k = _backend.get("cpu", backend)
    out = np.empty(seeds.shape[0], np.int64)
    k.keyed_dlap(seeds.cpu().numpy().view(np.uint64), t, s, out)
    return out
