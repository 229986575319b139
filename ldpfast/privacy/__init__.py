"""Privacy accounting: what every randomiser spent, and how budgets compose.

Every mechanism returns (or records on the PyG ``Data``) a :class:`Spent` entry; a
:class:`Ledger` sums them by basic sequential composition within each neighbouring relation,
which is what the papers use (RGNN Theorem 1 + label budget, LPGNN Corollary 3.7, DPRR eps1 +
eps2); node-level LDP of attributes, edge LDP and node-level central DP are kept apart.

:mod:`.ldp` holds the closed forms of the local randomisers (GRR probabilities and the
integer thresholds the kernels use, GRR-FS budgets, LPGNN's optimal ``m``).  Note: RGNN
Theorem 1's ``eps_X`` (:func:`grr_fs_epsilon`) does not bound GRR-FS's privacy loss under
the LDP definition; the exact guarantee is ``m * eps_x`` (:func:`grr_fs_epsilon_exact`),
which is what :func:`ldpfast.mechanisms.grr_fs` records by default.

Layout (like Opacus): :mod:`.budget` (the ledger), :mod:`.ldp` (the LDP guarantees),
:mod:`.report_once` (a graph's identity), :mod:`.users` (every report keyed to its user),
:mod:`.store` (:class:`ReportStore`: the per-user ledger across releases), :mod:`.secret`
(:func:`new_secret`, :func:`load_secret`: the 128-bit secrets memoised reports need), :mod:`.accountants` (node-level DP-SGD: the MoG RDP
and PLD accountants), :mod:`.dpsgd` (per-sub-graph clipping and the DP optimizer),
:mod:`.engine` (:class:`NodeDPEngine`: sampler, accountant, clipping and optimizer in one
call, Opacus-style; it loads the sampler and torch pieces on first use), :mod:`.validator`
(:func:`validate` and :func:`fix`: which path each module's parameters take, and the swaps
of what mixes sub-graphs, Opacus' ``ModuleValidator``) and
:mod:`.audit` (the empirical privacy audit).  ``dpsgd`` and ``audit`` are imported on first
attribute access (they need torch and the HeterPoisson method).
"""
from __future__ import annotations

from .._lazy import lazy_submodules as _lazy_submodules
from .accountants import (  # noqa: F401
    DEFAULT_ORDERS,
    HeterPoissonAccountant,
    MixtureAccountant,
    PrivacyReport,
    gaussian_epsilon,
    heterpoisson_mixture,
    mog_rdp,
    rdp_to_epsilon,
    tail_bound,
)
from .budget import Ledger, Spent  # noqa: F401
from .engine import BatchMemoryManager, NodeDPEngine, NodeDPSampler  # noqa: F401
from .ldp import (  # noqa: F401
    grr_fs_eps_x_exact,
    grr_fs_epsilon,
    grr_fs_epsilon_exact,
    grr_fs_epsilon_inverse,
    grr_probs,
    grr_threshold,
    grr_threshold_epsilon,
    multibit_epsilon,
    onebit_threshold,
    onebit_threshold_epsilon,
    optimal_m,
)
from .secret import load_secret, new_secret  # noqa: F401
from .store import RELATIONS, ReleaseResult, ReportStore  # noqa: F401
from .validator import ValidationReport, fix, validate  # noqa: F401

_LAZY = ("audit", "dpsgd", "accountant")  # accountant: the deprecated path (issue 12)

__getattr__, __dir__ = _lazy_submodules(__name__, _LAZY, globals())
