"""Argument checking of the ``ldpfast`` command line (and of the ``ldpfast reproduce`` parsers).

Every bad value is refused while the arguments are parsed, before any work, in one line in
argparse's own form, naming the option and what it accepts::

    ldpfast demo: error: --eps-x: expected a number > 0, got -1

:class:`ArgumentParser` prints that line (without argparse's usage block) and exits with
status 2; the argparse ``type=`` callables below name the allowed values.  Errors the library
raises for user input after parsing (``ValueError``, ``TypeError``, a missing file) are turned
into the same one line by :func:`run_command`; ``--debug`` (or ``LDPFAST_DEBUG=1``) shows the
traceback instead.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import tempfile
from pathlib import Path

SEED_MAX = 2**64 - 1


class UsageError(Exception):
    """A combination of options that cannot run (``--edges`` without ``--edge-eps``, ...):
    reported as ``<prog>: error: <message>``, exit status 2."""


class ArgumentParser(argparse.ArgumentParser):
    """argparse, with errors on one line (``<prog>: error: --opt: what it accepts, got X``)
    instead of the usage block followed by the error; ``--help`` still shows the usage.
    Sub-parsers made by :meth:`add_subparsers` are of this class too."""

    def error(self, message: str):
        message = message.removeprefix("argument ")  # "argument --eps-x: ..." -> "--eps-x: ..."
        self.exit(2, f"{self.prog}: error: {message}\n")


def _show(text: str) -> str:
    return repr(text) if not text or text != text.strip() or " " in text else text


def number(lo: float | None = None, *, low_open: bool = True, hi: float | None = None,
           high_open: bool = False):
    """argparse ``type=``: a finite real number in the given range."""
    parts = []
    if lo is not None:
        parts.append(f"{'>' if low_open else '>='} {lo:g}")
    if hi is not None:
        parts.append(f"{'<' if high_open else '<='} {hi:g}")
    want = "a number" + (" " + " and ".join(parts) if parts else "")

    def parse(text: str) -> float:
        try:
            v = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {_show(text)}") from None
        if (not math.isfinite(v) or (lo is not None and (v <= lo if low_open else v < lo))
                or (hi is not None and (v >= hi if high_open else v > hi))):
            raise argparse.ArgumentTypeError(f"expected {want}, got {_show(text)}")
        return v

    parse.__name__ = want  # argparse names the type in some messages
    return parse


def integer(lo: int | None = None, hi: int | None = None, *, want: str | None = None):
    """argparse ``type=``: an integer in ``[lo, hi]`` (``want``: how the message names it)."""
    if want is None:
        want = ("an integer" + (f" in [{lo}, {hi}]" if lo is not None and hi is not None else "")
                + (f" >= {lo}" if lo is not None and hi is None else ""))

    def parse(text: str) -> int:
        try:
            v = int(text, 0) if text.strip().lower().startswith("0x") else int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {want}, got {_show(text)}") from None
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            raise argparse.ArgumentTypeError(f"expected {want}, got {_show(text)}")
        return v

    parse.__name__ = want
    return parse


#: argparse ``type=`` of a secret seed: an integer in ``[0, 2**64)``.
seed = integer(0, SEED_MAX, want="an integer in [0, 2**64)")


def device(text: str) -> str:
    """argparse ``type=``: ``cpu``, ``cuda`` or ``cuda:N``."""
    t = text.strip().lower()
    if t in ("cpu", "cuda") or (t.startswith("cuda:") and t[5:].isdigit()):
        return t
    raise argparse.ArgumentTypeError(f"expected cpu, cuda or cuda:N, got {_show(text)}")


def existing_dir(text: str) -> Path:
    """argparse ``type=``: a folder that exists."""
    p = Path(text).expanduser()
    if not p.is_dir():
        raise argparse.ArgumentTypeError(
            f"expected an existing folder, got {_show(text)} ({'a file' if p.exists() else 'no such folder'})")
    return p


def existing_file(text: str) -> Path:
    """argparse ``type=``: a readable file that exists."""
    p = Path(text).expanduser()
    if not p.is_file():
        raise argparse.ArgumentTypeError(
            f"expected an existing file, got {_show(text)} ({'a folder' if p.is_dir() else 'no such file'})")
    if not os.access(p, os.R_OK):
        raise argparse.ArgumentTypeError(f"expected a readable file, got {_show(text)} (permission denied)")
    return p


def output_file(text: str) -> Path:
    """argparse ``type=``: a file this process can write (its folder may not exist yet: the
    nearest existing ancestor must be a writable folder).  Checked before any work, so that a
    long run does not end on an unwritable path."""
    p = Path(text).expanduser()
    if p.is_dir():
        raise argparse.ArgumentTypeError(f"expected a file path, got {_show(text)} (a folder)")
    _check_writable(text, p.parent)
    return p


def output_dir(text: str) -> Path:
    """argparse ``type=``: a folder to write into (created if missing; its nearest existing
    ancestor must be a writable folder)."""
    p = Path(text).expanduser()
    if p.exists() and not p.is_dir():
        raise argparse.ArgumentTypeError(f"expected a folder, got {_show(text)} (a file)")
    _check_writable(text, p)
    return p


def _check_writable(text: str, folder: Path) -> None:
    anc = folder.absolute()
    while not anc.exists() and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        raise argparse.ArgumentTypeError(f"cannot write {_show(text)}: {anc} is not a folder")
    try:  # a probe, not os.access: root passes every access check, and /proc refuses files
        with tempfile.TemporaryFile(dir=anc):
            pass
    except OSError as e:
        raise argparse.ArgumentTypeError(f"cannot write {_show(text)}: {anc} is not writable "
                                         f"({e.strerror})") from None


def run_command(fn, parsed: dict) -> int:
    """Run ``fn`` (parse and run one command); the errors the library raises for bad user
    input become one line ``<prog>: error: <message>`` with exit status 2 (a missing GPU or
    device memory: status 1), the traceback only with ``--debug`` or ``LDPFAST_DEBUG=1``.
    Other exceptions are bugs and keep their traceback.  ``parsed["args"]`` holds the parsed
    arguments once parsing succeeded (argparse reports its own errors and exits)."""
    from ._backend import BackendUnavailable
    from ._oom import DeviceOutOfMemory

    def prog_debug():
        args = parsed.get("args")
        cmd = getattr(args, "cmd", None)
        prog = "ldpfast" + (f" {cmd}" if cmd else "")
        if cmd == "reproduce" and getattr(args, "method", None):
            prog += f" {args.method}"
        debug = bool(getattr(args, "debug", False)) or os.environ.get("LDPFAST_DEBUG", "") not in ("", "0")
        return prog, debug

    try:
        return int(fn() or 0)
    except KeyboardInterrupt:
        prog, debug = prog_debug()
        if debug:
            raise
        print(f"{prog}: interrupted", file=sys.stderr)
        return 130
    except (UsageError, ValueError, TypeError, OSError, BackendUnavailable, DeviceOutOfMemory) as e:
        prog, debug = prog_debug()
        if debug:
            raise
        msg = str(e) or type(e).__name__
        if isinstance(e, OSError) and e.filename is not None and str(e.filename) not in msg:
            msg = f"{e.strerror or msg}: {e.filename}"
        print(f"{prog}: error: {msg}", file=sys.stderr)
        return 1 if isinstance(e, (BackendUnavailable, DeviceOutOfMemory)) else 2
