"""csrc/cuda kernels run on the host, through ldpfast._cuda's own launchers, against the C++ build.

No GPU here: g++ compiles a .cu file with tests/cuda_emu.h (tests/cuda_emu.py drives it), which
runs every thread of a block as a coroutine, so warp shuffles, ballots and __syncwarp are real rendezvous of 32 lanes and
shared memory is shared.  ``_core._launch`` is pointed at the compiled kernels, so the Python
launchers' argument lists, thread counts and fused checks run as they do on a GPU.  What this
does not check is the GPU itself (timing, the memory model, the device compiler's code): the
``-m cuda`` tests in test_cuda.py do, on a GPU.
"""
from __future__ import annotations

import shutil
from functools import partial
from pathlib import Path

import cuda_emu
import numpy as np
import pytest
import torch
from secret_keys import sec
from test_cuda import _case_id, _feature_cases, _run_case

from ldpfast import _cuda

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


def emulate(module: str, tmp: Path):
    """Point ``_core._launch`` / ``_ptr`` at the emulated csrc/cuda/<module>.cu (CPU tensors by
    pointer): a generator for module-scoped fixtures, yielding the list of launched kernel names
    (appended as they run); undone when it ends."""
    launches: list[str] = []
    mp = pytest.MonkeyPatch()
    mp.setattr(_cuda._core, "_launch", cuda_emu.launcher({module: cuda_emu.build(module, tmp)}, launches))
    mp.setattr(_cuda._core, "_ptr", cuda_emu.host_ptr)
    yield launches
    mp.undo()


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """ldpfast._cuda with its launches run by the emulated features.cu on CPU tensors."""
    yield from emulate("features", tmp_path_factory.mktemp("emu"))


def test_emulated_feature_kernels_equal_cpp(emulated):
    import ldpfast._C as C

    bad = []
    for name, args in _feature_cases():
        want = _run_case(C, name, args)
        got = _run_case(_cuda, name, args, torch.from_numpy, lambda t: t.numpy())
        if name.startswith("check"):
            ok = want == got
        else:
            ok = np.array_equal(want, got)
        if not ok:
            bad.append(_case_id(name, args))
    assert bad == []
    # the mechanisms ran as kernels of their own (no separate check, no one-thread launch)
    assert {"grr_i32", "grr_fs_i64", "multibit_f32", "onebit_f64"} <= set(emulated)


def _flags(K, name, x, *args):
    out = np.empty(x.shape, np.int8 if name in ("onebit", "multibit_encode") else x.dtype)
    return K.__dict__[name](torch.from_numpy(x), *args, torch.from_numpy(out))


def test_emulated_fused_checks_flag_the_first_bad_index(emulated):
    # The mechanisms' own pass reports what check_categorical / check_range report: the
    # smallest bad flat index, wherever the bad values sit in the grid; -1 on good input.
    import ldpfast._C as C

    g = np.random.default_rng(3)
    seeds = torch.from_numpy(g.integers(0, 2**63, 70, dtype=np.int64))
    for n, d in ((70, 5), (70, 33), (9, 300)):
        k = np.array([2, 3, 300, 1][: min(d, 4)] * d, np.int64)[:d]
        T = np.full(d, 2**31, np.uint64)
        x = (g.integers(0, 2**40, (n, d)) % k).astype(np.int64)
        sd = seeds[:n].contiguous()
        assert _flags(_cuda, "grr", x, k, T, sd) == -1
        for m in (1, d):
            assert _flags(_cuda, "grr_fs", x, k, T, m, sd) == -1
        for where in ((n - 1, d - 1), (n // 2, 0), (0, d // 2)):
            y = x.copy()
            y[where] = k[where[1]]
            y[-1, -1] = -1
            want = C.check_categorical(y, k)
            assert want >= 0
            assert _flags(_cuda, "grr", y, k, T, sd) == want
            for m in (1, max(1, d // 2), d):
                assert _flags(_cuda, "grr_fs", y, k, T, m, sd) == want
        xf = g.random((n, d))
        for m in (1, d):
            assert _flags(_cuda, "multibit_encode", xf, m, 0.0, 1.0, 10, 2.0**32 - 20, sd) == -1
        for where in ((n - 1, d - 1), (n // 2, d // 2)):
            yf = xf.copy()
            yf[where] = np.nan
            yf[-1, -1] = 1.5
            want = C.check_range(yf, 0.0, 1.0)
            assert _flags(_cuda, "onebit", yf, 0.0, 1.0, 10, 2.0**32 - 20, sd) == want
            for m in (1, max(1, d // 2), d):
                assert _flags(_cuda, "multibit_encode", yf, m, 0.0, 1.0, 10, 2.0**32 - 20, sd) == want


def test_emulated_grr_long_rows_and_rejection_heavy_draws(emulated):
    # Rows of several 128-column chunks, domains that reject most candidates (k - 1 just above
    # a power of two), thresholds that keep nothing: the windowed bit stream is refilled many
    # times per row, and the batched draws (one shared domain) meet the one-by-one draws.
    import ldpfast._C as C

    g = np.random.default_rng(11)
    n = 4
    seeds = g.integers(0, 2**63, n, dtype=np.int64)
    for kk in (3, 4, 5, 130, 2**20 + 2, None):
        d = 700
        k = np.full(d, kk, np.int64) if kk else g.choice([2, 3, 5, 130, 2**20 + 2], d).astype(np.int64)
        x = (g.integers(0, 2**40, (n, d)) % k).astype(np.int64)
        for T in (np.zeros(d, np.uint64), g.integers(0, 2**32, d).astype(np.uint64)):
            want = np.empty_like(x)
            C.grr(x, k, T, seeds.view(np.uint64), want)
            got = torch.empty(n, d, dtype=torch.int64)
            assert _cuda.grr(torch.from_numpy(x), k, T, torch.from_numpy(seeds), got) == -1
            assert np.array_equal(got.numpy(), want), (kk, int(T[0]))
            for m in (1, 350, 700):
                want = np.empty_like(x)
                C.grr_fs(x, k, T, m, seeds.view(np.uint64), want)
                got = torch.empty(n, d, dtype=torch.int64)
                assert _cuda.grr_fs(torch.from_numpy(x), k, T, m, torch.from_numpy(seeds), got) == -1
                assert np.array_equal(got.numpy(), want), (kk, int(T[0]), m)


def test_emulated_rr_labels_flags_the_first_bad_masked_label(emulated):
    g = np.random.default_rng(5)
    n, c = 700, 4
    y = g.integers(0, c, n)
    mask = g.random(n) < 0.5
    seeds = torch.from_numpy(g.integers(0, 2**63, n, dtype=np.int64))
    out = torch.empty(n, dtype=torch.int64)
    assert _cuda.rr_labels(torch.from_numpy(y), torch.from_numpy(mask), c, 2**31, seeds, out) == -1
    yb = y.copy()
    unmasked, masked = np.flatnonzero(~mask), np.flatnonzero(mask)
    yb[unmasked[:3]] = -1  # unmasked labels are reported as they are: not an error
    yb[masked[[7, 40]]] = (c, -2)
    yb[masked[-1]] = c + 5
    got = _cuda.rr_labels(torch.from_numpy(yb), torch.from_numpy(mask), c, 2**31, seeds, out)
    assert got == masked[7]


def _cuda_path_equals_cpp(emulated, monkeypatch, module, call, user_keys, key):
    """call(keying) on the C++ path, then on the CUDA path of ``module`` (its ``_kernels`` and
    ``_array_view`` pointed at the emulated kernels): the same reports, seeds and report ids.
    Returns the kernels the CUDA call launched."""
    from ldpfast.privacy.users import Keying

    want_k = Keying(sec(77), user_keys=user_keys, ids=True)
    want, _ = call(want_k)
    with monkeypatch.context() as mp:
        mp.setattr(module, "_kernels", lambda device, backend: (_cuda, "cuda"))
        mp.setattr(module, "_array_view", lambda device: (lambda t: t))
        got_k = Keying(sec(77), user_keys=user_keys, ids=True)
        emulated.clear()
        got, _ = call(got_k)
    assert torch.equal(got, want), key
    assert torch.equal(got_k.last_seeds, want_k.last_seeds), key
    assert np.array_equal(got_k.last[2], want_k.last[2]), key
    return list(emulated)


def test_emulated_mechanisms_derive_the_seeds_in_their_own_pass(emulated, monkeypatch):
    # The public mechanisms on the CUDA path (kernels emulated): each kernel digests its rows
    # and runs their chains itself (no row_digests / report_keys launch), and the reports, the
    # seeds and the report ids equal the C++ path's, with user keys and without, for row widths
    # that are and are not multiples of the digest's 4-byte words and 256-byte blocks.
    from ldpfast.mechanisms import features as F

    g = np.random.default_rng(9)
    calls = {
        "grr": lambda x, kg: F.grr(x, 5, 1.0, _keying=kg),
        "grr_fs": lambda x, kg: F.grr_fs(x, 5, 1.0, min(3, x.shape[1]), _keying=kg),
        "onebit": lambda x, kg: F.onebit(x.double() / 4, 1.0, _keying=kg),
        "multibit m<d": lambda x, kg: F.multibit_encode(x.float() / 4, 2.0, max(1, x.shape[1] - 1), _keying=kg),
        "multibit m=d": lambda x, kg: F.multibit_encode(x.double() / 4, 2.0, x.shape[1], _keying=kg),
    }
    for n, d, dt in ((37, 5, torch.int32), (20, 64, torch.int64), (9, 70, torch.int64), (3, 1, torch.int32)):
        x = torch.from_numpy(g.integers(0, 5, (n, d))).to(dt)
        uk = torch.from_numpy(g.permutation(10**6)[:n].astype(np.int64))
        for user_keys in (None, uk):
            for name, call in calls.items():
                key = (name, n, d, user_keys is None)
                launched = _cuda_path_equals_cpp(emulated, monkeypatch, F, partial(call, x), user_keys, key)
                assert len(launched) == 1, (key, launched)  # one kernel: digest, chain, reports


def test_emulated_rr_labels_derives_the_seeds_in_its_own_pass(emulated, monkeypatch):
    # rr_labels on the CUDA path: a thread per node digests its label, runs its chain (the label
    # mask is part of the user's flags) and randomises, in one kernel; equal to the C++ path.
    from ldpfast.mechanisms import labels as L

    g = np.random.default_rng(4)
    for n, dt, c in ((300, torch.int64, 7), (1000, torch.int32, 2)):
        y = torch.from_numpy(g.integers(0, c, n)).to(dt)
        mask = torch.from_numpy(g.random(n) < 0.6)
        uk = torch.from_numpy(g.permutation(10**6)[:n].astype(np.int64))
        for user_keys in (None, uk):
            for msk in (None, mask):
                key = (n, c, user_keys is None, msk is None)
                launched = _cuda_path_equals_cpp(emulated, monkeypatch, L,
                                                 lambda kg, y=y, c=c, msk=msk: L.rr_labels(y, c, 1.0, mask=msk, _keying=kg),
                                                 user_keys, key)
                assert launched == [f"rr_labels_{'i64' if dt == torch.int64 else 'i32'}"], key
