"""PyG transforms around the local-DP randomisers, and feature discretisation helpers.

Modules: :mod:`.features` (``data.x``), :mod:`.labels` (``data.y``), :mod:`.edges`
(``edge_index``), :mod:`.base` (:class:`ReportOnce`, the shared base).

Each randomising transform returns a new ``Data`` (the input is never modified: PyG's
``BaseTransform`` hands ``forward`` a shallow copy, and only new tensors are assigned) and
appends a :class:`~ldpfast.privacy.Spent` to the ledger ``data.ldp_ledger`` (a new
:class:`~ldpfast.privacy.Ledger` holding the previous entries), so a pipeline can report
the total budget spent::

    data = GroupBinaryFeatures(25)(data)                 # RGNN preprocessing (Cora)
    data = GRRFS(eps_x=1.0, m=10, seed=0)(data)
    data = RRLabels(eps=1.0, seed=1)(data)
    print(Ledger.of(data))                               # features m*eps_x + labels eps

One report per user: each randomising transform derives the randomness of an input from its
secret seed and the input's identity (:class:`ReportOnce`), so re-applying it to the same
raw input returns the same report, and two graphs never share random bits.  Use them as a
dataset's ``pre_transform`` (randomised once and stored); as ``transform=`` they are safe
too.  The seed is never recorded in the ledger.

CUDA: every transform (these and the edge transforms ``DPRR``, ``RREdges``, ``LocalLap``)
accepts a ``Data`` on the GPU and keeps it there: the input's identity is a keyed
fingerprint computed by a CUDA kernel on the device (16 bytes per tensor come back, the seed
being a host integer), the randomisers run their CUDA kernels, and the same secret seed gives
the same bits as on the CPU.  Host syncs remain for input checks and output sizes.

Transforms
----------
* :class:`GRRFS` (RGNN), :class:`MultiBit` and :class:`OneBit` (LPGNN) on ``data.x``;
* :class:`RRLabels` on ``data.y``; by default the nodes of ``train_mask | val_mask``
  report labels, as in both papers' code (LPGNN ``LabelPerturbation``, RGNN ``GRR`` with
  ``train_and_val=True``): test labels stay clean for evaluation.  The mask used is stored
  as ``data.y_rr_mask``.
* :class:`GroupBinaryFeatures`, :class:`Discretize`: preprocessing (no privacy cost as
  long as their parameters are public, see each docstring);
* :class:`KPropFeatures`: LPGNN's feature KProp, precomputed once (server side, after the
  randomiser).

Every argument is checked when a transform is constructed (ranges named in the message);
what needs the data (a mask's length, ``m <= d``) is checked before any randomness is drawn.
Masks (``RRLabels(mask=...)``, ``DPRR(public=...)``) are bool masks or tensors of node ids,
as PyG code holds them.
"""
from __future__ import annotations

from .base import ReportOnce
from .edges import DPRR, LocalLap, NoisyGraphWarning, RREdges, expected_edges
from .features import (
    GRRFS,
    RGNN_GROUP_SIZES,
    Discretize,
    GroupBinaryFeatures,
    KPropFeatures,
    MultiBit,
    OneBit,
    discretize,
    group_binary_features,
    quantile_boundaries,
)
from .labels import RRLabels

__all__ = ["DPRR", "GRRFS", "RGNN_GROUP_SIZES", "Discretize", "GroupBinaryFeatures", "KPropFeatures",
           "LocalLap", "MultiBit", "NoisyGraphWarning", "OneBit", "RREdges", "RRLabels", "ReportOnce",
           "discretize", "expected_edges", "group_binary_features", "quantile_boundaries"]
