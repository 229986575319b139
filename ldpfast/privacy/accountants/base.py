"""What every accountant returns (:class:`PrivacyReport`), and the calibration of ``sigma``."""
from __future__ import annotations

import math
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from ..._checks import check_eps, check_int, check_prob, check_real

__all__ = ["METHODS", "PrivacyReport"]

METHODS = ("rdp", "pld", "prv", "gdp")
"""Accounting methods: Rényi DP (Theorem 2 + Theorem 1), the privacy loss distribution
(``dp_accounting``'s composition), the privacy random variable (our own FFT accountant) and
Gaussian DP (a valid, loose bound); :mod:`ldpfast.privacy.accountants`."""


# ----------------------------------------------------------------------------- reports
@dataclass
class PrivacyReport:
    """What one accountant call found.

    Attributes
    ----------
    eps, delta : float
        The guarantee: ``(eps, delta)``-DP for the neighbouring relation ``model``.
    sigma : float
        Noise standard deviation in the paper's units (clip norm 0.5).
    T : int
        Number of steps.
    method : str
        ``"rdp"`` (Theorem 2 + Theorem 1) or ``"pld"`` (dp_accounting).
    order : float or None
        Best Rényi order (RDP).
    K : int or None
        Cap on the peripheral count (:mod:`.heterpoisson` docstring, item 1).
    delta_tail : float
        Part of ``delta`` charged to the capped tail, ``e^eps T tail(K)``.
    worst_degree : float or None
        Out-degree ``D`` attaining the maximum at the best order (``inf``: Poisson limit).
    params : dict
        ``q_b``, ``M``, ``num_nodes`` and the numerical settings.
    model : str
        The neighbouring relation the guarantee holds for (:func:`privacy_model`).
    """

    eps: float
    delta: float
    sigma: float
    T: int
    method: str
    order: float | None = None
    K: int | None = None
    delta_tail: float = 0.0
    worst_degree: float | None = None
    params: dict[str, Any] = field(default_factory=dict)
    model: str = ""

    def __post_init__(self):
        self.eps, self.delta, self.sigma = float(self.eps), float(self.delta), float(self.sigma)
        self.delta_tail = float(self.delta_tail)
        if self.order is not None:
            self.order = float(self.order)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ----------------------------------------------------------------------------- accountants
class _Progress:
    """A progress line on stderr for a calibration that runs past ``after`` seconds (then at
    most every ``every`` seconds): what is tried, what it gives, how long it has taken."""

    def __init__(self, what: str, after: float = 5.0, every: float = 2.0):
        self.what, self.after, self.every = what, after, every
        self.t0 = time.perf_counter()
        self.last = -math.inf
        self.n = 0

    def wrap(self, fn):
        def run(sigma):
            out = fn(sigma)
            self.n += 1
            t = time.perf_counter() - self.t0
            if t >= self.after and t - self.last >= self.every:
                self.last = t
                shown = f"eps {out:.4g}" if isinstance(out, float) else ("within" if out else "above")
                print(f"[ldpfast] {self.what}: figure {self.n}, sigma {sigma:.5g}: {shown} ({t:.0f} s)",
                      file=sys.stderr, flush=True)
            return out
        return run


def _illinois(value, eps: float, rel_tol: float, sigma_max: float, delta: float, T: int, x0: float = 0.0,
              step: float = math.log(2.0), budget: int | None = None) -> float:
    """Smallest ``sigma`` (to ``rel_tol``, on the side where ``value(sigma) <= eps``) by the
    Illinois variant of false position on ``g(x) = log value(e^x) - log eps``, which decreases
    in ``x``; a bisection step whenever an end is infinite or false position stalls.  Starts
    at ``sigma = e^x0`` with bracketing steps of at least ``step``; with ``budget``, stops
    after that many evaluations once bracketed (the ``hi`` end is always a tested one)."""
    calls = [0]

    def g(x):
        calls[0] += 1
        v = value(math.exp(x))
        if v <= 0:
            return -math.inf
        return math.log(v) - math.log(eps) if math.isfinite(v) else math.inf

    g0 = g(x0)
    if g0 > 0:  # bracket upwards: eps shrinks about like 1 / sigma
        lo, glo = x0, g0
        x = x0 + (max(step, g0) if math.isfinite(g0) else 2 * step)
        while (gx := g(x)) > 0:
            lo, glo = x, gx
            x += max(step, gx) if math.isfinite(gx) else 2 * step
            if x > math.log(sigma_max):
                raise ValueError(f"eps: {eps} is not reachable with sigma <= {sigma_max} (delta={delta}, T={T})")
        hi, ghi = x, gx
    else:  # bracket downwards
        hi, ghi = x0, g0
        x = x0 - (max(step, -g0) if math.isfinite(g0) else 2 * step)
        while (gx := g(x)) <= 0:
            hi, ghi = x, gx
            x -= max(step, -gx) if math.isfinite(gx) else 2 * step
            if x < math.log(1e-4):
                return math.exp(hi)
        lo, glo = x, gx
    side = 0
    while math.expm1(hi - lo) > rel_tol and (budget is None or calls[0] < budget):
        w = hi - lo
        if math.isfinite(glo) and math.isfinite(ghi) and glo != ghi:
            x = lo + glo * w / (glo - ghi)
            x = min(max(x, lo + 1e-3 * w), hi - 1e-3 * w)
        else:
            x = lo + 0.5 * w
        gx = g(x)
        if gx <= 0:
            hi, ghi = x, gx
            if side == 1:
                glo /= 2  # Illinois: the end kept twice has its value halved
            side = 1
        else:
            lo, glo = x, gx
            if side == -1:
                ghi /= 2
            side = -1
        if hi - lo > 0.5 * w:  # false position stalled: halve the bracket too
            mid = lo + 0.5 * (hi - lo)
            gm = g(mid)
            if gm <= 0:
                hi, ghi = mid, gm
            else:
                lo, glo = mid, gm
    return math.exp(hi)


def _check_T(T) -> int:
    return check_int("T", T, 1)


class _Calibrating:
    """Bisection on sigma for a target eps (shared by both accountants)."""

    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp") -> PrivacyReport:
        raise NotImplementedError

    def _value(self, sigma: float, T: int, delta: float, eps: float, method: str, **epsilon_kw) -> float | None:
        """A valid figure at ``sigma`` that decides ``epsilon <= eps`` (``None``: only the
        decision :meth:`_within` is available); lets calibration find the root by secants."""
        return None

    @staticmethod
    def _bisect(ok, eps, rel_tol, sigma_max, delta, T) -> float:
        """Bisection in ``log sigma`` on the decision ``ok``."""
        hi = 1.0
        while not ok(hi):
            hi *= 2
            if hi > sigma_max:
                raise ValueError(f"eps: {eps} is not reachable with sigma <= {sigma_max} "
                                 f"(delta={delta}, T={T})")
        lo = hi / 2
        while ok(lo):
            hi, lo = lo, lo / 2
            if lo < 1e-4:
                return hi
        while hi / lo - 1 > rel_tol:
            mid = math.sqrt(lo * hi)
            if ok(mid):
                hi = mid
            else:
                lo = mid
        return hi

    def _within(self, sigma: float, T: int, delta: float, eps: float, method: str, **epsilon_kw) -> bool:
        """Whether ``epsilon(sigma, T, delta).eps <= eps`` (accountants may decide it faster)."""
        return self.epsilon(sigma, T, delta, method=method, **epsilon_kw).eps <= eps

    def calibrate_sigma(self, eps: float, delta: float, T: int, *, method: str = "rdp",
                        rel_tol: float = 1e-3, sigma_max: float = 1e4, **epsilon_kw) -> float:
        """Smallest ``sigma`` (to ``rel_tol``, rounded up) with ``epsilon(sigma) <= eps``
        (false position in ``log sigma`` on a figure, or bisection on a decision;
        ``epsilon_kw`` go to :meth:`epsilon`, e.g. ``value_discretization_interval`` for the
        PLD).  Past 5 s a progress line goes to stderr every 2 s.

        Raises
        ------
        ValueError
            If even ``sigma_max`` does not reach ``eps``.
        """
        eps = check_eps("eps", eps)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        T = _check_T(T)
        rel_tol = check_real("rel_tol", rel_tol, 1e-8, 0.5)
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")

        prog = _Progress(f"calibrating sigma ({method}) for eps {eps:g} at delta {delta:.3g}, T {T}")
        value = None if self._value(1.0, T, delta, eps, method, **epsilon_kw) is None else prog.wrap(
            lambda s: self._value(s, T, delta, eps, method, **epsilon_kw))
        if value is not None:
            hi = _illinois(value, eps, rel_tol, sigma_max, delta, T)
        else:
            hi = self._bisect(prog.wrap(lambda s: self._within(s, T, delta, eps, method, **epsilon_kw)), eps,
                              rel_tol, sigma_max, delta, T)
        # the figure reported (epsilon) may take a path other than the test (a finer grid, its
        # own tail cap): make sure it meets the target too
        for _ in range(64):
            if self.epsilon(hi, T, delta, method=method, **epsilon_kw).eps <= eps:
                return hi
            hi *= 1 + rel_tol
        raise ValueError(f"eps: {eps} not met by the reported figure near sigma={hi} (delta={delta}, T={T})")
