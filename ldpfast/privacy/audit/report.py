"""What an audit returns: :class:`AuditReport` (one relation, eps_lb and the charge against the
number of releases ``k``), saved as JSON and drawn as a plot."""
from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["AuditPoint", "AuditReport", "plot_reports"]

#: A bound above the charge by less than this (relative) is rounding, not a refutation.
_REL_TOL = 1e-9


@dataclass
class AuditPoint:
    """The audit after the first ``releases`` releases.

    Attributes
    ----------
    releases : int
        ``k``: the releases observed (1, 2, ...; for DP-SGD, the steps).
    eps_lb : float
        Lower bound on eps at the report's ``confidence`` (0 when the test has no power).
    charge : float
        The largest total charged to a canary (either world) in this relation after ``k``
        releases: by the report store, the ledger of :class:`~ldpfast.privacy.Spent` entries,
        or the accountant (see :attr:`AuditReport.charge_source`).
    charge_min : float
        The smallest such total.
    test : str
        The test chosen on the selection half (e.g. ``"flips >= 1"``).
    fpr, fnr : float
        Its error rates on the measurement half.
    fpr_upper, fnr_upper : float
        Their Clopper-Pearson upper bounds (each at ``1 - (1 - confidence) / 2``).
    n0, n1 : int
        Canaries measured in world 0 and world 1.
    eps_select : float
        The bound the test gave on the selection half (how it was chosen; not a result).
    """

    releases: int
    eps_lb: float
    charge: float
    charge_min: float
    test: str = ""
    fpr: float = math.nan
    fnr: float = math.nan
    fpr_upper: float = math.nan
    fnr_upper: float = math.nan
    n0: int = 0
    n1: int = 0
    eps_select: float = math.nan

    @property
    def refuted(self) -> bool:
        """``eps_lb > charge``: the charge is refuted at the report's confidence."""
        return self.eps_lb > self.charge * (1 + _REL_TOL)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "refuted": self.refuted}


@dataclass
class AuditReport:
    """An empirical lower bound on eps beside the charge, for one neighbouring relation.

    Read it as: with probability at least ``confidence`` over the randomness of the canaries'
    reports, every eps that the mechanism satisfies (for the canaries' pair of inputs, under
    the change model) is at least ``eps_lb``.  So ``eps_lb > charge`` refutes the charge at
    that confidence; ``eps_lb <= charge`` proves nothing (it is not an upper bound).  Each point
    is a bound at ``confidence`` on its own; all points at once hold with probability at least
    :attr:`confidence_joint` (Bonferroni).

    Attributes
    ----------
    mechanism : str
        What was audited (``"RREdges"``, ``"MultiBit+RRLabels"``, ``"heterpoisson"``).
    relation : str
        ``"node-ldp"``, ``"edge-ldp"`` or ``"node-dp"`` (:data:`ldpfast.privacy.RELATIONS`).
    change : str
        The change model (:data:`ldpfast.privacy.audit.CHANGE_MODELS`).
    keyed, store : bool
        Whether the reports were keyed to users and accounted in a report store.
    params : dict
        The public parameters of each stage (never the secret).
    canaries : int
        Canary trials per world (half chose the test, the rest measured it).
    confidence : float
        Confidence of each point's bound.
    delta : float
        Delta of the claim tested (0 for the local randomisers).
    charge_source : str
        ``"store"`` (the report store's per-user totals), ``"ledger"`` (the sum of the
        releases' :class:`~ldpfast.privacy.Spent` entries) or ``"accountant"`` (DP-SGD).
    points : list of AuditPoint
        One per ``k`` (releases observed).
    releases_log : list of dict
        Per release: the stages' eps and, with a store, its counts (new, reused, withheld).
    notes : list of str
        What the reader should know (e.g. why a point has no power).
    """

    mechanism: str
    relation: str
    change: str
    keyed: bool
    store: bool
    params: dict
    canaries: int
    confidence: float
    delta: float
    charge_source: str
    points: list[AuditPoint] = field(default_factory=list)
    releases_log: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def eps_lb(self) -> float:
        """The largest bound over the points (0 without points)."""
        return max((p.eps_lb for p in self.points), default=0.0)

    @property
    def charge(self) -> float:
        """The charge after the last release."""
        return self.points[-1].charge if self.points else math.nan

    @property
    def refuted(self) -> bool:
        """Whether any point's bound exceeds its charge."""
        return any(p.refuted for p in self.points)

    @property
    def confidence_joint(self) -> float:
        """Confidence that every point's bound holds at once (Bonferroni over the points)."""
        return max(0.0, 1.0 - len(self.points) * (1.0 - self.confidence))

    def point(self, k: int) -> AuditPoint:
        """The point after ``k`` releases."""
        for p in self.points:
            if p.releases == k:
                return p
        raise KeyError(f"k: no point after {k} releases (have {[p.releases for p in self.points]})")

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: every field, each point with ``refuted``, and the summary fields
        ``eps_lb``, ``charge``, ``refuted``, ``confidence_joint``."""
        d = {k: v for k, v in asdict(self).items() if k != "points"}
        d["points"] = [p.to_dict() for p in self.points]
        d.update(eps_lb=self.eps_lb, charge=self.charge, refuted=self.refuted,
                 confidence_joint=self.confidence_joint)
        return d

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write :meth:`to_dict` to ``path`` (folders created); returns the path."""
        p = Path(path)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(self.to_dict(), indent=1, default=str))
        return p

    def summary(self) -> str:
        """A few lines: the setting, then ``k``, eps_lb, the charge and the verdict per point."""
        how = ("store" if self.store else "no store") + (", user keys" if self.keyed else ", rows as users")
        head = (f"audit {self.mechanism} [{self.relation}] change={self.change} ({how}); "
                f"{self.canaries} canaries per world, {self.confidence:.3g} confidence per point")
        lines = [head]
        for p in self.points:
            verdict = "REFUTED" if p.refuted else "ok"
            lines.append(f"  k={p.releases}: eps_lb {p.eps_lb:.3f}  charge {p.charge:.4g}"
                         + (f" (min {p.charge_min:.4g})" if p.charge_min != p.charge else "")
                         + f"  [{verdict}]  test: {p.test}")
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)

    def plot(self, path: str | os.PathLike, *, title: str | None = None) -> Path:
        """Save eps_lb and the charge against ``k`` as a PNG (matplotlib); returns the path."""
        return plot_reports([self], path, title=title)


def plot_reports(reports: list[AuditReport], path: str | os.PathLike, *, title: str | None = None) -> Path:
    """One panel per report: eps_lb (with the points that refute the charge marked) and the
    charge (the largest canary total, and the smallest where they differ) against the number
    of releases ``k``.  Saved as a PNG at ``path``."""
    from matplotlib.figure import Figure  # no pyplot: the caller's backend is left alone

    if not reports:
        raise ValueError("reports: nothing to plot")
    n = len(reports)
    fig = Figure(figsize=(4.2 * n, 3.4))
    axes = fig.subplots(1, n, squeeze=False)
    for ax, r in zip(axes[0], reports):
        ks = [p.releases for p in r.points]
        ax.plot(ks, [p.charge for p in r.points], "s-", color="tab:blue", label=f"charge ({r.charge_source})")
        if any(p.charge_min != p.charge for p in r.points):
            ax.plot(ks, [p.charge_min for p in r.points], "s:", color="tab:blue", alpha=0.6, label="charge (min)")
        ax.plot(ks, [p.eps_lb for p in r.points], "o-", color="tab:orange",
                label=f"eps_lb ({r.confidence:.3g} CP)")
        bad = [p for p in r.points if p.refuted]
        if bad:
            ax.plot([p.releases for p in bad], [p.eps_lb for p in bad], "x", color="red", markersize=11,
                    mew=2.5, label="charge refuted")
        ax.set_xlabel("steps" if r.relation == "node-dp" else "releases k")
        ax.set_ylabel("eps")
        ax.set_xticks(ks)
        ax.set_ylim(bottom=0)
        ax.set_title(f"{r.mechanism} [{r.relation}]\nchange={r.change}, "
                     + ("store" if r.store else "no store") + (", keyed" if r.keyed else ""), fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=110)
    return p
