"""Node-feature randomisers: GRR, GRR-FS (RGNN) and the 1-bit / multi-bit encoders (LPGNN).

Every randomiser runs on a whole ``n x d`` matrix in one compiled kernel (bodies in
``csrc/common/features.h``, run by the C++ launchers ``csrc/cpu/features.cpp`` and the CUDA
launchers ``csrc/cuda/features.cu``; Numba twin ``ldpfast/_numba/features.py``; bit-identical
for one seed and independent of the thread count and backend), validates its input completely
(C++ and CUDA: in the kernel's own pass, the output dropped on error; Numba: before the kernel),
never writes its input, and returns ``(output, Spent)``: the privacy guarantee per node (per
user) and the parameters used (never the seed: it would undo the noise).

One pass over the input on C++ and CUDA alike: one kernel per call digests each row (block of
rows), derives its seed, checks and randomises it (the row re-read from cache), whether or not the
call gives user keys.  CUDA tensors stay on their device, the output is allocated there and the
host reads back one index (the error decision).

Papers
------
* RGNN: K. Bhaila, W. Huang, Y. Wu, X. Wu, "Local differential privacy in graph neural
  networks: a reconstruction approach", SDM 2024, section IV-A, eq. (4), Theorem 1.
* LPGNN: S. Sajadmanesh, D. Gatica-Perez, "Locally private graph neural networks", ACM CCS
  2021, section 3.1, Algorithm 1, eqs. (4)-(6), Theorem 3.1.

Implemented probabilities are ``T / 2^32`` for integer thresholds chosen so that the code's
own likelihood ratio is at most ``e^eps`` (see :mod:`ldpfast.privacy.ldp`).
"""
from __future__ import annotations

import math
from functools import partial
from numbers import Integral

import numpy as np
import torch

from .. import _backend
from .._checks import check_eps, check_int, check_real, check_tensor
from ..privacy.budget import Spent
from ..privacy.ldp import (
    grr_fs_epsilon,
    grr_fs_epsilon_exact,
    grr_threshold,
    onebit_threshold,
    optimal_m,
)
from ..privacy.users import DEFAULT_DOMAIN, keying_of

__all__ = ["grr", "grr_fs", "multibit_encode", "multibit_rectify", "onebit", "optimal_m"]

ACCOUNTING = ("exact", "rgnn_theorem1")

# --- shared plumbing (also used by labels.py) -------------------------------------------------
INT_DTYPES = (torch.int32, torch.int64)
FLOAT_DTYPES = (torch.float32, torch.float64)
MAX_DOMAIN = 1 << 31


def _device_of(**tensors: torch.Tensor | None) -> str:
    """'cpu' or 'cuda' for a call's tensors (``None`` ones skipped); tensors on different
    devices are an error that names them."""
    items = [(name, t) for name, t in tensors.items() if t is not None]
    name0, t0 = items[0]
    for name, t in items[1:]:
        if t.device != t0.device:
            raise ValueError(f"{name} is on {t.device} but {name0} is on {t0.device}: move both "
                             "to one device")
    return _backend.device_of(t0)


def _kernels(device: str, backend: str | None):
    """Kernel module and backend name for a call on ``device``: C++ (else Numba) for CPU
    tensors, ``ldpfast._cuda`` for CUDA tensors.  An explicit ``backend`` that cannot serve the
    device, or is unavailable here, raises :class:`ldpfast._backend.BackendUnavailable` with
    the reason."""
    name = _backend.resolve(device, backend)
    return _backend.get(device, name), name


# Backends whose mechanism kernels check the input and derive each row's seed in their own pass
# over x (one read of x; the input check's first bad index is returned, the output dropped).
_FUSED = ("cpp", "cuda")


def _array_view(device: str):
    """How tensors cross into the kernels: zero-copy NumPy views for the CPU backends, the
    tensors themselves (by pointer) for CUDA."""
    return (lambda t: t) if device == "cuda" else (lambda t: t.numpy())


def _as_domain(name: str, k, d: int) -> np.ndarray:
    """Domain sizes: an int (all columns) or one int per column, each in [1, 2^31]."""
    if isinstance(k, bool):
        raise TypeError(f"{name}: expected an int or a 1-D integer tensor of {d} domain sizes, got bool")
    if isinstance(k, (Integral, np.integer)):
        arr = np.full(d, int(k), dtype=np.int64)
    else:
        if isinstance(k, torch.Tensor):
            if k.dtype.is_floating_point or k.dtype == torch.bool or k.is_complex():
                raise TypeError(f"{name}: expected an integer tensor, got {k.dtype}")
            arr = k.detach().cpu().numpy()
        else:
            try:
                arr = np.asarray(k)
            except Exception as exc:
                raise TypeError(f"{name}: expected an int or a sequence of ints") from exc
            if arr.dtype.kind not in "iu":
                raise TypeError(f"{name}: expected integers, got dtype {arr.dtype}")
        if arr.ndim != 1 or arr.shape[0] != d:
            raise ValueError(f"{name}: expected an int or {d} domain sizes (one per column), "
                             f"got shape {tuple(arr.shape)}")
        arr = np.ascontiguousarray(arr, dtype=np.int64)
    if arr.size and (int(arr.min()) < 1 or int(arr.max()) > MAX_DOMAIN):
        raise ValueError(f"{name}: domain sizes must lie in [1, 2**31], got range "
                         f"[{int(arr.min())}, {int(arr.max())}]")
    return arr


def _domain_param(k: np.ndarray):
    """Domain for the Spent record: one int if all columns share it, else the list."""
    if k.size and (k == k[0]).all():
        return int(k[0])
    return k.tolist()


def _kernel_input(x: torch.Tensor, backend: str | None, check) -> tuple:
    """Kernel module, backend name, contiguous ``x`` on its own device and the kernels' array
    view (:func:`_array_view`), after ``check(K, view(x))`` has validated every value on the
    Numba backend (so nothing runs on bad input).  The C++ and CUDA kernels check in their own
    pass instead (no second read of ``x``): :func:`_checked` raises from the index they return."""
    device = _device_of(x=x)
    K, name = _kernels(device, backend)
    xc = x.detach().contiguous()
    view = _array_view(device)
    if name not in _FUSED:
        check(K, view(xc))
    return K, name, xc, view


def _checked(name: str, check, K, xa, bad, keying=None, seeds=None) -> None:
    """After a C++ or CUDA mechanism kernel: raise as ``check`` would from the first bad flat index
    it flagged (its output is then discarded with the exception; the input is never written), else
    record the release whose seeds the kernel derived (``seeds``: the :func:`_seeds_for` it got)."""
    if name in _FUSED:
        check(K, xa, bad=bad)
        keying.record(seeds)


def _check_values_in_domain(K, xa, k: np.ndarray, name: str = "x", bad: int | None = None) -> None:
    """Raise ValueError naming the first entry outside [0, k[col]) (``xa``: NumPy array or
    CUDA tensor; only the offending value is read back; ``bad``: that flat index when a kernel
    has found it already, -1 for none)."""
    bad = K.check_categorical(xa, k) if bad is None else bad
    if bad >= 0:
        d = xa.shape[1]
        i, j = divmod(bad, d)
        raise ValueError(f"{name}: value {int(xa[i, j])} at row {i}, column {j} is outside the "
                         f"column's domain [0, {int(k[j])})")


def _check_values_in_range(K, xa, alpha: float, beta: float, name: str = "x", bad: int | None = None) -> None:
    """Raise ValueError naming the first entry that is NaN or outside [alpha, beta] (``bad`` as
    in :func:`_check_values_in_domain`)."""
    bad = K.check_range(xa, alpha, beta) if bad is None else bad
    if bad >= 0:
        idx = np.unravel_index(bad, tuple(xa.shape))
        v = float(xa[idx])
        where = ", ".join(str(int(i)) for i in idx)
        raise ValueError(f"{name}: value {v} at index ({where}) is NaN or outside "
                         f"[alpha, beta] = [{alpha}, {beta}]")


def _seeds_for(keying, mechanism: str, params: dict, x: torch.Tensor, name: str, extra=None):
    """Per-row report seeds of one release (:mod:`ldpfast.privacy.users`), each row's input
    being its own row of ``x``: a NumPy uint64 view for the Numba kernels; for C++ and CUDA the
    release's :class:`~ldpfast.privacy.users.KernelKeys`, the kernel deriving each row's seed as
    it reads the row (one pass over ``x``; pass it through :func:`_kernel_seeds`; the caller
    records the release after the launch, :func:`_checked`)."""
    if name in _FUSED:
        return keying.kernel_keys(mechanism, params, x.shape[0], x.device, rows=x, extra=extra)
    return keying.seeds(mechanism, params, x.shape[0], x.device, rows=x, extra=extra).numpy().view(np.uint64)


def _kernel_seeds(name: str, seeds):
    """The seeds argument of a mechanism kernel: the :func:`_seeds_for` result itself, or for the
    C++ kernels a KernelKeys as the tuple ``csrc/cpu/features.cpp`` reads (user keys, extra, the
    six 64-bit keys, the seeds and report-id outputs: NumPy views, written in place)."""
    if name != "cpp":
        return seeds
    c, u = seeds.ctx, (lambda t: None if t is None else t.numpy())
    return (u(seeds.keys), u(seeds.extra), c.k_nh, c.k_pad, c.k_prf, c.k_a, c.k_b, c.k_c, u(seeds.seeds),
            u(seeds.rids))


_KEYING_DOC = """seed : int, optional
        The caller's 64-bit secret (``None``: fresh from the OS).  Never recorded: it would
        rebuild the noise.
    user_keys : 1-D int tensor, optional
        One distinct key in ``[0, 2^63)`` per row: row ``i``'s report is keyed to user
        ``user_keys[i]``, its own input and every parameter of the output law, never to its
        position (:mod:`ldpfast.privacy.users`).  Default: row ``row_offset + i`` is the user.
    dataset : str
        Dataset name, the domain separator: two datasets under one secret never share bits
        (default ``"default"``).
    backend : {"cpp", "numba", "cuda"}, optional
        Kernel backend (default: the input's device decides: CUDA kernels for CUDA tensors,
        else C++ if built, else Numba).
    row_offset : int
        Key of the first row when ``user_keys`` is None (default 0), so that
        ``f(x[a:b], ..., row_offset=a)`` equals ``f(x, ...)[a:b]`` bit for bit (how
        :mod:`ldpfast.distributed.shards` randomises row blocks)."""


def _keying_doc(f):
    """Put the shared parameters (seed, user_keys, dataset, backend, row_offset) into ``f``'s docstring."""
    f.__doc__ = f.__doc__.replace("{keying}", _KEYING_DOC)
    return f


def _thresholds(eps: float, k: np.ndarray) -> np.ndarray:
    """Per-column GRR keep thresholds (one computation per distinct domain size)."""
    table = {int(v): grr_threshold(eps, int(v)) for v in np.unique(k)}
    return np.array([table[int(v)] for v in k], dtype=np.uint64)


def _categorical_input(x, name="x"):
    check_tensor(name, x, dtypes=INT_DTYPES)
    if x.dim() not in (1, 2):
        raise ValueError(f"{name}: expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")
    x2 = x.reshape(-1, 1) if x.dim() == 1 else x
    return x2


@_keying_doc
def grr(x: torch.Tensor, k, eps: float, seed: int | None = None, *, user_keys=None,
        dataset: str = DEFAULT_DOMAIN, backend: str | None = None, row_offset: int = 0,
        _keying=None) -> tuple[torch.Tensor, Spent]:
    """Generalized randomized response on every entry of a categorical matrix.

    Each entry ``x[i, j]`` in ``[0, k_j)`` is reported truthfully with probability
    ``p = e^eps / (e^eps + k_j - 1)`` and replaced by each other value with probability
    ``q = 1 / (e^eps + k_j - 1)`` (RGNN section IV-A; the "GRR" of [34] Wang et al.).

    Parameters
    ----------
    x : torch.Tensor
        ``(n, d)`` (or ``(n,)``) int32 / int64 categorical values, ``x[:, j]`` in ``[0, k_j)``.
    k : int or 1-D integer tensor / sequence of length d
        Domain size(s) ``k_j >= 1`` (public).
    eps : float
        Budget of each single report, > 0.
    {keying}

    Returns
    -------
    (torch.Tensor, Spent)
        Randomised values, same shape, dtype and device as ``x``; the guarantee.

    Privacy
    -------
    Each entry is ``eps``-LDP; a node's row of ``d`` reports is ``d * eps``-LDP by
    sequential composition (tight: inputs differing in every column attain it), which is
    the ``Spent.eps`` recorded.
    """
    x2 = _categorical_input(x)
    d = x2.shape[1]
    kk = _as_domain("k", k, d)
    eps = check_eps("eps", eps)
    keying = keying_of(seed, user_keys, dataset, row_offset, _keying)
    T = _thresholds(eps, kk)
    check = partial(_check_values_in_domain, k=kk)
    K, name, xc, view = _kernel_input(x2, backend, check)
    seeds = _seeds_for(keying, "grr", {"eps": eps, "k": _domain_param(kk), "dtype": str(xc.dtype)}, xc, name)
    out = torch.empty_like(xc)
    _checked(name, check, K, view(xc), K.grr(view(xc), kk, T, _kernel_seeds(name, seeds), view(out)), keying, seeds)
    spent = Spent("grr", "features", eps * d, guarantee="eps-LDP per node",
                  params={"eps_per_value": eps, "d": d, "k": _domain_param(kk), "backend": name,
                          "source": "RGNN sec. IV-A (GRR); sequential composition over d"})
    return out.reshape(x.shape), spent


@_keying_doc
def grr_fs(x: torch.Tensor, domain, eps_x: float, m: int, seed: int | None = None, *,
           accounting: str = "exact", user_keys=None, dataset: str = DEFAULT_DOMAIN,
           backend: str | None = None, row_offset: int = 0, _keying=None) -> tuple[torch.Tensor, Spent]:
    """GRR with feature sampling (GRR-FS), RGNN section IV-A, eq. (4).

    Each node samples ``m`` of its ``d`` features uniformly without replacement and reports
    ``GRR(eps_x, x_i)`` for them (``p = e^eps_x / (e^eps_x + gamma_i - 1)``,
    ``q = 1 / (e^eps_x + gamma_i - 1)``); for the other ``d - m`` features it reports a
    value drawn uniformly from the feature's domain ``{0, ..., gamma_i - 1}``.  The server
    cannot tell which features were sampled.

    Parameters
    ----------
    x : torch.Tensor
        ``(n, d)`` int32 / int64 categorical features, ``x[:, i]`` in ``[0, gamma_i)``.
    domain : int or 1-D integer tensor / sequence of length d
        Domain sizes ``gamma_i`` (public; e.g. 2 for binary features).
    eps_x : float
        Budget of each sampled feature's GRR report, > 0.
    m : int
        Number of sampled features, ``1 <= m <= d``.
    {keying}

    Returns
    -------
    (torch.Tensor, Spent)
        Randomised features (same shape, dtype, device as ``x``) and the guarantee.

    Privacy
    -------
    Exactly ``m * eps_x``-LDP per node (tight).  RGNN Theorem 1 claims
    ``ln(1 + (m/d)(e^{m eps_x} - 1))``, which the exact enumeration in the tests refutes
    for ``m < d``.

    Notes
    -----
    The text of section IV-A has each user sample exactly ``m`` features (as the authors'
    code does, with a top-k of uniforms); the proof of Theorem 1 writes eq. (4) as if each
    feature were sampled independently with probability ``m/d``.  We sample exactly ``m``
    (Floyd's algorithm, uniform over ``m``-subsets); both give every feature the same
    marginal ``m/d``, so the estimator of eq. (5) is unbiased either way.
    """
    if accounting not in ACCOUNTING:
        raise ValueError(f"accounting: expected one of {ACCOUNTING}, got {accounting!r}")
    check_tensor("x", x, dims=2, dtypes=INT_DTYPES)
    d = x.shape[1]
    if d < 1:
        raise ValueError("x: expected at least one feature column (d >= 1)")
    gam = _as_domain("domain", domain, d)
    eps_x = check_eps("eps_x", eps_x)
    m = check_int("m", m, 1, d)
    keying = keying_of(seed, user_keys, dataset, row_offset, _keying)
    T = _thresholds(eps_x, gam)
    check = partial(_check_values_in_domain, k=gam)
    K, name, xc, view = _kernel_input(x, backend, check)
    seeds = _seeds_for(keying, "grr_fs", {"eps_x": eps_x, "m": m, "k": _domain_param(gam),
                                          "accounting": accounting, "dtype": str(xc.dtype)}, xc, name)
    out = torch.empty_like(xc)
    _checked(name, check, K, view(xc), K.grr_fs(view(xc), gam, T, m, _kernel_seeds(name, seeds), view(out)), keying, seeds)
    exact = grr_fs_epsilon_exact(eps_x, m, d)
    thm1 = grr_fs_epsilon(eps_x, m, d)
    if accounting == "exact":
        eps, guarantee = exact, "eps-LDP per node (exact: m * eps_x)"
    else:
        eps = thm1
        guarantee = ("eps_X as claimed by RGNN Theorem 1 (NOT a valid eps-LDP bound for m < d; "
                     "exact guarantee is m * eps_x, see params['eps_exact'])")
    spent = Spent("grr_fs", "features", eps, guarantee=guarantee,
                  params={"eps_x": eps_x, "m": m, "d": d, "domain": _domain_param(gam),
                          "eps_exact": exact, "eps_X_theorem1": thm1, "accounting": accounting,
                          "backend": name,
                          "source": "RGNN sec. IV-A eq. (4), Theorem 1"})
    return out, spent


def _check_range_width(alpha: float, beta: float) -> None:
    """``alpha < beta`` with a finite width: ``(x - alpha) / (beta - alpha)`` must be a number
    in [0, 1] for every x in the range, or the 1-bit probabilities leave their bounds
    (audit F1: ``[-1e308, 1e308]`` made ``inf / inf`` and an unbounded likelihood ratio)."""
    if not alpha < beta:
        raise ValueError(f"alpha, beta: expected alpha < beta, got [{alpha}, {beta}]")
    if not math.isfinite(beta - alpha):
        raise ValueError(f"alpha, beta: the width beta - alpha must be finite (at most "
                         f"{np.finfo(np.float64).max:.3g}), got [{alpha}, {beta}]")


def _continuous_input(x, alpha, beta):
    check_tensor("x", x, dims=2, dtypes=FLOAT_DTYPES)
    alpha = check_real("alpha", alpha)
    beta = check_real("beta", beta)
    _check_range_width(alpha, beta)
    if x.shape[1] < 1:
        raise ValueError("x: expected at least one feature column (d >= 1)")
    return alpha, beta


@_keying_doc
def onebit(x: torch.Tensor, eps: float, alpha: float = 0.0, beta: float = 1.0,
           seed: int | None = None, *, user_keys=None, dataset: str = DEFAULT_DOMAIN,
           backend: str | None = None, row_offset: int = 0, _keying=None) -> tuple[torch.Tensor, Spent]:
    """1-bit mechanism on every feature (Ding et al. 2017, as used by LPGNN; Algorithm 1
    with ``m = d``).

    Each ``x[i, j]`` in ``[alpha, beta]`` is encoded as ``2t - 1`` with
    ``t ~ Bernoulli(1/(e^{eps/d} + 1) + (x - alpha)/(beta - alpha) * (e^{eps/d} - 1)/(e^{eps/d} + 1))``:
    the node budget ``eps`` is split evenly over the ``d`` dimensions (LPGNN section 3.1:
    "when m = d, our algorithm reduces to the 1-bit mechanism with a privacy budget of
    eps/d for every single dimension"; LPGNN's code ``OneBit = MultiBit(m='max')``).

    Parameters
    ----------
    x : torch.Tensor
        ``(n, d)`` float32 / float64 features in ``[alpha, beta]`` (no NaN).
    eps : float
        Per-node budget, > 0.
    alpha, beta : float
        Public range of the features, ``alpha < beta``.
    {keying}

    Returns
    -------
    (torch.Tensor, Spent)
        int8 ``(n, d)`` tensor on ``x``'s device, in ``{-1, 1}`` (rectify with
        :func:`multibit_rectify`, ``m = d``) and the guarantee.

    Privacy
    -------
    ``eps``-LDP per node (``eps / d`` per dimension, sequential composition).
    """
    alpha, beta = _continuous_input(x, alpha, beta)
    eps = check_eps("eps", eps)
    keying = keying_of(seed, user_keys, dataset, row_offset, _keying)
    d = x.shape[1]
    t_lo, span = onebit_threshold(eps / d)
    check = partial(_check_values_in_range, alpha=alpha, beta=beta)
    K, name, xc, view = _kernel_input(x, backend, check)
    seeds = _seeds_for(keying, "onebit", {"eps": eps, "alpha": alpha, "beta": beta, "d": d,
                                          "dtype": str(xc.dtype)}, xc, name)
    out = torch.empty_like(xc, dtype=torch.int8)
    _checked(name, check, K, view(xc), K.onebit(view(xc), alpha, beta, t_lo, span, _kernel_seeds(name, seeds),
                                                      view(out)), keying, seeds)
    spent = Spent("onebit", "features", eps, guarantee="eps-LDP per node",
                  params={"eps_per_dim": eps / d, "d": d, "alpha": alpha, "beta": beta, "m": d,
                          "backend": name,
                          "source": "LPGNN sec. 3.1 (Algorithm 1 with m = d)"})
    return out, spent


@_keying_doc
def multibit_encode(x: torch.Tensor, eps: float, m: int | None = None, alpha: float = 0.0,
                    beta: float = 1.0, seed: int | None = None, *, user_keys=None,
                    dataset: str = DEFAULT_DOMAIN, backend: str | None = None, row_offset: int = 0,
                    _keying=None) -> tuple[torch.Tensor, Spent]:
    """LPGNN multi-bit encoder (Sajadmanesh & Gatica-Perez, section 3.1, Algorithm 1).

    Each node samples ``m`` of its ``d`` dimensions uniformly without replacement; a
    sampled dimension reports ``2t - 1`` with
    ``t ~ Bernoulli(1/(e^{eps/m} + 1) + (x - alpha)/(beta - alpha) * (e^{eps/m} - 1)/(e^{eps/m} + 1))``,
    every other dimension reports 0.

    Parameters
    ----------
    x : torch.Tensor
        ``(n, d)`` float32 / float64 features in ``[alpha, beta]`` (no NaN).
    eps : float
        Per-node budget, > 0.
    m : int, optional
        Sampled dimensions, ``1 <= m <= d``; ``None`` takes the optimum of Proposition 3.4,
        ``m* = max(1, min(d, floor(eps / 2.18)))`` (eq. 6).
    alpha, beta : float
        Public feature range, ``alpha < beta``.
    {keying}

    Returns
    -------
    (torch.Tensor, Spent)
        int8 ``(n, d)`` tensor on ``x``'s device, in ``{-1, 0, 1}`` with exactly ``m``
        non-zeros per row, and the guarantee (``params['m']`` holds the ``m`` used).

    Privacy
    -------
    ``eps``-LDP per node (Theorem 3.1): ``m`` one-bit reports of budget ``eps / m``.

    Notes
    -----
    Algorithm 1 as printed reads ``e^{eps/m+1}``; the proof (eqs. 16, 24) shows the intended
    ``e^{eps/m} + 1``, which is implemented.
    """
    alpha, beta = _continuous_input(x, alpha, beta)
    eps = check_eps("eps", eps)
    d = x.shape[1]
    m = optimal_m(eps, d) if m is None else check_int("m", m, 1, d)
    keying = keying_of(seed, user_keys, dataset, row_offset, _keying)
    t_lo, span = onebit_threshold(eps / m)
    check = partial(_check_values_in_range, alpha=alpha, beta=beta)
    K, name, xc, view = _kernel_input(x, backend, check)
    seeds = _seeds_for(keying, "multibit", {"eps": eps, "m": m, "alpha": alpha, "beta": beta, "d": d,
                                            "dtype": str(xc.dtype)}, xc, name)
    out = torch.empty_like(xc, dtype=torch.int8)
    _checked(name, check, K, view(xc), K.multibit_encode(
        view(xc), m, alpha, beta, t_lo, span, _kernel_seeds(name, seeds), view(out)), keying, seeds)
    spent = Spent("multibit", "features", eps, guarantee="eps-LDP per node",
                  params={"m": m, "eps_per_dim": eps / m, "d": d, "alpha": alpha, "beta": beta,
                          "backend": name,
                          "source": "LPGNN sec. 3.1, Algorithm 1, Theorem 3.1"})
    return out, spent


def multibit_scale(eps: float, m: int, d: int, alpha: float, beta: float) -> float:
    """``C = d (beta - alpha) / (2m) * (e^{eps/m} + 1) / (e^{eps/m} - 1)`` of eq. (4)."""
    r = eps / m
    return d * (beta - alpha) / (2.0 * m) * (math.exp(r) + 1.0) / math.expm1(r)


def multibit_rectify(x_star: torch.Tensor, eps: float, m: int, alpha: float = 0.0,
                     beta: float = 1.0, *, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """LPGNN multi-bit rectifier, eq. (4): the unbiased estimate ``x'`` of ``x``.

    ``x' = d (beta - alpha) / (2m) * (e^{eps/m} + 1) / (e^{eps/m} - 1) * x* + (alpha + beta) / 2``
    with ``d = x_star.shape[-1]``.  Unbiased (Proposition 3.2) up to the ``2^-32``
    quantisation of the encoder's probabilities (relative bias below ``2^-30``); variance in
    :func:`ldpfast.estimation.multibit_variance` (eq. 5).  For :func:`onebit` output use
    ``m = d``.  Post-processing: no privacy cost.

    Parameters
    ----------
    x_star : torch.Tensor
        Encoder output, values in ``{-1, 0, 1}`` (any integer or float dtype), ``(..., d)``.
    eps, m, alpha, beta
        The encoder's parameters.
    dtype : torch.dtype
        Floating dtype of the result (float32 default).
    """
    check_tensor("x_star", x_star)
    if x_star.dim() < 1 or x_star.shape[-1] < 1:
        raise ValueError(f"x_star: expected shape (..., d) with d >= 1, got {tuple(x_star.shape)}")
    if x_star.dtype == torch.bool or x_star.is_complex():
        raise TypeError(f"x_star: expected an integer or float tensor, got {x_star.dtype}")
    if dtype not in FLOAT_DTYPES:
        raise TypeError(f"dtype: expected torch.float32 or torch.float64, got {dtype}")
    d = x_star.shape[-1]
    eps = check_eps("eps", eps)
    m = check_int("m", m, 1, d)
    alpha = check_real("alpha", alpha)
    beta = check_real("beta", beta)
    _check_range_width(alpha, beta)
    if x_star.numel() and not bool(((x_star == -1) | (x_star == 0) | (x_star == 1)).all()):
        raise ValueError("x_star: expected values in {-1, 0, 1} (multi-bit encoder output)")
    C = multibit_scale(eps, m, d, alpha, beta)
    return x_star.to(dtype) * C + (alpha + beta) / 2.0
