"""The host-sync audit (ldpfast/_syncs.py) and the syncs of one HeterPoisson DP-SGD step on
the CUDA code path, run on CPU tensors with the fake CUDA backend (tests/_fake_cuda.py)."""
from __future__ import annotations

import torch
from _fake_cuda import DeviceInput
from test_cuda_fit import _graph, _on_device, fake_gpu  # noqa: F401 - fixture used by name
from test_cuda_routing import fake_cuda, fake_cuda_prop, fake_cuda_sampling  # noqa: F401

from ldpfast._syncs import audit_syncs


def test_audit_catches_planted_syncs():
    x = torch.arange(6.0)
    with audit_syncs() as audit:
        x.sum().item()
        x[x > 2]
        y = x.clone()
        y[y > 3] = 0
        if x[1]:
            pass
        torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 3]))
    ops = [e.op for e in audit.events]
    assert ops == ["item", "__getitem__", "__setitem__", "__bool__", "repeat_interleave"], audit.report()
    assert all(e.where.endswith(f"({test_audit_catches_planted_syncs.__name__})") for e in audit.events)
    assert "test_sync_audit.py" in audit.events[0].where


def test_audit_ignores_sync_free_calls():
    x = torch.arange(6.0)
    with audit_syncs() as audit:
        idx = torch.tensor([1, 2])
        x[idx]
        x[1:3]
        x.masked_fill(x > 2, 0.0)
        torch.repeat_interleave(torch.arange(3), torch.tensor([1, 2, 3]), output_size=6)
        torch.cumsum(x, 0)
        x.to(torch.float64)
        torch.zeros(3).index_add_(0, torch.tensor([0, 0, 2]), torch.ones(3))
    assert audit.count() == 0, audit.report()


def test_audit_device_predicate_and_launchers(fake_gpu):  # noqa: F811
    import ldpfast._backend as B

    host, devt = torch.arange(4.0), torch.arange(4.0).as_subclass(DeviceInput)
    with audit_syncs(lambda t: isinstance(t, DeviceInput)) as audit:
        host.sum().item()
        devt.sum().item()
        flags = torch.empty(4, dtype=torch.uint8)
        B._cache["cuda"].heter_central(torch.arange(4), 1, 0, 0.5, flags)  # no read: not counted
        B._cache["cuda"].host_ints(flags.long().sum().view(1))
    assert [e.op for e in audit.events] == ["item", "ldpfast._cuda.host_ints"], audit.report()
    assert not hasattr(B._cache["cuda"].host_ints, "__wrapped__")  # unwrapped on exit


def _dp_setup(data):
    """HeterPoisson + GCN + DPOptimizer(Adam) as benchmarks/bench_gpu.py's bench_dpsgd_step;
    returns the step function and the optimizer."""
    from ldpfast.methods import heterpoisson as HP
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
    from ldpfast.sampling import HeterPoisson

    torch.manual_seed(3)
    net = HP.build_model("gcn", 12, 4, hidden=8)
    # the independence check re-runs on a random 5% of the steps by default, with its own host
    # reads on those steps: off here, so that the audited step is always a plain one
    gsm = SubgraphGradSampleModule(net, recheck_fraction=0.0)
    opt = DPOptimizer(torch.optim.Adam(net.parameters(), lr=0.03), gsm, sigma=1.0, max_grad_norm=0.5,
                      expected_batch_size=30.0, seed=4)
    sp = HeterPoisson(data, 0.1, 2.0, seed=5)

    def step(t):
        b = sp.sample(t)
        opt.zero_grad()
        subgraph_loss(gsm(b), b).backward()
        opt.step()
    return step, opt


# The syncs of one step on the CUDA path (ldpfast/_syncs.py lists them with file:line):
# - the sampler's two size reads (heterpoisson.py _sample_cuda, ldpfast._cuda.host_ints):
#   (1) central nodes and node slots, (2) batch nodes, edges and the size-bin histogram;
# - PyG's GCNConv: add_remaining_self_loops indexes edge_index with a boolean mask (also in
#   the non-private step; the model's, not ldpfast's).
# Per-sub-graph clipping, the noise and the update add none.  Before issue 32 (parts 3-4):
# 6 in the sampler, 16 in clipping (2 GCN weights: bincount, k[nz], unique, tolist and one
# nonzero per bucket), 1 in PyG.
SAMPLER_SYNCS, DPSGD_SYNCS, MODEL_SYNCS = 2, 0, 1


def test_one_dpsgd_step_syncs(fake_gpu):  # noqa: F811
    step, opt = _dp_setup(_on_device(_graph(n=300, e=2400)))
    for t in range(2):  # step 0 also runs the one-off independence check
        step(t)
    # Adam keeps its step counters on the host (capturable=False): reading them is no sync
    host = {id(st["step"]) for st in opt.optimizer.state.values()}
    with audit_syncs(lambda t: id(t) not in host) as audit:
        step(2)
    assert DeviceInput.copies == [], DeviceInput.copies
    assert audit.count("ldpfast/sampling/") == SAMPLER_SYNCS, audit.report()
    assert [e.op for e in audit.select("ldpfast/sampling/")] == ["ldpfast._cuda.host_ints"] * 2
    assert audit.count("ldpfast/privacy/") == DPSGD_SYNCS, audit.report()
    assert audit.count("torch_geometric") == MODEL_SYNCS, audit.report()
    assert audit.count() == SAMPLER_SYNCS + DPSGD_SYNCS + MODEL_SYNCS, audit.report()


def test_one_dpsgd_step_syncs_fail_when_one_is_added(fake_gpu, monkeypatch):  # noqa: F811
    # the audit of the step sees a sync planted in the clipping path
    from ldpfast.privacy.dpsgd import clipping

    real = clipping._Blocks.__init__

    def planted(self, seg, B, bins):
        real(self, seg, B, None)  # ignore the sampler's histogram: one host read per row layout
    monkeypatch.setattr(clipping._Blocks, "__init__", planted)
    step, _ = _dp_setup(_on_device(_graph(n=300, e=2400)))
    step(0)
    with audit_syncs() as audit:
        step(1)
    assert [e.op for e in audit.select("dpsgd/clipping.py")] == ["tolist"], audit.report()


# --- the per-step device noise of DPOptimizer (exercised here with a CPU "device") ----------
def _opt(seed=4, secure=False):
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule

    net = torch.nn.Sequential(torch.nn.Linear(300, 200))
    gsm = SubgraphGradSampleModule(net, check_independence=False)
    opt = DPOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), gsm, sigma=1.5, max_grad_norm=0.5, seed=seed,
                      secure_mode=secure)
    return opt, list(net.parameters())


def _flat(zs):
    return torch.cat([z.reshape(-1) for z in zs])


def test_device_noise_depends_on_seed_and_step_only():
    opt, params = _opt()
    z0 = _flat(opt._device_noises(params, torch.device("cpu")))
    assert torch.equal(z0, _flat(opt._device_noises(params, torch.device("cpu"))))  # same step: same bits
    opt.steps = 1
    z1 = _flat(opt._device_noises(params, torch.device("cpu")))
    assert not torch.equal(z0, z1)
    other, _ = _opt(seed=5)
    assert not torch.equal(z0, _flat(other._device_noises(params, torch.device("cpu"))))
    # a resumed optimizer (state_dict: steps, no seed) with the same seed continues the stream
    fresh, _ = _opt()
    fresh.load_state_dict(opt.state_dict())
    assert torch.equal(z1, _flat(fresh._device_noises(params, torch.device("cpu"))))
    assert "4" not in repr(sorted(k for k in opt.state_dict()))  # the keys, not the seed
    assert all(not isinstance(v, int) or v != 4 for v in opt.state_dict().values())


def test_device_noise_is_calibrated():
    # N(0, (2 C sigma)^2) per coordinate: 60,200 coordinates, std within 2 % (about 5 standard errors)
    for secure in (False, True):
        opt, params = _opt(secure=secure)
        z = _flat(opt._device_noises(params, torch.device("cpu"))).double()
        assert z.numel() == 60200 and z.dtype == torch.float64
        assert abs(float(z.std()) / opt.noise_std - 1) < 0.02, secure
        assert abs(float(z.mean())) < 0.05 * opt.noise_std
        assert [tuple(t.shape) for t in opt._device_noises(params, torch.device("cpu"))] == [(200, 300), (200,)]


def test_cpu_noise_is_the_step_seeds_draws():
    # CPU parameters: the CPU generator's draws, parameter by parameter, from a state set by
    # (seed, step) alone (nothing to save in a checkpoint): step t's noise whatever came before
    opt, params = _opt()
    g = torch.Generator().manual_seed(opt._step_seed())
    want = _flat([torch.normal(0.0, opt.noise_std, p.shape, generator=g) for p in params])
    assert torch.equal(_flat(opt._noises(params)), want)
    assert torch.equal(_flat(opt._noises(params)), want)  # same step, same noise
    opt.steps += 1
    assert not torch.equal(_flat(opt._noises(params)), want)  # another step, other noise


def test_device_sampler_shares_and_size_bins_match_cpu(fake_gpu):  # noqa: F811
    # part=(r, W) on the CUDA path (slot buffers of the whole batch, compaction before the
    # size read) gives the CPU path's shares bit for bit; size_bins is the histogram of the
    # sizes' bins (the one clipping pads by)
    from _fake_cuda import cpu_kernels

    from ldpfast import _buckets
    from ldpfast.sampling import HeterPoisson

    data = _graph(n=300, e=2400)
    with cpu_kernels():
        ref = HeterPoisson(data, 0.2, 2.0, seed=7)
        want = {(t, r): ref.sample(t, part=(r, 3)) for t in range(2) for r in range(3)}
    sp = HeterPoisson(_on_device(data), 0.2, 2.0, seed=7)
    for (t, r), w in want.items():
        got = sp.sample(t, part=(r, 3))
        for f in ("x", "edge_index", "n_id", "ptr", "batch", "center", "y", "zeroed"):
            assert torch.equal(getattr(got, f).as_subclass(torch.Tensor), getattr(w, f)), (t, r, f)
        sizes = w.sizes()
        hist = [int(((torch.ceil(torch.log2(sizes.double()))) == k).sum()) for k in range(_buckets.NUM_BINS)]
        assert list(got.size_bins) == hist and sum(hist) == w.num_subgraphs > 0
    assert DeviceInput.copies == [], DeviceInput.copies


def test_clipping_with_a_wrong_size_histogram_never_under_clips():
    # sizes 1, 3, 3, 5 -> bins 0, 2, 2, 3; a histogram that puts a size-3 block in the size-1 bin
    from ldpfast.privacy.dpsgd.clipping import _Blocks, _weight_sq_norms

    g = torch.Generator().manual_seed(1)
    seg = torch.repeat_interleave(torch.arange(4), torch.tensor([1, 3, 3, 5]))
    A, G = torch.randn(12, 6, generator=g), torch.randn(12, 5, generator=g)
    right = _weight_sq_norms(A, G, seg, 4)
    want = torch.stack([(G[seg == b].t() @ A[seg == b]).double().pow(2).sum() for b in range(4)])
    torch.testing.assert_close(right, want)
    hist = [0] * 64
    hist[0], hist[2], hist[3] = 1, 2, 1
    assert torch.equal(_weight_sq_norms(A, G, _Blocks(seg, 4, tuple(hist)), 4), right)  # the sampler's: same bits
    hist[0], hist[2] = 2, 1  # wrong: block 1 (3 rows) padded to 1 row
    got = _weight_sq_norms(A, G, _Blocks(seg, 4, tuple(hist)), 4)
    assert got[1] == float("inf") and torch.equal(got[[0, 3]], right[[0, 3]])
    hist[0] = 0  # too few: blocks left out of every bin
    got = _weight_sq_norms(A, G, _Blocks(seg, 4, tuple(hist)), 4)
    assert (got[torch.tensor([1, 2, 3])] >= right[1:]).all() and torch.isinf(got).sum() >= 1
