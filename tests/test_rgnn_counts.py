"""RGNN feature reconstruction from the reports (issue 14, item 2): the blockwise
``method="counts"`` path (category counts of the reports for the first hop, float hops per
feature block) must give the same bits as the one-hot propagation of the whole matrix
(``method="onehot"``, the reference), on Cora and on random graphs and domains; and the
``fs_counts`` kernel (C++ and its Numba twin) must equal a dense reference."""
import numpy as np
import pytest
import torch
from conftest import load_or_skip

from ldpfast import _backend
from ldpfast.graph import CSR, to_csr
from ldpfast.mechanisms import grr_fs
from ldpfast.methods import rgnn

BACKENDS = [b for b in ("cpp", "numba") if _backend.available()[b] is None]


def random_graph(n, deg, seed, isolated=0):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n - isolated, (n * deg,), generator=g)
    dst = torch.randint(0, n - isolated, (n * deg,), generator=g)
    keep = src != dst
    return to_csr(torch.stack([src[keep], dst[keep]]), n, symmetrize=True)


def reports(n, gam, seed, m=3, eps=1.0):
    g = torch.Generator().manual_seed(seed)
    G = torch.as_tensor(gam)
    x = (torch.rand(n, len(gam), generator=g) * G).long()
    return grr_fs(x, G, eps, m, seed=seed + 1)[0]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("gam", [[2] * 7, [4] * 9, [2, 3, 5, 2, 4, 7, 2, 2, 3, 9, 2, 4]],
                         ids=["binary", "gamma4", "mixed"])
def test_counts_equal_onehot_random(backend, gam):
    csr = random_graph(600, 4, seed=len(gam), isolated=20)  # isolated nodes: a = 1 rows
    xr = reports(600, gam, seed=7)
    for k in (0, 1, 2, 3):
        for output in ("index", "features", "pi"):
            for dtype in (torch.float32, torch.float64):
                ref = rgnn.reconstruct_features(xr, csr, gam, 1.0, 3, k, output=output, dtype=dtype,
                                                method="onehot")
                for block in (1, 5, None):  # a feature per block, a few, the default
                    got = rgnn.reconstruct_features(xr, csr, gam, 1.0, 3, k, output=output,
                                                    dtype=dtype, block=block, backend=backend)
                    assert got.dtype == ref.dtype and got.shape == ref.shape
                    assert torch.equal(got, ref), (k, output, dtype, block)


def test_counts_equal_onehot_cora():
    data = load_or_skip("cora")
    csr = to_csr(data.edge_index, data.num_nodes, symmetrize=True)
    n = data.num_nodes
    # RGNN's grouped binary features (d' = 58) and, on the same graph, 16 features of domain 4
    from ldpfast.transforms import RGNN_GROUP_SIZES, group_binary_features

    xb = group_binary_features(data.x, RGNN_GROUP_SIZES["cora"]).long()
    cases = [(grr_fs(xb, 2, 1.0, 10, seed=3)[0], 2, 10), (reports(n, [4] * 16, seed=4, m=4), 4, 4)]
    for xr, gamma, m in cases:
        for k in (1, 4, 16):
            for output in ("index", "features"):
                ref = rgnn.reconstruct_features(xr, csr, gamma, 1.0, m, k, output=output,
                                                method="onehot")
                got = rgnn.reconstruct_features(xr, csr, gamma, 1.0, m, k, output=output)
                assert torch.equal(got, ref), (gamma, k, output)


def test_weighted_csr_takes_the_onehot_path():
    csr = random_graph(200, 3, seed=1)
    w = CSR(csr.rowptr, csr.col, csr.num_nodes, value=torch.rand(csr.nnz, dtype=torch.float64))
    xr = reports(200, [4] * 5, seed=2)
    ref = rgnn.reconstruct_features(xr, w, 4, 1.0, 3, 2, output="pi", method="onehot")
    assert torch.equal(rgnn.reconstruct_features(xr, w, 4, 1.0, 3, 2, output="pi"), ref)
    # ... and the weights matter there (the counts path would ignore them)
    assert not torch.equal(ref, rgnn.reconstruct_features(xr, csr, 4, 1.0, 3, 2, output="pi"))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("self_loop", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("col_dtype", [torch.int32, torch.int64])
def test_fs_counts_kernel_dense_reference(backend, self_loop, dtype, col_dtype):
    K = _backend.get("cpu", backend)
    n, w = 300, 83  # 83 = 64 + 16 + 2 + 1: every compile-time width of the C++ launcher
    csr = random_graph(n, 5, seed=3, isolated=10)
    g = torch.Generator().manual_seed(4)
    e = (torch.rand(n, w, generator=g) < 0.3).to(torch.uint8)
    a = (torch.rand(n, generator=g, dtype=torch.float64) + 0.5).numpy().astype(dtype)
    a[:5] = 1  # the multiplication is skipped there
    y = np.full((n, w), np.nan, dtype=dtype)
    col = csr.col.to(col_dtype).numpy()
    K.fs_counts(csr.rowptr.numpy(), col, e.numpy(), a, y, self_loop)
    A = torch.zeros(n, n, dtype=torch.float64)
    A[torch.repeat_interleave(torch.arange(n), csr.degrees()), csr.col.long()] = 1.0
    if self_loop:
        A += torch.eye(n, dtype=torch.float64)
    cnt = (A @ e.double()).numpy()  # exact integers
    expect = (cnt.astype(dtype) * a[:, None]).astype(dtype)
    expect[a == 1] = cnt[a == 1]
    assert np.array_equal(y, expect)


def test_fs_counts_backends_identical():
    if len(BACKENDS) < 2:
        pytest.skip("needs both the cpp and the numba backend")
    csr = random_graph(500, 6, seed=5)
    e = (torch.rand(500, 40, generator=torch.Generator().manual_seed(6)) < 0.5).to(torch.uint8).numpy()
    a = (1.0 / (csr.degrees() + 1).double()).float().numpy()
    out = []
    for b in BACKENDS:
        y = np.empty((500, 40), dtype=np.float32)
        _backend.get("cpu", b).fs_counts(csr.rowptr.numpy(), csr.col.numpy(), e, a, y, True)
        out.append(y)
    assert np.array_equal(out[0], out[1])


@pytest.mark.parametrize("backend", BACKENDS)
def test_fs_counts_bad_buffers(backend):
    K = _backend.get("cpu", backend)
    csr = random_graph(50, 3, seed=8)
    rp, col = csr.rowptr.numpy(), csr.col.numpy()
    e = np.zeros((50, 4), dtype=np.uint8)
    a = np.ones(50, dtype=np.float32)
    y = np.zeros((50, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="e"):
        K.fs_counts(rp, col, e.astype(np.int32), a, y, True)
    with pytest.raises(ValueError, match="y"):
        K.fs_counts(rp, col, e, a, np.zeros((50, 5), dtype=np.float32), True)
    with pytest.raises(ValueError, match="y"):
        K.fs_counts(rp, col, e, a, y.astype(np.int32), True)
    assert not y.any()  # nothing written


def test_reconstruct_features_bad_method_and_block():
    csr = random_graph(30, 2, seed=9)
    xr = reports(30, [3] * 4, seed=10)
    with pytest.raises(ValueError, match="method"):
        rgnn.reconstruct_features(xr, csr, 3, 1.0, 2, method="dense")
    with pytest.raises(ValueError, match="block"):
        rgnn.reconstruct_features(xr, csr, 3, 1.0, 2, block=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fs_estimate_index_bad_buffers(backend):
    K = _backend.get("cpu", backend)
    lam = np.full((10, 5), 0.2, dtype=np.float32)
    gam = np.array([2, 4, 2], dtype=np.int64)  # 1 + 3 + 1 = 5 value columns
    ab = np.ones(3, dtype=np.float32)
    out = np.full((10, 4), -7, dtype=np.int64)
    with pytest.raises(ValueError, match="lam"):
        K.fs_estimate_index(lam[:, :4].copy(), gam, ab, ab, False, out, 0)
    with pytest.raises(ValueError, match="c0"):
        K.fs_estimate_index(lam, gam, ab, ab, False, out, 2)
    with pytest.raises(ValueError, match="gam"):
        K.fs_estimate_index(lam, gam, ab, ab, True, out, 0)  # allbin with a domain of 4
    with pytest.raises(ValueError, match="out"):
        K.fs_estimate_index(lam, gam, ab, ab, False, out.astype(np.int32), 0)
    assert (out == -7).all()  # nothing written
    K.fs_estimate_index(lam, gam, ab, ab, False, out, 1)
    assert (out[:, 0] == -7).all() and (out[:, 1:] >= 0).all()


@pytest.mark.parametrize("method", ["counts", "onehot"])
@pytest.mark.parametrize("gam", [[2] * 7, [2, 3, 5, 2, 4, 7, 2, 2, 3, 9, 2, 4]], ids=["binary", "mixed"])
def test_index_dtype_same_values(method, gam, monkeypatch):
    """``index_dtype`` narrows output="index" without changing a value (every block size;
    row chunks of 64 so the chunked narrowing runs more than once, with a short last one)."""
    from ldpfast.methods import _rgnn_reconstruct

    monkeypatch.setattr(_rgnn_reconstruct, "_NARROW_ROWS", 64)
    csr = random_graph(500, 4, seed=3)
    xr = reports(500, gam, seed=5)
    ref = rgnn.reconstruct_features(xr, csr, gam, 1.0, 3, 2, output="index", method="onehot")
    assert ref.dtype == torch.int64 and int(ref.max()) > 0
    for dt in (torch.int8, torch.uint8, torch.int16, torch.int32):
        for block in (1, 5, None):
            got = rgnn.reconstruct_features(xr, csr, gam, 1.0, 3, 2, output="index", method=method,
                                            block=block, index_dtype=dt)
            assert got.dtype == dt and torch.equal(got.to(torch.int64), ref), (dt, block)


def test_index_dtype_checked():
    csr = random_graph(50, 3, seed=1)
    xr = reports(50, [4] * 3, seed=2)
    with pytest.raises(TypeError, match="index_dtype"):
        rgnn.reconstruct_features(xr, csr, 4, 1.0, 2, 1, output="index", index_dtype=torch.float32)
    with pytest.raises(ValueError, match="index_dtype: torch.int8 cannot hold the values 0 .. 199"):
        rgnn.reconstruct_features(torch.zeros(50, 3, dtype=torch.int64), csr, 200, 1.0, 2, 1,
                                  output="index", index_dtype=torch.int8)
