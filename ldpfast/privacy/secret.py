"""Secrets that cannot be guessed: what memoised reports are keyed under.

A memoised report (a transform with ``user_key=``, a functional mechanism given ``user_keys``,
anything recorded in a :class:`~ldpfast.privacy.ReportStore`) is a deterministic function of
the secret, the user's key, the parameters and the user's input.  The derivation is public
(:mod:`ldpfast.privacy.users`), so whoever holds a release (or the store file, with its report
ids) and can enumerate the secret recomputes every report for every candidate input and reads
the inputs back: with the README's old example secret ``2024``, a search of the small ints took
0.4 s and then recovered 100% of the stored labels (issue 37, finding 5).  A secret must
therefore carry at least 128 bits of entropy wherever reports are memoised.

* :func:`new_secret` draws 32 bytes from the OS (``secrets.token_bytes``) and, given a path,
  writes them to a key file only the owner can read (mode 0600), refusing to overwrite one.
* :func:`load_secret` reads a key file (``create=True``: make it the first time).
* Every ``seed=`` of a memoising call accepts such ``bytes`` (16 bytes or more).  An ``int``
  is refused there, with an error that says how to make a secret; calls that memoise nothing
  (rows are the users of one graph, one release) still take an int seed, which makes
  experiments repeatable.

Length alone does not prove entropy: ``b"\\x00" * 32`` passes the check.  The check stops the
common mistakes (a small int, a short passphrase); the rest is the caller's key management.
"""
from __future__ import annotations

import os
import secrets as _os_secrets
from pathlib import Path

import numpy as np

__all__ = ["MIN_SECRET_BYTES", "load_secret", "new_secret", "resolve_secret"]

#: The shortest secret a memoised report accepts (128 bits).
MIN_SECRET_BYTES = 16
_SECRET_BYTES = 32  # what new_secret draws
_HOW = ("make one with ldpfast.privacy.new_secret('secret.key') (32 random bytes in a key file "
        "only you can read) and pass seed=ldpfast.privacy.load_secret('secret.key'), or on the command "
        "line `ldpfast secret new secret.key`")


def new_secret(path: str | os.PathLike | None = None) -> bytes:
    """Draw a fresh 256-bit secret from the OS; with ``path``, also write it to a new key file.

    Parameters
    ----------
    path : str or os.PathLike, optional
        Where to keep the secret (created with mode 0600; an existing file is never
        overwritten: losing a secret makes every memoised report unrepeatable, and each user's
        next release a new, charged report).

    Returns
    -------
    bytes
        32 random bytes, to pass as ``seed=`` wherever reports are memoised.

    Raises
    ------
    FileExistsError
        If ``path`` exists (use :func:`load_secret`).
    """
    key = _os_secrets.token_bytes(_SECRET_BYTES)
    if path is not None:
        p = Path(path)
        try:
            fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise FileExistsError(f"path: {p} already exists; load it with ldpfast.privacy.load_secret({str(p)!r}) "
                                  "(new_secret never overwrites a key file)") from None
        with os.fdopen(fd, "wb") as f:
            f.write(key)
            f.flush()
            os.fsync(f.fileno())
    return key


def load_secret(path: str | os.PathLike, *, create: bool = False) -> bytes:
    """Read a secret written by :func:`new_secret`.

    Parameters
    ----------
    path : str or os.PathLike
        The key file.
    create : bool
        Make the file with :func:`new_secret` if it does not exist (default False: a missing
        key file is an error, since a new secret re-reports every user).

    Returns
    -------
    bytes
        The secret (at least 16 bytes).
    """
    p = Path(path)
    if not p.exists():
        if create:
            return new_secret(p)
        raise FileNotFoundError(f"path: no key file at {p}; create it once with ldpfast.privacy.new_secret({str(p)!r}) "
                                "or load_secret(path, create=True)")
    key = p.read_bytes()
    if len(key) < MIN_SECRET_BYTES:
        raise ValueError(f"path: {p} holds {len(key)} bytes; a secret needs at least {MIN_SECRET_BYTES} "
                         f"(128 bits): {_HOW}")
    return key


def resolve_secret(seed, *, memoised: bool, name: str = "seed") -> bytes:
    """The secret of one keying as bytes, validated.

    Parameters
    ----------
    seed : bytes, int or None
        ``bytes`` (or ``bytearray``) of at least 16 bytes: used as given (8 bytes, the
        encoding of a resolved int, only where nothing is memoised).  ``int`` in
        ``[0, 2**64)``: accepted only when nothing is memoised (``memoised=False``), encoded as
        its 8 little-endian bytes (the encoding of earlier versions, so int-seeded results are
        unchanged).  ``None``: 32 fresh bytes from the OS.
    memoised : bool
        Whether reports made under this secret are memoised (user keys, a store): then only
        a secret of at least 128 bits is accepted.
    name : str
        The parameter's name in error messages.
    """
    if seed is None:
        return _os_secrets.token_bytes(_SECRET_BYTES)
    if isinstance(seed, (bytes, bytearray, memoryview)):
        b = bytes(seed)
        if len(b) == 8 and not memoised:  # an int seed already resolved (its legacy encoding)
            return b
        if len(b) < MIN_SECRET_BYTES:
            raise ValueError(f"{name}: a secret of {len(b)} bytes is too short; at least {MIN_SECRET_BYTES} bytes "
                             f"(128 bits) are needed: {_HOW}")
        return b
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)):
        raise TypeError(f"{name}: expected bytes (a secret of >= {MIN_SECRET_BYTES} bytes), an int in [0, 2**64) "
                        f"where nothing is memoised, or None; got {type(seed).__name__}")
    v = int(seed)
    if not 0 <= v < 2**64:
        raise ValueError(f"{name}: expected an int in [0, 2**64), got {v}")
    if memoised:
        raise ValueError(
            f"{name}: an int secret is refused where reports are memoised (user_key/user_keys or a store): the "
            "derivation is public, so whoever holds a release or the store file can try every small int and "
            f"read the inputs back. Use a secret of at least {MIN_SECRET_BYTES} bytes: {_HOW}")
    return v.to_bytes(8, "little")


def secret_bytes(secret) -> bytes:
    """The bytes a derivation hashes for a resolved secret (``bytes`` as is, a legacy int as 8
    little-endian bytes); internal."""
    if isinstance(secret, (bytes, bytearray)):
        return bytes(secret)
    return int(secret).to_bytes(8, "little")
