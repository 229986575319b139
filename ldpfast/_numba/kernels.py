"""The Numba backend: same function names and signatures as ``ldpfast._C``."""
from __future__ import annotations

import numba

from .edges import (  # noqa: F401
    csr_combine,
    csr_to_edge_index,
    dprr_probs,
    edges_check_csr,
    edges_rr_count,
    edges_rr_fill,
    edges_rr_sample,
    edges_sorted_csr,
    locallap_edge_values,
    locallap_zero,
    locallap_zero_sample,
)
from .edges_keyed import keyed_dlap, keyed_rr  # noqa: F401
from .features import (  # noqa: F401
    check_categorical,
    check_range,
    grr,
    grr_fs,
    multibit_encode,
    onebit,
    rr_labels,
)
from .fingerprint import fingerprint  # noqa: F401
from .graph import coo_to_csr, csr_sort_unique, csr_transpose_perm  # noqa: F401
from .propagate import spmm_scaled  # noqa: F401
from .reconstruct import fs_counts, fs_estimate_index  # noqa: F401
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
from .sampling import heter_central, heter_edges, heter_infer_nodes, heter_nodes  # noqa: F401
from .synthetic import (  # noqa: F401
    synth_edge_count,
    synth_edge_fill,
    synth_edge_sample,
    synth_expected,
    synth_features,
    synth_nodes,
    synth_symmetrize,
    synth_trim,
)
from .userkey import report_keys, row_digests, set_digests  # noqa: F401


def get_num_threads() -> int:
    return numba.get_num_threads()


def set_num_threads(n: int) -> None:
    numba.set_num_threads(max(1, min(int(n), numba.config.NUMBA_NUM_THREADS)))
