"""Node-level DP-SGD (Xiang, Wang & Wang, IEEE S&P 2024, Algorithm 1): per-sub-graph clipping and the DP optimizer.

Laid out like Opacus: :mod:`.clipping` (the analogue of ``grad_sample``:
:class:`SubgraphGradSampleModule`, per-sub-graph norms and the clipped sum, loop references),
:mod:`.mixing` (the guards against models that let one sub-graph change another's output)
and :mod:`.optimizer` (:class:`DPOptimizer`).  The accountants are in
:mod:`ldpfast.privacy.accountants`.
"""
from __future__ import annotations

from .clipping import (
    CLIP_MARGIN,  # noqa: F401  (not in __all__, as before the move)
    ClipStats,
    DPUsageError,
    SubgraphGradSampleModule,
    clipped_sum_loop,
    flat_grad,
    per_subgraph_gradients_loop,
    subgraph_loss,
)
from .mixing import SubgraphMixingError, check_subgraph_independence
from .optimizer import (
    CLIPPINGS,
    BudgetExhaustedError,
    DPOptimizer,
    adaptive_grad_sigma,
    gaussian_noise_std,
)

__all__ = ["CLIPPINGS", "BudgetExhaustedError", "ClipStats", "DPOptimizer", "DPUsageError", "SubgraphGradSampleModule", "SubgraphMixingError",
           "adaptive_grad_sigma", "check_subgraph_independence", "clipped_sum_loop", "flat_grad", "gaussian_noise_std",
           "per_subgraph_gradients_loop", "subgraph_loss"]
