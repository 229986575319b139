"""HeterPoisson node-level DP-SGD on Cora, written as a PyG user writes it.

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks", IEEE S&P 2024.

Here the data stay with the server; what is protected is every training node (its
features, label and edges) against anyone who sees the trained model: node-level
``(eps, delta)``-DP.  Each step samples sub-graphs with the HeterPoisson sampler (Poisson
central nodes, out-degree-adjusted Poisson neighbours), clips each sub-graph's gradient,
adds Gaussian noise, and the accountant of the paper's Theorem 2 calibrates the noise to
the target ``eps``: :class:`ldpfast.privacy.NodeDPEngine` sets all of this up in one call,
and the training loop is an ordinary PyG loop.  Test nodes are classified from neighbours
among the test nodes only (section 4.4), so inference touches no training node.  The packaged pipeline is
``ldpfast.methods.heterpoisson.fit`` / ``ldpfast reproduce heterpoisson``.

    python examples/heterpoisson.py [--eps 8] [--M 2] [--epochs 9] [--seed S] [--quick]
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import GCNConv

import ldpfast as lf
from ldpfast.privacy import NodeDPEngine
from ldpfast.privacy.dpsgd import subgraph_loss
from ldpfast.sampling import inference_subgraphs


class GCN(torch.nn.Module):
    """One GCN layer, ELU, a linear classifier (the paper's setup)."""

    def __init__(self, d_in: int, hidden: int, num_classes: int):
        super().__init__()
        self.conv = GCNConv(d_in, hidden)
        self.head = torch.nn.Linear(hidden, num_classes)

    def forward(self, x, edge_index):
        return self.head(F.elu(self.conv(x, edge_index)))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eps", type=float, default=8.0, help="target node-level epsilon")
    p.add_argument("--M", type=float, default=2.0, help="expected appearances of a node as a neighbour")
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

    # The paper's random 80/20 split, drawn once and stored with the dataset; nothing is
    # randomised for privacy before training (the noise goes into the gradients).
    torch.manual_seed(0)
    split = T.RandomNodeSplit(split="train_rest", num_val=0.0, num_test=0.2)
    data = lf.datasets.GraphDataset(a.root, "cora", pre_transform=split)[0]
    delta = 1.0 / data.num_nodes ** 1.1

    # Node-level DP-SGD: the engine calibrates sigma for (eps, delta) over the planned steps
    # and returns the per-sub-graph gradient wrapper, the DP optimizer and the sampler.
    torch.manual_seed(0)
    model = GCN(data.num_features, 64, int(data.y.max()) + 1)
    engine = NodeDPEngine(accountant="rdp")
    model, optimizer, sampler = engine.make_private_with_epsilon(
        model, torch.optim.Adam(model.parameters(), lr=a.lr), data, target_epsilon=a.eps, target_delta=delta,
        epochs=0.3 if a.quick else a.epochs, max_grad_norm=a.clip, expected_batch_size=a.batch, M=a.M,
        train_mask=data.train_mask, seed=a.seed)
    print(f"{sampler}: sigma={optimizer.sigma:.3f} for ({a.eps:g}, {delta:.2e}) node-level DP")
    model.train()
    for batch in sampler:  # an empty Poisson sample is a batch too: its step releases noise only
        optimizer.zero_grad()
        loss = subgraph_loss(model(batch), batch)  # a sum over the sub-graphs, not a mean
        loss.backward()
        optimizer.step()
        if batch.step % 20 == 0:
            print(f"step {batch.step:4d}  sub-graphs {batch.num_subgraphs:4d}  loss {loss.item():.1f}")
    print(f"privacy spent: ({engine.get_epsilon(delta):.3f}, {delta:.2e}) after {engine.steps} steps\n"
          f"  under: {engine.privacy_model}")

    # Test nodes are classified from neighbours among the test nodes only (section 4.4).
    model.eval()
    test = inference_subgraphs(data, data.test_mask, 13, peripheral_nodes=data.test_mask)
    with torch.no_grad():
        pred = model(test)[test.center].argmax(1)
    print(f"test accuracy {float((pred == test.y).float().mean()):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
