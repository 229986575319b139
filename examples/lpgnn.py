"""LPGNN on Cora, written as a PyG user writes it.

Paper: S. Sajadmanesh and D. Gatica-Perez, "Locally Private Graph Neural Networks", CCS 2021.

Every node reports its features through the multi-bit mechanism (``eps_x``) and every
labelled node its label through randomized response (``eps_y``), once: the randomisers are
the dataset's ``pre_transform``, so the reports are made when the dataset is first built,
stored under ``--root`` and read back on later runs, never redrawn.  The server denoises
the features with ``ldpfast.nn.KProp`` inside the model (propagated once: the features are
fixed), denoises the labels with ``ldpfast.nn.denoise_labels`` (eq. 12) and trains
GraphSAGE with ``ldpfast.nn.corrected_loss`` (eqs. 13-14).  The whole paper pipeline, with
its Drop model selection, is ``ldpfast.methods.lpgnn.fit``.

    python examples/lpgnn.py [--eps-x 1] [--eps-y 1] [--epochs 200] [--quick]
"""
from __future__ import annotations

import argparse
import math

import torch
import torch.nn.functional as F
import torch_geometric.transforms as T
from torch_geometric.nn import SAGEConv

import ldpfast as lf
from ldpfast.methods.lpgnn import paper_settings


class LPGNN(torch.nn.Module):
    """KProp (K_x steps, no self loops) in front of a 2-layer GraphSAGE."""

    def __init__(self, d_in: int, hidden: int, num_classes: int, k_x: int, dropout: float):
        super().__init__()
        # the input features are fixed: propagate them once (as PyG's SGConv(cached=True))
        self.kprop = lf.nn.KProp(k=k_x, aggr="gcn", cache_result=True)
        self.conv1 = SAGEConv(d_in, hidden)
        self.conv2 = SAGEConv(hidden, num_classes)
        self.dropout = dropout

    def forward(self, x, edge_index):
        x = self.kprop(x, edge_index)
        x = F.dropout(x, self.dropout, self.training)
        x = F.selu(self.conv1(x, edge_index))
        x = F.dropout(x, self.dropout, self.training)
        return self.conv2(x, edge_index)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eps-x", type=float, default=1.0, help="feature budget per node")
    p.add_argument("--eps-y", type=float, default=1.0, help="label budget per labelled node")
    p.add_argument("--epochs", type=int, default=200)
    p.add_argument("--root", default=None,
                   help="where the randomised dataset is stored (default ~/.cache/ldpfast/processed)")
    p.add_argument("--seed", type=int, default=None,
                   help="secret seed of the randomisers (default: fresh from the OS)")
    p.add_argument("--quick", action="store_true", help="a few epochs (smoke test)")
    a = p.parse_args(argv)
    epochs = 5 if a.quick else a.epochs
    hp = paper_settings("cora", a.eps_x, a.eps_y)  # the authors' K_x, K_y, lr, ... for Cora

    torch.manual_seed(0)  # RandomNodeSplit draws the (public) split from torch's generator
    pre = T.Compose([
        T.RandomNodeSplit(split="train_rest", num_val=0.25, num_test=0.25),  # 50/25/25
        lf.transforms.MultiBit(eps=a.eps_x, seed=a.seed),  # features of every node
        lf.transforms.RRLabels(eps=a.eps_y, seed=a.seed),  # labels of train + val nodes
    ])
    data = lf.datasets.GraphDataset(a.root, "cora", pre_transform=pre)[0]
    print(f"privacy spent: {lf.privacy.Ledger.of(data)}")

    # Label denoising (eq. 12): KProp over the one-hot noisy labels of the labelled nodes.
    c = int(data.y.max()) + 1
    kprop_y = lf.nn.KProp(k=hp["k_y"], aggr="gcn", cached=True)  # one graph, new inputs each epoch
    y_tilde = lf.nn.denoise_labels(data.y, data.y_rr_mask, data.edge_index, kprop_y, c)
    P = lf.nn.rr_transition(c, a.eps_y)  # P[y, y'] = p(y'|y) of randomized response (eq. 11)

    model = LPGNN(data.num_features, 16, c, hp["k_x"], hp["dropout"])
    opt = torch.optim.Adam(model.parameters(), lr=hp["lr"], weight_decay=hp["weight_decay"])
    best_val, test_acc = math.inf, 0.0
    for epoch in range(epochs):
        model.train()
        opt.zero_grad()
        out = model(data.x, data.edge_index)
        loss = lf.nn.corrected_loss(out, y_tilde, data.train_mask, P, kprop_y, data.edge_index)  # eqs. 13-14
        loss.backward()
        opt.step()

        model.eval()
        with torch.no_grad():
            out = model(data.x, data.edge_index)
            # validation labels are noisy too: forward-corrected loss (eq. 13) against them
            val = lf.nn.corrected_loss(out, data.y, data.val_mask, P)
            if val < best_val:  # test labels were never randomised: they score the model
                best_val = float(val)
                pred = out.argmax(1)
                test_acc = float((pred[data.test_mask] == data.y[data.test_mask]).float().mean())
        if epoch % 20 == 0 or epoch == epochs - 1:
            print(f"epoch {epoch:3d}  loss {loss.item():.3f}  val loss {val.item():.3f}")
    print(f"test accuracy {test_acc:.3f} at ({a.eps_x:g} + {a.eps_y:g})-LDP per node "
          f"(K_x={hp['k_x']}, K_y={hp['k_y']})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
