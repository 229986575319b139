"""DPRR (edge local DP) on Cora, written as a PyG user writes it.

Paper: S. Hidano and T. Murakami, "Degree-Preserving Randomized Response for Graph Neural
Networks under Local Differential Privacy".

Every user randomises her own neighbour list with DPRR: a noisy degree (``eps1``), Warner's
randomized response on each bit (``eps2``) and edge sampling that keeps the expected degree,
in O(|E|), once, as the dataset's ``pre_transform``.  Features and labels are public here;
only the edges are protected.  The model propagates the public features over the noisy
graph with KProp (``ldpfast.transforms.KPropFeatures``: once, the features being fixed) and
classifies a node from its own features next to the propagated ones with a linear layer, trained on Cora's standard split.  Cora is sparse
(3.9 neighbours on average), so it takes a large budget before the reported lists hold
more true than false edges: the script prints how many survive.  The paper evaluates DPRR on graph classification (GIN on many
small graphs): that pipeline is ``ldpfast.methods.dprr.fit`` / ``ldpfast reproduce dprr``.

    python examples/dprr.py [--eps 8] [--hops 2] [--epochs 100] [--adj-t] [--quick]

``--adj-t`` stores the graph as PyG's ``adj_t`` first (``T.ToSparseTensor()``, a torch sparse
CSR tensor), as many PyG scripts do: DPRR reads it and returns the noisy graph as an ``adj_t``
of the same format, and the model propagates over that.
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T

import ldpfast as lf


def _edge_set(data) -> set:
    """The directed edges (source, target) of a Data, from either form."""
    if "adj_t" in data:  # row = target, column = source
        rows, cols = data.adj_t.to_sparse_coo().indices()
        return set(zip(cols.tolist(), rows.tolist()))
    return set(map(tuple, data.edge_index.t().tolist()))


def train_and_test(data, hops: int, epochs: int) -> float:
    """A linear layer on a node's own features and their KProp over the (noisy) graph, propagated
    once (``KPropFeatures``, SGC-style; ``hops = 0``: features only)."""
    torch.manual_seed(0)
    x = data.x
    if hops > 0:  # edge_index or adj_t, whichever the Data holds
        x = torch.cat([x, lf.transforms.KPropFeatures(hops, aggr="mean")(data.clone()).x], dim=1)
    model = torch.nn.Linear(x.shape[1], int(data.y.max()) + 1)
    opt = torch.optim.Adam(model.parameters(), lr=0.2, weight_decay=5e-5)
    best_val, test_acc = -1.0, 0.0
    for _ in range(epochs):
        opt.zero_grad()
        F.cross_entropy(model(x)[data.train_mask], data.y[data.train_mask]).backward()
        opt.step()
        with torch.no_grad():
            pred = model(x).argmax(1)
        val = float((pred[data.val_mask] == data.y[data.val_mask]).float().mean())
        if val > best_val:
            best_val = val
            test_acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
    return test_acc


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eps", type=float, default=8.0, help="edge-LDP budget per user (eps1 + eps2)")
    p.add_argument("--hops", type=int, default=2, help="KProp steps")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--root", default=None,
                   help="where the randomised dataset is stored (default ~/.cache/ldpfast/processed)")
    p.add_argument("--seed", type=int, default=None,
                   help="secret seed of the randomiser (default: fresh from the OS)")
    p.add_argument("--adj-t", action="store_true",
                   help="store the graph as PyG's adj_t (T.ToSparseTensor) before randomising it")
    p.add_argument("--quick", action="store_true", help="a few epochs (smoke test)")
    a = p.parse_args(argv)
    epochs = 5 if a.quick else a.epochs

    randomise = lf.transforms.DPRR(eps=a.eps, seed=a.seed)
    pre = T.Compose([T.ToSparseTensor(), randomise]) if a.adj_t else randomise
    ds = lf.datasets.GraphDataset(a.root, "cora", pre_transform=pre)
    noisy = ds[0]
    print(f"privacy spent: {lf.privacy.Ledger.of(noisy)}")

    clean = lf.datasets.load("cora")  # for the comparison only; the server never sees it
    reported = _edge_set(noisy)
    true_kept = len(reported & _edge_set(clean))
    print(f"edges: {clean.edge_index.size(1)} true, {len(reported)} reported, {true_kept} of them true"
          + (" (read from adj_t)" if a.adj_t else ""))

    acc_noisy = train_and_test(noisy, a.hops, epochs)
    acc_clean = train_and_test(clean, a.hops, epochs)
    acc_mlp = train_and_test(clean, 0, epochs)  # no edges at all
    print(f"test accuracy: noisy graph {acc_noisy:.3f} ({a.eps:g}-edge LDP per user), "
          f"clean graph {acc_clean:.3f}, features only {acc_mlp:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
