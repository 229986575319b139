"""Edge local differential privacy for GNN inputs: DPRR, Warner's RR, LocalLap.

Paper: S. Hidano and T. Murakami, "Degree-Preserving Randomized Response for Graph Neural
Networks under Local Differential Privacy", arXiv preprint, 2022.
Each user ``v_i`` holds her neighbour list ``a_i`` (row ``i`` of the symmetric adjacency
matrix, ``a_ii = 0``), randomises it locally and sends ``a~_i``; the server assembles the
noisy matrix ``A~`` (section IV-A, Fig. 1).

Guarantees (per user, edge LDP, Definition 1; by Proposition 1 the tuple of all users'
randomisers gives ``2 eps`` relationship DP on undirected graphs, common setting only):

* :func:`dprr` -- Algorithm 1 (DPRR): Laplace-noised degree with budget ``eps1``, sampling
  probability ``q_i`` by eq. (6) projected onto [0, 1], Warner's RR with
  ``p = e^eps2 / (e^eps2 + 1)`` then edge sampling with ``q_i`` (eq. 7).  ``eps1 + eps2``-edge
  LDP (Proposition 2).  Budget split by eq. (8) unless ``eps1`` is given.
* :func:`rr_edges` -- Warner's RR on every bit of the neighbour list (section V-A, "RR"),
  ``eps``-edge LDP.  Output is dense by nature: ``O(n^2)`` edges.
* :func:`local_laplace` -- LocalLap (section V-A): ``eps1 = eps/10`` for the noisy degrees,
  ``T = sum(d*_i)/2``, ``Lap(1/eps2)`` on every upper-triangular element of ``A``, the ``T``
  largest kept.  ``eps1 + eps2``-edge LDP.

Implementation choices (documented deviations from the paper's text)
--------------------------------------------------------------------
* **No floating-point Laplace.**  Every "Laplace" draw is the exact discrete Laplace on the
  grid ``g = 2^-10`` (``x + g * DLap``, ``P[DLap = k] ~ exp(-eps g |k|)``), sampled with integer
  arithmetic only (Canonne, Kamath & Steinke, NeurIPS 2020, Alg. 2; see
  :func:`ldpfast.rng.epsilon_to_rational`).  A change of 1 in the input is ``1/g = 1024`` grid
  steps, so the release is exactly ``eps_used``-DP with ``eps_used <= eps`` (rounded down to a
  rational rate); this removes the floating-point attack on textbook Laplace sampling
  (Mironov, CCS 2012: "snapping").  If ``eps * g < 2^-20`` the grid is ``g = 1`` (the plain
  geometric mechanism).  The paper (footnote 2) argues for Laplace over the geometric
  mechanism because the latter does not help when ``eps1 < 1``; the fine grid keeps the
  Laplace law's shape to within 2^-10 while being exactly sampleable.
* **Budget split never exceeds eps.**  The paper's experiments set ``eps2 = alpha * eps`` even
  when eq. (8) picks ``eps1 = sqrt(8/(n_max-1)) > (1-alpha) eps``, which would spend more
  than ``eps``.  Here ``eps2 = eps - eps1`` always (``eps1`` from eq. 8 or given), and a
  :class:`ValueError` is raised if ``eps1 >= eps``.  The spent budget is
  ``eps1_used + eps2 <= eps``.
* **q_i when d*_i <= 0.**  Eq. (6) can be negative or undefined there; we set ``q_i = 0``
  (the continuous branch of the projection: eq. 6 is <= 0 for ``0 >= d* > -(n-1)(1-p)/(2p-1)``,
  and ``d* <= 0`` is "no edges").  The authors' code clamps ``d*`` at 0 as well.
* **Server-side rule.**  The paper says only that the server "calculates a noisy adjacency
  matrix ``A~`` corresponding to ``a~_1..a~_n``" (section IV-A); it states no symmetrisation.
  The authors' code (github.com/DPRR-GNN/DPRR-GNN, ``insert_noise.py``) builds
  ``edge_mat = argwhere(A~)`` and GIN aggregates with ``Adj_block = A~`` (``models/graphcnn.py``),
  i.e. user ``i`` aggregates over her *own* noisy list and ``A~`` is used as a directed graph.
  That is the default here (``symmetrize="none"``), which keeps the degree-preservation
  property the method is built on.  ``"or"``, ``"and"``, ``"lower"`` (Imola et al.'s ARR
  convention: keep the entries ``a~_ij`` with ``j < i``, mirror them) and ``"upper"`` are
  available; see :func:`server_graph`.
* **Customized setting** (section IV-A): users flagged ``public`` send their list unchanged
  (the authors' code does the same); the guarantee then covers the private users only and
  relationship DP does not hold (paper, section IV-A).  Supported by :func:`dprr` and
  :func:`rr_edges`; :func:`local_laplace` implements the common setting only.
* **Authors' code vs paper.**  The released code runs DPRR with ``eps1 = eps/10`` always
  (``insert_noise_onlyDPRR_select_rand_final.c``), not eq. (8); we follow the paper (eq. 8)
  by default, and ``eps1=eps/10`` reproduces the code.  LocalLap's ``T`` is floored and
  clipped to ``[0, n(n-1)/2]`` as in the code.

Devices: a graph on a CUDA device (CSR tensors or ``data.edge_index`` there) runs the CUDA
kernels (``csrc/cuda/edges.cu``, ``graph.cu``; per-row bodies shared with the C++ build in
``csrc/common/edges.h`` and ``graph.h``, so the same bits for one seed) and every output stays
on the device: DPRR's degree noise, ``q_i`` and the noisy lists (count launch, device prefix
sum, fill launch: the host reads only the total size), LocalLap's candidates and its top-T
(``_top_t_mask``), the server rules.  ``public`` must then be a bool tensor on the same
device; tensors on different devices raise an error naming both.

Randomness and exactness: counter-based Philox streams (``Stream.DPRR_*``, ``RR_EDGES``,
``LOCALLAP``), so outputs depend only on the seed (not on backend or threads).  The per-bit
probabilities (``p q_i``, ``(1-p) q_i``, LocalLap's candidate rate) are computed as doubles;
given those doubles the draws are exact up to a negligible factor: kept true edges by an exact
Bernoulli (``P = p_true`` exactly), false edges and candidates by skip sampling with geometric
gaps whose law has full support and is within relative ``2^-49`` of Geometric(``p_false``),
factor by factor (``geom_draw`` in ``csrc/common/rng.h``).  So every likelihood ratio of a
user's report is within ``e^(+-2^-46)`` of the exact independent-Bernoulli mechanism's: pure
``eps``-edge LDP up to that factor and the rounding of the doubles.  (Until audit F5 the gaps
were ``floor(log U / log(1 - p))`` with a 53-bit ``U``, which has no gap beyond
``log(2^-54) / log(1 - p)`` and probability 0 for most gaps below ``2^-53``: only
``(eps, ~2^-53 / p_false)``.)  LocalLap draws only the values that decide its top ``T``: its
candidates (zero entries, and true entries in the usual first round) by skip sampling, the
split of its zero picks and every value it draws exactly (integer arithmetic;
:func:`local_laplace`), so its only inexact part is the skip sampler's.
"""

from __future__ import annotations

# The package re-exports every name, private ones included: the transforms, the shards and
# the tests reach them (and patch them) as ``ldpfast.mechanisms.edges.<name>``.
from ._common import (  # noqa: F401
    _FLAG_MSG,
    _GUARANTEE,
    _I64_MAX,
    _I64_MIN,
    GRANULARITY,
    EdgeLDPResult,
    _check_csr_arrays,
    _check_public,
    _check_public_dev,
    _device,
    _edge_index_of,
    _graph_csr,
    _graph_seed,
    _grid,
    _masked_csr,
    _num_public,
    _public_for,
    _rr_args,
    _rr_probs,
    _rr_sample,
    _rr_sample_ei,
    _rr_sample_two_pass,
    _same_graph_device,
    _sorted_csr,
    _stored_adj_t,
    _stored_csr,
)
from .degree_preserving import (  # noqa: F401
    _bit_probs,
    _dprr,
    _q_of,
    dprr,
    dprr_budget,
)
from .laplace import (  # noqa: F401
    _MAX_ROUND,
    _high_values,
    _kth_smallest,
    _local_laplace,
    _next_round,
    _split_point,
    _tail,
    _threshold,
    _tie_choice,
    _top_t_mask,
    local_laplace,
)
from .rr import (  # noqa: F401
    _rr_edges,
    expected_rr_output,
    rr_edges,
)
from .server import (  # noqa: F401
    _COMBINE_MODE,
    DEFAULT_SYMMETRIZE,
    SYMMETRIZE_RULES,
    _check_rule,
    _csr_combine,
    _csr_union,
    server_graph,
    transpose,
)

__all__ = [
    "GRANULARITY",
    "EdgeLDPResult",
    "dprr",
    "dprr_budget",
    "expected_rr_output",
    "local_laplace",
    "rr_edges",
    "server_graph",
    "transpose",
]
