"""HeterPoisson node-level DP-SGD on Cora, written as a PyG user writes it.

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks", IEEE S&P 2024.

Here the data stay with the server; what is protected is every training node (its
features, label and edges) against anyone who sees the trained model: node-level
``(eps, delta)``-DP.  Each step samples sub-graphs with the HeterPoisson sampler (Poisson
central nodes, out-degree-adjusted Poisson neighbours), clips each sub-graph's gradient,
adds Gaussian noise, and the accountant of the paper's Theorem 2 calibrates the noise to
the target ``eps``.  Test nodes are classified from neighbours among the test nodes only
(section 4.4), so inference touches no training node.  The packaged pipeline is
``ldpfast.methods.heterpoisson.fit`` / ``ldpfast reproduce heterpoisson``.

    python examples/heterpoisson.py [--eps 8] [--M 2] [--epochs 9] [--quick]
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import GCNConv

import ldpfast as lf
from ldpfast.privacy.accountants import HeterPoissonAccountant
from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
from ldpfast.sampling import HeterPoisson, inference_subgraphs


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
    p.add_argument("--root", default=None,
                   help="where the processed dataset is stored (default ~/.cache/ldpfast/processed)")
    p.add_argument("--quick", action="store_true", help="a few steps (smoke test)")
    a = p.parse_args(argv)

    # The paper's random 80/20 split, drawn once and stored with the dataset; nothing is
    # randomised for privacy before training (the noise goes into the gradients).
    torch.manual_seed(0)
    split = T.RandomNodeSplit(split="train_rest", num_val=0.0, num_test=0.2)
    data = lf.datasets.GraphDataset(a.root, "cora", pre_transform=split)[0]
    n = data.num_nodes
    train_mask, test_mask = data.train_mask, data.test_mask

    n_train = int(train_mask.sum())
    q_b = min(1.0, a.batch / n_train)  # Poisson rate of the central nodes
    steps = 3 if a.quick else math.ceil(a.epochs / q_b)
    delta = 1.0 / n ** 1.1
    accountant = HeterPoissonAccountant(q_b, a.M, n)
    sigma = accountant.calibrate_sigma(a.eps, delta, steps)  # Theorem 2, RDP
    print(f"q_b={q_b:.4f}, T={steps} steps, M={a.M:g}: sigma={sigma:.3f} for "
          f"({a.eps:g}, {delta:.2e}) node-level DP")

    torch.manual_seed(0)
    model = GCN(data.num_features, 64, int(data.y.max()) + 1)
    gsm = SubgraphGradSampleModule(model)  # per-sub-graph gradients in one backward
    # bound to the accountant and the plan: a step past `steps` is refused, and
    # opt.epsilon() accounts for the steps actually taken
    opt = DPOptimizer(torch.optim.Adam(model.parameters(), lr=a.lr), gsm, sigma=sigma,
                      max_grad_norm=a.clip, expected_batch_size=q_b * n_train,
                      accountant=accountant, max_steps=steps)
    sampler = HeterPoisson(data, q_b, a.M, train_nodes=train_mask, num_steps=steps)
    for t in range(steps):
        batch = sampler.sample(t)
        gsm.train()
        opt.zero_grad()
        if batch.num_subgraphs == 0:
            opt.noise_only_step()  # an empty Poisson batch still releases noise
        else:
            loss = subgraph_loss(gsm(batch), batch)
            loss.backward()
            opt.step()
        if t % 20 == 0 or t == steps - 1:
            print(f"step {t:4d}  sub-graphs {batch.num_subgraphs:4d}")

    model.eval()
    test = inference_subgraphs(data, test_mask, 13, peripheral_nodes=test_mask)
    with torch.no_grad():
        pred = model(test.x, test.edge_index)[test.center].argmax(1)
    acc = float((pred == test.y).float().mean())
    spent = opt.epsilon(delta)
    print(f"privacy spent: ({spent.eps:.3f}, {delta:.2e}) after {opt.steps} steps "
          f"(RDP order {spent.order})\n  under: {spent.model}")
    print(f"test accuracy {acc:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
