"""A graph attention network (GAT) trained with node-level DP-SGD on Cora, through the engine.

Every training node (its features, label and edges) is protected against anyone who sees
the trained model: node-level ``(eps, delta)``-DP, with HeterPoisson sub-graph sampling and
per-sub-graph clipping (paper 003, Algorithm 1; :class:`ldpfast.privacy.NodeDPEngine`).
GATConv's attention vectors have an exact fast per-sub-graph rule (read through an expanded
view while the layer runs); ``ldpfast.privacy.validate`` prints which path every module's
parameters take before training.  Test nodes are classified from neighbours among the test
nodes only (section 4.4), so inference reads no training node.

    python examples/gat_dpsgd.py [--eps 8] [--heads 4] [--epochs 9] [--seed S] [--quick]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import GATConv

import ldpfast as lf
from ldpfast.privacy import NodeDPEngine
from ldpfast.privacy.dpsgd import subgraph_loss
from ldpfast.sampling import inference_subgraphs


class GAT(torch.nn.Module):
    """One multi-head GAT layer (heads concatenated), ELU, a linear classifier."""

    def __init__(self, d_in: int, hidden: int, heads: int, num_classes: int):
        super().__init__()
        self.conv = GATConv(d_in, hidden, heads=heads)
        self.head = torch.nn.Linear(hidden * heads, num_classes)

    def forward(self, x, edge_index):
        return self.head(F.elu(self.conv(x, edge_index)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eps", type=float, default=8.0, help="target node-level epsilon")
    p.add_argument("--M", type=float, default=1.0, help="expected appearances of a node as a neighbour")
    p.add_argument("--heads", type=int, default=4, help="attention heads")
    p.add_argument("--hidden", type=int, default=16, help="channels per head")
    p.add_argument("--batch", type=int, default=256, help="expected sub-graphs per step")
    p.add_argument("--epochs", type=float, default=9.0, help="steps T = epochs / q_b")
    p.add_argument("--clip", type=float, default=0.5, help="per-sub-graph clipping norm C")
    p.add_argument("--lr", type=float, default=0.03)
    p.add_argument("--seed", type=int, default=None,
                   help="secret seed of the batches and the noise (default: fresh from the OS)")
    p.add_argument("--root", default=None,
                   help="where the processed dataset is stored (default ~/.cache/ldpfast/processed)")
    p.add_argument("--quick", action="store_true", help="a few steps (smoke test)")
    a = p.parse_args(argv)

    torch.manual_seed(0)  # the 80/20 split of the paper, drawn once and stored with the dataset
    split = T.RandomNodeSplit(split="train_rest", num_val=0.0, num_test=0.2)
    data = lf.datasets.GraphDataset(a.root, "cora", pre_transform=split)[0]
    delta = 1.0 / data.num_nodes ** 1.1

    torch.manual_seed(0)
    model = GAT(data.num_features, a.hidden, a.heads, int(data.y.max()) + 1)
    print(lf.privacy.validate(model))  # every module's per-sub-graph gradient path
    engine = NodeDPEngine(accountant="rdp")
    model, optimizer, sampler = engine.make_private_with_epsilon(
        model, torch.optim.Adam(model.parameters(), lr=a.lr), data, target_epsilon=a.eps, target_delta=delta,
        epochs=0.3 if a.quick else a.epochs, max_grad_norm=a.clip, expected_batch_size=a.batch, M=a.M,
        train_mask=data.train_mask, seed=a.seed)
    print(f"{sampler}: sigma={optimizer.sigma:.3f} for ({a.eps:g}, {delta:.2e}) node-level DP")
    model.train()
    for batch in sampler:
        optimizer.zero_grad()
        loss = subgraph_loss(model(batch), batch)  # a sum over the sub-graphs, not a mean
        loss.backward()
        optimizer.step()
        stats = getattr(optimizer, "last_stats", None)  # per-sub-graph norms of this step
        if batch.step % 20 == 0 and stats is not None:
            print(f"step {batch.step:4d}  sub-graphs {batch.num_subgraphs:4d}  loss {loss.item():.1f}  "
                  f"clipped {stats.clipped_fraction:.2f}")
    print(f"privacy spent: ({engine.get_epsilon(delta):.3f}, {delta:.2e}) after {engine.steps} steps\n"
          f"  under: {engine.privacy_model}")

    model.eval()
    test = inference_subgraphs(data, data.test_mask, 13, peripheral_nodes=data.test_mask)
    with torch.no_grad():
        pred = model(test)[test.center].argmax(1)
    print(f"test accuracy {float((pred == test.y).float().mean()):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
