"""The DP optimizer of node-level DP-SGD: clip per sub-graph, add Gaussian noise, step.

Paper 003 (Xiang, Wang and Wang), Algorithm 1 lines 6-10.  The per-sub-graph clipping is
:mod:`.clipping`; the accountant of ``sigma`` is
:class:`ldpfast.privacy.accountants.HeterPoissonAccountant`.  The Gaussian noise is drawn by
a CPU generator (a seed gives the same noise bits on every device) and moved to the
parameters' device in one asynchronous copy from pinned memory per step.
"""
from __future__ import annotations

import secrets

import torch

from ..._checks import check_eps, check_real
from ...rng import resolve_seed
from .clipping import ClipStats, SubgraphGradSampleModule

__all__ = ["DPOptimizer", "gaussian_noise_std"]


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
        Seed of the noise generator (``None``: from the OS).  Whoever knows it can rebuild the
        noise and subtract it, so keep it secret: no report or ledger entry records it (the
        optimizer's ``generator``, like any PRNG state, does: do not publish the optimizer).
    secure_mode : bool
        Draw each noise coordinate as the normalised sum of 4 Gaussians from a generator
        seeded by ``secrets`` (Opacus' mitigation of floating-point attacks on Gaussian
        sampling, Holohan & Braghin 2021); ignores ``seed``.
    """

    def __init__(self, optimizer: torch.optim.Optimizer, module: SubgraphGradSampleModule, *, sigma: float,
                 max_grad_norm: float = 0.5, expected_batch_size: float | None = None,
                 seed: int | None = None, secure_mode: bool = False):
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
        self.generator = torch.Generator()
        self.generator.manual_seed(secrets.randbits(63) if secure_mode else resolve_seed(seed) & ((1 << 63) - 1))
        self.steps = 0
        self.last_stats: ClipStats | None = None

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
        """One noise tensor per parameter, drawn in parameter order by the CPU generator (the
        same bits on every device), each on its parameter's device: device parameters get
        theirs in one asynchronous host-to-device copy from pinned memory."""
        zs = [self._noise(p.shape) for p in params]
        dev = [p.device for p in params if p.device.type != "cpu"]
        if not dev:
            return zs
        if any(p.device != dev[0] for p in params):
            raise ValueError(f"model: parameters on several devices ({sorted({str(p.device) for p in params})}); "
                             "DPOptimizer expects one device")
        sizes = [z.numel() for z in zs]
        host = torch.empty(sum(sizes), dtype=zs[0].dtype, pin_memory=True)
        torch.cat([z.reshape(-1) for z in zs], out=host)
        flat = host.to(dev[0], non_blocking=True)
        return [f.view(p.shape) for f, p in zip(flat.split(sizes), params)]

    def pre_step(self) -> ClipStats:
        """Clip per sub-graph, sum, add noise, scale: leaves the private gradient in ``.grad``."""
        stats = self.module.clip_and_accumulate(self.max_grad_norm)
        params = [p for p in self.module._module.parameters() if p.requires_grad]
        for p, z in zip(params, self._noises(params)):
            p.grad = p.grad + z.to(p.dtype)
            if self.expected_batch_size is not None:
                p.grad = p.grad / self.expected_batch_size
        self.steps += 1
        self.last_stats = stats
        return stats

    def step(self, closure=None):
        """:meth:`pre_step` then the wrapped optimizer's step."""
        if closure is not None:
            with torch.enable_grad():
                closure()
        self.pre_step()
        return self.optimizer.step()

    def noise_only_step(self):
        """A step with no sub-graph (empty Poisson sample): the release is pure noise."""
        self.module._recs = []
        self.module._num_subgraphs = 0
        self.module._seg = None
        self.module._seg = torch.zeros(0, dtype=torch.long, device=self.module._device())
        self.pre_step()
        return self.optimizer.step()


def gaussian_noise_std(max_grad_norm: float, sigma: float) -> float:
    """``2 C sigma``: absolute noise of Alg. 1 for clip norm ``C`` and paper-unit ``sigma``."""
    return 2.0 * check_eps("max_grad_norm", max_grad_norm) * check_eps("sigma", sigma)
