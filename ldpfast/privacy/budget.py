"""Privacy spent by one mechanism call, and a ledger of calls (sequential composition within
each neighbouring relation; relations are never added together)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from .store import relation_of


@dataclass(frozen=True)
class Spent:
    """What one randomiser spent.

    Attributes
    ----------
    mechanism : str
        e.g. ``"grr"``, ``"grr_fs"``, ``"multibit"``, ``"rr_labels"``, ``"dprr"``.
    target : str
        What was protected: ``"features"``, ``"labels"``, ``"edges"``, ``"nodes"``.
    eps : float
        Epsilon of the guarantee (per user / per node as the mechanism states).
    delta : float
        Delta (0 for pure LDP).
    guarantee : str
        e.g. ``"eps-LDP"``, ``"edge eps-LDP"``, ``"(eps, delta) node-DP"``.
    params : dict
        The public parameters used (``m``, ``eps_x``, ...).  Never the seed: it rebuilds
        the noise, so it stays with the caller.
    """

    mechanism: str
    target: str
    eps: float
    delta: float = 0.0
    guarantee: str = "eps-LDP"
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def relation(self) -> str:
        """The neighbouring relation protected: ``"node-ldp"`` (features, labels),
        ``"edge-ldp"`` (edges) or ``"node-dp"`` (nodes, central DP)."""
        return relation_of(self.target)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "relation": self.relation}


class Ledger:
    """A list of :class:`Spent` entries; totals by sequential composition per relation.

    Node-level LDP of a user's attributes (features, labels), edge LDP of one neighbour bit
    and node-level central DP protect different neighbouring datasets: their epsilons are not
    added (:meth:`by_relation`; :attr:`eps` refuses a ledger that mixes them)."""

    def __init__(self, entries: list[Spent] | None = None):
        self.entries: list[Spent] = list(entries or [])

    def add(self, spent: Spent) -> Ledger:
        self.entries.append(spent)
        return self

    def _one_relation(self, what: str) -> None:
        rels = sorted({e.relation for e in self.entries})
        if len(rels) > 1:
            raise ValueError(f"Ledger.{what}: this ledger holds {len(rels)} privacy relations ({', '.join(rels)}), "
                             "which protect different neighbouring datasets and do not add up; use "
                             "ledger.by_relation() (or print the ledger)")

    @property
    def eps(self) -> float:
        """Total epsilon of a ledger of one relation (basic composition: sum over entries)."""
        self._one_relation("eps")
        return float(sum(e.eps for e in self.entries))

    @property
    def delta(self) -> float:
        self._one_relation("delta")
        return float(sum(e.delta for e in self.entries))

    def by_relation(self) -> dict[str, dict[str, float]]:
        """``{relation: {"eps": ..., "delta": ...}}``, each by sequential composition."""
        out: dict[str, dict[str, float]] = {}
        for e in self.entries:
            r = out.setdefault(e.relation, {"eps": 0.0, "delta": 0.0})
            r["eps"] += e.eps
            r["delta"] += e.delta
        return out

    def summary(self) -> str:
        """One short line per relation, e.g. ``node-ldp eps 2 (multibit 1 + rr_labels 1)``."""
        lines = []
        for rel, tot in self.by_relation().items():
            parts = " + ".join(f"{e.mechanism} {e.eps:g}" for e in self.entries if e.relation == rel)
            d = f", delta {tot['delta']:g}" if tot["delta"] else ""
            lines.append(f"{rel} eps {tot['eps']:g}{d} ({parts})")
        return "\n".join(lines) or "no privacy spent"

    def by_target(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e.target] = out.get(e.target, 0.0) + e.eps
        return out

    def to_dict(self) -> dict[str, Any]:
        rel = self.by_relation()
        one = len(rel) <= 1
        return {"eps": self.eps if one else None, "delta": self.delta if one else None, "by_relation": rel,
                "by_target": self.by_target(), "entries": [e.to_dict() for e in self.entries]}

    def __repr__(self) -> str:
        parts = ", ".join(f"{e.mechanism}({e.target})={e.eps:g}" for e in self.entries)
        tot = "; ".join(f"{r} eps={t['eps']:g}, delta={t['delta']:g}" for r, t in self.by_relation().items())
        return f"Ledger({tot or 'empty'}: {parts})"

    @classmethod
    def of(cls, data) -> Ledger:
        """The ledger recorded on a PyG ``Data`` by ldpfast transforms (empty if none)."""
        led = getattr(data, "ldp_ledger", None)
        return led if isinstance(led, Ledger) else cls()
