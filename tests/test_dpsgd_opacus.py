"""Opacus's conventions in node-level DP-SGD (issue 38, item 4; issue 40).

* ``noise_multiplier`` means what it means in Opacus (noise std = noise_multiplier * C), the
  paper's ``sigma`` stays available under its own name;
* per-layer and adaptive clipping (Andrew et al. 2021, its count's noise accounted);
* a BatchMemoryManager-style cap on the physical batch with the sampling and the release
  unchanged;
* ``poisson_sampling=False`` for debugging, reported as not private;
* ``DPDDP`` around any model (two gloo ranks equal one process up to the reduction order),
  and DistributedDPOptimizer's noise on the parameters' device (CPU bits unchanged).

On Cora (embedded): a one-layer GCN with 16 hidden units, no dropout.
"""
from __future__ import annotations

import math
import os
import warnings

import pytest
import torch
import torch.nn.functional as F

from ldpfast.privacy import BatchMemoryManager, NodeDPEngine, ReportStore
from ldpfast.privacy.dpsgd import (
    DPUsageError,
    SubgraphGradSampleModule,
    adaptive_grad_sigma,
    per_subgraph_gradients_loop,
    subgraph_loss,
)
from ldpfast.sampling import HeterPoisson

DELTA = 1e-4


@pytest.fixture(scope="module")
def cora():
    from ldpfast.datasets import load
    from ldpfast.methods.heterpoisson import split_nodes

    data = load("cora")
    data.train_mask, data.test_mask = split_nodes(data.num_nodes, 0)
    return data


class GCN(torch.nn.Module):
    def __init__(self, d_in: int = 1433, classes: int = 7):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv = GCNConv(d_in, 16)
        self.head = torch.nn.Linear(16, classes)

    def forward(self, x, edge_index):
        return self.head(F.elu(self.conv(x, edge_index)))


def _private(cora, *, steps=4, seed=1, net=None, **kw):
    torch.manual_seed(0)
    net = GCN() if net is None else net
    engine = NodeDPEngine()
    if "sample_rate" not in kw:
        kw.setdefault("expected_batch_size", 64)
    if "noise_multiplier" not in kw:
        kw.setdefault("sigma", 2.0)
    model, opt, sampler = engine.make_private(net, torch.optim.SGD(net.parameters(), lr=0.1), cora, steps=steps,
                                              M=2.0, train_mask=cora.train_mask, seed=seed, **kw)
    return engine, net, model, opt, sampler


def _train(model, opt, sampler):
    model.train()
    out = []
    for batch in sampler:
        opt.zero_grad()
        subgraph_loss(model(batch), batch).backward()
        r = opt.step()
        out.append((batch, r))
    return out


# ----------------------------------------------------------------------------- noise_multiplier
def test_noise_multiplier_is_opacus_and_sigma_is_the_papers(cora):
    """noise_multiplier z: noise std z * C (Opacus); sigma s: std 2 C s (paper); the same run
    either way; the change of meaning is announced once; exactly one is required."""
    import ldpfast.privacy.engine as eng

    eng._NM_WARNED = False
    with pytest.warns(FutureWarning, match="noise_multiplier now means what it means in Opacus"):
        e1, _, _, o1, _ = _private(cora, noise_multiplier=1.3, max_grad_norm=0.4)
    assert o1.noise_std == pytest.approx(1.3 * 0.4) and o1.sigma == pytest.approx(0.65)
    assert e1.noise_multiplier == pytest.approx(1.3) and e1.sigma == pytest.approx(0.65)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per process
        _private(cora, noise_multiplier=1.3, max_grad_norm=0.4)
        e2, _, _, o2, _ = _private(cora, sigma=0.65, max_grad_norm=0.4)
    assert o2.noise_std == o1.noise_std and e2.get_epsilon(DELTA) == e1.get_epsilon(DELTA)
    with pytest.raises(ValueError, match="noise_multiplier, sigma: give exactly one"):
        _private(cora, noise_multiplier=1.0, sigma=0.5)


# ----------------------------------------------------------------------------- per-layer clipping
def test_per_layer_clipping_clips_each_parameter_and_noises_the_total(cora):
    """Each parameter's part of every per-sub-graph gradient is clipped to its own C_k (the
    loop reference), and the noise is that of sqrt(sum C_k^2)."""
    batch = HeterPoisson(cora, 0.03, 2.0, seed=4, train_nodes=cora.train_mask).sample(0)
    torch.manual_seed(0)
    net = GCN()
    params = [p for p in net.parameters() if p.requires_grad]
    Cs = [0.05, 0.02, 0.3, 0.01][: len(params)]
    g = per_subgraph_gradients_loop(net, batch).double()
    sizes = [p.numel() for p in params]
    parts = torch.split(g, sizes, dim=1)
    ref = torch.cat([(torch.clamp(c * (1 - 1e-5) / q.norm(dim=1).clamp_min(1e-300), max=1.0)[:, None] * q).sum(0)
                     for q, c in zip(parts, Cs)])
    gsm = SubgraphGradSampleModule(net).train()
    subgraph_loss(gsm(batch), batch).backward()
    stats = gsm.clip_and_accumulate(Cs)
    got = torch.cat([p.grad.reshape(-1) for p in params]).double()
    torch.testing.assert_close(got, ref, rtol=1e-4, atol=1e-7)
    assert stats.norms.shape == (batch.num_subgraphs, len(params)) and (stats.factors < 1).any()
    _, _, _, opt, _ = _private(cora, clipping="per_layer", max_grad_norm=Cs, sigma=1.5)
    assert opt.clip_bound == pytest.approx(math.sqrt(sum(c * c for c in Cs)))
    assert opt.noise_std == pytest.approx(2 * 1.5 * opt.clip_bound)
    with pytest.raises(TypeError, match="one clipping norm per trainable parameter"):
        _private(cora, clipping="per_layer", max_grad_norm=0.5)
    with pytest.raises(ValueError, match="expected one clipping norm per trainable parameter"):
        _private(cora, clipping="per_layer", max_grad_norm=[0.1, 0.2])


# ----------------------------------------------------------------------------- adaptive clipping
def test_adaptive_clipping_accounts_its_count_and_tracks_the_quantile(cora):
    """The gradient noise is raised so that gradient and count together are the accounted
    mechanism; each step moves C by exp(-eta (b - gamma)) with b the noisy unclipped
    fraction; over the run C moves towards the target quantile of the norms."""
    sigma, m = 1.0, 64.0
    std = m / 20
    eta = 0.5
    engine, _, model, opt, sampler = _private(cora, steps=40, sigma=sigma, clipping="adaptive", max_grad_norm=0.05,
                                              target_unclipped_quantile=0.5, clipbound_learning_rate=eta)
    assert opt.grad_sigma == pytest.approx(adaptive_grad_sigma(sigma, std)) and opt.grad_sigma > sigma
    assert opt.grad_sigma == pytest.approx((sigma ** -2 - std ** -2) ** -0.5)
    model.train()
    fractions = []
    for batch in sampler:
        c0 = opt.clip_bound
        opt.zero_grad()
        subgraph_loss(model(batch), batch).backward()
        opt.step()
        n = opt.last_stats.norms
        count = float((n <= c0).sum()) - 0.5 * n.numel()
        z = (-math.log(opt.clip_bound / c0) / eta - count / m) * m  # the count's noise
        assert abs(z) < 6 * std, z
        fractions.append(float((n <= c0).double().mean()) if n.numel() else 0.5)
    assert opt.clip_bound > 1.0  # from far below every norm (median about 2), up to them
    assert 0.2 <= sum(fractions[-10:]) / 10 <= 0.8, fractions[-10:]
    acc = engine.accountant
    assert engine.get_epsilon(DELTA) == acc.epsilon(sigma, 40, DELTA).eps  # the count is inside sigma
    assert "clip_bound" in engine.state_dict()["optimizer"]
    with pytest.raises(ValueError, match="unclipped_num_std: must exceed sigma"):
        _private(cora, sigma=4.0, clipping="adaptive", unclipped_num_std=3.0)


# ----------------------------------------------------------------------------- physical batches
def test_batch_memory_manager_keeps_the_release_and_the_accounting(cora):
    """Physical batches of at most 16 sub-graphs: the same parameters (to float rounding), the
    same step count and epsilon as the unsplit loop; only the last physical batch releases."""
    e1, n1, m1, o1, s1 = _private(cora, steps=3, sample_rate=0.1)
    _train(m1, o1, s1)
    e2, n2, m2, o2, s2 = _private(cora, steps=3, sample_rate=0.1)
    seen = []
    with BatchMemoryManager(s2, max_physical_batch_size=16, optimizer=o2) as batches:
        m2.train()
        for batch in batches:
            o2.zero_grad()
            subgraph_loss(m2(batch), batch).backward()
            before = o2.steps
            o2.step()
            seen.append((batch.step, batch.num_subgraphs, o2.steps - before))
    assert s2.max_physical_batch_size is None  # restored
    assert all(b <= 16 for _, b, _ in seen) and len(seen) > 3
    for t in range(3):
        mine = [d for s, _, d in seen if s == t]
        assert mine[-1] == 1 and sum(mine) == 1  # one release, after the last physical batch
    assert o1.steps == o2.steps == 3 and e1.get_epsilon(DELTA) == e2.get_epsilon(DELTA)
    for p, q in zip(n1.parameters(), n2.parameters()):
        torch.testing.assert_close(p, q, rtol=1e-5, atol=1e-6)
    # a physical batch skipped is refused
    _, _, m3, _, s3 = _private(cora, steps=2, sample_rate=0.1, max_physical_batch_size=16)
    m3.train()
    it = iter(s3)
    next(it)  # the first physical batch, never stepped
    with pytest.raises(DPUsageError, match="physical batch 1 of .* was not taken"):
        next(it)


# ----------------------------------------------------------------------------- poisson_sampling=False
def test_poisson_sampling_off_is_fixed_size_and_flagged_not_private(cora, tmp_path):
    """Every batch has round(expected_batch_size) sub-graphs; epsilon is inf and the report,
    the privacy model and the store's record say why; a budget is refused."""
    store = ReportStore(tmp_path / "s.sqlite", create=True)
    engine, _, model, opt, sampler = _private(cora, steps=3, expected_batch_size=40, poisson_sampling=False,
                                              store=store, dataset="cora", run="debug")
    sizes = [b.num_subgraphs for b, _ in _train(model, opt, sampler)]
    assert sizes == [40, 40, 40]
    rep = engine.get_privacy_report(DELTA)
    assert rep.eps == math.inf and rep.model.startswith("NOT PRIVATE") and engine.privacy_model.startswith("NOT")
    assert store.node_dp_spent("cora", "debug")["eps"] == math.inf
    assert "poisson_sampling=False" in repr(sampler)
    with pytest.raises(ValueError, match="budget: poisson_sampling=False is not private"):
        _private(cora, poisson_sampling=False, budget=(8.0, DELTA))


# ----------------------------------------------------------------------------- DP-DDP
SEED = 0x0BAD_5EED_1234_5678


def _ddp_graph():
    import numpy as np
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, to_undirected

    rng = np.random.default_rng(7)
    n, m = 240, 900
    src, dst = rng.integers(0, n, m), rng.integers(0, n, m)
    keep = src != dst
    ei = coalesce(to_undirected(torch.from_numpy(np.stack([src[keep], dst[keep]])), num_nodes=n), num_nodes=n)
    y = torch.from_numpy(rng.integers(0, 3, n))
    x = torch.from_numpy(rng.normal(size=(n, 8)).astype(np.float32)) + y[:, None].float()
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


def _ddp_run(wrap: bool, adaptive: bool):
    from ldpfast.distributed.ddp import DPDDP

    data = _ddp_graph()
    torch.manual_seed(1 + int(os.environ.get("RANK_OFFSET", "0")))  # replicas start apart: DPDDP aligns them
    net = GCN(8, 3)
    model = DPDDP(net) if wrap else net
    kw = {"clipping": "adaptive", "max_grad_norm": 0.1} if adaptive else {}
    engine = NodeDPEngine()
    gsm, opt, sampler = engine.make_private(model, torch.optim.Adam(net.parameters(), lr=0.03), data, sigma=1.3,
                                            steps=5, sample_rate=0.3, M=2.0, seed=SEED, **kw)
    sizes = [b.num_subgraphs for b, _ in _train(gsm, opt, sampler)]
    return net.state_dict(), sizes, opt.steps, opt.clip_bound


def _ddp_worker(rank, world, init_file, out_dir, adaptive):
    torch.set_num_threads(1)
    os.environ["RANK_OFFSET"] = str(rank)
    torch.distributed.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank, world_size=world)
    try:
        state, sizes, steps, bound = _ddp_run(True, adaptive)
        torch.save({"state": state, "sizes": sizes, "steps": steps, "bound": bound},
                   os.path.join(out_dir, f"rank{rank}.pt"))
    finally:
        torch.distributed.destroy_process_group()


@pytest.mark.parametrize("adaptive", [False, True])
def test_dpddp_two_ranks_equal_one_process(tmp_path, adaptive):
    """DPDDP(any model) through make_private: rank 0's parameters are broadcast, each rank takes
    its share of every batch, the noise is drawn once; the replicas stay bit-identical and
    equal the single-process run up to the reduction order (adaptive clipping's count too)."""
    import torch.multiprocessing as mp

    os.environ["RANK_OFFSET"] = "0"
    ref, ref_sizes, _, ref_bound = _ddp_run(False, adaptive)
    method = "spawn" if torch.cuda.is_available() else "fork"
    mp.start_processes(_ddp_worker, args=(2, str(tmp_path / "pg"), str(tmp_path), adaptive), nprocs=2, join=True,
                       start_method=method)
    r0, r1 = torch.load(tmp_path / "rank0.pt"), torch.load(tmp_path / "rank1.pt")
    assert [a + b for a, b in zip(r0["sizes"], r1["sizes"])] == ref_sizes and min(r1["sizes"]) >= 0
    assert r0["steps"] == r1["steps"] == 5
    for k, v in ref.items():
        assert torch.equal(r0["state"][k], r1["state"][k]), k
        torch.testing.assert_close(r0["state"][k], v, rtol=1e-4, atol=1e-5)
    assert r0["bound"] == pytest.approx(ref_bound, rel=1e-9)


def test_distributed_optimizer_noise_is_the_single_process_draw_on_cpu(cora):
    """One rank, CPU: DistributedDPOptimizer adds the very noise DPOptimizer adds (the device
    path draws where the parameters are, as DPOptimizer does; issue 40)."""
    from ldpfast.distributed.ddp import DistributedDPOptimizer
    from ldpfast.privacy.dpsgd import DPOptimizer

    outs = []
    for cls in (DPOptimizer, DistributedDPOptimizer):
        torch.manual_seed(0)
        net = GCN()
        gsm = SubgraphGradSampleModule(net)
        opt = cls(torch.optim.SGD(net.parameters(), lr=0.1), gsm, sigma=1.0, seed=9)
        opt.zero_grad()
        opt.noise_only_step()
        outs.append([p.detach().clone() for p in net.parameters()])
    assert all(torch.equal(a, b) for a, b in zip(*outs))


def test_distributed_optimizer_draws_through_the_device_router():
    """Issue 40: rank 0 asks DPOptimizer._noises (the generator on the parameters' device, one
    launch on a GPU) for the noise, not the CPU generator's draws moved to the device."""
    from ldpfast.distributed.ddp import DistributedDPOptimizer

    net = torch.nn.Sequential(torch.nn.Linear(30, 4))
    opt = DistributedDPOptimizer(torch.optim.SGD(net.parameters(), lr=0.1),
                                 SubgraphGradSampleModule(net, check_independence=False), sigma=1.0, seed=3)
    calls = []
    real = opt._noises
    opt._noises = lambda params: calls.append([p.device for p in params]) or real(params)
    opt.noise_only_step()
    assert calls == [[torch.device("cpu")] * 2] and opt.steps == 1
