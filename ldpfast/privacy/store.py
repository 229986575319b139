"""A per-user ledger of LDP reports that outlives one ``Data``: :class:`ReportStore`.

Every randomising transform (and ``ldpfast randomize``) takes ``store=``.  For each release the
store records, per user, each *distinct* report released: the mechanism, a digest of its
public parameters, a keyed report id (:mod:`ldpfast.privacy.users`: a PRF of the user's key,
their own input and the parameters under the caller's secret), eps, delta, the neighbouring
relation it protects and the release time.  Then:

* an unchanged user re-released (same secret, same parameters, same input) has the same
  report id: the transform returns the identical report and the store charges nothing;
* a changed input, a new parameter setting or a new secret is a new report, added to that
  user's total for its relation;
* with ``budget=``, a user whose total would pass the cap is *withheld*: not re-reported (the
  transform marks them, e.g. ``data.x_withheld``, and counts them in the ledger entry);
* relations are never added together: node-level LDP of a user's attributes (features,
  labels: ``"node-ldp"``), edge LDP of one neighbour bit (``"edge-ldp"``) and node-level
  central DP (``"node-dp"``) protect different neighbouring datasets.  A changed neighbour
  list is a wholly fresh report (every bit redrawn), charged in full;
* a user's total spans every dataset name: the name separates randomness, not people (the
  same user key in two datasets of one store is one person), so the budget caps the sum and
  :meth:`ReportStore.epsilon` adds the names up.

What each charge bounds, and what it cannot hide (the equality pattern: whether a user's
report changed between releases) is stated, with the proof, in the privacy model
(``docs/api/privacy_model.md``).

The store is one file at rest (a rollback journal, not WAL: a committed release is in the
``.sqlite`` file itself, so copying that file copies every release); :meth:`ReportStore.backup`
copies a live store safely.  A missing or empty file is refused unless ``create=True``: a
store that was deleted would otherwise open empty and re-release every capped user.

What the store never holds: the secret, a seed, or anything that rebuilds the noise or reveals
an input.  Report ids are keyed (an unkeyed hash of a label is inverted by trying the few
labels); user keys are stored as given (they identify the user to the server anyway).

One release is one SQLite transaction: a crash or a killed process part-way leaves the store
as it was (``tests/test_store.py`` kills a release after some users).  Embedded SQLite, no
server; millions of users per release (BENCHMARKS.md: the Orkut-like graph's 3.07M users).
"""
from __future__ import annotations

import errno
import json
import math
import os
import sqlite3
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

__all__ = ["RELATIONS", "ReleaseResult", "ReportStore", "known_dataset_stores", "relation_of"]

#: The neighbouring relations a report can protect; totals are kept apart per relation.
RELATIONS = {
    "node-ldp": "node-level LDP of the user's own attributes (features, labels)",
    "edge-ldp": "edge LDP: one bit of the user's neighbour list",
    "node-dp": "node-level central DP (DP-SGD: a whole node and its edges)",
}
_TARGET_RELATION = {"features": "node-ldp", "labels": "node-ldp", "edges": "edge-ldp", "nodes": "node-dp"}
_SCHEMA_VERSION = "1"
_CHUNK = 100_000  # rows per executemany: bounded memory, and a progress callback between chunks


def relation_of(target: str) -> str:
    """The relation a :class:`~ldpfast.privacy.Spent` target protects (``features`` and
    ``labels``: node-ldp; ``edges``: edge-ldp; ``nodes``: node-dp)."""
    try:
        return _TARGET_RELATION[target]
    except KeyError:
        raise ValueError(f"target: expected one of {sorted(_TARGET_RELATION)}, got {target!r}") from None


def _check_budget(budget):
    if budget is None:
        return {}
    if isinstance(budget, bool):
        raise TypeError("budget: expected a positive number or a dict {relation: number}")
    if isinstance(budget, (int, float)):
        budget = {r: budget for r in RELATIONS}
    if not isinstance(budget, dict):
        raise TypeError("budget: expected a positive number or a dict {relation: number}")
    out = {}
    for r, v in budget.items():
        if r not in RELATIONS:
            raise ValueError(f"budget: unknown relation {r!r}; expected one of {sorted(RELATIONS)}")
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not (v > 0) or math.isnan(v):
            raise ValueError(f"budget: the cap of {r!r} must be a number > 0, got {v!r}")
        out[r] = float(v)
    return out


@dataclass
class ReleaseResult:
    """What one release did to the store.

    Attributes
    ----------
    new : numpy bool array
        Users charged by this release (a new report).
    withheld : numpy bool array
        Users not reported: their total would pass the budget.
    reused : int
        Users re-released unchanged (identical report, nothing charged).
    release_id : int
        The release's row in the store.
    """

    new: np.ndarray
    withheld: np.ndarray
    reused: int
    release_id: int
    counts: dict = field(default_factory=dict)


class ReportStore:
    """Per-user report ledger in an SQLite file (module docstring).

    Parameters
    ----------
    path : str or os.PathLike
        The SQLite file.
    budget : float or dict, optional
        Cap on each user's total per relation, summed over every dataset name: one number for
        every relation, or ``{"node-ldp": 8.0, "edge-ldp": 4.0}``.  Users who would pass it are
        withheld.
    create : bool
        Create the store if ``path`` does not exist (default False: a missing or empty file is
        an error, so that a lost store is noticed instead of silently restarting every user's
        total at zero).
    timeout : float
        Seconds to wait for another process's release to finish (SQLite lock).
    warn_changed : float
        Warn when more than this fraction of the users already on record for a setting get a
        new report in one release (default 0.5): their inputs all changed at once, which more
        often means the user keys are not stable (``user_id = arange(n)`` on a re-ordered
        snapshot) than that half the users changed.

    Examples
    --------
    >>> import os, tempfile, torch
    >>> import ldpfast as lf
    >>> secret = lf.privacy.new_secret()  # a real deployment keeps it in a key file: new_secret(path)
    >>> data = lf.datasets.load("cora")
    >>> data.user_id = torch.arange(data.num_nodes)  # one stable key per user
    >>> store = ReportStore(os.path.join(tempfile.mkdtemp(), "reports.sqlite"), budget=8.0, create=True)
    >>> t = lf.transforms.MultiBit(eps=1.0, user_key="user_id", store=store, seed=secret, dataset="social")
    >>> first = t(data.clone())
    >>> again = t(data.clone())  # unchanged users: the same reports, nothing charged
    >>> bool((first.x == again.x).all()), store.epsilon(0)
    (True, {'node-ldp': 1.0})
    >>> store.close()
    """

    def __init__(self, path: str | os.PathLike, budget=None, *, create: bool = False, timeout: float = 60.0,
                 warn_changed: float = 0.5):
        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(f"path: expected a file path, got {type(path).__name__}")
        if not isinstance(create, bool):
            raise TypeError(f"create: expected True or False, got {create!r}")
        if isinstance(warn_changed, bool) or not isinstance(warn_changed, (int, float)) or not 0 < warn_changed <= 1:
            raise ValueError(f"warn_changed: expected a fraction in (0, 1], got {warn_changed!r}")
        self.path = Path(path)
        self.budget = _check_budget(budget)
        self.timeout = float(timeout)
        self.warn_changed = float(warn_changed)
        if not create:
            if not self.path.exists():
                raise FileNotFoundError(
                    f"path: no report store at {self.path}. Pass create=True to start a new one (only the first "
                    "time: a store that was deleted or moved would open empty and re-release every user it had "
                    "capped). Restore a lost store from its backup (ReportStore.backup).")
            if self.path.stat().st_size == 0:
                raise ValueError(f"path: {self.path} is an empty file, not a report store (was it truncated?). "
                                 "Restore it from a backup, or delete it and pass create=True to start anew.")
        self._con = sqlite3.connect(str(self.path), timeout=self.timeout, isolation_level=None)
        # One file at rest: with a rollback journal every committed release is in the .sqlite file
        # itself (with WAL a committed release can live only in -wal, and a copy of the .sqlite
        # alone loses it silently: issue 37, finding 10).  Switching from WAL checkpoints it.
        self._con.execute("PRAGMA journal_mode=DELETE")
        self._con.execute("PRAGMA synchronous=FULL")  # a committed release survives a power loss
        self._con.execute("PRAGMA cache_size=-65536")  # 64 MiB of pages: a release touches millions of rows
        self._con.execute("PRAGMA temp_store=MEMORY")
        self._init_schema()

    # --- schema --------------------------------------------------------------------------------
    def _init_schema(self) -> None:
        c = self._con
        c.execute("BEGIN IMMEDIATE")
        try:
            for stmt in ["\n                CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT)", "\n                CREATE TABLE IF NOT EXISTS datasets(id INTEGER PRIMARY KEY, name TEXT UNIQUE NOT NULL)", "\n                CREATE TABLE IF NOT EXISTS settings(id INTEGER PRIMARY KEY, mechanism TEXT NOT NULL,\n                    params_digest TEXT UNIQUE NOT NULL, params TEXT NOT NULL)", "\n                CREATE TABLE IF NOT EXISTS releases(id INTEGER PRIMARY KEY, time REAL NOT NULL,\n                    dataset INTEGER NOT NULL, setting INTEGER NOT NULL, relation TEXT NOT NULL,\n                    eps REAL NOT NULL, delta REAL NOT NULL, users INTEGER, new INTEGER, reused INTEGER,\n                    withheld INTEGER)", "\n                CREATE TABLE IF NOT EXISTS reports(dataset INTEGER NOT NULL, user INTEGER NOT NULL,\n                    rid INTEGER NOT NULL, release INTEGER NOT NULL,\n                    PRIMARY KEY(dataset, user, rid)) WITHOUT ROWID", "\n                CREATE TABLE IF NOT EXISTS totals(dataset INTEGER NOT NULL, user INTEGER NOT NULL,\n                    relation TEXT NOT NULL, eps REAL NOT NULL, delta REAL NOT NULL, reports INTEGER NOT NULL,\n                    PRIMARY KEY(dataset, user, relation)) WITHOUT ROWID\n            "]:  # (executescript would commit first: the schema is one transaction)
                c.execute(stmt)
            row = c.execute("SELECT value FROM meta WHERE key='schema'").fetchone()
            if row is None:
                c.execute("INSERT INTO meta VALUES('schema', ?)", (_SCHEMA_VERSION,))
            elif row[0] != _SCHEMA_VERSION:
                raise ValueError(f"path: {self.path} is a report store of schema {row[0]}, this ldpfast "
                                 f"reads schema {_SCHEMA_VERSION}")
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._con.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self) -> str:
        return f"ReportStore({str(self.path)!r}, budget={self.budget or None})"

    def cache_params(self) -> dict:
        """What a dataset cache key needs of a store: its path and budget (not its contents)."""
        return {"path": str(self.path.resolve()), "budget": self.budget}

    # --- one release ---------------------------------------------------------------------------
    def _id(self, table: str, col: str, value: str) -> int:
        c = self._con
        row = c.execute(f"SELECT id FROM {table} WHERE {col}=?", (value,)).fetchone()
        if row is not None:
            return row[0]
        return c.execute(f"INSERT INTO {table}({col}) VALUES(?)", (value,)).lastrowid

    def release(self, *, dataset: str, mechanism: str, params_digest: str, params: dict, relation: str,
                eps: float, delta: float, users: np.ndarray, rids: np.ndarray, progress=None) -> ReleaseResult:
        """Record one release of ``users`` (int64 keys) with report ids ``rids`` (uint64), in one
        transaction; returns which users were charged and which withheld (the caller withholds
        them from the output).  ``progress(phase, done, total)``, if given, is called after each
        chunk of users staged (``"staged"``) and once the new reports are written, before the
        commit (``"written"``); a process killed there leaves the store as before (the test)."""
        if relation not in RELATIONS:
            raise ValueError(f"relation: expected one of {sorted(RELATIONS)}, got {relation!r}")
        users_in = np.ascontiguousarray(users, dtype=np.int64)
        n = users_in.shape[0]
        if np.asarray(rids).shape[0] != n:
            raise ValueError("rids: expected one report id per user")
        # rows in key order: the B-trees are keyed by user, so inserts append instead of splitting pages
        order = np.argsort(users_in, kind="stable")
        users = users_in[order]
        rids_s = np.ascontiguousarray(np.asarray(rids, dtype=np.uint64)[order]).view(np.int64)  # SQLite: signed
        c = self._con
        c.execute("BEGIN IMMEDIATE")
        try:
            ds = self._id("datasets", "name", dataset)
            row = c.execute("SELECT id FROM settings WHERE params_digest=?", (params_digest,)).fetchone()
            setting = row[0] if row is not None else c.execute(
                "INSERT INTO settings(mechanism, params_digest, params) VALUES(?, ?, ?)",
                (mechanism, params_digest, json.dumps(params, sort_keys=True, default=str))).lastrowid
            rel_id = c.execute(
                "INSERT INTO releases(time, dataset, setting, relation, eps, delta) VALUES(?, ?, ?, ?, ?, ?)",
                (time.time(), ds, setting, relation, float(eps), float(delta))).lastrowid
            c.execute("CREATE TEMP TABLE IF NOT EXISTS stage(user INTEGER PRIMARY KEY, rid INTEGER NOT NULL, "
                      "charge INTEGER NOT NULL DEFAULT 1)")
            c.execute("DELETE FROM stage")
            for a in range(0, n, _CHUNK):
                c.executemany("INSERT INTO stage(user, rid) VALUES(?, ?)",
                              zip(users[a:a + _CHUNK].tolist(), rids_s[a:a + _CHUNK].tolist()))
                if progress is not None:
                    progress("staged", min(n, a + _CHUNK), n)
            # an unchanged user: the same report id is on record, nothing is charged
            c.execute("UPDATE stage SET charge = 0 WHERE EXISTS (SELECT 1 FROM reports r WHERE r.dataset = ? AND "
                      "r.user = stage.user AND r.rid = stage.rid)", (ds,))
            fresh = np.fromiter((u for (u,) in c.execute("SELECT user FROM stage WHERE charge = 1")), dtype=np.int64)
            new = np.zeros(n, dtype=bool)
            new[np.searchsorted(users, fresh)] = True  # users is sorted
            withheld = np.zeros(n, dtype=bool)
            cap = self.budget.get(relation)
            if cap is not None and new.any():
                # the user's total over every dataset name of the store (the name separates
                # randomness, not people: issue 37, finding 4)
                total = self._staged_totals(users, relation)
                # a relative tolerance, so that k reports of eps/k are not refused by rounding
                withheld = new & (total + eps > cap * (1 + 1e-12))
                if withheld.any():
                    c.executemany("UPDATE stage SET charge = 0 WHERE user = ?", ((u,) for u in users[withheld].tolist()))
            changed = self._changed_known(ds, setting, n)
            charge = new & ~withheld
            # the new reports and the users' totals, in SQL (no row crosses into Python again)
            c.execute("INSERT INTO reports SELECT ?, user, rid, ? FROM stage WHERE charge = 1", (ds, rel_id))
            c.execute("INSERT INTO totals SELECT ?, user, ?, ?, ?, 1 FROM stage WHERE charge = 1 "
                      "ON CONFLICT(dataset, user, relation) DO UPDATE SET eps = eps + excluded.eps, "
                      "delta = delta + excluded.delta, reports = reports + 1",
                      (ds, relation, float(eps), float(delta)))
            if progress is not None:
                progress("written", int(charge.sum()), n)
            reused = int(n - new.sum())
            c.execute("UPDATE releases SET users=?, new=?, reused=?, withheld=? WHERE id=?",
                      (n, int(charge.sum()), reused, int(withheld.sum()), rel_id))
            c.execute("DELETE FROM stage")
            c.execute("COMMIT")
        except BaseException as exc:
            if c.in_transaction:  # (a failed COMMIT may already have rolled back: disk full)
                c.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and "full" in str(exc):
                raise self._disk_full(exc) from exc
            raise
        if changed is not None:
            known, moved = changed
            warnings.warn(
                f"ReportStore: {moved} of the {known} users already on record for this {mechanism} setting in dataset "
                f"{dataset!r} got a new report in this release: their inputs all changed at once. If that is not "
                "expected, the user keys may not be stable (e.g. user_id = arange(n) on a re-ordered snapshot gives "
                "each person another person's key); each changed user was charged.", UserWarning, stacklevel=3)
        inv = np.empty_like(order)
        inv[order] = np.arange(n)  # back to the caller's order
        return ReleaseResult(new=charge[inv], withheld=withheld[inv], reused=reused, release_id=rel_id,
                             counts={"users": n, "new": int(charge.sum()), "reused": reused,
                                     "withheld": int(withheld.sum())})

    def _staged_totals(self, users: np.ndarray, relation: str) -> np.ndarray:
        """Each staged user's total for ``relation`` over every dataset (``users`` sorted; inside
        the release's transaction).  One primary-key join per dataset name (there are few)."""
        c = self._con
        total = np.zeros(users.shape[0])
        for (ds,) in c.execute("SELECT id FROM datasets").fetchall():
            tu, te = [], []
            for u, e in c.execute("SELECT t.user, t.eps FROM stage s JOIN totals t ON t.dataset = ? AND "
                                  "t.user = s.user AND t.relation = ? WHERE s.charge = 1", (ds, relation)):
                tu.append(u)
                te.append(e)
            if tu:
                total[np.searchsorted(users, np.asarray(tu, dtype=np.int64))] += te
        return total

    def _changed_known(self, ds: int, setting: int, n: int):
        """``(known, changed)`` when more than :attr:`warn_changed` of the staged users already on
        record for this setting and dataset got a new report id (inside the transaction), else
        None.  Needs at least 10 known users, so that a handful of edits never warns."""
        c = self._con
        rel = [r for (r,) in c.execute("SELECT id FROM releases WHERE dataset = ? AND setting = ? AND users IS NOT "
                                       "NULL", (ds, setting))]
        if not rel or n < 10:
            return None
        marks = ",".join("?" * len(rel))
        known, moved = c.execute(
            "SELECT COUNT(*), COALESCE(SUM(s.rid NOT IN (SELECT r2.rid FROM reports r2 WHERE r2.dataset = ? AND "
            f"r2.user = s.user)), 0) FROM stage s WHERE EXISTS (SELECT 1 FROM reports r WHERE r.dataset = ? AND "
            f"r.user = s.user AND r.release IN ({marks}))", (ds, ds, *rel)).fetchone()
        if known >= 10 and moved > self.warn_changed * known:
            return int(known), int(moved)
        return None

    def _disk_full(self, exc: Exception) -> OSError:
        where = self.path.resolve().parent
        try:
            st = os.statvfs(where)
            free = f"{st.f_bavail * st.f_frsize / 2**20:.1f} MiB free"
        except OSError:
            free = "free space unknown"
        return OSError(errno.ENOSPC, f"the disk holding the report store {self.path} ({where}: {free}) is full: the "
                       "release was not recorded and nothing was charged or withheld (the store is as it was). Free "
                       "some space and run the release again.", str(self.path))

    def backup(self, path: str | os.PathLike) -> Path:
        """Copy the store, consistently, to a new file ``path`` (SQLite's online backup API: safe
        while other processes use the store).  Returns the path written.  Refuses to overwrite."""
        dest = Path(path)
        if dest.exists():
            raise FileExistsError(f"path: {dest} exists; a backup never overwrites a file")
        if dest.resolve() == self.path.resolve():
            raise ValueError("path: is the store itself")
        out = sqlite3.connect(str(dest))
        try:
            self._con.backup(out)
            out.execute("PRAGMA journal_mode=DELETE")
        finally:
            out.close()
        return dest

    # --- queries -------------------------------------------------------------------------------
    def epsilon(self, user: int, *, dataset: str | None = None, relation: str | None = None):
        """A user's total: ``{relation: eps}`` (every relation the user has reports in), or one
        float with ``relation=``.  ``dataset=None`` (default) sums over every dataset name of the
        store, as the budget does; ``dataset=`` gives that dataset's share only."""
        if relation is not None and relation not in RELATIONS:
            raise ValueError(f"relation: expected one of {sorted(RELATIONS)}, got {relation!r}")
        q = ("SELECT t.relation, SUM(t.eps) FROM totals t JOIN datasets d ON d.id = t.dataset WHERE t.user = ?"
             + (" AND d.name = ?" if dataset is not None else "") + " GROUP BY t.relation")
        args = (int(user),) + ((dataset,) if dataset is not None else ())
        out = {rel: float(e) for rel, e in self._con.execute(q, args)}
        return out.get(relation, 0.0) if relation is not None else out

    def totals(self, relation: str, dataset: str | None = None) -> tuple[np.ndarray, np.ndarray]:
        """``(users, eps)`` arrays of every user's total for one relation (over every dataset
        name, or one with ``dataset=``), users in increasing key order."""
        q = "SELECT t.user, SUM(t.eps) FROM totals t JOIN datasets d ON d.id=t.dataset WHERE t.relation=?"
        args: tuple = (relation,)
        if dataset is not None:
            q += " AND d.name=?"
            args += (dataset,)
        rows = self._con.execute(q + " GROUP BY t.user ORDER BY t.user", args).fetchall()
        if not rows:
            return np.zeros(0, np.int64), np.zeros(0)
        a = np.asarray(rows)
        return a[:, 0].astype(np.int64), a[:, 1].astype(np.float64)

    def datasets(self) -> list[str]:
        """The dataset names the store has recorded releases of."""
        return [name for (name,) in self._con.execute("SELECT name FROM datasets ORDER BY id")]

    def summary(self, dataset: str | None = None) -> dict:
        """Per relation: users, max, median, p90, p99 and mean of the users' totals, and the
        number of releases.  ``str(store.summary())`` is not the readable form: use
        :meth:`describe`."""
        out = {}
        for rel in RELATIONS:
            _, e = self.totals(rel, dataset)
            if e.size == 0:
                continue
            out[rel] = {"users": int(e.size), "max": float(e.max()), "median": float(np.median(e)),
                        "p90": float(np.quantile(e, 0.9)), "p99": float(np.quantile(e, 0.99)),
                        "mean": float(e.mean())}
        return out

    def describe(self, dataset: str | None = None) -> str:
        """The summary in a few lines, one per relation."""
        s = self.summary(dataset)
        n_rel = self._con.execute("SELECT COUNT(*) FROM releases").fetchone()[0]
        lines = [f"report store {self.path.name}: {n_rel} releases"
                 + (f", budget {self.budget}" if self.budget else "")]
        for rel, v in s.items():
            lines.append(f"  {rel:8s} ({RELATIONS[rel]}): {v['users']} users, eps max {v['max']:.4g}, "
                         f"median {v['median']:.4g}, p99 {v['p99']:.4g}")
        if len(lines) == 1:
            lines.append("  (no reports yet)")
        return "\n".join(lines)

    def releases(self) -> list[dict]:
        """Every release recorded, oldest first (time, dataset, mechanism, relation, eps, counts)."""
        q = ("SELECT r.id, r.time, d.name, s.mechanism, s.params, r.relation, r.eps, r.delta, r.users, r.new, "
             "r.reused, r.withheld FROM releases r JOIN datasets d ON d.id=r.dataset JOIN settings s ON "
             "s.id=r.setting ORDER BY r.id")
        keys = ("id", "time", "dataset", "mechanism", "params", "relation", "eps", "delta", "users", "new",
                "reused", "withheld")
        out = []
        for row in self._con.execute(q):
            d = dict(zip(keys, row))
            d["params"] = json.loads(d["params"])
            out.append(d)
        return out

    # --- node-level DP-SGD runs (NodeDPEngine) ---------------------------------------------------
    _NODE_DP_TABLE = ("CREATE TABLE IF NOT EXISTS node_dp_runs(dataset TEXT NOT NULL, run TEXT NOT NULL, "
                      "steps INTEGER NOT NULL, eps REAL, delta REAL, params TEXT NOT NULL, users INTEGER, "
                      "updated REAL NOT NULL, PRIMARY KEY(dataset, run))")

    def record_node_dp(self, dataset: str, run: str, *, steps: int, params: dict, eps: float | None = None,
                       delta: float | None = None, users: int | None = None) -> dict:
        """Record the spend of a node-level DP-SGD run (relation ``"node-dp"``), written
        ahead of each release by :class:`ldpfast.privacy.NodeDPEngine`, and return the
        record as now stored (:meth:`node_dp_spent`).

        The step count only grows (a writer holding an older count, e.g. a process resumed
        from an earlier checkpoint, cannot lower it), so a checkpoint rollback cannot reset
        the spend; ``eps``/``delta`` (a bound on the spend of the recorded steps, when
        known) replace the stored ones only when given for at least the stored steps.
        ``params`` (the accounting settings, never a seed) must equal those already on
        record for a run with steps, since one accountant covers all of a run's steps.

        Parameters
        ----------
        dataset, run : str
            The data the run trains on and the run's name (non-empty).
        steps : int
            DP releases made by the run, >= 0.
        params : dict
            The settings the steps are accounted under (JSON-serialisable).
        eps, delta : float, optional
            A bound on the spend of ``steps`` steps (``inf``: not private).
        users : int, optional
            Number of candidate users (training nodes) whose node-DP the run spends.

        Raises
        ------
        ValueError
            Empty names, a negative count, or ``params`` other than the run's on record.
        """
        for name, v in (("dataset", dataset), ("run", run)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"{name}: expected a non-empty str, got {v!r}")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"steps: expected an int >= 0, got {steps!r}")
        text = json.dumps(params, sort_keys=True, default=str)
        c = self._con
        c.execute(self._NODE_DP_TABLE)
        c.execute("BEGIN IMMEDIATE")
        try:
            row = c.execute("SELECT steps, params FROM node_dp_runs WHERE dataset=? AND run=?",
                            (dataset, run)).fetchone()
            if row is not None and row[0] > 0 and row[1] != text:
                raise ValueError(f"run: {run!r} on {dataset!r} has {row[0]} steps on record under other settings "
                                 f"({row[1]}); one accountant covers all of a run's steps: use a new run name (the "
                                 "users' node-DP spend is then the sum over runs)")
            # SET expressions read the row as it was: eps moves only with at least its steps
            c.execute("INSERT INTO node_dp_runs VALUES(?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(dataset, run) DO UPDATE SET "
                      "eps = CASE WHEN excluded.eps IS NOT NULL AND excluded.steps >= steps THEN excluded.eps "
                      "ELSE eps END, delta = CASE WHEN excluded.eps IS NOT NULL AND excluded.steps >= steps "
                      "THEN excluded.delta ELSE delta END, steps = MAX(steps, excluded.steps), "
                      "params = excluded.params, users = COALESCE(excluded.users, users), updated = excluded.updated",
                      (dataset, run, steps, None if eps is None else float(eps),
                       None if delta is None else float(delta), text, users, time.time()))
            c.execute("COMMIT")
        except BaseException:
            c.execute("ROLLBACK")
            raise
        return self.node_dp_spent(dataset, run)

    def node_dp_spent(self, dataset: str, run: str | None = None):
        """The node-level DP-SGD spend on record (:meth:`record_node_dp`): for one ``run``,
        a dict ``{"steps", "eps", "delta", "params", "users", "updated"}`` or ``None``;
        without ``run``, ``{run: dict}`` of every run on ``dataset``.  Runs compose: the
        users' total node-DP spend on a dataset is at most the sum of the runs' ``eps``
        (and ``delta``)."""
        self._con.execute(self._NODE_DP_TABLE)
        q = "SELECT run, steps, eps, delta, params, users, updated FROM node_dp_runs WHERE dataset=?"
        args: tuple = (dataset,)
        if run is not None:
            q += " AND run=?"
            args += (run,)
        out = {r: {"steps": st, "eps": e, "delta": d, "params": json.loads(p), "users": u, "updated": t}
               for r, st, e, d, p, u, t in self._con.execute(q, args)}
        return out.get(run) if run is not None else out

_KNOWN: dict = {}  # (directory, dataset) -> stores found, once per process


def known_dataset_stores(dataset: str, directory: str | os.PathLike | None = None) -> list[str]:
    """Report-store files in ``directory`` (default: the working directory) that have recorded a
    release of ``dataset``: what :class:`~ldpfast.transforms.base.ReportOnce` checks so that a
    run which forgets its store does not pass in silence.  Looks at ``*.sqlite``, ``*.sqlite3``
    and ``*.db`` files (read-only; anything that is not an ldpfast store is skipped); the
    answer is cached per process."""
    d = Path(directory) if directory is not None else Path.cwd()
    key = (str(d.resolve()), dataset)
    if key in _KNOWN:
        return _KNOWN[key]
    found = []
    try:
        files = sorted(p for p in d.iterdir() if p.suffix in (".sqlite", ".sqlite3", ".db") and p.is_file())
    except OSError:
        files = []
    for p in files[:64]:
        try:
            with open(p, "rb") as f:
                if f.read(16) != b"SQLite format 3\x00":
                    continue
            con = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=0.5)
            try:
                ok = con.execute("SELECT 1 FROM meta WHERE key='schema'").fetchone() is not None and \
                    con.execute("SELECT 1 FROM datasets WHERE name=?", (dataset,)).fetchone() is not None
            finally:
                con.close()
        except (OSError, sqlite3.Error):
            continue
        if ok:
            found.append(str(p))
    _KNOWN[key] = found
    return found
