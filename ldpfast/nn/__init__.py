"""PyG modules: :class:`KProp` (LPGNN Algorithm 2)."""
from .kprop import KProp  # noqa: F401
