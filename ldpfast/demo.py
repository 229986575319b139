"""The main demo: Cora with locally private features and labels, trained with GraphSAGE.

Every node randomises its own features with the LPGNN multi-bit encoder (eps_x) and the
labelled nodes (train + val) their labels with randomized response (eps_y).  Three models
are trained and tested on the true test labels:

1. "naive": a 2-layer GraphSAGE on the rectified features and noisy labels, built from the
   ldpfast PyG transforms (``MultiBit``, ``RRLabels``);
2. "LPGNN": the full pipeline of the paper (KProp denoising of features and labels, Drop
   training), :func:`ldpfast.methods.lpgnn.fit`, with the same budgets;
3. "non-private": the same GraphSAGE on clean data.

Privacy spent: eps_x + eps_y per node (LPGNN Corollary 3.7), printed from the ledger that
the transforms record on the data.  Each stage prints a line when it ends (flushed, so piped
output arrives as it happens); ``quick=True`` (``ldpfast demo --quick``) trains every model,
the LPGNN fit included, for a few epochs (a smoke test of the install).
"""
from __future__ import annotations

import time

import torch
import torch.nn.functional as F
from tqdm.auto import tqdm

from ldpfast.methods._common import graph_input, random_split


class SAGE(torch.nn.Module):
    """2-layer GraphSAGE (mean aggregation), dropout 0.5."""

    def __init__(self, d_in: int, d_hidden: int, d_out: int):
        super().__init__()
        from torch_geometric.nn import SAGEConv

        self.conv1 = SAGEConv(d_in, d_hidden)
        self.conv2 = SAGEConv(d_hidden, d_out)

    def forward(self, x, edge_index):
        x = F.dropout(x, p=0.5, training=self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, p=0.5, training=self.training)
        return self.conv2(x, edge_index)


def train_eval(data, x, y_train, train_mask, val_mask, test_mask, epochs, seed, desc):
    """Train with Adam; keep the epoch with the best accuracy on (noisy) validation labels."""
    torch.manual_seed(seed)
    num_classes = int(data.y.max()) + 1
    model = SAGE(x.size(1), 64, num_classes).to(x.device)  # initialised on the CPU
    opt = torch.optim.Adam(model.parameters(), lr=0.01, weight_decay=5e-4)
    ei = graph_input(data.edge_index, data.num_nodes, "sage")
    best_val, best_test = -1.0, 0.0
    for _ in tqdm(range(epochs), desc=desc, leave=False, mininterval=1.0, disable=None):
        model.train()
        opt.zero_grad()
        out = model(x, ei)
        F.cross_entropy(out[train_mask], y_train[train_mask]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, ei).argmax(1)
        val = (pred[val_mask] == y_train[val_mask]).float().mean().item()
        if val > best_val:
            best_val = val
            best_test = (pred[test_mask] == data.y[test_mask]).float().mean().item()
    return best_test


#: Epochs of every model with ``quick=True``.
QUICK_EPOCHS = 5


def run_demo(eps_x: float = 3.0, eps_y: float = 3.0, epochs: int | None = None, seed: int | None = None,
             root=None, verbose: bool = True, device=None, quick: bool = False) -> dict:
    """Run the demo and return a JSON-ready report (accuracy, privacy spent, timings).

    Parameters
    ----------
    eps_x, eps_y : float
        Feature and label budgets per node.
    epochs : int, optional
        Training epochs of all three models.  Default: 200 for the two GraphSAGE models and
        the paper's 500 (with its early stopping) for the LPGNN fit; :data:`QUICK_EPOCHS`
        with ``quick``.
    seed : int, optional
        The secret seed of the randomisers, the split and the models (``None``: drawn from
        the OS); it is not part of the report.
    root : str, optional
        Read Cora's raw Planetoid files from this data root (default: the embedded copy).
    verbose : bool
        Print a line as each stage ends (flushed) and a summary.
    device : str, optional
        'cpu' (default), 'cuda' or 'cuda:N': where the data, the randomisers and the models
        run (the split is drawn on the CPU, so both devices see the same split and
        randomised inputs for one seed).
    quick : bool
        A few epochs for every model (a smoke test; accuracies are not meaningful).
    """
    from ldpfast import datasets, transforms
    from ldpfast._checks import check_int
    from ldpfast.methods._common import _data_tensors, data_to, resolve_device, sub_seed
    from ldpfast.privacy import Ledger
    from ldpfast.rng import resolve_seed

    if epochs is not None:
        check_int("epochs", epochs, 1)
    sage_epochs = epochs or (QUICK_EPOCHS if quick else 200)
    lpgnn_epochs = epochs or (QUICK_EPOCHS if quick else 500)
    seed = resolve_seed(seed)
    t0 = time.perf_counter()

    def stage(msg: str) -> None:  # flushed: piped output arrives as it happens
        if verbose:
            print(f"[{time.perf_counter() - t0:6.1f} s] {msg}", flush=True)

    data = datasets.load("cora", root=root)
    _, dev = resolve_device(device, _data_tensors(data))
    data = data_to(data, dev)
    n = data.num_nodes
    train_mask, val_mask, test_mask = (m.to(dev) for m in random_split(n, sub_seed(seed, 1)))
    data.train_mask, data.val_mask, data.test_mask = train_mask, val_mask, test_mask

    # Node side: features (all nodes) and labels (the labelled train + val nodes only).
    private = transforms.MultiBit(eps=eps_x, alpha=0.0, beta=1.0, seed=seed)(data)
    # RRLabels randomises train + val labels (the default mask); test labels stay clean.
    private = transforms.RRLabels(eps=eps_y, seed=seed)(private)  # own tag: independent bits
    t_randomise = time.perf_counter() - t0
    ledger = Ledger.of(private)
    stage(f"randomised the features (eps_x={eps_x:g}) and labels (eps_y={eps_y:g}) of {n} nodes")

    acc_private = train_eval(data, private.x, private.y, train_mask, val_mask, test_mask,
                             sage_epochs, sub_seed(seed, 2), "private")
    stage(f"naive GraphSAGE on the private data ({sage_epochs} epochs): test accuracy {acc_private:.3f}")
    acc_clean = train_eval(data, data.x, data.y, train_mask, val_mask, test_mask, sage_epochs,
                           sub_seed(seed, 2), "non-private")
    stage(f"non-private GraphSAGE ({sage_epochs} epochs): test accuracy {acc_clean:.3f}")
    from ldpfast.methods import lpgnn

    rep = lpgnn.fit(data, eps_x, eps_y, seed=seed, dataset="cora", device=dev, epochs=lpgnn_epochs)
    acc_lpgnn = rep.accuracy
    stage(f"LPGNN (at most {lpgnn_epochs} epochs): test accuracy {acc_lpgnn:.3f}")
    report = {
        "dataset": "cora",
        "device": str(dev),
        "model": "GraphSAGE (2 layers, 64 hidden)",
        "split": "random 50/25/25",
        "eps_x": eps_x,
        "eps_y": eps_y,
        "epochs": {"graphsage": sage_epochs, "lpgnn": lpgnn_epochs},
        "quick": quick,
        "privacy": ledger.to_dict(),
        "accuracy_naive_private": acc_private,
        "accuracy_lpgnn": acc_lpgnn,
        "lpgnn_settings": rep.settings,
        "accuracy_non_private": acc_clean,
        "randomise_s": t_randomise,
        "total_s": time.perf_counter() - t0,
    }
    if verbose:
        print(f"Cora: {n} nodes, {data.edge_index.size(1)} directed edges, "
              f"{data.x.size(1)} features")
        print(f"privacy spent: {ledger}")
        print(f"  per node: eps_x + eps_y = {ledger.eps:g} (features {eps_x:g}, labels {eps_y:g})")
        print(f"test accuracy, naive GraphSAGE on private data : {acc_private:.3f}")
        print(f"test accuracy, LPGNN (KProp K_x={rep.settings['k_x']}, K_y={rep.settings['k_y']}"
              f", Drop)     : {acc_lpgnn:.3f}")
        print(f"test accuracy, non-private GraphSAGE           : {acc_clean:.3f}")
        print(f"[randomisation {t_randomise:.2f} s, total {report['total_s']:.1f} s]", flush=True)
    return report
