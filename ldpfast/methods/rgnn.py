"""RGNN end to end (Bhaila, Huang, Wu, Wu, "Local differential privacy in graph neural
networks: a reconstruction approach", SDM 2024): GRR-FS features, GRR labels, frequency-
estimation reconstruction of both (Algorithms 1 and 2, in :mod:`._rgnn_reconstruct`, re-exported
here), METIS bags with the label-proportion (LLP) regulariser and training (Algorithm 3).
The reproduction of Table II is :mod:`ldpfast.reproduce.rgnn`.

Pipeline (Algorithm 3, line by line)
------------------------------------
* node side (lines 1-2): every node reports ``x' = GRR-FS(x; eps_x, m)`` (section IV-A,
  eq. 4; :func:`ldpfast.mechanisms.grr_fs`); the labelled nodes (train + validation, as in
  the authors' code) report ``y' = GRR(y; eps_y)`` (section IV-B;
  :func:`ldpfast.mechanisms.rr_labels`);
* server, clustering (lines 3-5): ``C`` METIS bags (:func:`metis_bags`), perturbed bag
  proportions ``b'_r`` = mean of ``onehot(y'_v)`` over the training nodes of bag ``r``;
* server, reconstruction (lines 6-8): ``X~ = f_X`` (:func:`reconstruct_features`,
  Algorithm 1), ``y~ = f_Y`` (:func:`reconstruct_labels`, Algorithm 2), and
  ``b~_r = P^{-1} b'_r`` (eq. 14, :func:`bag_proportions`);
* training (lines 9-15): ``L = CE(y^, y~)`` over the training nodes ``+ alpha * L_llp``
  (:func:`llp_loss`, ``(1/C) sum_r KL(b^_r || b~_r)``), Adam, a 2-layer GNN with 16
  hidden units, ReLU and dropout (section V-A3).

Privacy (Theorem 3)
-------------------
The paper states ``(eps_X + eps_y)``-LDP with ``eps_X = ln(1 + (m/d)(e^{m eps_x} - 1))``
(Theorem 1).  :mod:`ldpfast.privacy.ldp` shows that Theorem 1 is not a valid LDP bound for
``m < d``: the exact, tight guarantee of GRR-FS is ``m * eps_x``.  Every report therefore
carries both totals: ``eps_total_theorem3 = eps_X + eps_y`` (the paper's number, used to
label Table II) and ``eps_total_exact = m * eps_x + eps_y`` (what the ledger records).

Choices the paper leaves open (all documented in the report's ``settings``)
--------------------------------------------------------------------------
* **Model selection** (the paper reports one number per run after 100 epochs but names no
  rule): the epoch with the highest accuracy against the *reconstructed* labels ``y~`` of
  the validation nodes (the authors' released code does the same).  Only private data are
  used; the clean labels are read only to score the selected epoch on the test nodes.
  Variants without label reconstruction select against ``y'``.
* **Bags**: ``C_r^L`` = training nodes of bag ``r`` (the nodes of ``L_gnn``); bags with no
  training node are left out of the average.  ``b~_r`` is mapped to the simplex by the
  authors' rule (negative entries -> 1e-5, renormalise; :func:`ldpfast.estimation.project_simplex`).
* **KL direction**: ``KL(b^_r || b~_r)`` as in Algorithm 3, line 14 (the authors' code
  computes ``KL(b~_r || b^_r)``; ``llp_direction="reverse"`` selects that).
* **Feature grouping** (section V-A1): blocks of 70 / 25 / 100 binary features
  (CiteSeer / Cora / Facebook) are OR-ed into one binary feature
  (:func:`ldpfast.transforms.group_binary_features`): ``d' = 53 / 58 / 48``.
* **Reconstructed values**: binary features get the estimated probability of value 1
  clipped to ``[0, 1]``; categorical features (domain > 2) the one-hot of the argmax
  (Algorithm 1, line 19).
* Learning rate, weight decay, dropout, ``K_x``, ``K_y``, ``C``, ``alpha``: see
  :data:`DEFAULTS` and the reproduction notes in :func:`ldpfast.reproduce.rgnn.reproduce_main`.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from .. import _backend, ops
from .._checks import check_eps, check_int, check_real, check_tensor
from .._deprecated import moved_names
from ..graph import csr_of
from ..privacy import Ledger
from ..privacy.ldp import grr_fs_epsilon
from ..rng import resolve_seed
from ._common import (
    BACKBONES,
    Backbone,
    FitReport,
    _data_tensors,
    data_to,
    device_raises,
    fmt_eps,
    graph_input,
    labelled_split,
    resolve_device,
    sub_seed,
    with_edge_index,
)
from ._rgnn_reconstruct import (  # Algorithms 1 and 2
    _check_labels,
    _check_mask,
    _domain,
    _graph,
    encode_reports,
    reconstruct_features,
    reconstruct_labels,
)

__all__ = ["DEFAULTS", "VARIANTS", "RGNNReport", "bag_proportions", "encode_reports", "fit",
           "llp_loss", "metis_bags", "reconstruct_features", "reconstruct_labels"]

# The reproduction of Table II moved to ldpfast.reproduce.rgnn (old paths warn for one release).
__getattr__ = moved_names(__name__, "ldpfast.reproduce.rgnn",
                          ("EPS_Y", "PAPER_TABLE2", "PAPER_ABLATION", "DATASET_K", "METHODS",
                           "reproduce_main", "_grouped"))

INF = math.inf

#: Variants of Algorithm 3: the full method, the ablations of section V-B (RGNN\\LLP,
#: RGNN\\f_Y, RGNN\\f_X) and Table II's "GraphSAGE trained on the perturbed data".
VARIANTS = ("rgnn", "no_llp", "no_fy", "no_fx", "graphsage_perturbed")

#: Training defaults.  lr = 0.01 and 100 epochs are the authors' released defaults (and the
#: paper's "100 epochs"); dropout 0.5 because the paper uses "ReLU ... followed by dropout"
#: without a rate; C = 16 and alpha = 1 are the authors' code defaults (both inside the
#: paper's grids); K_x = K_y = 4 is the paper's optimum for Facebook (section V-B).
DEFAULTS = {"lr": 0.01, "weight_decay": 0.0, "dropout": 0.5, "epochs": 100, "hidden": 16,
            "k_x": 4, "k_y": 4, "C": 16, "alpha": 1.0, "m": 10}


# --- Algorithm 3: bags and LLP ---------------------------------------------------------------
#: Above this many CSR entries :func:`metis_bags` coarsens before METIS by default: plain
#: pymetis needs about 105 bytes per entry and its time grows at least linearly (241 s on
#: 19M entries at the Orkut mean degree; BENCHMARKS.md, "Orkut scale end to end").
METIS_COARSEN_ABOVE = 1 << 25


def metis_bags(data, C: int, seed: int = 0, *, timings: dict | None = None,
               check_symmetric: bool = True, coarsen_to: int | None = None) -> torch.Tensor:
    """Partition the graph into ``C`` bags with METIS (pymetis, k-way), RGNN section IV-C.

    Parameters
    ----------
    data : torch_geometric.data.Data or ldpfast.graph.CSR
        Undirected graph (both directions of every edge stored, no self loops: METIS'
        requirement; ``check_symmetric`` verifies it in O(|E|)).
    C : int
        Number of bags, ``1 <= C <= num_nodes``.
    seed : int
        METIS' random seed, in ``[0, 2**31)``.  METIS runs single-threaded and is
        deterministic for a given seed and graph.
    timings : dict, optional
        Receives ``metis_s`` (the METIS call alone) and, when coarsening, ``coarsen_s``,
        ``levels``, ``coarse_nodes``, ``coarse_nnz`` (:func:`ldpfast.partition.partition`).
    check_symmetric : bool
        Raise ValueError for a directed graph (costs a transpose of the CSR).
    coarsen_to : int, optional
        ``0``: METIS on the graph itself.  ``k >= C``: coarsen to about ``k`` weighted
        clusters by size-constrained label propagation first, partition those with METIS
        and project back (:func:`ldpfast.partition.partition`; for Orkut-scale graphs,
        where plain pymetis needs tens of minutes and more memory than the machine has).
        ``None`` (default): plain METIS up to :data:`METIS_COARSEN_ABOVE` (2**25) CSR
        entries, above it ``max(32 * C, 4096)`` clusters (capped at the node count).  The
        edge cut of the coarsened route was 1.00-1.02x plain METIS's where both ran
        (BENCHMARKS.md, "Orkut scale end to end").

    Returns
    -------
    torch.Tensor
        int64 ``(num_nodes,)`` bag id of every node, in ``[0, C)``.

    Privacy
    -------
    Uses only the public graph.

    Device: METIS (pymetis) runs on the host only, so a CUDA graph's CSR is copied to the
    host once here (the public graph, not a randomised input) and the bags are returned on
    the graph's device.  Pass precomputed ``bags`` to :func:`fit` to skip it.
    """
    from ..partition import partition

    g = _graph(data)
    n = g.num_nodes
    if n < 1:
        raise ValueError("data: the graph has no nodes")
    C = check_int("C", C, 1, n)
    seed = check_int("seed", seed, 0, 2**31 - 1)
    if check_symmetric and g.nnz:
        t = ops.transpose(g)
        if not (torch.equal(t.rowptr, g.rowptr) and torch.equal(t.col, g.col)):
            raise ValueError("data: METIS needs an undirected graph (both directions of every "
                             "edge); symmetrise edge_index first")
    if coarsen_to is None:
        coarsen_to = min(n, max(32 * C, 4096)) if g.nnz > METIS_COARSEN_ABOVE else 0
    # the one host copy of RGNN on a GPU (see Device above): METIS has no device version
    parts = partition(g, C, seed, coarsen_to=coarsen_to, timings=timings)
    return torch.as_tensor(parts, dtype=torch.int64).to(g.rowptr.device)


def bag_proportions(y: torch.Tensor, bags: torch.Tensor, mask: torch.Tensor, num_classes: int,
                    eps_y: float, num_bags: int | None = None):
    """Perturbed and reconstructed bag label proportions (Algorithm 3, lines 5 and 8).

    ``b'_r = (1/|C_r^L|) sum_{v in C_r^L} onehot(y'_v)`` over the nodes of bag ``r`` in
    ``mask`` (a bool mask or node ids), and ``b~_r = P^{-1} b'_r`` (eq. 14) mapped to the
    probability simplex (negative entries -> 1e-5, renormalised: the authors' rule,
    :func:`ldpfast.estimation.project_simplex`).  ``eps_y = math.inf`` (clean labels)
    gives ``b~ = b'``.

    Returns
    -------
    (b_prime, b_tilde, counts)
        float64 ``(C, c)``, float64 ``(C, c)`` and int64 ``(C,)`` (bags with count 0 have
        all-zero ``b'`` and a uniform ``b~``; :func:`llp_loss` skips them).
    """
    from ..estimation import grr_estimate, project_simplex

    c = check_int("num_classes", num_classes, 2)
    check_tensor("bags", bags, dims=1, dtypes=(torch.int32, torch.int64))
    n = bags.shape[0]
    mask = _check_mask("mask", mask, n, bags.device)
    _check_labels(y, mask, c)
    if bags.numel() and int(bags.min()) < 0:
        raise ValueError("bags: bag ids must be >= 0")
    if num_bags is None:
        B = int(bags.max()) + 1 if n else 1
    else:
        B = check_int("num_bags", num_bags, 1)
    if n and int(bags.max()) >= B:
        raise ValueError(f"bags: bag ids must be < num_bags = {B}")
    idx = bags[mask].to(torch.int64)
    Y = F.one_hot(y[mask].to(torch.int64), c).to(torch.float64)
    counts = torch.bincount(idx, minlength=B)
    sums = torch.zeros(B, c, dtype=torch.float64, device=idx.device).index_add_(0, idx, Y)
    b_prime = sums / counts.clamp(min=1).unsqueeze(1)
    if math.isinf(eps_y):
        est = b_prime.clone()
    else:
        est = grr_estimate(b_prime, check_eps("eps_y", eps_y), c)
    b_tilde = project_simplex(est, "clip")
    return b_prime, b_tilde, counts


def llp_loss(probs: torch.Tensor, bags: torch.Tensor, b_tilde: torch.Tensor,
             mask: torch.Tensor | None = None, *, direction: str = "paper",
             eps: float = 1e-12) -> torch.Tensor:
    """LLP regulariser of RGNN (Algorithm 3, lines 12 and 14):
    ``L_llp = (1/C') sum_r KL(b^_r || b~_r)``, ``b^_r`` the mean predicted distribution of
    the nodes of bag ``r`` with ``mask`` true; ``C'`` counts the bags holding such a node.

    Parameters
    ----------
    probs : torch.Tensor
        ``(n, c)`` predicted class probabilities (rows sum to 1, e.g. ``softmax(logits)``);
        differentiable.
    bags : torch.Tensor
        ``(n,)`` int bag ids in ``[0, C)``.
    b_tilde : torch.Tensor
        ``(C, c)`` target proportions (probability vectors), e.g. from
        :func:`bag_proportions`.
    mask : torch.Tensor, optional
        The nodes ``C_r^L`` that form the bags (default: all): an ``(n,)`` bool mask or a
        tensor of node ids.
    direction : {"paper", "reverse"}
        ``KL(b^ || b~)`` (Algorithm 3) or ``KL(b~ || b^)`` (the authors' code).
    eps : float
        Added inside the logarithms.

    Returns
    -------
    torch.Tensor
        Scalar, >= 0; exactly 0 when every ``b^_r`` equals ``b~_r``.
    """
    check_tensor("probs", probs, dims=2, dtypes=(torch.float32, torch.float64))
    check_tensor("bags", bags, dims=1, dtypes=(torch.int32, torch.int64))
    check_tensor("b_tilde", b_tilde, dims=2, dtypes=(torch.float32, torch.float64))
    n, c = probs.shape
    if bags.shape[0] != n:
        raise ValueError(f"bags: expected {n} entries (one per row of probs), got {bags.shape[0]}")
    C = b_tilde.shape[0]
    if b_tilde.shape[1] != c:
        raise ValueError(f"b_tilde: expected {c} columns (classes), got {b_tilde.shape[1]}")
    if n and (int(bags.min()) < 0 or int(bags.max()) >= C):
        raise ValueError(f"bags: bag ids must lie in [0, {C}) (rows of b_tilde)")
    if direction not in ("paper", "reverse"):
        raise ValueError(f"direction: expected 'paper' or 'reverse', got {direction!r}")
    if mask is not None:
        mask = _check_mask("mask", mask, n, probs.device)
        probs, bags = probs[mask], bags[mask]
    idx = bags.to(torch.int64)
    counts = torch.bincount(idx, minlength=C)
    sums = torch.zeros(C, c, dtype=probs.dtype, device=probs.device).index_add(0, idx, probs)
    keep = counts > 0
    if not bool(keep.any()):
        return probs.sum() * 0.0
    b_hat = sums[keep] / counts[keep].unsqueeze(1).to(probs.dtype)
    bt = b_tilde[keep].to(probs.dtype)
    if direction == "paper":
        kl = (b_hat * (torch.log(b_hat + eps) - torch.log(bt + eps))).sum(1)
    else:
        kl = (bt * (torch.log(bt + eps) - torch.log(b_hat + eps))).sum(1)
    return kl.mean()


# --- the pipeline ----------------------------------------------------------------------------
@dataclass(kw_only=True)
class RGNNReport(FitReport):
    """Result of :func:`fit` (the fields of :class:`~ldpfast.methods._common.FitReport` and
    these).

    ``accuracy``: clean-label test accuracy at the selected epoch; ``epoch``: that epoch;
    ``val_score``: the private selection score there (validation accuracy against ``y~``,
    or ``y'``); ``reconstruction``: accuracy of ``y~`` / ``y'`` against the clean labels of
    the training nodes and of the reconstructed / perturbed binary features (diagnostics
    only, never used for training or selection); ``privacy``: both totals and the ledger.
    """

    epoch: int
    val_score: float
    reconstruction: dict = field(default_factory=dict)


def _categorical_features(data, group_size, domain, dataset):
    """Integer features and their domain: RGNN's grouping for binary float features."""
    from ..transforms import RGNN_GROUP_SIZES, group_binary_features

    x = data.x
    if x is None:
        raise ValueError("data.x: RGNN needs node features")
    if x.dtype.is_floating_point:
        if bool(torch.isnan(x).any()) or not bool(((x == 0) | (x == 1)).all()):
            raise ValueError("data.x: float features must be binary (0/1); discretise "
                             "continuous features first (ldpfast.transforms.Discretize)")
        gs = RGNN_GROUP_SIZES.get(dataset, 1) if group_size is None else group_size
        gs = check_int("group_size", gs, 1)
        xg = group_binary_features(x, gs) if gs > 1 else x
        return xg.to(torch.int64), 2, gs
    if domain is None:
        domain = getattr(data, "x_domain", None)
    if domain is None:
        domain = int(x.max()) + 1 if x.numel() else 2
    return x.to(torch.int64), domain, 1


@device_raises()
def fit(data, eps_x: float, eps_y: float, *, m: int = 10, k_x: int = 4, k_y: int = 4,
        C: int = 16, alpha: float = 1.0, model: str = "sage", group_size: int | None = None,
        variant: str = "rgnn", lr: float = 0.01, weight_decay: float = 0.0,
        dropout: float = 0.5, hidden: int = 16, epochs: int = 100, seed: int | None = None,
        split: tuple[float, float] = (0.5, 0.25), dataset: str | None = None, domain=None,
        bags: torch.Tensor | None = None, llp_direction: str = "paper", device=None) -> RGNNReport:
    """Train RGNN (Algorithm 3) or one of its variants and report accuracy and privacy.

    Parameters
    ----------
    data : torch_geometric.data.Data
        Undirected graph with ``edge_index``, labels ``y`` and features ``x``: binary 0/1
        floats (grouped by ``group_size``, section V-A1) or integer categorical values.
        Nodes labelled ``-1`` (PyG's unlabelled nodes) are in no split: the random split
        (``split``) is drawn over the labelled nodes.
    eps_x : float
        GRR budget of each sampled feature (> 0; ``math.inf``: features not perturbed).
    eps_y : float
        Label budget (> 0; ``math.inf``: labels not perturbed).
    m : int
        Features sampled by GRR-FS (paper: 10).
    k_x, k_y : int
        Hops of feature / label reconstruction (paper grid {2, 4, 8, 16}).
    C : int
        Number of METIS bags (grid {4, ..., 256}).
    alpha : float
        Weight of the LLP regulariser, eq. (15) (grid {0.01, 0.1, 1, 10, 20}).
    model : {"sage", "gcn", "gat"}
        The 2-layer backbone (ReLU, dropout).
    group_size : int, optional
        Binary features OR-ed per group; default :data:`ldpfast.transforms.RGNN_GROUP_SIZES`
        of ``dataset`` (1 = no grouping for other data).
    variant : {"rgnn", "no_llp", "no_fy", "no_fx", "graphsage_perturbed"}
        Full method; without LLP (alpha = 0); without label reconstruction (train on
        ``y'``); without feature reconstruction (train on ``x'``); or the Table II
        baseline (``x'``, ``y'``, no LLP).
    lr, weight_decay, dropout, hidden, epochs : training (Adam), see :data:`DEFAULTS`.
    seed : int, optional
        Secret seed in ``[0, 2**64)``: the split, both randomisers, METIS and the model
        initialisation get independent seeds derived from it.  All variants see the same
        perturbed data for the same seed.  ``None`` (default) draws one from the OS.  Never
        recorded in the report.
    split : (train, val)
        Fractions (paper: 50/25/25).
    dataset : str, optional
        Name for the defaults (``data.name`` if absent).
    domain : int or sequence, optional
        Domain sizes of integer features (default ``data.x_domain`` or ``max + 1``).
    bags : torch.Tensor, optional
        Precomputed :func:`metis_bags` (reused across budgets; must match ``C``).
    llp_direction : {"paper", "reverse"}
        See :func:`llp_loss`.
    device : str or torch.device, optional
        Where the data, both randomisers (GRR-FS, RR), the reconstructions, the LLP loss and
        the model run: 'cpu', 'cuda' or 'cuda:N'; default (None) the device of ``data``.
        The split and the initial weights are drawn on the CPU and moved (same on every
        device for one seed).  Host steps on a GPU: METIS (:func:`metis_bags`, a one-off
        copy of the public graph; skipped when ``bags`` is given) and scalar reads (the
        validation score per epoch for model selection, the diagnostics once).

    Returns
    -------
    RGNNReport

    Raises
    ------
    {device_raises}
    """
    data = with_edge_index(data)  # PyG's adj_t (T.ToSparseTensor) read as its edge_index
    if variant not in VARIANTS:
        raise ValueError(f"variant: expected one of {VARIANTS}, got {variant!r}")
    if model not in BACKBONES:
        raise ValueError(f"model: expected one of {BACKBONES}, got {model!r}")
    if getattr(data, "edge_index", None) is None:
        raise ValueError("data.edge_index: training the GNN needs edge_index")
    for name, e in (("eps_x", eps_x), ("eps_y", eps_y)):
        if isinstance(e, bool) or not isinstance(e, (int, float)):
            raise TypeError(f"{name}: expected a number > 0 or math.inf, got {type(e).__name__}")
        if math.isnan(e) or e <= 0:
            raise ValueError(f"{name}: expected a number > 0 or math.inf, got {e!r}")
    k_x = check_int("k_x", k_x, 0, 1024)
    k_y = check_int("k_y", k_y, 0, 1024)
    alpha = check_real("alpha", alpha, 0.0)
    lr = check_real("lr", lr, 0.0)
    weight_decay = check_real("weight_decay", weight_decay, 0.0)
    dropout = check_real("dropout", dropout, 0.0, 1.0)
    hidden = check_int("hidden", hidden, 1)
    epochs = check_int("epochs", epochs, 1)
    seed = resolve_seed(seed)
    _, dev = resolve_device(device, _data_tensors(data))
    with _backend.oom_guard("rgnn.fit"):
        return _fit(data_to(data, dev), dev, eps_x, eps_y, m, k_x, k_y, C, alpha, model, group_size,
                    variant, lr, weight_decay, dropout, hidden, epochs, seed, split, dataset, domain,
                    bags, llp_direction)


def _fit(data, dev, eps_x, eps_y, m, k_x, k_y, C, alpha, model, group_size, variant, lr, weight_decay,
         dropout, hidden, epochs, seed, split, dataset, domain, bags, llp_direction):
    """:func:`fit` on ``data`` already on ``dev`` (arguments checked)."""
    from ..mechanisms import grr_fs, rr_labels

    t0 = time.perf_counter()
    timings: dict = {}
    dataset = dataset or getattr(data, "name", None) or "custom"
    n = int(data.num_nodes)
    if getattr(data, "y", None) is None:
        raise ValueError("data.y: RGNN needs node labels")
    c = int(data.y.max()) + 1
    if c < 2:
        raise ValueError("data.y: need at least two classes")
    C = check_int("C", C, 1, n)
    csr = csr_of(data)
    x_int, dom, gs = _categorical_features(data, group_size, domain, dataset)
    d = x_int.shape[1]
    m = check_int("m", m, 1, d)
    gam = _domain(dom, d)
    # drawn on the CPU (same split on every device), then moved
    train_mask, val_mask, test_mask = (t.to(dev) for t in labelled_split(data.y, sub_seed(seed, 1), *split))
    labelled = train_mask | val_mask
    ledger = Ledger()

    # lines 1-2: node side
    if math.isfinite(eps_x):
        x_rep, spent = grr_fs(x_int, dom, eps_x, m, seed=sub_seed(seed, 2))
        ledger.add(spent)
    else:
        x_rep = x_int
    y = data.y.to(torch.int64)
    if math.isfinite(eps_y):
        y_rep, spent = rr_labels(y, c, eps_y, seed=sub_seed(seed, 3), mask=labelled)
        ledger.add(spent)
    else:
        y_rep = y.clone()
    timings["mechanisms_s"] = time.perf_counter() - t0

    # lines 3-4: bags
    use_llp = variant not in ("no_llp", "graphsage_perturbed") and alpha > 0
    if use_llp:
        if bags is None:
            bags = metis_bags(csr, C, sub_seed(seed, 5) & 0x7FFFFFFF, timings=timings)
        elif bags.shape != (n,) or int(bags.max()) >= C:
            raise ValueError(f"bags: expected ({n},) bag ids in [0, C={C})")
        else:
            bags = _backend.to_device(bags, dev, "bags")

    # lines 6-8: reconstruction
    t1 = time.perf_counter()
    recon_x = variant not in ("no_fx", "graphsage_perturbed") and math.isfinite(eps_x)
    recon_y = variant not in ("no_fy", "graphsage_perturbed") and math.isfinite(eps_y)
    h = (reconstruct_features(x_rep, csr, gam, eps_x, m, k_x) if recon_x
         else encode_reports(x_rep, gam))
    y_tilde = (reconstruct_labels(y_rep, labelled, csr, c, eps_y, k_y) if recon_y
               else torch.where(labelled, y_rep, -1))
    if use_llp:
        _, b_tilde, _ = bag_proportions(y_rep, bags, train_mask, c, eps_y, C)
        b_tilde = b_tilde.to(torch.float32)
    timings["reconstruction_s"] = time.perf_counter() - t1
    recon = {"label_acc_train_y_tilde": float((y_tilde[train_mask] == y[train_mask]).float().mean()),
             "label_acc_train_y_perturbed": float((y_rep[train_mask] == y[train_mask]).float().mean())}
    if bool((gam == 2).all()):
        xt = x_int.to(torch.float32)
        recon["feature_mae_reconstructed"] = float((h - xt).abs().mean()) if recon_x else None
        recon["feature_mae_perturbed"] = float((x_rep.to(torch.float32) - xt).abs().mean())

    # lines 9-15: training
    t2 = time.perf_counter()
    torch.manual_seed(sub_seed(seed, 4))
    net = Backbone(model, h.shape[1], hidden, c, dropout, act="relu").to(dev)  # initialised on the CPU
    opt = torch.optim.Adam(net.parameters(), lr=lr, weight_decay=weight_decay)
    ei = graph_input(data.edge_index, n, model)
    tr_idx = torch.nonzero(train_mask).squeeze(1)
    best = (-1.0, -1, 0.0, 0.0)  # (val score, epoch, test acc, val acc against y')
    for epoch in range(epochs):
        net.train()
        opt.zero_grad()
        logits = net(h, ei)
        loss = F.cross_entropy(logits[tr_idx], y_tilde[tr_idx])
        if use_llp:
            loss = loss + alpha * llp_loss(F.softmax(logits, 1), bags, b_tilde, train_mask,
                                           direction=llp_direction)
        loss.backward()
        opt.step()
        net.eval()
        with torch.no_grad():
            pred = net(h, ei).argmax(1)
            score = float((pred[val_mask] == y_tilde[val_mask]).float().mean())
            if score > best[0]:
                best = (score, epoch, float((pred[test_mask] == y[test_mask]).float().mean()),
                        float((pred[val_mask] == y_rep[val_mask]).float().mean()))
    timings["training_s"] = time.perf_counter() - t2
    timings["total_s"] = time.perf_counter() - t0

    thm1 = grr_fs_epsilon(eps_x, m, d) if math.isfinite(eps_x) else INF
    exact_x = m * eps_x
    privacy = ledger.to_dict()
    privacy.update({
        "eps_x": eps_x, "m": m, "d": d, "eps_y": eps_y,
        "eps_X_theorem1": thm1, "eps_total_theorem3": thm1 + eps_y,
        "eps_X_exact": exact_x, "eps_total_exact": exact_x + eps_y,
        "guarantee": (f"({fmt_eps(exact_x)} + {fmt_eps(eps_y)})-LDP per node (exact: "
                      f"m*eps_x + eps_y); the paper's Theorem 3 states "
                      f"({thm1:.4g} + {fmt_eps(eps_y)}), which is not a valid bound for m < d"),
    })
    settings = {"variant": variant, "model": model, "dataset": dataset, "m": m, "k_x": k_x,
                "k_y": k_y, "C": C, "alpha": alpha if use_llp else 0.0, "group_size": gs,
                "d": d, "domain": int(gam[0]) if bool((gam == gam[0]).all()) else gam.tolist(),
                "lr": lr, "weight_decay": weight_decay, "dropout": dropout, "hidden": hidden,
                "epochs": epochs, "split": list(split),
                "llp_direction": llp_direction,
                "selection": ("max validation accuracy against "
                              + ("reconstructed labels y~" if recon_y else "perturbed labels y'"))}
    recon["val_acc_against_y_perturbed"] = best[3]
    return RGNNReport(accuracy=best[2], epoch=best[1], val_score=best[0], privacy=privacy,
                      settings=settings, reconstruction=recon, timings=timings)
