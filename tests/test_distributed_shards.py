"""Sharded randomisation on a 2-worker Dask LocalCluster equals the single-machine calls bit
for bit (DPRR, RR, LocalLap, features, labels); failures leave nothing that looks complete."""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

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
    ref = dprr(csr, 2.0, SEED)
    assert np.array_equal(got["edge_index"].numpy(), _edges(ref.noisy))
    assert torch.equal(got["x"], grr_fs(xc, 4, 1.0, 2, SEED)[0])
    assert torch.equal(got["y"], rr_labels(y, 5, 1.0, SEED, mask=mask)[0])
    assert rep.spent[0].eps == ref.spent.eps and rep.spent[0].params["eps2"] == ref.spent.params["eps2"]
    assert rep.num_edges_out == ref.noisy.nnz
    text = (d / "dprr" / "meta.json").read_text()
    assert str(SEED) not in text and hex(SEED)[2:] not in text
    assert len(json.loads(text)["shards"]) == 7


def test_locallap_and_multibit_bit_identical(client, big):
    csr, *_, d = big
    rep = SH.randomize(d / "in", d / "ll", seed=SEED, client=client, edges={"mechanism": "locallap", "eps": 3.0})
    ref = local_laplace(csr, 3.0, SEED)
    got = SH.read_shards(d / "ll")
    assert np.array_equal(got["edge_index"].numpy(), _edges(ref.noisy, upper=True))
    assert rep.spent[0].params["T"] == ref.spent.params["T"]
    assert rep.spent[0].params["candidates"] == ref.spent.params["candidates"]


@pytest.mark.slow  # compiles the Numba RR row driver in both workers (~10 s cold); same bits as "cpp"
def test_numba_engine_bit_identical(client, small):
    csr, _, d = small
    SH.randomize(d / "in", d / "dprr_nb", seed=SEED, client=client, engine="numba",
                 edges={"mechanism": "dprr", "eps": 1.5})
    assert np.array_equal(SH.read_shards(d / "dprr_nb")["edge_index"].numpy(), _edges(dprr(csr, 1.5, SEED).noisy))


def test_locallap_extra_threshold_rounds_bit_identical(client, small):
    csr, _, d = small
    # force the rare lower-threshold rounds (probability < e^-50 in real runs)
    SH.randomize(d / "in", d / "ll2", seed=SEED, client=client,
                 edges={"mechanism": "locallap", "eps": 1.0, "_target": 50.0})
    ref = local_laplace(csr, 1.0, SEED, _target=50.0)
    assert ref.spent.params["threshold_rounds"] > 1
    assert np.array_equal(SH.read_shards(d / "ll2")["edge_index"].numpy(), _edges(ref.noisy, upper=True))
    # a forced split low enough that the picks above it get their values drawn
    SH.randomize(d / "in", d / "ll3", seed=SEED, client=client,
                 edges={"mechanism": "locallap", "eps": 1.0, "_target": 20000.0, "_split_target": 8000.0})
    ref = local_laplace(csr, 1.0, SEED, _target=20000.0, _split_target=8000.0)
    assert np.array_equal(SH.read_shards(d / "ll3")["edge_index"].numpy(), _edges(ref.noisy, upper=True))


def test_rr_and_onebit_multibit_bit_identical(client, small):
    csr, xf, d = small
    SH.randomize(d / "in", d / "rr", seed=SEED, client=client,
                 edges={"mechanism": "rr", "eps": 4.0, "max_output_edges": 10**7},
                 features={"mechanism": "onebit", "eps": 2.0})
    got = SH.read_shards(d / "rr")
    assert np.array_equal(got["edge_index"].numpy(), _edges(rr_edges(csr, 4.0, SEED, max_output_edges=10**7).noisy))
    assert torch.equal(got["x"], onebit(xf, 2.0, seed=SEED)[0])
    SH.randomize(d / "in", d / "mb", seed=SEED, client=client, features={"mechanism": "multibit", "eps": 3.0, "m": 2})
    assert torch.equal(SH.read_shards(d / "mb")["x"], multibit_encode(xf, 3.0, 2, seed=SEED)[0])


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

    csr, _, d = small
    seed_file = tmp_path / "seed"
    seed_file.write_text(str(SEED))
    rc = main(["randomize", str(d / "in"), str(tmp_path / "cli"), "--scheduler", client.scheduler.address,
               "--edges", "dprr", "--edge-eps", "2", "--seed-file", str(seed_file), "--no-progress"])
    assert rc == 0
    assert np.array_equal(SH.read_shards(tmp_path / "cli")["edge_index"].numpy(), _edges(dprr(csr, 2.0, SEED).noisy))
    out = capsys.readouterr().out
    assert '"num_edges_out"' in out and str(SEED) not in out
