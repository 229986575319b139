"""Empirical audit of the local randomisers over ``k`` releases: canary users, a change model,
attacks, and eps_lb beside what the report store (or the ledger) charged.

How it works (docs/privacy_audit.md has the whole story):

1. **Canaries.**  ``canaries`` users per world whose inputs the auditor controls: in world 0 a
   canary holds ``x0``, in world 1 ``x1``, a pair of neighbouring inputs of the relation audited
   (node-ldp: the user's whole feature row and label, which differ in every column; edge-ldp:
   one bit of the user's neighbour list).  Other users (the background) fill the graph.
2. **Releases.**  The pipeline's stages (any of the feature, label and edge transforms or
   functional mechanisms) run ``releases`` times, under one secret, on a population that
   changes by the change model (:data:`CHANGE_MODELS`), with or without user keys and a
   :class:`~ldpfast.privacy.ReportStore`.
3. **Attack.**  Each canary's view of the first ``k`` releases becomes a few statistics: the
   per-release score (the released bit, or how many released values agree with ``x1`` rather
   than ``x0``), their sum over releases (a majority vote), the pattern of scores, how often the
   score flipped between releases, how often the report changed at all, and the whole pattern
   of released values when it has few enough values.  On a *selection* half of the canaries
   the best region of each statistic is chosen (likelihood-ratio order of the observed
   frequencies, or a threshold), and the best of them kept.
4. **Bound.**  On the other half, its false-positive and false-negative counts give
   Clopper-Pearson upper bounds and ``eps_lb`` (:mod:`.stats`).  Canaries are distinct users,
   so in local DP their reports are independent given their inputs: each canary is one
   independent trial (no training-run-per-trial as in central-DP audits).
5. **Charge.**  What the store charged each canary in the relation after ``k`` releases (its
   total, summed over the store's dataset names), or without a store the sum of the releases'
   :class:`~ldpfast.privacy.Spent` entries.  ``eps_lb > charge`` refutes the charge.

The auditor runs on the CPU, on graphs it builds itself; it never reads a real user's data.
Use a scratch store (the default, ``store=True``, is a temporary file): an audit writes its
canary users into the store it is given.
"""
from __future__ import annotations

import hashlib
import math
import os
import tempfile
import warnings
from dataclasses import dataclass, field
from numbers import Real
from pathlib import Path

import numpy as np
import torch

from ..._checks import check_int, check_real
from ..budget import Ledger, Spent
from ..store import ReportStore, relation_of
from .report import AuditPoint, AuditReport
from .stats import choose_region, eps_from_counts

__all__ = ["CHANGE_MODELS", "MECHANISMS", "audit_mechanism", "audit_pipeline"]

#: How the population and the canaries' inputs change from one release to the next.
CHANGE_MODELS = {
    "static": "nothing changes: the same users and inputs in every release",
    "join": "before each release after the first, new users join at random rows; the canaries' inputs stay",
    "leave": "before each release after the first, some other users leave (rows shift); the canaries' inputs stay",
    "permute": "before each release the rows are shuffled; the users and their inputs stay",
    "edit": "release 1: both worlds hold the same input; from release 2 on world 0 edits a decoy attribute (a "
            "feature column, the label, an edge bit) and world 1 the decoy and the target: every canary's input "
            "changes, and the worlds differ in one attribute",
    "sweep": "each release runs at another eps (eps times eps_sweep[t]); the inputs stay",
    "add_column": "features: each release after the first appends a zero column to every row (the schema "
                  "grows); the values stay",
}


@dataclass(frozen=True)
class _Spec:
    """A mechanism family: its transform and functional names, its input kind and budget name."""

    transform: str | None
    functional: str | None
    kind: str  # "categorical", "continuous", "labels", "edges"
    eps_name: str  # the budget argument of the transform / function
    keyed: bool = True  # has a user-keyed path (LocalLap: not yet)

    @property
    def target(self) -> str:
        return "edges" if self.kind == "edges" else "labels" if self.kind == "labels" else "features"


_FAMILIES = (
    _Spec("GRRFS", "grr_fs", "categorical", "eps_x"),
    _Spec(None, "grr", "categorical", "eps"),
    _Spec("MultiBit", "multibit_encode", "continuous", "eps"),
    _Spec("OneBit", "onebit", "continuous", "eps"),
    _Spec("RRLabels", "rr_labels", "labels", "eps"),
    _Spec("RREdges", "rr_edges", "edges", "eps"),
    _Spec("DPRR", "dprr", "edges", "eps"),
    _Spec("LocalLap", "local_laplace", "edges", "eps", keyed=False),
)

#: Every mechanism the auditor runs: ``{name: "transform" or "function"}`` (transform classes of
#: :mod:`ldpfast.transforms`, functions of :mod:`ldpfast.mechanisms`; ``"multibit"`` is an alias
#: of ``"multibit_encode"``).
MECHANISMS = {**{s.transform: "transform" for s in _FAMILIES if s.transform},
              **{s.functional: "function" for s in _FAMILIES}}
_ALIASES = {"multibit": "multibit_encode"}


def _lookup(mechanism) -> tuple[_Spec, str, str]:
    """``(family, "transform" | "function", name)`` of a name, a transform class or a function."""
    name = mechanism if isinstance(mechanism, str) else getattr(mechanism, "__name__", None)
    name = _ALIASES.get(name, name)
    for s in _FAMILIES:
        if name is not None and name == s.transform:
            return s, "transform", name
        if name is not None and name == s.functional:
            return s, "function", name
    raise ValueError(f"mechanism: expected one of {sorted(MECHANISMS)} (a name, a transform class or a "
                     f"mechanism function), got {mechanism!r}")


@dataclass
class _Stage:
    spec: _Spec
    api: str
    name: str
    eps: float
    params: dict = field(default_factory=dict)


def _stage(item) -> _Stage:
    """A pipeline stage from ``"Name"``, ``("Name", {"eps": 1.0, ...})`` or ``{"mechanism": "Name", ...}``."""
    if isinstance(item, dict):
        params = dict(item)
        mech = params.pop("mechanism", None)
    elif isinstance(item, (tuple, list)) and len(item) == 2 and isinstance(item[1], dict):
        mech, params = item[0], dict(item[1])
    else:
        mech, params = item, {}
    spec, api, name = _lookup(mech)
    eps = params.pop("eps", params.pop(spec.eps_name, 1.0))
    if isinstance(eps, bool) or not isinstance(eps, Real) or not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"{name}: eps must be a finite number > 0, got {eps!r}")
    for bad in ("seed", "user_key", "user_keys", "store", "dataset"):
        if bad in params:
            raise ValueError(f"{name}: the auditor sets {bad!r} itself (see audit_pipeline's keyed, store, secret)")
    return _Stage(spec, api, name, float(eps), params)


def _secret_of(secret, seed) -> bytes:
    """The mechanisms' secret: given bytes, else derived from the audit's ``seed`` (repeatable
    audits), else fresh from the OS."""
    if secret is not None:
        if not isinstance(secret, (bytes, bytearray)) or len(secret) < 16:
            raise ValueError("secret: expected bytes of at least 16 (128 bits), e.g. os.urandom(16)")
        return bytes(secret)
    if seed is None:
        return os.urandom(16)
    return hashlib.sha256(b"ldpfast/audit/secret\0" + str(int(seed)).encode()).digest()[:16]


def _seed_arg(secret: bytes):
    """What the mechanisms' ``seed=`` takes for a bytes secret: the bytes where memoised reports
    take bytes secrets, else a 64-bit int derived from them.  The one place to switch."""
    from ..users import Keying

    try:
        Keying(secret)
        return secret
    except TypeError:
        return int.from_bytes(hashlib.sha256(b"ldpfast/audit/seed\0" + secret).digest()[:8], "little")


# --- the population -----------------------------------------------------------------------
@dataclass
class _Design:
    d: int
    domain: int
    alpha: float
    beta: float
    num_classes: int
    hub_degree: int
    hubs: int
    floaters: int
    step: int


class _Population:
    """Users, their keys, inputs and row order in each release (module docstring, step 1).

    Ids ``0 .. 2N-1`` are the canaries (``world = id >= N``); then the background: hubs (edge
    canaries' fixed neighbours), floaters (everyone else), and the users who join later."""

    def __init__(self, rng: np.random.Generator, n_world: int, design: _Design, change: str, releases: int,
                 kinds: set[str]):
        self.N, self.design, self.change, self.K, self.kinds = n_world, design, change, releases, kinds
        C = 2 * n_world
        self.C = C
        H, F = (design.hubs if "edges" in kinds else 0), design.floaters
        J = design.step * (releases - 1) if change == "join" else 0
        self.hubs = np.arange(C, C + H)
        self.floaters = np.arange(C + H, C + H + F)
        self.joiners = np.arange(C + H + F, C + H + F + J)
        U = C + H + F + J
        self.U = U
        self.world = (np.arange(C) >= n_world).astype(np.int8)
        self.key = rng.permutation(U).astype(np.int64)  # dense keys, in no relation to the ids
        # row order per release
        first = rng.permutation(np.arange(C + H + F))
        self.orders = [first]
        for t in range(1, releases):
            prev = self.orders[-1]
            if change == "permute":
                cur = rng.permutation(prev)
            elif change == "join":
                new = self.joiners[(t - 1) * design.step:t * design.step]
                cur = prev.copy()
                for u in new:
                    cur = np.insert(cur, rng.integers(0, cur.shape[0] + 1), u)
            elif change == "leave":
                gone = rng.choice(np.intersect1d(prev, self.floaters), design.step, replace=False)
                cur = prev[~np.isin(prev, gone)]
            else:
                cur = prev
            self.orders.append(cur)
        # background inputs (fixed per user)
        if "categorical" in kinds:
            self.bg_x = rng.integers(0, design.domain, (U, design.d)).astype(np.int64)
        elif "continuous" in kinds:
            self.bg_x = design.alpha + (design.beta - design.alpha) * rng.random((U, design.d))
        if "labels" in kinds:
            self.bg_y = rng.integers(0, design.num_classes, U).astype(np.int64)
        if "edges" in kinds:
            self._edges(rng)

    # -- edges: quads of canaries, hubs, floaters
    def _edges(self, rng: np.random.Generator) -> None:
        d, N, C = self.design, self.N, self.C
        h = min(d.hub_degree, self.hubs.shape[0])
        base = []
        if h:
            pick = np.argsort(rng.random((C, self.hubs.shape[0])), axis=1)[:, :h]
            base.append(np.stack([np.repeat(np.arange(C), h), self.hubs[pick.reshape(-1)]], 1))
        fl = np.concatenate([self.floaters, self.joiners])
        if fl.shape[0] > 2:
            a = np.repeat(fl, 2)
            b = fl[rng.integers(0, fl.shape[0], a.shape[0])]
            base.append(np.stack([a, b], 1)[a != b])
        self.base_edges = np.concatenate(base) if base else np.zeros((0, 2), np.int64)
        # quads (a, b, c, d) inside each world: targets a-b, c-d (world 1), decoys a-c, b-d (edit)
        q = np.concatenate([rng.permutation(np.arange(w * N, (w + 1) * N)) for w in (0, 1)]).reshape(-1, 4)
        self.quads = q
        self.targets = np.concatenate([q[:, [0, 1]], q[:, [2, 3]]])
        self.decoys = np.concatenate([q[:, [0, 2]], q[:, [1, 3]]])
        self.target_world = self.world[self.targets[:, 0]]
        partner = np.empty(C, np.int64)
        partner[self.targets[:, 0]], partner[self.targets[:, 1]] = self.targets[:, 1], self.targets[:, 0]
        self.partner = partner

    def edge_index(self, t: int, row_of: np.ndarray) -> torch.Tensor:
        """The undirected ``edge_index`` of release ``t`` (0-based) in its row order."""
        from ...graph import clean_edge_index

        parts = [self.base_edges]
        if self.change != "edit" or t >= 1:
            parts.append(self.targets[self.target_world == 1])
        if self.change == "edit" and t >= 1:
            parts.append(self.decoys)
        e = np.concatenate(parts)
        r = row_of[e]
        r = r[(r >= 0).all(1)]
        n = int((row_of >= 0).sum())
        ei = torch.from_numpy(np.ascontiguousarray(np.concatenate([r, r[:, ::-1]]).T)).to(torch.int64)
        return clean_edge_index(ei, n)

    # -- features and labels
    def width(self, t: int) -> int:
        return self.design.d + (t if self.change == "add_column" else 0)

    def diff_cols(self) -> np.ndarray:
        """The columns where world 1's input differs from world 0's (the score's columns)."""
        return np.array([0]) if self.change == "edit" else np.arange(self.design.d)

    def canary_x(self, t: int, lo, hi, dtype) -> np.ndarray:
        """The canaries' feature rows in release ``t``: ``lo`` everywhere, then world 1 (all
        attributes) or, for ``edit`` from release 2 on, the decoy column 1 (both worlds) and the
        target column 0 (world 1) set to ``hi``."""
        X = np.full((self.C, self.width(t)), lo, dtype=dtype)
        w1 = self.world == 1
        if self.change == "edit":
            if t >= 1:
                X[:, 1] = hi
                X[w1, 0] = hi
        else:
            X[w1, :self.design.d] = hi
        return X

    def canary_y(self, t: int) -> np.ndarray:
        """The canaries' labels: ``0`` / ``c - 1``; ``edit``: 0, then ``1`` / ``2``."""
        if self.change == "edit":
            return np.where(self.world == 1, 2, 1) if t >= 1 else np.zeros(self.C, np.int64)
        return np.where(self.world == 1, self.design.num_classes - 1, 0)

    def label_pair(self, t: int) -> tuple[int, int]:
        if self.change == "edit":
            return (1, 2) if t >= 1 else (0, 0)
        return 0, self.design.num_classes - 1


# --- running the stages -----------------------------------------------------------------------
class _Runner:
    """Applies the stages to one release's ``Data`` (transforms cached per eps, as a pipeline keeps
    them), and reads back what the auditor observes."""

    def __init__(self, stages: list[_Stage], keyed: bool, store: ReportStore | None, seed_arg, dataset: str):
        self.stages, self.keyed, self.store, self.seed, self.dataset = stages, keyed, store, seed_arg, dataset
        self._inst: dict = {}

    def _transform(self, st: _Stage, eps: float, pop: _Population):
        key = (st.name, eps)
        if key not in self._inst:
            from ... import transforms as T

            kw = dict(st.params)
            kw[st.spec.eps_name] = eps
            kw["seed"] = self.seed
            kw["dataset"] = self.dataset
            if st.spec.keyed:
                kw["user_key"] = "user_id" if self.keyed else None
                kw["store"] = self.store
            if st.spec.kind == "categorical":
                kw.setdefault("m", 1)
                kw.setdefault("domain", pop.design.domain)
            elif st.spec.kind == "continuous":
                kw.setdefault("rectify", False)
                kw.setdefault("alpha", pop.design.alpha)
                kw.setdefault("beta", pop.design.beta)
            elif st.spec.kind == "labels":
                kw.setdefault("mask", "all")
                kw.setdefault("num_classes", pop.design.num_classes)
            elif st.name != "LocalLap":
                kw.setdefault("symmetrize", "none")
            self._inst[key] = getattr(T, st.name)(**kw)
        return self._inst[key]

    def _function(self, st: _Stage, eps: float, data, pop: _Population):
        from ... import mechanisms as M

        fn = getattr(M, st.name)
        kw = dict(st.params)
        kw["seed"] = self.seed
        kw["dataset"] = self.dataset
        if self.keyed and st.spec.keyed:
            kw["user_keys"] = data.user_id
        d = pop.design
        if st.name == "grr":
            kw.setdefault("k", d.domain)
            return fn(data.x, eps=eps, **kw)
        if st.name == "grr_fs":
            kw.setdefault("m", 1)
            kw.setdefault("domain", d.domain)
            return fn(data.x, eps_x=eps, **kw)
        if st.spec.kind == "continuous":
            kw.setdefault("alpha", d.alpha)
            kw.setdefault("beta", d.beta)
            return fn(data.x, eps=eps, **kw)
        if st.spec.kind == "labels":
            kw.setdefault("num_classes", d.num_classes)
            return fn(data.y, eps=eps, **kw)
        if st.name != "local_laplace":
            kw.setdefault("symmetrize", "none")
        return fn(data, eps=eps, **kw)

    def run(self, data, eps_of: dict, pop: _Population):
        """Apply every stage; returns ``(x_out, y_out, edge CSR, [Spent per stage])``."""
        from ...transforms.edges import NoisyGraphWarning

        spent: list[Spent] = []
        x_out = y_out = csr = None
        for st in self.stages:
            eps = eps_of[st.name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", NoisyGraphWarning)  # canary graphs are sparse by design
                # without user keys the rows are one graph's users: a new graph per release is the point
                warnings.filterwarnings("ignore", message=".*has now randomised a second, different graph")
                if st.api == "transform":
                    inst = self._transform(st, eps, pop)
                    data = inst(data)
                    spent.append(Ledger.of(data).entries[-1])
                    if st.spec.kind == "edges":
                        csr = inst.last_result.noisy
                else:
                    res = self._function(st, eps, data, pop)
                    if st.spec.kind == "edges":
                        csr, sp = res.noisy, res.spent
                    else:
                        out, sp = res
                        if st.spec.kind == "labels":
                            data.y = out
                        else:
                            data.x = out
                    spent.append(sp)
            if st.spec.kind == "labels":
                y_out = data.y
            elif st.spec.kind != "edges":
                x_out = data.x
        return x_out, y_out, csr, spent


def _row_bits(csr, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """Whether ``cols[i]`` is in row ``rows[i]`` of ``csr`` (vectorised over the canaries)."""
    rp = csr.rowptr.cpu().numpy().astype(np.int64)
    col = csr.col.cpu().numpy().astype(np.int64)
    lo, hi = rp[rows], rp[rows + 1]
    ln = hi - lo
    owner = np.repeat(np.arange(rows.shape[0], dtype=np.int64), ln)
    idx = np.repeat(lo - np.cumsum(ln) + ln, ln) + np.arange(int(ln.sum()), dtype=np.int64)
    n = np.int64(csr.num_nodes)
    return np.isin(np.arange(rows.shape[0], dtype=np.int64) * n + cols, owner * n + col[idx])


def _decode_continuous(x: torch.Tensor, alpha: float, beta: float) -> np.ndarray:
    """The encoder's ``{-1, 0, 1}`` from its output (int8), or from the rectified float features
    (the sign of ``x' - (alpha + beta) / 2``, eq. 4 of LPGNN being affine)."""
    if not x.dtype.is_floating_point:
        return x.cpu().numpy().astype(np.int64)
    return np.sign(x.double().cpu().numpy() - (alpha + beta) / 2.0).astype(np.int64)


# --- the attack ---------------------------------------------------------------------------------
def _codes(a: np.ndarray) -> tuple[np.ndarray, int]:
    """Each row of ``a`` (2-D) as one int code; and the number of distinct rows."""
    u, inv = np.unique(a, axis=0, return_inverse=True)
    return inv.reshape(-1).astype(np.int64), u.shape[0]


def _statistics(O: np.ndarray, S: np.ndarray, k: int, n_select: int):
    """``[(name, per-canary codes, numeric)]`` of the first ``k`` releases (module docstring, step 3)."""
    out = [("score" if k == 1 else "score_sum", S[:, :k].sum(1), True)]
    if k >= 2:
        out.append(("score_pattern", _codes(S[:, :k])[0], False))
        out.append(("score_flips", (S[:, 1:k] != S[:, :k - 1]).sum(1), True))
        out.append(("report_changes", (O[:, 1:k] != O[:, :k - 1]).any(-1).sum(1), True))
    raw, n_raw = _codes(O[:, :k].reshape(O.shape[0], -1))
    if n_raw <= max(2, n_select // 8):  # few enough patterns to estimate their frequencies
        out.append(("report_pattern", raw, False))
    return out


def _attack(O: np.ndarray, S: np.ndarray, world: np.ndarray, charges: list[np.ndarray], rng, *,
            select_fraction: float, confidence: float, delta: float) -> list[AuditPoint]:
    """One :class:`AuditPoint` per ``k``: the test chosen on the selection half, measured on the rest."""
    sel = np.zeros(world.shape[0], bool)
    for w in (0, 1):
        ids = np.flatnonzero(world == w)
        sel[rng.permutation(ids)[:round(select_fraction * ids.shape[0])]] = True
    w0, w1 = world == 0, world == 1
    points = []
    for k in range(1, S.shape[1] + 1):
        best = None
        for name, codes, numeric in _statistics(O, S, k, int(sel.sum())):
            r = choose_region(name, codes[sel & w0], codes[sel & w1], numeric=numeric, delta=delta,
                              confidence=confidence)
            if r is not None and (best is None or r.eps_select > best[0].eps_select):
                best = (r, codes)
        ch = charges[k - 1]
        m0, m1 = ~sel & w0, ~sel & w1
        n0, n1 = int(m0.sum()), int(m1.sum())
        if best is None:
            points.append(AuditPoint(k, 0.0, float(ch.max()), float(ch.min()), "none (every statistic is constant)",
                                     n0=n0, n1=n1))
            continue
        region, codes = best
        fp = int(region.contains(codes[m0]).sum())
        fn = int((~region.contains(codes[m1])).sum())
        e, fpr_u, fnr_u = eps_from_counts(fp, n0, fn, n1, delta=delta, confidence=confidence)
        points.append(AuditPoint(k, float(e), float(ch.max()), float(ch.min()), region.describe(),
                                 fp / max(n0, 1), fn / max(n1, 1), float(fpr_u), float(fnr_u), n0, n1,
                                 float(region.eps_select)))
    return points


# --- the entry points -----------------------------------------------------------------------------
def _open_store(store):
    """``(ReportStore or None, temporary folder to remove or None, whether the auditor opened it)``."""
    if store is None or store is False:
        return None, None, False
    if store is True:
        tmp = tempfile.TemporaryDirectory(prefix="ldpfast-audit-")
        return ReportStore(Path(tmp.name) / "audit.sqlite", create=True), tmp, True
    if isinstance(store, ReportStore):
        return store, None, False
    if isinstance(store, (str, os.PathLike)):
        if Path(store).exists():
            raise ValueError(f"store: {store} exists; the audit writes its canary users into the store it is "
                             "given: pass a new path (or store=True for a temporary one)")
        return ReportStore(store, create=True), None, True
    raise TypeError(f"store: expected True (a temporary store), False, a new file path or a ReportStore, got "
                    f"{type(store).__name__}")


def _totals(store: ReportStore, relation: str, keys: np.ndarray) -> np.ndarray:
    """Each key's total in ``relation``, summed over the store's dataset names (0 if none)."""
    users, eps = store.totals(relation)
    if users.size == 0:
        return np.zeros(keys.shape[0])
    u, inv = np.unique(users, return_inverse=True)
    tot = np.zeros(u.shape[0])
    np.add.at(tot, inv, eps)
    pos = np.clip(np.searchsorted(u, keys), 0, u.shape[0] - 1)
    return np.where(u[pos] == keys, tot[pos], 0.0)


def _auto_hub_degree(edge: _Stage, n_world: int, hubs: int, floaters: int) -> int:
    """The edge canaries' degree that lets the attack see their target bit often.

    RR: any (2).  DPRR samples a user's RR bits with ``q_i`` (eq. 6), about 1/2 at degree
    ``(n-1)(1-p) / (2 (1.5 - p))``.  LocalLap keeps the ``T ~ |E|`` largest noisy entries: both a
    true and a false entry are kept often when the threshold is about 2, i.e. when
    ``|E| = n0 P[L >= 2] / (1 - P[L >= 1])`` (``L ~ Lap(1/eps2)``, ``n0 ~ n^2 / 2`` entries)."""
    name = edge.spec.transform
    if name not in ("DPRR", "LocalLap"):
        return 2
    h = 2
    for _ in range(5):  # n depends on the hubs: a few fixed-point steps
        n = 2 * n_world + max(hubs, h) + floaters
        if name == "DPRR":
            from ...mechanisms.edges import dprr_budget

            _, eps2 = dprr_budget(edge.eps, edge.params.get("n_max") or n, edge.params.get("alpha", 0.9),
                                  edge.params.get("eps1"))
            p = math.exp(eps2) / (math.exp(eps2) + 1)
            h = math.ceil(0.5 * (n - 1) * (1 - p) / (1.5 - p))
        else:
            e2 = 0.9 * edge.eps
            frac = 0.5 * math.exp(-2 * e2) / (1 - 0.5 * math.exp(-e2))
            h = math.ceil(frac * n * (n - 1) / 2 / (2 * n_world))
        h = max(2, h)
    return h


def _design(stages: list[_Stage], change: str, n_world: int, releases: int, design: dict | None) -> _Design:
    d = dict(design or {})
    unknown = set(d) - {"d", "domain", "num_classes", "hub_degree", "hubs", "floaters", "step"}
    if unknown:
        raise ValueError(f"design: unknown keys {sorted(unknown)}; expected d, domain, num_classes, hub_degree, "
                         "hubs, floaters, step")
    cont = next((s for s in stages if s.spec.kind == "continuous"), None)
    alpha = float(cont.params.get("alpha", 0.0)) if cont else 0.0
    beta = float(cont.params.get("beta", 1.0)) if cont else 1.0
    dd = check_int("design['d']", d.get("d", 2), 2 if change == "edit" else 1, 4096)
    dom = check_int("design['domain']", d.get("domain", 2), 2, 1 << 31)
    c = check_int("design['num_classes']", d.get("num_classes", 3 if change == "edit" else 2),
                  3 if change == "edit" else 2, 1 << 31)
    edge = next((s for s in stages if s.spec.kind == "edges"), None)
    hubs = check_int("design['hubs']", d.get("hubs", 8), 0)
    floaters = check_int("design['floaters']", d.get("floaters", max(16, n_world // 8)), 0)
    hub_degree = d.get("hub_degree")
    if hub_degree is None:
        hub_degree = _auto_hub_degree(edge, n_world, hubs, floaters) if edge is not None else 2
    hub_degree = check_int("design['hub_degree']", hub_degree, 0)
    hubs = max(hubs, hub_degree)
    step = check_int("design['step']", d.get("step", max(1, floaters // (2 * max(releases, 1)))), 1)
    if change == "leave" and floaters < step * (releases - 1):
        raise ValueError(f"design: change 'leave' removes {step} users per release: needs floaters >= "
                         f"{step * (releases - 1)}, got {floaters}")
    return _Design(dd, dom, alpha, beta, c, hub_degree, hubs, floaters, step)


def audit_pipeline(stages, *, change: str = "static", releases: int = 2, canaries: int = 1000,
                   keyed: bool = True, store=None, secret: bytes | None = None, seed: int | None = 0,
                   eps_sweep=None, confidence: float = 0.95, select_fraction: float = 0.5,
                   design: dict | None = None, dataset: str = "audit", progress: bool = False) -> dict[str, AuditReport]:
    """Audit a pipeline of local randomisers over ``releases`` releases (module docstring).

    Parameters
    ----------
    stages : list
        The mechanisms applied to each release, in order: each a name of :data:`MECHANISMS`
        (a transform such as ``"MultiBit"``, or a function such as ``"rr_edges"``), a
        transform class or mechanism function, ``(name, {"eps": 1.0, ...})`` or
        ``{"mechanism": name, "eps": 1.0, ...}``.  ``eps`` is the stage's budget argument
        (``eps_x`` for GRR-FS; default 1); the other keys go to the transform or function
        (e.g. ``m``, ``eps1``).  At most one feature, one label and one edge stage.
    change : str
        The change model, one of :data:`CHANGE_MODELS` (default ``"static"``).
    releases : int
        ``K``: releases run; a point per ``k = 1..K`` is reported.
    canaries : int
        Canary users per world (>= 8; rounded up to a multiple of 4 with an edge stage; LocalLap
        observes one trial per target edge, half as many).  About 10^3 give eps_lb within
        ~10-20% of a tight eps of 1; the bound's slack shrinks like ``1/sqrt(canaries)``.
    keyed : bool
        Reports keyed to users (the transforms' ``user_key``, the functions' ``user_keys``);
        False: the rows are the users of one graph.
    store : None, bool, str, os.PathLike or ReportStore
        ``True``: a temporary :class:`~ldpfast.privacy.ReportStore` (needs ``keyed`` and
        transforms); a new file path; a store (the canaries are written into it); ``False``: no
        store, the charge is the ledger's sum over releases.  ``None`` (default): a temporary
        store when ``keyed`` and every stage is a transform with a keyed path, else none.
    secret : bytes, optional
        The mechanisms' secret (>= 16 bytes); default derived from ``seed`` (or the OS if
        ``seed`` is None).  Never recorded.
    seed : int, optional
        Seeds the auditor's own choices (canary placement, the selection split) and, without
        ``secret``, the secret: one seed, one audit.
    eps_sweep : sequence of float, optional
        ``change="sweep"``: release ``t`` runs each stage at ``eps * eps_sweep[t]`` (default
        ``1, 1.5, 2, ...``).
    confidence : float
        Confidence of each point's bound, in (0.5, 1).
    select_fraction : float
        Share of the canaries that choose the test (the rest measure it), in (0, 1).
    design : dict, optional
        The canaries' inputs: ``d`` (feature columns, default 2; world 0 holds the domain's
        lowest value, world 1 its highest, in every column), ``domain`` (categorical domain
        size, default 2), ``num_classes`` (default 2, ``edit``: 3), ``hub_degree`` (edge
        canaries' fixed neighbours; default 2, for DPRR enough for ``q_i`` about 1/2),
        ``hubs``, ``floaters`` (background users, default ``max(16, canaries // 8)``), ``step``
        (users that join or leave per release).
    dataset : str
        The dataset name the stages use (the store's name for the canaries).
    progress : bool
        A progress bar over the releases.

    Returns
    -------
    dict
        ``{relation: AuditReport}`` for each relation the stages protect (``"node-ldp"`` for
        feature and label stages together, ``"edge-ldp"`` for the edge stage).

    Notes
    -----
    The bound is valid for any mechanism (a statistically valid lower bound, whatever the
    implementation does), provided each canary's reports are independent of the other
    canaries' given their inputs, as local DP makes them.  It refutes a charge; it never
    certifies one: ``eps_lb <= charge`` is what a correct implementation gives, and also what a
    broken one gives against a weak attack.
    """
    if change not in CHANGE_MODELS:
        raise ValueError(f"change: expected one of {sorted(CHANGE_MODELS)}, got {change!r}")
    if isinstance(stages, (str, dict)) or not hasattr(stages, "__iter__"):
        stages = [stages]
    st = [_stage(s) for s in stages]
    if not st:
        raise ValueError("stages: expected at least one mechanism")
    targets = [s.spec.target for s in st]
    if len(set(targets)) != len(targets):
        raise ValueError(f"stages: at most one feature, one label and one edge stage, got {[s.name for s in st]}")
    K = check_int("releases", releases, 1, 64)
    N = check_int("canaries", canaries, 8)
    check_real("confidence", confidence, 0.5, 1 - 1e-12)
    sf = check_real("select_fraction", select_fraction, 0.0, 1.0)
    if not 0 < sf < 1:
        raise ValueError(f"select_fraction: expected a number in (0, 1), got {select_fraction}")
    if not isinstance(keyed, bool):
        raise TypeError(f"keyed: expected a bool, got {type(keyed).__name__}")
    if change == "add_column" and not any(s.spec.target == "features" for s in st):
        raise ValueError("change: 'add_column' changes the feature schema; the stages have no feature mechanism")
    for s in st:
        if keyed and not s.spec.keyed:
            raise ValueError(f"keyed: {s.name} has no user-keyed path; audit it with keyed=False, store=False")
    if store is None:  # auto: a temporary store where every stage can use one
        store = keyed and all(s.api == "transform" and s.spec.keyed for s in st)
    if store is not False:
        if not keyed:
            raise ValueError("store: a report store accounts per user, so it needs keyed=True")
        fn = [s.name for s in st if s.api == "function"]
        if fn:
            raise ValueError(f"store: the functions {fn} take no store; audit the transforms, or pass store=False")
    if any(s.spec.target == "edges" for s in st):
        N = -(-N // 4) * 4
    if change == "sweep":
        mult = list(eps_sweep) if eps_sweep is not None else [1 + 0.5 * t for t in range(K)]
        if len(mult) < K or any(isinstance(m, bool) or not isinstance(m, Real) or not m > 0 for m in mult[:K]):
            raise ValueError(f"eps_sweep: expected {K} multipliers > 0 (one per release), got {eps_sweep!r}")
    elif eps_sweep is not None:
        raise ValueError("eps_sweep: only with change='sweep'")
    else:
        mult = [1.0] * K
    if seed is not None:
        seed = check_int("seed", seed, 0, 2**63 - 1)
    kinds = {s.spec.kind for s in st}
    if {"categorical", "continuous"} <= kinds:
        raise ValueError("stages: one feature mechanism per pipeline")
    dz = _design(st, change, N, K, design)
    rng = np.random.default_rng(seed)
    pop = _Population(rng, N, dz, change, K, kinds)
    seed_arg = _seed_arg(_secret_of(secret, seed))
    store_obj, tmp, opened = _open_store(store)
    try:
        return _run(st, pop, dz, K, N, mult, keyed, store_obj, seed_arg, dataset, change, rng, progress,
                    confidence=confidence, select_fraction=sf)
    finally:
        if opened:
            store_obj.close()
        if tmp is not None:
            tmp.cleanup()


def _run(st, pop: _Population, dz: _Design, K, N, mult, keyed, store, seed_arg, dataset, change, rng, progress, *,
         confidence, select_fraction) -> dict[str, AuditReport]:
    from torch_geometric.data import Data

    runner = _Runner(st, keyed, store, seed_arg, dataset)
    C = pop.C
    feat = next((s for s in st if s.spec.target == "features"), None)
    lab = next((s for s in st if s.spec.target == "labels"), None)
    edge = next((s for s in st if s.spec.target == "edges"), None)
    W = (pop.width(K - 1) if feat else 0) + (1 if lab else 0)
    O_node = np.full((C, K, max(W, 1)), -9, np.int64)
    S_node = np.zeros((C, K), np.int64)
    if edge is not None:
        obs_e = pop.quads[:, [0, 2]].reshape(-1) if edge.spec.transform == "LocalLap" else np.arange(C)
        O_edge = np.zeros((obs_e.shape[0], K, 1), np.int64)
    ledger: dict[str, float] = {}
    charges: dict[str, list[np.ndarray]] = {r: [] for r in {relation_of(s.spec.target) for s in st}}
    log = []
    steps = range(K)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="audit releases")
    cont = feat is not None and feat.spec.kind == "continuous"
    lo, hi = (dz.alpha, dz.beta) if cont else (0, dz.domain - 1)
    for t in steps:
        order = pop.orders[t]
        n = order.shape[0]
        row_of = np.full(pop.U, -1, np.int64)
        row_of[order] = np.arange(n)
        can_rows = row_of[:C]
        data = Data(num_nodes=n)
        if keyed:
            data.user_id = torch.from_numpy(pop.key[order].copy())
        if feat is not None:
            w = pop.width(t)
            X = np.zeros((pop.U, w), np.float64 if cont else np.int64)
            X[:, :dz.d] = pop.bg_x
            if cont:
                X[:, dz.d:] = dz.alpha
            X[:C] = pop.canary_x(t, lo, hi, X.dtype)
            data.x = torch.from_numpy(X[order].copy())
        if lab is not None:
            Y = pop.bg_y.copy()
            Y[:C] = pop.canary_y(t)
            data.y = torch.from_numpy(Y[order].copy())
        if edge is not None:
            data.edge_index = pop.edge_index(t, row_of)
        eps_of = {s.name: s.eps * mult[t] for s in st}
        x_out, y_out, csr, spent = runner.run(data, eps_of, pop)
        # observations
        col = 0
        if feat is not None:
            xo = (_decode_continuous(x_out, dz.alpha, dz.beta) if cont else x_out.cpu().numpy().astype(np.int64))
            xo = xo[can_rows]
            O_node[:, t, :xo.shape[1]] = xo
            col = pop.width(K - 1)
            dc = pop.diff_cols()
            if cont:
                S_node[:, t] += xo[:, dc].sum(1)
            else:
                S_node[:, t] += (xo[:, dc] == hi).sum(1) - (xo[:, dc] == lo).sum(1)
        if lab is not None:
            yo = y_out.cpu().numpy().astype(np.int64)[can_rows]
            O_node[:, t, col] = yo
            y0, y1 = pop.label_pair(t)
            if y0 != y1:
                S_node[:, t] += (yo == y1).astype(np.int64) - (yo == y0)
        if edge is not None:
            O_edge[:, t, 0] = _row_bits(csr, row_of[obs_e], row_of[pop.partner[obs_e]])
        # charges
        entry = {"release": t + 1, "users": int(n), "eps": {s.name: eps_of[s.name] for s in st}}
        for s, sp in zip(st, spent):
            rel = sp.relation
            ledger[rel] = ledger.get(rel, 0.0) + float(sp.eps)
            if "store" in sp.params:
                c = dict(sp.params["store"])
                c.pop("path", None)
                entry.setdefault("store", {})[s.name] = c
        log.append(entry)
        for rel, per_k in charges.items():
            per_k.append(_totals(store, rel, pop.key[:C]) if store is not None else np.full(C, ledger[rel]))
    # the attacks, per relation
    params = {s.name: {s.spec.eps_name: s.eps, **s.params} for s in st}
    common = {"change": change, "keyed": keyed, "store": store is not None, "confidence": confidence, "delta": 0.0,
              "charge_source": "store" if store is not None else "ledger", "releases_log": log}
    out: dict[str, AuditReport] = {}
    node = [s for s in st if s.spec.target != "edges"]
    if node:
        pts = _attack(O_node, S_node, pop.world.astype(np.int64), charges["node-ldp"], rng,
                      select_fraction=select_fraction, confidence=confidence, delta=0.0)
        out["node-ldp"] = AuditReport("+".join(s.name for s in node), "node-ldp", params={s.name: params[s.name] for s in node},
                                      canaries=N, points=pts, notes=_notes(change, "node-ldp"), **common)
    if edge is not None:
        ew = pop.world[obs_e].astype(np.int64)
        ch = [c[obs_e] for c in charges["edge-ldp"]]
        pts = _attack(O_edge, O_edge[:, :, 0], ew, ch, rng, select_fraction=select_fraction,
                      confidence=confidence, delta=0.0)
        out["edge-ldp"] = AuditReport(edge.name, "edge-ldp", params={edge.name: params[edge.name]},
                                      canaries=int((ew == 0).sum()), points=pts,
                                      notes=_notes(change, "edge-ldp", edge.name),
                                      **common)
    return out


def _notes(change: str, relation: str, mechanism: str = "") -> list[str]:
    notes = []
    if change == "edit":
        notes.append("edit: release 1 is the same in both worlds, so k = 1 has no power by design")
    if relation == "edge-ldp":
        notes.append("edge canaries: the observation is the canary's released bit toward its target user "
                     "(one bit of its own report)")
    if mechanism in ("DPRR", "dprr"):
        notes.append("DPRR: the attack sees RR bits sampled with q_i; it bounds eps2, not the degree's eps1")
    if mechanism in ("LocalLap", "local_laplace"):
        notes.append("LocalLap: the top-T selection couples users through T and the threshold, so its trials "
                     "are independent only approximately; one trial per target edge")
    return notes


def audit_mechanism(mechanism, eps: float = 1.0, *, params: dict | None = None, **kwargs) -> AuditReport:
    """Audit one mechanism: :func:`audit_pipeline` with one stage; returns its :class:`AuditReport`.

    Parameters
    ----------
    mechanism : str, transform class or function
        One of :data:`MECHANISMS` (e.g. ``"RREdges"``, ``"grr_fs"``).
    eps : float
        Its budget argument (``eps_x`` for GRR-FS).
    params : dict, optional
        Its other arguments (e.g. ``{"m": 1}``).
    **kwargs
        As :func:`audit_pipeline` (``change``, ``releases``, ``canaries``, ``keyed``, ``store``, ...).

    Examples
    --------
    >>> from ldpfast.privacy.audit import audit_mechanism
    >>> r = audit_mechanism("RRLabels", eps=1.0, change="permute", releases=3)   # doctest: +SKIP
    >>> print(r.summary())                                                      # doctest: +SKIP
    """
    stage = {"mechanism": mechanism, **(params or {}), "eps": eps}
    (rep,) = audit_pipeline([stage], **kwargs).values()
    return rep
