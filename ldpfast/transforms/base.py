"""Base of the randomising transforms: one LDP report per user, recorded in the ledgers.

:class:`ReportOnce` keys every report to its user (:mod:`ldpfast.privacy.users`), records the
transform's :class:`~ldpfast.privacy.Spent` in ``data.ldp_ledger`` and, with ``store=``, in a
per-user :class:`~ldpfast.privacy.ReportStore` that outlives the ``Data``.  Shared by
:mod:`.features`, :mod:`.labels` and :mod:`.edges`.
"""
from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import torch
from torch_geometric.transforms import BaseTransform

from ..privacy.budget import Ledger, Spent
from ..privacy.report_once import check_identity, graph_identity, whole_graph
from ..privacy.secret import resolve_secret
from ..privacy.store import ReportStore, known_dataset_stores
from ..privacy.users import DEFAULT_DOMAIN, Keying, _key_attr, check_domain, check_user_key

__all__ = ["ReportOnce"]


_WARNED: set = set()  # (rule, transform, dataset) already warned about in this process


def _warn_unaccounted(transform: str, user_key, dataset: str) -> None:
    """Fail closed on releases no ledger outside one ``Data`` will see (issue 37, item 7).

    A transform without a store records its release only in ``data.ldp_ledger``; when the
    same users are released again (a nightly job, a new transform object) nothing adds the two
    up.  Warn once per process and rule when that is likely:

    * ``user_key`` without a store: the reports are memoised per user, which only makes sense
      across releases, and those releases are accounted nowhere;
    * a dataset name of its own (not ``"default"``) without a store: named datasets are
      re-released;
    * a ReportStore file in the working directory already knows this dataset name: an earlier
      run accounted this dataset, this one does not (the nightly job that forgot its store).
    """
    rules = []
    if user_key is not None:
        rules.append(("user_key", (f"{transform}(user_key={user_key!r}) has no store: its reports are memoised per "
                      "user but their releases are accounted nowhere outside this Data")))
    stores = known_dataset_stores(dataset)
    if stores:
        rules.append(("store-here", (f"{transform}(dataset={dataset!r}) has no store, but the report store "
                      f"{stores[0]} in the working directory already accounts dataset {dataset!r}: this release "
                      "is not added to those users' totals")))
    elif dataset != DEFAULT_DOMAIN:
        rules.append(("named", (f"{transform}(dataset={dataset!r}) has no store: releases of a named dataset are "
                          "usually repeated, and nothing outside this Data will add them up")))
    for rule, msg in rules:
        key = (rule, transform, dataset)
        if key not in _WARNED:
            _WARNED.add(key)
            warnings.warn(msg + ". Pass store=ldpfast.privacy.ReportStore(path, create=True) (and user_key=) to account each user "
                          "across releases and cap their total.", UserWarning, stacklevel=4)


def _record(data, spent: Spent) -> None:
    data.ldp_ledger = Ledger(list(Ledger.of(data).entries)).add(spent)


class ReportOnce(BaseTransform):
    """Base of the randomising transforms: one LDP report per user.

    Every report is keyed to its user: a function of the transform's secret, ``dataset``, the
    user's key, the mechanism, every parameter of its output law and the user's own input,
    of nothing else (:mod:`ldpfast.privacy.users`).  Applying the transform again to an
    unchanged user returns the identical report.

    Parameters (shared by every subclass)
    -------------------------------------
    seed : bytes or int, optional
        The secret.  With ``user_key`` or ``store`` (memoised reports) it must be ``bytes`` of
        at least 16 (128 bits; :func:`ldpfast.privacy.new_secret` makes one, in a key file):
        a small int would let anyone holding a release or the store file guess it and read the
        inputs back.  Without them an int in ``[0, 2**64)`` is accepted (one release of one
        graph).  ``None`` draws 32 bytes from the OS now.  Keep it to re-release (an unchanged
        user gets the same report only under the same secret); never publish it (it rebuilds
        the noise).  It is never written to a ledger, a store, the ``repr`` or a file.
    user_key : str, optional
        Name of a node attribute holding each user's int64 key (e.g. ``"user_id"``: distinct,
        in ``[0, 2^63)``).  With it a user keeps their report when other users join, leave or
        are reordered, and releases can be accounted per user across ``Data`` objects
        (``store=``).  Without it the rows are the users *of this graph only*: the report
        depends on the graph's identity (``identity``), so a changed graph is a fresh report
        for every node (a warning says so when one transform sees a second graph).
    dataset : str
        The dataset's name, a domain separator: two datasets under one secret never share
        bits (default ``"default"``).
    store : ReportStore, optional
        Per-user ledger across releases (needs ``user_key``).  Unchanged users cost nothing;
        with the store's ``budget`` a user who would pass it is withheld from the output
        (marked, e.g. ``data.x_withheld``, and counted in the ledger entry).
    identity : str
        Without ``user_key``: ``"content"`` (default, a keyed fingerprint of the graph) or the
        name of a ``Data`` attribute that identifies the graph (e.g. ``"graph_id"``).
    """

    _cache_ignore = ("last_result",)  # GraphDataset's cache key: outputs are not parameters

    def _init_report_once(self, seed, identity, user_key=None, dataset=DEFAULT_DOMAIN, store=None) -> None:
        self.identity = check_identity(identity)
        self.user_key = check_user_key(user_key)
        self.dataset = check_domain(dataset)
        if store is not None and not isinstance(store, ReportStore):
            raise TypeError(f"store: expected an ldpfast.privacy.ReportStore, got {type(store).__name__}")
        if store is not None and user_key is None:
            raise ValueError("store: a report store accounts per user across releases, so it needs user_key= "
                             "(the name of the node attribute holding each user's key, e.g. 'user_id')")
        self._seed = resolve_secret(seed, memoised=user_key is not None or store is not None)
        self.store = store
        self._graphs_seen: set[bytes] = set()
        if store is None:
            _warn_unaccounted(type(self).__name__, self.user_key, self.dataset)

    def _keying(self, data, n: int, device) -> Keying:
        """The Keying of one application to ``data`` (``n`` users on ``device``)."""
        whole_graph(data, type(self).__name__)
        if self.user_key is not None:
            keying = Keying(self._seed, domain=self.dataset, user_keys=_key_attr(data, self.user_key),
                            keys_name=f"data.{self.user_key}", ids=self.store is not None)
            keying.keys(n, device)  # checked now, before any work (the check is kept for the mechanism)
            return keying
        ident = graph_identity(self._seed, data, self.identity, getattr(self, "backend", None))
        self._note_graph(ident)
        return Keying(self._seed, domain=self.dataset, graph=ident)

    def _note_graph(self, ident: bytes) -> None:
        """Warn once when one transform without user keys randomises a second, different graph."""
        seen = self._graphs_seen
        if ident in seen or not seen:
            seen.add(ident)
            return
        if len(seen) == 1:
            warnings.warn(
                f"{type(self).__name__} has now randomised a second, different graph without user keys. Without "
                "user_key= the rows are the users of one graph only: every node of the new graph gets a fresh "
                "report, so a user present in both (a graph re-released as it grows, next week's snapshot) is "
                "reported twice and no ledger sees both. If these graphs share users, pass user_key='user_id' "
                "(and store=ReportStore(...) to account releases per user). If they are different users' graphs "
                "(a graph-classification dataset), this is expected.", UserWarning, stacklevel=3)
        seen.add(ident)

    def _release(self, keying: Keying, spent: Spent, reported=None) -> tuple[np.ndarray | None, Spent]:
        """Account one release with the store, if any: record each reported user's report
        (``reported``: bool mask of the users that report; default all).  Returns the withheld
        users (a bool array, or None with no store), which the caller removes from the output,
        and ``spent`` with the store's counts, which the caller records in the ledger."""
        if self.store is None:
            return None, spent
        ctx, keys, ids = keying.last
        users = keys.cpu().numpy()
        sel = np.ones(users.shape[0], bool) if reported is None else (
            reported.cpu().numpy() if isinstance(reported, torch.Tensor) else np.asarray(reported)).astype(bool)
        res = self.store.release(dataset=self.dataset, mechanism=ctx.mechanism, params_digest=ctx.params_digest,
                                 params=ctx.params, relation=spent.relation, eps=spent.eps, delta=spent.delta,
                                 users=users[sel], rids=ids[sel])
        withheld = np.zeros(users.shape[0], bool)
        withheld[sel] = res.withheld
        return withheld, replace(spent, params={**spent.params, "store": {**res.counts, "path": str(self.store.path)}})
