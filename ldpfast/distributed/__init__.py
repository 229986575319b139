"""Beyond one machine (issue 13).

* :mod:`.ddp`: data-parallel HeterPoisson DP-SGD over ``torch.distributed`` (torchrun).
* :mod:`.shards`: sharded randomisation of a graph stored as row-block Parquet shards on a
  Dask cluster, bit-identical to the single-machine mechanisms (needs ``ldpfast[distributed]``).

See ``docs/scaling.md``.
"""
from __future__ import annotations

__all__ = ["ddp", "shards"]


def __getattr__(name):  # lazy: shards imports dask / pyarrow, ddp imports torch.distributed
    if name in __all__:
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(name)
