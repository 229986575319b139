"""Shared test set-up.

Tests never use the network: ``LDPFAST_OFFLINE=1`` turns off dataset downloads (the
download path is tested with mocks in test_datasets.py).  Cora is embedded in the package;
tests that need another real dataset skip, with the reason, when it is not on disk
(``../shared/datasets``, ``LDPFAST_DATA`` or the user cache): use :func:`load_or_skip` or
:func:`require_datasets` (``from conftest import ...``).
"""
import os

os.environ.setdefault("LDPFAST_OFFLINE", "1")

import random

import numpy as np
import pytest
import torch

import ldpfast


@pytest.fixture(autouse=True)
def _fixed_global_rngs():
    """Every test starts from the same global torch / NumPy / random state, so data a test
    draws without its own generator is the same on every run (ldpfast's own draws take
    explicit seeds, or fresh OS bits for seed=None, and are not affected)."""
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)


def _missing_reason(name: str) -> str:
    return (f"dataset {name!r} is not on this machine (not embedded; not found in "
            "LDPFAST_DATA, ../shared/datasets or the user cache; tests do not download)")


def load_or_skip(name: str, **kwargs):
    """``ldpfast.datasets.load(name, **kwargs)`` without downloading, or skip the test."""
    from ldpfast.datasets import load

    try:
        return load(name, download=False, **kwargs)
    except FileNotFoundError:
        pytest.skip(_missing_reason(name))


def require_datasets(*names: str) -> None:
    """Skip the test unless every named dataset can be read without a download."""
    from ldpfast.datasets import locate

    for name in names:
        if locate(name) is None:
            pytest.skip(_missing_reason(name))


@pytest.fixture
def threads():
    """Run a block at a given C++/Numba thread count, restoring the default afterwards."""
    import ldpfast._C as C

    def set_(n):
        ldpfast.set_num_threads(n)

    yield set_
    C.set_num_threads(0)


@pytest.fixture
def one_thread():
    """One torch intra-op thread for the test (training runs whose results are compared or
    bounded), restored afterwards."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
