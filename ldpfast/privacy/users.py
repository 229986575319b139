"""Users, not rows: the key of every LDP report.

In local DP each user randomises their own data once and the server keeps the report; asked
again, the user returns the same report (LPGNN section 3.1; RAPPOR's permanent randomized
response).  ldpfast therefore keys every report to the user, never to a row position or to the
rest of the graph.  For one release of one mechanism::

    ctx      = SHA-256("ldpfast/report/v3", secret, domain, mechanism, params, graph)
    keys     = SHA-256(ctx, label)[:8] for each label (k_nh, k_pad, k_prf, k_set, k_a, k_b, k_c)
    digest_i = keyed fingerprint of user i's own input (row bytes, or the set of their
               neighbours' user keys), under (k_nh, k_pad, k_prf) or k_set
    seed_i   = CBC-MAC_Philox(k_a, k_b; user_key_i, extra_i, digest_i)     (userkey.h)
    id_i     = Philox_{k_c}(chain value)                                   (report id)

* ``secret``: the caller's 64-bit seed.  It never leaves the process: not in a ledger, a
  store, a report or a file.
* ``domain``: a name the caller gives the dataset (default ``"default"``), so that two
  datasets randomised under one secret never share bits.
* ``mechanism`` and ``params``: the mechanism's name and *every parameter of its output law*
  (eps, eps_x, m, alpha, beta, domain sizes, eps1, n_max, the input dtype, ...), as canonical
  JSON (floats by ``float.hex``).  Two settings never share bits: a sweep over eps with one
  seed gives independent reports (with shared bits, where the eps 1 and eps 2 reports of a
  label differ the eps 2 one was the truth, 100% of the time).
* ``user_key_i``: a stable int64 key of the user (a node attribute the caller names, e.g.
  ``data.user_id``), or, without one, the row index plus the graph's identity (``graph``;
  see :class:`ldpfast.transforms.base.ReportOnce`).
* ``extra_i``: the user's own per-release flags that change their output law (in the label
  mask, public).
* ``digest_i``: the user's own data only.  A changed input is a new report (fresh bits; the
  store charges it); an unchanged one is the identical report.

So a report does not depend on the row order, on other users, on the thread count, the shard
layout or the backend (C++, Numba and CUDA run the same body, ``csrc/common/userkey.h``).
On CUDA the digests and seeds are computed on the device (a warp per row for the digests);
only report ids, when a store asks for them, come back to the host (8 bytes per user).

What an observer can still see: whether a user's report changed between two releases, hence
whether their input (or the parameters) changed.  That is inherent to memoised reports
(RAPPOR has the same property) and is why a changed input is charged as a new report.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers

import numpy as np
import torch

from .. import _backend
from .secret import resolve_secret

__all__ = ["DEFAULT_DOMAIN", "KernelKeys", "Keying", "ReportContext", "bind_input", "canonical_params", "check_domain",
           "check_user_key",
           "context", "keying_of", "report_keys", "set_report_keys", "user_keys_of"]

DERIVATION = b"ldpfast/report/v3"
#: The dataset name (domain separator) of a call that names none.
DEFAULT_DOMAIN = "default"
_LABELS = ("k_nh", "k_pad", "k_prf", "k_set", "k_a", "k_b", "k_c")


def check_domain(domain) -> str:
    """Validate a domain separator: a non-empty string of at most 256 characters."""
    if not isinstance(domain, str) or not domain or len(domain) > 256:
        raise TypeError(f"domain: expected a non-empty str of at most 256 characters naming the dataset "
                        f"(e.g. 'cora' or 'social-graph'), got {domain!r}")
    return domain


def check_user_key(user_key) -> str | None:
    """Validate a ``user_key`` argument: None (row positions) or a Data attribute name."""
    if user_key is not None and (not isinstance(user_key, str) or not user_key):
        raise TypeError(f"user_key: expected None (rows are users; one release) or the name of a node "
                        f"attribute holding each user's int64 key (e.g. 'user_id'), got {user_key!r}")
    return user_key


def _canon(v):
    if isinstance(v, bool) or v is None or isinstance(v, str):
        return v
    if isinstance(v, numbers.Integral):
        return int(v)
    if isinstance(v, numbers.Real):
        f = float(v)
        return {"float": f.hex()} if math.isfinite(f) else {"float": repr(f)}
    if isinstance(v, dict):
        return {str(k): _canon(x) for k, x in sorted(v.items(), key=lambda kv: str(kv[0]))}
    if isinstance(v, (list, tuple)):
        return [_canon(x) for x in v]
    if isinstance(v, np.ndarray):
        return [_canon(x) for x in v.tolist()]
    if isinstance(v, torch.dtype):
        return str(v)
    raise TypeError(f"params: cannot canonicalise {type(v).__name__} (a report's parameters are numbers, "
                    "strings and lists of them)")


def canonical_params(params: dict) -> bytes:
    """Canonical JSON of a parameter dict: sorted keys, floats exact (``float.hex``)."""
    return json.dumps(_canon(params), sort_keys=True, separators=(",", ":")).encode()


class ReportContext:
    """The keys of one release of one mechanism (derived from the secret; never stored).

    Attributes ``k_nh, k_pad, k_prf`` (row digests), ``k_set`` (neighbour-set digests),
    ``k_a, k_b, k_c`` (seed and report-id chain): 64-bit ints.  ``mechanism`` and ``params``
    are kept for the store's record; ``params_digest`` is an unkeyed SHA-256 of the public
    parameters (they are public: eps, m, ...)."""

    __slots__ = _LABELS + ("mechanism", "params", "params_digest", "domain")

    def __init__(self, keys: dict, mechanism: str, params: dict, domain: str):
        for k in _LABELS:
            setattr(self, k, keys[k])
        self.mechanism, self.params, self.domain = mechanism, params, domain
        self.params_digest = hashlib.sha256(mechanism.encode() + b"\0" + canonical_params(params)).hexdigest()

    def __repr__(self) -> str:  # never the keys
        return f"ReportContext({self.mechanism!r}, domain={self.domain!r})"


def bind_input(params: dict, rows) -> dict:
    """``params`` with the per-user input's row shape and dtype added (when ``rows`` is given).

    The row digest reads a row's bytes, zero-padded to whole words, so it alone does not tell
    a row from the same row with a zero column more; and a mechanism's law may depend on the
    width (GRR-FS samples m of d columns).  The report id must bind everything the output
    depends on, or a changed report is called "reused" and charged nothing (issue 37,
    finding 2: 58 to 59 grouped features, 0 users charged, 52% of the reports changed)."""
    if rows is None:
        return params
    return {**params, "input": {"row_shape": [int(v) for v in rows.shape[1:]], "dtype": str(rows.dtype)}}


def _lp(b: bytes) -> bytes:
    return len(b).to_bytes(8, "little") + b


def _secret_part(secret) -> bytes:
    """The secret's bytes in the derivation: a resolved secret (bytes: 8 for a legacy int seed,
    else at least 16; :func:`~ldpfast.privacy.secret.resolve_secret`) or an int in [0, 2^64)."""
    if isinstance(secret, (bytes, bytearray)):
        if len(secret) != 8 and len(secret) < 16:
            raise ValueError(f"secret: expected 8 (a legacy int seed) or at least 16 bytes, got {len(secret)}")
        return bytes(secret)
    return resolve_secret(secret, memoised=False, name="secret")


def context(secret, domain: str, mechanism: str, params: dict, graph: bytes = b"") -> ReportContext:
    """The keys of one release (module docstring): SHA-256 of the secret, the domain, the
    mechanism, the canonical parameters and, without user keys, the graph's identity.
    ``secret``: bytes (:mod:`ldpfast.privacy.secret`) or, where nothing is memoised, an int."""
    domain = check_domain(domain)
    h = hashlib.sha256(DERIVATION)
    for part in (_secret_part(secret), domain.encode(), mechanism.encode(), canonical_params(params),
                 bytes(graph)):
        h.update(_lp(part))
    ctx = h.digest()
    keys = {lab: int.from_bytes(hashlib.sha256(ctx + lab.encode()).digest()[:8], "little") for lab in _LABELS}
    return ReportContext(keys, mechanism, params, domain)


def _key_attr(data, user_key: str) -> torch.Tensor:
    """The node attribute ``user_key`` of ``data``, which must be a tensor (checked as keys later)."""
    v = getattr(data, user_key, None)
    if v is None:
        raise ValueError(f"user_key: the Data has no attribute {user_key!r} (one int64 key per node)")
    if not isinstance(v, torch.Tensor):
        raise TypeError(f"user_key: data.{user_key} must be a tensor of int64 keys, got {type(v).__name__}")
    return v


def user_keys_of(data, user_key: str | None, n: int, device, row_offset: int = 0) -> torch.Tensor:
    """The int64 user keys of a graph's ``n`` nodes on ``device``.

    ``user_key=None``: the row indices ``row_offset .. row_offset + n - 1``.  Otherwise the
    node attribute of that name: a 1-D integer tensor of ``n`` distinct keys in ``[0, 2^63)``
    (checked on its device; one host read)."""
    if user_key is None:
        return torch.arange(row_offset, row_offset + n, dtype=torch.int64, device=device)
    return _checked_keys(_key_attr(data, user_key), n, device, f"data.{user_key}")


def _kernels(*ts):
    """The userkey kernels for tensors living where ``ts`` live (``_backend.device_of``)."""
    if _backend.device_of(*[t for t in ts if t is not None]) == "cuda":
        return _backend.get("cuda", "cuda"), True
    b = _backend.requested()
    return _backend.get("cpu", b if b in ("cpp", "numba") else "auto"), False


def _u64(t: torch.Tensor) -> np.ndarray:
    return t.numpy().view(np.uint64)


def _finish(ctx: ReportContext, keys: torch.Tensor, digests, extra, ids: bool, where=None):
    K, cuda = _kernels(keys, where)
    n = keys.shape[0]
    seeds = torch.empty(n, dtype=torch.int64, device=keys.device)
    rids = torch.empty(n, dtype=torch.int64, device=keys.device) if ids else None
    if extra is not None:
        extra = extra.to(torch.int64).contiguous()  # on the users' device already (checked by the caller)
        if extra.shape != (n,):
            raise ValueError(f"extra: expected {n} per-user flags")
    if cuda:
        K.report_keys(keys, extra, digests, ctx.k_a, ctx.k_b, ctx.k_c, seeds, rids)
    else:
        K.report_keys(keys.numpy(), None if extra is None else _u64(extra),
                      None if digests is None else _u64(digests), ctx.k_a, ctx.k_b, ctx.k_c, _u64(seeds),
                      None if rids is None else _u64(rids))
    return seeds, (None if rids is None else rids.cpu().numpy().view(np.uint64))


def report_keys(ctx: ReportContext, keys: torch.Tensor, rows: torch.Tensor | None = None,
                extra: torch.Tensor | None = None, ids: bool = False):
    """Per-user seeds (an int64 tensor holding uint64 bits, on the keys' device) and, with
    ``ids``, report ids (a host uint64 array) of one release.

    ``rows``: each user's input, one row per user (any dtype; its bytes are digested on its
    device); ``extra``: per-user flags (int64 / bool, ``(n,)``)."""
    digests = None
    if rows is not None:
        n = keys.shape[0]
        if rows.shape[0] != n:
            raise ValueError(f"rows: expected {n} rows (one per user), got {rows.shape[0]}")
        r = rows.detach().contiguous()
        b = r.view(torch.uint8).reshape(n, -1) if r.numel() else torch.zeros((n, 0), dtype=torch.uint8,
                                                                              device=r.device)
        digests = torch.empty((n, 2), dtype=torch.int64, device=keys.device)
        K, cuda = _kernels(keys, rows)
        if cuda:
            K.row_digests(b, ctx.k_nh, ctx.k_pad, ctx.k_prf, digests)
        else:
            K.row_digests(b.numpy(), ctx.k_nh, ctx.k_pad, ctx.k_prf, _u64(digests))
    return _finish(ctx, keys, digests, extra, ids, rows)


def set_report_keys(ctx: ReportContext, keys: torch.Tensor, rowptr: torch.Tensor, col: torch.Tensor,
                    extra: torch.Tensor | None = None, ids: bool = False, node_keys: torch.Tensor | None = None):
    """As :func:`report_keys`, each user's input being the set of their neighbours' user keys
    (CSR ``rowptr``/``col``; ``col`` indexes ``node_keys``, default ``keys``: a shard's rows
    pass every user's keys): order-free, so renumbering rows changes nothing."""
    n = keys.shape[0]
    nk = keys if node_keys is None else node_keys.contiguous()
    digests = torch.empty((n, 2), dtype=torch.int64, device=keys.device)
    K, cuda = _kernels(keys, rowptr)
    if cuda:
        K.set_digests(rowptr.contiguous(), col.contiguous(), nk, ctx.k_set, digests)
    else:
        K.set_digests(rowptr.contiguous().numpy(), col.contiguous().numpy(), nk.numpy(), ctx.k_set,
                      _u64(digests))
    return _finish(ctx, keys, digests, extra, ids)


def _checked_keys(user_keys, n: int, device, name: str = "user_keys") -> torch.Tensor:
    """A caller's user keys as an int64 tensor on ``device``: ``n`` distinct keys in [0, 2^63)."""
    if isinstance(user_keys, np.ndarray):
        user_keys = torch.from_numpy(user_keys)
    if not isinstance(user_keys, torch.Tensor) or user_keys.dim() != 1 or user_keys.dtype not in (
            torch.int32, torch.int64):
        raise TypeError(f"{name}: expected a 1-D int32/int64 tensor of user keys, got "
                        f"{type(user_keys).__name__}")
    if user_keys.shape[0] != n:
        raise ValueError(f"{name}: expected {n} keys (one per row), got {user_keys.shape[0]}")
    if user_keys.device.type != torch.device(device).type:
        raise ValueError(f"{name}: is on {user_keys.device} but the input is on {device}")
    keys = user_keys.to(torch.int64).contiguous()
    if n:
        neg, dup = _key_faults(keys)
        if neg is not None:
            raise ValueError(f"{name}: holds negative keys (smallest {neg}); user keys must lie in [0, 2^63)")
        if dup is not None:
            raise ValueError(f"{name}: holds the key {dup} twice; each user must have one distinct key")
    return keys


def _key_faults(keys: torch.Tensor) -> tuple:
    """(smallest negative key or None, smallest key held twice or None) of a non-empty int64
    tensor: the C++ ``check_keys`` for CPU tensors (O(n) for keys of a compact range; a sort is
    as costly as a mechanism call), else a sort on the keys' device (one host read)."""
    if keys.device.type == "cpu":
        try:
            return _backend.get("cpu", "cpp").check_keys(keys.numpy())
        except _backend.BackendUnavailable:
            pass
    s = torch.sort(keys).values
    dup = s[1:] == s[:-1]
    neg, anydup = torch.stack([s[0] < 0, dup.any()]).tolist()
    if neg:
        return int(s[0]), None
    return None, (int(s[int(torch.nonzero(dup)[0, 0])]) if anydup else None)


class KernelKeys:
    """One release's keys handed to a kernel that derives each row's seed itself
    (:meth:`Keying.kernel_keys`): ``ctx`` (a :class:`ReportContext`), ``keys`` (int64 user keys),
    ``extra`` (int64 per-user flags or None), and the outputs ``seeds`` and ``rids`` (None
    unless a store asks for report ids).  Lives for one call; never stored."""

    __slots__ = ("ctx", "extra", "keys", "rids", "seeds")

    def __init__(self, ctx, keys, extra, seeds, rids):
        self.ctx, self.keys, self.extra, self.seeds, self.rids = ctx, keys, extra, seeds, rids

    def __repr__(self) -> str:  # never the keys
        return f"KernelKeys({self.ctx!r}, n={self.keys.shape[0]})"


class Keying:
    """Who the rows of one mechanism call are, and the secret they report under.

    Parameters
    ----------
    secret : int or None
        The caller's 64-bit secret (``None``: fresh from the OS).  Kept in memory only.
    domain : str
        Dataset name (domain separator), default ``"default"``.
    user_keys : 1-D int tensor, optional
        One distinct key in ``[0, 2^63)`` per row.  ``None``: row ``i`` is user
        ``row_offset + i`` (one release of this graph; see the module docstring).
    row_offset : int
        Key of the first row when ``user_keys`` is None.
    keys_name : str
        What errors call the user keys (e.g. ``"data.user_id"``).
    graph : bytes
        The graph's identity, mixed into the derivation when rows are the users (so two
        graphs never share bits); empty with user keys.
    ids : bool
        Compute report ids (for a report store); the last call's are in :attr:`last`.

    Notes
    -----
    After each call, :attr:`last` holds ``(ctx, keys, ids)`` of that release: what a report
    store records.
    """

    def __init__(self, secret=None, *, domain: str = DEFAULT_DOMAIN, user_keys=None, row_offset: int = 0,
                 keys_name: str = "user_keys", graph: bytes = b"", ids: bool = False):
        # memoised reports (user keys, a store's report ids) need a secret no one can guess
        self.secret = resolve_secret(secret, memoised=user_keys is not None or ids, name="seed")
        self.domain = check_domain(domain)
        if isinstance(row_offset, bool) or not isinstance(row_offset, numbers.Integral) or not (
                0 <= int(row_offset) < 2**62):
            raise ValueError(f"row_offset: expected an int in [0, 2^62), got {row_offset!r}")
        self.user_keys, self.row_offset, self.graph, self.ids = user_keys, int(row_offset), bytes(graph), ids
        self.keys_name = keys_name
        self.last = self.last_seeds = None
        self._checked = None  # the user keys once checked (a sort and a host read): once per Keying

    def __repr__(self) -> str:  # never the secret
        return f"Keying(domain={self.domain!r}, user_keys={'rows' if self.user_keys is None else 'given'})"

    def keys(self, n: int, device) -> torch.Tensor:
        """The ``n`` user keys as an int64 tensor on ``device`` (given keys are checked once)."""
        if self.user_keys is None:
            return torch.arange(self.row_offset, self.row_offset + n, dtype=torch.int64, device=device)
        if self._checked is None or self._checked.shape[0] != n:
            self._checked = _checked_keys(self.user_keys, n, device, self.keys_name)
        return self._checked

    def context(self, mechanism: str, params: dict) -> ReportContext:
        return context(self.secret, self.domain, mechanism, params, self.graph)

    def seeds(self, mechanism: str, params: dict, n: int, device, *, rows=None, extra=None) -> torch.Tensor:
        """Per-row seeds of one release (:func:`report_keys`); records :attr:`last`.  With
        ``rows``, their shape and dtype are bound into the parameters (:func:`bind_input`)."""
        ctx = self.context(mechanism, bind_input(params, rows))
        keys = self.keys(n, device)
        seeds, ids = report_keys(ctx, keys, rows, extra, ids=self.ids)
        self.last = (ctx, keys, ids)
        self.last_seeds = seeds  # in memory only, for the specification tests
        return seeds

    def kernel_keys(self, mechanism: str, params: dict, n: int, device, *, rows=None, extra=None) -> KernelKeys:
        """What a kernel that derives its rows' seeds itself needs (the CUDA feature kernels: each
        row is digested and randomised in one pass): the release's keys, the user keys and the
        buffers for the seeds and report ids.  ``rows``: the input the kernel digests (its shape
        and dtype are bound, :func:`bind_input`).  Call :meth:`record` after the launch."""
        params = bind_input(params, rows)
        keys = self.keys(n, device)
        if extra is not None:
            extra = extra.to(torch.int64).contiguous()
            if extra.shape != (n,):
                raise ValueError(f"extra: expected {n} per-user flags")
        seeds = torch.empty(n, dtype=torch.int64, device=keys.device)
        rids = torch.empty(n, dtype=torch.int64, device=keys.device) if self.ids else None
        return KernelKeys(self.context(mechanism, params), keys, extra, seeds, rids)

    def record(self, kk: KernelKeys) -> None:
        """After a launch with :meth:`kernel_keys`: the release as :meth:`seeds` records it."""
        ids = None if kk.rids is None else kk.rids.cpu().numpy().view(np.uint64)
        self.last = (kk.ctx, kk.keys, ids)
        self.last_seeds = kk.seeds  # in memory only, for the specification tests

    def set_seeds(self, mechanism: str, params: dict, rowptr, col, *, extra=None, node_keys=None) -> torch.Tensor:
        """Per-row seeds whose input is each row's set of neighbours' keys (:func:`set_report_keys`;
        ``node_keys``: every user's key when the rows are a block of the graph)."""
        ctx = self.context(mechanism, params)
        keys = self.keys(rowptr.numel() - 1, rowptr.device)
        seeds, ids = set_report_keys(ctx, keys, rowptr, col, extra, ids=self.ids, node_keys=node_keys)
        self.last = (ctx, keys, ids)
        return seeds


def keying_of(seed, user_keys, domain, row_offset, keying: Keying | None) -> Keying:
    """The Keying of a functional mechanism call: ``keying`` when a transform passes one (then
    ``seed``, ``user_keys`` and ``row_offset`` must be left unset), else one built from them."""
    if keying is not None:
        if seed is not None or user_keys is not None or row_offset:
            raise ValueError("_keying: pass either a Keying or seed/user_keys/row_offset, not both")
        return keying
    return Keying(seed, domain=domain, user_keys=user_keys, row_offset=row_offset)
