"""Data-parallel HeterPoisson DP-SGD (ldpfast.distributed.ddp) against the single process.

Equality claimed and asserted: 2 gloo ranks give the single-process model **up to the
floating-point reduction order** (per-rank clipped sums, then an all-reduce), checked with a
tolerance far below one step's noise; one rank without a process group is bit-identical
to the single-process DPOptimizer loop of ``heterpoisson.fit``; the two ranks end bit-identical
to each other.
"""
from __future__ import annotations

import os

import numpy as np
import pytest
import torch
import torch.multiprocessing as mp

from ldpfast.distributed import ddp
from ldpfast.methods.heterpoisson import build_model
from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
from ldpfast.sampling import HeterPoisson

SEED = 0x1234_5678_9ABC_DEF0
CFG = {"q_b": 0.2, "M": 2.0, "T": 6, "sigma": 1.3, "max_grad_norm": 0.5, "lr": 0.03, "model": "gcn",
       "hidden": 16}


def _graph():
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, to_undirected

    rng = np.random.default_rng(7)
    n, m = 240, 900
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    ei = to_undirected(torch.from_numpy(np.stack([src[keep], dst[keep]])), num_nodes=n)
    ei = coalesce(ei, num_nodes=n)
    y = torch.from_numpy(rng.integers(0, 3, n))
    x = torch.from_numpy(rng.normal(size=(n, 8)).astype(np.float32)) + y[:, None].float()
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


def _reference(data):
    """fit()'s training loop, single process, unchanged DPOptimizer."""
    c = CFG
    sampler = HeterPoisson(data, c["q_b"], c["M"], seed=SEED ^ 0xBA7C4, overlap="drop", num_steps=c["T"])
    torch.manual_seed(SEED)
    net = build_model(c["model"], 8, 3, hidden=c["hidden"])
    gsm = SubgraphGradSampleModule(net)
    opt = DPOptimizer(torch.optim.Adam(net.parameters(), lr=c["lr"]), gsm, sigma=c["sigma"],
                      max_grad_norm=c["max_grad_norm"], expected_batch_size=sampler.expected_batch_size,
                      seed=SEED ^ 0x5EED)
    for t in range(c["T"]):
        batch = sampler.sample(t)
        gsm.train()
        opt.zero_grad()
        if batch.num_subgraphs == 0:
            opt.noise_only_step()
        else:
            subgraph_loss(gsm(batch), batch).backward()
            opt.step()
    return {k: v.detach().clone() for k, v in net.state_dict().items()}


def _worker(rank, world, init_file, out_dir, seeds, sigmas):
    torch.set_num_threads(1)
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        c = dict(CFG)
        c["sigma"] = sigmas[rank]
        res = ddp.train(_graph(), seed=seeds[rank], **c)
        torch.save({"state": res.model.state_dict(), "sizes": res.subgraphs_per_step},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    except ValueError as exc:
        with open(os.path.join(out_dir, f"rank{rank}.err"), "w") as f:
            f.write(str(exc))
    finally:
        torch.distributed.destroy_process_group()


def _start_method() -> str:
    # fork: the children inherit the imported modules (spawn re-imports torch and PyG: ~20 s
    # more).  With a GPU visible, any earlier backward in this process has started autograd's
    # device threads, and torch refuses autograd in a forked child: spawn there.
    return "spawn" if torch.cuda.is_available() else "fork"


def _run_two(tmp_path, seeds, sigmas):
    mp.start_processes(_worker, args=(2, str(tmp_path / "pg"), str(tmp_path), seeds, sigmas), nprocs=2,
                       join=True, start_method=_start_method())


def test_part_shares_union_is_the_batch():
    data = _graph()
    s = HeterPoisson(data, 0.3, 2.0, seed=5)
    for t in range(3):
        full = s.sample(t)
        parts = [s.sample(t, part=(r, 3)) for r in range(3)]
        assert sum(p.num_subgraphs for p in parts) == full.num_subgraphs
        assert torch.equal(torch.cat([p.n_id for p in parts]), full.n_id)
        assert torch.equal(torch.cat([p.x for p in parts]), full.x)
    with pytest.raises(ValueError, match="part"):
        s.sample(0, part=(3, 3))


def test_one_rank_is_bit_identical_to_single_process():
    data = _graph()
    ref = _reference(data)
    res = ddp.train(data, seed=SEED, **CFG)
    for k, v in res.model.state_dict().items():
        assert torch.equal(v, ref[k]), k


def test_two_gloo_ranks_equal_single_process_up_to_reduction_order(tmp_path):
    ref = _reference(_graph())
    _run_two(tmp_path, [SEED, SEED], [CFG["sigma"]] * 2)
    s0 = torch.load(tmp_path / "rank0.pt")
    s1 = torch.load(tmp_path / "rank1.pt")
    assert sum(s0["sizes"]) > 0 and sum(s1["sizes"]) > 0  # both ranks did real work
    moved = 0.0
    for k, v in ref.items():
        assert torch.equal(s0["state"][k], s1["state"][k]), k  # replicas stay bit-identical
        # float32 round-off of a different summation order, far below the per-step noise
        torch.testing.assert_close(s0["state"][k], v, rtol=1e-4, atol=1e-5)
        moved = max(moved, float((s0["state"][k] - v).abs().max()))
    # a different noise draw or a missing share would move the weights by ~lr per step
    assert moved < 1e-4


def test_ranks_disagreeing_fail_clearly_without_leaking_the_seed(tmp_path):
    _run_two(tmp_path, [SEED, SEED + 1], [CFG["sigma"], CFG["sigma"] * 2])
    for r in range(2):
        msg = (tmp_path / f"rank{r}.err").read_text()
        assert "seed differs" in msg and "sigma differs" in msg
        assert str(SEED) not in msg and str(SEED + 1) not in msg and hex(SEED)[2:] not in msg
        assert ddp._seed_digest(SEED)[:16] not in msg


@pytest.mark.slow  # starts torchrun (two fresh interpreters importing torch and PyG)
def test_torchrun_entry_point(tmp_path):
    import json
    import socket
    import subprocess
    import sys

    with socket.socket() as s:  # a free port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "seed").write_text(str(SEED))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_port", str(port),
           "-m", "ldpfast.distributed.ddp", "--dataset", "cora", "--T", "3", "--q-b", "0.05",
           "--seed-file", str(tmp_path / "seed")]
    res = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert res.returncode == 0, res.stderr[-2000:]
    line = [ln for ln in res.stdout.splitlines() if ln.startswith("{")][-1]
    out = json.loads(line)
    assert out["world_size"] == 2 and out["T"] == 3 and 0 < out["eps"] <= 4.0 + 1e-9
    assert str(SEED) not in res.stdout + res.stderr
