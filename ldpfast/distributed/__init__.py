"""Beyond one machine.

* :mod:`.ddp`: data-parallel HeterPoisson DP-SGD over ``torch.distributed`` (torchrun).
* :mod:`.shards`: sharded randomisation of a graph stored as row-block Parquet shards on a
  Dask cluster, bit-identical to the single-machine mechanisms (needs ``ldpfast[distributed]``).

See ``docs/scaling.md``.
"""
from __future__ import annotations

from .._lazy import lazy_submodules as _lazy_submodules

__all__ = ["ddp", "shards"]

# lazy: shards imports dask / pyarrow, ddp imports torch.distributed
__getattr__, __dir__ = _lazy_submodules(__name__, __all__, globals())
