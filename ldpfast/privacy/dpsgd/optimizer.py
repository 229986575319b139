"""The DP optimizer of node-level DP-SGD: clip per sub-graph, add Gaussian noise, step.

Xiang, Wang and Wang (IEEE S&P 2024), Algorithm 1 lines 6-10.  The per-sub-graph clipping is
:mod:`.clipping`; the accountant of ``sigma`` is
:class:`ldpfast.privacy.accountants.HeterPoissonAccountant`.  The Gaussian noise,
``N(0, (2 C sigma)^2)`` per coordinate and per step, is drawn where the parameters are, by a
generator there (the CPU's, or the GPU's in one launch for all parameters: no host work
proportional to the model, no copy, no sync) seeded for every step from the optimizer's seed
and the step count.  Changed in this version: GPU noise used to be the CPU generator's bits copied
to the device; a seed no longer gives the same noise on the CPU and on a GPU (the law and the
calibration are unchanged).  Changed (2026-11-27): the CPU generator used to be seeded once
and its state saved in :meth:`DPOptimizer.state_dict`, so a checkpoint rebuilt the noise; it
is now reseeded per step too, and no state holds a seed or a generator state.

Accounting follows the steps actually taken: the optimizer counts every release
(``steps``, noise-only steps included), :meth:`DPOptimizer.epsilon` asks the bound
accountant for exactly that many steps, a step past ``max_steps`` or past an ``(eps,
delta)`` budget is refused (:class:`BudgetExhaustedError`, nothing changed), and
:meth:`DPOptimizer.state_dict` carries the count so that a resumed run is accounted with
all its steps.

A release also needs per-sub-graph gradients: :meth:`DPOptimizer.pre_step` refuses (before
anything changes) a step that follows no training forward and backward through the wrapper
(:meth:`SubgraphGradSampleModule.check_release`), which used to release noise only.
:class:`ldpfast.privacy.NodeDPEngine` builds this optimizer, the wrapper and the sampler in
one call, and disables the torch optimizer it wraps (:meth:`DPOptimizer.disable_direct_steps`).

Clipping (``clipping=``), as Opacus: ``"flat"`` (one ``C`` for the whole per-sub-graph
gradient), ``"per_layer"`` (one ``C_k`` per trainable parameter; the noise is that of the
total ``sqrt(sum C_k^2)``, which bounds every clipped gradient), and ``"adaptive"`` (Andrew,
Thakkar, McMahan and Ramaswamy 2021, "Differentially private learning with adaptive
clipping": ``C`` follows a target quantile of the per-sub-graph norms through a noisy count,
whose privacy cost is accounted, :class:`DPOptimizer`).

Units: ``sigma`` is the paper's (noise ``N(0, (2 C sigma)^2)``); :attr:`DPOptimizer.noise_multiplier`
is Opacus's (noise ``N(0, (noise_multiplier C)^2)``), ``2 sigma``.
"""
from __future__ import annotations

import math
import secrets
from typing import Any

import torch

from ..._checks import check_eps, check_int, check_prob, check_real
from ...rng import resolve_seed
from ..accountants.base import METHODS, PrivacyReport
from .clipping import ClipStats, DPUsageError, SubgraphGradSampleModule

__all__ = ["CLIPPINGS", "BudgetExhaustedError", "DPOptimizer", "adaptive_grad_sigma", "gaussian_noise_std"]

CLIPPINGS = ("flat", "per_layer", "adaptive")
"""Clipping modes of :class:`DPOptimizer` (Opacus's names)."""

_COUNT_TAG = 0xC0417  # the adaptive count's noise: its own stream, so the gradient noise bits are unchanged

_BUDGET_SEARCH_MAX = 10**9
"""Step counts beyond this are not searched: a budget that allows more is unbounded in practice."""


class BudgetExhaustedError(RuntimeError):
    """A DP step was refused: the steps already accounted reach ``max_steps`` or the
    ``(eps, delta)`` budget of the :class:`DPOptimizer`.  Nothing was changed."""


class DPOptimizer:
    """Opacus-style wrapper: clip per sub-graph, add Gaussian noise, then step (Alg. 1 l. 6-10).

    Parameters
    ----------
    optimizer : torch.optim.Optimizer
        Over the wrapped model's parameters.
    module : SubgraphGradSampleModule
        The wrapped model (source of the per-sub-graph norms).
    sigma : float
        Noise in the paper's units (clip norm 0.5): the noise added to the clipped sum is
        ``N(0, (2 C sigma)^2 I)``, so that ``sigma`` is what
        :class:`ldpfast.privacy.accountants.HeterPoissonAccountant` accounts for.  > 0.
    max_grad_norm : float or sequence of float
        Clipping norm ``C`` (paper: 0.5), > 0; with ``clipping="per_layer"`` one ``C_k > 0``
        per trainable parameter (``model.parameters()`` order); with ``"adaptive"`` the
        initial ``C``.
    expected_batch_size : float, optional
        If given (``q_b * #candidates``, Opacus' convention), the noisy sum is divided by it
        (``loss_reduction="mean"``); otherwise the noisy sum itself is the gradient, as in
        Alg. 1 line 10.  Dividing by the *expected*, not the realised, number of sub-graphs
        keeps the update a post-processing of the noisy sum.
    seed : int, optional
        Seed of the noise (``None``: from the OS).  Whoever knows it can rebuild the
        noise and subtract it, so keep it secret: no report, ledger entry or
        :meth:`state_dict` records it, nor any generator state.  Every step's noise comes
        from a generator on the parameters' device (the CPU's for CPU parameters) seeded with
        a 64-bit mix of ``seed`` and the step count (:attr:`steps`), so the noise of step
        ``t`` depends on ``(seed, t)`` only: a run resumed from :meth:`state_dict` with the
        same seed continues it without repeating a step's noise, and one resumed with
        another seed (or none) draws fresh noise, as private.  CPU and GPU generators give
        different bits.
    secure_mode : bool
        Draw each noise coordinate as the normalised sum of 4 Gaussians from a generator
        seeded by ``secrets`` (Opacus' mitigation of floating-point attacks on Gaussian
        sampling, Holohan & Braghin 2021; on a GPU, reseeded from ``secrets`` every step);
        ignores ``seed``.
    accountant : HeterPoissonAccountant or MixtureAccountant, optional
        The accountant of the sampling actually used (anything with ``epsilon(sigma, T,
        delta, method=...)``): :meth:`epsilon` reports the steps taken with it, and
        ``budget`` needs it.
    max_steps : int, optional
        The planned number of steps, >= 1: the step after ``max_steps`` steps is refused.
    budget : (float, float), optional
        ``(eps, delta)``: a step is refused once one more would spend more than ``eps`` at
        ``delta`` under ``accountant`` (``accounting_method``).  The largest allowed number
        of steps (``budget_steps``) is found once, here, by a doubling and bisection search
        over ``T`` (about ``2 log2 T`` accountant calls).
    accounting_method : {"rdp", "pld", "prv", "gdp"}
        Default method of :meth:`epsilon` and the method of ``budget``.
    clipping : {"flat", "per_layer", "adaptive"}
        How the per-sub-graph gradients are clipped (module docstring).  With
        ``"adaptive"``, ``sigma`` is the noise the accountant sees: the gradient noise is
        the larger ``grad_sigma = (sigma^-2 - unclipped_num_std^-2)^-1/2``
        (:func:`adaptive_grad_sigma`), so that the gradient and the count together are the
        accounted mechanism (Andrew et al. 2021, Theorem 1, in node-level units: a node
        moves the centred count ``sum_b (1[||g_b|| <= C] - 1/2)`` by at most 1/2 as a
        central node and by at most ``k`` as a peripheral node of ``k`` sub-graphs, exactly
        as it moves the clipped sum in paper units, so the pair is the same
        mixture-of-Gaussians mechanism at noise ``(grad_sigma^-2 + unclipped_num_std^-2)^-1/2 =
        sigma``).  Needs ``expected_batch_size``.
    target_unclipped_quantile : float
        ``"adaptive"``: the quantile ``gamma`` in (0, 1) of the per-sub-graph norms that
        ``C`` tracks (Opacus's name; default 0.5, the median).
    clipbound_learning_rate : float
        ``"adaptive"``: ``eta > 0`` of the geometric update ``C <- C exp(-eta (b - gamma))``,
        ``b`` the noisy fraction of unclipped sub-graphs (default 0.2).
    unclipped_num_std : float, optional
        ``"adaptive"``: standard deviation of the noise on the centred count, > ``sigma``
        (default ``expected_batch_size / 20``, Andrew et al.'s recommendation).
    min_clipbound, max_clipbound : float
        ``"adaptive"``: ``C`` stays in ``[min_clipbound, max_clipbound]`` (defaults 1e-6
        and 1e6).

    Attributes
    ----------
    steps : int
        DP releases made so far (:meth:`step`, :meth:`noise_only_step` and direct
        :meth:`pre_step` calls), restored by :meth:`load_state_dict`.
    budget_steps : int or None
        Steps allowed by ``budget``.
    clip_bound : float
        The clipping norm of the next step: ``C``, the total ``sqrt(sum C_k^2)`` per layer,
        or the current adaptive ``C``.
    grad_sigma : float
        The gradient's noise in paper units (``sigma`` except with adaptive clipping).

    Notes
    -----
    A resumed run must load the optimizer's :meth:`state_dict` (its step count) and sample
    from step ``steps`` on (``sampler.sample(t)`` for ``t`` in ``range(opt.steps, T)``):
    sampling step ``t`` again gives the same batch, which the accountant does not allow for;
    the noise of step ``t`` is drawn from ``(seed, t)``, so the step count also keeps a step's
    noise from being drawn twice.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, module: SubgraphGradSampleModule, *, sigma: float,
                 max_grad_norm=0.5, expected_batch_size: float | None = None,
                 seed: int | None = None, secure_mode: bool = False, accountant: Any = None,
                 max_steps: int | None = None, budget: tuple[float, float] | None = None,
                 accounting_method: str = "rdp", clipping: str = "flat", target_unclipped_quantile: float = 0.5,
                 clipbound_learning_rate: float = 0.2, unclipped_num_std: float | None = None,
                 min_clipbound: float = 1e-6, max_clipbound: float = 1e6):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(module, SubgraphGradSampleModule):
            raise TypeError("module: expected a SubgraphGradSampleModule")
        self.optimizer = optimizer
        self.module = module
        self.sigma = check_eps("sigma", sigma)
        if clipping not in CLIPPINGS:
            raise ValueError(f"clipping: expected one of {CLIPPINGS}, got {clipping!r}")
        self.clipping = clipping
        if expected_batch_size is not None:
            expected_batch_size = check_real("expected_batch_size", expected_batch_size, 1e-12)
        self.expected_batch_size = expected_batch_size
        self.max_grad_norm = _check_clip(max_grad_norm, clipping, module)
        self.clip_bound = (math.sqrt(sum(c * c for c in self.max_grad_norm)) if clipping == "per_layer"
                           else self.max_grad_norm)
        self.grad_sigma = self.sigma
        self.adaptive: dict[str, float] | None = None
        if clipping == "adaptive":
            if expected_batch_size is None:
                raise ValueError("expected_batch_size: required with clipping='adaptive' (the noisy count of "
                                 "unclipped sub-graphs is divided by it)")
            std = expected_batch_size / 20.0 if unclipped_num_std is None else unclipped_num_std
            std = check_eps("unclipped_num_std", std)
            lo, hi = check_eps("min_clipbound", min_clipbound), check_eps("max_clipbound", max_clipbound)
            if lo > hi:
                raise ValueError(f"min_clipbound, max_clipbound: expected min <= max, got {lo} > {hi}")
            self.adaptive = {
                "target_unclipped_quantile": check_prob("target_unclipped_quantile", target_unclipped_quantile,
                                                        open_low=True, open_high=True),
                "clipbound_learning_rate": check_eps("clipbound_learning_rate", clipbound_learning_rate),
                "unclipped_num_std": std, "min_clipbound": lo, "max_clipbound": hi}
            self.grad_sigma = adaptive_grad_sigma(self.sigma, std)
            self.clip_bound = min(hi, max(lo, self.clip_bound))
        self.secure_mode = bool(secure_mode)
        self.generator = torch.Generator()  # the CPU noise's; reseeded at every step (_cpu_noises)
        seed = None if secure_mode else resolve_seed(seed)
        self._seed = seed  # every step's generator is reseeded from it (_step_seed); never in state_dict
        self._device_gens: dict[torch.device, torch.Generator] = {}
        self.steps = 0
        self.last_stats: ClipStats | None = None
        if accountant is not None and not callable(getattr(accountant, "epsilon", None)):
            raise TypeError(f"accountant: expected an accountant with epsilon(sigma, T, delta) (e.g. "
                            f"HeterPoissonAccountant), got {type(accountant).__name__}")
        self.accountant = accountant
        if accounting_method not in METHODS:
            raise ValueError(f"accounting_method: expected one of {METHODS}, got {accounting_method!r}")
        self.accounting_method = accounting_method
        self.max_steps = None if max_steps is None else check_int("max_steps", max_steps, 1)
        # physical batches of one logical batch (BatchMemoryManager): set by the sampler
        self.batch_source = None
        self._acc: list[torch.Tensor] | None = None  # the clipped sums of the chunks so far
        self._acc_stats: list[ClipStats] = []  # and their norms
        # called with the step count a release makes, before anything is released (a store's write-ahead)
        self.before_release: list = []
        self.budget: tuple[float, float] | None = None
        self.budget_steps: int | None = None
        if budget is not None:
            if accountant is None:
                raise ValueError("budget: needs the accountant of the sampling used (accountant=...)")
            if not isinstance(budget, (tuple, list)) or len(budget) != 2:
                raise TypeError(f"budget: expected a pair (eps, delta), got {budget!r}")
            self.budget = (check_eps("budget eps", budget[0]),
                           check_prob("budget delta", budget[1], open_low=True, open_high=True))
            self.budget_steps = self._steps_within_budget()

    def disable_direct_steps(self) -> None:
        """Make ``step()`` of the wrapped torch optimizer raise :class:`DPUsageError` unless
        this optimizer takes it (:class:`ldpfast.privacy.NodeDPEngine` calls this): stepped
        by itself it would apply the raw, unclipped, noise-free gradient, a release no
        accountant covers (issue 37, finding 6).  A step pre-hook, so schedulers built on
        it and ``type(opt).step(opt)`` are refused too."""
        opt = self.optimizer
        if getattr(opt, "_ldp_guarded", False):
            return
        opt._ldp_guarded = True
        opt._ldp_releasing = 0

        def refuse(o, args, kwargs):
            if not getattr(o, "_ldp_releasing", 0):
                raise DPUsageError(
                    f"{type(o).__name__}.step(): this optimizer was handed to node-level DP-SGD (NodeDPEngine."
                    "make_private) and is disabled: stepping it directly would apply the raw gradient, not "
                    "clipped per sub-graph and without noise, which no accountant covers. Call step() on the "
                    "DPOptimizer that make_private returned (model, optimizer, sampler = engine.make_private(...); "
                    "optimizer.step()); nothing was changed")

        opt.register_step_pre_hook(refuse)

    def _inner_step(self):
        """The wrapped optimizer's step, let through the guard of :meth:`disable_direct_steps`."""
        opt = self.optimizer
        opt._ldp_releasing = getattr(opt, "_ldp_releasing", 0) + 1
        try:
            return opt.step()
        finally:
            opt._ldp_releasing -= 1

    # ------------------------------------------------------------------ accounting
    def _steps_within_budget(self) -> int:
        """Largest ``T`` with ``epsilon(T) <= eps``: doubling, then bisection.

        Valid whatever the accountant: the ``T`` returned is one whose figure was computed
        and found within the budget (the bisection keeps ``ok(lo)``), and the first
        ``t <= T`` steps of a run are a post-processing of its ``T`` steps, so every prefix
        is within the budget too.  Finding the *largest* such ``T`` needs ``epsilon(T)``
        non-decreasing, which every accountant here is (issue 37, finding 16; tested)."""
        eps, delta = self.budget

        def ok(T):
            return self.accountant.epsilon(self.sigma, T, delta, method=self.accounting_method).eps <= eps

        if not ok(1):
            return 0
        lo, hi = 1, 2
        while ok(hi):
            lo, hi = hi, 2 * hi
            if hi > _BUDGET_SEARCH_MAX:
                return _BUDGET_SEARCH_MAX
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if ok(mid) else (lo, mid)
        return lo

    @property
    def steps_left(self) -> int | None:
        """Steps still allowed by ``max_steps`` and ``budget`` (``None``: no limit set)."""
        limits = [v for v in (self.max_steps, self.budget_steps) if v is not None]
        return max(0, min(limits) - self.steps) if limits else None

    def _check_budget(self):
        left = self.steps_left
        if left is None or left > 0:
            return
        why = []
        if self.max_steps is not None and self.steps >= self.max_steps:
            why.append(f"max_steps={self.max_steps}")
        if self.budget_steps is not None and self.steps >= self.budget_steps:
            why.append(f"the budget (eps={self.budget[0]:g}, delta={self.budget[1]:g}) at sigma={self.sigma:g} "
                       f"allows {self.budget_steps} ({self.accounting_method})")
        raise BudgetExhaustedError(
            f"DPOptimizer: step {self.steps + 1} refused, parameters and gradients unchanged: {self.steps} steps "
            f"have been accounted, the most allowed by {' and by '.join(why)}. Stop here (epsilon(delta) reports the {self.steps} "
            "steps taken), or plan a new run with more steps or more noise whose accounting includes these "
            f"{self.steps} steps")

    def epsilon(self, delta: float | None = None, *, method: str | None = None) -> PrivacyReport:
        """The guarantee of the steps actually taken: ``accountant.epsilon(sigma, steps, delta)``.

        Parameters
        ----------
        delta : float, optional
            In (0, 1); default the ``budget``'s delta.
        method : {"rdp", "pld", "prv", "gdp"}, optional
            Default ``accounting_method``.

        Returns
        -------
        PrivacyReport
            ``T`` is :attr:`steps` (``eps = 0`` before the first step).
        """
        if self.accountant is None:
            raise ValueError("accountant: epsilon() needs the accountant of the sampling used, bound at "
                             "construction: DPOptimizer(..., accountant=HeterPoissonAccountant(...))")
        if delta is None:
            if self.budget is None:
                raise ValueError("delta: required (no budget to take it from)")
            delta = self.budget[1]
        method = self.accounting_method if method is None else method
        if method not in METHODS:
            raise ValueError(f"method: expected one of {METHODS}, got {method!r}")
        if self.steps == 0:
            delta = check_prob("delta", delta, open_low=True, open_high=True)
            return PrivacyReport(0.0, delta, self.sigma, 0, method, model=getattr(self.accountant, "model", ""))
        return self.accountant.epsilon(self.sigma, self.steps, delta, method=method)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state, the step count and the noise settings the count was
        accounted with.  Nothing in it rebuilds the noise (no seed, no generator state): a
        checkpoint may be stored like the model.
        """
        state = {"optimizer": self.optimizer.state_dict(), "steps": self.steps, "sigma": self.sigma,
                 "max_grad_norm": self.max_grad_norm}
        if self.adaptive is not None:  # a post-processing of the noisy counts released
            state["clip_bound"] = self.clip_bound
        return state

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Resume from :meth:`state_dict`: the step count (so :meth:`epsilon` and the limits
        include the steps taken before) and the wrapped optimizer.  The noise continues from
        step ``steps`` under this optimizer's own seed (the same trajectory when it is the
        seed of the saved run).  A ``"generator"`` entry of an older state is ignored.

        Raises
        ------
        ValueError
            If the state was taken with another ``sigma`` or ``max_grad_norm`` (one noise
            level is accounted for all steps), or lacks a key.
        """
        missing = {"optimizer", "steps", "sigma", "max_grad_norm"} - set(state_dict)
        if missing:
            raise ValueError(f"state_dict: missing {sorted(missing)} (expected DPOptimizer.state_dict())")
        for name in ("sigma", "max_grad_norm"):
            if _clip_key(state_dict[name]) != _clip_key(getattr(self, name)):
                raise ValueError(f"{name}: the state's {state_dict['steps']} steps were taken at {name}="
                                 f"{state_dict[name]}, this optimizer uses {getattr(self, name)}; the accountant "
                                 f"assumes one {name} for all steps: build the optimizer with the same value")
        steps = check_int("state_dict['steps']", state_dict["steps"], 0)
        bound = self.clip_bound
        if self.adaptive is not None and "clip_bound" in state_dict:
            bound = check_eps("state_dict['clip_bound']", state_dict["clip_bound"])
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self.steps = steps
        self.clip_bound = bound

    # ------------------------------------------------------------------ optimizer

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise added to the clipped sum: ``2 C grad_sigma``
        (``C``: :attr:`clip_bound`)."""
        return 2.0 * self.clip_bound * self.grad_sigma

    @property
    def noise_multiplier(self) -> float:
        """Opacus's noise multiplier of the gradient: ``noise_std / C = 2 grad_sigma``."""
        return 2.0 * self.grad_sigma

    @property
    def param_groups(self):
        return self.optimizer.param_groups

    def zero_grad(self, set_to_none: bool = True):
        self.optimizer.zero_grad(set_to_none=set_to_none)

    def _noise(self, shape) -> torch.Tensor:
        std = self.noise_std
        if self.secure_mode:
            z = sum(torch.normal(0.0, std, shape, generator=self.generator) for _ in range(4))
            return z / 2.0
        return torch.normal(0.0, std, shape, generator=self.generator)

    def _noises(self, params) -> list[torch.Tensor]:
        """One noise tensor per parameter, on its device: CPU parameters get the CPU
        generator's draws in parameter order, device parameters :meth:`_device_noises`."""
        dev = [p.device for p in params if p.device.type != "cpu"]
        if not dev:
            return self._cpu_noises([p.shape for p in params])
        if any(p.device != dev[0] for p in params):
            raise ValueError(f"model: parameters on several devices ({sorted({str(p.device) for p in params})}); "
                             "DPOptimizer expects one device")
        return self._device_noises(params, dev[0])

    def _cpu_noises(self, shapes) -> list[torch.Tensor]:
        """This step's noise on the CPU, one tensor per shape in order, from the CPU generator
        seeded by :meth:`_step_seed`: its state comes from ``(seed, step)`` alone, so nothing
        needs saving to resume it."""
        self.generator.manual_seed(self._step_seed())
        return [self._noise(shape) for shape in shapes]

    def _step_seed(self) -> int:
        """Seed of this step's noise generator: a 64-bit mix of the seed and :attr:`steps`
        (distinct steps, distinct seeds), fresh from ``secrets`` in secure mode."""
        if self._seed is None:
            return secrets.randbits(63)
        return _mix64(self._seed, self.steps) & ((1 << 63) - 1)

    def _device_noises(self, params, device) -> list[torch.Tensor]:
        """The noise of this step drawn on ``device`` by a generator there, seeded by
        :meth:`_step_seed`: one flat draw for all parameters (one launch, nothing on the
        host but the seed), in the parameters' dtype when they share one."""
        gen = self._device_gens.get(device)
        if gen is None:
            gen = self._device_gens[device] = torch.Generator(device=device)
        gen.manual_seed(self._step_seed())
        sizes = [p.numel() for p in params]
        dtypes = {p.dtype for p in params}
        dtype = dtypes.pop() if len(dtypes) == 1 and params[0].is_floating_point() else torch.float32
        std = self.noise_std
        flat = torch.empty(sum(sizes), dtype=dtype, device=device).normal_(0.0, std, generator=gen)
        if self.secure_mode:  # the normalised sum of 4 Gaussians, as _noise
            for _ in range(3):
                flat += torch.empty_like(flat).normal_(0.0, std, generator=gen)
            flat /= 2.0
        return [f.view(p.shape) for f, p in zip(flat.split(sizes), params)]

    def _add_noise(self, params: list[torch.nn.Parameter], count: float | None = None) -> float | None:
        """Add the Gaussian noise to the clipped sum in every ``.grad``; with adaptive
        clipping, also to the centred count, which is returned."""
        for p, z in zip(params, self._noises(params)):
            p.grad = p.grad + z.to(p.dtype)
        return None if count is None else count + self._count_noise()

    def _count_noise(self) -> float:
        """``N(0, unclipped_num_std^2)`` for the adaptive count, from its own generator seeded
        by ``(seed, step)`` (the gradient noise's bits do not move)."""
        g = torch.Generator()
        g.manual_seed(secrets.randbits(63) if self._seed is None
                      else _mix64(self._seed ^ _COUNT_TAG, self.steps) & ((1 << 63) - 1))
        return float(torch.normal(0.0, self.adaptive["unclipped_num_std"], (1,), generator=g, dtype=torch.float64))

    def _clip(self) -> ClipStats:
        """The clipped sum of the last forward's batch into ``.grad``."""
        self.module.check_release()
        return self.module.clip_and_accumulate(self.max_grad_norm if self.clipping == "per_layer"
                                               else self.clip_bound)

    def _centred_count(self, stats: ClipStats) -> float:
        """``sum_b (1[||g_b|| <= C] - 1/2)``: what adaptive clipping releases with noise."""
        n = stats.norms
        return float((n <= self.clip_bound).sum()) - 0.5 * n.numel()

    def _chunk_pending(self) -> bool:
        """Whether the last forward was a physical batch followed by more of the same step."""
        src = self.batch_source
        return src is not None and src._take_chunk(self.steps)

    def _accumulate_chunk(self) -> ClipStats:
        """Clip a physical batch that is not the last of its logical batch and keep its
        clipped sum (and count) for the release; nothing is released or counted."""
        stats = self._clip()
        params = [p for p in self.module._module.parameters() if p.requires_grad]
        if self._acc is None:
            self._acc = [p.grad.clone() for p in params]
        else:
            for a, p in zip(self._acc, params):
                a += p.grad
        self._acc_stats.append(stats)
        for p in params:
            p.grad = None
        self.last_stats = stats
        return stats

    def pre_step(self) -> ClipStats:
        """Clip per sub-graph, sum, add noise, scale: leaves the private gradient in ``.grad``
        and counts one step.

        Raises
        ------
        BudgetExhaustedError
            Before touching anything, when ``max_steps`` or the budget is reached.
        DPUsageError
            Before touching anything, when there are no per-sub-graph gradients to release
            (:meth:`SubgraphGradSampleModule.check_release`).
        """
        self._check_budget()
        self.module.check_release()
        for hook in self.before_release:  # e.g. the store's record of this step, written ahead
            hook(self.steps + 1)
        stats = self._clip()
        params = [p for p in self.module._module.parameters() if p.requires_grad]
        if self._acc is not None:  # the physical batches before this one (BatchMemoryManager)
            for a, p in zip(self._acc, params):
                p.grad = p.grad + a
            stats = ClipStats(norms=torch.cat([s.norms for s in (*self._acc_stats, stats)]),
                              factors=torch.cat([s.factors for s in (*self._acc_stats, stats)]))
        count = None if self.adaptive is None else self._centred_count(stats)  # every chunk, one bound
        self._acc, self._acc_stats = None, []
        noisy_count = self._add_noise(params, count)
        if self.expected_batch_size is not None:
            for p in params:
                p.grad = p.grad / self.expected_batch_size
        if noisy_count is not None:  # Andrew et al. 2021: geometric update towards the target quantile
            a = self.adaptive
            unclipped = noisy_count / self.expected_batch_size + 0.5
            bound = self.clip_bound * math.exp(-a["clipbound_learning_rate"] * (unclipped - a["target_unclipped_quantile"]))
            self.clip_bound = min(a["max_clipbound"], max(a["min_clipbound"], bound))
        self.steps += 1
        self.last_stats = stats
        return stats

    def step(self, closure=None):
        """:meth:`pre_step` then the wrapped optimizer's step.  For a physical batch that is
        not the last of its logical batch (:class:`ldpfast.privacy.BatchMemoryManager`):
        clip and keep its sum, release nothing (returns ``None``)."""
        self._check_budget()  # before the closure's forward/backward
        if closure is not None:
            with torch.enable_grad():
                closure()
        if self._chunk_pending():
            self._accumulate_chunk()
            return None
        self.pre_step()
        return self._inner_step()

    def noise_only_step(self):
        """A step with no sub-graph (empty Poisson sample): the release is pure noise, and
        counts as a step."""
        self._check_budget()
        self.module.forward_empty()
        self.pre_step()
        return self._inner_step()


def _mix64(a: int, b: int) -> int:
    """SplitMix64 of ``a + golden * (b + 1)``: a bijection of ``b`` for a given ``a``."""
    m = (1 << 64) - 1
    x = (a + 0x9E3779B97F4A7C15 * (b + 1)) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def _check_clip(max_grad_norm, clipping: str, module: SubgraphGradSampleModule):
    """``C`` (a float), or per layer a tuple of one ``C_k`` per trainable parameter."""
    if clipping != "per_layer":
        if isinstance(max_grad_norm, (list, tuple)):
            raise ValueError("max_grad_norm: a sequence of clipping norms needs clipping='per_layer'")
        return check_eps("max_grad_norm", max_grad_norm)
    n = sum(1 for p in module._module.parameters() if p.requires_grad)
    if isinstance(max_grad_norm, (int, float)) and not isinstance(max_grad_norm, bool):
        raise TypeError(f"max_grad_norm: clipping='per_layer' needs one clipping norm per trainable parameter "
                         f"({n}), e.g. [C / {n} ** 0.5] * {n} for a total of C")
    cs = tuple(check_eps("max_grad_norm", c) for c in max_grad_norm)
    if len(cs) != n:
        raise ValueError(f"max_grad_norm: expected one clipping norm per trainable parameter ({n}, in "
                         f"model.parameters() order), got {len(cs)}")
    return cs


def _clip_key(v):
    """A comparable form of a clipping norm (a float, or a sequence per layer)."""
    return tuple(float(c) for c in v) if isinstance(v, (list, tuple)) else float(v)


def adaptive_grad_sigma(sigma: float, unclipped_num_std: float) -> float:
    """The gradient noise (paper units) that, beside a count released with noise
    ``unclipped_num_std``, makes the pair the mechanism accounted at ``sigma``:
    ``(sigma^-2 - unclipped_num_std^-2)^-1/2`` (Andrew et al. 2021, Theorem 1;
    :class:`DPOptimizer`, ``clipping="adaptive"``).

    Raises
    ------
    ValueError
        When ``unclipped_num_std <= sigma`` (the count alone would spend the budget).
    """
    sigma = check_eps("sigma", sigma)
    std = check_eps("unclipped_num_std", unclipped_num_std)
    if std <= sigma:
        raise ValueError(f"unclipped_num_std: must exceed sigma={sigma:g} (paper units; Opacus: noise_multiplier / 2) "
                         f"for the count to leave room for the gradient's noise, got {std:g}; raise it (default "
                         "expected_batch_size / 20) or add noise")
    return (sigma ** -2 - std ** -2) ** -0.5


def gaussian_noise_std(max_grad_norm: float, sigma: float) -> float:
    """``2 C sigma``: absolute noise of Alg. 1 for clip norm ``C`` and paper-unit ``sigma``."""
    return 2.0 * check_eps("max_grad_norm", max_grad_norm) * check_eps("sigma", sigma)
