"""The edge samplers of csrc/cuda run on the host (tests/cuda_emu.h: every thread a coroutine, real
warp rendezvous), through ldpfast._cuda's own launchers, against the C++ build bit for bit:

* ``edges.cu``'s sparse RR sampler (DPRR and Warner RR without user keys), a warp per row, on
  every branch of the C++ row (tests/test_cuda.py ``_rr_cases``).
* ``edges_keyed.cu``: the user-keyed Warner RR (mode 0) and DPRR levels (mode 1) sampler and
  DPRR's per-user degree noise, on the C++ ``keyed_rr`` / ``keyed_dlap`` inputs: long rows, rows
  with no false edge (q = 0), q on the levels' boundaries and below the top level, public users,
  a shard's rows (row0); and the public ``dprr`` / ``rr_edges`` with user keys on device data
  (the fake-CUDA harness of tests/_fake_cuda.py, the real launcher on the emulated kernels)
  equal to the CPU call: reports, d*, q and report ids.

What this does not check is the GPU itself (timing, memory model, the device compiler's code):
``test_gpu_keyed_edge_kernels_bit_identical_to_cpp`` and ``test_gpu_keyed_edge_reports_equal_cpu``
in test_cuda.py do, on a GPU.
"""
from __future__ import annotations

import shutil

import cuda_emu
import numpy as np
import pytest
import torch
from test_cuda import (
    _keyed_cases,
    _keyed_cpp,
    _keyed_cuda,
    _keyed_graph,
    _rr_cases,
    _rr_cpp,
    _rr_cuda,
    _secret,
)

from ldpfast import _cuda

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


@pytest.fixture(scope="module")
def emulated(tmp_path_factory):
    """ldpfast._cuda's launches of edges.cu and edges_keyed.cu run by the emulated kernels on CPU
    tensors; yields the launched kernel names."""
    tmp = tmp_path_factory.mktemp("emu")
    launches: list[str] = []
    mp = pytest.MonkeyPatch()
    kernels = {m: cuda_emu.build(m, tmp) for m in ("edges", "edges_keyed")}
    mp.setattr(_cuda._core, "_launch", cuda_emu.launcher(kernels, launches))
    mp.setattr(_cuda._core, "_ptr", cuda_emu.host_ptr)
    yield launches
    mp.undo()


@pytest.mark.parametrize("col_dtype", [np.int32, np.int64])
def test_emulated_rr_sampler_equals_cpp(emulated, col_dtype):
    # The cases of test_gpu_rr_sampler_bit_identical_to_cpp: the warp per row (true edges in
    # chunks of 32 with the ties settled from further words, the false edges' gaps drawn
    # speculatively and chained, the merge of the two sorted streams) against the C++ rows.
    kern = f"rr_edges_{'i32' if col_dtype == np.int32 else 'i64'}"
    for name, args in _rr_cases(col_dtype):
        want = _rr_cpp(args)
        emulated.clear()
        got = _rr_cuda(args, torch.from_numpy)
        assert np.array_equal(got[0], want[0]), name
        assert np.array_equal(got[1], want[1]), name
        assert got[1].dtype == want[1].dtype and emulated == [kern, kern], name


@pytest.mark.parametrize("col_dtype", [np.int32, np.int64])
def test_emulated_keyed_rr_equals_cpp(emulated, col_dtype):
    # the cases of test_gpu_keyed_edge_kernels_bit_identical_to_cpp (test_cuda.py)
    pick = f"keyed_pick_{'i32' if col_dtype == np.int32 else 'i64'}"
    names = []
    for name, args in _keyed_cases(col_dtype):
        want = _keyed_cpp(args)
        emulated.clear()
        got = _keyed_cuda(args, torch.from_numpy)
        assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1]), name
        assert got[1].dtype == np.int64
        assert emulated == ["keyed_hits", "keyed_hits", pick], name
        names.append(name)
    assert {"dprr public", "rr public", "dprr shard public", "rr shard"} <= set(names)
    # the graph has long rows (many chunks of 32 neighbours)
    rp, _ = _keyed_graph(260, 3, col_dtype, 1)
    assert (np.diff(rp) > 100).sum() >= 3


def test_emulated_keyed_rr_edge_shapes(emulated):
    # No rows; rows without neighbours; a graph whose every user is public; one user.
    for n, edges in ((1, []), (5, []), (6, [(0, 1), (1, 0), (2, 3), (3, 2)])):
        rp = np.zeros(n + 1, np.int64)
        for i, _ in edges:
            rp[i + 1] += 1
        rp = np.cumsum(rp)
        col = np.array(sorted(edges), np.int64).reshape(-1, 2)[:, 1].copy() if edges else np.zeros(0, np.int64)
        keys = np.arange(n, dtype=np.int64)[::-1].copy()
        table = np.empty(n, np.int64)
        table[keys] = np.arange(n)
        seeds = np.arange(1, n + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
        for mode, pt, pf in ((0, 0.6, 0.4), (1, 0.3, 0.9)):
            for pub in (None, np.ones(n, np.uint8)):
                want = _keyed_cpp((rp, col, keys, table, seeds, 7, 8, mode, np.full(n, pt), np.full(n, pf), 0.4, pub, 0))
                got = _cuda.keyed_rr(torch.from_numpy(rp), torch.from_numpy(col), torch.from_numpy(keys),
                                     torch.from_numpy(table), torch.from_numpy(seeds.view(np.int64)), 7, 8, mode,
                                     torch.full((n,), pt, dtype=torch.float64), torch.full((n,), pf, dtype=torch.float64),
                                     0.4, None if pub is None else torch.from_numpy(pub), 0)
                assert np.array_equal(got[0].numpy(), want[0]) and np.array_equal(got[1].numpy(), want[1]), (n, mode)
    z = torch.zeros(1, dtype=torch.int64)
    got = _cuda.keyed_rr(z, z[:0], z[:0], z[:0], z[:0], 7, 8, 1, torch.zeros(0, dtype=torch.float64),
                         torch.zeros(0, dtype=torch.float64), 0.3, None, 0)
    assert got[0].tolist() == [0] and got[1].numel() == 0
    with pytest.raises(ValueError, match="mode"):
        _cuda.keyed_rr(z, z[:0], z[:0], z[:0], z[:0], 7, 8, 2, torch.zeros(0, dtype=torch.float64),
                       torch.zeros(0, dtype=torch.float64), 0.3, None, 0)


def test_emulated_keyed_dlap_equals_cpp(emulated):
    import ldpfast._C as C

    g = np.random.default_rng(2)
    seeds = g.integers(0, 2**64, 1000, dtype=np.uint64)
    for t, s in ((1, 1), (9, 7), (2**20, 3)):
        want = np.empty(1000, np.int64)
        C.keyed_dlap(seeds, t, s, want)
        got = torch.empty(1000, dtype=torch.int64)
        _cuda.keyed_dlap(torch.from_numpy(seeds.view(np.int64)), t, s, got)
        assert np.array_equal(got.numpy(), want), (t, s)


def test_emulated_keyed_public_functions_on_device_data_equal_cpu(emulated, monkeypatch):
    # dprr / rr_edges with user keys on a device graph: routed to the CUDA sampler (the real
    # launcher on the emulated kernels), nothing of the graph copied to the host, and the reports,
    # d*, q, seeds and report ids those of the CPU call.
    import types

    import ldpfast._C as C
    from _fake_cuda import DeviceInput, cpu_kernels, dev, install, np_of, switch_off_cpu_kernels

    from ldpfast.graph import CSR
    from ldpfast.mechanisms import dprr, rr_edges
    from ldpfast.privacy.users import Keying

    n = 150
    rp, col = _keyed_graph(n, 2, np.int64, 4)
    mod = types.ModuleType("ldpfast._cuda")
    mod.keyed_rr = _cuda.keyed_rr
    mod.keyed_dlap = _cuda.keyed_dlap
    mod.edges_check_csr = lambda rp, col: C.edges_check_csr(np_of(rp), np_of(col))
    install(monkeypatch, mod)
    switch_off_cpu_kernels(monkeypatch)
    g = np.random.default_rng(3)
    keys = torch.from_numpy(g.permutation(n + 40)[:n].astype(np.int64))
    pub = torch.from_numpy(g.random(n) < 0.2)
    for cd in (torch.int32, torch.int64):
        csr = CSR(torch.from_numpy(rp), torch.from_numpy(col).to(cd), n)
        dcsr = CSR(dev(csr.rowptr), dev(csr.col), n)
        calls = {
            "dprr": lambda g_, k, p: dprr(g_, 2.0, _keying=k, public=p),
            "dprr n_max": lambda g_, k, p: dprr(g_, 3.0, _keying=k, n_max=400, public=p),
            "rr_edges": lambda g_, k, p: rr_edges(g_, 2.5, _keying=k, public=p, max_output_edges=10**7),
        }
        for name, call in calls.items():
            for p in (None, pub):
                with cpu_kernels():
                    wk = Keying(_secret(), user_keys=keys, ids=True)
                    want = call(csr, wk, p)
                gk = Keying(_secret(), user_keys=dev(keys), ids=True)
                emulated.clear()
                got = call(dcsr, gk, None if p is None else dev(p))
                key = (name, cd, p is None)
                assert got.backend == "cuda", key
                pick = "keyed_pick_i32" if cd == torch.int32 else "keyed_pick_i64"
                assert emulated == ["keyed_dlap"] * name.startswith("dprr") + ["keyed_hits", "keyed_hits", pick], key
                assert torch.equal(got.noisy.rowptr.as_subclass(torch.Tensor), want.noisy.rowptr), key
                assert got.noisy.col.dtype == cd and torch.equal(got.noisy.col.as_subclass(torch.Tensor),
                                                                 want.noisy.col), key
                for f in ("d_star", "q"):
                    a, b = getattr(got, f), getattr(want, f)
                    assert (a is None) == (b is None), key
                    if b is not None:
                        assert torch.equal(a.as_subclass(torch.Tensor).nan_to_num(-7), b.nan_to_num(-7)), (key, f)
                assert wk.last[2] is not None and np.array_equal(gk.last[2], wk.last[2]), key  # report ids
                assert got.spent.params == want.spent.params, key
    # the one host read: the user keys' check (two flags, tolist), as every keyed call makes
    assert [c for c in DeviceInput.copies if c != "tolist"] == [], DeviceInput.copies
