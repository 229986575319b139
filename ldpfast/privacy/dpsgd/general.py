"""The general path of per-sub-graph gradients: any differentiable module, by re-running the
model on every sub-graph alone.

The fast rules (:mod:`.grad_rules`) read per-sub-graph gradients off one backward of the
block-diagonal batch, but only for layers whose gradient is a sum of known per-row terms.
For every other trainable parameter, the per-sub-graph gradient is computed from its
definition.  With ``loss = sum_b f_b(out_b)`` and sub-graphs that do not mix (checked by
:mod:`.mixing`), the gradient of sub-graph ``b`` is the vector-Jacobian product of the model
run on ``G_b`` alone with the output gradient of ``b``'s rows in the batch's backward
(``g_out[b] = df_b/dout_b``, since only ``f_b`` reads ``out_b``)::

    g_b = d/dw <g_out[b], model(x_b, edge_index_b; w)>

so the loss function itself is never needed.  Each sub-graph is one small forward and
backward (its own rows only: the total arithmetic is that of one batch), run one after the
other: PyG's message passing has data-dependent shapes (``add_remaining_self_loops`` indexes
with a boolean mask), which ``torch.func.vmap`` over sub-graphs padded to a common size
refuses.  The cost is therefore Python and launch overhead per sub-graph
(``benchmarks/bench_grad_paths.py`` measures it against the fast rules).

Exactness: the same numbers as a Python loop over the sub-graphs, up to float summation
order, for any model whose training forward draws no random numbers.  With dropout (or any
other randomness) the re-run draws its own masks, so ``g_b`` is the gradient of another
draw than the batch's: still a function of sub-graph ``b`` alone, and clipped as a whole
with the fast parameters' terms, so the bound ``||clip(g_b)|| <= C`` and the accounting hold.
"""
from __future__ import annotations

import torch

__all__ = ["per_subgraph_gradients"]


def _layout(seg: torch.Tensor, edge_index: torch.Tensor, B: int):
    """Nodes and edges of every sub-graph: ``(node order, node offsets, edges in local ids,
    edge offsets)``, the offsets on the host."""
    N = seg.numel()
    dev = seg.device
    order = torch.argsort(seg, stable=True)
    offs = torch.searchsorted(seg[order], torch.arange(B + 1, device=dev))
    local = torch.empty_like(seg)
    local[order] = torch.arange(N, device=dev) - offs[:-1][seg[order]]
    es = seg[edge_index[1]]
    if bool((seg[edge_index[0]] != es).any()):
        raise ValueError("edge_index: an edge joins two sub-graphs; the batch must be block-diagonal (the "
                         "HeterPoisson sampler's batches are)")
    eorder = torch.argsort(es, stable=True)
    eoffs = torch.searchsorted(es[eorder], torch.arange(B + 1, device=dev))
    return order, offs.tolist(), local[edge_index[:, eorder]], eoffs.tolist()


def per_subgraph_gradients(model: torch.nn.Module, x: torch.Tensor, edge_index: torch.Tensor, seg: torch.Tensor,
                           num_subgraphs: int, g_out: torch.Tensor,
                           params: list[torch.nn.Parameter]) -> list[torch.Tensor]:
    """Per-sub-graph gradients of ``params`` by re-running ``model`` on each sub-graph.

    Parameters
    ----------
    model : torch.nn.Module
        Called as ``model(x_b, edge_index_b)``, in its current train/eval mode; its hooks
        must not record (the caller's job).
    x : torch.Tensor
        ``(N, ...)`` node features of the batch.
    edge_index : torch.Tensor
        ``(2, E)`` edges of the batch, none across sub-graphs.
    seg : torch.Tensor
        ``(N,)`` sub-graph id of every node.
    num_subgraphs : int
        ``B``.
    g_out : torch.Tensor
        ``(N, ...)`` gradient of the loss at the model's output in the batch's backward.
    params : list of torch.nn.Parameter
        The parameters to differentiate.

    Returns
    -------
    list of torch.Tensor
        ``(B, *p.shape)`` per parameter (zeros for a sub-graph whose output does not reach it).

    Raises
    ------
    ValueError
        When an edge joins two sub-graphs, or the model's output is not node-level.
    """
    B, N = int(num_subgraphs), seg.numel()
    grads = [torch.zeros((B,) + tuple(p.shape), dtype=p.dtype, device=p.device) for p in params]
    if B == 0 or not params:
        return grads
    if g_out.shape[0] != N:
        raise ValueError(f"the general path needs node-level outputs (one row per batch node, {N}); the model "
                         f"returned {g_out.shape[0]} rows")
    order, offs, ei_local, eoffs = _layout(seg, edge_index, B)
    with torch.enable_grad():
        for b in range(B):
            if offs[b] == offs[b + 1]:
                continue
            nodes = order[offs[b]:offs[b + 1]]
            out = model(x[nodes], ei_local[:, eoffs[b]:eoffs[b + 1]])
            if isinstance(out, (tuple, list)):
                out = out[0]
            if not out.requires_grad:
                continue
            if out.shape[0] != nodes.numel():
                raise ValueError(f"the general path needs node-level outputs: on a sub-graph of {nodes.numel()} "
                                 f"nodes the model returned {out.shape[0]} rows")
            gs = torch.autograd.grad(out, params, g_out[nodes].to(out.dtype), allow_unused=True)
            for acc, gi in zip(grads, gs):
                if gi is not None:
                    acc[b] = gi
    return grads
