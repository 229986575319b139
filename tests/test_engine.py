"""NodeDPEngine: node-level DP-SGD in one call, and the guards that keep the PyG-style loop
true to the accounting (issue 33, items 1 and 2).

On Cora (embedded): a one-layer GCN with 16 hidden units, no dropout (so that runs from a
state_dict see the same function).
"""
from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from ldpfast.privacy import NodeDPEngine
from ldpfast.privacy.dpsgd import BudgetExhaustedError, DPUsageError, subgraph_loss

DELTA = 1e-4


@pytest.fixture(scope="module")
def cora():
    from ldpfast.datasets import load
    from ldpfast.methods.heterpoisson import split_nodes

    data = load("cora")
    data.train_mask, data.test_mask = split_nodes(data.num_nodes, 0)
    return data


class GCN(torch.nn.Module):
    def __init__(self, d_in: int = 1433, hidden: int = 16, classes: int = 7):
        super().__init__()
        from torch_geometric.nn import GCNConv

        self.conv = GCNConv(d_in, hidden)
        self.head = torch.nn.Linear(hidden, classes)

    def forward(self, x, edge_index):
        return self.head(F.elu(self.conv(x, edge_index)))


def _private(cora, *, seed=1, sigma=2.0, steps=6, lr=0.05, init=0, M=2.0, **kw):
    """A fresh model (initialised from ``init``) made private with a given noise."""
    torch.manual_seed(init)
    net = GCN()
    engine = NodeDPEngine()
    if "sample_rate" not in kw:
        kw.setdefault("expected_batch_size", 64)
    model, opt, sampler = engine.make_private(net, torch.optim.Adam(net.parameters(), lr=lr), cora,
                                              sigma=sigma, steps=steps, M=M,
                                              train_mask=cora.train_mask, seed=seed, **kw)
    return engine, net, model, opt, sampler


def _train(model, opt, sampler, stop: int | None = None) -> list[int]:
    """The loop a PyG user writes; returns the batch sizes (stops after ``stop`` batches)."""
    sizes = []
    model.train()
    for batch in sampler:
        opt.zero_grad()
        loss = subgraph_loss(model(batch), batch)
        loss.backward()
        opt.step()
        sizes.append(batch.num_subgraphs)
        if stop is not None and len(sizes) == stop:
            break
    return sizes


def _params(net) -> list[torch.Tensor]:
    return [p.detach().clone() for p in net.parameters()]


def _same(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a, b))


@torch.no_grad()
def _accuracy(model, data) -> float:
    model.eval()
    out = model(data)  # eval mode: the wrapper takes the whole graph
    m = data.test_mask
    return float((out[m].argmax(1) == data.y[m]).float().mean())


# --------------------------------------------------------------------------- the engine
def test_pyg_loop_trains_on_cora_and_epsilon_is_the_accountants_for_the_steps_taken(cora):
    """make_private_with_epsilon: sigma calibrated for the plan, the loop trains (test
    accuracy far above the majority class), and get_epsilon is the accountant's figure for
    the steps taken, also when the loop stops early."""
    torch.manual_seed(0)
    net = GCN()
    engine = NodeDPEngine(accountant="rdp")
    model, opt, sampler = engine.make_private_with_epsilon(
        net, torch.optim.Adam(net.parameters(), lr=0.05), cora, target_epsilon=8.0, target_delta=DELTA,
        epochs=2, max_grad_norm=0.5, expected_batch_size=256, M=2.0, train_mask=cora.train_mask, seed=0)
    n_train = int(cora.train_mask.sum())
    assert sampler.q_b == 256 / n_train and sampler.steps == len(sampler) == 17  # ceil(2 / q_b)
    acc = engine.accountant
    assert acc.epsilon(opt.sigma, 17, DELTA).eps <= 8.0
    assert engine.get_epsilon() == 0.0

    before = _accuracy(model, cora)
    sizes = _train(model, opt, sampler, stop=5)
    assert engine.steps == 5 and len(sampler) == 12
    assert engine.get_epsilon(DELTA) == acc.epsilon(opt.sigma, 5, DELTA).eps < acc.epsilon(opt.sigma, 17, DELTA).eps
    sizes += _train(model, opt, sampler)  # resumes at step 5
    assert len(sizes) == 17 and engine.steps == 17 and len(sampler) == 0
    assert engine.get_epsilon() == acc.epsilon(opt.sigma, 17, DELTA).eps <= 8.0
    after = _accuracy(model, cora)
    majority = float((cora.y[cora.test_mask] == cora.y[cora.test_mask].mode().values).float().mean())
    assert after > max(before, majority) + 0.2, (before, after, majority)


def test_empty_poisson_batches_flow_through_the_loop(cora):
    """An empty sample is a batch like the others: the wrapper takes it, step() releases
    noise only, and it is accounted."""
    _, net, model, opt, sampler = _private(cora, sample_rate=0.0005, steps=8)  # ~1 sub-graph per step
    sizes = []
    model.train()
    for batch in sampler:
        opt.zero_grad()
        before = _params(net)
        subgraph_loss(model(batch), batch).backward()
        opt.step()
        sizes.append(batch.num_subgraphs)
        assert not _same(before, _params(net))  # noise moved the parameters
    assert 0 in sizes and max(sizes) > 0 and opt.steps == 8


def test_state_dict_resumes_with_the_same_parameters_and_epsilon(cora):
    """Interrupted after 3 of 6 steps, resumed in a new engine on a differently initialised
    model made private with the same seed: the same parameters, step count and epsilon as
    the run without interruption (the sampler continues with step 3, the noise too).  The
    state holds nothing that rebuilds the noise or the batches: resumed without the seed, the
    count and epsilon carry over, the batches and noise are fresh."""
    from ldpfast.privacy.engine import NOISE_TAG, SAMPLER_TAG

    engine, net, model, opt, sampler = _private(cora)
    _train(model, opt, sampler)
    e_full = engine.get_epsilon(DELTA)

    engine1, _, model1, opt1, sampler1 = _private(cora)
    _train(model1, opt1, sampler1, stop=3)
    state = copy.deepcopy(engine1.state_dict())
    flat = repr(state)  # no seed and no generator state anywhere in it
    assert all(str(v) not in flat for v in (1, 1 ^ SAMPLER_TAG, 1 ^ NOISE_TAG)[1:])
    assert "generator" not in state["optimizer"] and "sampler_seed" not in state
    engine2, net2, model2, opt2, sampler2 = _private(cora, init=7)
    engine2.load_state_dict(state)
    assert engine2.steps == 3 and len(sampler2) == 3
    assert _train(model2, opt2, sampler2) == [b.num_subgraphs for b in map(sampler.sample, range(3, 6))]
    assert engine2.steps == 6 and engine2.get_epsilon(DELTA) == e_full
    assert _same(_params(net2), _params(net))
    engine3, net3, model3, opt3, sampler3 = _private(cora, seed=None, init=7)
    engine3.load_state_dict(state)
    assert engine3.steps == 3 and len(sampler3) == 3
    _train(model3, opt3, sampler3)
    assert engine3.steps == 6 and engine3.get_epsilon(DELTA) == e_full
    assert not _same(_params(net3), _params(net))  # fresh noise: not the saved run's

    other = _private(cora, M=1.0)[0]
    with pytest.raises(ValueError, match=r"M: the state's 3 steps were accounted with M=2\.0"):
        other.load_state_dict(state)
    other = _private(cora, sigma=3.0)[0]
    with pytest.raises(ValueError, match="sigma: the state was taken at sigma=2.0"):
        other.load_state_dict(state)
    assert other.steps == 0  # nothing loaded


def test_budget_refuses_the_step_that_would_exceed_it(cora):
    """make_private(budget=(eps, delta)): the step past the budget raises, with the
    parameters, the gradients and the count unchanged, and eps stays within the budget."""
    probe = _private(cora)[0]
    eps2 = probe.accountant.epsilon(2.0, 2, DELTA).eps  # what two steps spend
    engine, net, model, opt, sampler = _private(cora, budget=(eps2, DELTA))
    assert opt.budget_steps == 2
    _train(model, opt, sampler, stop=2)
    model.train()
    batch = next(iter(sampler))
    opt.zero_grad()
    subgraph_loss(model(batch), batch).backward()
    params, grads = _params(net), [p.grad.clone() for p in net.parameters()]
    with pytest.raises(BudgetExhaustedError, match=r"step 3 refused.*budget \(eps="):
        opt.step()
    assert _same(params, _params(net)) and _same(grads, [p.grad for p in net.parameters()])
    assert engine.steps == 2 and engine.get_epsilon() == eps2


def test_plan_arguments_are_checked(cora):
    net = GCN()
    sgd = torch.optim.SGD(net.parameters(), lr=0.1)
    engine = NodeDPEngine()
    base = {"sigma": 1.0, "steps": 3, "M": 2.0}
    with pytest.raises(ValueError, match="expected_batch_size, sample_rate: give exactly one"):
        engine.make_private(net, sgd, cora, **base)
    with pytest.raises(ValueError, match="expected_batch_size, sample_rate: give exactly one"):
        engine.make_private(net, sgd, cora, expected_batch_size=64, sample_rate=0.1, **base)
    with pytest.raises(ValueError, match="epochs, steps: give exactly one"):
        engine.make_private(net, sgd, cora, expected_batch_size=64, epochs=1, **base)
    with pytest.raises(ValueError, match="M: expected"):
        engine.make_private(net, sgd, cora, expected_batch_size=64, sigma=1.0, steps=3, M=0.0)
    with pytest.raises(ValueError, match="optimizer: must hold exactly the model's trainable parameters"):
        engine.make_private(net, torch.optim.SGD(GCN().parameters(), lr=0.1), cora, expected_batch_size=64,
                            **base)
    with pytest.raises(ValueError, match="accountant"):
        NodeDPEngine(accountant="moments")
    with pytest.raises(RuntimeError, match="make_private"):
        engine.get_epsilon(DELTA)


# --------------------------------------------------------------------------- the guards
def test_a_mean_loss_is_refused_at_backward(cora):
    """A mean over the sub-graphs shrinks every per-sub-graph gradient by the batch size
    before clipping: refused at backward(), before any gradient is written."""
    _, net, model, opt, sampler = _private(cora)
    batch = next(iter(sampler))
    model.train()
    for loss_of, how in [(lambda o: F.cross_entropy(o[batch.center], batch.y), r"F\.cross_entropy.*'mean'"),
                         (lambda o: torch.nn.CrossEntropyLoss()(o[batch.center], batch.y), "reduction='mean'"),
                         (lambda o: F.cross_entropy(o[batch.center], batch.y, reduction="none").mean(), r"mean\(\)"),
                         (lambda o: subgraph_loss(o, batch, reduction="mean"), "reduction='mean'"),
                         (lambda o: F.nll_loss(o.log_softmax(-1)[batch.center], batch.y) * 2.0, "nll_loss")]:
        opt.zero_grad()
        with pytest.raises(DPUsageError, match=rf"averages over the sub-graphs.*{how}.*subgraph_loss"):
            loss_of(model(batch)).backward()
        assert all(p.grad is None for p in net.parameters())
    subgraph_loss(model(batch), batch).backward()  # the sum, and a mean over the classes, pass
    model(batch).log_softmax(-1).mean(-1).sum().backward()
    opt.step()
    assert opt.steps == 1


def test_step_without_per_subgraph_gradients_is_refused(cora):
    """Calling the model inside the wrapper, step() without backward() and a second step()
    on one batch used to release noise only; now each raises, nothing changed."""
    _, net, model, opt, sampler = _private(cora)
    batch = next(iter(sampler))
    model.train()
    params = _params(net)

    opt.zero_grad()  # the wrapper bypassed: the loss comes from the model inside it
    subgraph_loss(net(batch.x, batch.edge_index), batch).backward()
    with pytest.raises(DPUsageError, match=r"module 'conv.lin' ran a training forward.*outside the wrapper.*"
                                           r"bypassed"):
        opt.step()

    opt.zero_grad()  # a forward through the wrapper, no backward
    model(batch)
    with pytest.raises(DPUsageError, match=r"forward through the wrapper \(\d+ sub-graphs\) got no gradient: call "
                                           r"loss.backward\(\)"):
        opt.step()
    assert opt.steps == 0 and _same(params, _params(net))

    opt.zero_grad()
    subgraph_loss(model(batch), batch).backward()
    opt.step()
    with pytest.raises(DPUsageError, match="no training forward through the wrapper since the last step"):
        opt.step()  # a second release of the same batch
    assert opt.steps == 1


def test_the_sampler_refuses_a_batch_without_a_step(cora):
    sampler = _private(cora)[4]
    it = iter(sampler)
    next(it)
    with pytest.raises(DPUsageError, match="the batch of step 0 was not released; call optimizer.step"):
        next(it)


def test_a_whole_graph_is_refused_in_training_and_accepted_in_eval(cora):
    _, net, model, _, _ = _private(cora)
    model.train()
    with pytest.raises(TypeError, match=r"got a Data without num_subgraphs \(a whole graph\?\) in training mode"):
        model(cora)
    with pytest.raises(ValueError, match="seg, num_subgraphs: required"):
        model(cora.x, cora.edge_index)
    model.eval()
    with torch.no_grad():
        assert torch.equal(model(cora), net(cora.x, cora.edge_index))


def test_default_M_is_the_measured_best(cora):
    """Without M, sampling='heterpoisson' runs at DEFAULT_M = 1 (docs/dpsgd_utility.md): the
    accountant gets it, and the calibrated sigma equals an explicit M=1's
    (and differs from M=2's, so the check can fail)."""
    from ldpfast.privacy.engine import DEFAULT_M

    assert DEFAULT_M == 1.0
    sig = {}
    for M in (None, 1.0, 2.0):
        net = GCN()
        engine = NodeDPEngine()
        kw = {} if M is None else {"M": M}
        engine.make_private_with_epsilon(net, torch.optim.SGD(net.parameters(), lr=0.1), cora, target_epsilon=4.0,
                                         target_delta=DELTA, steps=5, expected_batch_size=64, seed=1, **kw)
        assert engine.accountant.M == (DEFAULT_M if M is None else M)
        sig[M] = engine.optimizer.sigma
    assert sig[None] == sig[1.0] != sig[2.0]
