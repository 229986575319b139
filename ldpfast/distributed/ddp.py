"""Data-parallel HeterPoisson DP-SGD over ``torch.distributed`` (gloo on CPU, NCCL on GPU).

Launch one process per device with ``torchrun`` (it sets ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``)::

    torchrun --nproc_per_node 2 -m ldpfast.distributed.ddp --dataset cora --eps 4 --T 100 \\
        --seed-file secret.txt

Protocol of one step ``t`` (Algorithm 1 of Xiang, Wang & Wang, IEEE S&P 2024, split over ``W`` ranks):

1. every rank draws the step's central nodes (``HeterPoisson.central``: a counter-based draw
   per candidate, addressed by ``(seed, t, node)``, identical on every rank) and builds the
   sub-graphs of its contiguous share ``r`` of them (``HeterPoisson.sample(t, part=(r, W))``).
   A sub-graph depends only on ``(seed, t, centre)``, so the union of the shares is the
   single-process batch;
2. every rank computes its clipped per-sub-graph gradient sum (the unchanged
   :class:`ldpfast.privacy.dpsgd.SubgraphGradSampleModule`);
3. rank 0 adds the Gaussian noise, drawn once, from the generator the single-process
   :class:`ldpfast.privacy.dpsgd.DPOptimizer` uses (same seed, same draws in the same parameter
   order); the other ranks add nothing;
4. one all-reduce (sum) of the flattened gradients; every rank divides by the expected
   batch size and takes the same optimizer step, so the replicas stay equal.

The released gradient is therefore ``sum_b clip(g_b) + N(0, (2 C sigma)^2 I)`` exactly as in
one process; only the order of the floating-point additions differs (per-rank partial sums,
then the all-reduce), so the trained model equals the single-process model **up to the
reduction order** (float32 round-off), not bit for bit.  The accountant is unchanged
(:class:`ldpfast.privacy.accountants.HeterPoissonAccountant` with the same ``q_b, M, sigma, T``).

At start-up the ranks all-gather ``(hash(seed), q_b, M, C, sigma, T)`` and raise if any
differs (a rank with another seed would sample other sub-graphs and, on rank 0, other
noise).  The seed is compared through a SHA-256 digest that is never printed or logged.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
from dataclasses import dataclass, field
from typing import Any

import torch

from .._checks import check_eps, check_int, check_prob, check_real
from ..privacy.budget import Spent
from ..privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
from ..privacy.engine import NOISE_TAG, SAMPLER_TAG
from ..rng import resolve_seed

__all__ = ["AGREED", "DPDDP", "DDPResult", "DistributedDPOptimizer", "check_agreement", "main", "train"]

AGREED = ("seed", "q_b", "M", "C", "sigma", "T")
"""Parameters every rank must share (checked by :func:`check_agreement`)."""

# the same derived seeds as NodeDPEngine and ldpfast.methods.heterpoisson.fit (sampler, noise)
_SAMPLER_TAG, _NOISE_TAG = SAMPLER_TAG, NOISE_TAG


def _world() -> tuple[int, int]:
    """(rank, world size); (0, 1) when torch.distributed is not initialised."""
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _seed_digest(seed: int) -> str:
    # domain-separated digest: equal seeds give equal digests; never printed
    return hashlib.sha256(b"ldpfast.ddp.seed:" + int(seed).to_bytes(8, "little")).hexdigest()


def check_agreement(*, seed: int, q_b: float, M: float, C: float, sigma: float, T: int,
                    group=None) -> None:
    """All-gather the training parameters and raise if the ranks disagree.

    Parameters
    ----------
    seed, q_b, M, C, sigma, T
        This rank's values (``C`` = clipping norm).  The seed is exchanged only as a SHA-256
        digest, and no message names the seed or its digest.
    group : torch.distributed process group, optional
        Default: the world.

    Raises
    ------
    ValueError
        Naming the parameters that differ and the ranks holding each value (for the seed,
        only which ranks differ).  Raised on every rank, so no rank is left waiting.
    """
    world = _world()[1]
    mine = {"seed": _seed_digest(seed), "q_b": float(q_b), "M": float(M), "C": float(C),
            "sigma": float(sigma), "T": int(T)}
    if world == 1:
        return
    gathered: list[Any] = [None] * world
    torch.distributed.all_gather_object(gathered, mine, group=group)
    problems = []
    for name in AGREED:
        vals = [g[name] for g in gathered]
        if any(v != vals[0] for v in vals):
            if name == "seed":
                groups: dict[str, list[int]] = {}
                for r, v in enumerate(vals):
                    groups.setdefault(v, []).append(r)
                problems.append("seed differs between ranks (groups of ranks with equal seeds: "
                                f"{sorted(groups.values())})")
            else:
                problems.append(f"{name} differs: " + ", ".join(f"rank {r}: {v!r}" for r, v in enumerate(vals)))
    if problems:
        raise ValueError("ddp: the ranks must train with the same seed, q_b, M, C (max_grad_norm), sigma and T; "
                         + "; ".join(problems))


class DistributedDPOptimizer(DPOptimizer):
    """:class:`ldpfast.privacy.dpsgd.DPOptimizer` whose clipped sum is all-reduced over the ranks.

    Same parameters as :class:`~ldpfast.privacy.dpsgd.DPOptimizer` (the step count and limits
    are the same on every rank; clipping modes included: adaptive clipping's count is
    all-reduced with the gradients), plus ``group`` (process group, default the world).
    Rank 0 draws the noise, as the single-process optimizer with the same ``seed`` does (on
    the parameters' device, from a generator there reseeded every step from
    ``SplitMix64(seed, step)``: with CPU parameters the very draws of one process, with
    GPU parameters one launch on the GPU, no host copy; issue 40), and adds it to its
    partial sum before the all-reduce; the noise is thus drawn once.  ``secure_mode`` is
    refused: it seeds from ``secrets``, and only rank 0 draws, so it would work, but no
    test covers it yet.
    """

    def __init__(self, optimizer, module, *, sigma, group=None, secure_mode: bool = False, **kwargs):
        if secure_mode:
            raise ValueError("secure_mode: not supported by DistributedDPOptimizer yet")
        super().__init__(optimizer, module, sigma=sigma, secure_mode=False, **kwargs)
        self.group = group

    def _add_noise(self, params, count=None):
        """Add the noise (rank 0) to this rank's clipped sum (and centred count), then
        all-reduce (:meth:`pre_step` clips before and scales and counts after)."""
        rank, world = _world()
        if rank == 0:  # the single-process optimizer's draws, on the parameters' device
            for p, z in zip(params, self._noises(params)):
                p.grad = p.grad + z.to(p.dtype)
            if count is not None:
                count = count + self._count_noise()
        if world > 1:
            flat = torch.cat([p.grad.reshape(-1) for p in params])
            torch.distributed.all_reduce(flat, op=torch.distributed.ReduceOp.SUM, group=self.group)
            off = 0
            for p in params:
                k = p.numel()
                p.grad = flat[off:off + k].view_as(p).clone()
                off += k
            if count is not None:
                c = torch.tensor([count], dtype=torch.float64, device=flat.device)
                torch.distributed.all_reduce(c, op=torch.distributed.ReduceOp.SUM, group=self.group)
                count = float(c[0])
        return count


class DPDDP(torch.nn.Module):
    """Data-parallel node-level DP-SGD around any model (Opacus's ``DPDDP``).

    Wrap the model on every rank (after ``torch.distributed.init_process_group``) and hand
    the wrapper to :meth:`ldpfast.privacy.NodeDPEngine.make_private` with the same secret
    ``seed`` on every rank: the parameters and buffers are broadcast from rank 0 here, each
    rank then takes its share of every step's batch (``HeterPoisson.sample(part=(rank,
    W))``: the shares together are the single-process batch), clips per sub-graph, and
    :class:`DistributedDPOptimizer` adds rank 0's noise and all-reduces, so the release is
    the single-process one up to the floating-point reduction order, and so is the
    accounting.  Without a process group (or with one rank) it is the model itself.

    Parameters
    ----------
    module : torch.nn.Module
        Any model :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule` accepts.
    group : process group, optional
        Default: the world.

    Examples
    --------
    >>> torch.distributed.init_process_group("gloo")                         # doctest: +SKIP
    >>> model, optimizer, sampler = NodeDPEngine().make_private(              # doctest: +SKIP
    ...     DPDDP(GCN()), torch.optim.Adam(...), data, sigma=1.0, seed=secret, ...)
    """

    def __init__(self, module: torch.nn.Module, group=None):
        super().__init__()
        if not isinstance(module, torch.nn.Module):
            raise TypeError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
        self.module = module
        self.group = group
        if _world()[1] > 1:  # every replica starts from rank 0's parameters
            src = 0 if group is None else torch.distributed.get_global_rank(group, 0)
            with torch.no_grad():
                for t in (*module.parameters(), *module.buffers()):
                    torch.distributed.broadcast(t.data, src=src, group=group)

    # what NodeDPEngine asks of a data-parallel wrapper (it does not import this module)
    _ldp_dpddp = True

    def forward(self, *args, **kwargs):
        """The wrapped model's forward."""
        return self.module(*args, **kwargs)

    def dp_world(self) -> tuple[int, int]:
        """``(rank, world size)`` of the process group (``(0, 1)`` without one)."""
        if self.group is not None and torch.distributed.is_initialized():
            return torch.distributed.get_rank(self.group), torch.distributed.get_world_size(self.group)
        return _world()

    def dp_check_agreement(self, **params) -> None:
        """:func:`check_agreement` over this wrapper's group."""
        check_agreement(group=self.group, **params)

    def dp_optimizer(self, optimizer, module, **kwargs) -> DistributedDPOptimizer:
        """The :class:`DistributedDPOptimizer` over this wrapper's group."""
        return DistributedDPOptimizer(optimizer, module, group=self.group, **kwargs)


@dataclass
class DDPResult:
    """Output of :func:`train` (identical on every rank).

    Attributes
    ----------
    model : torch.nn.Module
        The trained network.
    spent : Spent
        Node-level ``(eps, delta)`` of the release (Theorem 2 RDP accountant), or ``None``
        when ``delta`` was not given.  Never holds the seed.
    sigma : float
        Noise multiplier used.
    subgraphs_per_step : list of int
        This rank's number of sub-graphs at each step.
    world_size : int
    settings : dict
    """

    model: torch.nn.Module
    spent: Spent | None
    sigma: float
    subgraphs_per_step: list[int]
    world_size: int
    settings: dict[str, Any] = field(default_factory=dict)


def train(data, *, q_b: float, M: float, T: int, sigma: float | None = None, eps: float | None = None,
          delta: float | None = None, max_grad_norm: float = 0.5, lr: float = 0.03, model: str = "gcn",
          hidden: int = 128, num_layers: int = 1, train_nodes=None, induced: bool = True,
          degree_model: str = "s2_public_degrees", degree_bound: int | None = None, seed: int | None = None,
          backend: str | None = None, group=None) -> DDPResult:
    """Train a node-level DP GNN with HeterPoisson DP-SGD on every rank of ``torch.distributed``.

    Call it on every rank after ``torch.distributed.init_process_group`` (``"gloo"`` for
    CPU tensors, ``"nccl"`` for CUDA ones); without an initialised process group it trains
    in one process, which is the reference the ranks reproduce (module docstring).  The
    training loop is that of :func:`ldpfast.methods.heterpoisson.fit` (transductive
    sampler on ``data`` with candidates ``train_nodes``, Adam, noise ``N(0, (2 C sigma)^2)``,
    gradient divided by the expected batch size) with the same derived seeds.

    Parameters
    ----------
    data : torch_geometric.data.Data
        The whole graph (``x``, ``y``, ``edge_index``), the same on every rank.
    q_b : float
        Sampling rate in (0, 1].
    M : float
        Neighbourhood multiplier, > 0.
    T : int
        Number of steps, >= 1.
    sigma : float, optional
        Noise multiplier (paper units).  If omitted, calibrated for ``eps`` at ``delta``
        with the Theorem 2 RDP accountant (both then required).
    eps, delta : float, optional
        Target budget (``eps > 0``, ``delta`` in (0, 1)); with ``delta`` the spent budget is
        reported.
    max_grad_norm : float
        Clipping norm ``C`` (paper: 0.5), > 0.
    lr, model, hidden, num_layers
        As in :func:`ldpfast.methods.heterpoisson.fit` (``model`` in gcn / sage / gin).
    train_nodes : bool mask or tensor of node ids, optional
        Candidate central nodes (default: every node with a label; PyG's -1 marks one without).
    induced, degree_model, degree_bound, backend
        As in :class:`ldpfast.sampling.HeterPoisson`.
    seed : int, optional
        Shared secret seed; required when the world has more than one rank (each rank
        drawing its own would break the protocol; :func:`check_agreement` catches a
        mismatch).  Never recorded.
    group : process group, optional

    Raises
    ------
    ValueError
        Bad parameters (named), ranks that disagree (:func:`check_agreement`).
    """
    from ..methods.heterpoisson import build_model
    from ..privacy.accountants import HeterPoissonAccountant
    from ..sampling import HeterPoisson

    rank, world = _world()
    if seed is None and world > 1:
        raise ValueError("seed: required with more than one rank (all ranks must share it); pass the same "
                         "secret 64-bit seed on every rank")
    seed = resolve_seed(seed)
    q_b = check_prob("q_b", q_b, open_low=True)
    M = check_real("M", M, 0.0)
    if M <= 0:
        raise ValueError(f"M: expected a finite number > 0, got {M}")
    T = check_int("T", T, 1)
    C = check_eps("max_grad_norm", max_grad_norm)
    check_eps("lr", lr)
    n = int(data.num_nodes)
    if train_nodes is None and bool((data.y < 0).any()):  # an unlabelled node cannot be a training example
        train_nodes = data.y >= 0
    acc = HeterPoissonAccountant(q_b, M, n, degree_model=degree_model, degree_bound=degree_bound)
    if delta is not None:
        delta = check_prob("delta", delta, open_low=True, open_high=True)
    if sigma is None:
        if eps is None or delta is None:
            raise ValueError("sigma: give sigma, or eps and delta to calibrate it")
        sigma = acc.calibrate_sigma(check_eps("eps", eps), delta, T, method="rdp")
    sigma = check_eps("sigma", sigma)
    check_agreement(seed=seed, q_b=q_b, M=M, C=C, sigma=sigma, T=T, group=group)

    sampler = HeterPoisson(data, q_b, M, seed=seed ^ _SAMPLER_TAG, train_nodes=train_nodes, overlap="drop",
                           induced=induced, backend=backend, num_steps=T, degree_model=degree_model,
                           degree_bound=degree_bound)
    torch.manual_seed(seed)
    net = build_model(model, int(data.x.shape[1]), int(data.y.max()) + 1, hidden=hidden, num_layers=num_layers)
    net = net.to(data.x.device)  # initialised on CPU (same weights as one process), then moved
    gsm = SubgraphGradSampleModule(net)
    opt = DistributedDPOptimizer(torch.optim.Adam(net.parameters(), lr=lr), gsm, sigma=sigma, max_grad_norm=C,
                                 expected_batch_size=sampler.expected_batch_size, seed=seed ^ _NOISE_TAG,
                                 group=group, accountant=acc, max_steps=T)
    sizes = []
    for t in range(T):
        batch = sampler.sample(t, part=(rank, world))
        gsm.train()
        opt.zero_grad()
        if batch.num_subgraphs == 0:  # this rank's share is empty: it still joins the all-reduce
            gsm.forward_empty()
        else:
            subgraph_loss(gsm(batch), batch).backward()
        opt.step()
        sizes.append(batch.num_subgraphs)
    spent = None
    if delta is not None:
        rep = opt.epsilon(delta, method="rdp")  # the steps counted, T by construction
        spent = Spent(mechanism="heterpoisson", target="nodes", eps=float(rep.eps), delta=float(delta),
                      guarantee=f"(eps, delta) {sampler.privacy_model}",
                      params={"q_b": q_b, "M": M, "sigma": sigma, "T": opt.steps, "C": C, "accountant": "rdp",
                              "world_size": world, "degree_model": degree_model, "degree_bound": degree_bound})
    settings = {"model": model, "hidden": hidden, "num_layers": num_layers, "lr": lr, "induced": induced,
                "noise_std": 2 * C * sigma, "expected_batch_size": sampler.expected_batch_size,
                "reduction": "per-rank clipped sums + noise on rank 0, all-reduce SUM (equal to one process "
                             "up to the floating-point reduction order)"}
    return DDPResult(model=net, spent=spent, sigma=float(sigma), subgraphs_per_step=sizes, world_size=world,
                     settings=settings)


# ----------------------------------------------------------------------------- torchrun entry
def _read_seed(path: str | None) -> int | None:
    if path is None:
        return None
    with open(path) as f:
        txt = f.read().strip()
    try:
        v = int(txt, 0)
    except ValueError:
        raise ValueError("--seed-file: expected one integer in [0, 2**64)") from None
    if not 0 <= v < 2**64:
        raise ValueError("--seed-file: expected one integer in [0, 2**64)")
    return v


def main(argv: list[str] | None = None) -> int:
    """``torchrun --nproc_per_node W -m ldpfast.distributed.ddp --dataset NAME ...``.

    Initialises the process group from torchrun's environment (gloo on CPU, NCCL when
    ``--device cuda``), trains with :func:`train` and prints (rank 0) a JSON line with the
    budget spent and the test accuracy.  The seed is read from ``--seed-file`` (the same
    file on every rank) so it never appears in a command line or log.
    """
    p = argparse.ArgumentParser(prog="ldpfast.distributed.ddp", description=main.__doc__)
    p.add_argument("--dataset", default="cora", help="dataset name for ldpfast.datasets.load (default cora)")
    p.add_argument("--eps", type=float, default=4.0)
    p.add_argument("--delta", type=float, default=None, help="default 1/|V|^1.1")
    p.add_argument("--q-b", type=float, default=0.1)
    p.add_argument("--M", type=float, default=1.0)
    p.add_argument("--T", type=int, default=100)
    p.add_argument("--C", type=float, default=0.5, help="clipping norm")
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--model", default="gcn", choices=("gcn", "sage", "gin"))
    p.add_argument("--seed-file", required=True, help="file holding the shared secret seed (never logged)")
    p.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    a = p.parse_args(argv)
    import os

    from ..datasets import load

    backend_name = "nccl" if a.device == "cuda" else "gloo"
    if a.device == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    torch.distributed.init_process_group(backend_name)
    try:
        data = load(a.dataset)
        if a.device == "cuda":  # sampler and model on the GPU (not run here: no GPU)
            data = data.to("cuda")
        n = int(data.num_nodes)
        delta = a.delta if a.delta is not None else 1.0 / n ** 1.1
        res = train(data, q_b=a.q_b, M=a.M, T=a.T, eps=a.eps, delta=delta, max_grad_norm=a.C, lr=a.lr,
                    model=a.model, seed=_read_seed(a.seed_file))
        if torch.distributed.get_rank() == 0:
            with torch.no_grad():
                res.model.eval()
                pred = res.model(data.x, data.edge_index).argmax(1)
                acc = float((pred == data.y).float().mean().cpu())
            print(json.dumps({"world_size": res.world_size, "eps": res.spent.eps, "delta": res.spent.delta,
                              "sigma": res.sigma, "T": a.T, "accuracy_full_graph": acc}))
    finally:
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
