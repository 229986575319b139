"""The per-user report store (ldpfast.privacy.ReportStore) and the ledger's relations."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
import torch
from secret_keys import sec

from ldpfast.datasets import load
from ldpfast.privacy import RELATIONS, Ledger, ReportStore, Spent
from ldpfast.transforms import DPRR, MultiBit, RRLabels


@pytest.fixture(scope="module")
def cora():
    return load("cora")


def _release(store, users, rids, eps=1.0, relation="node-ldp", mech="m", digest="d0", dataset="ds"):
    return store.release(dataset=dataset, mechanism=mech, params_digest=digest, params={"eps": eps},
                         relation=relation, eps=eps, delta=0.0, users=np.asarray(users, np.int64),
                         rids=np.asarray(rids, np.uint64))


def test_unchanged_reports_are_free_new_ones_charged_relations_apart(tmp_path):
    s = ReportStore(tmp_path / "s.sqlite", create=True)
    r = _release(s, [1, 2, 3], [10, 20, 30])
    assert r.new.all() and r.reused == 0
    r = _release(s, [1, 2, 3, 4], [10, 21, 30, 40])  # user 2 changed, user 4 is new
    assert r.new.tolist() == [False, True, False, True] and r.reused == 2
    _release(s, [1], [2**64 - 1], eps=0.5, relation="edge-ldp", mech="dprr", digest="d1")  # rid above 2^63
    assert s.epsilon(1, dataset="ds") == {"node-ldp": 1.0, "edge-ldp": 0.5}
    assert s.epsilon(2, dataset="ds", relation="node-ldp") == 2.0
    assert s.epsilon(99, dataset="ds") == {}
    summ = s.summary("ds")
    assert summ["node-ldp"]["max"] == 2.0 and summ["node-ldp"]["users"] == 4 and summ["edge-ldp"]["users"] == 1
    text = s.describe("ds")
    assert "node-ldp" in text and "edge-ldp" in text and "4 users" in text
    assert [r["new"] for r in s.releases()] == [3, 2, 1]
    # the same user key in another dataset name is the same person: the totals add up
    _release(s, [1], [10], dataset="other")
    assert s.epsilon(1) == {"node-ldp": 2.0, "edge-ldp": 0.5}
    assert s.epsilon(1, dataset="other") == {"node-ldp": 1.0}
    users, eps = s.totals("node-ldp")
    assert users.tolist() == [1, 2, 3, 4] and eps.tolist() == [2.0, 2.0, 1.0, 1.0]


def test_budget_caps_the_sum_over_dataset_names(tmp_path, cora):
    """Issue 37, finding 4: sixteen names for one dataset gave 16 reports per user under a budget
    of 2 (plurality label accuracy 0.703, where any 2-LDP view allows 0.552).  The name separates
    randomness, not people: the budget caps the sum, so at most 2 reports of eps 1 get out."""
    store = ReportStore(tmp_path / "s.sqlite", budget={"node-ldp": 2.0}, create=True)
    d = cora.clone()
    d.user_id = torch.arange(d.num_nodes)
    votes = torch.zeros(d.num_nodes, 7)
    for k in range(16):
        out = RRLabels(1.0, mask="all", seed=sec(3), user_key="user_id", dataset=f"cora-{k}", store=store)(d.clone())
        ok = ~out.y_withheld if hasattr(out, "y_withheld") else torch.ones(d.num_nodes, dtype=torch.bool)
        votes[ok, out.y[ok]] += 1
        if k >= 2:
            assert not ok.any(), k  # every user has spent the budget
    assert max(store.epsilon(u, relation="node-ldp") for u in range(0, d.num_nodes, 97)) == 2.0
    acc = float((votes.argmax(1) == d.y).float().mean())
    assert acc < 0.6, acc  # two eps-1 reports' worth (0.552 is the 2-LDP optimum); 16 gave 0.703


def test_missing_or_empty_store_is_refused_unless_created(tmp_path):
    p = tmp_path / "gone.sqlite"
    with pytest.raises(FileNotFoundError, match="create=True"):
        ReportStore(p)
    assert not p.exists()  # refusing created nothing
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="empty file"):
        ReportStore(p)
    q = tmp_path / "new.sqlite"
    ReportStore(q, create=True).close()
    ReportStore(q).close()  # exists now: opens without create
    with pytest.raises(TypeError, match="create"):
        ReportStore(q, create="yes")


def test_store_is_one_file_at_rest_and_backs_up(tmp_path):
    """Finding 10: with WAL a committed release could live only in -wal; a copy of the .sqlite
    alone lost it.  Now a copy of the file, taken while the store is still open, has it all."""
    import shutil

    p = tmp_path / "s.sqlite"
    s = ReportStore(p, create=True)
    _release(s, [1, 2, 3], [10, 20, 30])
    assert not (tmp_path / "s.sqlite-wal").exists()
    copy = tmp_path / "copy.sqlite"
    shutil.copy(p, copy)  # the store is still open
    c = ReportStore(copy)
    assert c.epsilon(2) == {"node-ldp": 1.0}
    c.close()
    b = s.backup(tmp_path / "b.sqlite")
    with pytest.raises(FileExistsError):
        s.backup(b)
    s.close()
    assert ReportStore(b).epsilon(3) == {"node-ldp": 1.0}


def test_disk_full_names_the_disk_and_records_nothing(tmp_path, monkeypatch):
    """Finding 12: a full disk surfaced as "cannot rollback - no transaction is active"."""
    import sqlite3

    p = tmp_path / "s.sqlite"
    s = ReportStore(p, create=True)
    _release(s, [1], [10])
    real = s._con

    class Full:  # a connection whose COMMIT fails as SQLite's does when the disk fills
        def __getattr__(self, k):
            return getattr(real, k)

        def execute(self, q, *a):
            if q == "COMMIT":
                real.execute("ROLLBACK")  # SQLite rolls back itself on SQLITE_FULL
                raise sqlite3.OperationalError("database or disk is full")
            return real.execute(q, *a)

    s._con = Full()
    with pytest.raises(OSError, match="disk holding the report store .* is full") as e:
        _release(s, [1, 2], [11, 20])
    assert "no transaction is active" not in str(e.value)
    s._con = real
    assert s.epsilon(1) == {"node-ldp": 1.0} and s.epsilon(2) == {}  # nothing recorded


def test_release_where_most_known_users_changed_warns(tmp_path, cora):
    """Finding 13: user_id = arange(n) on a re-ordered snapshot gave 486 of 2708 people another
    user's report, free, silently.  Now most known users getting a new report at once warns."""
    s = ReportStore(tmp_path / "s.sqlite", create=True)
    d = cora.clone()
    d.user_id = torch.arange(d.num_nodes)
    kw = {"seed": sec(4), "user_key": "user_id", "dataset": "cora", "store": s}
    RRLabels(1.0, mask="all", **kw)(d.clone())
    perm = torch.randperm(d.num_nodes, generator=torch.Generator().manual_seed(0))
    snap = d.clone()
    snap.y = d.y[perm]  # the rows were re-ordered, the ids re-numbered 0..n-1: keys not stable
    with pytest.warns(UserWarning, match="user keys may not be stable"):
        RRLabels(1.0, mask="all", **kw)(snap)
    few = d.clone()
    few.y = d.y.clone()
    few.y[:20] = (few.y[:20] + 1) % 7  # a few real edits: no warning
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RRLabels(1.0, mask="all", **kw)(few)


def test_budget_withholds_only_users_who_would_pass_it(tmp_path):
    s = ReportStore(tmp_path / "s.sqlite", budget={"node-ldp": 2.0}, create=True)
    _release(s, [1, 2], [10, 20])
    _release(s, [1, 2], [11, 20])  # user 1 changes: total 2 (at the cap, allowed)
    r = _release(s, [1, 2], [12, 21])  # both change: user 1 would reach 3
    assert r.withheld.tolist() == [True, False] and r.new.tolist() == [False, True]
    assert s.epsilon(1, dataset="ds", relation="node-ldp") == 2.0
    r = _release(s, [1], [11])  # a report user 1 already has: free, never withheld
    assert not r.withheld.any() and r.reused == 1
    # eps / k reports add up to the cap exactly without a rounding refusal
    s2 = ReportStore(tmp_path / "t.sqlite", budget=1.0, create=True)
    for k in range(10):
        assert not _release(s2, [5], [k], eps=0.1).withheld.any()
    assert _release(s2, [5], [99], eps=0.1).withheld.all()


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="relation"):
        ReportStore(tmp_path / "a.sqlite", budget={"edges": 1.0}, create=True)
    with pytest.raises(ValueError, match="> 0"):
        ReportStore(tmp_path / "a.sqlite", budget=0.0, create=True)
    with pytest.raises(TypeError):
        ReportStore(tmp_path / "a.sqlite", budget=True, create=True)
    s = ReportStore(tmp_path / "a.sqlite", create=True)
    with pytest.raises(ValueError, match="relation"):
        _release(s, [1], [1], relation="labels")
    assert set(RELATIONS) == {"node-ldp", "edge-ldp", "node-dp"}


_KILLED = textwrap.dedent("""
    import sys, time
    import numpy as np
    from ldpfast.privacy import ReportStore
    s = ReportStore(sys.argv[1], create=True)
    n = 1_000_000
    def progress(phase, done, total):
        print(phase, done, flush=True)
        if phase == "written":
            time.sleep(60)  # killed here: every new report written, the transaction not committed
    s.release(dataset="ds", mechanism="m", params_digest="d1", params={}, relation="node-ldp", eps=1.0, delta=0.0,
              users=np.arange(n), rids=np.arange(n, dtype=np.uint64) + 7, progress=progress)
""")


def test_a_release_killed_part_way_leaves_the_store_as_it_was(tmp_path):
    path = tmp_path / "s.sqlite"
    s = ReportStore(path, create=True)
    _release(s, [1, 2, 3], [10, 20, 30])
    before = (s.summary(), s.releases())
    s.close()
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(path)], stdout=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    phase, seen = "", 0
    deadline = time.time() + 120
    while phase != "written" and time.time() < deadline:  # wait until the reports are written, uncommitted
        line = proc.stdout.readline()
        if not line:
            break
        phase, seen = line.split()[0], int(line.split()[1])
    assert phase == "written" and seen == 1_000_000, "the release did not get far enough to be killed part-way"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    s = ReportStore(path, create=True)
    assert (s.summary(), s.releases()) == before
    assert s.epsilon(500_000, dataset="ds") == {}
    # and the store still takes releases
    assert _release(s, [4], [40]).new.all()


def test_ledger_keeps_relations_apart():
    led = Ledger([Spent("multibit", "features", 1.0), Spent("rr_labels", "labels", 0.5),
                  Spent("dprr", "edges", 4.0)])
    assert led.by_relation() == {"node-ldp": {"eps": 1.5, "delta": 0.0}, "edge-ldp": {"eps": 4.0, "delta": 0.0}}
    with pytest.raises(ValueError, match="2 privacy relations"):
        _ = led.eps
    assert "node-ldp eps 1.5 (multibit 1 + rr_labels 0.5)" in led.summary()
    assert "edge-ldp eps 4 (dprr 4)" in led.summary()
    d = led.to_dict()
    assert d["eps"] is None and d["by_relation"]["edge-ldp"]["eps"] == 4.0
    assert Ledger([Spent("multibit", "features", 1.0)]).eps == 1.0


def test_transforms_record_releases_in_the_store(tmp_path):
    d = load("cora")
    d.user_id = torch.arange(d.num_nodes) + 10
    store = ReportStore(tmp_path / "s.sqlite", create=True)
    kw = {"seed": sec(1), "user_key": "user_id", "dataset": "cora", "store": store}
    out = DPRR(4.0, **kw)(RRLabels(1.0, mask="all", **kw)(MultiBit(1.0, **kw)(d.clone())))
    summ = store.summary("cora")
    assert summ["node-ldp"]["max"] == 2.0 and summ["edge-ldp"]["max"] == pytest.approx(4.0)
    entry = out.ldp_ledger.entries[-1]
    assert entry.params["store"]["new"] == d.num_nodes and not out.edge_withheld.any()
    # again, unchanged: nothing new, the identical outputs
    again = DPRR(4.0, **kw)(RRLabels(1.0, mask="all", **kw)(MultiBit(1.0, **kw)(d.clone())))
    assert torch.equal(again.x, out.x) and torch.equal(again.y, out.y)
    assert torch.equal(again.edge_index, out.edge_index)
    assert [e.params["store"]["new"] for e in again.ldp_ledger.entries] == [0, 0, 0]
    # a budget withholds users whose next report would pass it, and marks them
    capped = ReportStore(tmp_path / "s.sqlite", budget={"node-ldp": 2.5}, create=True)
    y = RRLabels(2.0, mask="all", seed=sec(1), user_key="user_id", dataset="cora", store=capped)(d.clone())
    assert y.y_withheld.all() and (y.y == -1).all() and not y.y_rr_mask.any()
    assert y.ldp_ledger.entries[-1].params["store"]["withheld"] == d.num_nodes


def test_a_release_outside_the_store_does_not_pass_in_silence(tmp_path, cora, monkeypatch):
    """Finding 15: a nightly job that builds a new transform without user_key/store released a
    second report with no error and no warning."""
    import ldpfast.privacy.store as S
    import ldpfast.transforms.base as B

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(S, "_KNOWN", {})
    monkeypatch.setattr(B, "_WARNED", set())
    d = cora.clone()
    d.user_id = torch.arange(d.num_nodes)
    store = ReportStore(tmp_path / "reports.sqlite", create=True)
    RRLabels(1.0, mask="all", seed=sec(8), user_key="user_id", dataset="nightly", store=store)(d.clone())
    store.close()
    with pytest.warns(UserWarning, match="already accounts dataset 'nightly'"):
        RRLabels(1.0, mask="all", seed=3, dataset="nightly")  # the job that forgot its store
    with pytest.warns(UserWarning, match="has no store: its reports are memoised"):
        MultiBit(1.0, seed=sec(1), user_key="user_id")
    with pytest.warns(UserWarning, match="named dataset"):
        RRLabels(1.0, seed=3, dataset="weekly")
    import warnings

    with warnings.catch_warnings():  # once per process and rule
        warnings.simplefilter("error")
        RRLabels(2.0, seed=4, dataset="weekly")
        RRLabels(1.0, seed=3)  # one release of one graph: nothing to warn about


def test_randomize_refuses_to_run_without_a_store_unless_told(tmp_path, capsys):
    from ldpfast.cli import main

    (tmp_path / "in").mkdir()
    args = ["randomize", str(tmp_path / "in"), str(tmp_path / "out"), "--labels", "5", "--label-eps", "1"]
    assert main(args) == 2
    assert "no --store" in capsys.readouterr().err
    assert main(args + ["--no-store", "--store", str(tmp_path / "s.sqlite")]) == 2
    assert "not both" in capsys.readouterr().err
    assert main(args + ["--store", str(tmp_path / "s.sqlite")]) == 2
    assert "--create-store" in capsys.readouterr().err
    assert not (tmp_path / "s.sqlite").exists()


def test_secrets_memoised_reports_refuse_small_ints(tmp_path, cora):
    """Finding 5: the README's example secret 2024 was found in 0.4 s from the store file."""
    from ldpfast.privacy import load_secret, new_secret

    d = cora.clone()
    d.user_id = torch.arange(d.num_nodes)
    with pytest.raises(ValueError, match="int secret is refused"):
        RRLabels(1.0, seed=2024, user_key="user_id")
    with pytest.raises(ValueError, match="too short"):
        RRLabels(1.0, seed=b"2024", user_key="user_id")
    key = new_secret(tmp_path / "k")
    assert len(key) == 32 and load_secret(tmp_path / "k") == key
    assert (tmp_path / "k").stat().st_mode & 0o077 == 0  # only the owner can read it
    with pytest.raises(FileExistsError):
        new_secret(tmp_path / "k")
    with pytest.raises(FileNotFoundError, match="new_secret"):
        load_secret(tmp_path / "missing")
    assert len(load_secret(tmp_path / "made", create=True)) == 32
    RRLabels(1.0, seed=key, user_key="user_id")  # accepted
    RRLabels(1.0, seed=2024)  # nothing memoised: an int is fine
