"""``fit(..., device=)`` of the four pipelines and DP-SGD on CUDA.

Without a GPU (as in tests/test_cuda_routing.py; the harness: tests/_fake_cuda.py): CPU tensors of the ``DeviceInput`` subclass
stand for CUDA tensors, ``_backend.device_of`` calls them "cuda", and a stand-in for
``ldpfast._cuda`` records every kernel launch.  Here the stand-in kernels run the C++ kernels
on plain views of the same memory, so a pipeline fed device data must (a) launch every
randomiser and propagation on the cuda backend, (b) never copy device data to the host
(``.cpu()``, ``.numpy()``, ``.tolist()``, ``__array__``, ``.to('cpu')``), except the one
documented host step (METIS), and (c) give exactly the CPU run's report for the same seed,
which also checks the device-side Python of each pipeline (torch-native CSR build, masks,
DP-SGD clipping).  Then: bad ``device=`` values, mixed devices, ops without a CUDA port,
the out-of-memory wrapper, and ``device="cpu"`` = the default path.  The GPU tests at the end
(``pytest -m cuda``) run each pipeline with ``device="cuda"`` and compare the randomised
inputs with the CPU run's bits.
"""
from __future__ import annotations

import math
import types

import pytest
import torch
from _fake_cuda import DeviceInput, cpp_kernel, cpu_kernels, np_of
from test_cuda_routing import (  # noqa: F401 - fixtures used by name
    fake_cuda,
    fake_cuda_prop,
    fake_cuda_sampling,
)

import ldpfast
from ldpfast import _backend
from ldpfast.methods import dprr as DP
from ldpfast.methods import heterpoisson as HP
from ldpfast.methods import lpgnn, rgnn
from ldpfast.reproduce.dprr import synthetic_graph_classification

torch.set_num_threads(1)


class DevT(DeviceInput):
    """DeviceInput whose sparse results stay plain tensors (sparse tensors cannot be
    subclassed; LPGNN's factored SAGE input builds one from device data)."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        cls.log_copy(func, args, kwargs)
        with torch._C.DisableTorchFunctionSubclass():
            ret = func(*args, **kwargs)
        if func in torch.overrides.get_default_nowrap_functions():
            return ret
        return _wrap(ret, cls)


def _wrap(ret, cls):
    if isinstance(ret, torch.Tensor) and not isinstance(ret, cls) and ret.layout == torch.strided:
        return ret.as_subclass(cls)
    if isinstance(ret, (tuple, list)):
        return type(ret)(_wrap(r, cls) for r in ret) if not hasattr(ret, "_fields") else \
            type(ret)(*(_wrap(r, cls) for r in ret))
    return ret


def _dev(t: torch.Tensor) -> DevT:
    return t.as_subclass(DevT)


@pytest.fixture
def fake_gpu(fake_cuda_sampling, monkeypatch):  # noqa: F811 - the imported fixture, by name
    """The recording cuda stand-in, its kernels backed by the C++ ones (same bits as CPU)."""
    import ldpfast._C as C

    log = fake_cuda_sampling
    mod = _backend._cache["cuda"]

    for name in ("grr", "grr_fs", "onebit", "multibit_encode", "rr_labels", "check_categorical",
                 "check_range"):
        setattr(mod, name, cpp_kernel(log, name))

    def spmm_scaled(rowptr, col, a, b, x, y, self_loop, val=None, plan=None):
        log.append("spmm_scaled")
        C.spmm_scaled(*[np_of(t) for t in (rowptr, col, a, b, x, y)], self_loop, np_of(val))

    mod.spmm_scaled = spmm_scaled
    # the CUDA families of this build (what _backend.require_cuda_family reads)
    mod.KERNELS = {"features": (), "propagate": (), "rng": (),
                   "sampling": ("heter_central", "heter_nodes_i32", "heter_edges_i32")}
    return log


def _graph(n=160, e=900, d=12, c=4, seed=0, binary=False):
    from torch_geometric.data import Data
    from torch_geometric.utils import coalesce, to_undirected

    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    ei = ei[:, ei[0] != ei[1]]
    ei = coalesce(to_undirected(ei, num_nodes=n), num_nodes=n)
    x = (torch.rand(n, d, generator=g) < 0.3).float() if binary else torch.rand(n, d, generator=g)
    y = torch.randint(0, c, (n,), generator=g)
    return Data(x=x, y=y, edge_index=ei, num_nodes=n)


def _on_device(data):
    """The same graph with every tensor standing for a CUDA tensor."""
    from ldpfast.graph import CSR

    out = data.clone()
    for key, value in data.items():
        if isinstance(value, torch.Tensor):
            out[key] = _dev(value.clone())
        elif isinstance(value, CSR):
            out[key] = CSR(_dev(value.rowptr.clone()), _dev(value.col.clone()), value.num_nodes,
                           None if value.value is None else _dev(value.value.clone()))
    return out


def _same(a, b, path=""):
    """Reports equal field by field (floats exactly: same kernels, same order)."""
    if isinstance(a, dict):
        assert a.keys() == b.keys(), path
        for k in a:
            _same(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b)):
            _same(u, v, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), path
    else:
        assert a == b, (path, a, b)


def _strip(d: dict, device_run: bool = False) -> dict:
    """A report without its wall-clock timings and the kernels' backend name (a device run
    must name 'cuda')."""
    d = dict(d)
    d.pop("timings", None)
    if isinstance(d.get("stats"), dict):
        d["stats"] = {k: v for k, v in d["stats"].items() if not k.endswith("_s")}
    priv = d.get("privacy")
    if isinstance(priv, dict) and isinstance(priv.get("entries"), list):
        entries = []
        for e in priv["entries"]:
            e = dict(e, params=dict(e.get("params", {})))
            b = e["params"].pop("backend", None)
            if device_run:
                assert b == "cuda", e
            entries.append(e)
        d["privacy"] = dict(priv, entries=entries)
    if "settings" in d:
        d["settings"] = {k: v for k, v in d["settings"].items() if not k.startswith("seconds_")}
    return d


# --- routing: each fit runs its randomisers on the cuda backend, data stays on the device ------
@pytest.mark.parametrize("model", ["sage", "gcn"])
def test_lpgnn_device_data_randomised_on_cuda_and_equal_to_cpu(fake_gpu, model):
    # factored=False: the factored SAGE input multiplies a torch sparse tensor, which the
    # stand-in cannot mark as a device tensor (the GPU test covers the factored path)
    data = _graph()
    kw = {"model": model, "epochs": 4, "patience": 4, "seed": 11, "dataset": "cora", "factored": False}
    with cpu_kernels():
        want = lpgnn.fit(data, 1.0, 1.0, **kw).to_dict()
    got = lpgnn.fit(_on_device(data), 1.0, 1.0, **kw).to_dict()
    assert DeviceInput.copies == [], DeviceInput.copies
    assert {"multibit_encode", "rr_labels", "spmm_scaled"} <= set(fake_gpu)
    _same(_strip(got, True), _strip(want))


@pytest.mark.parametrize("variant", ["rgnn", "no_llp"])
def test_rgnn_device_data_randomised_on_cuda_and_equal_to_cpu(fake_gpu, variant):
    data = _graph(binary=True)
    kw = {"epochs": 3, "seed": 12, "C": 4, "variant": variant, "group_size": 1, "m": 5}
    with cpu_kernels():
        bags = rgnn.metis_bags(data, 4, 7)
        want = rgnn.fit(data, 1.0, 1.0, bags=bags, **kw).to_dict()
    got = rgnn.fit(_on_device(data), 1.0, 1.0, bags=_dev(bags.clone()), **kw).to_dict()
    assert DeviceInput.copies == [], DeviceInput.copies
    assert {"grr_fs", "rr_labels", "spmm_scaled"} <= set(fake_gpu)
    _same(_strip(got, True), _strip(want))


def test_rgnn_metis_is_the_one_host_copy(fake_gpu):
    # METIS (pymetis) has no device version: the public CSR goes to the host once, named in
    # the docs; nothing else does.
    data = _graph(binary=True)
    kw = {"epochs": 2, "seed": 13, "C": 4, "group_size": 1, "m": 5}
    with cpu_kernels():
        want = rgnn.fit(data, 1.0, 1.0, **kw).to_dict()
    got = rgnn.fit(_on_device(data), 1.0, 1.0, **kw).to_dict()
    # rowptr and col to NumPy for pymetis, nothing else
    assert DeviceInput.copies and set(DeviceInput.copies) <= {"cpu", "numpy"}, DeviceInput.copies
    assert len(DeviceInput.copies) <= 4, DeviceInput.copies
    _same(_strip(got, True), _strip(want))


_GRAPHS = synthetic_graph_classification(20, nodes=(20, 40), seed=3)  # built before any fake


def _graphs(k=12):
    return [g.clone() for g in _GRAPHS[:k]]


# the one host read of the DPRR pipeline per run: the G graph labels, for the split
LABELS_TO_HOST = ["cpu", "numpy"]


def _graphs_on_device(graphs):
    return [_on_device(g) for g in graphs]


def test_dprr_pipeline_sends_the_edge_randomiser_device_graphs(fake_gpu, monkeypatch):
    # The edge randomiser receives the device graph (its own CUDA routing is the edge
    # mechanisms' test); here a recording stand-in runs it on plain views with the C++ build.
    from ldpfast.mechanisms import edges as E

    real = E.dprr
    seen = []

    def dprr_on_device(csr, eps, **kw):
        assert isinstance(csr.col, DeviceInput)  # built on the device (rowptr: a device cumsum)
        seen.append(csr.num_nodes)
        plain = type(csr)(csr.rowptr.as_subclass(torch.Tensor), csr.col.as_subclass(torch.Tensor),
                          csr.num_nodes)
        with cpu_kernels():
            r = real(plain, eps, **kw)
            return types.SimpleNamespace(edge_index=_dev(r.edge_index), spent=r.spent)

    monkeypatch.setattr(E, "dprr", dprr_on_device)
    _backend._cache["cuda"].KERNELS["edges"] = ("edges_rr_count",)  # the port is present
    graphs = _graphs()
    kw = {"runs": 1, "epochs": 2, "seed": 14, "threads": 1, "model": "gcn"}
    with cpu_kernels():
        monkeypatch.setattr(E, "dprr", real)
        want = DP.fit(graphs, "dprr", 2.0, **kw).to_dict()
        monkeypatch.setattr(E, "dprr", dprr_on_device)
    got = DP.fit(_graphs_on_device(graphs), "dprr", 2.0, **kw).to_dict()
    assert len(seen) == len(graphs)
    assert DeviceInput.copies == LABELS_TO_HOST, DeviceInput.copies
    _same(_strip(got, True), _strip(want))


@pytest.mark.parametrize("method", ["dprr", "rr", "locallap"])
def test_dprr_pipeline_without_cuda_edge_kernels_names_the_op(fake_gpu, method, monkeypatch):
    from ldpfast.mechanisms import edges as E

    called = []
    for name in ("dprr", "rr_edges", "local_laplace"):
        monkeypatch.setattr(E, name, lambda *a, **k: called.append(1))
    op = {"dprr": "dprr", "rr": "rr_edges", "locallap": "local_laplace"}[method]
    gs = _graphs_on_device(_graphs(4))
    with pytest.raises(_backend.BackendUnavailable, match=rf"ldpfast\.mechanisms\.edges\.{op} .*no CUDA path"):
        DP.fit(gs, method, 1.0, runs=1, epochs=1, seed=1)
    with pytest.raises(_backend.BackendUnavailable, match=rf"edges\.{op}"):
        DP.randomize_dataset(gs, method, 1.0, seed=1)
    assert called == [] and DeviceInput.copies == []  # refused before any work


def test_dprr_nonpriv_baselines_run_on_the_device(fake_gpu):
    graphs = _graphs()
    kw = {"runs": 1, "epochs": 2, "seed": 15, "threads": 1, "model": "gcn"}
    for method, extra in (("nonpriv_full", {}), ("nonpriv_part", {"public_fraction": 0.4})):
        with cpu_kernels():
            want = DP.fit(graphs, method, 1.0, **kw, **extra).to_dict()
        got = DP.fit(_graphs_on_device(graphs), method, 1.0, **kw, **extra).to_dict()
        _same(_strip(got, True), _strip(want))
    assert DeviceInput.copies == 2 * LABELS_TO_HOST, DeviceInput.copies


def _fake_inference(monkeypatch, log):
    """inference_subgraphs on device data: the CPU sampler on plain views (stands for its
    CUDA port), outputs as device tensors."""
    from ldpfast import sampling

    real = sampling.inference_subgraphs

    def infer(data, nodes, n_test, **kw):
        assert isinstance(data.edge_index, DeviceInput)
        log.append("inference_subgraphs")
        from torch_geometric.data import Data

        plain = Data(**{k: (v.as_subclass(torch.Tensor) if isinstance(v, torch.Tensor) else v)
                        for k, v in data.items()})  # fresh: no cached device CSR
        with cpu_kernels():
            b = real(plain, nodes.as_subclass(torch.Tensor), n_test,
                     **{k: (v.as_subclass(torch.Tensor) if isinstance(v, torch.Tensor) else v)
                        for k, v in kw.items()})
        for f in ("x", "edge_index", "n_id", "ptr", "batch", "center", "y", "zeroed"):
            setattr(b, f, _dev(getattr(b, f)))
        return b

    monkeypatch.setattr(sampling, "inference_subgraphs", infer)
    return real


@pytest.mark.parametrize("model,setting", [("gcn", "transductive"), ("sage", "inductive"),
                                           ("gin", "transductive"), ("mlp", "transductive")])
def test_heterpoisson_device_data_samples_and_clips_on_cuda_and_equal_to_cpu(fake_gpu, monkeypatch,
                                                                             model, setting):
    from ldpfast import sampling

    data = _graph(n=300, e=2400)
    kw = {"model": model, "setting": setting, "T": 4, "seed": 16, "hidden": 8, "sigma": 1.0,
          "expected_batch_size": 40}
    real = _fake_inference(monkeypatch, fake_gpu)
    with cpu_kernels(), monkeypatch.context() as mp:
        mp.setattr(sampling, "inference_subgraphs", real)
        want = HP.fit(data, 4.0, **kw).to_dict()
    fake_gpu.clear()
    _backend._cache["cuda"].KERNELS["sampling"] += ("heter_infer_nodes_i32",)  # the port is present
    got = HP.fit(_on_device(data), 4.0, **kw).to_dict()
    # at most the documented read after training: the per-step clipped fractions, at once
    assert DeviceInput.copies in ([], ["cpu", "tolist"]), DeviceInput.copies
    assert "heter_central" in fake_gpu
    if model != "mlp":
        assert {"heter_nodes", "heter_edges", "inference_subgraphs"} <= set(fake_gpu)
    _same(_strip(got, True), _strip(want))


def test_heterpoisson_without_cuda_inference_sampler_names_it(fake_gpu):
    data = _on_device(_graph(n=100, e=500))
    with pytest.raises(_backend.BackendUnavailable, match=r"inference_subgraphs .*no CUDA path"):
        HP.fit(data, 4.0, T=2, seed=1)
    assert fake_gpu == [] and DeviceInput.copies == []  # before any work
    with pytest.raises(_backend.BackendUnavailable, match=r"backend 'cpp' cannot run on CUDA"):
        HP.fit(data, 4.0, T=2, seed=1, model="mlp", backend="cpp")


def test_dpsgd_clipping_keeps_the_batch_device_and_matches_cpu(fake_gpu):
    # per-sub-graph clipping and the optimizer on a device batch: no host copy, same result
    from ldpfast.privacy.dpsgd import DPOptimizer, SubgraphGradSampleModule, subgraph_loss
    from ldpfast.sampling import HeterPoisson

    data = _graph(n=300, e=2400)

    def step(d, on_dev):
        torch.manual_seed(3)
        net = HP.build_model("gcn", 12, 4, hidden=8)
        gsm = SubgraphGradSampleModule(net)
        opt = DPOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), gsm, sigma=1.0, seed=4,
                          expected_batch_size=30.0)
        sp = HeterPoisson(d, 0.1, 2.0, seed=5)
        for t in range(3):
            b = sp.sample(t)
            opt.zero_grad()
            subgraph_loss(gsm(b), b).backward()
            opt.step()
        return [p.detach().as_subclass(torch.Tensor).clone() for p in net.parameters()], opt.last_stats

    with cpu_kernels():
        want, ws = step(data, False)
    got, gs = step(_on_device(data), True)
    assert DeviceInput.copies == [], DeviceInput.copies
    for a, b in zip(got, want):
        assert torch.equal(a, b)
    assert torch.equal(gs.norms.as_subclass(torch.Tensor), ws.norms)


# --- device= argument -------------------------------------------------------------------------
FITS = [
    ("lpgnn", lambda d, **kw: lpgnn.fit(d, 1.0, 1.0, epochs=1, patience=1, seed=1, **kw)),
    ("rgnn", lambda d, **kw: rgnn.fit(d, 1.0, 1.0, epochs=1, seed=1, variant="no_llp", group_size=1, **kw)),
    ("dprr", lambda d, **kw: DP.fit([d], "nonpriv_full", 1.0, runs=1, epochs=1, seed=1, **kw)),
    ("heterpoisson", lambda d, **kw: HP.fit(d, 4.0, T=1, seed=1, model="mlp", **kw)),
]


@pytest.mark.parametrize("name,call", FITS, ids=[f[0] for f in FITS])
def test_bad_device_values_are_named(name, call):
    d = _graph(binary=True)
    d.y = torch.zeros(d.num_nodes, dtype=torch.long)
    d.y[:5] = 1
    for bad, err, msg in (("gpu", ValueError, r"device: expected 'cpu', 'cuda', 'cuda:N'"),
                          ("meta", ValueError, r"device: expected a cpu or cuda device, got 'meta'"),
                          (3, TypeError, r"device: expected a str or torch.device, got int")):
        with pytest.raises(err, match=msg):
            call(d, device=bad)


@pytest.mark.parametrize("name,call", FITS, ids=[f[0] for f in FITS])
def test_cuda_device_without_cuda_gives_the_reason(name, call, monkeypatch):
    monkeypatch.setitem(_backend._cache, "cuda", RuntimeError("no CUDA device visible to torch"))
    d = _graph(binary=True)
    d.y = torch.zeros(d.num_nodes, dtype=torch.long)
    d.y[:5] = 1
    with pytest.raises(_backend.BackendUnavailable, match="no CUDA device visible"):
        call(d, device="cuda")


@pytest.mark.parametrize("name,call", FITS, ids=[f[0] for f in FITS])
def test_mixed_devices_name_both_tensors(name, call):
    # 'meta' stands for a second device: the check runs before anything is read
    d = _graph(binary=True)
    d.y = torch.zeros(d.num_nodes, dtype=torch.long, device="meta")
    which = r"graphs\[0\]\.y" if name == "dprr" else r"data\.y"
    first = r"graphs\[0\]\.edge_index" if name == "dprr" else r"data\.x"
    with pytest.raises(ValueError, match=rf"{which} is on meta but {first} is on cpu"):
        call(d)


def test_device_cpu_is_the_default_path():
    # device="cpu" (and a CPU torch.device) give exactly the default run's report
    d = _graph()
    a = lpgnn.fit(d, 1.0, 2.0, epochs=3, patience=3, seed=21, model="gcn").to_dict()
    b = lpgnn.fit(d, 1.0, 2.0, epochs=3, patience=3, seed=21, model="gcn", device="cpu").to_dict()
    c = lpgnn.fit(d, 1.0, 2.0, epochs=3, patience=3, seed=21, model="gcn",
                  device=torch.device("cpu")).to_dict()
    _same(_strip(a), _strip(b))
    _same(_strip(a), _strip(c))
    h1 = HP.fit(d, 4.0, T=2, seed=22, hidden=8).to_dict()
    h2 = HP.fit(d, 4.0, T=2, seed=22, hidden=8, device="cpu").to_dict()
    _same(_strip(h1), _strip(h2))
    # and the report differs for another seed: the comparison can fail
    h3 = HP.fit(d, 4.0, T=2, seed=23, hidden=8, device="cpu").to_dict()
    assert _strip(h3) != _strip(h1)


# --- CUDA out of memory -----------------------------------------------------------------------
def _oom(*a, **k):
    raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total "
                                 "capacity of 79.19 GiB of which 1.2 GiB is free.")


def test_oom_guard_names_the_size_asked_for():
    msg = r"x: copy to cuda: CUDA out of memory allocating 1.50 GiB \(1610612736 bytes\); the inputs are unchanged"
    with pytest.raises(ldpfast.DeviceOutOfMemory, match=msg), _backend.oom_guard("x: copy to cuda", 1610612736):
        _oom()
    with pytest.raises(ldpfast.DeviceOutOfMemory, match=r"lpgnn.fit: .* allocating 3.50 GiB"), \
            _backend.oom_guard("lpgnn.fit"):
        _oom()
    with pytest.raises(ldpfast.DeviceOutOfMemory, match=r"allocating 2.00 KiB \(2048 bytes\)"), \
            _backend.oom_guard("cupy"):
        raise RuntimeError("Out of memory allocating 2,048 bytes (allocated so far: 0 bytes).")
    # other errors pass through
    with pytest.raises(ValueError, match="unrelated"), _backend.oom_guard("x"):
        raise ValueError("unrelated")
    assert issubclass(ldpfast.DeviceOutOfMemory, MemoryError)


def test_data_copy_oom_reports_the_size_and_leaves_data_untouched(monkeypatch):
    from ldpfast.methods._common import data_to

    d = _graph()
    before = {k: v.clone() for k, v in d.items() if isinstance(v, torch.Tensor)}
    real_to = torch.Tensor.to

    def to(self, *a, **k):
        if self.dim() == 2 and self.dtype == torch.float32:  # the copy of x fails
            _oom()
        return real_to(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "to", to)
    want = d.x.numel() * 4
    with pytest.raises(ldpfast.DeviceOutOfMemory,
                       match=rf"data\.x: copy to meta: CUDA out of memory allocating .*\({want} bytes\)"):
        data_to(d, torch.device("meta"))
    monkeypatch.setattr(torch.Tensor, "to", real_to)
    for k, v in before.items():
        assert torch.equal(d[k], v) and d[k].device.type == "cpu", k


@pytest.mark.parametrize("name,call", FITS, ids=[f[0] for f in FITS])
def test_fit_oom_is_reported_and_data_untouched(name, call, monkeypatch):
    d = _graph(binary=True)
    d.y = torch.zeros(d.num_nodes, dtype=torch.long)
    d.y[:5] = 1
    before = {k: v.clone() for k, v in d.items() if isinstance(v, torch.Tensor)}
    # the first model allocation fails (Linear weights are allocated with torch.empty)
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **k: _oom() if len(a) == 2 or (
        len(a) == 1 and isinstance(a[0], tuple) and len(a[0]) == 2) else real_empty(*a, **k))
    with pytest.raises(ldpfast.DeviceOutOfMemory, match=r"\.fit: CUDA out of memory allocating 3.50 GiB"):
        call(d)
    monkeypatch.setattr(torch, "empty", real_empty)
    for k, v in before.items():
        assert torch.equal(d[k], v), k


# --- on a GPU (pytest -m cuda) ----------------------------------------------------------------
def _gpu_ready():
    return torch.cuda.is_available() and _backend.available()["cuda"] is None


gpu = pytest.mark.skipif(not _gpu_ready(), reason="needs an NVIDIA GPU with cupy")


def _record(monkeypatch, module, names, store):
    """Wrap module.<name> to keep every returned tensor on the host (for the comparison)."""
    for name in names:
        real = getattr(module, name)

        def rec(*a, _real=real, _name=name, **k):
            out = _real(*a, **k)
            parts = out if isinstance(out, tuple) else (out,)
            store.append((_name, [p.detach().cpu() if isinstance(p, torch.Tensor) else
                                  getattr(p, "edge_index", None) for p in parts]))
            return out
        monkeypatch.setattr(module, name, rec)


def _compare(cpu, gpu_):
    assert [n for n, _ in cpu] == [n for n, _ in gpu_]
    for (name, a), (_, b) in zip(cpu, gpu_):
        for u, v in zip(a, b):
            if isinstance(u, torch.Tensor):
                assert torch.equal(u, v.cpu()), name


@pytest.mark.cuda
@gpu
@pytest.mark.parametrize("name", ["lpgnn", "rgnn"])
def test_gpu_fit_randomised_inputs_equal_cpu(name, monkeypatch):
    import ldpfast.mechanisms as M

    data = _graph(binary=name == "rgnn")
    runs = {}
    for device in ("cpu", "cuda"):
        store: list = []
        with monkeypatch.context() as mp:
            _record(mp, M, ["multibit_encode", "rr_labels", "grr_fs"], store)
            if name == "lpgnn":
                rep = lpgnn.fit(data, 1.0, 1.0, epochs=20, patience=20, seed=31, device=device)
            else:
                rep = rgnn.fit(data, 1.0, 1.0, epochs=20, seed=31, group_size=1, m=5, variant="no_llp",
                               device=device)
        runs[device] = (store, rep)
    _compare(runs["cpu"][0], runs["cuda"][0])
    assert runs["cuda"][1].privacy["eps_total" if name == "lpgnn" else "eps_total_exact"] == \
        runs["cpu"][1].privacy["eps_total" if name == "lpgnn" else "eps_total_exact"]
    assert 0.0 <= runs["cuda"][1].accuracy <= 1.0


@pytest.mark.cuda
@gpu
def test_gpu_heterpoisson_fit_batches_equal_cpu(monkeypatch):
    from ldpfast.sampling import HeterPoisson

    data = _graph(n=400, e=3000)
    try:  # a GNN needs inference_subgraphs on the device; the MLP baseline does not
        _backend.require_cuda_family("inference_subgraphs", "sampling", "heter_infer")
        model, method = "gcn", "sample"
    except _backend.BackendUnavailable:
        model, method = "mlp", "central"
    runs = {}
    for device in ("cpu", "cuda"):
        store: list = []
        real = getattr(HeterPoisson, method)

        def rec(self, t, _real=real, _store=store, **k):
            out = _real(self, t, **k)
            parts = [out] if method == "central" else [out.n_id, out.edge_index, out.zeroed, out.x]
            _store.append((method, [p.cpu() for p in parts]))
            return out
        with monkeypatch.context() as mp:
            mp.setattr(HeterPoisson, method, rec)
            rep = HP.fit(data, 4.0, T=5, seed=32, hidden=8, device=device, model=model)
        runs[device] = (store, rep)
    assert len(runs["cpu"][0]) == 5
    _compare(runs["cpu"][0], runs["cuda"][0])
    assert runs["cuda"][1].sigma == runs["cpu"][1].sigma


@pytest.mark.cuda
@gpu
def test_gpu_dprr_fit_randomised_graphs_equal_cpu():
    graphs = _graphs(20)
    try:
        a = DP.randomize_dataset(graphs, "dprr", 2.0, seed=33, device="cuda")
    except _backend.BackendUnavailable as exc:
        pytest.skip(f"CUDA edge kernels not in this build: {exc}")
    b = DP.randomize_dataset(graphs, "dprr", 2.0, seed=33, device="cpu")
    for u, v in zip(a.graphs, b.graphs):
        assert u.edge_index.is_cuda
        assert torch.equal(u.edge_index.cpu(), v.edge_index)
    rep = DP.fit(graphs, "dprr", 2.0, runs=1, epochs=3, seed=33, device="cuda")
    assert rep.privacy == DP.fit(graphs, "dprr", 2.0, runs=1, epochs=1, seed=33).privacy


@pytest.mark.cuda
@gpu
def test_gpu_dpsgd_step_device_noise_and_close_gradients():
    from ldpfast.privacy.dpsgd import (
        DPOptimizer,
        SubgraphGradSampleModule,
        clipped_sum_loop,
        flat_grad,
        subgraph_loss,
    )
    from ldpfast.sampling import HeterPoisson

    data = _graph(n=400, e=3000)
    out = {}
    for device in ("cpu", "cuda"):
        d = data.to(device)
        torch.manual_seed(3)
        net = HP.build_model("gcn", 12, 4, hidden=8).to(device)
        gsm = SubgraphGradSampleModule(net)
        opt = DPOptimizer(torch.optim.SGD(net.parameters(), lr=0.1), gsm, sigma=1.0, seed=4)
        b = HeterPoisson(d, 0.2, 2.0, seed=5).sample(0)
        opt.zero_grad()
        subgraph_loss(gsm(b), b).backward()
        gsm.clip_and_accumulate(0.5)
        clipped = flat_grad(net).detach().cpu()
        ref, _ = clipped_sum_loop(net, b, 0.5)
        params = [p for p in net.parameters() if p.requires_grad]
        noise = torch.cat([z.reshape(-1).cpu() for z in opt._noises(params)])
        again = torch.cat([z.reshape(-1).cpu() for z in opt._noises(params)])
        out[device] = (clipped, ref.cpu(), noise, gsm.norms().is_cuda, again, [z.device for z in opt._noises(params)])
    assert out["cuda"][3]
    # device noise: drawn on the GPU, a function of (seed, step) only (the same bits when drawn
    # again at the same step), other bits than the CPU generator's, std 2 C sigma = 1
    assert all(d.type == "cuda" for d in out["cuda"][5])
    assert torch.equal(out["cuda"][4], out["cuda"][2]) and not torch.equal(out["cuda"][2], out["cpu"][2])
    assert abs(float(out["cuda"][2].std()) - 1.0) < 0.3
    torch.testing.assert_close(out["cuda"][0].double(), out["cuda"][1], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out["cuda"][0], out["cpu"][0], rtol=1e-4, atol=1e-5)


def test_data_to_moves_a_stored_csr_and_leaves_data_alone():
    # data.csr lives in __dict__ (to shadow Data.csr()): the moved copy must see the moved CSR,
    # not the original, and carry no CSR cached for the old tensors ('meta' stands for a GPU)
    from ldpfast.graph import csr_of
    from ldpfast.methods._common import data_to

    d = _graph()
    csr = csr_of(d)  # caches _ldpfast_csr on d
    d.csr = csr
    d.__dict__["csr"] = csr
    out = data_to(d, torch.device("meta"))
    assert out is not d
    assert out.csr.rowptr.device.type == "meta" and out.x.device.type == "meta"
    assert "_ldpfast_csr" not in out.__dict__
    assert d.csr is csr and d.x.device.type == "cpu" and "_ldpfast_csr" in d.__dict__
    assert data_to(d, torch.device("cpu")) is d  # nothing to move: the same object


def test_sampler_oom_names_the_batch_and_the_size(fake_gpu, monkeypatch):
    from ldpfast.sampling import HeterPoisson

    sp = HeterPoisson(_on_device(_graph(n=300, e=2400)), 0.3, 2.0, seed=5)
    real_empty = torch.empty
    monkeypatch.setattr(torch, "empty", lambda *a, **k: _oom() if k.get("dtype") == torch.uint8 and a and
                        isinstance(a[0], int) and a[0] > 300 else real_empty(*a, **k))
    with pytest.raises(ldpfast.DeviceOutOfMemory, match=r"HeterPoisson.sample: node slots of \d+ sub-graphs: "
                                                        r"CUDA out of memory allocating .*\(\d+ bytes\)"):
        sp.sample(0)
