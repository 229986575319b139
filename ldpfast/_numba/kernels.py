"""The Numba backend: same function names and signatures as ``ldpfast._C``."""
from __future__ import annotations

import numba

from .graph import coo_to_csr, csr_sort_unique  # noqa: F401
from .propagate import spmm_scaled  # noqa: F401
from .rng_kernels import (  # noqa: F401
    det_log,
    det_log1p,
    fill_binomial,
    fill_discrete_laplace,
    fill_geometric,
    fill_randint,
    fill_u32,
    fill_uniform,
    philox_blocks,
)
from .synthetic import synth_edge_count, synth_edge_fill, synth_expected, synth_features, synth_nodes, synth_symmetrize, synth_trim  # noqa: F401,E501


def get_num_threads() -> int:
    return numba.get_num_threads()


def set_num_threads(n: int) -> None:
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
