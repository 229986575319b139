"""Node-level DP-SGD in one call: :class:`NodeDPEngine`, the analogue of Opacus' ``PrivacyEngine``.

Xiang, Wang and Wang, "Preserving Node-level Privacy in Graph Neural Networks" (IEEE S&P 2024),
Algorithm 1.  From the user's model, optimizer and graph, :meth:`NodeDPEngine.make_private`
(given noise) or :meth:`NodeDPEngine.make_private_with_epsilon` (target ``(eps, delta)``)
build:

* the HeterPoisson sampler (Alg. 2 + 3, :class:`ldpfast.sampling.HeterPoisson`) over the
  training nodes, at the rate given once (``expected_batch_size`` or ``sample_rate``), for
  ``T`` steps (``epochs`` or ``steps``);
* the accountant of that sampling (:class:`~ldpfast.privacy.accountants.HeterPoissonAccountant`,
  Theorem 2) and ``sigma`` calibrated to the target for ``T`` steps;
* the per-sub-graph gradient wrapper (:class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule`)
  and the DP optimizer (:class:`~ldpfast.privacy.dpsgd.DPOptimizer`) bound to the accountant
  and the plan.

The training loop is then the one a PyG user writes::

    engine = NodeDPEngine(accountant="rdp")
    model, optimizer, sampler = engine.make_private_with_epsilon(
        model, optimizer, data, target_epsilon=4.0, target_delta=1e-4, epochs=9,
        max_grad_norm=0.5, expected_batch_size=256, train_mask=data.train_mask)  # M = 1 by default
    model.train()
    for batch in sampler:
        optimizer.zero_grad()
        loss = subgraph_loss(model(batch), batch)
        loss.backward()
        optimizer.step()
    print(engine.get_epsilon(1e-4))

What holds the loop to the accounting (every refusal comes before anything changes):

* the sampler yields the batch of the step the optimizer takes next (a fresh Poisson sample
  per step), empty samples included: the wrapper takes an empty batch and ``step()``
  releases noise only, as Algorithm 1 does;
* ``step()`` past the plan (or past ``budget``) raises
  :class:`~ldpfast.privacy.dpsgd.BudgetExhaustedError`; ``step()`` without per-sub-graph
  gradients (the wrapper bypassed, no ``backward()``) and ``backward()`` of a mean loss raise
  :class:`~ldpfast.privacy.dpsgd.DPUsageError`; a model that mixes sub-graphs raises
  :class:`~ldpfast.privacy.dpsgd.SubgraphMixingError`;
* :meth:`NodeDPEngine.get_epsilon` accounts for the steps taken, and
  :meth:`NodeDPEngine.state_dict` carries them (with the model and the optimizer, never a
  seed or generator state) so that a resumed run continues the same accounting, and, made
  private with the same seed, the same batches and noise.

``sampling="nodes"`` is the naive node-level DP-SGD of that paper's Table II: one example
per node (its features and label, no edge), Poisson-sampled at the same rate and accounted
as the subsampled Gaussian mechanism, for any model.

The pieces stay public for those who compose them by hand (:mod:`ldpfast.privacy.dpsgd`,
:mod:`ldpfast.sampling`, :mod:`ldpfast.privacy.accountants`).
"""
from __future__ import annotations

import json
import math
import warnings
import weakref
from typing import TYPE_CHECKING, Any

from .._checks import check_eps, check_int, check_prob, check_real
from ..rng import resolve_seed
from .accountants import check_degree_model

if TYPE_CHECKING:  # torch-only imports stay lazy: ``import ldpfast.privacy`` does not load the sampler
    import torch

    from ..sampling import HeterPoisson, SubgraphBatch
    from .accountants import PrivacyReport
    from .dpsgd import DPOptimizer, SubgraphGradSampleModule

__all__ = ["DEFAULT_M", "NODES_PRIVACY_MODEL", "NOISE_TAG", "NOT_PRIVATE", "SAMPLER_TAG", "SAMPLINGS", "BatchMemoryManager",
           "NodeDPEngine", "NodeDPSampler"]

SAMPLINGS = ("heterpoisson", "nodes")
"""``"heterpoisson"``: sub-graphs of Alg. 2 + 3; ``"nodes"``: one-node examples (naive DP-SGD)."""

NODES_PRIVACY_MODEL = ("node-level DP, one example per training node (its features and label; the model reads no "
                       "edge): the Poisson-subsampled Gaussian mechanism, also when the structure is private")
"""The neighbouring relation of ``sampling="nodes"``."""

#: Tag of the sampler's seed (``seed ^ SAMPLER_TAG``); see :data:`NOISE_TAG`.
SAMPLER_TAG = 0xBA7C4
NOISE_TAG = 0x5EED
"""The sampler's and the noise's seeds are ``seed ^ SAMPLER_TAG`` and ``seed ^ NOISE_TAG``
(as in :func:`ldpfast.methods.heterpoisson.fit` and :mod:`ldpfast.distributed.ddp`): one
secret seed, two independent streams."""

# what an accountant's steps depend on: a state taken under other values cannot be resumed
DEFAULT_M = 1.0
"""``M`` when :meth:`NodeDPEngine.make_private` is not given one (``sampling="heterpoisson"``):
the measured best of ``docs/dpsgd_utility.md`` (``benchmarks/dpsgd_utility.py``)."""

_ACCOUNTED = ("sampling", "q_b", "M", "num_nodes", "degree_model", "degree_bound", "poisson_sampling", "clipping")

NOT_PRIVATE = ("NOT PRIVATE: poisson_sampling=False (fixed-size batches, for debugging); no accountant covers "
               "them, so no DP guarantee is claimed (eps = inf)")
"""The ``model`` of every report of a run with ``poisson_sampling=False``."""


class NodeDPSampler:
    """The batches of the planned steps not taken yet (what :meth:`NodeDPEngine.make_private`
    returns as ``sampler``).

    Iterating yields the batch of step ``optimizer.steps`` while fewer than :attr:`steps`
    steps were taken, so a resumed run (:meth:`NodeDPEngine.load_state_dict`) continues with
    the next step's batch, and every release gets a fresh Poisson sample.  Empty samples are
    yielded too (``batch.num_subgraphs == 0``): the wrapper takes them and ``step()``
    releases noise only.  With ``max_physical_batch_size`` (:class:`BatchMemoryManager`)
    a step's batch comes as consecutive physical batches of at most that many sub-graphs:
    ``optimizer.step()`` after each keeps its clipped sum, and releases once, after the last.

    Only batches this sampler drew for the step the optimizer takes next go through the
    model in training (issue 37, finding 7): a batch drawn by another sampler, at another
    rate, for another step, or whose tensors were replaced, raises
    :class:`~ldpfast.privacy.dpsgd.DPUsageError` at ``model(batch)``, so that no batch is
    accounted at a rate it was not drawn at.  (Editing a batch's tensors in place is not
    detected.)

    Attributes
    ----------
    sampler : HeterPoisson
        The sampler of the sub-graphs (with ``sampling="nodes"``: of the central nodes only).
    optimizer : DPOptimizer
        Whose step count says which batch comes next.
    steps : int
        The planned number of steps ``T``.
    sampling : {"heterpoisson", "nodes"}
    poisson_sampling : bool
        ``False``: fixed-size batches for debugging, not private (:meth:`NodeDPEngine.make_private`).
    max_physical_batch_size : int or None
        Cap on the sub-graphs per physical batch.
    part : (int, int) or None
        ``(rank, world size)``: this rank's share of every batch (data-parallel training).
    """

    def __init__(self, sampler: HeterPoisson, optimizer: DPOptimizer, steps: int, sampling: str, *,
                 poisson_sampling: bool = True, max_physical_batch_size: int | None = None,
                 part: tuple[int, int] | None = None, seed: int | None = None):
        self.sampler = sampler
        self.optimizer = optimizer
        self.steps = steps
        self.sampling = sampling
        self.poisson_sampling = poisson_sampling
        self.max_physical_batch_size = max_physical_batch_size
        self.part = part
        self._seed = seed  # of the fixed-size draws (poisson_sampling=False); never reported
        self._issued = None  # (weakref to the batch, step, chunk, chunks, ids of its tensors)
        self._admitted: tuple[int, int, int] | None = None  # (step, chunk, chunks) of the last forward
        self._done = (-1, 0)  # (step, physical batches of it taken by the optimizer)

    @property
    def q_b(self) -> float:
        """The Poisson rate of the central nodes."""
        return self.sampler.q_b

    @property
    def expected_batch_size(self) -> float:
        """Expected number of sub-graphs per step, ``q_b * #candidates``."""
        return self.sampler.expected_batch_size

    @property
    def data(self):
        """The graph the batches are drawn from."""
        return self.sampler.data

    # ------------------------------------------------------------------ drawing
    def _centers(self, step: int):
        """The central nodes of ``step``: the Poisson draw, or with ``poisson_sampling=False``
        ``round(expected_batch_size)`` candidates drawn uniformly without replacement."""
        if self.poisson_sampling:
            return None
        import torch

        from .dpsgd.optimizer import _mix64

        cand = self.sampler.candidates
        m = min(int(cand.numel()), max(1, round(self.expected_batch_size)))
        g = torch.Generator().manual_seed(_mix64(self._seed, step) & ((1 << 63) - 1))
        idx = torch.randperm(int(cand.numel()), generator=g)[:m].sort().values
        return cand[idx.to(cand.device)]

    def _draw(self, step: int) -> SubgraphBatch:
        """This rank's share of step ``step``'s batch (not issued)."""
        from ..sampling.heterpoisson import _share

        centers = self._centers(step)
        if self.sampling == "nodes":
            from ..sampling import singleton_batch

            c = self.sampler.central(step) if centers is None else centers
            return singleton_batch(self.sampler.data, _share(c, self.part), step)
        if centers is None:
            return self.sampler.sample(step, part=self.part)
        return self.sampler.subgraphs(step, _share(centers, self.part))

    def sample(self, step: int) -> SubgraphBatch:
        """The batch of step ``step`` (the same batch every time for one seed), whole (one
        physical batch); the model takes it only when ``step`` is the optimizer's next."""
        batch = self._draw(step)
        self._issue(batch, step, 0, 1)
        return batch

    def _physical(self, batch: SubgraphBatch) -> list[SubgraphBatch]:
        m = self.max_physical_batch_size
        return [batch] if m is None else batch.split(m)

    # ------------------------------------------------------------------ provenance
    @staticmethod
    def _tensor_ids(batch) -> tuple[int, ...]:
        return tuple(id(getattr(batch, k, None)) for k in ("x", "edge_index", "batch", "ptr", "center", "y"))

    def _issue(self, batch, step: int, chunk: int, chunks: int) -> None:
        self._issued = (weakref.ref(batch), step, chunk, chunks, self._tensor_ids(batch))

    def _admit(self, batch) -> None:
        """The wrapper's guard (called at a training ``model(batch)``): refuse any batch but
        the one this sampler issued last, for the step the optimizer takes next, unedited."""
        from .dpsgd import DPUsageError

        t = self.optimizer.steps
        how = ("iterate the sampler that make_private returned (for batch in sampler: out = model(batch) ...), "
               "or take sampler.sample(optimizer.steps)")
        if batch is None:
            raise DPUsageError(f"model(x, edge_index, seg, num_subgraphs): the engine's model takes the batches of "
                               f"its sampler only (issue 37, finding 7): {how}")
        iss = self._issued
        if iss is None or iss[0]() is not batch:
            raise DPUsageError(
                f"model(batch): this batch was not drawn by the engine's sampler for step {t}, the step the "
                f"optimizer takes next (a batch from another sampler, a DataLoader, or another rate than the "
                f"planned q_b={self.q_b:g} would be accounted as if drawn at q_b; issue 37, finding 7): {how}")
        _, step, chunk, chunks, ids = iss
        if step != t:
            raise DPUsageError(f"model(batch): the batch was drawn for step {step}, the optimizer takes step {t} "
                               f"next (a batch used twice is not what the accountant counts): {how}")
        if ids != self._tensor_ids(batch):
            raise DPUsageError("model(batch): the batch's tensors were replaced after it was drawn (x, edge_index, "
                               f"batch, ptr, center or y); the accountant covers the sampler's batches only: {how}")
        done = self._done[1] if self._done[0] == t else 0
        if chunk != done:
            raise DPUsageError(f"model(batch): physical batch {chunk + 1} of {chunks} of step {t} comes after "
                               f"{done} taken by optimizer.step(); call optimizer.step() once per physical batch, "
                               "in order")
        self._admitted = (t, chunk, chunks)

    def _take_chunk(self, step: int) -> bool:
        """Called by ``optimizer.step()``: whether the last forward was a physical batch of
        ``step`` before its last (then it is counted as taken, and nothing is released)."""
        a = self._admitted
        if a is None or a[0] != step or a[1] >= a[2] - 1:
            return False
        self._done = (step, a[1] + 1)
        self._admitted = None
        return True

    def __len__(self) -> int:
        """Steps of the plan not taken yet."""
        return max(0, self.steps - self.optimizer.steps)

    def __iter__(self):
        from .dpsgd import DPUsageError

        while self.optimizer.steps < self.steps:
            t = self.optimizer.steps
            parts = self._physical(self._draw(t))
            for i, batch in enumerate(parts):
                self._issue(batch, t, i, len(parts))
                yield batch
                if self.optimizer.steps != t:
                    break  # released (e.g. noise_only_step): the next step's batch
                if i < len(parts) - 1 and self._done != (t, i + 1):
                    raise DPUsageError(
                        f"sampler: physical batch {i + 1} of {len(parts)} of step {t} was not taken; call "
                        "optimizer.step() after each physical batch (it keeps the clipped sum and releases after "
                        "the last)")
            if self.optimizer.steps == t:
                raise DPUsageError(
                    f"sampler: the batch of step {t} was not released; call optimizer.step() once per batch (the "
                    "sampler draws the batch of the step the optimizer takes next, so without a step it would "
                    "draw the same batch again)")

    def __repr__(self) -> str:
        extra = "" if self.poisson_sampling else ", poisson_sampling=False (NOT PRIVATE)"
        if self.max_physical_batch_size is not None:
            extra += f", max_physical_batch_size={self.max_physical_batch_size}"
        return (f"NodeDPSampler(sampling={self.sampling!r}, q_b={self.q_b:g}, steps={self.steps}, "
                f"taken={self.optimizer.steps}{extra})")


class BatchMemoryManager:
    """Opacus's ``BatchMemoryManager`` for node-level DP-SGD: cap the sub-graphs of each
    physical batch, keeping the logical batch (the Poisson sample of the step) and its
    accounting exact.

    Inside the ``with`` block the sampler yields every step's batch as consecutive physical
    batches of at most ``max_physical_batch_size`` whole sub-graphs
    (:meth:`~ldpfast.sampling.SubgraphBatch.split`); ``optimizer.step()`` after each clips it
    and keeps the clipped sum, and after the last adds the noise once and steps.  Per-sub-graph
    clipping makes the sum of the physical batches' clipped sums the logical batch's, so the
    release, the step count and ``epsilon`` are those of the unsplit loop (the tests compare
    them).  The same as ``make_private(..., max_physical_batch_size=m)``.

    Parameters
    ----------
    sampler : NodeDPSampler
        What :meth:`NodeDPEngine.make_private` returned.
    max_physical_batch_size : int
        >= 1.
    optimizer : DPOptimizer, optional
        The sampler's optimizer (Opacus's signature; checked if given).

    Examples
    --------
    >>> with BatchMemoryManager(sampler, max_physical_batch_size=64) as batches:  # doctest: +SKIP
    ...     for batch in batches:
    ...         optimizer.zero_grad()
    ...         subgraph_loss(model(batch), batch).backward()
    ...         optimizer.step()
    """

    def __init__(self, sampler: NodeDPSampler, max_physical_batch_size: int, optimizer=None):
        if not isinstance(sampler, NodeDPSampler):
            raise TypeError(f"sampler: expected the NodeDPSampler of make_private, got {type(sampler).__name__}")
        if optimizer is not None and optimizer is not sampler.optimizer:
            raise ValueError("optimizer: not the sampler's optimizer (pass the DPOptimizer make_private returned)")
        self.sampler = sampler
        self.max_physical_batch_size = check_int("max_physical_batch_size", max_physical_batch_size, 1)
        self._saved: int | None = None

    def __enter__(self) -> NodeDPSampler:
        self._saved = self.sampler.max_physical_batch_size
        self.sampler.max_physical_batch_size = self.max_physical_batch_size
        return self.sampler

    def __exit__(self, *exc) -> None:
        self.sampler.max_physical_batch_size = self._saved


class _NotPrivate:
    """The accountant of ``poisson_sampling=False``: fixed-size batches have no guarantee here,
    so every figure is ``eps = inf``, flagged in the report's ``model``."""

    def __init__(self, inner):
        self.inner = inner
        self.model = NOT_PRIVATE

    def epsilon(self, sigma: float, T: int, delta: float, *, method: str = "rdp", **kw) -> PrivacyReport:
        from .accountants import PrivacyReport

        return PrivacyReport(math.inf, delta, sigma, T, method, params={"poisson_sampling": False},
                             model=NOT_PRIVATE)


class NodeDPEngine:
    """Make a PyG model, its optimizer and a graph node-level differentially private
    (DP-SGD with HeterPoisson sub-graph sampling, Xiang et al.'s Algorithm 1).

    Parameters
    ----------
    accountant : {"rdp", "pld", "prv", "gdp"}
        The figure that calibrates ``sigma``, checks ``budget`` and is reported by
        :meth:`get_epsilon`: Theorem 2 with the RDP conversion (Theorem 1), the PLD of the
        same mixture (``dp_accounting``'s composition; less noise for the same ``eps``),
        our PRV accountant of the same mixture, or Gaussian DP (valid but loose; see
        :mod:`ldpfast.privacy.accountants`).
    secure_mode : bool
        Draw the noise as in :class:`~ldpfast.privacy.dpsgd.DPOptimizer` ``secure_mode``
        (seeded by ``secrets``; ``seed`` then only seeds the sampler).

    Attributes
    ----------
    module, optimizer, sampler
        What :meth:`make_private` returned (``None`` before).
    accountant : HeterPoissonAccountant or MixtureAccountant or None
        The accountant of the sampling used.
    privacy_model : str
        The neighbouring relation the guarantee holds for.

    Notes
    -----
    Defaults chosen from measurements (``docs/dpsgd_utility.md``, ``benchmarks/dpsgd_utility.py``:
    Cora, Facebook, Twitch-DE at eps 2, 4, 8, DP MLP against DP GCN / SAGE / GAT with private
    inference): ``M`` = :data:`DEFAULT_M` = 1 (best in 23 of 27 DP GNN cells);
    ``sampling="heterpoisson"`` is kept although the DP MLP (``sampling="nodes"``) won 6 of the
    9 DP cells, because the winner depended on the graph (the GNN won all of Facebook's), which
    the arguments do not tell; the document says how to check a graph.

    One engine serves one model: build a new engine (and call :meth:`load_state_dict`) to
    resume.  What keeps the loop on the accounting (issue 37, item 5): the torch optimizer
    handed over is disabled (stepping it raises :class:`~ldpfast.privacy.dpsgd.DPUsageError`);
    the model takes only the sampler's batches (:class:`NodeDPSampler`); the sub-graph
    independence check re-runs on a random fraction of the steps (``recheck_fraction``);
    the steps released never go down: within one engine a rollback to an earlier
    checkpoint keeps the count, and with ``store=`` the count is written ahead of every
    release to the store's ``"node-dp"`` record of ``(dataset, run)``, which a later engine
    reads back (:meth:`load_state_dict`).  The step count also addresses the noise, so
    keeping it also keeps a rolled-back run from drawing a step's noise twice.
    """

    def __init__(self, accountant: str = "rdp", *, secure_mode: bool = False):
        from .accountants.base import METHODS

        if accountant not in METHODS:
            raise ValueError(f"accountant: expected one of {METHODS}, got {accountant!r}")
        if not isinstance(secure_mode, bool):
            raise TypeError(f"secure_mode: expected a bool, got {type(secure_mode).__name__}")
        self.accounting_method = accountant
        self.secure_mode = secure_mode
        self.module: SubgraphGradSampleModule | None = None
        self.optimizer: DPOptimizer | None = None
        self.sampler: NodeDPSampler | None = None
        self.accountant = None
        self.privacy_model = ""
        self._plan: dict[str, Any] = {}
        self._delta: float | None = None
        self._store = None  # (store, dataset, run, params, users, eps bound, delta)
        self._high = 0  # the most steps this engine's optimizer reached (a rollback keeps the count)

    # ------------------------------------------------------------------ building
    def make_private(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, data, *,
                     noise_multiplier: float | None = None, sigma: float | None = None, max_grad_norm=0.5,
                     expected_batch_size: float | None = None, sample_rate: float | None = None,
                     epochs: float | None = None, steps: int | None = None, M: float | None = None,
                     train_mask=None, budget: tuple[float, float] | None = None, sampling: str = "heterpoisson",
                     degree_model: str = "s2_public_degrees", degree_bound: int | None = None,
                     out_degree: torch.Tensor | None = None, num_nodes: int | None = None, induced: bool = True,
                     seed: int | None = None, backend: str | None = None, check_independence: bool = True,
                     recheck_fraction: float = 0.05, clipping: str = "flat", target_unclipped_quantile: float = 0.5,
                     clipbound_learning_rate: float = 0.2, unclipped_num_std: float | None = None,
                     max_physical_batch_size: int | None = None, poisson_sampling: bool = True, store=None,
                     dataset: str | None = None, run: str | None = None,
                     ) -> tuple[SubgraphGradSampleModule, DPOptimizer, NodeDPSampler]:
        """Wrap ``model``, ``optimizer`` and ``data`` for node-level DP-SGD at a given noise.

        Parameters
        ----------
        model : torch.nn.Module
            Called as ``model(x, edge_index)``, node-level outputs; parameters in the layers
            :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule` supports (or already
            such a wrapper).  Wrapped in :class:`ldpfast.distributed.ddp.DPDDP` (under an
            initialised ``torch.distributed``): data-parallel training, each rank taking its
            share of every batch and :class:`ldpfast.distributed.ddp.DistributedDPOptimizer`
            all-reducing the clipped sums (``seed`` then required, the same on every rank).
        optimizer : torch.optim.Optimizer
            Over the model's trainable parameters (all of them, nothing else).  Disabled
            from here on: only the returned optimizer steps it.
        data : torch_geometric.data.Data
            The graph the sub-graphs are drawn from (``x``, ``y``, ``edge_index``), on any
            device; under ``"s2_public_degrees"`` the whole graph ``G`` (else give
            ``out_degree`` and ``num_nodes`` of ``G``).
        noise_multiplier : float
            Opacus's: the noise added to the clipped sum is ``N(0, (noise_multiplier * C)^2 I)``,
            > 0.  Changed (2026-11-28): it used to be the paper's ``sigma`` (half of this);
            a ``FutureWarning`` says so once per process.  Give exactly one of
            ``noise_multiplier`` and ``sigma``.
        sigma : float
            The paper's noise (noise ``N(0, (2 C sigma)^2 I)``, ``sigma = noise_multiplier / 2``),
            what the accountants take, > 0.  With ``clipping="adaptive"`` (either name) the
            accounted noise: the gradient gets more (:func:`~ldpfast.privacy.dpsgd.adaptive_grad_sigma`).
        max_grad_norm : float or sequence of float
            Per-sub-graph clipping norm ``C`` (paper: 0.5), > 0; one per trainable parameter
            with ``clipping="per_layer"``; the initial ``C`` with ``"adaptive"``.
        expected_batch_size, sample_rate : float
            Exactly one: the expected number of sub-graphs per step (``q_b`` is then
            ``min(1, expected_batch_size / #candidates)``: the number of training nodes is
            treated as public), or ``q_b`` itself in (0, 1].
        epochs, steps : float, int
            Exactly one: ``T = ceil(epochs / q_b)``, or ``T`` itself (>= 1).  The optimizer
            refuses step ``T + 1``.
        M : float, optional
            Neighbourhood multiplier, > 0 (a neighbour ``j`` joins with probability
            ``min(1, M / D_ot(j))``), not used with ``"nodes"``.  Default with
            ``"heterpoisson"``: :data:`DEFAULT_M` = 1, the setting that trained the best DP
            GNN in 23 of the 27 (dataset, eps, model) cells of the utility table
            (``docs/dpsgd_utility.md``: Cora, Facebook, Twitch-DE at eps 2, 4, 8, GCN / SAGE /
            GAT; ``M = 2`` won the other four by 0.1-0.2 points, below the noise of two
            seeds): more neighbours per sub-graph cost more noise (a larger ``sigma`` at the
            same ``eps``) than they bring.
        train_mask : bool mask or index tensor, optional
            The candidate central nodes (the sensitive training nodes); default every node.
        budget : (float, float), optional
            ``(eps, delta)``: the step that would spend more is refused
            (:class:`~ldpfast.privacy.dpsgd.BudgetExhaustedError`, nothing changed), and
            :meth:`get_epsilon` defaults to this ``delta``.
        sampling : {"heterpoisson", "nodes"}
            Sub-graphs (Alg. 2 + 3, accounted by Theorem 2), or one-node examples (naive
            DP-SGD, accounted as the Poisson-subsampled Gaussian mechanism).
        degree_model, degree_bound, out_degree, induced, backend
            As in :class:`ldpfast.sampling.HeterPoisson` (``"heterpoisson"`` only).  The
            sampler keeps ``overlap="drop"``, the only mode Theorem 2's case 1 covers.
        num_nodes : int, optional
            ``|V|`` of the whole graph for the accountant (default ``data.num_nodes``): give it
            with ``out_degree`` when ``data`` is only the training graph (inductive setting).
        seed : int, optional
            Secret seed of the sampler (``seed ^ SAMPLER_TAG``) and the noise (``seed ^
            NOISE_TAG``); ``None``: 64 fresh bits from the OS.  Never recorded in a report.
        check_independence, recheck_fraction
            As in :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule`: the sub-graph
            independence check on the first batch and on a random fraction (default 5%) of
            the later ones.
        clipping : {"flat", "per_layer", "adaptive"}
            As in :class:`~ldpfast.privacy.dpsgd.DPOptimizer` (Opacus's names).
        target_unclipped_quantile, clipbound_learning_rate, unclipped_num_std
            Adaptive clipping's settings (:class:`~ldpfast.privacy.dpsgd.DPOptimizer`).
        max_physical_batch_size : int, optional
            Cap on the sub-graphs of a physical batch (:class:`BatchMemoryManager`); the
            logical batch, the release and the accounting are unchanged.
        poisson_sampling : bool
            ``False`` (debugging only): every step takes ``round(expected_batch_size)``
            central nodes drawn uniformly without replacement.  **Not private**: the
            accountants assume Poisson sampling, so :meth:`get_epsilon` reports
            ``inf`` and the report's ``model`` (and a store's record) says why; a
            ``budget`` is refused.
        store : ldpfast.privacy.ReportStore, optional
            Where the run's spend is written ahead of every release
            (:meth:`~ldpfast.privacy.ReportStore.record_node_dp`, relation ``"node-dp"``),
            with ``dataset`` and ``run`` (non-empty names).  A run already on record
            continues its count (a warning says so); one on record under other settings is
            refused.
        dataset, run : str, optional
            The record's names, with ``store``.

        Returns
        -------
        (SubgraphGradSampleModule, DPOptimizer, NodeDPSampler)
            Call the first as ``model(batch)``; iterate the last for the batches.

        Raises
        ------
        ValueError, TypeError
            Naming the parameter (both or neither of a pair, a value out of range, an
            optimizer over other parameters, a graph the degree model refuses).
        SubgraphMixingError
            For a model with a layer that mixes sub-graphs.
        """
        sigma = _paper_sigma(noise_multiplier, sigma)
        plan = self._schedule(data, expected_batch_size, sample_rate, epochs, steps, M, train_mask, sampling,
                              degree_model, degree_bound, out_degree, num_nodes, poisson_sampling, clipping)
        opts = _options(locals())
        return self._build(model, optimizer, data, sigma, None, plan, budget, opts)

    def make_private_with_epsilon(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, data,
                                  target_epsilon: float, target_delta: float, epochs: float | None = None,
                                  max_grad_norm=0.5, *, expected_batch_size: float | None = None,
                                  sample_rate: float | None = None, steps: int | None = None,
                                  M: float | None = None, train_mask=None, sampling: str = "heterpoisson",
                                  degree_model: str = "s2_public_degrees", degree_bound: int | None = None,
                                  out_degree: torch.Tensor | None = None, num_nodes: int | None = None,
                                  induced: bool = True, seed: int | None = None, backend: str | None = None,
                                  check_independence: bool = True, recheck_fraction: float = 0.05,
                                  clipping: str = "flat", target_unclipped_quantile: float = 0.5,
                                  clipbound_learning_rate: float = 0.2, unclipped_num_std: float | None = None,
                                  max_physical_batch_size: int | None = None, poisson_sampling: bool = True,
                                  store=None, dataset: str | None = None, run: str | None = None,
                                  ) -> tuple[SubgraphGradSampleModule, DPOptimizer, NodeDPSampler]:
        """:meth:`make_private` with the smallest ``sigma`` (to 0.1%) whose ``T`` steps spend at
        most ``target_epsilon`` at ``target_delta`` under this engine's accountant.

        The optimizer refuses step ``T + 1``, so the run cannot spend more than the target;
        :meth:`get_epsilon` defaults to ``target_delta``.  The other parameters are those
        of :meth:`make_private` (``poisson_sampling=False`` calibrates as if the batches
        were Poisson samples, for a realistic noise, and reports ``inf``).

        Raises
        ------
        ValueError
            Also when the target is not reachable with ``sigma <= 1e4``.
        """
        eps = check_eps("target_epsilon", target_epsilon)
        delta = check_prob("target_delta", target_delta, open_low=True, open_high=True)
        plan = self._schedule(data, expected_batch_size, sample_rate, epochs, steps, M, train_mask, sampling,
                              degree_model, degree_bound, out_degree, num_nodes, poisson_sampling, clipping)
        opts = _options(locals())
        made = self._build(model, optimizer, data, None, (eps, delta), plan, None, opts)
        self._delta = delta
        return made

    @staticmethod
    def _schedule(data, expected_batch_size, sample_rate, epochs, steps, M, train_mask, sampling, degree_model,
                  degree_bound, out_degree, num_nodes, poisson_sampling=True, clipping="flat") -> dict[str, Any]:
        """The checked plan: what the accountant depends on, and ``T``."""
        from .dpsgd.optimizer import CLIPPINGS

        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling: expected one of {SAMPLINGS}, got {sampling!r}")
        if not isinstance(poisson_sampling, bool):
            raise TypeError(f"poisson_sampling: expected a bool, got {type(poisson_sampling).__name__}")
        if clipping not in CLIPPINGS:
            raise ValueError(f"clipping: expected one of {CLIPPINGS}, got {clipping!r}")
        n = int(data.num_nodes)
        if sampling == "nodes":
            for name, v in (("M", M), ("degree_bound", degree_bound), ("out_degree", out_degree)):
                if v is not None:
                    raise ValueError(f"{name}: not used with sampling='nodes' (one-node examples read no edge); "
                                     "leave it None")
            if degree_model != "s2_public_degrees":
                raise ValueError("degree_model: not used with sampling='nodes'; leave the default")
            degree_model = None
        else:
            if M is None:  # the measured best (docs/dpsgd_utility.md): M = 1 in 23 of 27 DP cells
                M = DEFAULT_M
            M = check_real("M", M, 0.0)
            if M <= 0:
                raise ValueError(f"M: expected a finite number > 0, got {M}")
            degree_model, degree_bound = check_degree_model(degree_model, degree_bound)
        num_nodes = n if num_nodes is None else check_int("num_nodes", num_nodes, max(n, 2))
        if (expected_batch_size is None) == (sample_rate is None):
            raise ValueError("expected_batch_size, sample_rate: give exactly one (the expected number of sub-graphs "
                             "per step, or the rate q_b of the central nodes)")
        if sample_rate is not None:
            q_b = check_prob("sample_rate", sample_rate, open_low=True)
        else:
            ebs = check_real("expected_batch_size", expected_batch_size, 1e-12)
            if train_mask is None:
                n_cand = n
            else:
                from ..sampling.heterpoisson import _node_set

                n_cand = int(_node_set("train_mask", train_mask, n).sum())
            if n_cand == 0:
                raise ValueError("train_mask: no candidate central node")
            q_b = min(1.0, ebs / n_cand)
        if (epochs is None) == (steps is None):
            raise ValueError("epochs, steps: give exactly one (T = ceil(epochs / q_b), or T)")
        if steps is not None:
            T = check_int("steps", steps, 1)
        else:
            T = max(1, math.ceil(check_real("epochs", epochs, 1e-9) / q_b - 1e-9))
        return {"sampling": sampling, "q_b": q_b, "M": M, "num_nodes": num_nodes, "degree_model": degree_model,
                "degree_bound": degree_bound, "T": T, "poisson_sampling": poisson_sampling, "clipping": clipping}

    @staticmethod
    def _accountant(plan: dict[str, Any]):
        from .accountants import HeterPoissonAccountant, MixtureAccountant

        q_b = plan["q_b"]
        if plan["sampling"] == "nodes":
            mix = ([0.0, 0.5], [1 - q_b, q_b]) if q_b < 1 else ([0.5], [1.0])
            return MixtureAccountant(*mix, model=NODES_PRIVACY_MODEL)
        # S2: D_ot ranges over the whole graph's out-degrees, hence its |V|
        return HeterPoissonAccountant(q_b, plan["M"], plan["num_nodes"], degree_model=plan["degree_model"],
                                      degree_bound=plan["degree_bound"])

    def _build(self, model, optimizer, data, sigma, target, plan, budget, o):
        """Check the model, the optimizer and the options, build the sampler (it refuses
        graphs outside the degree model), then calibrate ``sigma`` for ``target`` (the slow
        part) if not given, then the optimizer, then read the store's record."""
        import torch

        from ..sampling import HeterPoisson
        from .dpsgd import SubgraphGradSampleModule

        if self.module is not None:
            raise RuntimeError("NodeDPEngine: this engine already made a model private; use one engine per model "
                               "(a new engine and load_state_dict() to resume)")
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        ddp = _dpddp(model)
        if ddp is not None:
            model = ddp.module
        inner = model._module if isinstance(model, SubgraphGradSampleModule) else model
        trainable = {id(p) for p in inner.parameters() if p.requires_grad}
        in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if in_opt != trainable:  # checked before the wrapper hooks the model
            raise ValueError(f"optimizer: must hold exactly the model's trainable parameters (it holds "
                             f"{len(in_opt & trainable)} of the model's {len(trainable)}, and {len(in_opt - trainable)} "
                             "others): build it as torch.optim.X(model.parameters(), ...) on the model you pass")
        if o["max_physical_batch_size"] is not None:
            o["max_physical_batch_size"] = check_int("max_physical_batch_size", o["max_physical_batch_size"], 1)
        if not plan["poisson_sampling"] and budget is not None:
            raise ValueError("budget: poisson_sampling=False is not private (no accountant covers fixed-size "
                             "batches); drop the budget, or sample with Poisson")
        store = self._check_store(o["store"], o["dataset"], o["run"])
        rank, world = (0, 1)
        if ddp is not None:
            rank, world = ddp.dp_world()
            if world > 1 and o["seed"] is None:
                raise ValueError("seed: required for data-parallel training (every rank must draw the same batches "
                                 "and rank 0 the noise): pass the same secret seed on every rank")
        gsm = model if inner is not model else SubgraphGradSampleModule(
            model, check_independence=o["check_independence"], recheck_fraction=o["recheck_fraction"])
        seed = resolve_seed(o["seed"])
        heter = plan["sampling"] == "heterpoisson"
        # "nodes": the sampler only draws the central nodes (M plays no part in central())
        sampler = HeterPoisson(data, plan["q_b"], plan["M"] if heter else 1.0, seed=seed ^ SAMPLER_TAG,
                               train_nodes=o["train_mask"], overlap="drop", induced=o["induced"],
                               backend=o["backend"], num_steps=plan["T"],
                               out_degree=o["out_degree"] if heter else None,
                               degree_model=plan["degree_model"] if heter else "s2_public_degrees",
                               degree_bound=plan["degree_bound"])
        acc = self._accountant(plan)
        if sigma is None:
            sigma = acc.calibrate_sigma(*target, plan["T"], method=self.accounting_method)
        if not plan["poisson_sampling"]:
            acc = _NotPrivate(acc)
        kw = {"sigma": sigma, "max_grad_norm": o["max_grad_norm"], "expected_batch_size": sampler.expected_batch_size,
              "seed": seed ^ NOISE_TAG, "accountant": acc, "max_steps": plan["T"], "budget": budget,
              "accounting_method": self.accounting_method, "clipping": plan["clipping"],
              "target_unclipped_quantile": o["target_unclipped_quantile"],
              "clipbound_learning_rate": o["clipbound_learning_rate"], "unclipped_num_std": o["unclipped_num_std"]}
        if ddp is not None:
            C = o["max_grad_norm"]
            ddp.dp_check_agreement(seed=seed, q_b=plan["q_b"], M=plan["M"] if heter else 0.0,
                                   C=C if isinstance(C, (int, float)) else math.sqrt(sum(c * c for c in C)),
                                   sigma=sigma, T=plan["T"])
            if self.secure_mode:
                raise ValueError("secure_mode: not supported with data-parallel training yet")
            opt = ddp.dp_optimizer(optimizer, gsm, **kw)
        else:
            from .dpsgd import DPOptimizer

            opt = DPOptimizer(optimizer, gsm, secure_mode=self.secure_mode, **kw)
        opt.disable_direct_steps()
        if budget is not None:
            self._delta = opt.budget[1]
        node_sampler = NodeDPSampler(sampler, opt, plan["T"], plan["sampling"],
                                     poisson_sampling=plan["poisson_sampling"],
                                     max_physical_batch_size=o["max_physical_batch_size"],
                                     part=(rank, world) if world > 1 else None, seed=seed ^ _FIXED_TAG)
        gsm._batch_guard = node_sampler._admit
        opt.batch_source = node_sampler
        self.module, self.optimizer, self.accountant = gsm, opt, acc
        self.sampler = node_sampler
        self.privacy_model = acc.model if not plan["poisson_sampling"] else (
            NODES_PRIVACY_MODEL if not heter else sampler.privacy_model)
        self._plan = plan
        opt.before_release.append(self._note_release)
        if store is not None:
            self._bind_store(store, o["dataset"], o["run"], int(sampler.candidates.numel()), target, budget)
        return gsm, opt, node_sampler

    # ------------------------------------------------------------------ the store
    @staticmethod
    def _check_store(store, dataset, run):
        if store is None:
            if dataset is not None or run is not None:
                raise ValueError("dataset, run: name the run's record in a store; give store= too (a "
                                 "ldpfast.privacy.ReportStore)")
            return None
        if not callable(getattr(store, "record_node_dp", None)):
            raise TypeError(f"store: expected a ldpfast.privacy.ReportStore, got {type(store).__name__}")
        for name, v in (("dataset", dataset), ("run", run)):
            if not isinstance(v, str) or not v:
                raise ValueError(f"{name}: required with store= (a non-empty str naming the record of this run's "
                                 f"spend), got {v!r}")
        return store

    def _record_params(self) -> dict[str, Any]:
        """What a run's steps are accounted under (never a seed)."""
        opt = self.optimizer
        keys = ("sampling", "q_b", "M", "num_nodes", "degree_model", "degree_bound", "poisson_sampling", "clipping")
        return {**{k: self._plan[k] for k in keys}, "sigma": opt.sigma, "privacy_model": self.privacy_model}

    def _bind_store(self, store, dataset, run, users, target, budget) -> None:
        opt = self.optimizer
        params = self._record_params()
        if not self._plan["poisson_sampling"]:
            bound = (math.inf, None)
        elif target is not None:
            bound = target  # the plan's T steps, hence any prefix of them
        elif budget is not None:
            bound = opt.budget
        else:
            bound = (None, None)
        rec = store.node_dp_spent(dataset, run)
        if rec is not None and rec["steps"] > 0:
            if rec["params"] != json.loads(json.dumps(params, sort_keys=True, default=str)):
                raise ValueError(f"run: {run!r} on {dataset!r} has {rec['steps']} steps on record under other "
                                 f"settings ({rec['params']}); one accountant covers all of a run's steps: use a "
                                 "new run name (the users' node-DP spend is then the sum over runs)")
            warnings.warn(f"NodeDPEngine: the store records {rec['steps']} steps of run {run!r} on {dataset!r}; the "
                          f"count continues from there (their spend is this run's too; with a plan of "
                          f"{self._plan['T']} steps, {max(0, self._plan['T'] - rec['steps'])} are left)",
                          stacklevel=3)
            opt.steps = max(opt.steps, int(rec["steps"]))
            self._high = max(self._high, opt.steps)
        self._store = (store, dataset, run, params, users, bound)

    def _note_release(self, steps_after: int) -> None:
        """Before a release: remember the count, and write it to the store (write-ahead: if
        the write fails the step is refused, nothing released)."""
        if self._store is not None:
            store, dataset, run, params, users, (eps, delta) = self._store
            store.record_node_dp(dataset, run, steps=steps_after, params=params, eps=eps, delta=delta, users=users)
        self._high = max(self._high, steps_after)

    def _floor(self) -> int:
        """Steps already released by this run: what this engine reached, and the store's record."""
        floor = self._high
        if self._store is not None:
            store, dataset, run = self._store[:3]
            rec = store.node_dp_spent(dataset, run)
            floor = max(floor, int(rec["steps"]) if rec is not None else 0)
        return floor

    # ------------------------------------------------------------------ accounting
    def _made(self) -> DPOptimizer:
        if self.optimizer is None:
            raise RuntimeError("NodeDPEngine: call make_private() or make_private_with_epsilon() first")
        return self.optimizer

    @property
    def steps(self) -> int:
        """DP steps taken (as the optimizer counted them)."""
        return self._made().steps

    @property
    def noise_multiplier(self) -> float:
        """Opacus's noise multiplier of the gradient, ``noise std / C`` (``2 sigma``, or more
        with adaptive clipping).  Changed (2026-11-28): it used to be the paper's ``sigma``
        (:attr:`sigma`)."""
        return self._made().noise_multiplier

    @property
    def sigma(self) -> float:
        """The accounted noise in the paper's units (noise std ``2 C sigma``)."""
        return self._made().sigma

    def get_privacy_report(self, delta: float | None = None) -> PrivacyReport:
        """The guarantee of the steps taken (``eps``, the accountant's details, the model);
        with a store, also written to the run's record.

        Parameters
        ----------
        delta : float, optional
            In (0, 1); default the target (or ``budget``) delta.
        """
        delta = self._delta if delta is None else delta
        if delta is None:
            raise ValueError("delta: required (no target_delta or budget to take it from)")
        opt = self._made()
        rep = opt.epsilon(delta, method=self.accounting_method)
        if self._store is not None and opt.steps > 0:
            store, dataset, run, params, users, _ = self._store
            store.record_node_dp(dataset, run, steps=opt.steps, params=params, eps=rep.eps, delta=rep.delta,
                                 users=users)
        return rep

    def get_epsilon(self, delta: float | None = None) -> float:
        """``eps`` at ``delta`` of the steps actually taken (0 before the first; ``inf`` with
        ``poisson_sampling=False``), under this engine's accountant
        (:meth:`get_privacy_report` for the details)."""
        return self.get_privacy_report(delta).eps

    # ------------------------------------------------------------------ resuming
    def state_dict(self) -> dict[str, Any]:
        """What a resumed run needs: the model's parameters, the optimizer (its step count and
        the wrapped optimizer's state) and the plan the steps were accounted under.

        Nothing in it rebuilds the noise or the batches (no seed, no generator state): the
        engine made private again with the same ``seed`` continues the same trajectory, with
        another seed (or none) fresh batches and noise, as private.  The parameters are the
        private output itself.
        """
        opt = self._made()
        return {"model": self.module._module.state_dict(), "optimizer": opt.state_dict(),
                "plan": dict(self._plan),
                "accountant": self.accounting_method}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict` on an engine made private with the same settings:
        the step count (so :meth:`get_epsilon` and the limits include the steps taken before),
        the parameters and the optimizer; the sampler and the noise continue with step
        ``steps`` under this engine's seed (the saved run's trajectory when it is the same
        seed).  A ``"sampler_seed"`` entry of an older state is ignored.

        The count never goes down (issue 37, finding 9): a state older than the steps this
        engine released, or than the store's record of the run, loads its parameters but
        keeps the larger count (with a warning): those steps were released and are spent,
        and continuing from the larger count also keeps their noise from being drawn again.

        Raises
        ------
        ValueError
            When the state was accounted under another sampling, ``q_b``, ``M``, graph size,
            degree model, ``sigma`` or ``max_grad_norm`` (one accountant covers all steps),
            belongs to another architecture, or lacks a key; nothing is changed then.
        """
        from .dpsgd.optimizer import _clip_key

        opt = self._made()
        missing = {"model", "optimizer", "plan"} - set(state_dict)
        if missing:
            raise ValueError(f"state_dict: missing {sorted(missing)} (expected NodeDPEngine.state_dict())")
        old = state_dict["plan"]
        for k in _ACCOUNTED:
            if old.get(k, _PLAN_DEFAULTS.get(k)) != self._plan[k]:
                raise ValueError(f"{k}: the state's {state_dict['optimizer'].get('steps')} steps were accounted with "
                                 f"{k}={old.get(k)!r}, this engine plans {k}={self._plan[k]!r}; make the engine "
                                 "private with the same settings to resume")
        for k in ("sigma", "max_grad_norm"):  # checked before anything is loaded
            theirs_k = state_dict["optimizer"].get(k, math.nan)
            if _clip_key(theirs_k) != _clip_key(getattr(opt, k)):
                raise ValueError(f"{k}: the state was taken at {k}={theirs_k}, this engine "
                                 f"uses {getattr(opt, k)}; the accountant assumes one {k} for all steps: make the "
                                 "engine private with the same settings (same target, epochs and batch size)")
        mine = self.module._module.state_dict()
        theirs = state_dict["model"]
        if set(mine) != set(theirs) or any(tuple(mine[k].shape) != tuple(theirs[k].shape) for k in mine):
            raise ValueError("state_dict['model']: not a state of this model (other parameter names or shapes): "
                             "resume with the same architecture")
        floor = self._floor()
        opt.load_state_dict(state_dict["optimizer"])  # validates before it changes anything
        self.module._module.load_state_dict(theirs)
        if opt.steps < floor:
            warnings.warn(f"NodeDPEngine.load_state_dict: the state holds {opt.steps} steps, but {floor} were "
                          f"released{' (the store records them)' if self._store is not None else ''}; the count "
                          f"stays at {floor}: the later steps' spend is not undone by loading an older state",
                          stacklevel=2)
            opt.steps = floor
        self._high = max(self._high, opt.steps)


_FIXED_TAG = 0xF1ED  # the fixed-size draws of poisson_sampling=False: their own stream
_PLAN_DEFAULTS = {"poisson_sampling": True, "clipping": "flat"}  # what an older state's plan lacks
_NM_WARNED = False


def _paper_sigma(noise_multiplier, sigma) -> float:
    """The paper's ``sigma`` from exactly one of Opacus's ``noise_multiplier`` (``2 sigma``)
    and ``sigma``; warns once per process that ``noise_multiplier`` changed meaning."""
    global _NM_WARNED
    if (noise_multiplier is None) == (sigma is None):
        raise ValueError("noise_multiplier, sigma: give exactly one (noise_multiplier: Opacus's, noise std = "
                         "noise_multiplier * max_grad_norm; sigma: the paper's, noise std = 2 * max_grad_norm * sigma)")
    if sigma is not None:
        return check_eps("sigma", sigma)
    nm = check_eps("noise_multiplier", noise_multiplier)
    if not _NM_WARNED:
        _NM_WARNED = True
        warnings.warn("NodeDPEngine: noise_multiplier now means what it means in Opacus (noise std = noise_multiplier "
                      "* max_grad_norm); until 2026-11-28 it was the paper's sigma (noise std = 2 * max_grad_norm * "
                      "sigma), half of it. Pass sigma= for the paper's units", FutureWarning, stacklevel=3)
    return nm / 2.0


_OPTIONS = ("max_grad_norm", "train_mask", "out_degree", "induced", "seed", "backend", "check_independence",
            "recheck_fraction", "target_unclipped_quantile", "clipbound_learning_rate", "unclipped_num_std",
            "max_physical_batch_size", "store", "dataset", "run")


def _options(args: dict[str, Any]) -> dict[str, Any]:
    """The keywords of make_private that _build uses."""
    return {k: args[k] for k in _OPTIONS}


def _dpddp(model):
    """The :class:`ldpfast.distributed.ddp.DPDDP` wrapper, if ``model`` is one (recognised by
    its marker: the engine does not import ``torch.distributed`` code, which imports it)."""
    return model if getattr(type(model), "_ldp_dpddp", False) else None
