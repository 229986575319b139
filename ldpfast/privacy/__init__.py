"""Privacy accounting: what every randomiser spent, and how budgets compose.

Every mechanism returns (or records on the PyG ``Data``) a :class:`Spent` entry; a
:class:`Ledger` sums them by basic sequential composition, which is what the papers use
(RGNN Theorem 1 + label budget, LPGNN Corollary 3.7, DPRR eps1 + eps2).
"""
from __future__ import annotations

from .budget import Ledger, Spent  # noqa: F401
