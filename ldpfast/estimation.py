"""Server-side estimators for randomised data: frequency estimation (RGNN), the multi-bit
rectifier (LPGNN), their variances, and projection of estimates onto the simplex.

All functions are post-processing of LDP outputs: they cost no privacy.

Papers
------
* RGNN (Bhaila et al., SDM 2024): GRR-FS frequency estimator eq. (5), variance eq. (6) / (13), expected
  observed frequency eq. (8); GRR estimator ``pi~ = P^{-1} lambda'`` eq. (14) and the
  dispersion matrix ``(n-1)^{-1} P^{-1} (diag(lambda') - lambda' lambda'^T) P^{-T}``.
* LPGNN (Sajadmanesh & Gatica-Perez, CCS 2021): rectifier eq. (4) (:func:`multibit_rectify`), variance eq. (5).

Notes on the RGNN text
----------------------
* Eq. (9) (in the proof of Theorem 2) repeats eq. (5) with ``(p - q)^2`` in the second
  denominator; eq. (5), which follows from eq. (8), is the correct one and is implemented.
* The estimated observation probability used in the variance estimate (eq. 6) is written
  ``lambda~_j = (1/d)(pi~_j m gamma (p - q) + m (q gamma - 1) + d)``; plugging ``pi~_j``
  into eq. (8) gives ``lambda~_j = lambda'_j`` instead (the printed form lacks the
  ``1/gamma`` factor of eq. 8 and can exceed 1).  We use eq. (8), i.e. ``lambda~ = lambda'``.
* Eq. (7) writes ``q_2`` for ``q``.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ._checks import check_eps, check_int, check_mask, check_real, check_tensor
from .mechanisms.features import multibit_rectify, multibit_scale  # noqa: F401
from .privacy.ldp import grr_probs

__all__ = [
    "grr_estimate", "grr_expected_frequencies", "grr_fs_estimate", "grr_fs_expected_frequencies",
    "grr_fs_variance", "grr_variance", "multibit_rectify", "multibit_variance",
    "observed_frequencies", "project_simplex",
]


def _float(name, t):
    check_tensor(name, t)
    if not t.dtype.is_floating_point:
        t = t.to(torch.float64)
    return t


def observed_frequencies(x: torch.Tensor, domain: int, mask: torch.Tensor | None = None
                         ) -> torch.Tensor:
    """Observed proportions ``lambda'`` of every value of every column.

    Parameters
    ----------
    x : torch.Tensor
        ``(n, d)`` (or ``(n,)``) integer reports in ``[0, domain)``.
    domain : int
        Number of values ``gamma`` (columns with smaller domains simply get zeros above).
    mask : torch.Tensor, optional
        The rows to count (default all): an ``(n,)`` bool mask or a tensor of row ids.

    Returns
    -------
    torch.Tensor
        float64 ``(d, gamma)`` (or ``(gamma,)`` for 1-D ``x``): ``lambda'_{ij} = n_{ij} / n``.
    """
    check_tensor("x", x)
    if x.dtype.is_floating_point or x.dtype == torch.bool:
        raise TypeError(f"x: expected an integer tensor, got {x.dtype}")
    g = check_int("domain", domain, 1)
    one = x.dim() == 1
    x2 = x.reshape(-1, 1) if one else x
    if x2.dim() != 2:
        raise ValueError(f"x: expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")
    if mask is not None:
        x2 = x2[check_mask("mask", mask, x2.shape[0])]
    n, d = x2.shape
    if n and (int(x2.min()) < 0 or int(x2.max()) >= g):
        raise ValueError(f"x: values must lie in [0, domain) = [0, {g})")
    idx = x2.to(torch.int64) + torch.arange(d, device=x2.device).unsqueeze(0) * g
    counts = torch.bincount(idx.reshape(-1), minlength=d * g).reshape(d, g).to(torch.float64)
    lam = counts / max(n, 1)
    return lam[0] if one else lam


# --- GRR (RGNN eq. 14) ------------------------------------------------------------------------
def _grr_pq(eps, k):
    eps = check_eps("eps", eps)
    k = check_int("k", k, 2)
    return grr_probs(eps, k)


def grr_expected_frequencies(pi: torch.Tensor, eps: float, k: int) -> torch.Tensor:
    """``lambda = P pi``: the distribution of GRR reports for true distribution ``pi``
    (last dimension of size ``k``), ``P`` with ``p`` on the diagonal and ``q`` elsewhere."""
    pi = _float("pi", pi)
    p, q = _grr_pq(eps, k)
    _last_dim("pi", pi, k)
    return (p - q) * pi + q * pi.sum(-1, keepdim=True)


def grr_estimate(lam: torch.Tensor, eps: float, k: int) -> torch.Tensor:
    """Unbiased frequency estimate ``pi~ = P^{-1} lambda'`` (RGNN eq. 14).

    ``P^{-1} = (I - q 1 1^T) / (p - q)`` in closed form, so
    ``pi~ = (lambda' - q * sum(lambda')) / (p - q)``; this is the exact matrix inverse also
    for vectors that do not sum to 1 (e.g. the masked propagation of RGNN Algorithm 2,
    where unlabelled nodes carry zero vectors).

    Parameters
    ----------
    lam : torch.Tensor
        Observed proportions ``lambda'``, shape ``(..., k)``.
    eps : float
        The GRR budget.
    k : int
        Domain size (number of classes), >= 2.
    """
    lam = _float("lam", lam)
    p, q = _grr_pq(eps, k)
    _last_dim("lam", lam, k)
    return (lam - q * lam.sum(-1, keepdim=True)) / (p - q)


def grr_variance(lam: torch.Tensor, eps: float, k: int, n) -> torch.Tensor:
    """Estimated variance of :func:`grr_estimate`: the diagonal of the dispersion matrix
    ``(n - 1)^{-1} P^{-1} (diag(lambda') - lambda' lambda'^T) P^{-T}`` (RGNN section IV-B).

    Closed form with ``s = sum(lambda')``:
    ``(lambda'_j (1 - lambda'_j) - 2 q lambda'_j (1 - s) + q^2 s (1 - s)) / ((p - q)^2 (n - 1))``.
    ``n`` (number of reports, > 1) may be a tensor broadcastable to ``lam[..., 0]``.
    """
    lam = _float("lam", lam)
    p, q = _grr_pq(eps, k)
    _last_dim("lam", lam, k)
    nn = _counts("n", n, lam)
    s = lam.sum(-1, keepdim=True)
    num = lam * (1 - lam) - 2 * q * lam * (1 - s) + q * q * s * (1 - s)
    return num / ((p - q) ** 2 * (nn.unsqueeze(-1) - 1))


# --- GRR-FS (RGNN eqs. 5, 6, 8) ---------------------------------------------------------------
def _fs_args(eps_x, m, d, gamma):
    eps_x = check_eps("eps_x", eps_x)
    d = check_int("d", d, 1)
    m = check_int("m", m, 1, d)
    gamma = check_int("gamma", gamma, 2)
    p, q = grr_probs(eps_x, gamma)
    return eps_x, m, d, gamma, p, q


def grr_fs_expected_frequencies(pi: torch.Tensor, eps_x: float, m: int, d: int, gamma: int
                                ) -> torch.Tensor:
    """RGNN eq. (8): ``lambda_j = (m pi_j gamma (p - q) + m q gamma + d - m) / (d gamma)``,
    the probability that a GRR-FS report of a feature with domain size ``gamma`` equals
    ``j`` when the true proportions are ``pi`` (last dimension ``gamma``)."""
    pi = _float("pi", pi)
    _, m, d, gamma, p, q = _fs_args(eps_x, m, d, gamma)
    _last_dim("pi", pi, gamma)
    return (m * pi * gamma * (p - q) + m * q * gamma + d - m) / (d * gamma)


def grr_fs_estimate(lam: torch.Tensor, eps_x: float, m: int, d: int, gamma: int) -> torch.Tensor:
    """Unbiased GRR-FS frequency estimate, RGNN eq. (5) (Theorem 2):

    ``pi~_j = lambda'_j d / (m (p - q)) + (m - d - m gamma q) / (m gamma (p - q))``

    with ``p, q`` of GRR over ``gamma`` values at budget ``eps_x``.  ``lam`` holds observed
    proportions of one feature (or of a neighbourhood, RGNN Algorithm 1), shape
    ``(..., gamma)``.  Unbiased because every feature is sampled with probability ``m / d``
    (the marginal of sampling ``m`` of ``d`` without replacement).
    """
    lam = _float("lam", lam)
    _, m, d, gamma, p, q = _fs_args(eps_x, m, d, gamma)
    _last_dim("lam", lam, gamma)
    return lam * d / (m * (p - q)) + (m - d - m * gamma * q) / (m * gamma * (p - q))


def grr_fs_variance(lam: torch.Tensor, eps_x: float, m: int, d: int, gamma: int, n
                    ) -> torch.Tensor:
    """Estimated variance of :func:`grr_fs_estimate`, RGNN eq. (6) / (13):

    ``var^(pi~_j) = d^2 lambda~_j (1 - lambda~_j) / (m^2 (n - 1) (p - q)^2)``

    with ``lambda~ = lambda'`` (eq. 8 evaluated at ``pi~``; see the module notes on the
    printed ``lambda~``).  Its expectation is the variance (11) of Theorem 2, which assumes
    ``n_j ~ Binomial(n, lambda_j)``; for a fixed population it is an upper bound (the
    Poisson-binomial variance is at most the binomial one).
    """
    lam = _float("lam", lam)
    _, m, d, gamma, p, q = _fs_args(eps_x, m, d, gamma)
    _last_dim("lam", lam, gamma)
    nn = _counts("n", n, lam)
    return d * d * lam * (1 - lam) / (m * m * (nn.unsqueeze(-1) - 1) * (p - q) ** 2)


# --- LPGNN multi-bit (eq. 5) ------------------------------------------------------------------
def multibit_variance(x, eps: float, m: int, d: int, alpha: float = 0.0, beta: float = 1.0):
    """Variance of the rectified multi-bit output at one dimension, LPGNN eq. (5):

    ``Var[x'] = (d / m) ((beta - alpha)/2 * (e^{eps/m} + 1)/(e^{eps/m} - 1))^2 - (x - (alpha + beta)/2)^2``.

    ``x`` (true values) may be a float or a tensor.
    """
    eps = check_eps("eps", eps)
    d = check_int("d", d, 1)
    m = check_int("m", m, 1, d)
    alpha = check_real("alpha", alpha)
    beta = check_real("beta", beta)
    r = eps / m
    a = (beta - alpha) / 2.0 * (math.exp(r) + 1.0) / math.expm1(r)
    return (d / m) * a * a - (x - (alpha + beta) / 2.0) ** 2


# --- simplex projection -----------------------------------------------------------------------
def project_simplex(v: torch.Tensor, method: str = "clip", floor: float = 1e-5) -> torch.Tensor:
    """Map frequency estimates (last dimension) to probability vectors.

    Frequency estimates can be negative or sum to more than one.  RGNN's text does not
    specify the projection; its authors' code (``train.py`` / ``model.py``,
    github.com/karuna-bhaila/RGNN) sets negative entries to ``1e-5`` and renormalises
    each vector to sum 1: that is ``method="clip"`` (default, ``floor=1e-5``).
    ``method="euclidean"`` is the exact Euclidean projection onto the probability simplex
    (Duchi et al., ICML 2008).

    Parameters
    ----------
    v : torch.Tensor
        ``(..., k)`` estimates.
    method : {"clip", "euclidean"}
    floor : float
        Value given to negative entries by ``"clip"`` (>= 0).
    """
    v = _float("v", v)
    if v.dim() < 1 or v.shape[-1] < 1:
        raise ValueError(f"v: expected shape (..., k) with k >= 1, got {tuple(v.shape)}")
    if bool(torch.isnan(v).any()):
        raise ValueError("v: contains NaN")
    if method == "clip":
        floor = check_real("floor", floor, 0.0)
        w = torch.where(v < 0, torch.full_like(v, floor), v)
        s = w.sum(-1, keepdim=True)
        uniform = torch.full_like(w, 1.0 / w.shape[-1])
        return torch.where(s > 0, w / torch.where(s > 0, s, torch.ones_like(s)), uniform)
    if method == "euclidean":
        k = v.shape[-1]
        u, _ = torch.sort(v, dim=-1, descending=True)
        css = u.cumsum(-1) - 1.0
        ind = torch.arange(1, k + 1, dtype=v.dtype, device=v.device)
        cond = u - css / ind > 0
        rho = cond.to(torch.int64).cumsum(-1).argmax(-1, keepdim=True)  # last True
        theta = css.gather(-1, rho) / (rho + 1).to(v.dtype)
        return torch.clamp(v - theta, min=0.0)
    raise ValueError(f"method: expected 'clip' or 'euclidean', got {method!r}")


# --- helpers ----------------------------------------------------------------------------------
def _last_dim(name, t, k):
    if t.dim() < 1 or t.shape[-1] != k:
        raise ValueError(f"{name}: expected last dimension {k}, got shape {tuple(t.shape)}")


def _counts(name, n, like):
    nn = torch.as_tensor(n, dtype=like.dtype, device=like.device) if not isinstance(n, np.ndarray) \
        else torch.from_numpy(n).to(like.dtype)
    if bool((nn <= 1).any()) or bool(torch.isnan(nn).any()):
        raise ValueError(f"{name}: expected number(s) of reports > 1")
    return nn
