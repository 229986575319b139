"""Sharded randomisation on a 2-worker Dask LocalCluster equals the single-machine calls bit
for bit (DPRR, RR, LocalLap, features, labels), keyed like them (:mod:`ldpfast.privacy.users`:
user ids when the shards carry them, else the input's identity); failures leave nothing that
looks complete."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from secret_keys import sec

from ldpfast.datasets import synthetic
from ldpfast.distributed import shards as SH
from ldpfast.mechanisms import (
    dprr,
    grr_fs,
    local_laplace,
    multibit_encode,
    onebit,
    rr_edges,
    rr_labels,
)

SEED = 0xC0FFEE_1234_5678
# shards without user ids warn that each run is a fresh release (checked once, below)
pytestmark = pytest.mark.filterwarnings("ignore:randomize. the shards carry no user ids")


def _rows_keying(csr, **nodes):
    """The Keying a single-machine call needs to equal a run on shards without user ids."""
    from ldpfast.privacy.users import Keying

    return Keying(SEED, graph=SH.graph_identity(csr, SEED, **nodes))


@pytest.fixture(scope="module")
def client():
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
                               memory_limit="3GiB",
                               env={"LDPFAST_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
        c = Client(cluster)
        yield c
        c.close()
        cluster.close()


def _edges(csr, upper=False):
    rp, col = csr.rowptr.numpy(), csr.col.numpy().astype(np.int64)
    src = np.repeat(np.arange(csr.num_nodes, dtype=np.int64), np.diff(rp))
    if upper:
        m = src < col
        src, col = src[m], col[m]
    return np.stack([src, col])


@pytest.fixture(scope="module")
def big(tmp_path_factory):
    """About a million undirected edges (2M directed entries), 7 shards, features and labels."""
    data = synthetic(50_000, avg_degree=40.0, seed=3)
    n = data.num_nodes
    g = torch.Generator().manual_seed(1)
    xc = torch.randint(0, 4, (n, 6), generator=g)
    y = torch.randint(0, 5, (n,), generator=g)
    mask = torch.rand(n, generator=g) < 0.6
    d = tmp_path_factory.mktemp("big")
    SH.write_shards(data, d / "in", 7, x=xc, y=y, y_mask=mask)
    return data.csr, xc, y, mask, d


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    data = synthetic(1_500, avg_degree=8.0, seed=4)
    g = torch.Generator().manual_seed(2)
    xf = torch.rand(data.num_nodes, 5, generator=g, dtype=torch.float64)
    d = tmp_path_factory.mktemp("small")
    SH.write_shards(data, d / "in", 3, x=xf)
    return data.csr, xf, d


def _no_output(out):
    if not out.exists():  # created by the call and removed again
        return
    assert not any(out.glob("part-*")) and not any(out.glob("nodes-*")) and not (out / "meta.json").exists()
    assert not any(p.name.startswith(".staging") and any(p.glob("part-*")) for p in out.iterdir())


def test_dprr_features_labels_bit_identical(client, big):
    csr, xc, y, mask, d = big
    assert csr.nnz >= 1_900_000  # ~1M undirected edges
    rep = SH.randomize(d / "in", d / "dprr", seed=SEED, client=client, edges={"mechanism": "dprr", "eps": 2.0},
                       features={"mechanism": "grr_fs", "k": 4, "eps": 1.0, "m": 2},
                       labels={"num_classes": 5, "eps": 1.0})
    got = SH.read_shards(d / "dprr")
    nodes = {"x": xc, "y": y, "y_mask": mask}
    ref = dprr(csr, 2.0, _keying=_rows_keying(csr, **nodes))
    assert np.array_equal(got["edge_index"].numpy(), _edges(ref.noisy))
    assert torch.equal(got["x"], grr_fs(xc, 4, 1.0, 2, _keying=_rows_keying(csr, **nodes))[0])
    assert torch.equal(got["y"], rr_labels(y, 5, 1.0, mask=mask, _keying=_rows_keying(csr, **nodes))[0])
    # finding 6: the labels that are reports are marked, and counted; the others are raw
    assert torch.equal(got["y_rr_mask"], mask) and torch.equal(got["y"][~mask], y[~mask])
    meta = json.loads((d / "dprr" / "meta.json").read_text())
    assert meta["labels"]["randomised"] == int(mask.sum()) == rep.spent[2].params["num_randomised"]
    assert rep.spent[0].eps == ref.spent.eps and rep.spent[0].params["eps2"] == ref.spent.params["eps2"]
    assert rep.num_edges_out == ref.noisy.nnz
    text = (d / "dprr" / "meta.json").read_text()
    assert str(SEED) not in text and hex(SEED)[2:] not in text
    assert len(json.loads(text)["shards"]) == 7


def test_locallap_and_multibit_bit_identical(client, big):
    csr, xc, y, mask, d = big
    rep = SH.randomize(d / "in", d / "ll", seed=SEED, client=client, edges={"mechanism": "locallap", "eps": 3.0})
    ref = local_laplace(csr, 3.0, _keying=_rows_keying(csr, x=xc, y=y, y_mask=mask))
    got = SH.read_shards(d / "ll")
    assert np.array_equal(got["edge_index"].numpy(), _edges(ref.noisy, upper=True))
    assert rep.spent[0].params["T"] == ref.spent.params["T"]
    assert rep.spent[0].params["candidates"] == ref.spent.params["candidates"]


@pytest.mark.slow  # compiles the Numba RR row driver in both workers (~10 s cold); same bits as "cpp"
def test_numba_engine_bit_identical(client, small):
    csr, xf, d = small
    SH.randomize(d / "in", d / "dprr_nb", seed=SEED, client=client, engine="numba",
                 edges={"mechanism": "dprr", "eps": 1.5})
    ref = dprr(csr, 1.5, _keying=_rows_keying(csr, x=xf))
    assert np.array_equal(SH.read_shards(d / "dprr_nb")["edge_index"].numpy(), _edges(ref.noisy))


def test_locallap_extra_threshold_rounds_bit_identical(client, small):
    csr, xf, d = small
    # force the rare lower-threshold rounds (probability < e^-50 in real runs)
    SH.randomize(d / "in", d / "ll2", seed=SEED, client=client,
                 edges={"mechanism": "locallap", "eps": 1.0, "_target": 50.0})
    ref = local_laplace(csr, 1.0, _target=50.0, _keying=_rows_keying(csr, x=xf))
    assert ref.spent.params["threshold_rounds"] > 1
    assert np.array_equal(SH.read_shards(d / "ll2")["edge_index"].numpy(), _edges(ref.noisy, upper=True))
    # a forced split low enough that the picks above it get their values drawn
    SH.randomize(d / "in", d / "ll3", seed=SEED, client=client,
                 edges={"mechanism": "locallap", "eps": 1.0, "_target": 20000.0, "_split_target": 8000.0})
    ref = local_laplace(csr, 1.0, _target=20000.0, _split_target=8000.0, _keying=_rows_keying(csr, x=xf))
    assert np.array_equal(SH.read_shards(d / "ll3")["edge_index"].numpy(), _edges(ref.noisy, upper=True))


def test_rr_and_onebit_multibit_bit_identical(client, small):
    csr, xf, d = small
    SH.randomize(d / "in", d / "rr", seed=SEED, client=client,
                 edges={"mechanism": "rr", "eps": 4.0, "max_output_edges": 10**7},
                 features={"mechanism": "onebit", "eps": 2.0})
    got = SH.read_shards(d / "rr")
    ref = rr_edges(csr, 4.0, max_output_edges=10**7, _keying=_rows_keying(csr, x=xf))
    assert np.array_equal(got["edge_index"].numpy(), _edges(ref.noisy))
    assert torch.equal(got["x"], onebit(xf, 2.0, _keying=_rows_keying(csr, x=xf))[0])
    SH.randomize(d / "in", d / "mb", seed=SEED, client=client, features={"mechanism": "multibit", "eps": 3.0, "m": 2})
    assert torch.equal(SH.read_shards(d / "mb")["x"], multibit_encode(xf, 3.0, 2, _keying=_rows_keying(csr, x=xf))[0])


def test_bad_input_raises_and_writes_nothing(client, small, tmp_path):
    csr, _xf, d = small
    # an edge removed from one shard only: the adjacency is no longer symmetric across shards
    import pyarrow.parquet as pq

    bad = tmp_path / "asym"
    SH.write_shards(csr, bad, 3)
    t = pq.read_table(bad / "edges-00001.parquet")
    pq.write_table(t.slice(1), bad / "edges-00001.parquet")
    meta = json.loads((bad / "meta.json").read_text())
    meta["shards"][1]["nnz"] -= 1
    meta["num_edges"] -= 1
    (bad / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="asymmetric"):
        SH.randomize(bad, tmp_path / "o1", seed=SEED, client=client, edges={"mechanism": "dprr", "eps": 2.0})
    _no_output(tmp_path / "o1")
    with pytest.raises(ValueError, match=r"x: value .* at index \(\d+, \d+\)"):
        SH.randomize(d / "in", tmp_path / "o2", seed=SEED, client=client,
                     features={"mechanism": "onebit", "eps": 1.0, "alpha": 0.0, "beta": 0.5})
    _no_output(tmp_path / "o2")
    with pytest.raises(ValueError, match="eps"):
        SH.randomize(d / "in", tmp_path / "o3", seed=SEED, client=client, edges={"mechanism": "dprr", "eps": -1.0})


def test_failing_task_raises_and_leaves_no_complete_shard(client, small, tmp_path):
    _, _, d = small
    out = tmp_path / "fail"
    with pytest.raises(RuntimeError, match="injected failure in shard 1"):
        SH.randomize(d / "in", out, seed=SEED, client=client,
                     edges={"mechanism": "dprr", "eps": 2.0, "_fault": {"shard": 1, "at": "sample", "how": "raise"}})
    _no_output(out)


def test_killed_worker_fails_the_job_loudly(client, small, tmp_path):
    from distributed import KilledWorker

    _, _, d = small
    out = tmp_path / "killed"
    with pytest.raises(KilledWorker):
        SH.randomize(d / "in", out, seed=SEED, client=client,
                     edges={"mechanism": "dprr", "eps": 2.0, "_fault": {"shard": 2, "at": "sample", "how": "exit"}})
    _no_output(out)


def test_cli_randomize_on_a_scheduler(client, small, tmp_path, capsys):
    from ldpfast.cli import main

    csr, xf, d = small
    seed_file = tmp_path / "seed"
    seed_file.write_text(str(SEED))
    rc = main(["randomize", str(d / "in"), str(tmp_path / "cli"), "--scheduler", client.scheduler.address,
               "--edges", "dprr", "--edge-eps", "2", "--seed-file", str(seed_file), "--no-progress", "--no-store"])
    assert rc == 0
    ref = dprr(csr, 2.0, _keying=_rows_keying(csr, x=xf))
    assert np.array_equal(SH.read_shards(tmp_path / "cli")["edge_index"].numpy(), _edges(ref.noisy))
    out = capsys.readouterr().out
    assert '"num_edges_out"' in out and str(SEED) not in out


# --- users, not rows (issue 31) -------------------------------------------------------------------
def _snapshot(n_drop: int, seed: int = 5):
    """Cora-sized synthetic users with ids; dropping the first ``n_drop`` users shifts every row."""
    data = synthetic(2_000, avg_degree=8.0, seed=seed)
    n = data.num_nodes
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 5, (n,), generator=g)
    xc = torch.randint(0, 4, (n, 6), generator=g)
    ids = torch.randperm(n, generator=g)  # dense but not the row order
    keep = torch.arange(n_drop, n)
    new = torch.full((n,), -1, dtype=torch.int64)
    new[keep] = torch.arange(keep.numel())
    ei = data.csr.to_edge_index()
    m = (new[ei[0]] >= 0) & (new[ei[1]] >= 0)
    from torch_geometric.data import Data

    return Data(edge_index=new[ei[:, m]], num_nodes=keep.numel()), xc[keep], y[keep], ids[keep]


def _by_user(path):
    got = SH.read_shards(path)
    uid = got["user_id"].numpy()
    return {int(u): i for i, u in enumerate(uid)}, got


def test_keyed_shards_equal_one_machine_and_keep_reports_across_snapshots(client, tmp_path):
    from ldpfast.mechanisms.edges import dprr as dprr_
    from ldpfast.privacy import ReportStore

    spec = {"edges": {"mechanism": "dprr", "eps": 3.0, "n_max": 2500},
                "features": {"mechanism": "grr_fs", "k": 4, "eps": 1.0, "m": 2}, "labels": {"num_classes": 5, "eps": 1.0}}
    store = ReportStore(tmp_path / "store.sqlite", create=True)
    outs = []
    for week, (drop, shards) in enumerate(((0, 3), (7, 5))):  # next week: 7 users left, other sharding
        g, xc, y, ids = _snapshot(drop)
        SH.write_shards(g, tmp_path / f"in{week}", shards, x=xc, y=y, user_id=ids)
        SH.randomize(tmp_path / f"in{week}", tmp_path / f"out{week}", seed=sec(SEED), client=client, dataset="snap",
                     store=store, **spec)
        outs.append((g, xc, y, ids))
        # one machine, the same user keys: bit for bit
        got = SH.read_shards(tmp_path / f"out{week}")
        ref = dprr_(g, 3.0, sec(SEED), n_max=2500, user_keys=ids, dataset="snap")
        assert np.array_equal(got["edge_index"].numpy(), _edges(ref.noisy))
        assert torch.equal(got["x"], grr_fs(xc, 4, 1.0, 2, sec(SEED), user_keys=ids, dataset="snap")[0])
        assert torch.equal(got["y"], rr_labels(y, 5, 1.0, sec(SEED), user_keys=ids, dataset="snap")[0])
    (_g0, _, _, _ids0), (_g1, _, _, _ids1) = outs
    u0, r0 = _by_user(tmp_path / "out0")
    u1, r1 = _by_user(tmp_path / "out1")
    common = [u for u in u1]
    # every user keeps their feature and label report: no bits follow the rows
    assert all(torch.equal(r0["x"][u0[u]], r1["x"][u1[u]]) and r0["y"][u0[u]] == r1["y"][u1[u]] for u in common)
    # the store charged week 1's users nothing new for features and labels (only dprr for changed lists)
    _users, eps = store.totals("node-ldp", "snap")
    assert eps.max() == pytest.approx(2.0 + 1.0)  # grr_fs exact m * eps_x = 2, labels 1: once each
    rel = {r["mechanism"]: r for r in store.releases()[-3:]}
    assert rel["grr_fs"]["reused"] == len(common) and rel["rr_labels"]["reused"] == len(common)


def test_shards_without_user_ids_inherit_no_bits_across_snapshots_or_datasets(client, tmp_path):
    """The audit's statistic: P(the user now in row i is truthful | row i's user was truthful
    last week) was 1.000 with one job seed; independent reports give p = e / (e + 4)."""
    import math

    lab = {"num_classes": 5, "eps": 1.0}
    runs = {}
    for name, drop, dataset in (("a", 0, "default"), ("b", 1, "default"), ("c", 0, "other")):
        g, _xc, y, _ = _snapshot(drop)
        SH.write_shards(g, tmp_path / f"in{name}", 3, y=y)
        with pytest.warns(UserWarning, match="no user ids"):
            SH.randomize(tmp_path / f"in{name}", tmp_path / f"o{name}", seed=SEED, client=client, labels=lab,
                         dataset=dataset)
        runs[name] = (y, SH.read_shards(tmp_path / f"o{name}")["y"])
    p = math.e / (math.e + 4)
    ya, oa = runs["a"]
    # b: rows shifted by one user (shift 0: the user who moved into row i; 1: the same user); c: another
    # dataset, same rows
    for other, shift in (("b", 0), ("b", 1), ("c", 0)):
        yb, ob = runs[other]
        t_a = (oa[shift:] == ya[shift:])[: len(yb)]
        t_b = (ob == yb)[: len(t_a)]
        cond = float(t_b[t_a].float().mean())
        sd = math.sqrt(p * (1 - p) / int(t_a.sum()))
        assert abs(cond - p) < 4.5 * sd, (other, cond, p)


def test_shard_layout_does_not_change_a_bit(client, tmp_path):
    g, xc, y, ids = _snapshot(0)
    outs = []
    for shards in (1, 4):
        for keyed in (False, True):
            path = tmp_path / f"in{shards}{keyed}"
            SH.write_shards(g, path, shards, x=xc, y=y, user_id=ids if keyed else None)
            SH.randomize(path, tmp_path / f"o{shards}{keyed}", seed=sec(SEED), client=client,
                         edges={"mechanism": "rr", "eps": 5.0}, labels={"num_classes": 5, "eps": 1.0})
            outs.append(SH.read_shards(tmp_path / f"o{shards}{keyed}"))
    for a, b in ((outs[0], outs[2]), (outs[1], outs[3])):
        assert torch.equal(a["edge_index"], b["edge_index"]) and torch.equal(a["y"], b["y"])


def test_sharded_store_withholds_users_over_budget(client, tmp_path):
    from ldpfast.privacy import ReportStore

    g, _xc, y, ids = _snapshot(0)
    store = ReportStore(tmp_path / "s.sqlite", budget=1.5, create=True)
    lab = {"num_classes": 5, "eps": 1.0}
    SH.write_shards(g, tmp_path / "in0", 2, y=y, user_id=ids)
    SH.randomize(tmp_path / "in0", tmp_path / "o0", seed=sec(SEED), client=client, labels=lab, store=store)
    y2 = y.clone()
    y2[:100] = (y2[:100] + 1) % 5  # 100 users change their label: a second report would pass 1.5
    SH.write_shards(g, tmp_path / "in1", 3, y=y2, user_id=ids)
    rep = SH.randomize(tmp_path / "in1", tmp_path / "o1", seed=sec(SEED), client=client, labels=lab, store=store)
    got = SH.read_shards(tmp_path / "o1")
    first = SH.read_shards(tmp_path / "o0")
    assert got["y_withheld"][:100].all() and not got["y_withheld"][100:].any()
    assert (got["y"][:100] == -1).all() and not got["y_rr_mask"][:100].any()
    assert torch.equal(got["y"][100:], first["y"][100:])  # unchanged users: the identical report
    assert rep.spent[0].params["store"]["withheld"] == 100 and rep.spent[0].params["store"]["reused"] == len(y) - 100
    assert store.totals("node-ldp")[1].max() == 1.0
    SH.write_shards(g, tmp_path / "plain", 2, y=y)  # no user ids: a store cannot account them
    with pytest.raises(ValueError, match="user_id"):
        SH.randomize(tmp_path / "plain", tmp_path / "o2", seed=sec(SEED), client=client, labels=lab, store=store)


def test_cli_randomize_with_a_store_and_dataset(client, tmp_path, capsys):
    from ldpfast.cli import main

    g, _, y, ids = _snapshot(0)
    SH.write_shards(g, tmp_path / "in", 2, y=y, user_id=ids)
    seed_file = tmp_path / "seed"
    assert main(["secret", "new", str(seed_file)]) == 0
    assert main(["secret", "new", str(seed_file)]) == 2  # never overwritten
    assert "already exists" in capsys.readouterr().err
    args = ["randomize", str(tmp_path / "in"), "", "--scheduler", client.scheduler.address, "--labels", "5",
            "--label-eps", "1", "--seed-file", str(seed_file), "--no-progress", "--dataset", "cli",
            "--store", str(tmp_path / "s.sqlite"), "--budget", "1.5"]
    args[2] = str(tmp_path / "o0")
    assert main(args) == 2  # a missing store is not created silently
    assert "--create-store" in capsys.readouterr().err
    for out in ("o1", "o2"):
        args[2] = str(tmp_path / out)
        assert main(args + (["--create-store"] if out == "o1" else [])) == 0
    printed = capsys.readouterr().out
    assert printed.count('"node-ldp": {') == 2 and seed_file.read_bytes().hex() not in printed
    a, b = SH.read_shards(tmp_path / "o1"), SH.read_shards(tmp_path / "o2")
    assert torch.equal(a["y"], b["y"])  # the second run: every user unchanged, the identical reports
    from ldpfast.privacy import ReportStore

    s = ReportStore(tmp_path / "s.sqlite", create=True)
    assert [r["new"] for r in s.releases()] == [len(y), 0] and s.summary("cli")["node-ldp"]["max"] == 1.0
