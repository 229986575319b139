"""HeterPoisson end to end: node-level DP-SGD for GNNs.

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks", IEEE S&P 2024: Algorithm 1 (training), Algorithm 2
and 3 (sub-graph sampling, :mod:`ldpfast.sampling`), Theorem 2 (accounting,
:mod:`ldpfast.privacy.accountants`), section 4.4 (inference privacy), section 5 (setup,
Table II transductive, Table IV inductive).

Setup of section 5 (defaults of :func:`fit`)
-------------------------------------------
* random 80/20 train/test split of the nodes;
* ``q_b = 4096 / #training nodes`` (expected 4096 sub-graphs per step; the paper writes
  ``4096 / |V|``, the authors' code divides by the training-set size), ``T = ceil(9 / q_b)``
  ("9 epochs"), ``delta = 1 / |V|^1.1`` with ``|V|`` the number of nodes of the dataset;
* per-sub-graph clipping at ``C = 0.5``, Gaussian noise ``N(0, (2 C sigma)^2)`` with ``sigma``
  calibrated by Theorem 2 for the target ``eps`` (``accountant="rdp"``; ``"pld"`` calibrates
  with dp_accounting's PLD instead, which gives less noise for the same ``eps``);
* GNN: ``num_layers`` convolutions (GCN, GIN or SAGE from PyG) with ``hidden = 128`` and ELU,
  then a linear classifier of the central node; Adam.  The authors' code uses one
  aggregation layer (our default) and learning rate 0.01, but also clamps every noisy gradient
  coordinate to 1/100 of the noise level (a post-processing the paper does not mention, not
  done here); without it 0.03 was better on both datasets (GCN/GIN/SAGE at eps = 2, seed 0:
  Facebook 77.1/78.4/75.7 -> 79.1/78.5/78.4, Twitch-DE GCN 62.9 -> 64.7), so ``lr = 0.03``;
* ``M`` in {1, 2, 3, 4} (the paper reports the best), ``N_test = 13`` test neighbours drawn
  among the non-training nodes only (section 4.4), so inference touches no training node.

Settings: ``"transductive"`` trains on the whole graph (central nodes: training nodes;
peripheral nodes: any node) and tests on the test nodes with neighbours among test nodes;
``"inductive"`` trains on the sub-graph induced by the training nodes and tests on the one
induced by the test nodes.  ``model="mlp"`` is a DP MLP (features only, one node per
example) trained with HeterPoisson's own schedule (Poisson sampling at ``q_b``, 9 epochs,
``C = 0.5``, lr 0.03, 128 hidden), the subsampled Gaussian mechanism accounted as the
mixture ``{0: 1 - q_b, 0.5: q_b}``: the naive DP-SGD baseline given the tuning HeterPoisson
got.  :func:`fit_paper_baseline` is the baseline *as the paper ran it* (its authors'
settings): on Twitch-DE it predicts the majority class.

Privacy: node-level ``(eps, delta)``-DP for the training nodes of the released model, for
the neighbouring relation ``degree_model`` names (recorded in ``report.privacy_model`` and
the ledger entry; :mod:`ldpfast.privacy.accountants`):

* ``"s2_public_degrees"`` (default): the paper's model S2 (Definition 4): the out-degrees
  of the whole graph are public and fixed.  The peripheral probabilities use the whole
  graph's out-degrees in *both* settings (the inductive sampler gets them through
  ``out_degree``; before, it used the training graph's, which change with the differing
  node, so the recorded bound did not hold even under S2).  Not a guarantee when the graph
  structure itself is private.
* ``"public_bound"`` (``degree_bound = D_pub``): probabilities ``min(1, M / D_pub)``, sound
  with private structure over graphs whose nodes point to at most ``D_pub`` training
  (candidate) nodes; ``fit`` raises a ValueError naming ``degree_bound`` on other graphs.

Inference on test nodes only reads test nodes and the model.  In the transductive setting
non-training nodes may be peripheral nodes, so they are treated as public.  The random 80/20
split is part of the experimental protocol, not of the mechanism (it depends on ``|V|``),
and the default ``q_b = expected_batch_size / #training nodes`` treats the number of
training nodes as public (pass ``q_b`` to fix the rate independently of it).
No report, ledger entry or settings dict holds the seed: whoever keeps it can rebuild the
noise, so reproducibility stays with the caller.

Training is the PyG-style loop of :class:`ldpfast.privacy.NodeDPEngine` (``model="mlp"``:
its ``sampling="nodes"``); the seeds are derived as before, so a seed gives the same run as
the earlier hand-built loop.  The reproduction of Tables II and IV (``ldpfast reproduce
heterpoisson``) is :mod:`ldpfast.reproduce.heterpoisson`.
"""
from __future__ import annotations

import itertools
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .. import _backend
from .._checks import check_eps, check_int, check_prob, check_real
from .._deprecated import moved_names
from ..privacy.accountants import check_degree_model
from ..privacy.budget import Spent
from ..privacy.engine import NODES_PRIVACY_MODEL
from ..rng import resolve_seed
from ._common import (
    _data_tensors,
    data_to,
    device_raises,
    resolve_device,
    sub_seed,
    with_edge_index,
)

__all__ = ["PAPER_BASELINE_PRIVACY_MODEL", "HeterPoissonReport", "build_model", "fit", "fit_paper_baseline",
           "split_nodes"]

MODELS = ("gcn", "sage", "gin", "gat", "mlp")
SETTINGS = ("transductive", "inductive")
MLP_PRIVACY_MODEL = NODES_PRIVACY_MODEL  # the naive DP-SGD rows (NodeDPEngine sampling="nodes")

# The reproduction (Tables II and IV) moved to ldpfast.reproduce.heterpoisson (old paths warn for
# one release).
__getattr__ = moved_names(__name__, "ldpfast.reproduce.heterpoisson",
                          ("PAPER_TABLE2", "PAPER_TABLE4", "reproduce_main"))

# ----------------------------------------------------------------------------- models
class GNN(torch.nn.Module):
    """``num_layers`` PyG convolutions + ELU, then a linear classifier (section 5 setup).
    ``"gat"`` (not in the paper): one-head ``GATConv`` layers, attention dropout 0."""

    def __init__(self, kind: str, d_in: int, hidden: int, n_classes: int, num_layers: int = 1):
        super().__init__()
        from torch_geometric.nn import GATConv, GCNConv, GINConv, SAGEConv

        self.kind = kind
        convs = []
        d = d_in
        for _ in range(num_layers):
            if kind == "gcn":
                convs.append(GCNConv(d, hidden))
            elif kind == "sage":
                convs.append(SAGEConv(d, hidden))
            elif kind == "gat":
                convs.append(GATConv(d, hidden))
            elif kind == "gin":
                convs.append(GINConv(torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.ELU(),
                                                         torch.nn.Linear(hidden, hidden)), train_eps=True))
            else:
                raise ValueError(f"model: expected one of {MODELS}, got {kind!r}")
            d = hidden
        self.convs = torch.nn.ModuleList(convs)
        self.head = torch.nn.Linear(hidden, n_classes)

    def forward(self, x, edge_index):
        for conv in self.convs:
            x = F.elu(conv(x, edge_index))
        return self.head(x)


class MLP(torch.nn.Module):
    """Naive DP-SGD baseline: features only (``edge_index`` ignored)."""

    def __init__(self, d_in: int, hidden: int, n_classes: int):
        super().__init__()
        self.lin1 = torch.nn.Linear(d_in, hidden)
        self.head = torch.nn.Linear(hidden, n_classes)

    def forward(self, x, edge_index=None):
        return self.head(F.elu(self.lin1(x)))


def build_model(kind: str, d_in: int, n_classes: int, *, hidden: int = 128, num_layers: int = 1) -> torch.nn.Module:
    """The networks of section 5 (``kind`` in gcn / sage / gin / mlp), and gat."""
    if kind == "mlp":
        return MLP(d_in, hidden, n_classes)
    return GNN(kind, d_in, hidden, n_classes, num_layers)


# ----------------------------------------------------------------------------- report
@dataclass
class HeterPoissonReport:
    """Result of :func:`fit`.

    Attributes
    ----------
    accuracy : float
        Test accuracy in [0, 1] (inference sub-graphs of section 4.4).
    eps, delta : float
        The node-level guarantee spent (``eps`` from the calibrating accountant at the
        ``sigma`` used, for the steps the optimizer counted, <= the target).
    eps_target : float
        The requested ``eps``.
    eps_rdp, eps_pld : float or None
        The Theorem 2 (RDP) figure and the dp_accounting PLD figure at the ``sigma`` used.
    sigma : float
        Noise in the paper's units (noise std ``2 C sigma``).
    T, q_b, M : the sampling schedule (``T``: the DP steps taken, as counted by the optimizer).
    privacy : Spent
        Ledger entry (``mechanism="heterpoisson"`` or ``"dpsgd"``); its ``guarantee`` names
        the neighbouring relation.
    settings : dict
        Everything else (model, setting, split sizes, timings...); never the seed.
    privacy_model : str
        The neighbouring relation the guarantee holds for
        (:func:`ldpfast.privacy.accountants.privacy_model`).
    """

    accuracy: float
    eps: float
    delta: float
    eps_target: float
    eps_rdp: float | None
    eps_pld: float | None
    sigma: float
    T: int
    q_b: float
    M: float | None
    privacy: Spent
    settings: dict[str, Any] = field(default_factory=dict)
    privacy_model: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["privacy"] = self.privacy.to_dict()
        return d


# ----------------------------------------------------------------------------- helpers
def split_nodes(n: int, seed: int, train_frac: float = 0.8,
                labelled: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Random train/test bool masks (section 5: 80% / 20%) over the ``labelled`` nodes (bool
    mask; default all): PyG's -1 marks a node without a label, which is in neither split (it
    still takes part in sub-graphs as a neighbour).  With every node labelled the split is the
    same as before."""
    g = torch.Generator().manual_seed(int(seed) & ((1 << 63) - 1))
    idx = torch.arange(n) if labelled is None or bool(labelled.all()) else torch.nonzero(labelled.cpu())[:, 0]
    perm = idx[torch.randperm(idx.numel(), generator=g)]
    k = round(train_frac * idx.numel())
    tr = torch.zeros(n, dtype=torch.bool)
    tr[perm[:k]] = True
    te = torch.zeros(n, dtype=torch.bool)
    te[perm[k:]] = True
    return tr, te


def _induced(data, mask: torch.Tensor):
    from torch_geometric.data import Data
    from torch_geometric.utils import subgraph

    ei, _ = subgraph(mask, data.edge_index, relabel_nodes=True, num_nodes=int(data.num_nodes))
    return Data(x=data.x[mask], y=data.y[mask], edge_index=ei, num_nodes=int(mask.sum()))


@torch.no_grad()
def _evaluate(model, data, nodes_mask, n_test, allow_mask, seed, kind, chunk=8192) -> float:
    from ..sampling import inference_subgraphs, singleton_batch

    model.eval()
    nodes = torch.nonzero(nodes_mask).flatten()
    correct = 0
    for s in range(0, nodes.numel(), chunk):
        sel = torch.zeros_like(nodes_mask)
        sel[nodes[s:s + chunk]] = True
        if kind == "mlp":
            b = singleton_batch(data, nodes[s:s + chunk])
        else:
            b = inference_subgraphs(data, sel, n_test, peripheral_nodes=allow_mask, seed=seed)
        out = model(b.x, b.edge_index)
        correct += int((out[b.center].argmax(1) == b.y).sum())
    return correct / max(1, nodes.numel())


# ----------------------------------------------------------------------------- fit
@device_raises("(or an op this run needs) cannot run there")
def fit(data, eps: float, *, model: str = "gcn", setting: str = "transductive", M: float = 1.0,
        delta: float | None = None, q_b: float | None = None, expected_batch_size: int = 4096,
        epochs: float = 9.0, T: int | None = None, max_grad_norm: float = 0.5, lr: float = 0.03,
        hidden: int = 128, num_layers: int = 1, n_test: int = 13, train_frac: float = 0.8,
        accountant: str = "rdp", report_pld: bool = False, overlap: str = "drop", induced: bool = True,
        degree_model: str = "s2_public_degrees", degree_bound: int | None = None,
        seed: int | None = None, sigma: float | None = None, backend: str | None = None, progress: bool = False,
        dataset: str | None = None, device=None) -> HeterPoissonReport:
    """Train a node-level DP GNN with HeterPoisson (Algorithm 1) and test it (section 4.4).

    Parameters
    ----------
    data : torch_geometric.data.Data
        Undirected graph with ``x``, ``y``, ``edge_index``.
    eps : float
        Target node-level epsilon, > 0.
    model : {"gcn", "sage", "gin", "gat", "mlp"}
        GNN backbone (``"gat"``: one-head ``GATConv``, not in the paper), or ``"mlp"`` for
        the naive DP-SGD baseline (features only).
    setting : {"transductive", "inductive"}
    M : float
        Neighbourhood multiplier, > 0 (ignored by ``"mlp"``).
    delta : float, optional
        In (0, 1); default ``1 / |V|^1.1``.
    q_b : float, optional
        In (0, 1]; default ``expected_batch_size / #training nodes`` (capped at 1).
    expected_batch_size : int
        Expected number of sub-graphs per step when ``q_b`` is not given.
    epochs : float
        ``T = ceil(epochs / q_b)`` unless ``T`` is given (paper: 9).
    T : int, optional
        Number of steps, >= 1.
    max_grad_norm : float
        Clipping norm ``C`` (paper: 0.5), > 0.
    lr, hidden, num_layers : training and network settings.
    n_test : int
        Neighbours per test node (paper: ``N_test = 13``), >= 0.
    train_frac : float
        Fraction of training nodes, in (0, 1).
    accountant : {"rdp", "pld"}
        Which figure calibrates ``sigma`` (Theorem 2 RDP, or dp_accounting's PLD).
    report_pld : bool
        Also compute the PLD figure at the ``sigma`` used (slower).
    overlap : {"drop"}
        Only ``"drop"``: with ``"zero"`` a central node keeps its edges in other sub-graphs,
        so Theorem 2's sensitivity ``1/2`` for the central case does not hold.
    induced : see :class:`ldpfast.sampling.HeterPoisson`.
    degree_model : {"s2_public_degrees", "public_bound"}
        The neighbouring relation (module docstring): S2 with the whole graph's out-degrees
        (default, both settings) or the public bound ``degree_bound``.
    degree_bound : int, optional
        ``D_pub`` in ``[1, 2**31 - 1]``, required by and only allowed with
        ``"public_bound"``; must be >= every node's number of training out-neighbours, and
        fixed without looking at the private graph.  Ignored by ``model="mlp"`` (it reads
        no edge) apart from validation.
    seed : int, optional
        Seeds the split, the initialisation, the sampler and the noise (``None``: 64 fresh
        bits from the OS).  Never recorded in the report: keep it yourself to reproduce a
        run, and keep it secret, since it rebuilds the noise.
    sigma : float, optional
        Use this noise instead of calibrating (``eps`` is then only reported).
    backend : str, optional
        Kernel backend.
    progress : bool
        tqdm progress bar over the steps.
    dataset : str, optional
        Name recorded in the report.
    device : str or torch.device, optional
        Where the data, the sampler (``csrc/cuda/sampling.cu`` on a GPU), per-sub-graph
        clipping, the optimizer and the model run: 'cpu', 'cuda' or 'cuda:N'; default (None)
        the device of ``data``.  The split and the initial weights are drawn on the CPU and
        moved; the DP-SGD noise is drawn on the device by a generator seeded per step from
        the optimizer's seed (so one seed gives the same split, batches and initial weights on
        every device, and the same noise law but other noise bits on a GPU than on the CPU;
        training arithmetic may also differ by GPU non-determinism).  Host syncs per step:
        the sampler's two size reads (before allocations; they also carry the clipping
        buckets' padded sizes) and the model's own (PyG's GCNConv self-loop mask); the
        clipped fractions are read once at the end.  Evaluation needs
        :func:`ldpfast.sampling.inference_subgraphs` on the device: without its CUDA port a
        GNN model raises :class:`ldpfast.BackendUnavailable` naming it, before training.

    Raises
    ------
    {device_raises}
    """
    data = with_edge_index(data)  # PyG's adj_t (T.ToSparseTensor) read as its edge_index
    eps = check_eps("eps", eps)
    if model not in MODELS:
        raise ValueError(f"model: expected one of {MODELS}, got {model!r}")
    if setting not in SETTINGS:
        raise ValueError(f"setting: expected one of {SETTINGS}, got {setting!r}")
    M = check_real("M", M, 0.0)
    if M <= 0:
        raise ValueError(f"M: expected a finite number > 0, got {M}")
    if accountant not in ("rdp", "pld"):
        raise ValueError(f"accountant: expected 'rdp' or 'pld', got {accountant!r}")
    degree_model, degree_bound = check_degree_model(degree_model, degree_bound)
    if overlap != "drop":
        raise ValueError(f"overlap: fit accounts only for 'drop' (with 'zero' a central node keeps its edges in "
                         f"other sub-graphs, outside Theorem 2's case 1), got {overlap!r}")
    train_frac = check_prob("train_frac", train_frac, open_low=True, open_high=True)
    n_test = check_int("n_test", n_test, 0)
    check_eps("max_grad_norm", max_grad_norm)
    check_eps("lr", lr)
    hidden = check_int("hidden", hidden, 1)
    num_layers = check_int("num_layers", num_layers, 1)
    expected_batch_size = check_int("expected_batch_size", expected_batch_size, 1)
    # fit's names for the engine's sample_rate, steps, sigma
    q_b = None if q_b is None else check_prob("q_b", q_b, open_low=True)
    T = None if T is None else check_int("T", T, 1)
    sigma = None if sigma is None else check_eps("sigma", sigma)
    seed = resolve_seed(seed)
    if not isinstance(report_pld, bool):
        raise TypeError(f"report_pld: expected a bool, got {type(report_pld).__name__}")
    n = int(data.num_nodes)
    if n < 4 or getattr(data, "x", None) is None or getattr(data, "y", None) is None:
        raise ValueError("data: expected a graph with >= 4 nodes, x and y")
    if delta is None:
        delta = 1.0 / n ** 1.1
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    kind, dev = resolve_device(device, _data_tensors(data))
    if kind == "cuda":
        _backend.resolve("cuda", backend)  # e.g. backend="cpp" with CUDA data: BackendUnavailable
        if model != "mlp":
            _backend.require_cuda_family("ldpfast.sampling.inference_subgraphs (the test-time sub-graphs "
                                         "of fit)", "sampling", "heter_infer")
    with _backend.oom_guard("heterpoisson.fit"):
        return _fit(data_to(data, dev), dev, eps, model, setting, M, delta, q_b, expected_batch_size, epochs, T,
                    max_grad_norm, lr, hidden, num_layers, n_test, train_frac, accountant, report_pld, overlap,
                    induced, degree_model, degree_bound, seed, sigma, backend, progress, dataset, n)


def _fit(data, dev, eps, model, setting, M, delta, q_b, expected_batch_size, epochs, T, max_grad_norm, lr, hidden,
         num_layers, n_test, train_frac, accountant, report_pld, overlap, induced, degree_model, degree_bound, seed,
         sigma, backend, progress, dataset, n):
    """:func:`fit` on ``data`` already on ``dev`` (arguments checked): the PyG-style loop of
    :class:`ldpfast.privacy.NodeDPEngine`."""
    from ..privacy.dpsgd import subgraph_loss
    from ..privacy.engine import NodeDPEngine
    from ..sampling.heterpoisson import out_degrees

    t0 = time.perf_counter()
    # drawn on the CPU (same split on every device), then moved
    lab = data.y >= 0  # -1: no label (PyG); only a node with one is in a split
    labelled = None if bool(lab.all()) else lab.cpu()
    train_mask, test_mask = (t.to(dev) for t in split_nodes(n, seed, train_frac, labelled=labelled))
    n_train = int(train_mask.sum())
    if setting == "transductive":
        g_train, train_nodes = data, train_mask
        g_test, test_nodes, test_allow = data, test_mask, test_mask
    else:
        g_train, train_nodes = _induced(data, train_mask), None
        g_test = _induced(data, test_mask)
        test_nodes, test_allow = torch.ones(g_test.num_nodes, dtype=torch.bool, device=dev), None
    heter = model != "mlp"
    # inductive under S2: D_ot is still the *whole* graph's out-degree, the public, fixed
    # quantity of model S2, and the accountant's |V| is the whole graph's
    s2_inductive = heter and setting == "inductive" and degree_model == "s2_public_degrees"
    plan = {"expected_batch_size": None if q_b is not None else expected_batch_size, "sample_rate": q_b,
            "epochs": None if T is not None else epochs, "steps": T, "max_grad_norm": max_grad_norm,
            "train_mask": train_nodes, "sampling": "heterpoisson" if heter else "nodes", "M": M if heter else None,
            "degree_model": degree_model if heter else "s2_public_degrees",
            "degree_bound": degree_bound if heter else None,
            "out_degree": out_degrees(data, backend=backend)[train_mask] if s2_inductive else None,
            "num_nodes": n, "induced": induced, "seed": seed, "backend": backend}

    torch.manual_seed(seed)
    net = build_model(model, int(data.x.shape[1]), int(data.y.max()) + 1, hidden=hidden,
                      num_layers=num_layers).to(dev)  # initialised on the CPU: same weights on every device
    adam = torch.optim.Adam(net.parameters(), lr=lr)
    engine = NodeDPEngine(accountant=accountant)
    if sigma is None:
        gsm, opt, sampler = engine.make_private_with_epsilon(net, adam, g_train, eps, delta, **plan)
    else:
        gsm, opt, sampler = engine.make_private(net, adam, g_train, sigma=sigma, **plan)
    sigma, q_b, T = opt.sigma, sampler.q_b, sampler.steps
    pm = engine.privacy_model
    steps = iter(sampler)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, total=T, desc=f"heterpoisson {dataset or ''} {model} eps={eps:g}", leave=False)
    t_sample = t_train = 0.0
    clipped = []
    sizes = []
    gsm.train()
    s0 = time.perf_counter()
    for batch in steps:  # an empty Poisson sample flows through: step() releases noise only
        s1 = time.perf_counter()
        t_sample += s1 - s0
        opt.zero_grad()
        subgraph_loss(gsm(batch), batch).backward()
        opt.step()
        if batch.num_subgraphs:
            clipped.append((opt.last_stats.factors < 1).float().mean())  # on the device, read once after training
        sizes.append(batch.num_subgraphs)
        s0 = time.perf_counter()
        t_train += s0 - s1
    if opt.steps != T:  # every step releases (noise-only ones included): a mismatch is a bug
        raise RuntimeError(f"heterpoisson.fit: {opt.steps} DP steps counted, {T} planned")
    rep_rdp = opt.epsilon(delta, method="rdp")
    eps_pld = opt.epsilon(delta, method="pld").eps if (report_pld or accountant == "pld") else None
    eps_spent = rep_rdp.eps if accountant == "rdp" else eps_pld
    acc_test = _evaluate(net, g_test, test_nodes, n_test, test_allow, seed ^ 0x7E57, model)
    settings = {"model": model, "setting": setting, "dataset": dataset, "num_nodes": n, "n_train": n_train,
                "n_test_nodes": int(test_mask.sum()), "hidden": hidden, "num_layers": num_layers, "lr": lr,
                "max_grad_norm": max_grad_norm, "noise_std": 2 * max_grad_norm * sigma, "N_test": n_test,
                "accountant": accountant, "overlap": overlap, "induced": induced,
                "degree_model": degree_model if heter else None,
                "degree_bound": degree_bound if heter else None,
                "rdp_order": rep_rdp.order, "rdp_K": rep_rdp.K, "rdp_delta_tail": rep_rdp.delta_tail,
                "rdp_worst_degree": rep_rdp.worst_degree, "mean_subgraphs": float(np.mean(sizes)) if sizes else 0.0,
                "clipped_fraction": float(np.mean(torch.stack(clipped).cpu().tolist())) if clipped else 0.0,
                "seconds_sampling": t_sample, "seconds_training": t_train,
                "seconds_total": time.perf_counter() - t0}
    spent = Spent(mechanism="heterpoisson" if heter else "dpsgd", target="nodes", eps=float(eps_spent),
                  delta=float(delta), guarantee=f"(eps, delta) {pm}",
                  params={"q_b": q_b, "M": M if heter else None, "sigma": sigma, "T": opt.steps,
                          "C": max_grad_norm, "accountant": accountant,
                          "degree_model": degree_model if heter else None,
                          "degree_bound": degree_bound if heter else None})
    return HeterPoissonReport(accuracy=acc_test, eps=float(eps_spent), delta=float(delta), eps_target=eps,
                              eps_rdp=float(rep_rdp.eps), eps_pld=None if eps_pld is None else float(eps_pld),
                              sigma=float(sigma), T=opt.steps, q_b=float(q_b), M=float(M) if heter else None,
                              privacy=spent, settings=settings, privacy_model=pm)


# ----------------------------------------------------------------------------- the paper's baseline
PAPER_BASELINE_PRIVACY_MODEL = (
    "node-level DP, one example per training node (its features and label; no edge is read), as the paper's "
    "authors account it: the Poisson-subsampled Gaussian mechanism at q = batch_size / n_train, although the "
    "training draws shuffled fixed-size batches (that sampling is not the one accounted)")


class _PaperMLP(torch.nn.Module):
    """The authors' baseline network: ``depth`` hidden layers of ``hidden`` units, ReLU."""

    def __init__(self, d_in: int, hidden: int, n_classes: int, depth: int):
        super().__init__()
        dims = [d_in] + [hidden] * depth
        self.layers = torch.nn.ModuleList(torch.nn.Linear(a, b) for a, b in itertools.pairwise(dims))
        self.head = torch.nn.Linear(dims[-1], n_classes)

    def forward(self, x):
        for lin in self.layers:
            x = F.relu(lin(x))
        return self.head(x)


def fit_paper_baseline(data, eps: float, *, epochs: int = 5, batch_size: int = 2048, lr: float = 1e-3,
                       hidden: int = 32, depth: int = 3, train_frac: float = 0.8, delta: float | None = None,
                       standardize: bool = False, seed: int | None = None,
                       dataset: str | None = None) -> HeterPoissonReport:
    """The naive DP-SGD baseline of Table II as the paper's authors ran it.

    Their settings (from their released code): an MLP ``d-32-32-32-C`` with ReLU, Adam at
    ``lr = 1e-3``, ``epochs = 5`` passes of shuffled batches of ``batch_size = 2048`` training
    nodes, every per-example gradient *rescaled* to norm 1 (``g / ||g||``, not clipped), the
    batch mean plus Gaussian noise of std ``sigma / batch_size``, ``sigma`` calibrated by the
    RDP accountant of the Poisson-subsampled Gaussian mechanism (sensitivity 1) at
    ``q = batch_size / n_train`` for ``T = epochs * ceil(n_train / batch_size)`` steps and
    ``delta = 1 / n_train^1.1``, the raw (unstandardised) features, and the test accuracy
    after the last epoch.  The split is :func:`split_nodes` (80/20, the same nodes as
    :func:`fit` for the same seed).

    So little training (45 steps on Facebook, 20 on Twitch-DE, at ``lr = 1e-3``) leaves the
    model near its initialisation: on Twitch-DE it predicts the majority class (60.45% of the
    nodes), which is the paper's 59.0-60.4.  :func:`fit` with ``model="mlp"`` is the same
    baseline given HeterPoisson's schedule.

    Parameters
    ----------
    data : torch_geometric.data.Data
        ``x`` and ``y`` (``-1``: unlabelled, in no split); edges are not read.
    eps : float
        Target node-level epsilon, > 0.
    epochs, batch_size, lr, hidden, depth : the authors' settings (defaults).
    train_frac : float
        Fraction of training nodes, in (0, 1).
    delta : float, optional
        Default ``1 / n_train^1.1`` (the authors'; :func:`fit` uses ``1 / |V|^1.1``).
    standardize : bool
        Standardise every feature column first (False: the authors' raw features).  The
        column means and deviations are read from all nodes (not private; a diagnostic).
    seed : int, optional
        Seeds the split, the initialisation, the batches and the noise (``None``: from the
        OS).  Never recorded.
    dataset : str, optional
        Name recorded in the report.

    Returns
    -------
    HeterPoissonReport
        ``sigma`` is the noise std on the *sum* of the rescaled gradients (sensitivity 1);
        ``q_b`` the accounted sampling rate; ``M`` None; ``privacy_model`` says what the
        accounting assumes (:data:`PAPER_BASELINE_PRIVACY_MODEL`).
    """
    import math

    from torch.func import functional_call, grad, vmap

    from ..privacy.accountants import MixtureAccountant

    eps = check_eps("eps", eps)
    epochs = check_int("epochs", epochs, 1)
    batch_size = check_int("batch_size", batch_size, 1)
    check_eps("lr", lr)
    hidden = check_int("hidden", hidden, 1)
    depth = check_int("depth", depth, 0)
    train_frac = check_prob("train_frac", train_frac, open_low=True, open_high=True)
    if not isinstance(standardize, bool):
        raise TypeError(f"standardize: expected a bool, got {type(standardize).__name__}")
    seed = resolve_seed(seed)
    if getattr(data, "x", None) is None or getattr(data, "y", None) is None:
        raise ValueError("data: expected x and y")
    t0 = time.perf_counter()
    x, y = data.x.to(torch.float32).cpu(), data.y.cpu()
    n = int(x.shape[0])
    lab = y >= 0
    train_mask, test_mask = split_nodes(n, seed, train_frac, labelled=None if bool(lab.all()) else lab)
    if standardize:
        x = (x - x.mean(0)) / x.std(0).clamp(min=1e-12)
    tr = torch.nonzero(train_mask).flatten()
    n_train = int(tr.numel())
    if delta is None:
        delta = 1.0 / n_train ** 1.1
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    q = min(1.0, batch_size / n_train)
    steps_per_epoch = math.ceil(n_train / batch_size)
    T = epochs * steps_per_epoch
    acct = MixtureAccountant([0.0, 1.0], [1.0 - q, q], model=PAPER_BASELINE_PRIVACY_MODEL)
    sigma = acct.calibrate_sigma(eps, delta, T)
    rep = acct.epsilon(sigma, T, delta)

    torch.manual_seed(sub_seed(seed, 11))
    c = int(y.max()) + 1
    net = _PaperMLP(int(x.shape[1]), hidden, c, depth)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    params = {k: v.detach() for k, v in net.named_parameters()}

    def loss_one(p, xi, yi):
        return F.cross_entropy(functional_call(net, p, (xi[None],)), yi[None])

    per_example = vmap(grad(loss_one), in_dims=(None, 0, 0))
    g = torch.Generator().manual_seed(sub_seed(seed, 12))
    for _ in range(epochs):
        perm = tr[torch.randperm(n_train, generator=g)]
        for s in range(0, n_train, batch_size):
            idx = perm[s:s + batch_size]
            params = {k: v.detach() for k, v in net.named_parameters()}
            grads = per_example(params, x[idx], y[idx])
            norms = torch.sqrt(sum(gr.flatten(1).pow(2).sum(1) for gr in grads.values()))
            scale = 1.0 / norms.clamp(min=1e-12)  # rescaled to norm 1, not clipped
            for k, p in net.named_parameters():
                gr = grads[k] * scale.view(-1, *([1] * (grads[k].dim() - 1)))
                noise = torch.randn(p.shape, generator=g) * (sigma / batch_size)
                p.grad = gr.mean(0) + noise
            opt.step()
    net.eval()
    with torch.no_grad():
        te = torch.nonzero(test_mask).flatten()
        acc = float((net(x[te]).argmax(1) == y[te]).float().mean())
    settings = {"model": "mlp (paper's baseline)", "dataset": dataset, "num_nodes": n, "n_train": n_train,
                "n_test_nodes": int(test_mask.sum()), "hidden": hidden, "depth": depth, "activation": "relu",
                "lr": lr, "epochs": epochs, "batch_size": batch_size, "batches": "shuffled, fixed size",
                "gradient": "per-example rescaled to norm 1", "noise_std_on_mean": sigma / batch_size,
                "standardize": standardize, "accuracy_at": "last epoch", "accountant": "rdp",
                "rdp_order": rep.order, "seconds_total": time.perf_counter() - t0}
    spent = Spent(mechanism="dpsgd", target="nodes", eps=float(rep.eps), delta=float(delta),
                  guarantee=f"(eps, delta) {PAPER_BASELINE_PRIVACY_MODEL}",
                  params={"q": q, "sigma": sigma, "T": T, "C": 1.0, "accountant": "rdp"})
    return HeterPoissonReport(accuracy=acc, eps=float(rep.eps), delta=float(delta), eps_target=eps,
                              eps_rdp=float(rep.eps), eps_pld=None, sigma=float(sigma), T=T, q_b=float(q), M=None,
                              privacy=spent, settings=settings, privacy_model=PAPER_BASELINE_PRIVACY_MODEL)
