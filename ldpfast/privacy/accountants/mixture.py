"""Accountant for a fixed scalar mixture of Gaussians per step (Xiang, Wang & Wang, IEEE S&P 2024, Definition 7).

E.g. the naive node-level DP-SGD baseline (the Poisson-subsampled Gaussian mechanism):
``MixtureAccountant([0, 0.5], [1 - q, q])``.
"""
from __future__ import annotations

import numpy as np

from ..._checks import check_eps, check_prob, check_real
from .base import METHODS, PrivacyReport, _Calibrating, _check_T
from .heterpoisson import _figure
from .rdp import (
    DEFAULT_ORDERS,
    MoGRDP,
    _check_mixture,
    _check_orders,
    _eps_lazy,
    mog_rdp,
    rdp_to_epsilon,
)

__all__ = ["MixtureAccountant"]


class MixtureAccountant(_Calibrating):
    """Accountant for a fixed scalar MoG per step (Definition 7), e.g. the naive DP-SGD
    baseline: ``MixtureAccountant([0, 0.5], [1 - q, q])`` is the Poisson-subsampled Gaussian
    mechanism with clip norm 0.5.

    Parameters
    ----------
    sensitivities, probs : array_like
        The mixture (``c_i >= 0``, ``p_i`` summing to 1).
    orders : array_like
        Rényi orders, > 1.
    rtol : float
        Relative precision of the numerical integration.
    model : str
        The neighbouring relation under which one step's sensitivity has this law; copied
        into every report (the accountant cannot check it).
    """

    def __init__(self, sensitivities, probs, *, orders=DEFAULT_ORDERS, rtol: float = 1e-10,
                 model: str = "a neighbouring relation under which one step's sensitivity has this mixture's law"):
        self.sensitivities, self.probs = _check_mixture(sensitivities, probs)
        self.orders = _check_orders(orders)
        self.rtol = check_real("rtol", rtol, 1e-14, 1e-3)
        if not isinstance(model, str) or not model:
            raise TypeError("model: expected a non-empty str naming the neighbouring relation")
        self.model = model

    def rdp(self, sigma: float) -> MoGRDP:
        return mog_rdp(self.sensitivities, self.probs, sigma, self.orders, rtol=self.rtol)

    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp",
                value_discretization_interval: float = 1e-3) -> PrivacyReport:
        """``(eps, delta)`` after ``T`` adaptive compositions: ``method`` ``"rdp"``, ``"pld"``,
        ``"prv"`` or ``"gdp"`` (:mod:`ldpfast.privacy.accountants`)."""
        sigma = check_eps("sigma", sigma)
        T = _check_T(T)
        delta = check_prob("delta", delta, open_low=True, open_high=True)
        params = {"sensitivities": self.sensitivities.tolist(), "probs": self.probs.tolist()}
        if method == "rdp":
            if self.sensitivities.size == 1:
                r = self.rdp(sigma)
                e, a = rdp_to_epsilon(self.orders, T * r.rdp, delta)
            else:
                e, a, _, _ = _eps_lazy(self.sensitivities, np.log(self.probs)[None, :], [None], sigma, T, delta,
                                    0.0, self.orders, self.rtol)
            return PrivacyReport(e, delta, sigma, T, "rdp", order=a, params=params, model=self.model)
        if method in ("pld", "prv", "gdp"):
            e = _figure(method, self.sensitivities, self.probs, sigma, T, delta, value_discretization_interval)
            return PrivacyReport(e, delta, sigma, T, method, params=params, model=self.model)
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
