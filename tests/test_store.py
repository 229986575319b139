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

from ldpfast.datasets import load
from ldpfast.privacy import RELATIONS, Ledger, ReportStore, Spent
from ldpfast.transforms import DPRR, MultiBit, RRLabels


def _release(store, users, rids, eps=1.0, relation="node-ldp", mech="m", digest="d0", dataset="ds"):
    return store.release(dataset=dataset, mechanism=mech, params_digest=digest, params={"eps": eps},
                         relation=relation, eps=eps, delta=0.0, users=np.asarray(users, np.int64),
                         rids=np.asarray(rids, np.uint64))


def test_unchanged_reports_are_free_new_ones_charged_relations_apart(tmp_path):
    s = ReportStore(tmp_path / "s.sqlite")
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
    # the same users in another dataset are other users
    _release(s, [1], [10], dataset="other")
    with pytest.raises(ValueError, match="several datasets"):
        s.epsilon(1)


def test_budget_withholds_only_users_who_would_pass_it(tmp_path):
    s = ReportStore(tmp_path / "s.sqlite", budget={"node-ldp": 2.0})
    _release(s, [1, 2], [10, 20])
    _release(s, [1, 2], [11, 20])  # user 1 changes: total 2 (at the cap, allowed)
    r = _release(s, [1, 2], [12, 21])  # both change: user 1 would reach 3
    assert r.withheld.tolist() == [True, False] and r.new.tolist() == [False, True]
    assert s.epsilon(1, dataset="ds", relation="node-ldp") == 2.0
    r = _release(s, [1], [11])  # a report user 1 already has: free, never withheld
    assert not r.withheld.any() and r.reused == 1
    # eps / k reports add up to the cap exactly without a rounding refusal
    s2 = ReportStore(tmp_path / "t.sqlite", budget=1.0)
    for k in range(10):
        assert not _release(s2, [5], [k], eps=0.1).withheld.any()
    assert _release(s2, [5], [99], eps=0.1).withheld.all()


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(ValueError, match="relation"):
        ReportStore(tmp_path / "a.sqlite", budget={"edges": 1.0})
    with pytest.raises(ValueError, match="> 0"):
        ReportStore(tmp_path / "a.sqlite", budget=0.0)
    with pytest.raises(TypeError):
        ReportStore(tmp_path / "a.sqlite", budget=True)
    s = ReportStore(tmp_path / "a.sqlite")
    with pytest.raises(ValueError, match="relation"):
        _release(s, [1], [1], relation="labels")
    assert set(RELATIONS) == {"node-ldp", "edge-ldp", "node-dp"}


_KILLED = textwrap.dedent("""
    import sys, time
    import numpy as np
    from ldpfast.privacy import ReportStore
    s = ReportStore(sys.argv[1])
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
    s = ReportStore(path)
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
    s = ReportStore(path)
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
    store = ReportStore(tmp_path / "s.sqlite")
    kw = {"seed": 1, "user_key": "user_id", "dataset": "cora", "store": store}
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
    capped = ReportStore(tmp_path / "s.sqlite", budget={"node-ldp": 2.5})
    y = RRLabels(2.0, mask="all", seed=1, user_key="user_id", dataset="cora", store=capped)(d.clone())
    assert y.y_withheld.all() and (y.y == -1).all() and not y.y_rr_mask.any()
    assert y.ldp_ledger.entries[-1].params["store"]["withheld"] == d.num_nodes
