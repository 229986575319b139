"""Every transform on a CUDA ``Data``: routing and results, testable without a GPU.

As in test_cuda_routing.py (the harness: tests/_fake_cuda.py), a CPU tensor subclass (``DeviceInput``) plays the CUDA tensors:
``_backend.device_of`` calls it "cuda", a recording module stands in for ``ldpfast._cuda``,
and every host copy of it or of anything derived from it (``.cpu()``, ``.numpy()``,
``.tolist()``, ``__array__``) is logged.  The CPU kernels are switched off while a transform
runs, so nothing can sneak through them; the fake CUDA kernels run the real C++ kernels on
plain views of the same memory, so each transform's output on the "device" is compared with
its CPU output bit for bit (same secret seed: same fingerprint, same input seed, same report).

The edge randomisers (``mechanisms.edges._dprr`` / ``_rr_edges`` / ``_local_laplace``) are
another helper's CUDA port; here they are replaced by wrappers that check they receive a CSR
on the device and run the CPU mechanism on plain views, so what is tested is the transform's
side: fingerprint, CSR preparation and checks (``mechanisms.edges._graph_csr``: its graph
kernels run the C++ ones here too), and output assembly, on the device.

GPU tests (``pytest -m cuda``) run every transform on a real CUDA ``Data`` against the CPU.
"""
from __future__ import annotations

import contextlib
import types

import numpy as np
import pytest
import torch
from _fake_cuda import (
    REAL,
    DeviceInput,
    cpp_kernel,
    cpu_kernels,
    dev,
    install,
    np_of,
    plain,
    switch_off_cpu_kernels,
)
from torch_geometric.data import Data

from ldpfast import _backend
from ldpfast.graph import CSR, to_csr
from ldpfast.mechanisms import edges as E
from ldpfast.privacy import Ledger
from ldpfast.privacy import report_once as R
from ldpfast.transforms import DPRR, GRRFS, LocalLap, MultiBit, OneBit, RREdges, RRLabels
from ldpfast.transforms import edges as ET


def _fingerprint(log):
    def fingerprint(data, k_nh, k_pad, k_prf, out):
        assert isinstance(data, DeviceInput), "the fingerprint must read the device tensor itself"
        assert data.dtype == torch.uint8 and out.dtype == torch.int64
        log.append("fingerprint")
        res = np.zeros(2, dtype=np.uint64)
        REAL["cpp"].fingerprint(np_of(data), k_nh, k_pad, k_prf, res)
        plain(out).copy_(torch.from_numpy(res.view(np.int64)))
    return fingerprint


WRITTEN: list[int] = []  # data_ptr of every output of the fake csr_to_edge_index


def _edge_index_kernel(log):
    """The 'CUDA' csr_to_edge_index; records where it wrote (the output is allocated beside
    the graph by the caller: a plain tensor here, as every factory-made one)."""
    run = cpp_kernel(log, "csr_to_edge_index")

    def csr_to_edge_index(rp, col, out, layout):
        WRITTEN.append(out.data_ptr())
        return run(rp, col, out, layout)
    WRITTEN.clear()
    return csr_to_edge_index


def _to_dev(x):
    return dev(x) if isinstance(x, torch.Tensor) else x


def _mechanism(log, name, real):
    """Stand-in for the CUDA edge mechanism: the CSR must arrive on the device; the CPU
    mechanism runs on plain views and its result is handed back as device tensors."""
    def run(csr, eps, seed, *args, **kw):
        if not isinstance(csr.col, DeviceInput):  # the CPU reference run
            return real(csr, eps, seed, *args, **kw)
        # col derives from the device input (rowptr may be built from factory tensors, which
        # are plain here); no CPU kernel can have built it (they are switched off)
        assert isinstance(csr.col, DeviceInput) and isinstance(csr.rowptr, torch.Tensor), name
        log.append(name)
        host = CSR(plain(csr.rowptr), plain(csr.col), csr.num_nodes)
        args = [plain(a) for a in args]
        with cpu_kernels():
            res = real(host, eps, seed, *args, **kw)
        out = E.EdgeLDPResult(CSR(dev(res.noisy.rowptr), dev(res.noisy.col), csr.num_nodes),
                              dev(res.noisy_degrees), _to_dev(res.d_star), _to_dev(res.q), res.spent,
                              res.symmetrize, "cuda")
        return out  # edge_index left to the transform (expanded on the device)
    return run


@pytest.fixture
def fake_cuda(monkeypatch):
    log: list[str] = []
    if not isinstance(_backend._load("cpp"), types.ModuleType):
        pytest.skip("needs the C++ build (the fake CUDA kernels run it)")
    mod = types.ModuleType("ldpfast._cuda")
    for name in ("grr", "grr_fs", "onebit", "multibit_encode", "rr_labels", "check_categorical",
                 "check_range"):
        setattr(mod, name, cpp_kernel(log, name))
    mod.fingerprint = _fingerprint(log)
    for name in ("edges_sorted_csr", "edges_check_csr"):  # mechanisms.edges._graph_csr
        setattr(mod, name, cpp_kernel(log, name))
    mod.csr_to_edge_index = _edge_index_kernel(log)
    install(monkeypatch, mod)
    switch_off_cpu_kernels(monkeypatch)
    monkeypatch.setattr(E, "_dprr", _mechanism(log, "dprr", E._dprr))
    monkeypatch.setattr(E, "_rr_edges", _mechanism(log, "rr_edges", E._rr_edges))
    monkeypatch.setattr(E, "_local_laplace", _mechanism(log, "local_laplace", E._local_laplace))
    return log


def _data(n=60, d=12, c=3, seed=0):
    g = torch.Generator().manual_seed(seed)
    idx = torch.randperm(n, generator=g)
    train = torch.zeros(n, dtype=torch.bool)
    val = torch.zeros(n, dtype=torch.bool)
    train[idx[:30]] = True
    val[idx[30:45]] = True
    with cpu_kernels():  # test data: the real kernels
        ei = to_csr(torch.randint(0, n, (2, 150), generator=g), n, symmetrize=True).to_edge_index()
    return Data(x=(torch.rand(n, d, generator=g) < 0.3).float(), y=torch.randint(0, c, (n,), generator=g),
                edge_index=ei, train_mask=train, val_mask=val, test_mask=~(train | val), num_nodes=n)


def _on_dev(data):
    out = Data()
    for k, v in data.to_dict().items():
        out[k] = dev(v) if isinstance(v, torch.Tensor) else v
    if "csr" in data.__dict__:
        c = data.__dict__["csr"]
        out.__dict__["csr"] = CSR(dev(c.rowptr), dev(c.col), c.num_nodes)
    return out


def _same(got, want, keys):
    for k in keys:
        a, b = got[k], want[k]
        if k == "edge_index":  # written by the 'CUDA' csr_to_edge_index kernel, no host copy
            assert a.data_ptr() in WRITTEN, f"{k} was not built on the device"
        else:
            assert isinstance(a, DeviceInput), f"{k} left the device"
        assert a.dtype == b.dtype and torch.equal(plain(a), b), k


# (kernels: the mechanisms check their input in their own pass, no check kernel first)
FEATURE_CASES = [
    ("GRRFS", lambda: GRRFS(1.0, 4, seed=3), ["grr_fs"], ["x"]),
    ("MultiBit", lambda: MultiBit(1.0, 3, seed=4), ["multibit_encode"], ["x"]),
    ("MultiBit raw", lambda: MultiBit(1.0, 3, rectify=False, seed=4), ["multibit_encode"], ["x"]),
    ("OneBit", lambda: OneBit(2.0, seed=5), ["onebit"], ["x"]),
    ("RRLabels", lambda: RRLabels(1.0, seed=6), ["rr_labels"], ["y", "y_rr_mask"]),
    ("RRLabels all", lambda: RRLabels(1.0, mask="all", num_classes=3, seed=6), ["rr_labels"], ["y"]),
]


@pytest.mark.parametrize("name,make,kernels,keys", FEATURE_CASES, ids=[c[0] for c in FEATURE_CASES])
def test_feature_and_label_transforms_stay_on_the_device_and_match_cpu(fake_cuda, name, make, kernels, keys):
    data = _data()
    with cpu_kernels():
        want = make()(data)
    got = make()(_on_dev(data))
    # one fingerprint per tensor of the Data (x, y, edge_index; masks are not identity)
    assert fake_cuda == ["fingerprint"] * 3 + kernels
    assert DeviceInput.copies == [], DeviceInput.copies
    _same(got, want, keys)
    assert Ledger.of(got).entries[0].params["backend"] == "cuda"


def test_fingerprint_of_device_data_equals_the_cpu_one(fake_cuda):
    data = _data()
    key = R.fingerprint_key(17)
    with cpu_kernels():
        want = R.fingerprint(data, key)
        ident = R.graph_identity(17, data)
    assert R.fingerprint(_on_dev(data), key) == want
    assert R.graph_identity(17, _on_dev(data)) == ident
    assert DeviceInput.copies == []


EDGE_CASES = [
    ("DPRR", lambda: DPRR(2.0, seed=7, eps1=0.5), "dprr"),
    ("RREdges", lambda: RREdges(3.0, seed=8), "rr_edges"),
    ("LocalLap", lambda: LocalLap(2.0, seed=9), "local_laplace"),
]


def _unsorted(data):
    d = data.clone()
    perm = torch.randperm(d.edge_index.size(1), generator=torch.Generator().manual_seed(1))
    d.edge_index = d.edge_index[:, perm]
    return d


def _csr_only(data):
    d = Data(x=data.x, num_nodes=data.num_nodes)
    with cpu_kernels():
        d.__dict__["csr"] = to_csr(data.edge_index, data.num_nodes)
    return d


@pytest.mark.parametrize("layout", ["sorted", "unsorted", "csr"])
@pytest.mark.parametrize("name,make,mech", EDGE_CASES, ids=[c[0] for c in EDGE_CASES])
def test_edge_transforms_prepare_and_assemble_on_the_device(fake_cuda, name, make, mech, layout):
    data = {"sorted": _data, "unsorted": lambda: _unsorted(_data()), "csr": lambda: _csr_only(_data())}[layout]()
    with cpu_kernels():
        want = make()(data)
    t = make()
    got = t(_on_dev(data))
    # three tensors each: x, y, edge_index, or x, csr.rowptr, csr.col (masks are not identity);
    # a sorted edge_index is built and checked in one pass, an unsorted one goes through
    # csr_of's device path and is checked, a CSR is checked; then edge_index is expanded
    prep = {"sorted": ["edges_sorted_csr"], "unsorted": ["edges_sorted_csr", "edges_check_csr"],
            "csr": ["edges_check_csr"]}[layout]
    out = [] if layout == "csr" else ["csr_to_edge_index"]
    assert fake_cuda == ["fingerprint"] * 3 + prep + [mech] + out, fake_cuda
    assert DeviceInput.copies == [], DeviceInput.copies
    if layout == "csr":
        assert "edge_index" not in got
        for f in ("rowptr", "col"):
            a, b = getattr(got.csr, f), getattr(want.csr, f)
            assert torch.equal(plain(a), b), f
        assert isinstance(got.csr.col, DeviceInput)  # (rowptr comes from factory tensors, plain here)
    else:
        _same(got, want, ["edge_index"])
        assert t.last_result.edge_index is got.edge_index
    assert Ledger.of(got).entries[-1].mechanism == Ledger.of(want).entries[-1].mechanism


BAD_GRAPHS = {
    "self loop": lambda ei: torch.cat([ei, torch.tensor([[3], [3]])], 1),
    "duplicate": lambda ei: torch.cat([ei, ei[:, :2]], 1),
    "asymmetric": lambda ei: ei[:, 1:],
    "out of range": lambda ei: torch.cat([ei, torch.tensor([[0, 60], [60, 0]])], 1),
}


@pytest.mark.parametrize("case", list(BAD_GRAPHS))
def test_bad_device_graphs_get_the_cpu_error(fake_cuda, case):
    data = _data()
    data.edge_index = BAD_GRAPHS[case](data.edge_index)
    with cpu_kernels(), pytest.raises(ValueError) as cpu_err:
        DPRR(2.0, seed=1, eps1=0.5)(data)
    with pytest.raises(ValueError) as dev_err:
        DPRR(2.0, seed=1, eps1=0.5)(_on_dev(data))
    assert str(dev_err.value) == str(cpu_err.value)
    assert "dprr" not in fake_cuda  # nothing randomised


def test_bad_stored_csr_is_refused_on_the_device(fake_cuda):
    d = _csr_only(_data())
    c = d.__dict__["csr"]
    d.__dict__["csr"] = CSR(c.rowptr, c.col.flip(0).contiguous(), c.num_nodes)  # rows unsorted
    with cpu_kernels(), pytest.raises(ValueError) as cpu_err:
        DPRR(2.0, seed=1, eps1=0.5)(d)
    with pytest.raises(ValueError) as dev_err:
        DPRR(2.0, seed=1, eps1=0.5)(_on_dev(d))
    # the device check (graph kernels of mechanisms.edges) names every problem the C++ one does
    assert "rows not strictly increasing" in str(dev_err.value)
    flags = int(REAL["cpp"].edges_check_csr(c.rowptr.numpy(), c.col.flip(0).contiguous().numpy()))
    assert flags & 8 and "an asymmetric" in str(cpu_err.value)
    assert str(dev_err.value) == str(cpu_err.value)
    assert "dprr" not in fake_cuda and "edges_check_csr" in fake_cuda  # refused by the device check


def test_stored_csr_on_two_devices_names_both():
    d = _csr_only(_data())
    c = d.__dict__["csr"]
    d.__dict__["csr"] = CSR(c.rowptr, c.col.to("meta"), c.num_nodes)  # 'meta' stands for a GPU
    with pytest.raises(ValueError, match=r"data.csr.col is on meta but data.csr.rowptr is on cpu"):
        DPRR(2.0, seed=1, eps1=0.5)(d)


def test_random_device_csrs_get_the_cpu_check(fake_cuda):
    # random (often broken) CSR-only graphs: the device preparation (mechanisms.edges._graph_csr
    # on the graph kernels) refuses what the CPU one refuses, with the same message, and
    # accepts the rest with the same input seed, the CSR staying on the device
    g = np.random.default_rng(2)
    seen = set()
    for trial in range(60):
        n = int(g.integers(2, 12))
        rows = []
        for i in range(n):
            k = int(g.integers(0, n + 1))
            r = sorted(g.choice(n + 2, size=k, replace=False) - 1)  # may hold -1 or n
            if trial % 3 == 0:
                r = [j for j in r if 0 <= j < n and j != i]
            if trial % 5 == 0 and len(r) > 1:
                r[0], r[1] = r[1], r[0]
            rows.append(r)
        if trial % 4 == 0:  # symmetrise a clean one
            adj = np.zeros((n, n), bool)
            for i, r in enumerate(rows):
                for j in r:
                    if 0 <= j < n and j != i:
                        adj[i, j] = adj[j, i] = True
            rows = [list(np.flatnonzero(adj[i])) for i in range(n)]
        rp = np.zeros(n + 1, np.int64)
        rp[1:] = np.cumsum([len(r) for r in rows])
        col = np.array([j for r in rows for j in r], np.int64)
        flags = int(REAL["cpp"].edges_check_csr(rp, col))
        d = Data(x=torch.zeros(n, 1), num_nodes=n)
        d.__dict__["csr"] = CSR(torch.from_numpy(rp), torch.from_numpy(col), n)  # empty col: stride 0
        got = {}
        for where, graph in (("cpu", d), ("dev", _on_dev(d))):
            try:
                with cpu_kernels() if where == "cpu" else contextlib.nullcontext():
                    got[where] = ET._prepare(DPRR(2.0, seed=1), graph)
            except ValueError as exc:
                got[where] = str(exc)
        if flags:
            assert isinstance(got["cpu"], str) and got["dev"] == got["cpu"], (trial, flags, got)
        else:
            (s_cpu, c_cpu), (s_dev, c_dev) = got["cpu"], got["dev"]
            assert s_dev.graph == s_cpu.graph and isinstance(c_dev.col, DeviceInput), trial  # one identity
            assert torch.equal(plain(c_dev.col), c_cpu.col) and torch.equal(plain(c_dev.rowptr), c_cpu.rowptr)
        seen.add(flags)
    assert {0, 8} <= seen and any(f & 1 for f in seen) and any(f & 2 for f in seen)
    assert fake_cuda.count("edges_check_csr") == 60
    assert DeviceInput.copies == [], DeviceInput.copies


def test_device_sorted_csr_and_edge_index_equal_to_csr(fake_cuda):
    # what the transforms call on a device graph: mechanisms.edges._sorted_csr (built and
    # checked in one pass) and _edge_index_of, against ldpfast.graph.to_csr / to_edge_index
    g = torch.Generator().manual_seed(3)
    for n in (2, 7, 50):
        with cpu_kernels():
            ei = to_csr(torch.randint(0, n, (2, 4 * n), generator=g), n, symmetrize=True).to_edge_index()
            want = to_csr(ei, n)
        got = E._sorted_csr(dev(ei), n, None)
        assert got is not None
        assert torch.equal(plain(got.rowptr), want.rowptr) and torch.equal(plain(got.col), want.col)
        assert got.col.dtype == want.col.dtype
        assert E._sorted_csr(dev(ei.flip(1)), n, None) is None  # unsorted: general path
        g2 = CSR(dev(want.rowptr), dev(want.col), n)
        assert torch.equal(E._edge_index_of(g2, 1), ei)
        assert torch.equal(E._edge_index_of(g2, 0), ei.flip(0))
    assert fake_cuda.count("edges_sorted_csr") == 6 and fake_cuda.count("csr_to_edge_index") == 6
    assert DeviceInput.copies == [], DeviceInput.copies


# --- on a GPU (pytest -m cuda) -----------------------------------------------------------------
def _gpu_ready():
    return _backend.available()["cuda"] is None


ALL_CASES = [(c[0], c[1]) for c in FEATURE_CASES] + [(c[0], c[1]) for c in EDGE_CASES]


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu_ready(), reason="needs a CUDA device and CuPy")
@pytest.mark.parametrize("name,make", ALL_CASES, ids=[c[0] for c in ALL_CASES])
def test_every_transform_on_cuda_data_equals_cpu(name, make):
    for data in (_data(), _unsorted(_data())):
        want = make()(data)
        got = make()(data.to("cuda"))
        for k, v in want.to_dict().items():
            if isinstance(v, torch.Tensor):
                assert got[k].is_cuda, k
                assert got[k].dtype == v.dtype and torch.equal(got[k].cpu(), v), (name, k)


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu_ready(), reason="needs a CUDA device and CuPy")
@pytest.mark.parametrize("name,make", [(c[0], c[1]) for c in EDGE_CASES], ids=[c[0] for c in EDGE_CASES])
def test_edge_transforms_on_a_cuda_adj_t_equal_cpu(name, make):
    """PyG's adj_t (T.ToSparseTensor) on the GPU: read there, and the output adj_t comes back
    there, in the same format, equal to the CPU transform's."""
    import warnings

    import torch_geometric.transforms as T

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for keep_ei in (False, True):
            data = T.ToSparseTensor(remove_edge_index=not keep_ei)(_data())
            want = make()(data)
            got = make()(data.to("cuda"))
            a, b = got.adj_t, want.adj_t
            assert a.is_cuda and a.layout == b.layout and a.dtype == b.dtype, name
            for f in ("crow_indices", "col_indices", "values"):
                x, y = getattr(a, f)(), getattr(b, f)()
                assert x.dtype == y.dtype and torch.equal(x.cpu(), y), (name, f)
            assert ("edge_index" in got) == keep_ei
            if keep_ei:
                assert got.edge_index.is_cuda and torch.equal(got.edge_index.cpu(), want.edge_index), name
