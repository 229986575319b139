"""What every accountant returns (:class:`PrivacyReport`), and the calibration of ``sigma``."""
from __future__ import annotations

import math
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
def _check_T(T) -> int:
    return check_int("T", T, 1)


class _Calibrating:
    """Bisection on sigma for a target eps (shared by both accountants)."""

    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp") -> PrivacyReport:
        raise NotImplementedError

    def _within(self, sigma: float, T: int, delta: float, eps: float, method: str, **epsilon_kw) -> bool:
        """Whether ``epsilon(sigma, T, delta).eps <= eps`` (accountants may decide it faster)."""
        return self.epsilon(sigma, T, delta, method=method, **epsilon_kw).eps <= eps

    def calibrate_sigma(self, eps: float, delta: float, T: int, *, method: str = "rdp",
                        rel_tol: float = 1e-3, sigma_max: float = 1e4, **epsilon_kw) -> float:
        """Smallest ``sigma`` (to ``rel_tol``, rounded up) with ``epsilon(sigma) <= eps``
        (bisection in ``log sigma``; ``epsilon_kw`` go to :meth:`epsilon`, e.g.
        ``value_discretization_interval`` for the PLD).

        Raises
        ------
        ValueError
            If even ``sigma_max`` does not reach ``eps``.
        """
        eps = check_eps("eps", eps)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        T = _check_T(T)
        rel_tol = check_real("rel_tol", rel_tol, 1e-8, 0.5)
        if method not in ("rdp", "pld"):
            raise ValueError(f"method: expected 'rdp' or 'pld', got {method!r}")

        def ok(s):
            return self._within(s, T, delta, eps, method, **epsilon_kw)

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
