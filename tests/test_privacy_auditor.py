"""The empirical privacy auditor (issue 37, item 9): ``ldpfast.privacy.audit``.

Every mechanism under every change model, with and without user keys and a report store: the
lower bound ``eps_lb`` never exceeds what the store (or the ledger) charged, at a stated
false-alarm rate (each bound at confidence ``CONF``: a correct implementation fails one point
with probability at most ``1 - CONF``, and far less here, the attacks not being optimal).
The auditor is not vacuous: it refutes a charge that is too low (RGNN Theorem 1's figure, a
store that under-charges, too little DP-SGD noise) and flags findings 1 and 2 of issue 37 on
the code they were found on (b44dbae refuted both: eps_lb 4.98 against 2 and 3.85 against 1; they
pass since the fixes).
Small inputs in the default run (about 40 s on one core); larger ones under ``-m slow``.
"""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
import torch

from ldpfast.privacy.audit import (
    CHANGE_MODELS,
    MECHANISMS,
    AuditReport,
    audit,
    audit_mechanism,
    audit_pipeline,
    choose_region,
    clopper_pearson_upper,
    eps_from_counts,
    eps_from_rates,
)

CONF = 0.99  # per point, in the grids below

# (transform, function) of every mechanism family; None where one has no transform
FAMILIES = [("GRRFS", "grr_fs"), (None, "grr"), ("MultiBit", "multibit_encode"), ("OneBit", "onebit"),
            ("RRLabels", "rr_labels"), ("RREdges", "rr_edges"), ("DPRR", "dprr"), ("LocalLap", "local_laplace")]
FEATURES = {"GRRFS", "grr_fs", "grr", "MultiBit", "multibit_encode", "OneBit", "onebit"}
UNKEYED_ONLY = {"LocalLap", "local_laplace"}

# Combinations that refute the charge on b44dbae (issue 37 findings 1 and 2), tested strictly by
# test_finding1_* and test_finding2_* below; here they are allowed to fail (not strict: with few
# canaries the attack may lack the power).  The lead empties this dict with the fixes.
KNOWN: dict = {}  # emptied with the fixes (b44dbae's entries: findings 1 and 2, see below)


def _cases(default_run: bool):
    """(mechanism, change, keyed, store) for every family and change model: the transform with
    user keys and a store, the function with user keys (no store), and without user keys."""
    out = []
    for tr, fn in FAMILIES:
        for change in CHANGE_MODELS:
            if change == "add_column" and fn not in FEATURES:
                continue
            variants = []
            if fn not in UNKEYED_ONLY:
                if tr is not None:
                    variants.append((tr, True, True))
                if not (default_run and fn == "dprr"):  # DPRR's hub-dense canaries: the slow grid
                    variants.append((fn, True, False))
            variants.append((tr or fn, False, False))
            if tr is not None and not (default_run and fn in ("dprr", "local_laplace")):
                variants.append((fn, False, False))  # the function without user keys: rows keyed by position
            for mech, keyed, store in variants:
                marks = []
                if (mech, change, keyed) in KNOWN:
                    marks.append(pytest.mark.xfail(strict=False, reason=f"issue 37 {KNOWN[mech, change, keyed]}"))
                out.append(pytest.param(mech, change, keyed, store, marks=marks,
                                        id=f"{mech}-{change}-{'keyed' if keyed else 'rows'}{'-store' if store else ''}"))
    return out


def _check_report(r: AuditReport, mech: str, change: str, keyed: bool, store: bool, releases: int):
    assert r.change == change and r.keyed == keyed and r.store == store
    assert r.charge_source == ("store" if store else "ledger")
    assert [p.releases for p in r.points] == list(range(1, releases + 1))
    for p in r.points:
        assert 0.0 <= p.eps_lb and math.isfinite(p.eps_lb)
        assert p.charge > 0 and p.charge_min <= p.charge
        assert p.n0 > 0 and p.n1 > 0
    bad = [(p.releases, round(p.eps_lb, 3), p.charge, p.test) for p in r.points if p.refuted]
    assert not bad, f"{mech} change={change}: eps_lb above the charge at (k, eps_lb, charge, test) {bad}"
    if change == "edit":
        assert r.points[0].eps_lb == 0.0 or r.points[0].eps_lb < 0.5  # release 1 is the same in both worlds
    if change == "static" and store:  # unchanged users re-released: charged once
        assert r.points[-1].charge == pytest.approx(r.points[0].charge)


@pytest.mark.parametrize("mech,change,keyed,store", _cases(default_run=True))
def test_eps_lb_at_most_charge(mech, change, keyed, store):
    r = audit_mechanism(mech, eps=1.0, change=change, releases=2, canaries=160, keyed=keyed, store=store,
                        confidence=CONF, seed=11)
    _check_report(r, mech, change, keyed, store, 2)


@pytest.mark.slow
@pytest.mark.parametrize("mech,change,keyed,store", _cases(default_run=False))
def test_eps_lb_at_most_charge_large(mech, change, keyed, store):
    canaries = {"DPRR": 1000, "dprr": 1000, "LocalLap": 1000, "local_laplace": 1000, "RREdges": 1500,
                "rr_edges": 1500}.get(mech, 3000)
    r = audit_mechanism(mech, eps=1.0, change=change, releases=4, canaries=canaries, keyed=keyed, store=store,
                        confidence=CONF, seed=12)
    _check_report(r, mech, change, keyed, store, 4)


# --- the auditor has power --------------------------------------------------------------------
@pytest.mark.parametrize("mech,floor", [("RRLabels", 0.6), ("MultiBit", 0.5), ("OneBit", 0.4), ("GRRFS", 0.4),
                                        ("grr", 1.0), ("RREdges", 0.55)])
def test_one_release_has_power(mech, floor):
    """One release, 1500 canaries per world: eps_lb is a good part of the charge (eps 1; grr: 2
    columns, charge 2), and below it (at CONF, as the grids: the attack on RRLabels is nearly
    optimal, so at 0.95 a bound above the charge is a 5% event, seen at seed 3)."""
    r = audit_mechanism(mech, eps=1.0, releases=1, canaries=1500, seed=3, confidence=CONF)
    assert floor <= r.eps_lb <= r.charge


def test_majority_vote_over_fresh_reports_grows_with_k():
    """Without user keys every changed graph is a fresh report: the attack's bound grows with the
    number of releases (a majority vote), and stays below the ledger's k eps."""
    r = audit_mechanism("RRLabels", eps=1.0, change="join", releases=4, canaries=1500, keyed=False, seed=5)
    lbs = [p.eps_lb for p in r.points]
    assert lbs[-1] > 1.0 + 0.3 and lbs[-1] > lbs[0] + 0.5
    assert [p.charge for p in r.points] == pytest.approx([1.0, 2.0, 3.0, 4.0])
    assert not r.refuted
    # with user keys and a store the same users keep their report: nothing more to learn or charge
    r = audit_mechanism("RRLabels", eps=1.0, change="join", releases=4, canaries=1500, seed=5)
    assert [p.charge for p in r.points] == pytest.approx([1.0] * 4)
    assert max(p.eps_lb for p in r.points) == pytest.approx(r.points[0].eps_lb)


@pytest.mark.slow
@pytest.mark.parametrize("mech,params,canaries,ratio", [
    ("RRLabels", {}, 20000, 0.9), ("MultiBit", {}, 20000, 0.85), ("OneBit", {}, 20000, 0.8),
    ("GRRFS", {"m": 1}, 20000, 0.8), ("RREdges", {}, 6000, 0.85)])
def test_one_release_is_tight(mech, params, canaries, ratio):
    """docs/privacy_audit.md's tightness: eps_lb / eps on one release with many canaries."""
    r = audit_mechanism(mech, eps=1.0, params=params, releases=1, canaries=canaries, seed=4)
    assert ratio * r.charge <= r.eps_lb <= r.charge


# --- the auditor refutes charges that are too low ---------------------------------------------
def test_refutes_rgnn_theorem1_accounting():
    """GRR-FS charged RGNN Theorem 1's figure (issue 37 finding 3: not an LDP bound): eps_x 3,
    m 1 of d 2 is charged ln(1 + (e^3 - 1) / 2) = 2.36 while the exact cost is 3."""
    r = audit_mechanism("grr_fs", eps=3.0, params={"m": 1, "accounting": "rgnn_theorem1"}, releases=1,
                        canaries=3000, seed=1)
    assert r.charge == pytest.approx(math.log(1 + (math.exp(3) - 1) / 2))
    assert r.refuted and r.eps_lb > r.charge
    exact = audit_mechanism("grr_fs", eps=3.0, params={"m": 1}, releases=1, canaries=3000, seed=1)
    assert exact.charge == pytest.approx(3.0) and not exact.refuted


def test_refutes_a_store_that_undercharges(monkeypatch):
    """A store that records a quarter of each report's eps: the auditor compares against the
    store's totals, so it refutes them."""
    from ldpfast.privacy import ReportStore

    orig = ReportStore.release

    def cheap(self, **kw):
        kw["eps"] = kw["eps"] / 4
        return orig(self, **kw)

    monkeypatch.setattr(ReportStore, "release", cheap)
    r = audit_mechanism("RRLabels", eps=2.0, releases=1, canaries=1000, seed=2)
    assert r.charge_source == "store" and r.charge == pytest.approx(0.5)
    assert r.refuted


def test_dpsgd_audit_joins_the_api():
    """audit("heterpoisson", ...) runs Algorithm 4 and returns the release audits' report shape."""
    from torch_geometric.data import Data

    from ldpfast.graph import clean_edge_index

    g = torch.Generator().manual_seed(3)
    n = 200
    y = torch.randint(0, 2, (n,), generator=g)
    a = torch.triu(torch.rand(n, n, generator=g) < 0.03, 1)
    data = Data(x=torch.randn(n, 4, generator=g), y=y, edge_index=clean_edge_index(torch.nonzero(a).t(), n),
                num_nodes=n)
    kw = {"data": data, "q_b": 0.2, "M": 2.0, "T": 20, "delta": 1e-5, "eps": 2.0, "train_model": False, "num_observations": 200,
              "runs": 2000}
    r = audit("heterpoisson", **kw)
    assert isinstance(r, AuditReport) and r.relation == "node-dp" and r.charge_source == "accountant"
    assert [p.releases for p in r.points] == [1, 20]
    assert r.charge == pytest.approx(2.0, abs=5e-3) and not r.refuted
    bad = audit("dpsgd", **{**kw, "noise_scale": 0.3})
    assert bad.refuted and bad.point(20).eps_lb > bad.point(20).charge


# --- issue 37 findings 1 and 2, on the code they were found on --------------------------------
def test_finding1_keyed_edge_reports_hide_which_bits_changed():
    """RREdges with user keys and a store, eps 1: release 2 adds a decoy edge (world 0) or the decoy
    and the target edge (world 1) to every canary's list.  Each list changed, so the store charges
    2; if only the changed bits are redrawn, the target bit flips only in world 1 (b44dbae:
    eps_lb 3.77 with 600 canaries per world)."""
    r = audit_mechanism("RREdges", eps=1.0, change="edit", releases=2, canaries=600, seed=0)
    assert r.charge == pytest.approx(2.0)
    assert not r.refuted, r.summary()


def test_finding2_a_changed_report_is_charged():
    """GRRFS (m 1, eps_x 1) with user keys and a store: release 2 appends a zero column to every
    row.  The report changes, so it must be charged; b44dbae reused the report id (charge 1)
    while the released values changed (eps_lb 3.85 with 5000 canaries per world)."""
    r = audit_mechanism("GRRFS", eps=1.0, params={"m": 1}, change="add_column", releases=2, canaries=5000, seed=0)
    assert not r.refuted, r.summary()


def test_finding2_functional_grr_fs_without_keys():
    """The function grr_fs keys each row by its position and a zero-padded digest: with a zero
    column appended, the two releases share their randomness, which leaks more than the
    ledger's two independent reports (b44dbae: eps_lb 3.84 against 2 with 5000 canaries per world)."""
    r = audit_mechanism("grr_fs", eps=1.0, params={"m": 1}, change="add_column", releases=2, canaries=5000,
                        keyed=False, seed=0)
    assert not r.refuted, r.summary()


# --- a pipeline, the outputs, the command line -------------------------------------------------
def test_pipeline_reports_each_relation(tmp_path):
    stages = [("MultiBit", {"eps": 1.0}), ("RRLabels", {"eps": 0.5}), ("RREdges", {"eps": 1.0})]
    reps = audit_pipeline(stages, change="join", releases=3, canaries=200, seed=1, store=tmp_path / "s.sqlite")
    assert set(reps) == {"node-ldp", "edge-ldp"}
    node, edge = reps["node-ldp"], reps["edge-ldp"]
    assert node.mechanism == "MultiBit+RRLabels" and edge.mechanism == "RREdges"
    assert node.charge == pytest.approx(1.5) and edge.charge == pytest.approx(1.0)  # join: nobody re-charged
    assert not node.refuted and not edge.refuted
    # join: every user of the release before is re-released unchanged, and charged nothing
    log = node.releases_log
    assert [e["store"]["RRLabels"]["reused"] for e in log[1:]] == [e["users"] for e in log[:-1]]
    assert all(e["store"]["RRLabels"]["new"] == b["users"] - a["users"] for a, b in itertools.pairwise(log) for e in [b])
    assert (tmp_path / "s.sqlite").exists()  # a path given: the store is kept


def test_report_json_plot_and_no_secret(tmp_path):
    secret = bytes(range(16))
    r = audit_mechanism("OneBit", eps=1.0, change="sweep", releases=3, canaries=100, secret=secret,
                        eps_sweep=[1, 2, 0.5])
    assert [p.charge for p in r.points] == pytest.approx([1.0, 3.0, 3.5])
    d = json.loads(r.to_json(tmp_path / "r.json").read_text())
    assert d["eps_lb"] == r.eps_lb and d["charge"] == r.charge and len(d["points"]) == 3
    assert d["confidence_joint"] == pytest.approx(1 - 3 * 0.05)
    text = json.dumps(d)
    assert secret.hex() not in text and "secret" not in text and "seed" not in text
    png = r.plot(tmp_path / "r.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "k=3" in r.summary()


def test_same_seed_same_audit():
    a = audit_mechanism("GRRFS", eps=1.0, change="permute", releases=2, canaries=100, seed=9)
    b = audit_mechanism("GRRFS", eps=1.0, change="permute", releases=2, canaries=100, seed=9)
    assert a.to_dict() == b.to_dict()


def test_cli_audit(tmp_path, capsys):
    from ldpfast.cli import main

    js, png = tmp_path / "a.json", tmp_path / "a.png"
    rc = main(["audit", "RRLabels", "--eps", "1", "--change", "static", "--change", "permute", "--releases", "2",
               "--canaries", "100", "--json", str(js), "--plot", str(png), "--quiet"])
    assert rc == 0
    out = json.loads(js.read_text())
    assert [o["change"] for o in out] == ["static", "permute"] and png.stat().st_size > 0
    # a refuted charge: exit status 1 and a message naming the charge
    rc = main(["audit", "grr_fs", "--eps", "3", "--param", "m=1", "--param", 'accounting="rgnn_theorem1"',
               "--releases", "1", "--canaries", "3000", "--seed", "1"])
    assert rc == 1
    cap = capsys.readouterr()
    assert "REFUTED" in cap.out and "charge" in cap.err and "refuted" in cap.err
    with pytest.raises(SystemExit, match="change"):
        main(["audit", "RRLabels", "--change", "sideways"])


@pytest.mark.parametrize("kwargs,match", [
    ({"mechanism": "Nope"}, "mechanism"),
    ({"mechanism": "RRLabels", "change": "sideways"}, "change"),
    ({"mechanism": "RRLabels", "keyed": False, "store": True}, "store"),
    ({"mechanism": "rr_labels", "store": True}, "store"),
    ({"mechanism": "LocalLap"}, "keyed"),
    ({"mechanism": "RRLabels", "change": "add_column"}, "add_column"),
    ({"mechanism": "RRLabels", "eps_sweep": [1, 2]}, "eps_sweep"),
    ({"mechanism": "RRLabels", "change": "sweep", "releases": 3, "eps_sweep": [1, 2]}, "eps_sweep"),
    ({"mechanism": "RRLabels", "canaries": 2}, "canaries"),
    ({"mechanism": "RRLabels", "confidence": 1.5}, "confidence"),
    ({"mechanism": "RRLabels", "eps": 0.0}, "eps"),
    ({"mechanism": "RRLabels", "secret": b"short"}, "secret"),
    ({"mechanism": "RRLabels", "design": {"colour": 1}}, "design"),
    ({"mechanism": "RRLabels", "params": {"seed": 1}}, "seed"),
])
def test_bad_arguments_are_refused(kwargs, match):
    with pytest.raises((ValueError, TypeError), match=match):
        audit_mechanism(**kwargs)


def test_existing_store_file_is_refused(tmp_path):
    p = tmp_path / "prod.sqlite"
    p.write_bytes(b"")
    with pytest.raises(ValueError, match="store"):
        audit_mechanism("RRLabels", store=p)


def test_every_mechanism_is_listed():
    from ldpfast import mechanisms, transforms

    for name, api in MECHANISMS.items():
        assert hasattr(transforms if api == "transform" else mechanisms, name)
    # a class or function object names its mechanism
    r = audit_mechanism(transforms.RRLabels, releases=1, canaries=50)
    assert r.mechanism == "RRLabels"


# --- the statistics -------------------------------------------------------------------------------
def test_clopper_pearson_and_eps_formula():
    from scipy import stats

    assert clopper_pearson_upper(0, 100, 0.975) == pytest.approx(1 - 0.025 ** (1 / 100))
    assert clopper_pearson_upper(5, 5, 0.95) == 1.0 and clopper_pearson_upper(0, 0, 0.95) == 1.0
    assert clopper_pearson_upper(30, 100, 0.9) == pytest.approx(stats.beta.ppf(0.9, 31, 70))
    e = math.log((1 - 0.2) / 0.1)
    assert eps_from_rates(0.1, 0.2) == pytest.approx(e)
    assert eps_from_rates(0.5, 0.5) == 0.0 and eps_from_rates(0.0, 0.0) == math.inf
    lb, fu, nu = eps_from_counts(10, 100, 20, 100, confidence=0.9)
    assert fu == pytest.approx(clopper_pearson_upper(10, 100, 0.95))
    assert lb == pytest.approx(max(math.log((1 - nu) / fu), math.log((1 - fu) / nu)))


def test_false_alarm_rate_of_the_bound():
    """The bound's guarantee, checked by simulation: for a test whose error rates sit exactly on
    the eps-DP boundary (FPR = FNR = 1 / (1 + e^eps)), eps_lb exceeds eps in at most
    ``1 - confidence`` of the experiments (here far less: Clopper-Pearson is conservative)."""
    rng = np.random.default_rng(0)
    eps, n, reps = 1.0, 400, 20000
    f = 1 / (1 + math.exp(eps))
    fp, fn = rng.binomial(n, f, reps), rng.binomial(n, f, reps)
    lb, _, _ = eps_from_counts(fp, n, fn, n, confidence=0.9)
    assert np.mean(lb > eps) <= 0.1
    assert np.mean(lb) > 0.5 * eps  # and the bound is not trivially low


def test_choose_region_finds_the_likelihood_ratio_set():
    rng = np.random.default_rng(1)
    c0 = rng.choice(4, 4000, p=[0.4, 0.3, 0.29, 0.01])
    c1 = rng.choice(4, 4000, p=[0.1, 0.1, 0.1, 0.7])
    r = choose_region("s", c0, c1, numeric=False)
    assert set(r.values) == {3} and r.contains(np.array([3, 0])).tolist() == [True, False]
    r = choose_region("s", c0, c1, numeric=True)
    assert r.eps_select > 1.5
    assert choose_region("s", np.zeros(10, int), np.zeros(10, int), numeric=True) is None
