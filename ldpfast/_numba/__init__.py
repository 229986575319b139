"""Numba twins of the C++ kernels (fallback backend, and LDPFAST_BACKEND=numba).

Each module mirrors one file of ``csrc/cpu`` and uses :mod:`ldpfast._numba.rng`, the twin
of ``csrc/common/rng.h``, so outputs are bit-identical to the C++ kernels.
"""
