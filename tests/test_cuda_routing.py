"""Routing of CUDA inputs, testable without a GPU.

Every public entry point of ``ldpfast.mechanisms.features`` and ``ldpfast.mechanisms.labels``,
the edge mechanisms (``dprr``, ``rr_edges``, ``local_laplace``, ``server_graph``),
propagation and the HeterPoisson / inference samplers must send a CUDA-device input to the
CUDA backend and never copy it (or anything computed from it) to the host.  Here a CPU
tensor subclass plays the CUDA input: ``_backend.device_of`` is patched to call it "cuda", a
recording module stands in for ``ldpfast._cuda``, and the subclass logs every host copy
(``.cpu()``, ``.numpy()``, ``.to(cpu)``, ``.tolist()``, ``__array__``) made of it or of any
tensor derived from it (the harness: tests/_fake_cuda.py).  The feature / label fakes write zeros (results are checked by the GPU
tests in test_cuda.py); the propagation, sampling and edge fakes run the C++ kernels on the
same memory, so the device-side Python is also checked against the CPU result bit for bit.
"""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch
from _fake_cuda import DeviceInput, cpu_kernels, dev, install, np_of, switch_off_cpu_kernels

from ldpfast import _backend
from ldpfast.mechanisms import features as F
from ldpfast.mechanisms import (
    grr,
    grr_fs,
    multibit_encode,
    multibit_rectify,
    onebit,
    optimal_m,
    rr_labels,
)


def _kernel(log, name, tensor_args, result=-1):
    # result: what the kernel returns (-1: the fused or separate check found no bad index)
    def kernel(*args):
        for i in tensor_args:  # the CUDA kernels take the tensors themselves, by pointer
            assert isinstance(args[i], torch.Tensor), (name, i, type(args[i]))
        if not name.startswith("check"):
            args[-1].zero_()
        log.append(name)
        return result
    return kernel


@pytest.fixture
def fake_cuda(monkeypatch):
    """A recording 'cuda' backend; DeviceInput tensors count as CUDA tensors."""
    log: list[str] = []
    mod = types.ModuleType("ldpfast._cuda")
    mod.grr = _kernel(log, "grr", (0, 4))
    mod.grr_fs = _kernel(log, "grr_fs", (0, 5))
    mod.onebit = _kernel(log, "onebit", (0, 6))
    mod.multibit_encode = _kernel(log, "multibit_encode", (0, 7))
    mod.rr_labels = _kernel(log, "rr_labels", (0, 1, 5))
    mod.check_categorical = _kernel(log, "check_categorical", (0,))
    mod.check_range = _kernel(log, "check_range", (0,))
    install(monkeypatch, mod)
    return log


g = torch.Generator().manual_seed(0)
XI = torch.randint(0, 3, (50, 6), generator=g)
XF = torch.rand(50, 6, generator=g)
Y = torch.randint(0, 4, (50,), generator=g)
MASK = torch.rand(50, generator=g) < 0.5

# (entry point, call on a device input, kernels it must launch: the feature mechanisms check
# their input in their own pass, so no check kernel runs before them)
CALLS = [
    ("grr", lambda b: grr(dev(XI), 3, 1.0, seed=1, backend=b), ["grr"]),
    ("grr 1-D", lambda b: grr(dev(XI[:, 0]), 3, 1.0, seed=1, backend=b),
     ["grr"]),
    ("grr_fs", lambda b: grr_fs(dev(XI), 3, 1.0, 2, seed=1, backend=b),
     ["grr_fs"]),
    ("onebit", lambda b: onebit(dev(XF), 1.0, seed=1, backend=b), ["onebit"]),
    ("multibit_encode", lambda b: multibit_encode(dev(XF), 1.0, 2, seed=1, backend=b),
     ["multibit_encode"]),
    ("rr_labels", lambda b: rr_labels(dev(Y), 4, 1.0, seed=1, backend=b), ["rr_labels"]),
    ("rr_labels mask", lambda b: rr_labels(dev(Y), 4, 1.0, seed=1, mask=dev(MASK), backend=b),
     ["rr_labels"]),
]


@pytest.mark.parametrize("backend", [None, "cuda", "auto"])
@pytest.mark.parametrize("name,call,kernels", CALLS, ids=[c[0] for c in CALLS])
def test_device_inputs_go_to_the_cuda_kernels_without_host_copies(fake_cuda, name, call,
                                                                  kernels, backend):
    out, spent = call(backend)
    assert fake_cuda == kernels
    assert DeviceInput.copies == [], f"{name} copied its input to the host"
    assert isinstance(out, DeviceInput)  # allocated beside the input, not on the host
    assert spent.params["backend"] == "cuda"


def test_post_processing_stays_on_the_device(fake_cuda):
    x_star = dev(torch.randint(-1, 2, (50, 6), generator=g).to(torch.int8))
    out = multibit_rectify(x_star, 1.0, 6)
    assert isinstance(out, DeviceInput) and DeviceInput.copies == [] and fake_cuda == []
    assert optimal_m(1.0, 6) >= 1  # no tensor argument: nothing to route


def test_every_public_entry_point_is_covered():
    from ldpfast.mechanisms import labels

    public = set(F.__all__) | set(labels.__all__)
    assert public == {c[0] for c in CALLS if " " not in c[0]} | {"multibit_rectify", "optimal_m"}


def test_host_copy_detector_can_fail(fake_cuda):
    # The detector sees copies of derived tensors too, so the test above can fail.
    x = dev(XI)
    x.detach().contiguous().to("cpu")
    np.asarray(x.reshape(-1))
    x.numpy()
    assert DeviceInput.copies == ["to", "__array__", "numpy"]


def test_bad_device_input_is_reported_from_the_kernels_fused_check(fake_cuda, monkeypatch):
    # The mechanism kernel flags flat index 7 (row 1, column 1 of a 6-column x): the call raises
    # from it and returns nothing (the kernel's output is dropped with the exception).
    log = fake_cuda
    cuda = _backend._cache["cuda"]
    monkeypatch.setattr(cuda, "grr_fs", _kernel(log, "grr_fs", (0, 5), result=7))
    monkeypatch.setattr(cuda, "onebit", _kernel(log, "onebit", (0, 6), result=7))
    x = dev(XI.clone())
    with pytest.raises(ValueError, match=r"x: value \d at row 1, column 1 is outside"):
        grr_fs(x, 3, 1.0, 2, seed=1)
    with pytest.raises(ValueError, match=r"x: value .* at index \(1, 1\) is NaN or outside"):
        onebit(dev(XF), 1.0, seed=1)
    assert log == ["grr_fs", "onebit"]  # no separate check pass
    assert torch.equal(x.as_subclass(torch.Tensor), XI)  # the input is never written


def test_cuda_unavailable_gives_the_reason(monkeypatch):
    install(monkeypatch, RuntimeError("no CUDA device visible to torch"))
    for b in (None, "cuda"):
        with pytest.raises(_backend.BackendUnavailable, match="no CUDA device visible"):
            grr(dev(XI), 3, 1.0, seed=1, backend=b)
    with pytest.raises(_backend.BackendUnavailable, match="cannot run on CUDA tensors"):
        grr(dev(XI), 3, 1.0, seed=1, backend="cpp")
    with pytest.raises(_backend.BackendUnavailable, match="needs CUDA tensors"):
        onebit(XF, 1.0, seed=1, backend="cuda")


def test_mixed_devices_name_both_tensors():
    # 'meta' stands for a second device: no GPU needed to reach the check.
    with pytest.raises(ValueError, match=r"mask is on meta but y is on cpu"):
        rr_labels(Y, 4, 1.0, mask=torch.ones(50, dtype=torch.bool, device="meta"))
    with pytest.raises(ValueError, match=r"mask is on cpu but y is on meta"):
        rr_labels(Y.to("meta"), 4, 1.0, mask=MASK)


# --- propagation (ldpfast.ops.propagate, ldpfast.nn.KProp) -------------------------------------
# The fake spmm_scaled computes the true result with plain torch ops (on the CPU tensors that
# stand for CUDA ones), so these tests also check the CUDA-side Python: the torch-native
# CSR build / transpose of ldpfast.graph, step_scales on the graph's device and the backward.
def _fake_spmm(log):
    def spmm_scaled(rowptr, col, a, b, x, y, self_loop, val=None, plan=None):
        for t in (rowptr, col, a, b, x, y) + (() if val is None else (val,)):
            assert isinstance(t, torch.Tensor), type(t)  # tensors by pointer, never arrays
        p = [t.as_subclass(torch.Tensor) for t in (rowptr, col, a, b, x)]
        rp, c, a_, b_, x_ = p
        n = x_.shape[0]
        v = torch.ones(c.numel(), dtype=x_.dtype) if val is None else val.as_subclass(torch.Tensor)
        row = torch.repeat_interleave(torch.arange(n), rp[1:] - rp[:-1])
        bx = b_[:, None] * x_
        acc = torch.zeros_like(x_).index_add_(0, row, v[:, None] * bx[c.long()])
        if self_loop:
            acc = acc + bx
        y.as_subclass(torch.Tensor).copy_(a_[:, None] * acc)
        log.append("spmm_scaled")
    return spmm_scaled


@pytest.fixture
def fake_cuda_prop(fake_cuda, monkeypatch):
    _backend._cache["cuda"].spmm_scaled = _fake_spmm(fake_cuda)
    switch_off_cpu_kernels(monkeypatch)
    return fake_cuda


def _graph(n=40, e=160, seed=1):
    gg = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=gg)
    ei = torch.cat([ei, ei[:, :10]], 1)  # repeated edges: summed weights / one edge
    w = torch.rand(ei.size(1), generator=gg, dtype=torch.float64)
    return ei, w


def _adjs(ei, w, n):
    """(name, adjacency, edge_weight) in every format as_adj_t reads."""
    coo = torch.sparse_coo_tensor(ei.flip(0), w, (n, n))
    return [("edge_index", ei, None), ("edge_index+w", ei, w),
            ("coo", coo, None), ("csr", coo.to_sparse_csr(), None),
            ("csc", coo.coalesce().to_sparse_csc(), None)]


def _dev_adj(adj):
    if adj.layout == torch.strided:
        return dev(adj)
    return adj  # sparse tensors cannot be subclassed; their parts are checked in _same_device


@pytest.mark.parametrize("aggr", ["mean", "add", "gcn"])
@pytest.mark.parametrize("masked", [False, True])
def test_propagate_device_input_runs_the_cuda_kernel_and_matches_cpu(fake_cuda_prop, aggr, masked):
    from ldpfast import ops

    n = 40
    ei, w = _graph(n)
    x = torch.rand(n, 5, dtype=torch.float64, generator=g)
    mask = (torch.rand(n, generator=g) < 0.6) if masked else None
    for sl in (False, True):
        for wt in (None, w):
            xc = x.clone().requires_grad_()
            with cpu_kernels():
                want = ops.propagate(ei, xc, 2, aggr, sl, mask, edge_weight=wt)
                want.sum().backward()
            want = want.detach()
            xd = dev(x.clone()).requires_grad_()
            got = ops.propagate(dev(ei), xd, 2, aggr, sl, None if mask is None else dev(mask),
                                edge_weight=None if wt is None else dev(wt))
            assert isinstance(got, DeviceInput)
            torch.testing.assert_close(got.as_subclass(torch.Tensor), want, rtol=1e-12, atol=1e-12)
            got.sum().backward()  # backward: the same kernel on A^T, built on the device
            torch.testing.assert_close(xd.grad.as_subclass(torch.Tensor), xc.grad, rtol=1e-12,
                                       atol=1e-12)
    assert DeviceInput.copies == [], DeviceInput.copies
    assert fake_cuda_prop and set(fake_cuda_prop) == {"spmm_scaled"}


@pytest.mark.parametrize("cached", [False, True])
def test_kprop_device_input_runs_the_cuda_kernel(fake_cuda_prop, cached):
    from ldpfast.nn import KProp

    n = 40
    ei, _ = _graph(n)
    x = torch.rand(n, 5, generator=g)
    xc = x.clone().requires_grad_()
    with cpu_kernels():
        want = KProp(2, "gcn", cached=cached)(xc, ei)
        want.sum().backward()
    layer = KProp(2, "gcn", cached=cached)
    for _ in range(2):  # the second call reuses the cache when cached
        xd = dev(x.clone()).requires_grad_()
        got = layer(xd, dev(ei))
        torch.testing.assert_close(got.as_subclass(torch.Tensor), want.detach())
        got.sum().backward()
        torch.testing.assert_close(xd.grad.as_subclass(torch.Tensor), xc.grad)
    assert DeviceInput.copies == [], DeviceInput.copies
    assert fake_cuda_prop.count("spmm_scaled") == 8  # 2 calls x (2 forward + 2 backward steps)


def test_device_csr_conversion_equals_the_cpp_one(fake_cuda_prop, monkeypatch):
    # The torch-native path (CUDA inputs) gives the C++ kernels' CSR, bit for bit.
    from ldpfast import graph as G

    n = 40
    ei, w = _graph(n)
    ei = torch.cat([ei, torch.tensor([[3, 7], [3, 7]])], 1)  # self loops: dropped
    w = torch.cat([w, torch.tensor([0.5, 0.25], dtype=torch.float64)])
    for name, adj, wt in _adjs(ei, w, n):
        with cpu_kernels():
            want = G.as_adj_t(adj, n, edge_weight=wt)
        with monkeypatch.context() as mp:
            if adj.layout != torch.strided:  # sparse tensors cannot be subclassed: force the path
                mp.setattr(G, "_torch_path", lambda *ts: True)
            got = G.as_adj_t(_dev_adj(adj), n, edge_weight=None if wt is None else dev(wt))
        for f in ("rowptr", "col", "value"):
            a, b = getattr(got, f), getattr(want, f)
            assert (a is None) == (b is None), (name, f)
            if a is not None:
                assert a.dtype == b.dtype and torch.equal(a.as_subclass(torch.Tensor), b), (name, f)
        t_got = G.transpose(got, on_device=True)
        with cpu_kernels():
            t_want = G.transpose(want)
        for f in ("rowptr", "col", "value"):
            a, b = getattr(t_got, f), getattr(t_want, f)
            if a is not None:
                assert torch.equal(a.as_subclass(torch.Tensor), b), (name, "T", f)
    for sym in (False, True):
        with cpu_kernels():
            want = G.to_csr(ei, n, edge_weight=w, symmetrize=sym)
        got = G.to_csr(dev(ei), n, edge_weight=dev(w), symmetrize=sym)
        for f in ("rowptr", "col", "value"):
            assert torch.equal(getattr(got, f).as_subclass(torch.Tensor), getattr(want, f)), (sym, f)
    # the torch-native sparse-CSR path (rowptr input) against C++
    rp, col = want.rowptr, want.col
    got = G._from_rowptr(dev(rp), dev(col.flip(0)), None, n, "adj", None)
    with cpu_kernels():
        ref = G._from_rowptr(rp, col.flip(0), None, n, "adj", None)
    assert torch.equal(got.col.as_subclass(torch.Tensor), ref.col)
    assert DeviceInput.copies == [], DeviceInput.copies


def test_propagate_mixed_devices_name_both_tensors():
    from ldpfast import ops

    x = torch.rand(5, 2)
    with pytest.raises(ValueError, match=r"mask is on meta but x is on cpu"):
        ops.propagate(torch.tensor([[0, 1], [1, 2]]), x, 1,
                      mask=torch.ones(5, dtype=torch.bool, device="meta"))
    with pytest.raises(ValueError, match=r"edge_index: expected tensors on meta \(the device of x\), got cpu"):
        ops.propagate(torch.tensor([[0, 1], [1, 2]]), x.to("meta"), 1)


# --- HeterPoisson sampler ----------------------------------------------------------------------
# The fake sampling kernels run the C++ ones on plain views of the same memory, so the batch of
# the CUDA path (device CSR build, torch prefix sums and compaction) is checked against the CPU
# sampler's, bit for bit.
@pytest.fixture
def fake_cuda_sampling(fake_cuda_prop):
    import ldpfast._C as C

    from ldpfast.graph import CSR
    from ldpfast.sampling import heterpoisson as H

    log = fake_cuda_prop
    mod = _backend._cache["cuda"]

    def heter_central(cand, seed, step, q, flags):
        log.append("heter_central")
        return C.heter_central(np_of(cand), seed, step, q, np_of(flags))

    def heter_nodes(rp, col, deg, centers, cand_mask, allow, seed, step, q, M, drop, ub_ptr, counts,
                    n_id, zeroed):
        log.append("heter_nodes")
        allow = np.empty(0, np.uint8) if allow is None or allow.numel() == 0 else np_of(allow)
        used = int(np_of(ub_ptr)[-1])  # the slots may be a share of longer buffers
        C.heter_nodes(np_of(rp), np_of(col), np_of(deg), np_of(centers),
                      np_of(cand_mask), allow, seed, step, q, M, drop, np_of(ub_ptr),
                      np_of(counts), np_of(n_id)[:used], np_of(zeroed)[:used])

    def used(n_id, node_ptr):  # the C++ kernel wants n_id to end where the last sub-graph does
        return np_of(n_id)[:int(np_of(node_ptr)[-1])]

    def heter_edge_counts(rp, col, n_id, node_ptr, induced):
        log.append("heter_edges")
        counts = np.empty(node_ptr.numel() - 1, dtype=np.int64)
        C.heter_edges(np_of(rp), np_of(col), used(n_id, node_ptr), np_of(node_ptr), bool(induced), counts,
                      np.empty(0, np.int64), np.empty(0, np.int64), False)
        return dev(torch.from_numpy(counts))

    def heter_edges(rp, col, n_id, node_ptr, induced, edge_ptr=None, num_edges=None):
        log.append("heter_edges")
        if edge_ptr is None:
            csr = CSR(rp.as_subclass(torch.Tensor), col.as_subclass(torch.Tensor), rp.numel() - 1)
            return dev(H._edges(C, csr, np_of(n_id), np_of(node_ptr), induced))
        src, dst = np.empty(num_edges, np.int64), np.empty(num_edges, np.int64)
        C.heter_edges(np_of(rp), np_of(col), used(n_id, node_ptr), np_of(node_ptr), bool(induced),
                      np_of(edge_ptr), src, dst, True)
        return dev(torch.from_numpy(np.stack([src, dst])))

    def host_ints(t):  # the sampler's size reads (a real D2H copy on a GPU; counted by ldpfast._syncs)
        log.append("host_ints")
        return [int(v) for v in np_of(t)]

    def heter_infer(rp, col, centers, allow, seed, step, n_test):
        log.append("heter_infer")
        allow = np.empty(0, np.uint8) if allow is None or allow.numel() == 0 else np_of(allow)
        B = centers.numel()
        counts = np.empty(B, dtype=np.int64)
        args = (np_of(rp), np_of(col), np_of(centers), allow, seed, step, n_test)
        C.heter_infer_nodes(*args, counts, np.empty(0, np.int64), False)
        node_ptr = np.zeros(B + 1, dtype=np.int64)
        np.cumsum(counts, out=node_ptr[1:])
        n_id = np.empty(int(node_ptr[B]), dtype=np.int64)
        C.heter_infer_nodes(*args, node_ptr, n_id, True)
        return dev(torch.from_numpy(node_ptr)), dev(torch.from_numpy(n_id))

    mod.heter_central, mod.heter_nodes, mod.heter_edges = heter_central, heter_nodes, heter_edges
    mod.heter_edge_counts, mod.host_ints = heter_edge_counts, host_ints
    mod.heter_infer = heter_infer
    return log


@pytest.mark.parametrize("overlap", ["drop", "zero"])
@pytest.mark.parametrize("induced", [True, False])
@pytest.mark.parametrize("periph", [False, True])
def test_heterpoisson_device_data_runs_the_cuda_kernels_and_matches_cpu(fake_cuda_sampling, overlap,
                                                                        induced, periph):
    from torch_geometric.data import Data

    from ldpfast.sampling import HeterPoisson

    gg = torch.Generator().manual_seed(11)
    n = 300
    ei = torch.randint(0, n, (2, 2400), generator=gg)
    x = torch.rand(n, 4, generator=gg)
    y = torch.randint(0, 3, (n,), generator=gg)
    train = torch.rand(n, generator=gg) < 0.7
    allow = (torch.rand(n, generator=gg) < 0.8) if periph else None
    kw = {"train_nodes": train, "peripheral_nodes": allow, "overlap": overlap, "induced": induced}
    with cpu_kernels():
        ref = HeterPoisson(Data(x=x, y=y, edge_index=ei, num_nodes=n), 0.3, 2.0, seed=5, **kw)
        want = [ref.sample(t) for t in range(3)]
    sp = HeterPoisson(Data(x=dev(x), y=dev(y), edge_index=dev(ei), num_nodes=n), 0.3, 2.0,
                      seed=5, **kw)
    for t in range(3):
        got = sp.sample(t)
        for f in ("x", "edge_index", "n_id", "ptr", "batch", "center", "y", "zeroed"):
            a, b = getattr(got, f), getattr(want[t], f)
            assert torch.equal(a.as_subclass(torch.Tensor), b), (t, f)
    assert DeviceInput.copies == [], DeviceInput.copies
    assert {"heter_central", "heter_nodes", "heter_edges"} <= set(fake_cuda_sampling)


@pytest.mark.parametrize("induced", [True, False])
@pytest.mark.parametrize("periph", [False, True])
def test_inference_subgraphs_device_data_runs_the_cuda_kernels_and_matches_cpu(fake_cuda_sampling, induced,
                                                                               periph):
    from torch_geometric.data import Data

    from ldpfast.sampling import inference_subgraphs

    gg = torch.Generator().manual_seed(12)
    n = 300
    ei = torch.randint(0, n, (2, 2400), generator=gg)
    ei = torch.cat([ei, torch.stack([torch.arange(1, 200), torch.zeros(199, dtype=torch.long)])], 1)  # a hub
    x = torch.rand(n, 4, generator=gg)
    y = torch.randint(0, 3, (n,), generator=gg)
    test = torch.rand(n, generator=gg) < 0.4
    test[0] = True
    allow = (torch.rand(n, generator=gg) < 0.7) if periph else None
    for n_test in (0, 3, 13):
        kw = {"peripheral_nodes": allow, "seed": 4, "step": 2, "induced": induced}
        with cpu_kernels():
            want = inference_subgraphs(Data(x=x, y=y, edge_index=ei, num_nodes=n), test, n_test, **kw)
        got = inference_subgraphs(Data(x=dev(x), y=dev(y), edge_index=dev(ei), num_nodes=n), dev(test),
                                  n_test, **{**kw, "peripheral_nodes": None if allow is None else dev(allow)})
        for f in ("x", "edge_index", "n_id", "ptr", "batch", "center", "y", "zeroed"):
            a, b = getattr(got, f), getattr(want, f)
            assert torch.equal(a.as_subclass(torch.Tensor), b), (n_test, f)
    assert DeviceInput.copies == [], DeviceInput.copies
    assert "heter_infer" in fake_cuda_sampling and "heter_edges" in fake_cuda_sampling


# --- edge mechanisms (dprr, rr_edges, local_laplace, server_graph) ----------------------------
# The fake edge kernels run the C++ kernels on plain views of the same memory (count, prefix
# sum, fill, as ldpfast._cuda does on the GPU), so the device path of mechanisms/edges/
# (device CSR build and checks, probabilities, public users, LocalLap's rounds, top-T on the
# device, masked CSRs, unions, transpose, server rules) is checked against the CPU result bit
# for bit, and must make no host copy.
def _two_pass(count, fill, n, dtype, with_val=False):
    counts = np.zeros(n + 1, dtype=np.int64)
    count(counts)
    np.cumsum(counts, out=counts)
    col = np.empty(int(counts[n]), dtype=dtype)
    val = np.empty(int(counts[n]), dtype=np.int64) if with_val else None
    fill(counts, col, val)
    out = (dev(torch.from_numpy(counts)), dev(torch.from_numpy(col)))
    return out + ((dev(torch.from_numpy(val)),) if with_val else ())


@pytest.fixture
def fake_cuda_edges(fake_cuda_prop):
    import ldpfast._C as C

    log = fake_cuda_prop
    mod = _backend._cache["cuda"]
    none = np.empty(0, np.uint8)

    def rec(name, f):
        def g(*a):
            for x in a:
                assert not isinstance(x, np.ndarray), (name, "host array passed to a CUDA kernel")
            log.append(name)
            return f(*a)
        return g

    def fill_discrete_laplace(out, seed, stream, row0, t, s):
        C.fill_discrete_laplace(np_of(out), seed, stream, row0, t, s)

    def dprr_probs(rowptr, noise, g_, p, pm):
        n = rowptr.numel() - 1
        outs = [np.empty(n) for _ in range(4)]
        C.dprr_probs(np_of(rowptr), np_of(noise), g_, p, pm, *outs)
        return tuple(dev(torch.from_numpy(o)) for o in outs)

    def edges_rr(rp, col, seed, st_t, c_t, st_f, c_f, pt, pf, pub):
        args = (np_of(rp), np_of(col), seed, st_t, c_t, st_f, c_f, np_of(pt), np_of(pf),
                none if pub is None else np_of(pub))
        return _two_pass(lambda orp: C.edges_rr_count(*args, orp, True),
                         lambda orp, oc, _: C.edges_rr_fill(*args, orp, oc), rp.numel() - 1,
                         np_of(col).dtype)

    def locallap_edge_values(rp, col, seed, t, s, one, rnd, lo, hi, p, out):
        C.locallap_edge_values(np_of(rp), np_of(col), seed, t, s, one, rnd, lo, hi, p, np_of(out))

    def locallap_zero(erp, ecol, seed, rnd, pi, lo, hi, split, t, s):
        args = (np_of(erp), np_of(ecol), seed, rnd, pi, lo, hi, split, t, s)
        e = np.empty(0, np_of(ecol).dtype)
        return _two_pass(lambda orp: C.locallap_zero(*args, orp, e, np.empty(0, np.int64), False),
                         lambda orp, oc, ov: C.locallap_zero(*args, orp, oc, ov, True), erp.numel() - 1,
                         np_of(ecol).dtype, with_val=True)

    def csr_combine(ra, ca, rb, cb, mode):
        args = (np_of(ra), np_of(ca), np_of(rb), np_of(cb), mode)
        return _two_pass(lambda orp: C.csr_combine(*args, orp, np.empty(0, np_of(ca).dtype), False),
                         lambda orp, oc, _: C.csr_combine(*args, orp, oc, True), ra.numel() - 1,
                         np_of(ca).dtype)

    def edges_check_csr(rp, col):
        return C.edges_check_csr(np_of(rp), np_of(col))

    def csr_to_edge_index(rp, col, out, layout):
        C.csr_to_edge_index(np_of(rp), np_of(col), np_of(out), layout)

    def edges_sorted_csr(src, dst, n, out_rowptr, out_col):
        return C.edges_sorted_csr(np_of(src), np_of(dst), n, np_of(out_rowptr), np_of(out_col))

    for name, f in list(locals().items()):
        if callable(f) and name not in ("rec", "C"):
            setattr(mod, name, rec(name, f))
    return log


def _edge_data(n=60, e=300, seed=3):
    from torch_geometric.data import Data

    from ldpfast.graph import to_csr

    gg = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=gg)
    with cpu_kernels():
        csr = to_csr(ei, n, symmetrize=True)
    pub = torch.rand(n, generator=gg) < 0.2
    return csr, Data(edge_index=csr.to_edge_index(), num_nodes=n), pub


def _same_result(got, want, what):
    from ldpfast.graph import CSR

    for f in ("noisy_degrees", "d_star", "q", "edge_index"):
        a, b = getattr(got, f), getattr(want, f)
        assert (a is None) == (b is None), (what, f)
        if a is not None:
            assert a.dtype == b.dtype and torch.equal(a.as_subclass(torch.Tensor).nan_to_num(-7),
                                                      b.nan_to_num(-7)), (what, f)
    for g_, w in ((got.noisy, want.noisy), (got.graph(), want.graph())):
        assert isinstance(g_, CSR)
        for f in ("rowptr", "col"):
            a, b = getattr(g_, f), getattr(w, f)
            assert a.dtype == b.dtype and torch.equal(a.as_subclass(torch.Tensor), b), (what, f)
    assert got.spent.eps == want.spent.eps and got.spent.params == want.spent.params, what
    assert got.backend == "cuda", what


def _csr_dev(csr):
    from ldpfast.graph import CSR

    return CSR(dev(csr.rowptr), dev(csr.col), csr.num_nodes)


@pytest.mark.parametrize("form", ["csr", "data"])
@pytest.mark.parametrize("rule", ["none", "or", "and", "lower", "upper"])
@pytest.mark.parametrize("backend", [None, "cuda"])
def test_edge_mechanisms_device_input_run_the_cuda_kernels_and_match_cpu(fake_cuda_edges, form, rule,
                                                                         backend):
    from torch_geometric.data import Data

    from ldpfast.mechanisms import dprr, local_laplace, rr_edges

    csr, data, pub = _edge_data()
    dev_graph = _csr_dev(csr) if form == "csr" else Data(edge_index=dev(data.edge_index), num_nodes=60)
    calls = [
        ("dprr", lambda g, p, b: dprr(g, 2.0, seed=11, symmetrize=rule, public=p, backend=b)),
        ("dprr eps1", lambda g, p, b: dprr(g, 3.0, seed=12, eps1=0.5, symmetrize=rule, backend=b)),
        ("rr_edges", lambda g, p, b: rr_edges(g, 1.5, seed=13, symmetrize=rule, public=p, backend=b)),
    ]
    if rule == "none":
        calls += [("local_laplace", lambda g, p, b: local_laplace(g, 1.0, seed=14, backend=b)),
                  ("local_laplace rounds", lambda g, p, b: local_laplace(g, 4.0, seed=15, backend=b,
                                                                       _target=3.0))]
    for what, call in calls:
        with cpu_kernels():
            want = call(csr if form == "csr" else data, pub, None)
            want.edge_index, want.graph()  # computed on first access: with the CPU kernels
        got = call(dev_graph, dev(pub), backend)
        if what.startswith("local_laplace rounds"):
            assert got.spent.params["threshold_rounds"] > 1  # forced extra rounds were taken
        _same_result(got, want, what)
    assert DeviceInput.copies == [], DeviceInput.copies
    assert "edges_rr" in fake_cuda_edges
    # a sorted edge_index is built and checked in one pass; a CSR is checked
    assert ("edges_sorted_csr" if form == "data" else "edges_check_csr") in fake_cuda_edges
    if rule == "none":
        assert {"locallap_zero", "locallap_edge_values", "dprr_probs"} <= set(fake_cuda_edges)
    else:
        assert "csr_combine" in fake_cuda_edges


def test_edge_mechanisms_mixed_devices_name_both_tensors():
    # 'meta' stands for a second device: no GPU needed to reach the checks.
    from ldpfast.graph import CSR
    from ldpfast.mechanisms import dprr, rr_edges

    csr, _, pub = _edge_data()
    with pytest.raises(ValueError, match=r"CSR.col is on meta but CSR.rowptr is on cpu"):
        dprr(CSR(csr.rowptr, csr.col.to("meta"), csr.num_nodes), 1.0, seed=1)
    with pytest.raises(ValueError, match=r"public is on meta but graph is on cpu"):
        rr_edges(csr, 1.0, seed=1, public=pub.to("meta"))
    with pytest.raises(ValueError, match=r"public is on meta but graph is on cpu"):
        dprr(csr, 1.0, seed=1, public=pub.to("meta"))


def test_edge_mechanisms_device_public_must_be_a_device_tensor(fake_cuda_edges):
    from ldpfast.mechanisms import dprr

    csr, _, pub = _edge_data()
    with pytest.raises(TypeError, match="public: expected a bool torch.Tensor"):
        dprr(_csr_dev(csr), 1.0, seed=1, public=pub.numpy())
    with pytest.raises(ValueError, match=r"public: expected shape \(60,\)"):
        dprr(_csr_dev(csr), 1.0, seed=1, public=dev(pub[:5]))
    assert "edges_rr" not in fake_cuda_edges  # nothing randomised


def test_edge_mechanisms_bad_device_graph_is_reported_from_the_device_check(fake_cuda_edges):
    from ldpfast.graph import CSR
    from ldpfast.mechanisms import dprr

    rp = torch.tensor([0, 1, 2, 3])
    col = torch.tensor([1, 2, 0], dtype=torch.int32)  # a directed 3-cycle: asymmetric
    with pytest.raises(ValueError, match="asymmetric"):
        dprr(CSR(dev(rp), dev(col), 3), 1.0, seed=1)
    assert fake_cuda_edges == ["edges_check_csr"]


def test_edge_mechanisms_cuda_unavailable_gives_the_reason(monkeypatch):
    from ldpfast.mechanisms import dprr

    install(monkeypatch, RuntimeError("no CUDA device visible to torch"))
    csr, _, _ = _edge_data()
    with pytest.raises(_backend.BackendUnavailable, match="no CUDA device visible"):
        dprr(_csr_dev(csr), 1.0, seed=1)
    with pytest.raises(_backend.BackendUnavailable, match="cannot run on CUDA tensors"):
        dprr(_csr_dev(csr), 1.0, seed=1, backend="cpp")


# --- synthetic graphs (ldpfast.datasets.synthetic, synthetic.cu) -------------------------------
@pytest.fixture
def fake_cuda_synth(monkeypatch):
    """A 'cuda' backend whose synthetic launchers run the C++ kernels of the same contracts on
    DeviceInput memory; the node plan stays on the real C++ backend (host work)."""
    import ldpfast._C as C

    log: list[str] = []
    mod = types.ModuleType("ldpfast._cuda")

    def rec(name, f):
        def g(*a):
            # inputs are device tensors; synth_features' output x is allocated by a factory
            # (torch.empty(..., device=...)), a plain tensor here (see tests/_fake_cuda.py)
            for x in (a[:-1] if name == "synth_features" else a):
                assert not isinstance(x, np.ndarray), (name, "host array passed to a CUDA kernel")
                assert not isinstance(x, torch.Tensor) or isinstance(x, DeviceInput), (name, "host tensor")
            log.append(name)
            return f(*a)
        return g

    def synth_upload(arrays, device):
        assert torch.device(device).type == "cuda"
        log.append("synth_upload")
        return {k: dev(torch.from_numpy(np.array(a))) for k, a in arrays.items()}

    def synth_edges(W, cls, seg, fmat, wmax, wmin, scale, seed, attempt):
        n = W.numel()
        args = (seed, attempt, np_of(W), np_of(cls), np_of(seg), np_of(fmat), scale,
                np.arange(n + 1, dtype=np.int64))
        rp = np.zeros(n + 1, dtype=np.int64)
        C.synth_edge_count(*args, rp[1:])
        np.cumsum(rp, out=rp)
        col = np.empty(int(rp[n]), dtype=np.int32)
        C.synth_edge_fill(*args, rp, col)
        return dev(torch.from_numpy(rp)), dev(torch.from_numpy(col))

    def synth_priorities(rp, total, seed):
        assert total == int(np_of(rp)[-1])
        out = np.empty(total, dtype=np.int64)
        C.synth_priorities(seed, np_of(rp), out)
        return dev(torch.from_numpy(out))

    def synth_features(seed, y, n_classes, signal, kind, x):
        C.synth_features(seed, np_of(y), n_classes, signal, kind, np_of(x))

    mod.synth_upload = synth_upload
    for name, f in (("synth_edges", synth_edges), ("synth_priorities", synth_priorities),
                    ("synth_features", synth_features)):
        setattr(mod, name, rec(name, f))
    install(monkeypatch, mod)
    return log


_SYNTH_CASES = [
    {"avg_degree": 8, "num_features": 5},
    {"num_edges": 30000, "num_classes": 3, "homophily": 0.6, "num_features": 4, "feature_kind": "continuous"},
    {"avg_degree": 6, "num_classes": 4, "homophily": 1.0, "num_features": 7, "feature_dtype": torch.uint8},
]


@pytest.mark.parametrize("kw", _SYNTH_CASES)
@pytest.mark.parametrize("how", [{"device": "cuda"}, {"backend": "cuda"}, {"device": torch.device("cuda", 0)}])
def test_synthetic_cuda_request_builds_on_the_device_and_matches_cpu(fake_cuda_synth, kw, how):
    from ldpfast.datasets import synthetic

    want = synthetic(8000, seed=2**64 - 3, edge_index=True, backend="cpp", **kw)
    assert fake_cuda_synth == []  # the CPU request did not reach the fake
    got = synthetic(8000, seed=2**64 - 3, edge_index=True, **how, **kw)
    trims = "num_edges" in kw
    assert fake_cuda_synth == (["synth_upload", "synth_edges"] + (["synth_priorities"] if trims else [])
                               + ["synth_features"])
    assert DeviceInput.copies == []  # nothing computed from the device edge list came back
    pairs = [(got.csr.rowptr, want.csr.rowptr), (got.csr.col, want.csr.col), (got.y, want.y),
             (got.edge_index, want.edge_index), (got.x, want.x)]
    for g, w in pairs:
        assert isinstance(g, DeviceInput) or g is got.x, type(g)
        assert g.dtype == w.dtype
        assert np_of(g).tobytes() == w.numpy().tobytes()
    if trims:
        assert got.csr.nnz == 2 * kw["num_edges"]


@pytest.mark.parametrize("kw", [{"num_edges": 50 * 49 // 2, "num_classes": 1},  # every pair (scale = inf)
                                {"num_edges": 600, "num_classes": 2, "homophily": 1.0}])  # every intra pair
def test_synthetic_cuda_complete_graphs_match_cpu(fake_cuda_synth, kw):
    from ldpfast.datasets import synthetic

    want = synthetic(50, seed=3, edge_index=False, backend="cpp", **kw)
    got = synthetic(50, seed=3, backend="cuda", edge_index=False, **kw)
    assert DeviceInput.copies == [] and "synth_edges" in fake_cuda_synth
    assert np_of(got.csr.rowptr).tobytes() == want.csr.rowptr.numpy().tobytes()
    assert np_of(got.csr.col).tobytes() == want.csr.col.numpy().tobytes()


def test_synthetic_device_trim_and_csr_can_fail(fake_cuda_synth, monkeypatch):
    # the comparison above sees a wrong trim: with negated priorities other edges go
    from ldpfast.datasets import synthetic

    kw = _SYNTH_CASES[1]
    want = synthetic(8000, seed=5, edge_index=False, backend="cpp", **kw)
    mod = _backend._cache["cuda"]
    real = mod.synth_priorities
    monkeypatch.setattr(mod, "synth_priorities", lambda rp, total, seed: -real(rp, total, seed))
    got = synthetic(8000, seed=5, edge_index=False, device="cuda", **kw)
    assert got.csr.nnz == want.csr.nnz
    assert np_of(got.csr.col).tobytes() != want.csr.col.numpy().tobytes()


def test_synthetic_cuda_unavailable_gives_the_reason(monkeypatch):
    from ldpfast.datasets import synthetic

    install(monkeypatch, RuntimeError("no CUDA device visible to torch"))
    for how in ({"device": "cuda"}, {"backend": "cuda"}):
        with pytest.raises(_backend.BackendUnavailable, match="no CUDA device visible"):
            synthetic(500, 4, seed=1, **how)
    with pytest.raises(_backend.BackendUnavailable, match="cannot run on CUDA"):
        synthetic(500, 4, seed=1, device="cuda", backend="cpp")
    with pytest.raises(ValueError, match="device: expected 'cpu', 'cuda'"):
        synthetic(500, 4, seed=1, device="tpu")
    with pytest.raises(ValueError, match="device: expected 'cpu', 'cuda'"):
        synthetic(500, 4, seed=1, device="meta")
