"""Test secrets: memoised reports (user keys, a store) refuse int seeds, so the tests that used
small ints there use these fixed 24-byte secrets (distinct per int; never for real data)."""


def sec(i: int) -> bytes:
    """A fixed test secret of 24 bytes, one per int ``i``."""
    return b"ldpfast-test-key" + int(i).to_bytes(8, "little")
