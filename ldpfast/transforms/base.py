"""Base of the randomising transforms: one LDP report per input, recorded in the ledger.

:class:`ReportOnce` derives each input's randomness from the transform's secret seed and the
input's identity (:mod:`ldpfast.privacy.report_once`); :func:`_record` appends a transform's
:class:`~ldpfast.privacy.Spent` to ``data.ldp_ledger``.  Shared by :mod:`.features`,
:mod:`.labels` and :mod:`.edges`.
"""
from __future__ import annotations

from torch_geometric.transforms import BaseTransform

from ..privacy.budget import Ledger, Spent
from ..privacy.report_once import check_identity, input_seed, whole_graph
from ..rng import resolve_seed

__all__ = ["ReportOnce"]


def _record(data, spent: Spent) -> None:
    data.ldp_ledger = Ledger(list(Ledger.of(data).entries)).add(spent)


class ReportOnce(BaseTransform):
    """Base of the randomising transforms: one LDP report per input.

    The transform keeps a secret seed (the ``seed`` argument, or 64 bits drawn from the OS
    once, when the transform is made) and derives each input's randomness from it and a
    stable identity of the input (:mod:`ldpfast.privacy.report_once`).  Applying the same
    transform again to the same raw input gives the same report, so it is safe as a
    ``transform=`` that runs on every ``dataset[i]``; two different graphs get independent
    randomness.  ``pre_transform=`` (randomise once, store the result) is still the
    recommended use.  The seed is never written to the ledger or the ``repr``.

    Parameters (shared by every subclass)
    -------------------------------------
    seed : int, optional
        The secret seed in ``[0, 2**64)``; ``None`` draws one from the OS now.  Keep it to
        reproduce a run; never publish it (it rebuilds the noise).
    identity : str
        ``"content"`` (default): a fingerprint of the input's content.  Or the name of a
        ``Data`` attribute that identifies the input (e.g. ``"graph_id"``) when different
        users' graphs may have identical content.
    """

    # Not parameters: the output of the last call (the edge transforms' ``last_result``),
    # left out of GraphDataset's cache key so that applying a transform does not change it.
    _cache_ignore: tuple[str, ...] = ("last_result",)

    def _init_report_once(self, seed, identity) -> None:
        self._seed = resolve_seed(seed)
        self.identity = check_identity(identity)

    def _input_seed(self, data) -> int:
        whole_graph(data, type(self).__name__)
        return input_seed(self._seed, type(self).__name__, data, self.identity,
                          getattr(self, "backend", None))
