"""DPRR end to end: graph classification under edge LDP (Hidano & Murakami, "Degree-Preserving
Randomized Response for Graph Neural Networks under Local Differential Privacy", arXiv
preprint, 2022; sections IV-V).

Pipeline (section V-A):

* every graph of a dataset is randomised independently; inside a graph, every *private* user
  ``v_i`` randomises her own neighbour list (:func:`ldpfast.mechanisms.edges.dprr`,
  :func:`~ldpfast.mechanisms.edges.rr_edges`, :func:`~ldpfast.mechanisms.edges.local_laplace`)
  and the server trains a GNN on the noisy graphs (:func:`randomize_dataset`, :func:`fit`);
* customized setting (section IV-A, V-B): a fraction ``public_fraction`` (the paper's
  ``alpha``; ``round(alpha n)`` users chosen uniformly at random per graph) of non-private
  users send their lists unchanged;
* baselines: RR (Warner's RR on every bit), LocalLap (local LAPGRAPH), NonPriv-Part (the
  graph induced by the non-private users only: private users and all their edges are
  dropped; customized setting only) and NonPriv-Full (the true graphs, no protection);
* model (section V-A, "GNN Models and Configurations"): GIN-0 as in the authors' code
  (Xu et al.'s ``graphcnn.py``): constant initial features, sum aggregation with
  ``epsilon = 0``, 2-layer MLPs with batch norm, a mean readout of *every* layer's node
  embeddings, one linear map per layer with dropout, summed; Adam, batch size 64.  GCN and
  GraphSAGE use the same readout.  The paper notes that with constant features GCN and
  GraphSAGE are no better than random guessing (Xu et al. 2019), which is why it reports GIN;
  they are offered for comparison.

Choices the paper leaves open, made here (all recorded in the reports):

* **Server graph.**  ``symmetrize="none"``: user ``i`` aggregates over her own noisy list, as
  in the authors' code (see :mod:`ldpfast.mechanisms.edges`).  LocalLap's output is
  undirected by construction.
* **Features.**  ``features="constant"`` (paper: a constant initial feature vector, as
  GIN-0 on REDDIT); ``"degree"`` adds ``log(1 + in-degree)`` of the *server* graph (a
  function of the noisy lists only, hence post-processing).
* **Training.**  No hyper-parameter grid search (the paper searches layers, hidden units,
  learning rate and dropout on the validation graphs): fixed defaults (5 layers incl. the
  input layer = 4 GIN layers, 32 hidden units, lr 0.01, dropout 0.5), ``epochs`` modest, the
  test accuracy is read at the epoch of best validation accuracy (the paper early-stops).
  Splits are random stratified 75/10/15 % (the paper's REDDIT split), repeated ``runs``
  times (paper: 10); each run re-randomises the dataset with its own seed.
* **Budget split.**  DPRR uses eq. (8) with ``n_max`` = the largest graph of the dataset
  and ``eps2 = eps - eps1`` (never more than ``eps``; see
  :func:`ldpfast.mechanisms.edges.dprr_budget`).  At small ``eps`` and small ``n_max`` eq. (8) can leave nothing for RR
  (``sqrt(8/(n_max-1)) >= eps``): that raises :class:`ValueError`.
* **LocalLap in the customized setting.**  The paper defines LocalLap in the common setting
  only.  With ``public_fraction > 0`` the server graph is LocalLap's output over all users
  *united with* the true edges incident to non-private users (whose lists are public): the
  private users' data enter only through LocalLap.
* **RR size.**  RR's output is dense (``~ n^2 / (e^eps + 1)`` entries per graph); the
  reproduction skips it when the dataset's expected output exceeds ``rr_max_edges``.

The reproduction of Figs. 4, 5 and 7 (its synthetic stand-in for the REDDIT data, the degree
analysis of Fig. 7, ``ldpfast reproduce dprr``) is :mod:`ldpfast.reproduce.dprr`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F

from .. import _backend
from .._checks import check_eps, check_int, check_prob, check_real
from .._deprecated import moved_names
from ..graph import CSR, to_csr
from ..rng import resolve_seed
from ._common import (
    FitReport,
    data_to,
    mean_std,
    resolve_device,
    sub_seed,
)

__all__ = [
    "FEATURES",
    "METHODS",
    "MODELS",
    "DPRRReport",
    "GraphClassifier",
    "RandomizedDataset",
    "expected_rr_edges",
    "fit",
    "randomize_dataset",
]

METHODS = ("dprr", "rr", "locallap", "nonpriv_full", "nonpriv_part")
MODELS = ("gin", "gcn", "sage")
FEATURES = ("constant", "degree")

# The reproduction (Figs. 4, 5, 7), its synthetic stand-in dataset and the degree analysis of
# Fig. 7 moved to ldpfast.reproduce.dprr (old paths warn for one release).
__getattr__ = moved_names(__name__, "ldpfast.reproduce.dprr",
                          ("LABELS", "synthetic_graph_classification", "degree_preservation",
                           "plot_degree_preservation", "reproduce_main"))


def _csr(data) -> CSR:
    c = getattr(data, "csr", None)
    if isinstance(c, CSR):
        return c
    if "csr" in data and isinstance(data["csr"], CSR):
        return data["csr"]
    return to_csr(data.edge_index, int(data.num_nodes), symmetrize=True)


def _check_graphs(graphs) -> list:
    if not isinstance(graphs, (list, tuple)) or not graphs:
        raise TypeError(f"graphs: expected a non-empty list of torch_geometric Data, got {type(graphs).__name__}")
    for i, g in enumerate(graphs):
        if not hasattr(g, "edge_index") or getattr(g, "y", None) is None:
            raise TypeError(f"graphs: element {i} has no edge_index / y (expected a torch_geometric Data "
                            f"with a graph label)")
    return list(graphs)


def _check_method(method) -> str:
    if not isinstance(method, str):
        raise TypeError(f"method: expected a str, one of {METHODS}, got {type(method).__name__}")
    m = method.lower().replace("-", "_")
    if m not in METHODS:
        raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
    return m


_PRIVATE_METHODS = ("dprr", "rr", "locallap")


def _graphs_device(graphs, device) -> tuple[str, torch.device]:
    """(kind, torch device) of a run on ``graphs`` (:func:`._common.resolve_device`); a
    randomiser whose CUDA port is missing raises BackendUnavailable naming it, before any work."""
    ts = {}
    for i, g in enumerate(graphs):
        for key in ("edge_index", "y", "x"):
            t = getattr(g, key, None)
            if isinstance(t, torch.Tensor):
                ts[f"graphs[{i}].{key}"] = t
    return resolve_device(device, ts)


def _require_edges_on_cuda(method: str, kind: str) -> None:
    if kind == "cuda" and method in _PRIVATE_METHODS:
        name = {"dprr": "dprr", "rr": "rr_edges", "locallap": "local_laplace"}[method]
        _backend.require_cuda_family(f"ldpfast.mechanisms.edges.{name} (method={method!r})", "edges")


def _public_mask(n: int, fraction: float, rng: np.random.Generator) -> torch.Tensor:
    """``round(fraction n)`` users chosen uniformly at random (at least one if fraction > 0)."""
    k = round(fraction * n)
    if fraction > 0:
        k = max(k, 1)
    m = torch.zeros(n, dtype=torch.bool)
    if k:
        m[torch.from_numpy(rng.choice(n, size=min(k, n), replace=False))] = True
    return m


def _csr_edge_index(csr: CSR) -> torch.Tensor:
    return csr.to_edge_index()


def _features(n: int, edge_index: torch.Tensor, features: str) -> torch.Tensor:
    x = torch.ones(n, 1, device=edge_index.device)
    if features == "degree":
        deg = torch.bincount(edge_index[1], minlength=n).to(torch.float32)
        x = torch.cat([x, torch.log1p(deg)[:, None]], dim=1)
    return x


@dataclass
class RandomizedDataset:
    """Output of :func:`randomize_dataset`.

    Attributes
    ----------
    graphs : list of torch_geometric.data.Data
        ``edge_index`` (the server graph), ``x`` (features), ``y``, ``num_nodes``, ``public``
        (bool mask of the non-private users; for NonPriv-Part all True: only they remain),
        ``node_ids`` (original id of every node; NonPriv-Part keeps a subset).
    privacy : dict
        ``eps`` (the guarantee of every private user: max over graphs of ``eps1 + eps2``
        spent), ``eps1``/``eps2`` (DPRR, LocalLap), ``guarantee`` (text), ``public_fraction``.
    stats : dict
        Mean true and server-graph degrees, total edges, expected RR output, time.
    """

    graphs: list
    privacy: dict
    stats: dict = field(default_factory=dict)


def expected_rr_edges(graphs, eps: float, public_fraction: float = 0.0) -> float:
    """Expected number of directed entries RR outputs over all graphs of a dataset."""
    p = math.exp(eps) / (math.exp(eps) + 1.0)
    tot = 0.0
    for g in graphs:
        n = int(g.num_nodes)
        m = _csr(g).nnz
        priv = 1.0 - public_fraction
        tot += priv * (m * p + (n * (n - 1) - m) * (1 - p)) + (1 - priv) * m
    return tot


def randomize_dataset(graphs, method: str, eps: float = 1.0, public_fraction: float = 0.0,
                      seed: int | None = None,
                      *, features: str = "constant", n_max: int | None = None, eps1: float | None = None,
                      rr_max_edges: int = 50_000_000, device=None) -> RandomizedDataset:
    """Randomise every graph of a dataset user by user (paper sections IV-A and V-A).

    Parameters
    ----------
    graphs : list of torch_geometric.data.Data
        Undirected, unattributed graphs with a graph label ``y`` (e.g.
        :func:`ldpfast.reproduce.dprr.synthetic_graph_classification` or
        :func:`ldpfast.datasets.load_tu`); node attributes are ignored.
    method : {"dprr", "rr", "locallap", "nonpriv_full", "nonpriv_part"}
        DPRR (Algorithm 1), Warner's RR, LocalLap, the true graphs, or the graph induced by
        the non-private users (section V-A).
    eps : float
        Budget of every private user (ignored by the NonPriv baselines).
    public_fraction : float
        The paper's ``alpha`` in [0, 1): fraction of non-private users per graph
        (``round(alpha n)`` chosen at random, at least one if ``alpha > 0``).  ``0`` is the
        common setting; NonPriv-Part needs ``alpha > 0``.
    seed : int, optional
        Secret seed (``None``: from the OS; never recorded); graph ``k`` uses an independent
        stream derived from ``(seed, k)``.
    features : {"constant", "degree"}
        Initial node features (module docstring).
    n_max : int, optional
        ``n_max`` of eq. (8) for DPRR; default the largest graph of ``graphs``.
    eps1 : float, optional
        DPRR's degree budget instead of eq. (8) (e.g. ``eps / 10``, the 1:9 split of Fig. 6).
    rr_max_edges : int
        RR is refused (ValueError) if its expected output over the dataset exceeds this.
    device : str or torch.device, optional
        Where the graphs are randomised and the output graphs live ('cpu', 'cuda',
        'cuda:N'); default (None) the device of ``graphs``.  The public users are drawn on
        the CPU (same on every device) and moved.  On CUDA the edge randomisers need the
        CUDA edge kernels (``csrc/cuda/edges.cu``); without them ``dprr``/``rr``/``locallap``
        raise :class:`ldpfast.BackendUnavailable` naming the op, before any work.

    Returns
    -------
    RandomizedDataset

    Raises
    ------
    ValueError
        Bad ``method``/``eps``/``public_fraction``; NonPriv-Part with ``public_fraction = 0``;
        RR too large; DPRR budget split leaving nothing for RR (eq. 8).
    TypeError
        ``graphs`` not a list of Data, or wrongly typed arguments.
    """
    from torch_geometric.data import Data

    from ..mechanisms.edges import dprr, local_laplace, rr_edges

    graphs = _check_graphs(graphs)
    method = _check_method(method)
    eps = check_eps("eps", eps)
    public_fraction = check_prob("public_fraction", public_fraction, open_high=True)
    seed = resolve_seed(seed)
    kind, dev = _graphs_device(graphs, device)
    _require_edges_on_cuda(method, kind)
    if features not in FEATURES:
        raise ValueError(f"features: expected one of {FEATURES}, got {features!r}")
    rr_max_edges = check_int("rr_max_edges", rr_max_edges, lo=0)
    if method == "nonpriv_part" and public_fraction == 0:
        raise ValueError("public_fraction: NonPriv-Part uses only the non-private users' lists, so it needs "
                         "public_fraction > 0 (it cannot be used in the common setting, paper section V-A)")
    sizes = [int(g.num_nodes) for g in graphs]
    if n_max is None:
        n_max = max(max(sizes), 2)
    else:
        n_max = check_int("n_max", n_max, lo=max(max(sizes), 2))
    if method == "rr":
        exp_out = expected_rr_edges(graphs, eps, public_fraction)
        if exp_out > rr_max_edges:
            raise ValueError(f"rr_max_edges: RR would output about {exp_out:.3g} directed edges over the "
                             f"{len(graphs)} graphs at eps={eps:g} (dense O(n^2) per graph, paper IV-F), more "
                             f"than rr_max_edges={rr_max_edges}; raise it to run RR anyway")
    t0 = time.perf_counter()
    out, spent_eps, spent_e1, spent_e2 = [], [], [], []
    deg_true, deg_srv, edges_srv = 0.0, 0.0, 0
    for k, g in enumerate(graphs):
        n = int(g.num_nodes)
        with _backend.oom_guard(f"randomize_dataset: graph {k}"):
            g = data_to(g, dev)
        csr = _csr(g)
        rng = np.random.default_rng([seed, 7, k])
        # drawn on the CPU (same users on every device), then moved
        pub = _public_mask(n, public_fraction, rng).to(dev) if public_fraction > 0 else None
        s = sub_seed(seed, 2, k)
        keep_nodes = None
        if method == "nonpriv_full" or n < 2:
            ei = _csr_edge_index(csr)
        elif method == "nonpriv_part":
            keep_nodes = pub.nonzero().flatten()
            full = _csr_edge_index(csr)
            m = pub[full[0]] & pub[full[1]]
            remap = torch.full((n,), -1, dtype=torch.int64, device=dev)
            remap[keep_nodes] = torch.arange(keep_nodes.numel(), device=dev)
            ei = remap[full[:, m]]
        elif method == "dprr":
            r = dprr(csr, eps, seed=s, eps1=eps1, public=pub, n_max=n_max)
            ei = r.edge_index
            spent_eps.append(r.spent.eps)
            spent_e1.append(r.spent.params["eps1_used"])
            spent_e2.append(r.spent.params["eps2"])
        elif method == "rr":
            r = rr_edges(csr, eps, seed=s, public=pub, max_output_edges=2**62)
            ei = r.edge_index
            spent_eps.append(r.spent.eps)
        else:  # locallap
            r = local_laplace(csr, eps, seed=s)
            ei = r.edge_index
            if pub is not None and bool(pub.any()):
                full = _csr_edge_index(csr)
                m = pub[full[0]] | pub[full[1]]  # edges a non-private user reports as they are
                u = torch.cat([ei, full[:, m]], dim=1)
                ei = to_csr(u, n, symmetrize=True).to_edge_index()
            spent_eps.append(r.spent.eps)
            spent_e1.append(r.spent.params["eps1_used"])
            spent_e2.append(r.spent.params["eps2_used"])
        n_out = n if keep_nodes is None else int(keep_nodes.numel())
        d = Data(edge_index=ei.to(torch.int64), x=_features(n_out, ei, features), y=g.y.view(-1)[:1].clone(),
                 num_nodes=n_out)
        d.public = (torch.ones(n_out, dtype=torch.bool, device=dev) if keep_nodes is not None
                    else (pub if pub is not None else torch.zeros(n, dtype=torch.bool, device=dev)))
        d.node_ids = keep_nodes if keep_nodes is not None else torch.arange(n, device=dev)
        out.append(d)
        deg_true += csr.nnz / max(n, 1)
        deg_srv += ei.shape[1] / max(n_out, 1)
        edges_srv += int(ei.shape[1])
    G = len(graphs)
    if method in ("nonpriv_full",):
        privacy = {"method": method, "eps": math.inf, "public_fraction": public_fraction,
                   "guarantee": "none: every user's true list is used (non-private reference)"}
    elif method == "nonpriv_part":
        privacy = {"method": method, "eps": 0.0, "public_fraction": public_fraction,
                   "guarantee": "private users' lists are discarded and private users removed (nothing of "
                                "theirs is used); non-private users have no protection"}
    else:
        privacy = {"method": method, "eps": max(spent_eps) if spent_eps else 0.0, "eps_requested": eps,
                   "public_fraction": public_fraction}
        if spent_e1:
            privacy["eps1"] = max(spent_e1)
            privacy["eps2"] = max(spent_e2)
        if method == "dprr":
            privacy["allocation"] = "eq. 8, eps2 = eps - eps1" if eps1 is None else f"eps1 = {eps1:g} given"
            privacy["n_max"] = n_max
        if public_fraction > 0:
            privacy["guarantee"] = (f"customized setting (paper IV-A): every private user's list is "
                                    f"{privacy['eps']:.4g}-edge LDP (eps1 + eps2); non-private users "
                                    f"(fraction {public_fraction:g}) are not protected; relationship DP "
                                    f"does not hold")
        else:
            privacy["guarantee"] = (f"common setting: every user's list is {privacy['eps']:.4g}-edge LDP "
                                    f"(eps1 + eps2 for DPRR/LocalLap), hence 2*eps relationship DP "
                                    f"(Prop. 1)")
    stats = {"graphs": G, "mean_true_degree": deg_true / G, "mean_server_degree": deg_srv / G,
             "server_edges": edges_srv, "randomize_s": time.perf_counter() - t0, "features": features}
    return RandomizedDataset(graphs=out, privacy=privacy, stats=stats)


# --------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------
class GraphClassifier(torch.nn.Module):
    """GIN-0 (Xu et al. 2019, the authors' ``graphcnn.py``) or GCN / GraphSAGE, same readout.

    ``num_layers`` counts the input layer (GIN-0 convention): ``num_layers - 1`` message
    passing layers.  Every layer's node embeddings (input included) are mean-pooled, mapped
    by a linear layer, dropped out, and the scores are summed (paper V-A: mean readout,
    linear mapping and dropout on the graph feature vector).
    """

    def __init__(self, kind: str, d_in: int, hidden: int, classes: int, num_layers: int = 5,
                 dropout: float = 0.5):
        super().__init__()
        from torch_geometric.nn import GCNConv, GINConv, SAGEConv

        self.kind = kind
        self.convs = torch.nn.ModuleList()
        self.bns = torch.nn.ModuleList()
        d = d_in
        for _ in range(num_layers - 1):
            if kind == "gin":
                mlp = torch.nn.Sequential(torch.nn.Linear(d, hidden), torch.nn.BatchNorm1d(hidden),
                                          torch.nn.ReLU(), torch.nn.Linear(hidden, hidden))
                self.convs.append(GINConv(mlp, eps=0.0, train_eps=False))
            elif kind == "gcn":
                self.convs.append(GCNConv(d, hidden))
            else:
                self.convs.append(SAGEConv(d, hidden))
            self.bns.append(torch.nn.BatchNorm1d(hidden))
            d = hidden
        self.heads = torch.nn.ModuleList([torch.nn.Linear(d_in, classes)] +
                                         [torch.nn.Linear(hidden, classes) for _ in range(num_layers - 1)])
        self.dropout = float(dropout)

    def forward(self, x, edge_index, batch, num_graphs):
        from torch_geometric.nn import global_mean_pool

        hs = [x]
        h = x
        for conv, bn in zip(self.convs, self.bns):
            h = F.relu(bn(conv(h, edge_index)))
            hs.append(h)
        score = 0
        for h, head in zip(hs, self.heads):
            pooled = global_mean_pool(h, batch, size=num_graphs)
            score = score + F.dropout(head(pooled), p=self.dropout, training=self.training)
        return score


@dataclass(kw_only=True)
class DPRRReport(FitReport):
    """Result of :func:`fit` (the fields of :class:`~ldpfast.methods._common.FitReport` and
    these): ``accuracy`` is the :func:`~ldpfast.methods._common.mean_std` summary over the
    runs (in %); ``method`` the randomiser; ``stats`` the degrees and sizes of the last
    run's server graphs (:class:`RandomizedDataset`)."""

    method: str
    stats: dict = field(default_factory=dict)


def _stratified_split(y: np.ndarray, seed: int, train: float, val: float):
    rng = np.random.default_rng([seed, 0x5B1])
    tr, va, te = [], [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        a, b = round(train * len(idx)), round((train + val) * len(idx))
        tr += idx[:a].tolist()
        va += idx[a:b].tolist()
        te += idx[b:].tolist()
    return tr, va, te


def _accuracy(model, loader) -> float:
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for b in loader:
            pred = model(b.x, b.edge_index, b.batch, b.num_graphs).argmax(-1)
            correct += int((pred == b.y).sum())
            total += int(b.num_graphs)
    return correct / max(total, 1)


def _train_eval(graphs, classes: int, model: str, seed: int, split, epochs: int, hidden: int,
                num_layers: int, lr: float, dropout: float, batch_size: int,
                dev: torch.device | None = None) -> tuple[float, float, int]:
    from torch_geometric.loader import DataLoader

    # graph labels for the split: one host copy of G scalars (not one sync per graph)
    y = torch.cat([g.y.view(-1)[:1] for g in graphs]).cpu().numpy()
    tr, va, te = _stratified_split(y, seed, *split)
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed)
    ltr = DataLoader([graphs[i] for i in tr], batch_size=batch_size, shuffle=True, generator=gen)
    lva = DataLoader([graphs[i] for i in va], batch_size=256)
    lte = DataLoader([graphs[i] for i in te], batch_size=256)
    net = GraphClassifier(model, graphs[0].x.shape[1], hidden, classes, num_layers, dropout)
    if dev is not None:
        net = net.to(dev)  # initialised on the CPU: same weights on every device
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=50, gamma=0.5)  # GIN-0 code
    best = (-1.0, 0.0, 0)
    for ep in range(epochs):
        net.train()
        for b in ltr:
            if b.num_graphs < 2:  # batch norm needs > 1 sample
                continue
            opt.zero_grad()
            loss = F.cross_entropy(net(b.x, b.edge_index, b.batch, b.num_graphs), b.y)
            loss.backward()
            opt.step()
        sched.step()
        va_acc = _accuracy(net, lva) if va else 0.0
        if va_acc > best[0]:
            best = (va_acc, _accuracy(net, lte), ep)
    return best[1], best[0], best[2]


def fit(graphs, method: str = "dprr", eps: float = 1.0, *, model: str = "gin", public_fraction: float = 0.0,
        runs: int = 3, split: tuple[float, float] = (0.75, 0.10), epochs: int = 60, hidden: int = 32,
        num_layers: int = 5, lr: float = 0.01, dropout: float = 0.5, batch_size: int = 64,
        features: str = "constant", eps1: float | None = None, seed: int | None = None,
        rr_max_edges: int = 50_000_000, threads: int | None = None, device=None) -> DPRRReport:
    """Randomise a graph-classification dataset and train a GNN on it (paper section V).

    Parameters
    ----------
    graphs : list of torch_geometric.data.Data
        Graphs with labels ``y`` (see :func:`randomize_dataset`).
    method : {"dprr", "rr", "locallap", "nonpriv_full", "nonpriv_part"}
    eps : float
        Budget of every private user.
    model : {"gin", "gcn", "sage"}
        GIN-0 (paper) or GCN / GraphSAGE with the same readout.
    public_fraction : float
        The paper's ``alpha`` (fraction of non-private users), in [0, 1).
    runs : int
        Independent random splits (paper: 10), each with its own randomisation of the data.
    split : (float, float)
        Train and validation fractions (paper REDDIT: 0.75, 0.10; the rest is test).
    epochs : int
        Training epochs per run; the test accuracy is taken at the best-validation epoch.
    hidden, num_layers, lr, dropout, batch_size : model and optimiser settings (paper grid:
        layers {2..5}, hidden {16..128}, lr {1e-4, 1e-3, 1e-2}, dropout {0, 0.5}, batch 64).
    features, eps1, rr_max_edges : see :func:`randomize_dataset`.
    seed : int, optional
        Secret seed of the randomisers, splits and models (``None``: from the OS); never
        recorded in the report.
    threads : int, optional
        Torch intra-op threads during training (restored afterwards).  The graphs are tiny,
        so 1 thread is usually fastest, and much faster on a loaded machine; default: leave
        torch's setting.
    device : str or torch.device, optional
        Where the graphs are randomised and the model trains ('cpu', 'cuda', 'cuda:N');
        default (None) the device of ``graphs``.  Splits, public users and initial weights
        are drawn on the CPU (same on every device for one seed).  On CUDA the edge
        randomisers need the CUDA edge kernels; without them ``dprr``/``rr``/``locallap``
        raise :class:`ldpfast.BackendUnavailable` naming the op before any work (never a
        silent host round trip).  Host reads: the graph labels once per run (split) and
        the correct-prediction counts per evaluation batch.

    Returns
    -------
    DPRRReport
        ``accuracy`` = ``{"mean", "std", "runs", "values"}`` in %, ``privacy`` from
        :func:`randomize_dataset`, ``settings``.
    """
    graphs = _check_graphs(graphs)
    method = _check_method(method)
    if not isinstance(model, str) or model not in MODELS:
        raise ValueError(f"model: expected one of {MODELS}, got {model!r}")
    runs = check_int("runs", runs, lo=1)
    epochs = check_int("epochs", epochs, lo=1)
    hidden = check_int("hidden", hidden, lo=1)
    num_layers = check_int("num_layers", num_layers, lo=1)
    batch_size = check_int("batch_size", batch_size, lo=2)
    lr = check_real("lr", lr, lo=0.0)
    dropout = check_prob("dropout", dropout, open_high=True)
    seed = resolve_seed(seed)
    if not (isinstance(split, (tuple, list)) and len(split) == 2):
        raise TypeError(f"split: expected (train, val) fractions, got {split!r}")
    tr_f = check_real("split", split[0], 0.0, 1.0)
    va_f = check_real("split", split[1], 0.0, 1.0 - tr_f)
    if tr_f <= 0 or tr_f + va_f >= 1:
        raise ValueError(f"split: expected train > 0 and train + val < 1, got {tuple(split)}")
    kind, dev = _graphs_device(graphs, device)
    _require_edges_on_cuda(method, kind)
    classes = int(torch.cat([g.y.view(-1)[:1] for g in graphs]).max()) + 1
    if threads is not None:
        threads = check_int("threads", threads, lo=1)
    old_threads = torch.get_num_threads()
    try:
        if threads is not None:
            torch.set_num_threads(threads)
        with _backend.oom_guard("dprr.fit"):
            return _fit(graphs, method, eps, model, public_fraction, runs, (tr_f, va_f), epochs, hidden,
                        num_layers, lr, dropout, batch_size, features, eps1, seed, rr_max_edges, classes, dev)
    finally:
        torch.set_num_threads(old_threads)


def _fit(graphs, method, eps, model, public_fraction, runs, split, epochs, hidden, num_layers, lr, dropout,
         batch_size, features, eps1, seed, rr_max_edges, classes, dev) -> DPRRReport:
    tr_f, va_f = split
    accs, vals, eps_best, privacy, stats = [], [], [], None, None
    t0 = time.perf_counter()
    t_rand = 0.0
    for r in range(runs):
        rd = randomize_dataset(graphs, method, eps, public_fraction, seed=sub_seed(seed, 3, r) >> 1,
                               features=features, eps1=eps1, rr_max_edges=rr_max_edges, device=dev)
        t_rand += rd.stats["randomize_s"]
        privacy, stats = rd.privacy, rd.stats
        acc, va, ep = _train_eval(rd.graphs, classes, model, sub_seed(seed, 4, r), (tr_f, va_f), epochs, hidden,
                                  num_layers, lr, dropout, batch_size, dev)
        accs.append(acc)
        vals.append(va)
        eps_best.append(ep)
    settings = {"method": method, "eps": eps, "public_fraction": public_fraction, "model": model,
                "runs": runs, "split": [tr_f, va_f, 1 - tr_f - va_f], "epochs": epochs, "hidden": hidden,
                "num_layers": num_layers, "lr": lr, "dropout": dropout, "batch_size": batch_size,
                "features": features, "graphs": len(graphs), "classes": classes,
                "best_epochs": eps_best, "val_accuracy": [100 * v for v in vals]}
    return DPRRReport(method=method, accuracy=mean_std(accs), privacy=privacy, settings=settings, stats=stats,
                      timings={"total_s": time.perf_counter() - t0, "randomize_s": t_rand})
