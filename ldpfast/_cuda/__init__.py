"""CUDA backend: ``csrc/cuda/*.cu`` compiled at first use through CuPy (NVRTC).

Kernels take torch CUDA tensors by pointer and run on torch's current stream; outputs are
allocated by the caller (like the C++ kernels).  Compiled with ``--fmad=false`` so float
results round exactly like the CPU build (``-ffp-contract=off``): same seed, same bits.

Source assembly (:func:`program`, used by the runtime and by the NVRTC test): the quoted
``#include``s of a ``.cu`` file are inlined recursively, each file once, resolved relative
to the including file as nvcc does, with ``#line`` markers so compiler messages name the
original file and line.  Two reasons: NVRTC resolves ``"../common/philox.h"`` against its
include path, not against a file (the program is a string), so the sources failed to compile
at run time; and CuPy's on-disk cache (``~/.cupy/kernel_cache``) keys a module on the source
string, options, architecture and NVRTC version only, so an edited header behind an
``#include`` would silently reuse the old binary.  With the headers inlined, the key covers
them.  (``RawModule`` takes no header list outside jitify, so passing include names is not
an option.)

CuPy appends ``-ftz=true`` to the options (:data:`CUPY_APPENDED_OPTIONS`; the last ``-ftz``
wins), so float32 subnormals are flushed on the GPU unless a kernel avoids float32 maths:
the feature kernels widen float32 inputs with an exact conversion (``to_f64`` in
``csrc/common/features.h``) and do the rest in double; propagation adds, multiplies and
compares float32 with IEEE (non-.ftz) PTX forms (``csrc/common/propagate.h``).

Kernels: the HeterPoisson sampler (``sampling.cu``, bodies shared with the C++ build in
``csrc/common/sampling.h``; prefix sums and compaction as torch ops here), the RNG fills
(``rng.cu``), propagation (``propagate.cu``, body shared with the C++
build in ``csrc/common/propagate.h``; rows longer than :data:`SPMM_CHUNK` entries are split
into fixed chunks combined in order, so hubs do not serialise on one warp) and the feature / label
randomisers and input checks (``features.cu``, bodies shared with the C++ build in
``csrc/common/features.h``), the keyed input fingerprint of
:mod:`ldpfast.privacy.report_once` (``fingerprint.cu``, body in ``csrc/common/fingerprint.h``),
the edge mechanisms (``edges.cu``: DPRR's per-user
probabilities, the sparse RR sampler, LocalLap's entry noise and zero candidates, the
server-side row combination; bodies shared with ``csrc/cpu/edges.cpp`` in
``csrc/common/edges.h``), the user-keyed RR / DPRR sampler and degree noise (``edges_keyed.cu``:
hits per (row, field), a sort by (row, key, level), a thread per coin; bodies shared with
``csrc/cpu/edges_keyed.cpp`` in ``csrc/common/edges_keyed.h``) and the graph checks / edge_index writer (``graph.cu``, body in
``csrc/common/graph.h``) and the synthetic-graph generator (``synthetic.cu``: the
Miller-Hagberg walk, the trim priorities and the features, bodies shared with
``csrc/cpu/synthetic.cpp`` in ``csrc/common/synthetic.h``; it has only been compiled, never
run on a GPU).  Variable-size outputs (noisy lists, candidates, combinations) are
built by a count launch, a device prefix sum (``torch.cumsum``), one host read of the total
to allocate, and a fill launch: the edge list never goes through the host.

Torch-native on CUDA (no custom kernel; deterministic, listed here as issue 18 asks):
COO -> CSR with sort / dedup / weight sums and the transpose (``ldpfast/graph.py``: stable
``torch.sort`` on a 64-bit key, ``unique``-by-neighbour-comparison, ``bincount`` + ``cumsum``,
repeated weights summed rank by rank), because a stable device sort is what a hand-written
kernel would do and it gives the C++ counting sort's result; LocalLap's top-T selection
(``mechanisms/edges/laplace.py``: the T-th largest value by ``torch.kthvalue`` on exact integers, the
strict winners by comparison, the ties by index order; the random tie-break draws only
positions among the ties, from NumPy's Philox on the host exactly as the CPU path, so it
needs the number of ties and returns the chosen ranks, never the candidates); the masked
CSRs and searchsorted of LocalLap (``torch.cumsum``, boolean indexing, ``torch.searchsorted``);
the synthetic generator's exact-count trim (a stable ``torch.sort`` of the per-edge
priorities: the ``drop`` lowest go, ties in edge order, the edges the C++ histogram trim
removes) and its symmetric CSR (``torch.sort`` of distinct 64-bit (row, col) keys and
``torch.searchsorted`` for the row pointers: the sorted adjacency, which is what the C++
counting sort builds).

Layout (one module per ``csrc/cuda/<family>.cu``): :mod:`._core` finds ``csrc/``, assembles a
program (:func:`program`), loads it through CuPy and launches a kernel (``_launch``, ``_ptr``:
the launcher modules reach both through ``_core`` at call time, so a test patches one place);
``rng``, ``propagate``, ``reconstruct``, ``features`` (feature and label randomisers, input
checks), ``sampling``, ``fingerprint``, ``userkey`` (per-user report keys), ``synthetic``, ``edges``, ``edges_keyed`` and ``graph`` hold the
launchers, all re-exported here: :mod:`ldpfast._backend` uses this package as the ``cuda``
backend module and calls ``ldpfast._cuda.<op>``.
"""
from ._core import (
                    CUPY_APPENDED_OPTIONS,
                    KERNELS,
                    NULL,
                    OPTIONS,
                    check_available,
                    csrc_dir,
                    gpu_info,
                    kernel_cache_dir,
                    program,
)
from .edges import csr_combine, dprr_probs, edges_rr, locallap_edge_values, locallap_zero
from .edges_keyed import keyed_dlap, keyed_rr
from .features import (
                    check_categorical,
                    check_range,
                    grr,
                    grr_fs,
                    multibit_encode,
                    onebit,
                    rr_labels,
)
from .fingerprint import fingerprint
from .graph import SORTED_CHUNK, csr_to_edge_index, edges_check_csr, edges_sorted_csr
from .propagate import SPMM_CHUNK, cached_plan, spmm_geometry, spmm_plan, spmm_scaled
from .reconstruct import fs_counts, fs_estimate_index
from .rng import (
                    fill_binomial,
                    fill_discrete_laplace,
                    fill_geometric,
                    fill_randint,
                    fill_u32,
                    fill_uniform,
)
from .sampling import (
                    heter_central,
                    heter_edge_counts,
                    heter_edges,
                    heter_infer,
                    heter_nodes,
                    host_ints,
)
from .synthetic import synth_edges, synth_features, synth_priorities, synth_upload
from .userkey import report_keys, row_digests, set_digests

__all__ = [  # the backend module's ops and the loader's names (tests, ldpfast info)
                    "CUPY_APPENDED_OPTIONS",
                    "KERNELS",
                    "NULL",
                    "OPTIONS",
                    "SORTED_CHUNK",
                    "SPMM_CHUNK",
                    "cached_plan",
                    "check_available",
                    "check_categorical",
                    "check_range",
                    "csr_combine",
                    "csr_to_edge_index",
                    "csrc_dir",
                    "dprr_probs",
                    "edges_check_csr",
                    "edges_rr",
                    "edges_sorted_csr",
                    "fill_binomial",
                    "fill_discrete_laplace",
                    "fill_geometric",
                    "fill_randint",
                    "fill_u32",
                    "fill_uniform",
                    "fingerprint",
                    "fs_counts",
                    "fs_estimate_index",
                    "gpu_info",
                    "grr",
                    "grr_fs",
                    "heter_central",
                    "heter_edge_counts",
                    "heter_edges",
                    "heter_infer",
                    "heter_nodes",
                    "host_ints",
                    "kernel_cache_dir",
                    "keyed_dlap",
                    "keyed_rr",
                    "locallap_edge_values",
                    "locallap_zero",
                    "multibit_encode",
                    "onebit",
                    "program",
                    "report_keys",
                    "row_digests",
                    "rr_labels",
                    "set_digests",
                    "spmm_geometry",
                    "spmm_plan",
                    "spmm_scaled",
                    "synth_edges",
                    "synth_features",
                    "synth_priorities",
                    "synth_upload",
]
