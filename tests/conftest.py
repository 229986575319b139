import pytest

import ldpfast


@pytest.fixture
def threads():
    """Run a block at a given C++/Numba thread count, restoring the default afterwards."""
    import ldpfast._C as C

    def set_(n):
        ldpfast.set_num_threads(n)

    yield set_
    C.set_num_threads(0)
