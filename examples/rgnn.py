"""RGNN on Cora, written as a PyG user writes it.

Paper: K. Bhaila, W. Huang, Y. Wu and X. Wu, "Local differential privacy in graph neural
networks: a reconstruction approach", SDM 2024.

Nodes report their (grouped, binary) features through GRR with feature sampling
(``eps_x`` per sampled feature, ``m`` features) and the labelled nodes their labels through
GRR (``eps_y``), once, as the dataset's ``pre_transform``.  The server reconstructs features
and labels from the reports of the K-hop neighbourhood (Algorithms 1 and 2), cuts the graph
into METIS bags and trains a GCN with the label-proportion regulariser (Algorithm 3).  The
packaged pipeline, with its ablations, is ``ldpfast.methods.rgnn.fit``.

Privacy: the ledger records ``m * eps_x`` for the features, the exact LDP guarantee of
GRR-FS (the paper's Theorem 1 figure is smaller but is not an LDP bound; see the README).

    python examples/rgnn.py [--eps-x 1] [--eps-y 1] [--m 10] [--quick]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import GCNConv

import ldpfast as lf
from ldpfast.methods import rgnn


class GCN(torch.nn.Module):
    def __init__(self, d_in: int, hidden: int, num_classes: int, dropout: float = 0.5):
        super().__init__()
        self.conv1 = GCNConv(d_in, hidden)
        self.conv2 = GCNConv(hidden, num_classes)
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = F.dropout(x, self.dropout, self.training)
        x = F.relu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eps-x", type=float, default=1.0, help="budget of each sampled feature")
    p.add_argument("--eps-y", type=float, default=1.0, help="label budget")
    p.add_argument("--m", type=int, default=10, help="features each node samples and reports")
    p.add_argument("--hops", type=int, default=4, help="K_x = K_y of the reconstructions")
    p.add_argument("--bags", type=int, default=16, help="METIS bags C")
    p.add_argument("--alpha", type=float, default=1.0, help="weight of the LLP regulariser")
    p.add_argument("--epochs", type=int, default=100)
    p.add_argument("--root", default=None,
                   help="where the randomised dataset is stored (default ~/.cache/ldpfast/processed)")
    p.add_argument("--seed", type=int, default=None,
                   help="secret seed of the randomisers (default: fresh from the OS)")
    p.add_argument("--quick", action="store_true", help="a few epochs (smoke test)")
    a = p.parse_args(argv)
    epochs = 5 if a.quick else a.epochs

    torch.manual_seed(0)  # RandomNodeSplit draws the (public) split from torch's generator
    pre = T.Compose([
        # RGNN's preprocessing of Cora: OR of 25 consecutive words -> 58 binary features
        lf.transforms.GroupBinaryFeatures(lf.transforms.RGNN_GROUP_SIZES["cora"]),
        T.RandomNodeSplit(split="train_rest", num_val=0.25, num_test=0.25),  # 50/25/25
        lf.transforms.GRRFS(eps_x=a.eps_x, m=a.m, seed=a.seed),  # features of every node
        lf.transforms.RRLabels(eps=a.eps_y, seed=a.seed),  # labels of train + val nodes
    ])
    data = lf.datasets.GraphDataset(a.root, "cora", pre_transform=pre)[0]
    print(f"privacy spent: {lf.privacy.Ledger.of(data)}")

    # Server side: reconstruction from the K-hop reports (Algorithms 1, 2), METIS bags.
    csr = lf.graph.csr_of(data)
    c = int(data.y.max()) + 1
    labelled = data.train_mask | data.val_mask
    x = rgnn.reconstruct_features(data.x.long(), csr, 2, a.eps_x, a.m, a.hops)
    y_tilde = rgnn.reconstruct_labels(data.y, labelled, csr, c, a.eps_y, a.hops)
    bags = rgnn.metis_bags(data, a.bags)
    _, b_tilde, _ = rgnn.bag_proportions(data.y, bags, data.train_mask, c, a.eps_y, a.bags)
    b_tilde = b_tilde.float()

    model = GCN(x.size(1), 16, c)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    best_val, test_acc = -1.0, 0.0
    for epoch in range(epochs):
        model.train()
        opt.zero_grad()
        logits = model(x, data.edge_index)
        loss = F.cross_entropy(logits[data.train_mask], y_tilde[data.train_mask])
        loss = loss + a.alpha * rgnn.llp_loss(F.softmax(logits, 1), bags, b_tilde, data.train_mask)
        loss.backward()
        opt.step()

        model.eval()
        with torch.no_grad():
            pred = model(x, data.edge_index).argmax(1)
        # select on the reconstructed validation labels; test labels were never randomised
        val = float((pred[data.val_mask] == y_tilde[data.val_mask]).float().mean())
        if val > best_val:
            best_val = val
            test_acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
        if epoch % 20 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch:3d}  loss {loss.item():.3f}  val acc (vs y~) {val:.3f}")
    print(f"test accuracy {test_acc:.3f}; privacy per node: {lf.privacy.Ledger.of(data).eps:g} "
          f"(features m * eps_x = {a.m * a.eps_x:g}, labels {a.eps_y:g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
