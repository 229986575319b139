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
one call.
"""
from __future__ import annotations

import secrets
from typing import Any

import torch

from ..._checks import check_eps, check_int, check_prob, check_real
from ...rng import resolve_seed
from ..accountants.base import PrivacyReport
from .clipping import ClipStats, SubgraphGradSampleModule

__all__ = ["BudgetExhaustedError", "DPOptimizer", "gaussian_noise_std"]

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
    max_grad_norm : float
        Clipping norm ``C`` (paper: 0.5), > 0.
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
    accounting_method : {"rdp", "pld"}
        Default method of :meth:`epsilon` and the method of ``budget``.

    Attributes
    ----------
    steps : int
        DP releases made so far (:meth:`step`, :meth:`noise_only_step` and direct
        :meth:`pre_step` calls), restored by :meth:`load_state_dict`.
    budget_steps : int or None
        Steps allowed by ``budget``.

    Notes
    -----
    A resumed run must load the optimizer's :meth:`state_dict` (its step count) and sample
    from step ``steps`` on (``sampler.sample(t)`` for ``t`` in ``range(opt.steps, T)``):
    sampling step ``t`` again gives the same batch, which the accountant does not allow for;
    the noise of step ``t`` is drawn from ``(seed, t)``, so the step count also keeps a step's
    noise from being drawn twice.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, module: SubgraphGradSampleModule, *, sigma: float,
                 max_grad_norm: float = 0.5, expected_batch_size: float | None = None,
                 seed: int | None = None, secure_mode: bool = False, accountant: Any = None,
                 max_steps: int | None = None, budget: tuple[float, float] | None = None,
                 accounting_method: str = "rdp"):
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(module, SubgraphGradSampleModule):
            raise TypeError("module: expected a SubgraphGradSampleModule")
        self.optimizer = optimizer
        self.module = module
        self.sigma = check_eps("sigma", sigma)
        self.max_grad_norm = check_eps("max_grad_norm", max_grad_norm)
        if expected_batch_size is not None:
            expected_batch_size = check_real("expected_batch_size", expected_batch_size, 1e-12)
        self.expected_batch_size = expected_batch_size
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
        if accounting_method not in ("rdp", "pld"):
            raise ValueError(f"accounting_method: expected 'rdp' or 'pld', got {accounting_method!r}")
        self.accounting_method = accounting_method
        self.max_steps = None if max_steps is None else check_int("max_steps", max_steps, 1)
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

    # ------------------------------------------------------------------ accounting
    def _steps_within_budget(self) -> int:
        """Largest ``T`` with ``epsilon(T) <= eps`` (``eps`` grows with ``T``): doubling, then bisection."""
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
        method : {"rdp", "pld"}, optional
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
        if method not in ("rdp", "pld"):
            raise ValueError(f"method: expected 'rdp' or 'pld', got {method!r}")
        if self.steps == 0:
            delta = check_prob("delta", delta, open_low=True, open_high=True)
            return PrivacyReport(0.0, delta, self.sigma, 0, method, model=getattr(self.accountant, "model", ""))
        return self.accountant.epsilon(self.sigma, self.steps, delta, method=method)

    def state_dict(self) -> dict[str, Any]:
        """The wrapped optimizer's state, the step count and the noise settings the count was
        accounted with.  Nothing in it rebuilds the noise (no seed, no generator state): a
        checkpoint may be stored like the model.
        """
        return {"optimizer": self.optimizer.state_dict(), "steps": self.steps, "sigma": self.sigma,
                "max_grad_norm": self.max_grad_norm}

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
            if float(state_dict[name]) != getattr(self, name):
                raise ValueError(f"{name}: the state's {state_dict['steps']} steps were taken at {name}="
                                 f"{state_dict[name]}, this optimizer uses {getattr(self, name)}; the accountant "
                                 f"assumes one {name} for all steps: build the optimizer with the same value")
        steps = check_int("state_dict['steps']", state_dict["steps"], 0)
        self.optimizer.load_state_dict(state_dict["optimizer"])
        self.steps = steps

    # ------------------------------------------------------------------ optimizer

    @property
    def noise_std(self) -> float:
        """Standard deviation of the noise added to the clipped sum: ``2 C sigma``."""
        return 2.0 * self.max_grad_norm * self.sigma

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

    def _add_noise(self, params: list[torch.nn.Parameter]) -> None:
        """Add the Gaussian noise to the clipped sum in every ``.grad``."""
        for p, z in zip(params, self._noises(params)):
            p.grad = p.grad + z.to(p.dtype)

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
        stats = self.module.clip_and_accumulate(self.max_grad_norm)
        params = [p for p in self.module._module.parameters() if p.requires_grad]
        self._add_noise(params)
        if self.expected_batch_size is not None:
            for p in params:
                p.grad = p.grad / self.expected_batch_size
        self.steps += 1
        self.last_stats = stats
        return stats

    def step(self, closure=None):
        """:meth:`pre_step` then the wrapped optimizer's step."""
        self._check_budget()  # before the closure's forward/backward
        if closure is not None:
            with torch.enable_grad():
                closure()
        self.pre_step()
        return self.optimizer.step()

    def noise_only_step(self):
        """A step with no sub-graph (empty Poisson sample): the release is pure noise, and
        counts as a step."""
        self._check_budget()
        self.module.forward_empty()
        self.pre_step()
        return self.optimizer.step()


def _mix64(a: int, b: int) -> int:
    """SplitMix64 of ``a + golden * (b + 1)``: a bijection of ``b`` for a given ``a``."""
    m = (1 << 64) - 1
    x = (a + 0x9E3779B97F4A7C15 * (b + 1)) & m
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & m
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & m
    return x ^ (x >> 31)


def gaussian_noise_std(max_grad_norm: float, sigma: float) -> float:
    """``2 C sigma``: absolute noise of Alg. 1 for clip norm ``C`` and paper-unit ``sigma``."""
    return 2.0 * check_eps("max_grad_norm", max_grad_norm) * check_eps("sigma", sigma)
