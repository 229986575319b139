"""Check a model for node-level DP-SGD before training, and fix what has a safe equivalent
(the analogue of Opacus' ``ModuleValidator``).

:func:`validate` lists every module of a model with the path its parameters take in
:class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule`:

* ``fast``: an exact per-row rule (:mod:`ldpfast.privacy.dpsgd.grad_rules`): one backward of
  the batch gives every sub-graph's gradient;
* ``general``: the model re-run on every sub-graph (:mod:`ldpfast.privacy.dpsgd.general`):
  exact for any differentiable module, one small forward/backward per sub-graph;
* ``refused``, and why: layers that let one sub-graph change another's output (BatchNorm,
  ``LayerNorm(mode="graph")``, ``PairNorm``, global attention, ...: the wrapper refuses them
  whichever path their parameters would take), ``GCNConv(cached=True)``, lazy parameters;
* ``no parameters``: nothing of its own to train.

With ``batch=`` it also runs the run-time independence check on that batch, which finds
mixing that no list knows (``x - x.mean(0)`` in a forward, a functional global pooling).

:func:`fix` returns the model with every refused layer that has a per-node equivalent
swapped for it: BatchNorm (torch's, any dimension, and PyG's) for ``GroupNorm(1, C)`` (the
normalisation of each node over its features: ``LayerNorm`` for ``(N, C)`` inputs, and the
swap Opacus makes), PyG ``LayerNorm(mode="graph")`` for ``mode="node"``, and
``GCNConv(cached=True)`` for ``cached=False``; the affine weights are kept.  The swaps change
what the model computes (a node is no longer normalised with the others' statistics): train
it after fixing, not before.  A separate function, as in Opacus, so that validating never
changes a model.

Example::

    report = ldpfast.privacy.validate(model)
    print(report)                       # one line per module
    if not report.ok:
        model = ldpfast.privacy.fix(model)
        ldpfast.privacy.validate(model, strict=True)
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ValidationReport", "fix", "validate"]


@dataclass
class ValidationReport:
    """What :func:`validate` found: one
    :class:`~ldpfast.privacy.dpsgd.grad_rules.ModuleStatus` per module.

    Attributes
    ----------
    rows : list of ModuleStatus
        In ``named_modules()`` order.
    runtime_checked : bool
        Whether the run-time independence check ran on a batch (``validate(batch=...)``).
    """

    rows: list[Any] = field(default_factory=list)
    runtime_checked: bool = False

    @property
    def ok(self) -> bool:
        """No module is refused."""
        return not self.refused

    @property
    def refused(self) -> list[Any]:
        """The refused modules."""
        return [r for r in self.rows if r.status == "refused"]

    @property
    def fixable(self) -> list[Any]:
        """The refused modules that :func:`fix` swaps."""
        return [r for r in self.refused if r.fixable]

    @property
    def general(self) -> list[str]:
        """Qualified names of the parameters on the general path."""
        return [f"{r.name}.{p}" if r.name else p for r in self.rows for p in r.general]

    def summary(self) -> str:
        """One line: counts per status and the verdict."""
        counts = {s: sum(r.status == s for r in self.rows) for s in ("fast", "general", "refused")}
        n_fast = sum(len(r.fast) for r in self.rows)
        verdict = "ok" if self.ok else (f"{len(self.refused)} refused ({len(self.fixable)} fixable by "
                                        "ldpfast.privacy.fix)")
        return (f"{counts['fast']} modules on the fast path ({n_fast} parameters), {counts['general']} on the "
                f"general path ({len(self.general)} parameters): {verdict}"
                + ("" if self.runtime_checked else "; run-time independence check not run (pass batch=)"))

    def table(self) -> str:
        """A text table: module, type, status, parameters, detail."""
        head = ("module", "type", "status", "parameters", "detail")
        body = [(r.name or "(model)", r.type, r.status + (" (fixable)" if r.fixable else ""),
                 ", ".join(r.params) if r.status != "general" or not r.fast
                 else f"{', '.join(r.general)} (general); {', '.join(r.fast)} (fast)", r.detail)
                for r in self.rows]
        widths = [min(max(len(str(x[i])) for x in [head, *body]), 44) for i in range(4)]

        def line(cells):
            return "  ".join(str(c).ljust(w) for c, w in zip(cells[:4], widths)) + "  " + cells[4]
        return "\n".join([line(head), line(tuple("-" * w for w in widths) + ("-" * 6,)), *map(line, body),
                          "", self.summary()])

    def __str__(self) -> str:
        return self.table()

    def raise_if_refused(self) -> None:
        """Raise for the refused modules, all of them named with why.

        Raises
        ------
        SubgraphMixingError
            When a refused module mixes sub-graphs (a ``TypeError``).
        ValueError
            For the other refusals.
        """
        if self.ok:
            return
        from .dpsgd.mixing import SubgraphMixingError, mixing_reason

        lines = "; ".join(f"{r.name or '(model)'} ({r.type}): {r.detail}" for r in self.refused)
        fix = " (ldpfast.privacy.fix(model) swaps the fixable ones)" if self.fixable else ""
        mixes = any(r.detail.startswith("run-time check") or (r.module is not None and mixing_reason(r.module))
                    for r in self.refused)
        err = SubgraphMixingError if mixes else ValueError
        raise err(f"model: refused for node-level DP-SGD: {lines}{fix}")


def validate(model, *, batch=None, grad_path: str = "auto", strict: bool = False) -> ValidationReport:
    """List every module of ``model`` with the path its parameters take in node-level DP-SGD.

    Parameters
    ----------
    model : torch.nn.Module
        A model called as ``model(x, edge_index)`` (not a wrapper).
    batch : ldpfast.sampling.SubgraphBatch, optional
        Also run the run-time independence check
        (:func:`~ldpfast.privacy.dpsgd.check_subgraph_independence`) on this batch, in the
        model's current mode; the first module it finds mixing is reported as refused.
        Parameters, buffers, modes and RNG states are left as they were.
    grad_path : {"auto", "general"}
        As in :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule`.
    strict : bool
        Raise (:meth:`ValidationReport.raise_if_refused`) when a module is refused.

    Returns
    -------
    ValidationReport
        Print it for the table.

    Raises
    ------
    TypeError
        When ``model`` is not a ``torch.nn.Module`` (or is already a wrapper).
    """
    import torch

    from .dpsgd import grad_rules
    from .dpsgd.mixing import SubgraphMixingError, check_subgraph_independence

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if hasattr(model, "_module") and type(model).__name__ == "SubgraphGradSampleModule":
        raise TypeError("model: already a SubgraphGradSampleModule; validate the model inside it (model._module)")
    if not isinstance(strict, bool):
        raise TypeError(f"strict: expected a bool, got {type(strict).__name__}")
    rows = grad_rules.plan(model, grad_path=grad_path)
    report = ValidationReport(rows)
    if batch is not None:
        for f in ("x", "edge_index", "batch", "num_subgraphs"):
            if not hasattr(batch, f):
                raise TypeError(f"batch: expected an ldpfast.sampling.SubgraphBatch (no {f!r})")
        report.runtime_checked = True
        try:
            check_subgraph_independence(model, batch.x, batch.edge_index, batch.batch, batch.num_subgraphs)
        except SubgraphMixingError as e:
            name = next((r.name for r in rows if r.name and f"module {r.name!r}" in str(e)), "")
            row = next(r for r in rows if r.name == name)
            row.status, row.fixable = grad_rules.REFUSED, False
            row.detail = f"run-time check: {str(e).split(': ', 1)[-1].split('. Per-sub-graph')[0]}"
    if strict:
        report.raise_if_refused()
    return report


def fix(model, *, inplace: bool = False):
    """Swap every refused layer with a per-node equivalent (module docstring).

    Parameters
    ----------
    model : torch.nn.Module
    inplace : bool
        Change ``model`` itself; default: a deep copy is fixed and returned.

    Returns
    -------
    torch.nn.Module
        The fixed model.  Layers without an equivalent (``PairNorm``, ``GraphNorm``, global
        attention, ...) stay: :func:`validate` still lists them as refused.
    """
    import copy

    import torch

    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
    if not isinstance(inplace, bool):
        raise TypeError(f"inplace: expected a bool, got {type(inplace).__name__}")
    model = model if inplace else copy.deepcopy(model)
    if isinstance(model, torch.nn.modules.batchnorm._BatchNorm) or _pyg_is(model, "BatchNorm"):
        return _swap(model)
    for name, m in list(model.named_modules()):
        new = _swap(m)
        if new is not m:
            parent, _, leaf = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, leaf, new)
    return model


def _pyg_is(m, name: str) -> bool:
    try:
        import torch_geometric.nn as pyg
    except ImportError:  # pragma: no cover
        return False
    cls = getattr(pyg, name, None)
    return cls is not None and isinstance(m, cls)


def _swap(m):
    """The per-node equivalent of ``m``, or ``m`` itself."""
    import torch

    bn = m.module if _pyg_is(m, "BatchNorm") else m
    if isinstance(bn, torch.nn.modules.batchnorm._BatchNorm):
        new = torch.nn.GroupNorm(1, bn.num_features, eps=bn.eps, affine=bn.affine)
        if bn.affine:
            with torch.no_grad():
                new.weight.copy_(bn.weight)
                new.bias.copy_(bn.bias)
        return new.to(device=next(bn.parameters(), torch.empty(0)).device).train(bn.training)
    if _pyg_is(m, "LayerNorm") and getattr(m, "mode", None) == "graph":
        m.mode = "node"
        return m
    if _pyg_is(m, "GCNConv") and getattr(m, "cached", False):
        m.cached = False
        m._cached_edge_index = None
        m._cached_adj_t = None
    return m
