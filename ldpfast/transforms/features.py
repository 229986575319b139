"""Feature transforms: the local randomisers on ``data.x`` and feature preprocessing.

* :class:`GRRFS` (RGNN section IV-A), :class:`MultiBit` and :class:`OneBit` (LPGNN
  Algorithm 1, rectified by eq. 4): randomise ``data.x``, one report per node, and record
  the budget in ``data.ldp_ledger`` (:class:`~ldpfast.transforms.base.ReportOnce`).
* :class:`GroupBinaryFeatures`, :class:`Discretize` (and the functions behind them):
  preprocessing, no privacy cost as long as their parameters are public.
"""
from __future__ import annotations

import math
from numbers import Integral

import torch
from torch_geometric.transforms import BaseTransform

from .. import ops
from .._backend import check_backend
from .._checks import check_eps, check_int, check_real, check_tensor
from ..graph import csr_of
from ..mechanisms.features import grr_fs, multibit_encode, multibit_rectify, onebit
from ..privacy.report_once import IDENTITY_DEFAULT
from ..privacy.users import DEFAULT_DOMAIN
from .base import ReportOnce, _record

__all__ = ["GRRFS", "RGNN_GROUP_SIZES", "Discretize", "GroupBinaryFeatures", "KPropFeatures", "MultiBit",
           "OneBit", "discretize", "group_binary_features", "quantile_boundaries"]

#: Binary features grouped into one categorical feature by RGNN (section V-A1).
RGNN_GROUP_SIZES = {"citeseer": 70, "cora": 25, "dblp": 50, "facebook": 100}


def _withhold(data, out, withheld, name: str):
    """Zero the rows of users a store's budget withheld (their reports are not released) and
    mark them in ``data.<name>_withheld``; no-op without a store."""
    if withheld is None:
        return out
    mask = torch.from_numpy(withheld).to(out.device)
    setattr(data, f"{name}_withheld", mask)
    if bool(withheld.any()):
        out = out.clone()
        out[mask] = 0
    return out


def _features(data):
    x = getattr(data, "x", None)
    if x is None:
        raise ValueError("data.x: the transform needs node features")
    return x


class GRRFS(ReportOnce):
    """GRR with feature sampling on ``data.x`` (RGNN section IV-A, eq. 4).

    Float features holding integers (PyG stores 0/1 as float32) are accepted; the output
    keeps the input dtype.  Users withheld by a store's budget report all zeros, marked in
    ``data.x_withheld``.  Privacy: ``m * eps_x``-LDP per node (exact).

    Parameters
    ----------
    eps_x : float
        Budget of each sampled feature's GRR report.
    m : int
        Features sampled per node (``1 <= m <= d``).
    domain : int or 1-D tensor
        Public domain size(s) of the features (default 2: binary, as after
        :class:`GroupBinaryFeatures`).
    seed, user_key, dataset, store, identity
        Who the users are, the secret and the per-user ledger (see :class:`ReportOnce`).
    accounting : {"exact", "rgnn_theorem1"}
        What the ledger records (default the exact guarantee ``m * eps_x``; see
        :func:`ldpfast.mechanisms.grr_fs`).
    backend : {"cpp", "numba", "cuda"}, optional
        Kernel backend (default: the input's device decides: CUDA kernels for CUDA tensors,
        else C++ if built, else Numba).
    """

    def __init__(self, eps_x: float, m: int, domain=2, seed: int | None = None,
                 accounting: str = "exact", backend: str | None = None, *,
                 user_key: str | None = None, dataset: str = DEFAULT_DOMAIN, store=None,
                 identity: str = IDENTITY_DEFAULT):
        from ..mechanisms.features import ACCOUNTING, MAX_DOMAIN, _as_domain

        if accounting not in ACCOUNTING:
            raise ValueError(f"accounting: expected one of {ACCOUNTING}, got {accounting!r}")
        check_eps("eps_x", eps_x)
        check_int("m", m, 1)
        if isinstance(domain, Integral) and not isinstance(domain, bool):
            check_int("domain", domain, 1, MAX_DOMAIN)
        else:  # one size per column: their count is d, checked against data.x in forward
            if isinstance(domain, torch.Tensor) and domain.dim() != 1:
                raise ValueError(f"domain: expected an int or a 1-D tensor of per-column sizes, got shape "
                                 f"{tuple(domain.shape)}")
            d = len(domain) if hasattr(domain, "__len__") else 1
            _as_domain("domain", domain, d)
            if m > d:
                raise ValueError(f"m: samples m of the d = {d} columns that domain lists; expected m in [1, {d}], "
                                 f"got {m}")
        if accounting != "exact" and store is not None:
            # a store's charges must bound what an observer learns (issue 37, finding 3): Theorem 1's
            # figure does not (the exact cost is m * eps_x)
            raise ValueError(f"accounting: {accounting!r} charges RGNN Theorem 1's figure, which is not an LDP bound "
                             "(the exact cost is m * eps_x); a report store charges only valid bounds, so use "
                             "accounting='exact' with store=")
        self.eps_x, self.m, self.domain = eps_x, m, domain
        self.accounting, self.backend = accounting, check_backend(backend)
        self._init_report_once(seed, identity, user_key, dataset, store)

    def forward(self, data):
        x = _features(data)
        check_tensor("data.x", x, dims=2)
        xi = x
        if x.dtype.is_floating_point:
            # one check, one host sync (NaN != round(NaN), so NaN fails it too)
            if bool((x != torch.round(x)).any()):
                raise ValueError("data.x: GRR-FS needs categorical features; float features "
                                 "must hold integers (discretise them first, see Discretize)")
            xi = x.to(torch.int64)
        keying = self._keying(data, x.shape[0], x.device)
        out, spent = grr_fs(xi, self.domain, self.eps_x, self.m, accounting=self.accounting,
                            backend=self.backend, _keying=keying)
        withheld, spent = self._release(keying, spent)
        data.x = _withhold(data, out, withheld, "x").to(x.dtype)
        _record(data, spent)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(eps_x={self.eps_x}, m={self.m}, domain={self.domain})"


class MultiBit(ReportOnce):
    """LPGNN multi-bit encoder on ``data.x`` (Algorithm 1), rectified by eq. (4).

    Users withheld by a store's budget report no dimension (encoding all 0, so the rectified
    features are ``(alpha + beta) / 2``), marked in ``data.x_withheld``.
    Privacy: ``eps``-LDP per node (Theorem 3.1).

    Parameters
    ----------
    eps : float
        Per-node feature budget ``eps_x``.
    m : int, optional
        Sampled dimensions (default ``m*`` of eq. 6).
    alpha, beta : float
        Public feature range (features must lie in it; LPGNN normalises them to [0, 1]).
    rectify : bool
        True (default): ``data.x`` becomes the unbiased float estimate ``x'`` (eq. 4), what
        the LPGNN server trains on; False: the int8 encoding ``x*`` in {-1, 0, 1}.
    seed, user_key, dataset, store, identity
        Who the users are, the secret and the per-user ledger (see :class:`ReportOnce`).
    backend : {"cpp", "numba", "cuda"}, optional
        Kernel backend (default: the input's device decides: CUDA kernels for CUDA tensors,
        else C++ if built, else Numba).
    """

    _one_bit = False

    def __init__(self, eps: float, m: int | None = None, alpha: float = 0.0, beta: float = 1.0,
                 rectify: bool = True, seed: int | None = None, backend: str | None = None, *,
                 user_key: str | None = None, dataset: str = DEFAULT_DOMAIN, store=None,
                 identity: str = IDENTITY_DEFAULT):
        from ..mechanisms.features import _check_range_width

        check_eps("eps", eps)
        if m is not None:
            check_int("m", m, 1)
        _check_range_width(check_real("alpha", alpha), check_real("beta", beta))
        if not isinstance(rectify, bool):
            raise TypeError(f"rectify: expected a bool, got {type(rectify).__name__}")
        self.eps, self.m, self.alpha, self.beta = eps, m, alpha, beta
        self.rectify, self.backend = rectify, check_backend(backend)
        self._init_report_once(seed, identity, user_key, dataset, store)

    def forward(self, data):
        x = _features(data)
        keying = self._keying(data, x.shape[0], x.device)
        if self._one_bit:
            out, spent = onebit(x, self.eps, self.alpha, self.beta, backend=self.backend, _keying=keying)
        else:
            out, spent = multibit_encode(x, self.eps, self.m, self.alpha, self.beta, backend=self.backend,
                                         _keying=keying)
        withheld, spent = self._release(keying, spent)
        out = _withhold(data, out, withheld, "x")
        if self.rectify:
            out = multibit_rectify(out, self.eps, spent.params["m"], self.alpha, self.beta,
                                   dtype=x.dtype)
        data.x = out
        _record(data, spent)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(eps={self.eps}, m={self.m}, alpha={self.alpha}, beta={self.beta})"


class OneBit(MultiBit):
    """1-bit mechanism on every dimension of ``data.x`` with budget ``eps / d`` each
    (LPGNN's 1B baseline: Algorithm 1 with ``m = d``); rectified by eq. (4) with ``m = d``
    unless ``rectify=False``.  Privacy: ``eps``-LDP per node."""

    _one_bit = True

    def __init__(self, eps: float, alpha: float = 0.0, beta: float = 1.0, rectify: bool = True,
                 seed: int | None = None, backend: str | None = None, *,
                 user_key: str | None = None, dataset: str = DEFAULT_DOMAIN, store=None,
                 identity: str = IDENTITY_DEFAULT):
        super().__init__(eps, None, alpha, beta, rectify, seed, backend, user_key=user_key, dataset=dataset,
                         store=store, identity=identity)


# --- discretisation ---------------------------------------------------------------------------
def group_binary_features(x: torch.Tensor, group_size: int) -> torch.Tensor:
    """RGNN's grouping of sparse binary features (section V-A1, Table I).

    Consecutive blocks of ``group_size`` columns (the last block may be shorter) become one
    binary feature that is 1 iff any feature of the block is non-zero, so
    ``d' = ceil(d / group_size)`` (Citeseer 3703/70 -> 53, Cora 1433/25 -> 58,
    DBLP 1639/50 -> 33, Facebook 4714/100 -> 48, as in Table I).  The paper says only that
    a fixed number of features is combined "into one representative feature"; the rule
    (block sum, then ``> 0``) is the authors' ``preprocess_features`` in ``data.py``.  It
    needs only the public ``group_size`` and runs on each user's own vector, so it costs no
    privacy.

    Returns a float tensor of 0/1 with the dtype of ``x`` (float32 for integer input).
    """
    check_tensor("x", x, dims=2)
    g = check_int("group_size", group_size, 1)
    if x.is_floating_point() and bool(torch.isnan(x).any()):
        raise ValueError("x: contains NaN")
    n, d = x.shape
    dp = math.ceil(d / g) if d else 0
    pad = dp * g - d
    nz = (x != 0)
    if pad:
        nz = torch.cat([nz, torch.zeros(n, pad, dtype=torch.bool, device=x.device)], dim=1)
    out = nz.reshape(n, dp, g).any(dim=2)
    return out.to(x.dtype if x.is_floating_point() else torch.float32)


def quantile_boundaries(x: torch.Tensor, bins: int) -> torch.Tensor:
    """Per-column cut points at the ``1/bins, ..., (bins-1)/bins`` quantiles of ``x``.

    RGNN discretises numerical attributes "based on the quantile distribution of their
    values" (section V-A1).  Quantiles computed on the private data are themselves not
    private: use this on public or previously released data, or pass public boundaries to
    :func:`discretize`.  Returns ``(bins - 1, d)``.
    """
    check_tensor("x", x, dims=2, dtypes=(torch.float32, torch.float64))
    b = check_int("bins", bins, 2)
    if bool(torch.isnan(x).any()):
        raise ValueError("x: contains NaN")
    q = torch.arange(1, b, dtype=x.dtype, device=x.device) / b
    return torch.quantile(x, q, dim=0)


def _check_boundaries(boundaries) -> torch.Tensor:
    """Cut points: a float (B,) or (B, d) tensor, no NaN, sorted ascending in every column."""
    check_tensor("boundaries", boundaries, dtypes=(torch.float32, torch.float64))
    if boundaries.dim() not in (1, 2):
        raise ValueError(f"boundaries: expected shape (B,) or (B, d), got {tuple(boundaries.shape)}")
    if bool(torch.isnan(boundaries).any()):
        raise ValueError("boundaries: contains NaN")
    if boundaries.shape[0] > 1 and not bool((boundaries[1:] >= boundaries[:-1]).all()):
        raise ValueError("boundaries: must be sorted ascending in every column")
    return boundaries


def discretize(x: torch.Tensor, boundaries: torch.Tensor) -> torch.Tensor:
    """Map continuous features to categories: ``out[i, j] = #{b : boundaries[b, j] < x[i, j]}``
    (right-closed bins), an int64 matrix with values in ``[0, len(boundaries)]``, i.e. a
    domain of size ``boundaries.shape[0] + 1`` for :func:`ldpfast.mechanisms.grr_fs`.

    ``boundaries``: ``(B, d)`` sorted per column, or ``(B,)`` shared by all columns.
    """
    check_tensor("x", x, dims=2, dtypes=(torch.float32, torch.float64))
    _check_boundaries(boundaries)
    if bool(torch.isnan(x).any()):
        raise ValueError("x: contains NaN")
    bd = boundaries.to(x.dtype)
    if bd.dim() == 1:
        bd = bd.unsqueeze(1).expand(-1, x.shape[1])
    if bd.shape[1] != x.shape[1]:
        raise ValueError(f"boundaries: expected shape (B,) or (B, {x.shape[1]}), got "
                         f"{tuple(boundaries.shape)}")
    xt = x.t().contiguous()
    return torch.searchsorted(bd.t().contiguous(), xt, right=False).t().contiguous()


class GroupBinaryFeatures(BaseTransform):
    """Replace ``data.x`` by :func:`group_binary_features` (RGNN preprocessing); use
    ``RGNN_GROUP_SIZES[name]`` for the paper's datasets."""

    def __init__(self, group_size: int):
        self.group_size = check_int("group_size", group_size, 1)

    def forward(self, data):
        data.x = group_binary_features(_features(data), self.group_size)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.group_size})"


class Discretize(BaseTransform):
    """Replace ``data.x`` by :func:`discretize` with public ``boundaries``; the domain size
    for :class:`GRRFS` is ``boundaries.shape[0] + 1`` (stored as ``data.x_domain``)."""

    def __init__(self, boundaries: torch.Tensor):
        self.boundaries = _check_boundaries(boundaries)

    def forward(self, data):
        data.x = discretize(_features(data), self.boundaries)
        data.x_domain = int(self.boundaries.shape[0]) + 1
        return data


class KPropFeatures(BaseTransform):
    """Replace ``data.x`` by ``KProp(data.x)``, propagated once (LPGNN's feature denoising,
    Algorithm 2, precomputed as SGC does).

    Use it after the feature randomiser in a dataset's ``pre_transform``: the propagated
    features are stored with the dataset and the model needs no KProp layer.  Inside a model,
    ``ldpfast.nn.KProp(cache_result=True)`` does the same once per process (see
    :class:`ldpfast.nn.KProp`, "Which cache when").  Server-side post-processing of the
    reports: no privacy cost.

    The graph is ``data.edge_index`` (with ``data.edge_weight`` if set), else ``data.adj_t``,
    else ``data.csr``; float features keep their dtype, others become float32.

    Parameters
    ----------
    k : int
        Steps ``K_x >= 0``.
    aggr : {"gcn", "mean", "add", "sum"}
        As :class:`ldpfast.nn.KProp` (default ``"gcn"``, LPGNN's choice).
    add_self_loops : bool
        Default False (section 3.2).
    """

    def __init__(self, k: int, aggr: str = "gcn", add_self_loops: bool = False):
        self.k = check_int("k", k, 0, 1024)
        self.aggr = ops.check_aggr(aggr)
        if not isinstance(add_self_loops, bool):
            raise TypeError(f"add_self_loops: expected a bool, got {type(add_self_loops).__name__}")
        self.add_self_loops = add_self_loops

    def forward(self, data):
        x = _features(data)
        x = x if x.dtype in (torch.float32, torch.float64) else x.to(torch.float32)
        ei, w = getattr(data, "edge_index", None), None
        if ei is not None:
            adj, w = ei, getattr(data, "edge_weight", None)
        elif "adj_t" in data:
            adj = data.adj_t
        else:
            adj = csr_of(data)
        with torch.no_grad():
            data.x = ops.propagate(adj, x, self.k, self.aggr, self.add_self_loops, edge_weight=w)
        return data

    def __repr__(self) -> str:
        return f"{type(self).__name__}(k={self.k}, aggr={self.aggr!r})"


# --- edge-LDP transforms live with their kernels (DESIGN: ``lf.transforms.DPRR(...)``) ---------
