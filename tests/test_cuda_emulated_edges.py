"""The edge samplers of csrc/cuda run on the host (tests/cuda_emu.h: every thread a coroutine, real
warp rendezvous), through ldpfast._cuda's own launchers, against the C++ build bit for bit:

* ``edges_keyed.cu``: the user-keyed Warner RR (mode 0) and DPRR levels (mode 1) sampler and
  DPRR's per-user degree noise, on the C++ ``keyed_rr`` / ``keyed_dlap`` inputs: long rows, rows
  with no false edge (q = 0), q on the levels' boundaries and below the top level, public users,
  a shard's rows (row0); and the public ``dprr`` / ``rr_edges`` with user keys on device data
  (the fake-CUDA harness of tests/_fake_cuda.py, the real launcher on the emulated kernels)
  equal to the CPU call: reports, d*, q and report ids.

What this does not check is the GPU itself (timing, memory model, the device compiler's code):
``test_gpu_keyed_edges_bit_identical_to_cpu`` in test_cuda.py does, on a GPU.
"""
from __future__ import annotations

import shutil

import cuda_emu
import numpy as np
import pytest
import torch

from ldpfast import _cuda

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")


def _secret():
    """A 128-bit secret where the keyed mechanisms take one, else (before that change) an int."""
    from ldpfast.privacy.users import Keying

    try:
        Keying(b"\x01" * 16)
        return b"\x01" * 16
    except TypeError:
        return 77


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


def _graph(n, hubs, col_dtype, seed):
    """A random simple graph with ``hubs`` rows of degree about n / 2 (long rows: many chunks of
    32 neighbours), sorted rows."""
    from ldpfast.graph import to_csr

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, 3 * n), generator=g)
    for h in range(hubs):
        nb = torch.randperm(n, generator=g)[: n // 2]
        ei = torch.cat([ei, torch.stack([torch.full_like(nb, h * 7 % n), nb])], 1)
    csr = to_csr(ei, n, symmetrize=True)
    return csr.rowptr.numpy(), csr.col.numpy().astype(col_dtype)


def _cpp_keyed(rp, col, keys, table, seeds, st_t, st_f, mode, pt, pf, pm, pub, row0):
    import ldpfast._C as C

    m = rp.shape[0] - 1
    orp = np.zeros(m + 1, np.int64)
    args = (rp, col, keys, table, seeds, st_t, st_f, mode, pt, pf, pm, pub)
    C.keyed_rr(*args, orp, None, row0)
    np.cumsum(orp, out=orp)
    oc = np.empty(int(orp[m]), np.int64)
    C.keyed_rr(*args, orp, oc, row0)
    return orp, oc


def _q_cases(g, m):
    """q per row: random small, 0 (no false edge), 1, exact powers of two (levels' boundaries),
    just above one, below the top level (2^-48)."""
    q = g.uniform(0, 0.05, m)
    special = [0.0, 1.0, 0.5, 0.25, 2.0**-7, np.nextafter(2.0**-7, 1), 2.0**-48, 2.0**-52, 0.75, 0.0]
    q[: len(special)] = special[: m]
    g.shuffle(q)
    return q


@pytest.mark.parametrize("col_dtype", [np.int32, np.int64])
def test_emulated_keyed_rr_equals_cpp(emulated, col_dtype):
    g = np.random.default_rng(5)
    n = 260
    rp, col = _graph(n, 3, col_dtype, 1)
    S = n + n // 3
    keys = g.permutation(S)[:n].astype(np.int64)  # dense, with holes, not in row order
    table = np.full(S, -1, np.int64)
    table[keys] = np.arange(n)
    seeds = g.integers(0, 2**64, n, dtype=np.uint64)
    pub = (g.random(n) < 0.15).astype(np.uint8)
    p, pm = 0.7, 0.3
    cases = []
    for pb in (None, pub):
        q = _q_cases(g, n)
        cases.append(("dprr", 1, p * q, q, pm, pb, 0, n))
        cases.append(("rr", 0, np.full(n, p), np.full(n, pm), pm, pb, 0, n))
        cases.append(("rr per row", 0, g.uniform(0, 1, n), np.where(g.random(n) < 0.2, 0.0, g.uniform(0, 0.2, n)),
                      pm, pb, 0, n))
    q = _q_cases(g, n)
    cases.append(("dprr shard", 1, p * q, q, 0.45, pub, 100, 230))  # rows [100, 230) of the graph
    cases.append(("rr shard", 0, np.full(n, 0.8), np.full(n, 0.2), 0.2, None, 37, 38))
    for name, mode, pt, pf, pmm, pb, a, b in cases:
        lrp = rp[a:b + 1] - rp[a]
        lcol = np.ascontiguousarray(col[rp[a]:rp[b]])
        sl = slice(a, b)
        lpub = None if pb is None else np.ascontiguousarray(pb[sl])
        want = _cpp_keyed(lrp, lcol, keys, table, np.ascontiguousarray(seeds[sl]), 7, 8, mode,
                          np.ascontiguousarray(pt[sl]), np.ascontiguousarray(pf[sl]), pmm, lpub, a)
        emulated.clear()
        got = _cuda.keyed_rr(torch.from_numpy(lrp), torch.from_numpy(lcol), torch.from_numpy(keys),
                             torch.from_numpy(table), torch.from_numpy(np.ascontiguousarray(seeds[sl]).view(np.int64)),
                             7, 8, mode, torch.from_numpy(np.ascontiguousarray(pt[sl])),
                             torch.from_numpy(np.ascontiguousarray(pf[sl])), pmm,
                             None if lpub is None else torch.from_numpy(lpub), a)
        key = (name, pb is None)
        assert np.array_equal(got[0].numpy(), want[0]), key
        assert np.array_equal(got[1].numpy(), want[1]), key
        assert got[1].dtype == torch.int64
        assert emulated == ["keyed_hits", "keyed_hits", f"keyed_pick_{'i32' if col_dtype == np.int32 else 'i64'}"], key
    # the cases reach what they are meant to: public rows copied, long rows, q = 0 rows with
    # no false edge, hits deduplicated across levels
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
                want = _cpp_keyed(rp, col, keys, table, seeds, 7, 8, mode, np.full(n, pt), np.full(n, pf), 0.4, pub, 0)
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
    rp, col = _graph(n, 2, np.int64, 4)
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
