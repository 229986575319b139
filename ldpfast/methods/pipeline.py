"""Node classification when features, labels *and* edges are private: one call.

:func:`private_pipeline` combines what the papers give for each relation into the recipe that
measured best (``docs/recipes.md`` has the table and the commands that made it):

* **edges** (edge LDP, ``eps_edges`` per user): every user sends her neighbour list through
  Warner's randomized response (:class:`ldpfast.transforms.RREdges`) and the server keeps an
  edge only when *both* endpoints reported it (``symmetrize="and"``).  A true edge survives
  with ``p^2``, a false one with ``(1-p)^2`` (``p = e^eps / (e^eps + 1)``), so true edges
  outnumber false ones from ``eps_edges > ln(non-edges / edges) / 2``: half the budget the
  one-sided lists need (Cora: 3.2 against 6.5).  DPRR (``edges="dprr"``, paper 001) keeps
  the degrees but samples each list down to about ``d_i`` entries, so under ``"and"`` few
  true edges are left and under ``"or"`` the false ones dominate: it measured worse at every
  budget (Cora, eps_edges 8: 36% against RR's 76%);
* **features** (``eps_x``) and **labels** (``eps_y``), node LDP: LPGNN (paper 002,
  :func:`ldpfast.methods.lpgnn.fit`): multi-bit features, KProp over the *noisy* graph,
  randomized-response labels denoised by label KProp, the Drop loss and its model selection;
* **KProp steps** (``k="auto"``): on a noisy graph long propagation mixes every node with
  the whole graph (after 8 steps all labels are the majority class: Cora at eps_edges = 3,
  Twitch-DE even on the true graph), so ``(K_x, K_y)`` is chosen from :data:`K_GRID` by the
  Drop model-selection loss on the validation nodes' *noisy* labels: post-processing of the
  same reports (the same seed gives the same reports for every candidate), no extra budget.

Budget split (measured, ``docs/recipes.md``): at a fixed node budget ``eps_x + eps_y``, give
about three quarters to the labels (Cora, eps_x + eps_y = 4: ``1 + 3`` reached 80% against
77% for ``2 + 2``; at 2: ``0.5 + 1.5`` 74% against 66% for ``1 + 1``).

Privacy, per relation (they protect different neighbouring datasets and do not add):
``(eps_x + eps_y)``-LDP of each node's features and label, ``eps_edges``-edge LDP of each
user's neighbour list (an edge is in two users' lists, so one *relationship* is protected at
``2 eps_edges``).  ``math.inf`` for a budget means that relation is not randomised (the
public graph, clean features or labels) and is reported as not protected.

:func:`private_transforms` is the same recipe as a PyG ``T.Compose`` for a model of one's own
(``docs/recipes.md`` shows the training loop).  The reproduction harness (the table on four
datasets) is :mod:`ldpfast.reproduce.pipeline`.
"""
from __future__ import annotations

import copy
import math
import time
import warnings
from dataclasses import dataclass, field

import torch

from .._checks import check_int
from ..rng import resolve_seed
from ._common import FitReport, fmt_eps, sub_seed, with_edge_index

__all__ = ["K_GRID", "LABEL_SIGNAL_MIN", "TRUE_FRACTION_MIN", "PipelineReport", "PipelineWarning", "collapse_risks",
           "expected_graph", "label_signal", "private_pipeline", "private_transforms"]

#: ``(K_x, K_y)`` candidates of ``k="auto"``: none, short and the LPGNN-style longer
#: propagation.  On the near-true graph (Cora) they were within 2 points of each other; on a
#: noisy graph only the short ones survive (Facebook, eps_edges = 4: 77% with (2, 2), 48%
#: with (4, 4)); on Twitch-DE only (0, 0) beats the majority class.
K_GRID = ((0, 0), (2, 2), (4, 4))

#: Below this expected fraction of true edges in the server graph the pipeline warns
#: (:func:`collapse_risks`).  Measured (``docs/recipes.md``): Cora at 37% true edges 38%
#: accuracy, CiteSeer at 25% 32%, Twitch-DE at 58% its majority share; the lowest fractions
#: that held up were Cora at 61% (63%) and CiteSeer at 71% (49%, public graph 59%).
TRUE_FRACTION_MIN = 0.6

#: Below this label signal (:func:`label_signal`) the pipeline warns (:func:`collapse_risks`).
#: Measured: Cora (7 classes) at eps_y = 0.5 (signal 0.085) fell to 36% against 59% at eps_y = 1
#: (0.22); LPGNN's Table 4 (true graph): Cora 42.9% at 0.5, Facebook (signal 0.14) 75.1%.
LABEL_SIGNAL_MIN = 0.1

EDGES = ("rr", "dprr")
RULES = ("and", "or")


class PipelineWarning(UserWarning):
    """:func:`private_pipeline` is configured where accuracy collapsed in the measured runs
    (a server graph with too few true edges, labels with almost no signal; see
    :func:`collapse_risks`)."""


def _budget(name: str, eps) -> float:
    if isinstance(eps, bool) or not isinstance(eps, (int, float)) or math.isnan(eps) or eps <= 0:
        raise ValueError(f"{name}: expected a number > 0 or math.inf (not randomised), got {eps!r}")
    return float(eps)


def label_signal(eps_y: float, num_classes: int) -> float:
    """How much of a randomized-response label is the true one:
    ``P[y' = y] - P[y' = a given other class] = (e^eps - 1) / (e^eps + c - 1)``, in [0, 1]
    (1 for ``eps = inf``).  Learning from ``y'`` needs about ``1 / signal^2`` times the
    labels clean learning needs."""
    c = check_int("num_classes", num_classes, 2)
    if math.isinf(_budget("eps_y", eps_y)):
        return 1.0
    e = math.exp(min(eps_y, 700.0))
    return (e - 1.0) / (e + c - 1.0)


def expected_graph(data, eps_edges: float, edges: str = "rr", symmetrize: str = "and") -> dict:
    """Expected composition of the server graph :func:`private_pipeline` trains on, from the
    mechanism's law and the input graph (no randomness drawn).

    Parameters
    ----------
    data : torch_geometric.data.Data
        The true undirected graph.
    eps_edges : float
        Edge budget (``math.inf``: the graph itself).
    edges : {"rr", "dprr"}
    symmetrize : {"and", "or"}

    Returns
    -------
    dict
        ``true_kept`` and ``false`` (directed entries, both directions counted),
        ``true_fraction`` (``true_kept / (true_kept + false)``), ``threshold`` (the budget
        above which true edges outnumber false ones for RR on this graph's density) and
        ``list_entries`` (the entries the users' lists hold together before the rule: what
        RR sends, ``~ n^2 / (e^eps + 1)``).  For DPRR ``q_i`` is taken at the true degree
        (the mechanism uses a Laplace-noised one).
    """
    from ..graph import csr_of
    from ..mechanisms.edges.degree_preserving import dprr_budget
    from ..transforms.edges import _or_threshold, pair_rule_counts

    data = with_edge_index(data)
    eps_edges = _budget("eps_edges", eps_edges)
    _check_choice("edges", edges, EDGES)
    _check_choice("symmetrize", symmetrize, RULES)
    csr = csr_of(data)
    n, m = csr.num_nodes, csr.nnz
    non = float(n) * (n - 1) - m
    r = non / m if m else math.inf
    threshold = (0.5 * math.log(r) if symmetrize == "and" else _or_threshold(r)) if m and non > 0 else -math.inf
    if math.isinf(eps_edges):
        return {"true_kept": float(m), "false": 0.0, "true_fraction": 1.0, "threshold": threshold,
                "list_entries": float(m)}
    d = csr.degrees().to(torch.float64)
    if edges == "rr":
        eps2, q = eps_edges, torch.ones_like(d)
    else:
        eps2 = dprr_budget(eps_edges, max(n, 2), 0.9, None)[1]
    p = 1.0 / (1.0 + math.exp(-eps2))
    if edges == "dprr":  # eq. (6) at the true degree
        q = (d / (d * (2 * p - 1) + (n - 1) * (1 - p))).clamp(0.0, 1.0)
    e = pair_rule_counts(csr, p * q, (1 - p) * q, symmetrize)
    tot = e["true_kept"] + e["false"]
    lists = float((q * (p * d + (1 - p) * (n - 1 - d))).sum())
    return {**e, "true_fraction": e["true_kept"] / tot if tot else 0.0, "threshold": threshold,
            "list_entries": lists}


def _check_choice(name, value, allowed):
    if value not in allowed:
        raise ValueError(f"{name}: expected one of {allowed}, got {value!r}")
    return value


def _check_k(k, k_grid):
    if isinstance(k, str):
        if k != "auto":
            raise ValueError(f"k: expected 'auto' or a pair (K_x, K_y) of ints >= 0, got {k!r}")
        grid = k_grid
    else:
        grid = (k,)
    out = []
    for pair in grid:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise ValueError(f"k: expected 'auto' or a pair (K_x, K_y) of ints >= 0, got {pair!r}")
        out.append((check_int("K_x", pair[0], 0, 64), check_int("K_y", pair[1], 0, 64)))
    if not out:
        raise ValueError("k_grid: expected at least one (K_x, K_y) pair")
    return out


def collapse_risks(data, eps_y: float, eps_edges: float, edges: str = "rr", symmetrize: str = "and",
                   *, graph: dict | None = None) -> dict[str, str]:
    """Where :func:`private_pipeline` with these budgets is configured like the measured runs
    that collapsed (``docs/recipes.md``); what it warns about, without running anything.

    Parameters
    ----------
    data : torch_geometric.data.Data
        The true graph and labels (the class count is ``y.max() + 1``).
    eps_y, eps_edges : float
        Label and edge budgets (> 0 or ``math.inf``).
    edges, symmetrize : as :func:`private_pipeline`.
    graph : dict, optional
        :func:`expected_graph` of these settings, if already computed.

    Returns
    -------
    dict
        ``{"graph": message}`` when the expected server graph has fewer than
        :data:`TRUE_FRACTION_MIN` true edges, ``{"labels": message}`` when the label signal
        (:func:`label_signal`) is below :data:`LABEL_SIGNAL_MIN`; empty when neither.
    """
    eps_y, eps_edges = _budget("eps_y", eps_y), _budget("eps_edges", eps_edges)
    graph = expected_graph(data, eps_edges, edges, symmetrize) if graph is None else graph
    c = int(data.y.max()) + 1
    out = {}
    if graph["true_fraction"] < TRUE_FRACTION_MIN:
        out["graph"] = (
            f"private_pipeline: at eps_edges = {eps_edges:g} the server graph ({edges}, symmetrize={symmetrize!r}) "
            f"is expected to hold {graph['false']:.4g} false edges against {graph['true_kept']:.4g} true ones "
            f"({100 * graph['true_fraction']:.0f}% true, below {100 * TRUE_FRACTION_MIN:.0f}%). KProp and the GNN then "
            f"average largely random nodes, and accuracy fell to the majority class or below in the measured runs "
            f"(Cora 37% true edges: 38% accuracy; CiteSeer 25%: 32%; Twitch-DE 58%: the 61% majority share). "
            f"True edges outnumber false ones on this graph only for eps_edges > {graph['threshold']:.3g} (RR, "
            f"symmetrize='and'); about 1 more gave 81% (Cora) to 91% (Twitch-DE) true edges.")
    s = label_signal(eps_y, c)
    if s < LABEL_SIGNAL_MIN:
        kept = math.exp(eps_y) / (math.exp(eps_y) + c - 1)
        need = math.log((1 + LABEL_SIGNAL_MIN * (c - 1)) / (1 - LABEL_SIGNAL_MIN))
        out["labels"] = (
            f"private_pipeline: at eps_y = {eps_y:g} with {c} classes a reported label is the true one with "
            f"probability {kept:.3f} (chance: {1 / c:.3f}); its signal {s:.3f} is below {LABEL_SIGNAL_MIN}, where "
            f"accuracy collapsed in the measured runs. Give the labels more of the node budget: eps_y >= {need:.2f} "
            f"for {c} classes.")
    return out


@dataclass(kw_only=True)
class PipelineReport(FitReport):
    """Result of :func:`private_pipeline` (the fields of
    :class:`~ldpfast.methods._common.FitReport` and these).

    Attributes
    ----------
    spent : dict
        Epsilon spent per relation: ``{"features": eps_x, "labels": eps_y, "edges":
        eps_edges}`` as the ledger recorded them; ``None`` for a relation left clean
        (budget ``math.inf``).
    k_x, k_y : int
        The KProp steps used (chosen by ``k="auto"`` or given).
    epoch : int
        The epoch the Drop rule selected.
    candidates : list of dict
        Every ``(k_x, k_y)`` tried with its validation loss against the noisy labels (the
        selection score) and selected epoch; no test accuracy (it would invite selecting on
        the test set).
    graph : dict
        The server graph: ``edges`` (directed entries it holds) and the expected
        composition of :func:`expected_graph`.
    majority : float
        Share of the most frequent class among the test nodes (what predicting one class
        scores), to read ``accuracy`` against.
    """

    spent: dict
    k_x: int
    k_y: int
    epoch: int
    candidates: list = field(default_factory=list)
    graph: dict = field(default_factory=dict)
    majority: float = math.nan


def private_transforms(eps_x: float, eps_y: float, eps_edges: float, *, k_x: int = 2,
                       symmetrize: str = "and", seed: int | None = None):
    """The recipe's randomisers as one PyG transform, for a model of one's own.

    ``T.Compose([RREdges(eps_edges, symmetrize), MultiBit(eps_x), RRLabels(eps_y),
    KPropFeatures(k_x)])``: the edges first (the rest then sees only the noisy graph), the
    features' multi-bit reports rectified (eq. 4 of LPGNN; ``data.x`` must lie in [0, 1]),
    the labels of ``train_mask | val_mask`` randomised (``data.y_rr_mask`` says which), the
    features propagated ``k_x`` steps over the noisy graph.  Train with
    :func:`ldpfast.nn.denoise_labels` and :func:`ldpfast.nn.corrected_loss` (the training loop
    is in ``docs/recipes.md``).  A budget of ``math.inf`` leaves that relation out.

    Parameters
    ----------
    eps_x, eps_y, eps_edges : float
        Budgets, > 0 or ``math.inf``.
    k_x : int
        Feature KProp steps (0-64); on a noisy graph keep it small (:data:`K_GRID`).
    symmetrize : {"and", "or"}
        Server rule of the noisy lists (``"and"`` measured best).
    seed : int, optional
        Secret seed; each randomiser gets its own derived from it (``None``: each draws one
        from the OS).  Never recorded.

    Returns
    -------
    torch_geometric.transforms.Compose
    """
    import torch_geometric.transforms as T

    from ..transforms import KPropFeatures, MultiBit, RREdges, RRLabels

    eps_x, eps_y, eps_edges = (_budget(n, e) for n, e in (("eps_x", eps_x), ("eps_y", eps_y),
                                                          ("eps_edges", eps_edges)))
    check_int("k_x", k_x, 0, 64)
    _check_choice("symmetrize", symmetrize, RULES)
    s = None if seed is None else resolve_seed(seed)
    part = (lambda i: None) if s is None else (lambda i: sub_seed(s, i))
    steps = []
    if math.isfinite(eps_edges):
        steps.append(RREdges(eps_edges, seed=part(1), symmetrize=symmetrize))
    if math.isfinite(eps_x):
        steps.append(MultiBit(eps_x, seed=part(2)))
    if math.isfinite(eps_y):
        steps.append(RRLabels(eps_y, seed=part(3)))
    steps.append(KPropFeatures(k_x))
    return T.Compose(steps)


def private_pipeline(data, eps_x: float = 1.0, eps_y: float = 3.0, eps_edges: float = 6.0, *,
                     edges: str = "rr", symmetrize: str = "and", k="auto", k_grid=K_GRID,
                     model: str = "sage", epochs: int = 300, patience: int = 60, hidden: int = 16,
                     lr: float | None = None, weight_decay: float | None = None,
                     dropout: float | None = None, split: tuple[float, float] = (0.5, 0.25),
                     max_output_edges: int = 50_000_000, seed: int | None = None,
                     dataset: str | None = None, device=None) -> PipelineReport:
    """Train a node classifier on private features, labels and edges (module docstring) and
    report its test accuracy and the budget spent per relation.

    Parameters
    ----------
    data : torch_geometric.data.Data
        Undirected graph with features ``x`` (scaled to [0, 1] per column, as LPGNN does)
        and labels ``y`` (``-1``: unlabelled, in no split).
    eps_x, eps_y : float
        Feature and label budgets (node LDP), > 0 or ``math.inf`` (not randomised).
        Measured best: ``eps_y`` about three times ``eps_x``.
    eps_edges : float
        Edge budget (edge LDP per user), > 0 or ``math.inf`` (the public graph).  Useful
        from about ``ln(n / mean degree) / 2 + 0.5`` (Cora 4, Facebook 4, Twitch-DE 3.5);
        below it a :class:`PipelineWarning` says so.
    edges : {"rr", "dprr"}
        The edge randomiser: Warner's RR (:class:`ldpfast.transforms.RREdges`) or DPRR
        (:class:`ldpfast.transforms.DPRR`, paper 001).
    symmetrize : {"and", "or"}
        Server rule: an edge if both / either endpoint reported it.  The training needs an
        undirected graph, so the lists are always combined.
    k : "auto" or (int, int)
        ``(K_x, K_y)`` KProp steps, or ``"auto"``: the candidate of ``k_grid`` with the lowest
        Drop validation loss against the noisy labels (no extra privacy cost).
    k_grid : sequence of (int, int)
        Candidates for ``k="auto"`` (default :data:`K_GRID`).
    model : {"sage", "gcn", "gat"}
        Backbone (2 layers, ``hidden`` units).
    epochs, patience, hidden, lr, weight_decay, dropout, split
        As :func:`ldpfast.methods.lpgnn.fit` (``lr``, ``weight_decay``, ``dropout`` default
        to the LPGNN authors' values for the dataset and budget).
    max_output_edges : int
        RR sends dense lists (``~ n^2 / (e^eps + 1)`` entries): refused (ValueError, before
        any randomness) above this.
    seed : int, optional
        Secret seed in ``[0, 2**64)``; the edges, the split, the features, the labels and the
        model get independent seeds derived from it.  ``None`` draws one from the OS.  Never
        recorded in the report.
    dataset : str, optional
        Name used for the LPGNN defaults and recorded (default ``data.name``).
    device : str or torch.device, optional
        Where everything runs (as :func:`ldpfast.methods.lpgnn.fit`).

    Returns
    -------
    PipelineReport

    Warns
    -----
    PipelineWarning
        The expected server graph has too few true edges (:data:`TRUE_FRACTION_MIN`), or the
        labels carry almost no signal (:func:`label_signal` below :data:`LABEL_SIGNAL_MIN`):
        :func:`collapse_risks`.

    Raises
    ------
    ValueError, TypeError
        A bad argument (named, with the allowed range), before any randomness is drawn.
    """
    from ..privacy import Ledger
    from ..transforms import DPRR, NoisyGraphWarning, RREdges
    from . import lpgnn

    data = with_edge_index(data)
    eps_x, eps_y, eps_edges = (_budget(n, e) for n, e in (("eps_x", eps_x), ("eps_y", eps_y),
                                                          ("eps_edges", eps_edges)))
    _check_choice("edges", edges, EDGES)
    _check_choice("symmetrize", symmetrize, RULES)
    _check_choice("model", model, ("sage", "gcn", "gat"))
    grid = _check_k(k, k_grid)
    check_int("epochs", epochs, 1)
    check_int("patience", patience, 1)
    check_int("max_output_edges", max_output_edges, 0)
    if getattr(data, "x", None) is None or getattr(data, "y", None) is None or getattr(data, "edge_index", None) is None:
        raise ValueError("data: expected a graph with x, y and edge_index")
    y = data.y
    c = int(y.max()) + 1
    if c < 2:
        raise ValueError(f"data.y: expected at least 2 classes, got {c}")
    t0 = time.perf_counter()
    graph = expected_graph(data, eps_edges, edges, symmetrize)
    if edges == "rr" and math.isfinite(eps_edges) and graph["list_entries"] > max_output_edges:
        raise ValueError(f"eps_edges: RR's lists would hold about {graph['list_entries']:.3g} entries on this graph "
                         f"(> max_output_edges = {max_output_edges}); raise eps_edges (the server graph at this "
                         f"budget is {100 * graph['true_fraction']:.0f}% true edges) or max_output_edges")
    for msg in collapse_risks(data, eps_y, eps_edges, edges, symmetrize, graph=graph).values():
        warnings.warn(msg + " (Silence with warnings.filterwarnings('ignore', "
                      "category=ldpfast.methods.pipeline.PipelineWarning).)", PipelineWarning, stacklevel=2)
    seed = resolve_seed(seed)

    # --- edges: each user's list randomised, combined by the server rule ------------------------
    ledger = Ledger()
    g = copy.copy(data)
    g.__dict__.pop("_ldpfast_csr", None)
    if math.isfinite(eps_edges):
        mech = (RREdges(eps_edges, seed=sub_seed(seed, 1), symmetrize=symmetrize, max_output_edges=max_output_edges)
                if edges == "rr" else DPRR(eps_edges, seed=sub_seed(seed, 1), symmetrize=symmetrize))
        with warnings.catch_warnings():  # the pipeline warned above, with its measurements
            warnings.simplefilter("ignore", NoisyGraphWarning)
            g = mech(g)
        ledger.entries.extend(Ledger.of(g).entries)
    t_edges = time.perf_counter() - t0

    # --- features, labels, KProp, Drop: LPGNN on the noisy graph, (K_x, K_y) by validation ------
    best, candidates = None, []
    for kx, ky in grid:
        rep = lpgnn.fit(g, eps_x, eps_y, model=model, k_x=kx, k_y=ky, lr=lr, weight_decay=weight_decay,
                        dropout=dropout, hidden=hidden, epochs=epochs, patience=patience, seed=sub_seed(seed, 2),
                        split=split, dataset=dataset, device=device)
        candidates.append({"k_x": kx, "k_y": ky, "val_loss": rep.val_loss, "epoch": rep.epoch})
        if best is None or rep.val_loss < best.val_loss:
            best = rep
    from ..privacy.budget import Spent

    ledger.entries.extend(Spent(**{k_: v for k_, v in e.items() if k_ != "relation"})
                          for e in best.privacy["entries"])
    by_target = ledger.by_target()
    spent = {t: by_target.get(t) for t in ("features", "labels", "edges")}
    guarantee = (f"({fmt_eps(eps_x)} + {fmt_eps(eps_y)})-LDP per node (features + labels); "
                 f"{fmt_eps(eps_edges)}-edge LDP per user's neighbour list"
                 + ("" if math.isfinite(eps_edges) else " (edges not protected: the public graph)"))
    privacy = ledger.to_dict()
    privacy["guarantee"] = guarantee
    privacy["spent"] = spent
    test = _test_mask(best, data, seed, split)
    yt = y[test]
    majority = float(torch.bincount(yt[yt >= 0]).max()) / max(1, int((yt >= 0).sum()))
    graph = {"edges": int(g.edge_index.size(1)), **{f"expected_{k_}": v for k_, v in graph.items()}}
    settings = dict(best.settings, edges=edges, symmetrize=symmetrize, eps_edges=eps_edges,
                    k="auto" if isinstance(k, str) else list(k), k_grid=[list(p) for p in grid],
                    max_output_edges=max_output_edges)
    return PipelineReport(accuracy=best.accuracy, privacy=privacy, settings=settings,
                          timings={"edges_s": t_edges, "total_s": time.perf_counter() - t0,
                                   "fits": len(grid)},
                          spent=spent, k_x=best.settings["k_x"], k_y=best.settings["k_y"], epoch=best.epoch,
                          candidates=candidates, graph=graph, majority=majority)


def _test_mask(rep, data, seed, split):
    """The test nodes of the fit (the split :func:`ldpfast.methods.lpgnn.fit` drew)."""
    from ._common import labelled_split

    return labelled_split(data.y.cpu(), sub_seed(sub_seed(seed, 2), 1), *split)[2].to(data.y.device)
