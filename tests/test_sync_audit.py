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


def _dp_step(data, steps=3, audit_step=None):
    """HeterPoisson + GCN + DPOptimizer(Adam) as benchmarks/bench_gpu.py's bench_dpsgd_step;
    returns the parameters and the audit of step ``audit_step``."""
    from ldpfast.methods import heterpoisson as HP
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
    from ldpfast.sampling import HeterPoisson

    torch.manual_seed(3)
    net = HP.build_model("gcn", 12, 4, hidden=8)
    gsm = SubgraphGradSampleModule(net)
    opt = DPOptimizer(torch.optim.Adam(net.parameters(), lr=0.03), gsm, sigma=1.0, max_grad_norm=0.5,
                      expected_batch_size=30.0, seed=4)
    sp = HeterPoisson(data, 0.1, 2.0, seed=5)
    audit = None
    for t in range(steps):
        with audit_syncs() if t == audit_step else _nothing() as a:
            b = sp.sample(t)
            opt.zero_grad()
            subgraph_loss(gsm(b), b).backward()
            opt.step()
        audit = a if t == audit_step else audit
    return [p.detach().as_subclass(torch.Tensor).clone() for p in net.parameters()], audit


class _nothing:
    def __enter__(self):
        return None

    def __exit__(self, *exc):
        return False


def test_one_dpsgd_step_syncs(fake_gpu):  # noqa: F811
    data = _on_device(_graph(n=300, e=2400))
    _, audit = _dp_step(data, steps=3, audit_step=2)  # step 0 runs the one-off independence check
    print(audit.report())
    assert DeviceInput.copies == [], DeviceInput.copies
    assert audit.count() == 0, audit.report()
