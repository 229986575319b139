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
        max_grad_norm=0.5, expected_batch_size=256, M=2.0, train_mask=data.train_mask)
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

import math
from typing import TYPE_CHECKING, Any

from .._checks import check_eps, check_int, check_prob, check_real
from ..rng import resolve_seed
from .accountants import check_degree_model

if TYPE_CHECKING:  # torch-only imports stay lazy: ``import ldpfast.privacy`` does not load the sampler
    import torch

    from ..sampling import HeterPoisson, SubgraphBatch
    from .accountants import PrivacyReport
    from .dpsgd import DPOptimizer, SubgraphGradSampleModule

__all__ = ["NODES_PRIVACY_MODEL", "NOISE_TAG", "SAMPLER_TAG", "SAMPLINGS", "NodeDPEngine", "NodeDPSampler"]

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
_ACCOUNTED = ("sampling", "q_b", "M", "num_nodes", "degree_model", "degree_bound")


class NodeDPSampler:
    """The batches of the planned steps not taken yet (what :meth:`NodeDPEngine.make_private`
    returns as ``sampler``).

    Iterating yields the batch of step ``optimizer.steps`` while fewer than :attr:`steps`
    steps were taken, so a resumed run (:meth:`NodeDPEngine.load_state_dict`) continues with
    the next step's batch, and every release gets a fresh Poisson sample.  Empty samples are
    yielded too (``batch.num_subgraphs == 0``): the wrapper takes them and ``step()``
    releases noise only.

    Attributes
    ----------
    sampler : HeterPoisson
        The sampler of the sub-graphs (with ``sampling="nodes"``: of the central nodes only).
    optimizer : DPOptimizer
        Whose step count says which batch comes next.
    steps : int
        The planned number of steps ``T``.
    sampling : {"heterpoisson", "nodes"}
    """

    def __init__(self, sampler: HeterPoisson, optimizer: DPOptimizer, steps: int, sampling: str):
        self.sampler = sampler
        self.optimizer = optimizer
        self.steps = steps
        self.sampling = sampling

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

    def sample(self, step: int) -> SubgraphBatch:
        """The batch of step ``step`` (the same batch every time for one seed)."""
        if self.sampling == "nodes":
            from ..sampling import singleton_batch

            return singleton_batch(self.sampler.data, self.sampler.central(step), step)
        return self.sampler.sample(step)

    def __len__(self) -> int:
        """Steps of the plan not taken yet."""
        return max(0, self.steps - self.optimizer.steps)

    def __iter__(self):
        from .dpsgd import DPUsageError

        while self.optimizer.steps < self.steps:
            t = self.optimizer.steps
            yield self.sample(t)
            if self.optimizer.steps == t:
                raise DPUsageError(
                    f"sampler: the batch of step {t} was not released; call optimizer.step() once per batch (the "
                    "sampler draws the batch of the step the optimizer takes next, so without a step it would "
                    "draw the same batch again)")

    def __repr__(self) -> str:
        return (f"NodeDPSampler(sampling={self.sampling!r}, q_b={self.q_b:g}, steps={self.steps}, "
                f"taken={self.optimizer.steps})")


class NodeDPEngine:
    """Make a PyG model, its optimizer and a graph node-level differentially private
    (DP-SGD with HeterPoisson sub-graph sampling, Xiang et al.'s Algorithm 1).

    Parameters
    ----------
    accountant : {"rdp", "pld"}
        The figure that calibrates ``sigma``, checks ``budget`` and is reported by
        :meth:`get_epsilon`: Theorem 2 with the RDP conversion (Theorem 1), or
        dp_accounting's PLD of the same mixture (less noise for the same ``eps``, slower).
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
    One engine serves one model: build a new engine (and call :meth:`load_state_dict`) to
    resume.
    """

    def __init__(self, accountant: str = "rdp", *, secure_mode: bool = False):
        if accountant not in ("rdp", "pld"):
            raise ValueError(f"accountant: expected 'rdp' or 'pld', got {accountant!r}")
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

    # ------------------------------------------------------------------ building
    def make_private(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, data, *,
                     noise_multiplier: float, max_grad_norm: float = 0.5,
                     expected_batch_size: float | None = None, sample_rate: float | None = None,
                     epochs: float | None = None, steps: int | None = None, M: float | None = None,
                     train_mask=None, budget: tuple[float, float] | None = None, sampling: str = "heterpoisson",
                     degree_model: str = "s2_public_degrees", degree_bound: int | None = None,
                     out_degree: torch.Tensor | None = None, num_nodes: int | None = None, induced: bool = True,
                     seed: int | None = None, backend: str | None = None, check_independence: bool = True,
                     ) -> tuple[SubgraphGradSampleModule, DPOptimizer, NodeDPSampler]:
        """Wrap ``model``, ``optimizer`` and ``data`` for node-level DP-SGD at the noise
        ``noise_multiplier``.

        Parameters
        ----------
        model : torch.nn.Module
            Called as ``model(x, edge_index)``, node-level outputs; parameters in the layers
            :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule` supports (or already
            such a wrapper).
        optimizer : torch.optim.Optimizer
            Over the model's trainable parameters (all of them, nothing else).
        data : torch_geometric.data.Data
            The graph the sub-graphs are drawn from (``x``, ``y``, ``edge_index``), on any
            device; under ``"s2_public_degrees"`` the whole graph ``G`` (else give
            ``out_degree`` and ``num_nodes`` of ``G``).
        noise_multiplier : float
            ``sigma`` in the paper's units (noise ``N(0, (2 C sigma)^2 I)`` on the clipped
            sum), > 0.
        max_grad_norm : float
            Per-sub-graph clipping norm ``C`` (paper: 0.5), > 0.
        expected_batch_size, sample_rate : float
            Exactly one: the expected number of sub-graphs per step (``q_b`` is then
            ``min(1, expected_batch_size / #candidates)``: the number of training nodes is
            treated as public), or ``q_b`` itself in (0, 1].
        epochs, steps : float, int
            Exactly one: ``T = ceil(epochs / q_b)``, or ``T`` itself (>= 1).  The optimizer
            refuses step ``T + 1``.
        M : float
            Neighbourhood multiplier, > 0 (a neighbour ``j`` joins with probability
            ``min(1, M / D_ot(j))``); required with ``"heterpoisson"``, not used with
            ``"nodes"``.
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
        check_independence : bool
            As in :class:`~ldpfast.privacy.dpsgd.SubgraphGradSampleModule`.

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
        sigma = check_eps("noise_multiplier", noise_multiplier)
        plan = self._schedule(data, expected_batch_size, sample_rate, epochs, steps, M, train_mask, sampling,
                              degree_model, degree_bound, out_degree, num_nodes)
        return self._build(model, optimizer, data, sigma, None, max_grad_norm, plan, budget, train_mask,
                           out_degree, induced, seed, backend, check_independence)

    def make_private_with_epsilon(self, model: torch.nn.Module, optimizer: torch.optim.Optimizer, data,
                                  target_epsilon: float, target_delta: float, epochs: float | None = None,
                                  max_grad_norm: float = 0.5, *, expected_batch_size: float | None = None,
                                  sample_rate: float | None = None, steps: int | None = None,
                                  M: float | None = None, train_mask=None, sampling: str = "heterpoisson",
                                  degree_model: str = "s2_public_degrees", degree_bound: int | None = None,
                                  out_degree: torch.Tensor | None = None, num_nodes: int | None = None,
                                  induced: bool = True, seed: int | None = None, backend: str | None = None,
                                  check_independence: bool = True,
                                  ) -> tuple[SubgraphGradSampleModule, DPOptimizer, NodeDPSampler]:
        """:meth:`make_private` with the smallest ``sigma`` (to 0.1%) whose ``T`` steps spend at
        most ``target_epsilon`` at ``target_delta`` under this engine's accountant.

        The optimizer refuses step ``T + 1``, so the run cannot spend more than the target;
        :meth:`get_epsilon` defaults to ``target_delta``.  The other parameters are those
        of :meth:`make_private`.

        Raises
        ------
        ValueError
            Also when the target is not reachable with ``sigma <= 1e4``.
        """
        eps = check_eps("target_epsilon", target_epsilon)
        delta = check_prob("target_delta", target_delta, open_low=True, open_high=True)
        plan = self._schedule(data, expected_batch_size, sample_rate, epochs, steps, M, train_mask, sampling,
                              degree_model, degree_bound, out_degree, num_nodes)
        made = self._build(model, optimizer, data, None, (eps, delta), max_grad_norm, plan, None, train_mask,
                           out_degree, induced, seed, backend, check_independence)
        self._delta = delta
        return made

    @staticmethod
    def _schedule(data, expected_batch_size, sample_rate, epochs, steps, M, train_mask, sampling, degree_model,
                  degree_bound, out_degree, num_nodes) -> dict[str, Any]:
        """The checked plan: what the accountant depends on, and ``T``."""
        if sampling not in SAMPLINGS:
            raise ValueError(f"sampling: expected one of {SAMPLINGS}, got {sampling!r}")
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
            if M is None:
                raise ValueError("M: required with sampling='heterpoisson' (a neighbour j joins a sub-graph with "
                                 "probability min(1, M / D_ot(j)); the paper uses 1 to 4)")
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
                "degree_bound": degree_bound, "T": T}

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

    def _build(self, model, optimizer, data, sigma, target, max_grad_norm, plan, budget, train_mask, out_degree,
               induced, seed, backend, check_independence):
        """Check the model and the optimizer, build the sampler (it refuses graphs outside the
        degree model), then calibrate ``sigma`` for ``target`` (the slow part) if not given,
        then the optimizer."""
        import torch

        from ..sampling import HeterPoisson
        from .dpsgd import DPOptimizer, SubgraphGradSampleModule

        if self.module is not None:
            raise RuntimeError("NodeDPEngine: this engine already made a model private; use one engine per model "
                               "(a new engine and load_state_dict() to resume)")
        C = check_eps("max_grad_norm", max_grad_norm)
        if not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(f"optimizer: expected a torch.optim.Optimizer, got {type(optimizer).__name__}")
        if not isinstance(model, torch.nn.Module):
            raise TypeError(f"model: expected a torch.nn.Module, got {type(model).__name__}")
        inner = model._module if isinstance(model, SubgraphGradSampleModule) else model
        trainable = {id(p) for p in inner.parameters() if p.requires_grad}
        in_opt = {id(p) for g in optimizer.param_groups for p in g["params"]}
        if in_opt != trainable:  # checked before the wrapper hooks the model
            raise ValueError(f"optimizer: must hold exactly the model's trainable parameters (it holds "
                             f"{len(in_opt & trainable)} of the model's {len(trainable)}, and {len(in_opt - trainable)} "
                             "others): build it as torch.optim.X(model.parameters(), ...) on the model you pass")
        gsm = model if inner is not model else SubgraphGradSampleModule(model, check_independence=check_independence)
        seed = resolve_seed(seed)
        heter = plan["sampling"] == "heterpoisson"
        # "nodes": the sampler only draws the central nodes (M plays no part in central())
        sampler = HeterPoisson(data, plan["q_b"], plan["M"] if heter else 1.0, seed=seed ^ SAMPLER_TAG,
                               train_nodes=train_mask, overlap="drop", induced=induced, backend=backend,
                               num_steps=plan["T"], out_degree=out_degree if heter else None,
                               degree_model=plan["degree_model"] if heter else "s2_public_degrees",
                               degree_bound=plan["degree_bound"])
        acc = self._accountant(plan)
        if sigma is None:
            sigma = acc.calibrate_sigma(*target, plan["T"], method=self.accounting_method)
        opt = DPOptimizer(optimizer, gsm, sigma=sigma, max_grad_norm=C,
                          expected_batch_size=sampler.expected_batch_size, seed=seed ^ NOISE_TAG,
                          secure_mode=self.secure_mode, accountant=acc, max_steps=plan["T"], budget=budget,
                          accounting_method=self.accounting_method)
        if budget is not None:
            self._delta = opt.budget[1]
        self.module, self.optimizer, self.accountant = gsm, opt, acc
        self.sampler = NodeDPSampler(sampler, opt, plan["T"], plan["sampling"])
        self.privacy_model = NODES_PRIVACY_MODEL if not heter else sampler.privacy_model
        self._plan = plan
        return gsm, opt, self.sampler

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
        """``sigma`` of the plan (paper units)."""
        return self._made().sigma

    def get_privacy_report(self, delta: float | None = None) -> PrivacyReport:
        """The guarantee of the steps taken (``eps``, the accountant's details, the model).

        Parameters
        ----------
        delta : float, optional
            In (0, 1); default the target (or ``budget``) delta.
        """
        delta = self._delta if delta is None else delta
        if delta is None:
            raise ValueError("delta: required (no target_delta or budget to take it from)")
        return self._made().epsilon(delta, method=self.accounting_method)

    def get_epsilon(self, delta: float | None = None) -> float:
        """``eps`` at ``delta`` of the steps actually taken (0 before the first), under this
        engine's accountant (:meth:`get_privacy_report` for the details)."""
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

        Raises
        ------
        ValueError
            When the state was accounted under another sampling, ``q_b``, ``M``, graph size,
            degree model, ``sigma`` or ``max_grad_norm`` (one accountant covers all steps),
            belongs to another architecture, or lacks a key; nothing is changed then.
        """
        opt = self._made()
        missing = {"model", "optimizer", "plan"} - set(state_dict)
        if missing:
            raise ValueError(f"state_dict: missing {sorted(missing)} (expected NodeDPEngine.state_dict())")
        old = state_dict["plan"]
        for k in _ACCOUNTED:
            if old.get(k) != self._plan[k]:
                raise ValueError(f"{k}: the state's {state_dict['optimizer'].get('steps')} steps were accounted with "
                                 f"{k}={old.get(k)!r}, this engine plans {k}={self._plan[k]!r}; make the engine "
                                 "private with the same settings to resume")
        for k in ("sigma", "max_grad_norm"):  # checked before anything is loaded
            if float(state_dict["optimizer"].get(k, math.nan)) != getattr(opt, k):
                raise ValueError(f"{k}: the state was taken at {k}={state_dict['optimizer'].get(k)}, this engine "
                                 f"uses {getattr(opt, k)}; the accountant assumes one {k} for all steps: make the "
                                 "engine private with the same settings (same target, epochs and batch size)")
        mine = self.module._module.state_dict()
        theirs = state_dict["model"]
        if set(mine) != set(theirs) or any(tuple(mine[k].shape) != tuple(theirs[k].shape) for k in mine):
            raise ValueError("state_dict['model']: not a state of this model (other parameter names or shapes): "
                             "resume with the same architecture")
        opt.load_state_dict(state_dict["optimizer"])  # validates before it changes anything
        self.module._module.load_state_dict(theirs)
