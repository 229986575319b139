"""Accountants for node-level DP-SGD (Xiang, Wang and Wang, IEEE S&P 2024).

* :mod:`.heterpoisson`: :class:`HeterPoissonAccountant` (Theorem 2, HeterPoisson sampling),
  the degree models, the Theorem 2 mixture and its tail bound;
* :mod:`.mixture`: :class:`MixtureAccountant` (a fixed mixture per step, e.g. the naive
  Poisson-subsampled DP-SGD baseline);
* :mod:`.rdp`: Rényi DP of the scalar mixture-of-Gaussians mechanism (Definition 7) and
  the conversion to ``(eps, delta)`` (Theorem 1);
* :mod:`.pld`: the PLD figure (``dp_accounting``'s composition, our fast construction);
* :mod:`.prv`: the PRV figure (our FFT composition) and the Gaussian DP figure;
* :mod:`.base`: :class:`PrivacyReport`, what every accountant call returns.
"""
from __future__ import annotations

from .base import METHODS, PrivacyReport
from .heterpoisson import (
    DEGREE_MODELS,
    HeterPoissonAccountant,
    check_degree_model,
    heterpoisson_mixture,
    privacy_model,
    tail_bound,
)
from .mixture import MixtureAccountant
from .pld import mog_pld
from .prv import gdp_epsilon, prv_epsilon
from .rdp import DEFAULT_ORDERS, MoGRDP, gaussian_epsilon, mog_rdp, rdp_to_epsilon

__all__ = [
    "DEFAULT_ORDERS",
    "DEGREE_MODELS",
    "METHODS",
    "HeterPoissonAccountant",
    "MixtureAccountant",
    "MoGRDP",
    "PrivacyReport",
    "check_degree_model",
    "gaussian_epsilon",
    "gdp_epsilon",
    "heterpoisson_mixture",
    "mog_pld",
    "mog_rdp",
    "privacy_model",
    "prv_epsilon",
    "rdp_to_epsilon",
    "tail_bound",
]
