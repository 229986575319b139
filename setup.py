"""Builds ldpfast._C: a plain pybind11 C++17 module (no libtorch, no OpenMP runtime).

Threads are std::thread; randomness is counter-based, so results do not depend on the
thread count.  The CUDA sources in csrc/cuda are compiled at run time through CuPy/NVRTC
and are shipped as package data (see csrc_dir in ldpfast/_cuda/_core.py).
"""
import glob
import os
import shutil

from pybind11.setup_helpers import ParallelCompile, Pybind11Extension, build_ext
from setuptools import setup

HERE = os.path.dirname(os.path.abspath(__file__))

# The sources of the one extension compile in parallel (one job per core unless
# LDPFAST_BUILD_JOBS says otherwise); setuptools' own -j only runs extensions in parallel.
ParallelCompile("LDPFAST_BUILD_JOBS", default=0).install()

sources = sorted(glob.glob(os.path.join("csrc", "cpu", "*.cpp")))
# Headers: a header-only edit must rebuild the extension (setuptools compares mtimes).
headers = sorted(glob.glob(os.path.join("csrc", "common", "*.h")) + glob.glob(os.path.join("csrc", "cpu", "*.h")))
ext = Pybind11Extension(
    "ldpfast._C",
    sources,
    include_dirs=[os.path.join(HERE, "csrc")],
    depends=headers,
    cxx_std=17,
    # -ffp-contract=off: no fused multiply-add, so the float maths behind random draws
    # (det_log in csrc/common/detmath.h) gives the same bits as NumPy, Numba and CUDA.
    extra_compile_args=["-O3", "-ffp-contract=off", "-fno-fast-math"],
    extra_link_args=["-pthread"],
)


class BuildExt(build_ext):
    """Also copy csrc/ into the package so the CUDA sources travel with a wheel, and the
    benchmark scripts (benchmarks/ -> ldpfast/_bench/benchmarks) so that ``ldpfast bench``
    runs from an installed wheel.  An in-place (editable) build copies nothing: the checkout
    has both."""

    def run(self):
        super().run()
        for src, dst in (("csrc", ("csrc",)), ("benchmarks", ("_bench", "benchmarks"))):
            to = os.path.join(self.build_lib, "ldpfast", *dst)
            if os.path.isdir(os.path.join(HERE, src)) and os.path.abspath(to) != os.path.join(HERE, "ldpfast", *dst):
                shutil.copytree(os.path.join(HERE, src), to, dirs_exist_ok=True,
                                ignore=shutil.ignore_patterns("__pycache__", "results"))


setup(ext_modules=[ext], cmdclass={"build_ext": BuildExt})
