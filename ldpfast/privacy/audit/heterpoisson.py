"""White-box privacy audit of HeterPoisson DP-SGD with gradient canaries (paper Algorithm 4).

Paper: Z. Xiang, T. Wang and D. Wang, "Preserving Node-level Privacy in Graph Neural
Networks", Appendix A.2 / Algorithm 4 and section 5.3, adapted from Nasr, Hayes, Steinke et
al., "Tight Auditing of Differentially Private Machine Learning" (USENIX Security 2023).

Algorithm 4: run Algorithm 1; at every step draw a canary magnitude ``k ~ rho`` (``rho`` the
sensitivity distribution of Theorem 2 at the worst out-degree found by the accountant), add
the Dirac canary ``g^c = [k 2C, 0, ..., 0]`` to the clipped sum before the noise, and record
``O'[t] = <g^t, e>`` (canary present) and ``O*[t] = <g^t - g^c, e>`` (the same step without it).
An adversary who tells ``O'`` from ``O*`` is a membership-inference attack on the node whose
influence the canary stands for, so its success bounds ``eps`` from below.

Estimates returned by :func:`audit_heterpoisson`:

* ``eps_lower``: a lower bound for the whole ``T``-step mechanism with confidence
  ``confidence``: ``runs`` independent ``T``-step runs of the canary coordinate (white-box,
  fresh coordinate, noise drawn by the :class:`~ldpfast.privacy.dpsgd.DPOptimizer`), test statistic
  the summed log-likelihood ratio of the claimed mixture against ``N(0, (2 C sigma)^2)``,
  threshold chosen on half of the runs, Clopper-Pearson on the other half.  It must stay
  below the accountant's ``eps`` (``eps_accountant``), and it does exceed it when the noise
  is too small (``noise_scale < 1``; a test checks this, so the audit is not vacuous).

* ``eps_step_lower``: a one-step lower bound with confidence ``confidence``: the threshold
  ``tau`` is chosen on the first half of the steps, and on the second half the false
  positive / negative rates are bounded above by Clopper-Pearson (Bonferroni over the two);
  ``(eps, delta)``-DP implies ``FPR + e^eps FNR >= 1 - delta`` and the symmetric inequality.
  It must not exceed ``eps_step_accountant`` (the accountant's eps for ``T = 1``).
* ``eps_composed``: section 5.2 of Nasr et al.: read the same test as a Gaussian trade-off,
  ``mu = Phi^-1(1 - FPR) - Phi^-1(FNR)`` (with the upper confidence bounds), compose as
  ``mu sqrt(T)`` and convert the ``mu sqrt(T)``-GDP curve to ``eps`` at ``delta``.  An
  estimate (the per-step mechanism is a mixture, not exactly Gaussian), to compare with the
  accountant's ``eps`` for all ``T`` steps, as the paper's Figure 6(b) does.

Implementation choices
----------------------
* ``canary="fresh"`` (default) puts the canary on a coordinate that no sub-graph gradient
  touches (a white-box Dirac canary on an extra, unused parameter coordinate): the observation
  is then exactly the noise of :class:`ldpfast.privacy.dpsgd.DPOptimizer` plus the canary, the
  strongest version of the attack.  ``canary="first"`` is the literal ``[k, 0, ..., 0]`` on the
  first model coordinate, where the other sub-graphs' clipped gradients add variance.
* Algorithm 4 line 7 inserts the canary "w.p. q_b" *and* draws ``k ~ rho``; ``rho`` already
  contains the ``q_b`` central-node event, so here the canary is inserted at every step with
  ``k ~ rho`` (``k = 0`` w.p. ``rho(0)``): the worst case Theorem 2 accounts for.  Thinning it by
  another ``q_b`` would only weaken the audit.
"""
from __future__ import annotations

import argparse
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from scipy import stats

from ..._checks import check_eps, check_int, check_prob, check_real
from .report import AuditPoint, AuditReport
from .stats import clopper_pearson_upper

__all__ = ["AuditResult", "audit_heterpoisson", "eps_lower_bound", "main"]


@dataclass
class AuditResult:
    """Outcome of :func:`audit_heterpoisson` (all eps at the same ``delta``)."""

    eps_lower: float
    eps_accountant: float
    eps_step_lower: float
    eps_step_accountant: float
    eps_composed: float
    runs: int
    mu_step: float
    llr_threshold: float
    threshold: float
    fpr_upper: float
    fnr_upper: float
    sigma: float
    T: int
    q_b: float
    M: float
    delta: float
    confidence: float
    canary: str
    observations: dict[str, list[float]] | None = None
    privacy_model: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def to_report(self) -> AuditReport:
        """The same audit in the shape of the release audits (:class:`AuditReport`, relation
        ``"node-dp"``, the accountant's eps as the charge): a point at ``k = 1`` (one step:
        ``eps_step_lower`` against ``eps_step_accountant``) and one at ``k = T`` (the whole
        mechanism: ``eps_lower`` against ``eps_accountant``)."""
        pts = [AuditPoint(1, self.eps_step_lower, self.eps_step_accountant, self.eps_step_accountant,
                          f"canary coordinate > {self.threshold:.4g}", fpr_upper=self.fpr_upper,
                          fnr_upper=self.fnr_upper)]
        whole = AuditPoint(self.T, self.eps_lower, self.eps_accountant, self.eps_accountant,
                           f"summed log-likelihood ratio > {self.llr_threshold:.4g}", n0=self.runs - self.runs // 2,
                           n1=self.runs - self.runs // 2)
        pts = [whole] if self.T == 1 else pts + [whole]
        note = ("DP-SGD canary audit (paper 003 Algorithm 4): k = 1 is one step, k = T the T-step mechanism; "
                "points at other k are not computed")
        return AuditReport("heterpoisson", "node-dp", "dpsgd steps", False, False,
                           {"q_b": self.q_b, "M": self.M, "sigma": self.sigma, "T": self.T, "canary": self.canary,
                            "privacy_model": self.privacy_model}, self.runs, self.confidence, self.delta,
                           "accountant", pts,
                           notes=[note])


def _cp_upper(k: int, n: int, conf: float) -> float:
    """One-sided Clopper-Pearson upper bound on a rate from k of n."""
    return clopper_pearson_upper(int(k), int(n), conf)


def eps_lower_bound(o_with: np.ndarray, o_without: np.ndarray, delta: float, *, confidence: float = 0.95,
                    select: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[float, float, float, float, float]:
    """Lower bound on eps from a threshold test "canary present iff o > tau".

    ``select`` (observations of another sample) chooses ``tau`` (maximising the point
    estimate); the bound uses ``o_with`` / ``o_without`` with Clopper-Pearson upper bounds on
    FNR and FPR at ``confidence`` each after a Bonferroni split.  Returns
    ``(eps_lower, mu_lower, tau, fpr_upper, fnr_upper)``.
    """
    conf = check_real("confidence", confidence, 0.5, 1 - 1e-12)
    a_w, a_wo = select if select is not None else (o_with, o_without)
    taus = np.unique(np.quantile(np.concatenate([a_w, a_wo]), np.linspace(0.01, 0.99, 197)))
    best_tau, best = float(taus[0]), -math.inf
    for tau in taus:
        fpr = max(np.mean(a_wo > tau), 1.0 / (2 * len(a_wo)))
        fnr = max(np.mean(a_w <= tau), 1.0 / (2 * len(a_w)))
        e = max(math.log(max(1e-300, 1 - delta - fnr) / fpr), math.log(max(1e-300, 1 - delta - fpr) / fnr))
        if e > best:
            best, best_tau = e, float(tau)
    c2 = 1 - (1 - conf) / 2
    fpr_u = _cp_upper(int(np.sum(o_without > best_tau)), len(o_without), c2)
    fnr_u = _cp_upper(int(np.sum(o_with <= best_tau)), len(o_with), c2)
    cands = []
    if 1 - delta - fnr_u > 0 and fpr_u > 0:
        cands.append(math.log((1 - delta - fnr_u) / fpr_u))
    if 1 - delta - fpr_u > 0 and fnr_u > 0:
        cands.append(math.log((1 - delta - fpr_u) / fnr_u))
    eps_lb = max([0.0] + cands)
    mu = float(stats.norm.ppf(1 - fpr_u) - stats.norm.ppf(fnr_u)) if fpr_u < 1 and fnr_u < 1 else 0.0
    return eps_lb, max(0.0, mu), best_tau, fpr_u, fnr_u


def audit_heterpoisson(data, *, q_b: float, M: float, T: int, delta: float, eps: float | None = None,
                       sigma: float | None = None, max_grad_norm: float = 0.5, model: str = "gcn",
                       hidden: int = 16, lr: float = 0.01, canary: str = "fresh", train_model: bool = True,
                       confidence: float = 0.95, seed: int = 0, noise_scale: float = 1.0,
                       num_observations: int | None = None, runs: int = 20000,
                       keep_observations: bool = False, progress: bool = False,
                       degree_model: str = "s2_public_degrees", degree_bound: int | None = None) -> AuditResult:
    """Algorithm 4 on ``data``: empirical eps of HeterPoisson DP-SGD vs the accountant's.

    Parameters
    ----------
    data : torch_geometric.data.Data
        Graph with ``x``, ``y``, ``edge_index`` (every node is a training node).
    q_b, M, T, delta : float, float, int, float
        Sampling rate in (0, 1], multiplier > 0, the number of steps ``T >= 1`` the privacy
        claim is for (calibrates ``sigma``; the composed estimate uses ``sqrt(T)``), delta in
        (0, 1).
    eps : float, optional
        Calibrate ``sigma`` to this eps for ``T`` steps (Theorem 2); or give ``sigma``.
    max_grad_norm : float
        Clip norm ``C``.
    model, hidden, lr : the network trained while auditing (lines 3-7 and 11 of Alg. 4).
    canary : {"fresh", "first"}
        Canary coordinate (module docstring).
    train_model : bool
        Run the training steps (``False``: only the canary coordinate, which for
        ``canary="fresh"`` does not depend on them; much faster).
    confidence : float
        Confidence of the lower bound, in (0.5, 1).
    num_observations : int, optional
        Steps actually run, i.e. canary observations of the one-step mechanism (default
        ``T``; the per-step test needs a few thousand to have power).
    runs : int
        Independent ``T``-step runs of the canary coordinate for ``eps_lower`` (>= 100).
    noise_scale : float
        Multiplies the noise actually added (``1``: correct).  Values below 1 simulate an
        implementation bug; the audit should then exceed the accountant (used in tests).
    degree_model, degree_bound
        The neighbouring relation of the sampler and the accountant
        (:class:`ldpfast.sampling.HeterPoisson`); recorded as ``privacy_model``.
    seed : int
        Seeds the audit; not recorded in the result.
    """
    from ...methods.heterpoisson import build_model
    from ...sampling import HeterPoisson
    from ..accountants import HeterPoissonAccountant, heterpoisson_mixture
    from ..dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss

    q_b = check_prob("q_b", q_b, open_low=True)
    M = check_real("M", M, 0.0)
    if M <= 0:
        raise ValueError(f"M: expected a finite number > 0, got {M}")
    T = check_int("T", T, 1)
    R = check_int("num_observations", T if num_observations is None else num_observations, 2)
    runs = check_int("runs", runs, 100)
    delta = check_prob("delta", delta, open_low=True, open_high=True)
    if canary not in ("fresh", "first"):
        raise ValueError(f"canary: expected 'fresh' or 'first', got {canary!r}")
    noise_scale = check_eps("noise_scale", noise_scale)
    hidden = check_int("hidden", hidden, 1)
    seed = check_int("seed", seed, 0, 2**62)
    if canary == "first" and not train_model:
        raise ValueError("canary='first' needs train_model=True (the canary sits on a model coordinate)")
    acc = HeterPoissonAccountant(q_b, M, int(data.num_nodes), degree_model=degree_model, degree_bound=degree_bound)
    if sigma is None:
        if eps is None:
            raise ValueError("eps or sigma: one is required")
        sigma = acc.calibrate_sigma(check_eps("eps", eps), delta, T)
    sigma = check_eps("sigma", sigma)
    rep_T = acc.epsilon(sigma, T, delta)
    rep_1 = acc.epsilon(sigma, 1, delta)
    D = rep_T.worst_degree if rep_T.worst_degree is not None else math.inf
    if acc.degree_bound is not None and not math.isfinite(D):  # q_b = 1: any d <= D_pub
        D = acc.degree_bound
    s_vals, s_probs = heterpoisson_mixture(q_b, M, D if math.isfinite(D) else math.inf, rep_T.K or 12,
                                           degree_bound=acc.degree_bound)
    gen = np.random.default_rng(seed)
    ks = gen.choice(s_vals, size=R, p=s_probs)  # canary magnitudes, paper units

    torch.manual_seed(seed)
    net = build_model(model, int(data.x.shape[1]), int(data.y.max()) + 1, hidden=hidden)
    gsm = SubgraphGradSampleModule(net)
    opt = DPOptimizer(torch.optim.Adam(net.parameters(), lr=lr), gsm, sigma=sigma * noise_scale,
                      max_grad_norm=max_grad_norm, seed=seed + 1)
    sampler = HeterPoisson(data, q_b, M, seed=seed + 2, degree_model=degree_model, degree_bound=degree_bound)
    first = next(p for p in net.parameters() if p.requires_grad)
    o_w = np.empty(R)
    o_wo = np.empty(R)
    steps = range(R)
    if progress:
        from tqdm.auto import tqdm

        steps = tqdm(steps, desc="audit")
    for t in steps:
        gc = 2.0 * max_grad_norm * float(ks[t])  # canary gradient in absolute units
        if train_model:
            b = sampler.sample(t)
            opt.zero_grad()
            if b.num_subgraphs:
                out = gsm(b)
                subgraph_loss(out, b).backward()
            gsm.clip_and_accumulate(max_grad_norm)             # Alg. 1 lines 4-8
            noises = [opt._noise(p.shape).to(p.dtype) for p in net.parameters()]
        if canary == "first":
            base = float(first.grad.reshape(-1)[0])
            n0 = float(noises[0].reshape(-1)[0])
        else:  # an extra coordinate that no sub-graph gradient touches
            base, n0 = 0.0, float(opt._noise((1,))[0])
        o_w[t] = base + gc + n0                                    # <g^t, e>
        o_wo[t] = base + n0                                        # <g^t - g^c, e>
        if train_model:
            for p, z in zip(net.parameters(), noises):
                p.grad = p.grad + z                                # Alg. 4 line 9
            if canary == "first":
                first.grad.reshape(-1)[0] += gc
            opt.optimizer.step()                                   # line 11
    h = R // 2
    eps_lb, mu, tau, fpr_u, fnr_u = eps_lower_bound(o_w[h:], o_wo[h:], delta, confidence=confidence,
                                                    select=(o_w[:h], o_wo[:h]))
    from ..accountants import gaussian_epsilon

    eps_comp = gaussian_epsilon(mu * math.sqrt(T), 1.0, 1, delta) if mu > 0 else 0.0

    # Whole-mechanism test: `runs` independent T-step runs of the fresh canary coordinate,
    # statistic = sum over steps of the log-likelihood ratio of the claimed mixture vs N(0, s^2).
    s_abs = 2.0 * max_grad_norm * sigma
    kk = gen.choice(s_vals, size=(runs, T), p=s_probs) * (2.0 * max_grad_norm)
    z = opt._noise((2, runs, T)).double().numpy()
    mu_i = (2.0 * max_grad_norm * np.asarray(s_vals))[None, None, :]
    logp = np.log(np.asarray(s_probs))[None, None, :]

    def llr(o):
        a = logp - 0.5 * ((o[..., None] - mu_i) / s_abs) ** 2
        m = a.max(-1, keepdims=True)
        return (m[..., 0] + np.log(np.exp(a - m).sum(-1)) + 0.5 * (o / s_abs) ** 2).sum(-1)

    S_w, S_wo = llr(kk + z[0]), llr(z[1])
    hr = runs // 2
    eps_run, _, tau_run, _, _ = eps_lower_bound(S_w[hr:], S_wo[hr:], delta, confidence=confidence,
                                                select=(S_w[:hr], S_wo[:hr]))
    obs = {"with": o_w.tolist(), "without": o_wo.tolist()} if keep_observations else None
    return AuditResult(eps_lower=eps_run, eps_accountant=rep_T.eps, eps_step_lower=eps_lb,
                       eps_step_accountant=rep_1.eps, eps_composed=eps_comp, runs=runs, mu_step=mu,
                       llr_threshold=tau_run, threshold=tau, fpr_upper=fpr_u, fnr_upper=fnr_u, sigma=sigma, T=T,
                       q_b=q_b, M=M, delta=delta, confidence=confidence, canary=canary, observations=obs,
                       privacy_model=acc.model)


def main(argv: list[str] | None = None) -> int:
    """``python -m ldpfast.privacy.audit``: Algorithm 4 on a real dataset, printed as JSON."""
    import json

    from ...datasets import load

    p = argparse.ArgumentParser(prog="python -m ldpfast.privacy.audit", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", default="facebook", choices=["facebook", "twitch-de"])
    p.add_argument("--eps", nargs="+", type=float, default=[2.0, 4.0, 8.0, 16.0])
    p.add_argument("--M", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=4096)
    p.add_argument("--T", type=int, default=None, help="steps (default ceil(9 / q_b))")
    p.add_argument("--observations", type=int, default=4000, help="canary observations (steps run)")
    p.add_argument("--canary", choices=["fresh", "first"], default="fresh")
    p.add_argument("--no-train", action="store_true", help="skip the training steps (canary coordinate only)")
    p.add_argument("--root", default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    data = load(a.dataset, root=a.root, feature_dim=128)
    n = int(data.num_nodes)
    q_b = min(1.0, a.batch / n)
    T = a.T or math.ceil(9 / q_b)
    delta = 1 / n ** 1.1
    out = []
    for e in a.eps:
        r = audit_heterpoisson(data, q_b=q_b, M=a.M, T=T, delta=delta, eps=e, canary=a.canary,
                               train_model=not a.no_train, seed=a.seed, num_observations=a.observations,
                               progress=True)
        d = r.to_dict()
        d.pop("observations")
        d["eps_target"] = e
        out.append(d)
        print(json.dumps(d))
    ok = all(d["eps_lower"] <= d["eps_accountant"] and d["eps_step_lower"] <= d["eps_step_accountant"]
             for d in out)
    print("audit:", "empirical eps below the accountant's" if ok else "VIOLATION: empirical eps above the accountant's")
    return 0 if ok else 1


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
