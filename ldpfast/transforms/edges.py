"""PyG transforms for edge LDP: :class:`DPRR`, :class:`RREdges`, :class:`LocalLap`.

Thin wrappers around :mod:`ldpfast.mechanisms.edges` (paper: Hidano & Murakami, DPRR).
The graph is read from ``data.csr`` (ldpfast's CSR-only graphs), else ``data.edge_index``,
else ``data.adj_t`` (what ``T.ToSparseTensor()`` stores: a torch sparse CSR/CSC/COO tensor or
a ``torch_sparse.SparseTensor``; its pattern is the graph, its values are not read).  Each
returns a *copy* of the input ``Data`` (the input is never modified) in which *every* form of
the graph it holds is the randomised graph, in the same format: ``edge_index``, ``csr`` and
``adj_t`` (same layout, index dtype and value dtype, unit values; for ``symmetrize="none"``
row ``i`` of ``adj_t`` is user ``i``'s noisy list, which is what ``edge_index``'s
``(j, i)`` entries say in PyG's convention).  Per-edge attributes of the true graph
(``edge_attr``, ``edge_weight`` and every other attribute PyG's ``Data.is_edge_attr`` finds
aligned with the edges) are dropped, with a warning naming them, and any other attribute
that would carry the true graph past the mechanism (another sparse adjacency or CSR, or a
tensor whose name mentions ``edge`` or ``adj`` but is not aligned with the edges, e.g.
``edge_label_index``) is refused before any work.  Features computed from the true graph before the transform (degrees, positional
encodings) cannot be recognised: randomise the edges first.  The cost is recorded: the returned object's
``ldp_ledger`` is the input's :class:`~ldpfast.privacy.budget.Ledger` (``Ledger.of``) plus one
:class:`~ldpfast.privacy.budget.Spent` entry.  The full mechanism output
(:class:`~ldpfast.mechanisms.edges.EdgeLDPResult`) of the last call is kept on the
transform as ``last_result``.  When the DPRR or RREdges sampler writes the output
``edge_index`` itself (``symmetrize="none"``), ``last_result.noisy.col`` is that
``edge_index``'s first row (int64, a view: the columns are written once).

Like the feature and label transforms (:class:`ldpfast.transforms.ReportOnce`), each keys its
randomness to the users: with ``user_key``, every bit ``(i, j)`` by the two users' keys (DPRR and
RREdges: a user keeps the bits of their report when others join, leave or are reordered; a
``store=`` accounts each release per user, withheld users reporting an empty list marked in
``edge_withheld``); without it, by the graph's identity and every parameter (one release:
re-applying it to the same graph returns the same noisy graph, and two graphs or two settings
never share degree noise or edge draws).

CUDA graphs (an ``edge_index`` or stored ``csr`` on the GPU) stay on the device: the input
seed comes from the keyed fingerprint computed by the CUDA kernel, and the CSR is built,
checked and expanded back to an ``edge_index`` by :mod:`ldpfast.mechanisms.edges` (its
``_graph_csr`` and ``EdgeLDPResult.edge_index``, CUDA kernels there), as the randomisers are.
Host syncs: the input checks (one each) and sizes before allocations.
"""
from __future__ import annotations

import copy
import math
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import torch

from .. import _backend
from .._backend import check_backend
from .._checks import check_eps, check_int, check_mask, check_prob
from ..graph import CSR, _is_sparse_tensor_like
from ..mechanisms import edges as _edges
from ..mechanisms.edges.degree_preserving import dprr_budget
from ..mechanisms.edges.server import _check_rule
from ..privacy.budget import Ledger
from ..privacy.report_once import IDENTITY_DEFAULT, whole_graph
from ..privacy.users import DEFAULT_DOMAIN
from .base import ReportOnce

__all__ = ["DPRR", "LocalLap", "NoisyGraphWarning", "RREdges", "expected_edges"]


class NoisyGraphWarning(UserWarning):
    """An edge transform's output is expected to hold more false edges than true edges kept
    (see :func:`expected_edges`), so a GNN on it learns mostly from noise."""


def _check_public_arg(public):
    """``public`` at construction: None, an attribute name, or a tensor (bool mask or node ids,
    checked against the graph in forward)."""
    if public is None or (isinstance(public, str) and public):
        return public
    if isinstance(public, torch.Tensor):
        return check_mask("public", public, None)
    raise TypeError(f"public: expected None, an attribute name, a bool mask or a tensor of node ids, "
                    f"got {type(public).__name__}")


def _public_of(data, public):
    """The public users as a bool mask of ``data``'s nodes (or None)."""
    name = "public"
    if isinstance(public, str):
        if not hasattr(data, public):
            raise ValueError(f"public: the Data object has no attribute {public!r}")
        name, public = f"data.{public}", getattr(data, public)
    if isinstance(public, torch.Tensor):
        return check_mask(name, public, data.num_nodes)
    return public  # None; anything else is refused by the mechanism


def _prepare(transform, data):
    """``(Keying, checked CSR)`` of ``data``.

    Without user keys the Keying needs the input's keyed fingerprint, but building and checking
    the CSR does not: on the CPU the hash runs on a second thread meanwhile (the fingerprint and
    CSR kernels release the GIL).  Neither reads what the other writes (the CSR cache goes to
    ``data.__dict__["_ldpfast_csr"]``, which the fingerprint skips).  On CUDA both run in turn
    on the caller's stream (``mechanisms.edges._graph_csr``'s CUDA kernels).
    """
    whole_graph(data, type(transform).__name__)  # refuse sub-graphs before any work
    _refuse_other_graphs(data, type(transform).__name__)
    n = data.num_nodes
    dev = _graph_tensors(data)[0].device if _graph_tensors(data) else torch.device("cpu")
    if _on_device(data):
        # CUDA: no second thread (torch's current stream is per thread, and the fingerprint
        # kernel must run on the caller's stream); the GPU overlaps the work anyway.
        keying = transform._keying(data, n, dev)
        return keying, _edges._graph_csr(data, transform.backend)
    with ThreadPoolExecutor(1) as pool:
        fut = pool.submit(transform._keying, data, n, dev)
        try:
            csr = _edges._graph_csr(data, transform.backend)
        finally:
            keying = fut.result()  # its errors (e.g. a missing identity attribute) come first, as before
    return keying, csr


def _run(transform, data, mechanism, *args, public=None, **kwargs):
    """Apply one edge mechanism: key it, account it (store: withheld users report an empty list,
    marked in ``data.edge_withheld``) and build the output Data.  ``public``: the public users
    (:func:`_public_of`, also among ``args`` where the mechanism takes them), left out of the
    store's accounting."""
    keying, csr = _prepare(transform, data)
    res = mechanism(csr, check_eps("eps", transform.eps), keying, *args, **kwargs)
    pub = public
    reported = None
    if pub is not None:
        pm = (pub.cpu().numpy() if isinstance(pub, torch.Tensor) else np.asarray(pub)).astype(bool)
        reported = ~pm if pm.size else None
    withheld, res.spent = transform._release(keying, res.spent, reported=reported)
    if withheld is not None and withheld.any():
        res.noisy = _empty_rows(res.noisy, torch.from_numpy(withheld))
        res.noisy_degrees = res.noisy.degrees()
        res._edge_index = None
    transform.last_result = res
    _warn_if_mostly_noise(type(transform).__name__, csr, res, reported)
    out = _apply(data, res, type(transform).__name__)
    if withheld is not None:
        out.edge_withheld = torch.from_numpy(withheld)
    return out


def _lap_tail(t: float, b: float) -> float:
    """P[L >= t] for the Laplace law of scale ``b``."""
    return 0.5 * math.exp(-t / b) if t >= 0 else 1.0 - 0.5 * math.exp(t / b)


def expected_edges(csr: CSR, res, reported=None) -> dict:
    """Expected composition of an edge mechanism's noisy lists: true edges kept and false
    edges added, and the budget above which true edges outnumber false ones on this graph.

    Computed from the input's graph and the mechanism's law (no pass over the output).
    DPRR: user ``i`` keeps each true edge with probability ``p q_i`` and adds each non-edge
    with ``(1 - p) q_i``, so false outnumber true edges while ``eps2 < ln(sum q_i (n-1-d_i) /
    sum q_i d_i)``; RR: the same with ``q_i = 1`` (``eps < ln(non-edges / edges)``); LocalLap:
    the ``T`` largest Laplace-noised upper entries, with the top-``T`` threshold of the
    continuous law (``eps2 < ln(non-edges / edges)`` with ``T`` = the number of edges).

    With the server rule ``symmetrize="and"`` (an edge iff both endpoints reported it) the
    counts are those of the server graph: a true edge survives with ``p^2 q_i q_j``, a false
    one with ``(1-p)^2 q_i q_j``, so the threshold halves to ``ln(non-edges / edges) / 2``
    (RR on Cora: 3.2 instead of 6.5).  With ``"or"`` both rates grow and the threshold rises
    (``ln(x^-1 - 1)``, ``x`` the root of ``(1 - x^2) = R (2x - x^2)``, ``R`` = non-edges /
    edges).  ``"lower"`` / ``"upper"`` decide every pair by one user's bit: the ratio of the
    lists.

    Returns
    -------
    dict
        ``true_kept``, ``false``, ``budget`` (the name of the budget the threshold is for:
        ``"eps"`` or ``"eps2"``), ``value`` (its value now) and ``threshold``.  Counts are
        entries of the noisy lists (directed) for DPRR and RR, of the server graph (both
        directions) under ``"and"`` / ``"or"``, undirected edges for LocalLap.  Public users
        (``reported``: bool array of the private ones) are left out of the lists' counts and
        count as reporting their true list under ``"and"`` / ``"or"``.
    """
    n, mech = csr.num_nodes, res.spent.mechanism
    prm = res.spent.params
    if mech == "locallap":
        e_u, b = csr.nnz / 2.0, 1.0 / prm["eps2_used"]
        n0, t = n * (n - 1) / 2.0 - e_u, float(prm["T"])
        lo, hi = -50.0 * b, 50.0 * b + 1.0  # top-T threshold tau: e_u P[L >= tau-1] + n0 P[L >= tau] = T
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if e_u * _lap_tail(mid - 1, b) + n0 * _lap_tail(mid, b) > t else (lo, mid)
        true = min(e_u * _lap_tail(lo - 1, b), t)
        return {"true_kept": true, "false": t - true, "budget": "eps2", "value": prm["eps2_used"],
                "threshold": math.log(n0 / e_u) if e_u and n0 else -math.inf}
    p, pm = prm["p"], prm["flip_prob"]
    # where the graph is (a CUDA graph: two sums read back, nothing copied to the host)
    d = csr.degrees().to(torch.float64)
    q = torch.ones_like(d) if res.q is None else torch.nan_to_num(res.q.to(torch.float64))  # on the graph's device
    if reported is not None:
        keep = torch.as_tensor(reported, dtype=torch.bool).to(d.device)
        q, d = q[keep], d[keep]
    edges, non = float((q * d).sum()), float((q * (n - 1 - d)).sum())
    budget = "eps2" if mech == "dprr" else "eps"
    out = {"true_kept": p * edges, "false": pm * non, "budget": budget, "value": prm[budget],
           "threshold": math.log(non / edges) if edges and non else -math.inf}
    rule = getattr(res, "symmetrize", "none")
    if rule in ("and", "or") and edges and non:
        out.update(_pair_rule_counts(csr, res, reported, p, pm, rule))
        r = non / edges
        out["threshold"] = 0.5 * math.log(r) if rule == "and" else _or_threshold(r)
    return out


def _pair_rule_counts(csr: CSR, res, reported, p: float, pm: float, rule: str) -> dict:
    """:func:`pair_rule_counts` of a mechanism's result: user ``i`` reports a true edge with
    ``a_i = p q_i`` and a non-edge with ``b_i = (1 - p) q_i`` (a public user: 1 and 0)."""
    n = csr.num_nodes
    q = torch.ones(n, dtype=torch.float64, device=csr.rowptr.device) if res.q is None else \
        torch.nan_to_num(res.q.to(torch.float64), nan=0.0)
    a, b = p * q, pm * q
    if reported is not None:
        pub = ~torch.as_tensor(reported, dtype=torch.bool).to(q.device)
        a, b = torch.where(pub, torch.ones_like(a), a), torch.where(pub, torch.zeros_like(b), b)
    return pair_rule_counts(csr, a, b, rule)


def pair_rule_counts(csr: CSR, a: torch.Tensor, b: torch.Tensor, rule: str) -> dict:
    """Expected directed entries of the server graph ``A~ AND A~^T`` (``rule="and"``) or
    ``A~ OR A~^T`` (``"or"``) when user ``i`` reports each true edge with probability ``a[i]``
    and each non-edge with ``b[i]``, independently of the other endpoint's report.

    ``csr``: the true undirected graph (both directions stored); ``a``, ``b``: float64
    ``(n,)``.  Returns ``{"true_kept", "false"}`` (both directions counted).  O(|E| + n).
    """
    n = csr.num_nodes
    d = csr.degrees().to(a.device)
    rows = torch.repeat_interleave(torch.arange(n, device=a.device), d)
    cols = csr.col.to(a.device).long()
    ai, aj, bi, bj = a[rows], a[cols], b[rows], b[cols]
    b_non = float(b.sum()) ** 2 - float((b * b).sum()) - float((bi * bj).sum())  # sum of b_i b_j over non-edges
    if rule == "and":
        return {"true_kept": float((ai * aj).sum()), "false": b_non}
    if rule != "or":
        raise ValueError(f"rule: expected 'and' or 'or', got {rule!r}")
    either = 2.0 * (n - 1) * float(b.sum()) - 2.0 * float((d.to(b.dtype) * b).sum())  # sum of b_i + b_j over non-edges
    return {"true_kept": float((ai + aj - ai * aj).sum()), "false": either - b_non}


def _or_threshold(r: float) -> float:
    """The budget at which RR with the "or" rule keeps as many true edges as it adds false ones,
    ``r`` = non-edges / edges: ``x = 1 - p`` solves ``1 - x^2 = r (2x - x^2)``."""
    if r <= 1.0:
        return -math.inf
    x = (r - math.sqrt(r * r - r + 1.0)) / (r - 1.0)
    return math.log((1.0 - x) / x)


def _warn_if_mostly_noise(name: str, csr: CSR, res, reported) -> None:
    if not csr.nnz:
        return  # nothing true to compare with
    e = expected_edges(csr, res, reported)
    if e["false"] <= e["true_kept"]:
        return
    warnings.warn(
        f"{name}: the noisy graph{_rule_words(res)} is mostly false edges: about {e['false']:.4g} false edges against "
        f"{e['true_kept']:.4g} true edges kept (expected values). For this graph's density "
        f"({csr.nnz / max(csr.num_nodes, 1):.3g} neighbours per node of {csr.num_nodes - 1} possible) true edges "
        f"outnumber false ones only for {e['budget']} > {e['threshold']:.3g} (now {e['budget']} = "
        f"{e['value']:.3g}). A GNN on this graph learns mostly from noise. (Silence with "
        f"warnings.filterwarnings('ignore', category=ldpfast.transforms.NoisyGraphWarning).)",
        NoisyGraphWarning, stacklevel=5)


def _rule_words(res) -> str:
    rule = getattr(res, "symmetrize", "none")
    return f" (server rule symmetrize={rule!r})" if rule in ("and", "or") else ""


def _empty_rows(g: CSR, rows: torch.Tensor) -> CSR:
    """``g`` with the lists of ``rows`` (bool mask) emptied."""
    keep = ~torch.repeat_interleave(rows.to(g.rowptr.device), g.degrees().to(g.rowptr.device))
    return _edges._masked_csr(g.rowptr, g.col, keep, g.num_nodes)


_GRAPH_KEYS = ("edge_index", "adj_t", "csr")  # the forms of the graph the output replaces


def _edge_keys(data) -> list[str]:
    """Attributes aligned with the input's edges (PyG's ``is_edge_attr``): dropped from the output."""
    keys = [k for k in ("edge_attr", "edge_weight") if k in data]
    is_edge = getattr(data, "is_edge_attr", None)
    if is_edge is not None:
        # (iterating a PyG Data yields (key, value) pairs; keys() gives the names)
        keys += [k for k in data.keys() if k not in _GRAPH_KEYS and k not in keys and is_edge(k)]  # noqa: SIM118
    return keys


def _refuse_other_graphs(data, name: str) -> None:
    """Refuse attributes the output would carry unchanged although they hold (part of) the true
    graph: another adjacency (sparse tensor, SparseTensor, CSR), or a value whose name mentions
    edges or an adjacency but that is not aligned with the edges (those are dropped)."""
    if not hasattr(data, "keys") or not callable(data.keys):
        return
    dropped = set(_edge_keys(data))
    for key in data.keys():  # noqa: SIM118 - a PyG Data iterates as (key, value) pairs
        if key in _GRAPH_KEYS or key in dropped or key == "ldp_ledger":
            continue
        v = data[key]
        sparse = isinstance(v, CSR) or _is_sparse_tensor_like(v) or (
            isinstance(v, torch.Tensor) and v.layout != torch.strided)
        if sparse or (v is not None and ("edge" in key.lower() or "adj" in key.lower())):
            what = "another adjacency" if sparse else "a value named after edges or an adjacency, not aligned with the edges"
            raise ValueError(
                f"data.{key}: {name} randomises the graph in data.edge_index / data.adj_t / data.csr, but "
                f"data.{key} holds {what} and would be passed on unchanged, revealing the true graph. "
                f"Remove it before the transform (del data.{key}), or build it from the randomised output.")


def _graph_tensors(data):
    csr = _edges._stored_csr(data)
    if csr is not None:
        rp, col = csr.rowptr, csr.col
        if isinstance(rp, torch.Tensor) and isinstance(col, torch.Tensor) and rp.device != col.device:
            raise ValueError(f"graph: data.csr.col is on {col.device} but data.csr.rowptr is on {rp.device}")
        return [rp, col]
    ei = getattr(data, "edge_index", None)
    if isinstance(ei, torch.Tensor):
        return [ei]
    adj = _edges._stored_adj_t(data)
    if adj is None:
        return []
    return [adj.csr()[1]] if _is_sparse_tensor_like(adj) else [adj]


def _on_device(data) -> bool:
    """Whether the graph of ``data`` is on a CUDA device (decided by ``_backend.device_of``,
    which the routing tests patch)."""
    ts = _graph_tensors(data)
    return bool(ts) and _backend.device_of(*ts) == "cuda"


def _wants_edge_index(data) -> bool:
    """Whether _apply sets the output's edge_index (so the sampler may write it directly)."""
    return "edge_index" in data or (_edges._stored_csr(data) is None and _edges._stored_adj_t(data) is None)


def _adj_t_like(like, g: CSR):
    """The graph ``g`` (rows: the nodes each node aggregates from) as an ``adj_t`` in the format of
    ``like``: same type and layout, index dtype and value dtype, unit values (none when a
    ``SparseTensor`` had none)."""
    n, dev = g.num_nodes, g.rowptr.device
    if _is_sparse_tensor_like(like):  # torch_sparse.SparseTensor: int64 indices
        v = like.storage.value()
        value = None if v is None else torch.ones(g.nnz, dtype=v.dtype, device=dev)
        return type(like)(rowptr=g.rowptr, col=g.col.to(torch.int64), value=value, sparse_sizes=(n, n),
                          is_sorted=True, trust_data=True)
    layout = like.layout
    idt = {torch.sparse_csr: lambda: like.crow_indices().dtype, torch.sparse_csc: lambda: like.ccol_indices().dtype,
           torch.sparse_coo: lambda: torch.int64}[layout]()
    ones = torch.ones(g.nnz, dtype=like.dtype, device=dev)
    if layout == torch.sparse_coo:
        row = torch.repeat_interleave(torch.arange(n, device=dev), g.degrees().to(dev))
        return torch.sparse_coo_tensor(torch.stack([row, g.col.to(torch.int64)]), ones, (n, n), is_coalesced=True)
    out = torch.sparse_csr_tensor(g.rowptr.to(idt), g.col.to(idt), ones, size=(n, n), check_invariants=False)
    return out if layout == torch.sparse_csr else out.to_sparse_csc()


def _apply(data, res, name: str):
    out = copy.copy(data)
    stored = _edges._stored_csr(data) is not None
    adj = _edges._stored_adj_t(data)
    drop = _edge_keys(data)  # before the graph changes (PyG counts the input's edges)
    if _wants_edge_index(data):
        out.edge_index = res.edge_index  # on a CUDA result: expanded on the device
    if stored:  # CSR-only graphs (ldpfast.datasets.orkut_like): keep them CSR-only
        g = res.graph()
        # rows = message sources, as ldpfast.graph.csr_of(edge_index) would build them
        csr = _edges.transpose(g, res.backend) if res.symmetrize == "none" else g
        out.csr = csr
        out.__dict__["csr"] = csr
    if adj is not None:  # target-major: row i = the nodes i aggregates from = res.graph() row i
        out.adj_t = _adj_t_like(adj, res.graph())
    dropped = [key for key in drop if key in out]
    for key in dropped:
        del out[key]
    if dropped:
        warnings.warn(
            f"{name}: dropped " + ", ".join(f"data.{k}" for k in dropped) + ": per-edge "
            "attributes of the true graph have no counterpart on the noisy graph's edges (and would reveal the "
            "true edges). Delete them before the transform to silence this.", UserWarning, stacklevel=5)
    out.__dict__.pop("_ldpfast_csr", None)
    out.ldp_ledger = Ledger(list(Ledger.of(data).entries)).add(res.spent)
    return out


#: The "Output (PyG terms)" section shared by the DPRR and RREdges docstrings.
_OUTPUT_DOC = """Output (PyG terms)
    ------------------
    With ``symmetrize="none"`` (default) the output graph is *directed*: ``edge_index`` holds
    ``(j, i)`` for every ``j`` in user ``i``'s noisy list, so with PyG's default
    ``flow="source_to_target"`` node ``i`` aggregates over its own list, and
    ``is_undirected()`` is in general False (do not apply ``T.ToUndirected`` unless you mean
    the ``"or"`` rule).  ``adj_t`` row ``i`` and ``csr`` follow the same convention.  With
    ``"or"``, ``"and"``, ``"lower"`` or ``"upper"`` the output is undirected (both directions
    listed).  Per-edge attributes (``edge_attr``, ``edge_weight``) are dropped, with a
    warning.  A :class:`NoisyGraphWarning` says when the output is expected to hold more false
    edges than true edges kept, and for which budget that stops (:func:`expected_edges`)."""


def _output_doc(cls):
    cls.__doc__ = cls.__doc__.replace("{output}", _OUTPUT_DOC)
    return cls


@_output_doc
class DPRR(ReportOnce):
    """Degree-Preserving Randomized Response on the edges (paper Algorithm 1).

    ``eps1 + eps2``-edge LDP per user (Proposition 2); see :func:`ldpfast.mechanisms.edges.dprr`
    for the parameters, the budget split (eq. 8 with ``eps2 = eps - eps1``) and the
    server-side rule (``symmetrize``; default ``"none"``: node ``i`` aggregates over its own
    noisy list, as in the authors' code).

    Parameters
    ----------
    public : tensor or str, optional
        Non-private users: a bool mask, a tensor of node ids, or the name of a ``Data``
        attribute holding either.
    n_max : int, optional
        Public bound on the number of users over every release (eq. 8).  With ``user_key`` it
        also fixes eq. (6)'s ``n``, so an unchanged user's list is unchanged as the graph grows.
    seed, user_key, dataset, store, identity
        Who the users are, the secret and the per-user ledger (see
        :class:`ldpfast.transforms.ReportOnce`).  With ``user_key`` each bit is addressed by the
        two users' keys (dense int keys: :mod:`ldpfast.mechanisms.edges._keyed`; CPU only).

    {output}
    """

    def __init__(self, eps: float, seed: int | None = None, eps1: float | None = None, public=None,
                 n_max: int | None = None, alpha: float = 0.9, symmetrize: str = _edges.DEFAULT_SYMMETRIZE,
                 backend: str | None = None, *, user_key: str | None = None, dataset: str = DEFAULT_DOMAIN,
                 store=None, identity: str = IDENTITY_DEFAULT):
        check_eps("eps", eps)
        if n_max is not None:
            check_int("n_max", n_max, lo=2)
        check_prob("alpha", alpha, open_low=True, open_high=True)
        if eps1 is not None or n_max is not None:  # the split is known now: eps1 < eps (eq. 8)
            dprr_budget(eps, 2 if n_max is None else n_max, alpha, eps1)
        _check_rule(symmetrize)
        self.eps, self.eps1, self.public = eps, eps1, _check_public_arg(public)
        self.n_max, self.alpha, self.symmetrize, self.backend = n_max, alpha, symmetrize, check_backend(backend)
        self.last_result = None
        self._init_report_once(seed, identity, user_key, dataset, store)

    def forward(self, data):
        pub = _public_of(data, self.public)
        return _run(self, data, _edges._dprr, self.eps1, pub, self.n_max, self.alpha, self.symmetrize, self.backend,
                    public=pub, edge_index=_wants_edge_index(data))

    def __repr__(self) -> str:
        return f"DPRR(eps={self.eps}, eps1={self.eps1}, symmetrize={self.symmetrize!r})"


@_output_doc
class RREdges(ReportOnce):
    """Warner's randomized response on every neighbour-list bit (paper section V-A), eps-edge LDP.

    Refuses graphs whose expected output exceeds ``max_output_edges`` (RR is dense);
    see :func:`ldpfast.mechanisms.edges.rr_edges`.  ``public`` as in :class:`DPRR`.

    {output}
    """

    def __init__(self, eps: float, seed: int | None = None, max_output_edges: int = 50_000_000, public=None,
                 symmetrize: str = _edges.DEFAULT_SYMMETRIZE, backend: str | None = None, *,
                 user_key: str | None = None, dataset: str = DEFAULT_DOMAIN, store=None,
                 identity: str = IDENTITY_DEFAULT):
        check_eps("eps", eps)
        check_int("max_output_edges", max_output_edges, lo=0)
        _check_rule(symmetrize)
        self.eps, self.max_output_edges, self.public = eps, max_output_edges, _check_public_arg(public)
        self.symmetrize, self.backend = symmetrize, check_backend(backend)
        self.last_result = None
        self._init_report_once(seed, identity, user_key, dataset, store)

    def forward(self, data):
        pub = _public_of(data, self.public)
        return _run(self, data, _edges._rr_edges, self.max_output_edges, pub, self.symmetrize, self.backend,
                    public=pub, edge_index=_wants_edge_index(data))

    def __repr__(self) -> str:
        return f"RREdges(eps={self.eps}, symmetrize={self.symmetrize!r})"


class LocalLap(ReportOnce):
    """LocalLap baseline (local-model LAPGRAPH, paper section V-A), eps-edge LDP.

    See :func:`ldpfast.mechanisms.edges.local_laplace`.

    Output (PyG terms)
    ------------------
    The output graph is undirected: ``edge_index`` lists both directions of every kept edge
    (``is_undirected()`` holds), as do ``adj_t`` and ``csr``.  Per-edge attributes are dropped
    with a warning, and a :class:`NoisyGraphWarning` says when the output is expected to hold
    more false edges than true ones (:func:`expected_edges`).
    """

    def __init__(self, eps: float, seed: int | None = None, backend: str | None = None, *,
                 dataset: str = DEFAULT_DOMAIN, identity: str = IDENTITY_DEFAULT):
        check_eps("eps", eps)
        self.eps, self.backend = eps, check_backend(backend)
        self.last_result = None
        self._init_report_once(seed, identity, None, dataset, None)  # no user-keyed path yet

    def forward(self, data):
        return _run(self, data, _edges._local_laplace, self.backend, edge_index=_wants_edge_index(data))

    def __repr__(self) -> str:
        return f"LocalLap(eps={self.eps})"
