"""Cache keys of :class:`~ldpfast.datasets.GraphDataset`: a canonical, keyed description of
the ``pre_transform`` (every parameter that affects the output or the ledger).

:func:`describe` walks a transform (PyG's ``Compose`` and any other ``BaseTransform``
included) into plain JSON; :func:`dumps` is the one text compared and hashed.  Tensor and
array contents (masks, public sets, boundaries) enter only as HMAC-SHA256 digests under a
random key of the cache root (:func:`root_key`), so neither the folder name nor the stored
JSON says anything about them to someone without that key.
"""
from __future__ import annotations

import enum
import functools
import hashlib
import hmac
import json
import os
import secrets
import tempfile
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch

__all__ = ["FORMAT", "KEY_FILE", "describe", "dumps", "root_key"]

#: Version of the canonical form, part of every folder name: bumping it gives new folder
#: names, so a cache written under another scheme is never read back.
FORMAT = 2
KEY_FILE = ".ldpfast_cache_key"
_KEY_BYTES = 32
# Attributes whose names contain one of these enter the key as a keyed digest only, so a
# secret kept in a public attribute is never written out readable.
_SECRET_WORDS = ("key", "secret", "seed", "token", "password")


def root_key(root: Path) -> bytes:
    """The cache root's HMAC key: 32 bytes from :mod:`secrets`, created once in
    ``<root>/.ldpfast_cache_key`` (mode 0600) and read back afterwards."""
    path = root / KEY_FILE
    if not path.exists():
        root.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=root, prefix=KEY_FILE + ".")  # created with mode 0600
        try:
            os.write(fd, secrets.token_bytes(_KEY_BYTES))
            os.close(fd)
            os.chmod(tmp, 0o600)
            try:
                os.link(tmp, path)  # atomic and never replaces: a concurrent creator's key wins
            except FileExistsError:
                pass
        finally:
            os.unlink(tmp)
    key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path}: not an ldpfast cache key ({len(key)} bytes, expected "
                         f"{_KEY_BYTES}); delete it to start new cache folders under {root}")
    return key


def dumps(desc: Any) -> str:
    """The canonical text of a description (sorted keys, no spaces): what is compared and
    hashed."""
    return json.dumps(desc, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def describe(obj: Any, key: bytes, where: str = "pre_transform") -> Any:
    """Canonical JSON description of ``obj`` (see :class:`~ldpfast.datasets.GraphDataset`
    for the rules); ``where`` names ``obj`` in errors.

    Raises
    ------
    TypeError
        If a value's parameters cannot be seen (an object with only private state, a C
        type, a sparse tensor): define ``cache_params(self) -> dict``.
    """
    return _Walker(key)(obj, where)


def _type_name(t: type) -> str:
    return f"{t.__module__}.{t.__qualname__}"


def _names(code: types.CodeType) -> set[str]:
    """Global and attribute names used by ``code`` and the code nested in it."""
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _looks_secret(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in _SECRET_WORDS)


class _Walker:
    def __init__(self, key: bytes):
        self.key = key
        self.path: set[int] = set()  # ids of the containers being walked: cycle guard

    def digest(self, *parts: bytes) -> str:
        h = hmac.new(self.key, digestmod=hashlib.sha256)
        for p in parts:  # length-prefixed, so part boundaries cannot shift
            h.update(len(p).to_bytes(8, "little"))
            h.update(p)
        return h.hexdigest()

    def refuse(self, where: str, why: str):
        return TypeError(f"cannot derive a cache key for {where}: {why}. Keep parameters in "
                         "public attributes, or define cache_params(self) -> dict on the class "
                         "that holds this value")

    def __call__(self, v: Any, where: str) -> Any:
        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, enum.Enum):  # before int: IntEnum
            return {"enum": f"{_type_name(type(v))}.{v.name}"}
        if isinstance(v, int):
            return int(v)
        if isinstance(v, float):
            # repr round-trips exactly (the shortest text that parses back to the same
            # double) and stays readable; a string also carries nan / inf, which JSON lacks
            return {"float": repr(float(v))}
        if isinstance(v, np.generic) and not isinstance(v, (np.void, np.object_)):
            return self(v.item(), where)
        if isinstance(v, (bytes, bytearray)):
            return {"bytes": {"len": len(v), "hmac": self.digest(bytes(v))}}
        if isinstance(v, torch.Tensor):
            return {"tensor": self.tensor(v, where)}
        if isinstance(v, np.ndarray):
            if v.dtype.hasobject:
                raise self.refuse(where, "a NumPy array of Python objects")
            return {"ndarray": self.array(str(v.dtype), v.shape, np.ascontiguousarray(v))}
        if isinstance(v, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
            return {"torch": f"{type(v).__name__}:{v}"}
        if isinstance(v, type):
            return {"class": _type_name(v)}
        if isinstance(v, types.ModuleType):
            return {"module": v.__name__}
        if isinstance(v, types.BuiltinFunctionType):  # C functions, and methods of C objects
            owner = v.__self__
            if owner is None or isinstance(owner, types.ModuleType):
                module = getattr(v, "__module__", None) or getattr(owner, "__name__", "")
                return {"builtin": f"{module}.{v.__qualname__}"}
            return {"builtin_method": v.__qualname__, "self": self(owner, f"{where}.__self__")}
        return self.nested(v, where)

    def nested(self, v: Any, where: str) -> Any:
        """Containers and objects, which may refer back to themselves."""
        if id(v) in self.path:  # e.g. a recursive function: already described above
            return {"cycle": _type_name(type(v))}
        self.path.add(id(v))
        try:
            return self.container(v, where)
        finally:
            self.path.discard(id(v))

    def container(self, v: Any, where: str) -> Any:
        params = getattr(v, "cache_params", None)
        if callable(params):
            d = params()
            if not isinstance(d, dict):
                raise self.refuse(where, f"its cache_params() returned a {type(d).__name__}, "
                                  "not a dict")
            return {"object": _type_name(type(v)), "params": self.attrs(d, where)}
        if isinstance(v, (list, tuple)):
            tag = "list" if isinstance(v, list) else "tuple"
            return {tag: [self(x, f"{where}[{i}]") for i, x in enumerate(v)]}
        if isinstance(v, dict):
            items = [[self(k, f"{where} key"), self(x, f"{where}[{k!r}]")] for k, x in v.items()]
            return {"dict": sorted(items, key=lambda kv: dumps(kv[0]))}
        if isinstance(v, (set, frozenset)):
            return {"set": sorted((self(x, f"{where} item") for x in v), key=dumps)}
        if isinstance(v, types.CodeType):
            return {"code": self.code(v, where)}
        if isinstance(v, types.FunctionType):
            return {"function": self.function(v, where)}
        if isinstance(v, types.MethodType):
            return {"method": v.__func__.__name__, "self": self(v.__self__, f"{where}.__self__"),
                    "function": self(v.__func__, where)}
        if isinstance(v, functools.partial):  # its state is in C slots, not in vars()
            return {"partial": {"func": self(v.func, f"{where}.func"),
                                "args": self(v.args, f"{where}.args"),
                                "keywords": self(v.keywords, f"{where}.keywords")}}
        return self.instance(v, where)

    def tensor(self, t: torch.Tensor, where: str) -> dict:
        if t.layout != torch.strided:
            raise self.refuse(where, f"a {t.layout} tensor (pass a dense one)")
        flat = t.detach().to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)
        raw = flat.view(torch.uint8).numpy()  # any dtype (bfloat16, bool) as its bytes
        return self.array(str(t.dtype), tuple(t.shape), raw)

    def array(self, dtype: str, shape: tuple, data: np.ndarray) -> dict:
        shape_s = ",".join(map(str, shape))
        return {"dtype": dtype, "shape": list(shape),
                "hmac": self.digest(dtype.encode(), shape_s.encode(), data.tobytes())}

    def code(self, c: types.CodeType, where: str) -> str:
        # One keyed digest: constants in the code are not written out readable.
        consts = [self(x, f"{where} constant") for x in c.co_consts]
        return self.digest(c.co_code, dumps([consts, list(c.co_names)]).encode())

    def function(self, f: types.FunctionType, where: str) -> dict:
        cells = f.__closure__ or ()
        closure = {}
        for name, cell in zip(f.__code__.co_freevars, cells):
            try:
                value = cell.cell_contents
            except ValueError:  # a free variable not yet bound
                value = None
            closure[name] = self.attr(name, value, f"{where} (closure {name})")
        # The globals it names: a module-level ``t = GRRFS(...)`` read by ``lambda d: t(d)``
        # is as much a parameter as a closure variable.
        used = {n: f.__globals__[n] for n in sorted(_names(f.__code__)) if n in f.__globals__}
        return {"name": f"{f.__module__}.{f.__qualname__}",
                "code": self.code(f.__code__, where),
                "defaults": self(f.__defaults__, f"{where} defaults"),
                "kwdefaults": self(f.__kwdefaults__, f"{where} defaults"),
                "closure": closure,
                "globals": self.attrs(used, f"{where} (global)")}

    def attr(self, name: str, value: Any, where: str) -> Any:
        desc = self(value, where)
        if isinstance(name, str) and _looks_secret(name):
            return {"secret": self.digest(dumps(desc).encode())}
        return desc

    def attrs(self, d: dict, where: str) -> dict:
        return {str(k): self.attr(k, d[k], f"{where}.{k}") for k in sorted(d, key=str)}

    def instance(self, v: Any, where: str) -> dict:
        name = _type_name(type(v))
        state = getattr(v, "__dict__", None)
        if not isinstance(state, dict):
            raise self.refuse(where, f"a {name} keeps its state outside __dict__")
        ignore = set(getattr(type(v), "_cache_ignore", ()))
        public = {k: x for k, x in state.items() if not k.startswith("_") and k not in ignore}
        if isinstance(v, torch.nn.Module):  # sub-modules, weights and buffers live in _-dicts
            public.update(v.named_children())
            public.update(v.named_parameters(recurse=False))
            public.update(v.named_buffers(recurse=False))
        elif not public and any(k.startswith("_") and k != "_seed" for k in state):
            # e.g. a Data (all in _store): its type name alone would match any other
            raise self.refuse(where, f"a {name} whose state is all private "
                              f"({', '.join(sorted(state))})")
        return {"object": name, "attrs": self.attrs(public, where)}
