"""Privacy spent by one mechanism call, and a ledger of calls (sequential composition)."""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class Ledger:
    """A list of :class:`Spent` entries; totals by sequential composition per target."""

    def __init__(self, entries: list[Spent] | None = None):
        self.entries: list[Spent] = list(entries or [])

    def add(self, spent: Spent) -> Ledger:
        self.entries.append(spent)
        return self

    @property
    def eps(self) -> float:
        """Total epsilon (basic composition: sum over entries)."""
        return float(sum(e.eps for e in self.entries))

    @property
    def delta(self) -> float:
        return float(sum(e.delta for e in self.entries))

    def by_target(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for e in self.entries:
            out[e.target] = out.get(e.target, 0.0) + e.eps
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"eps": self.eps, "delta": self.delta, "by_target": self.by_target(),
                "entries": [e.to_dict() for e in self.entries]}

    def __repr__(self) -> str:
        parts = ", ".join(f"{e.mechanism}({e.target})={e.eps:g}" for e in self.entries)
        return f"Ledger(eps={self.eps:g}, delta={self.delta:g}: {parts})"

    @classmethod
    def of(cls, data) -> Ledger:
        """The ledger recorded on a PyG ``Data`` by ldpfast transforms (empty if none)."""
        led = getattr(data, "ldp_ledger", None)
        return led if isinstance(led, Ledger) else cls()
