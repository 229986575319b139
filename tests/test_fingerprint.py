"""Keyed input fingerprint (csrc/common/fingerprint.h, ldpfast.privacy.report_once).

The C++ kernel, the Numba twin and (on a GPU) the CUDA kernel are checked against a slow,
readable pure-Python reference of the construction written here from the header's
description; the Data-level fingerprint must tell apart inputs that differ in one edge, one
feature bit, an attribute name, a dtype or a shape, and must not depend on the thread count.
"""
from __future__ import annotations

import hashlib
import math

import numpy as np
import pytest
import torch
from torch_geometric.data import Data

from ldpfast import _backend
from ldpfast.privacy import report_once as R

M32 = 0xFFFFFFFF


# --- pure-Python reference ---------------------------------------------------------------------
def philox(c, key):
    """Philox4x32-10 of the 4-word counter c under the 64-bit key (Salmon et al., SC'11)."""
    c = list(c)
    k0, k1 = key & M32, key >> 32
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [(p1 >> 32) ^ c[1] ^ k0, p1 & M32, (p0 >> 32) ^ c[3] ^ k1, p0 & M32]
    return c


def ref_fingerprint(data: bytes, k_nh: int, k_pad: int, k_prf: int) -> tuple[int, int]:
    """The construction of csrc/common/fingerprint.h, one block and one word at a time."""
    key = []
    for q in range(32):
        key += philox([q, 0, 0, 0], k_nh)
    words = [int.from_bytes(data[4 * j:4 * j + 4].ljust(4, b"\0"), "little")
             for j in range((len(data) + 3) // 4)]
    n_blocks = (len(data) + 255) // 256
    words += [0] * (64 * n_blocks - len(words))
    s0 = s1 = 0
    for b in range(n_blocks):
        m = words[64 * b:64 * b + 64]
        y = [0, 0]
        for lane in range(2):
            K = key[64 * lane:64 * lane + 64]
            for i in range(0, 64, 2):
                y[lane] += ((m[i] + K[i]) & M32) * ((m[i + 1] + K[i + 1]) & M32)
            y[lane] %= 2**64
        pad = philox([b & M32, b >> 32, 0, 0], k_pad)
        u = [(y[0] & M32) ^ pad[0], (y[0] >> 32) ^ pad[1], (y[1] & M32) ^ pad[2], (y[1] >> 32) ^ pad[3]]
        r = philox(u, k_prf)
        s0 = (s0 + (r[0] | r[1] << 32)) % 2**64
        s1 = (s1 + (r[2] | r[3] << 32)) % 2**64
    return s0, s1


def test_reference_philox_matches_the_random123_vector():
    # Known-answer vector of Random123 (philox4x32_10, counter and key all ones)
    assert philox([M32] * 4, 2**64 - 1) == [0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD]


# --- kernels -----------------------------------------------------------------------------------
def _backends():
    out = []
    for name in ("cpp", "numba"):
        if _backend.available()[name] is None:
            out.append(name)
    return out


def _run(kernels, data: bytes | np.ndarray, keys) -> tuple[int, int]:
    arr = np.frombuffer(data, dtype=np.uint8) if isinstance(data, bytes) else data
    out = np.zeros(2, dtype=np.uint64)
    kernels.fingerprint(arr, *keys, out)
    return int(out[0]), int(out[1])


LENGTHS = [0, 1, 3, 4, 5, 255, 256, 257, 511, 512, 1000, 4096 * 256 + 77]


@pytest.mark.parametrize("backend", _backends())
def test_kernel_matches_the_pure_python_reference(backend):
    K = _backend.get("cpu", backend)
    rng = np.random.default_rng(3)
    keys = (0x0123456789ABCDEF, 0xFEDCBA9876543210, 2**64 - 1)
    for n in LENGTHS:
        data = rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        if n > 100_000:  # the reference is slow: check a long string through its first blocks
            want = ref_fingerprint(data[:3000], *keys)
            assert _run(K, data[:3000], keys) == want, n
            continue
        assert _run(K, data, keys) == ref_fingerprint(data, *keys), n
    assert _run(K, b"", keys) == (0, 0)  # no blocks: the zero sums


def test_cpp_equals_numba_on_long_inputs_and_any_alignment():
    if len(_backends()) < 2:
        pytest.skip("needs both CPU backends")
    C, NB = _backend.get("cpu", "cpp"), _backend.get("cpu", "numba")
    rng = np.random.default_rng(5)
    buf = rng.integers(0, 256, 3 * 4096 * 256 + 1234, dtype=np.uint8)
    keys = (11, 22, 33)
    for off in (0, 1, 2, 3, 5):  # misaligned views hash their bytes, nothing else
        view = buf[off:]
        assert _run(C, view, keys) == _run(NB, view, keys) == _run(C, view.tobytes(), keys)


def test_kernel_is_independent_of_the_thread_count():
    C = pytest.importorskip("ldpfast._C")
    rng = np.random.default_rng(9)
    data = rng.integers(0, 256, 20 * 4096 * 256 + 99, dtype=np.uint8)  # 20 chunks
    keys = (5, 6, 7)
    saved = C.get_num_threads()
    try:
        got = set()
        for t in (1, 2, 3, 7, 64):
            C.set_num_threads(t)
            got.add(_run(C, data, keys))
        assert len(got) == 1
    finally:
        C.set_num_threads(saved)


@pytest.mark.parametrize("backend", _backends())
def test_kernel_changes_with_every_bit_key_and_length(backend):
    K = _backend.get("cpu", backend)
    data = bytearray(np.random.default_rng(1).integers(0, 256, 2000, dtype=np.uint8).tobytes())
    keys = (1, 2, 3)
    base = _run(K, bytes(data), keys)
    seen = {base}
    for pos in (0, 1, 255, 256, 1023, 1999):
        for bit in (0, 7):
            d = bytearray(data)
            d[pos] ^= 1 << bit
            seen.add(_run(K, bytes(d), keys))
    for k in ((2, 2, 3), (1, 3, 3), (1, 2, 4)):
        seen.add(_run(K, bytes(data), k))
    swapped = bytes(data[256:512] + data[:256] + data[512:])  # blocks swapped: position matters
    seen.add(_run(K, swapped, keys))
    assert len(seen) == 1 + 12 + 3 + 1


def test_bad_arguments_are_refused():
    for name in _backends():
        K = _backend.get("cpu", name)
        with pytest.raises((ValueError, TypeError)):
            K.fingerprint(np.zeros(4, np.int32), 1, 2, 3, np.zeros(2, np.uint64))
        with pytest.raises((ValueError, TypeError)):
            K.fingerprint(np.zeros(4, np.uint8), 1, 2, 3, np.zeros(3, np.uint64))
    with pytest.raises(TypeError, match="key"):
        R.fingerprint(Data(x=torch.zeros(2, 2)), b"short")


# --- Data level --------------------------------------------------------------------------------
KEY = R.fingerprint_key(1234)


def _ref_data_fingerprint(data, key):
    """report_once.fingerprint recomputed with the pure-Python tensor hash."""
    h = hashlib.sha256(b"ldpfast/fingerprint/v2")
    for name, v in sorted(data.to_dict().items()):
        if name.endswith("_mask") or name in R._SKIP:
            continue
        if isinstance(v, torch.Tensor):
            header = f"{name}:{v.dtype}:{tuple(v.shape)}:".encode()
            raw = v.contiguous().numpy().tobytes()
            s0, s1 = ref_fingerprint(raw, *R._tensor_keys(key, header))
            h.update(header + s0.to_bytes(8, "little") + s1.to_bytes(8, "little"))
        elif isinstance(v, (int, float, str)) and not isinstance(v, bool):
            h.update(f"{name}={v!r};".encode())
    return h.digest()


def _graph(seed=0, n=30, e=80):
    g = torch.Generator().manual_seed(seed)
    ei = torch.randint(0, n, (2, e), generator=g)
    x = torch.randint(0, 2, (n, 5), generator=g).float()
    y = torch.randint(0, 3, (n,), generator=g)
    return Data(x=x, edge_index=ei, y=y, num_nodes=n, train_mask=torch.rand(n, generator=g) < 0.5)


def test_data_fingerprint_matches_the_reference():
    d = _graph()
    d.title = "g0"
    assert R.fingerprint(d, KEY) == _ref_data_fingerprint(d, KEY)


@pytest.mark.parametrize("backend", _backends())
def test_same_input_same_fingerprint_on_every_backend(backend):
    a, b = _graph(), _graph()
    want = R.fingerprint(a, KEY, "cpp" if "cpp" in _backends() else None)
    assert R.fingerprint(b, KEY, backend) == want
    # non-contiguous tensors hash their logical (C-order) content
    c = _graph()
    c.x = c.x.t().contiguous().t()
    assert not c.x.is_contiguous()
    assert R.fingerprint(c, KEY, backend) == want
    # split masks and ldpfast's bookkeeping are not part of the identity
    c.train_mask = ~c.train_mask
    c.y_rr_mask = torch.ones(30, dtype=torch.bool)
    assert R.fingerprint(c, KEY, backend) == want


def test_different_inputs_give_different_fingerprints():
    base = _graph()
    variants = {}
    d = _graph()
    d.edge_index[1, 17] = (d.edge_index[1, 17] + 1) % 30  # one edge changed
    variants["edge"] = d
    d = _graph()
    d.x[4, 2] = 1.0 - d.x[4, 2]  # one feature flipped
    variants["feature"] = d
    d = _graph()
    d.x.view(torch.int32)[7, 1] ^= 1  # one bit of a float's representation
    variants["bit"] = d
    d = _graph()
    d.feat = d.x
    del d.x  # the same tensor under another name
    variants["renamed"] = d
    d = _graph()
    d.y = d.y.to(torch.int32)  # dtype changed, same values
    variants["dtype"] = d
    d = _graph()
    d.x = d.x.reshape(15, 10)  # shape changed, same bytes
    variants["shape"] = d
    d = _graph()
    d.x = torch.cat([d.x, torch.zeros(1, 5)])  # trailing zeros appended
    variants["longer"] = d
    d = _graph()
    d.num_nodes = 31
    variants["num_nodes"] = d
    fps = {name: R.fingerprint(v, KEY) for name, v in variants.items()}
    fps["base"] = R.fingerprint(base, KEY)
    assert len(set(fps.values())) == len(fps), fps
    # and the secret matters: another key, another fingerprint
    assert R.fingerprint(base, R.fingerprint_key(1235)) != fps["base"]


def test_sparse_adjacencies_are_part_of_the_identity():
    n = _graph().num_nodes
    variants = []
    for make in (lambda ei: torch.sparse_coo_tensor(ei, torch.ones(ei.size(1)), (n, n)),
                 lambda ei: torch.sparse_coo_tensor(ei, torch.ones(ei.size(1)), (n, n)).to_sparse_csr()):
        a, a2, b = _graph(), _graph(), _graph()
        a.adj = make(a.edge_index)
        a2.adj = make(a2.edge_index.flip(1))  # the same matrix, entries listed in another order
        b.adj = make(torch.cat([b.edge_index, torch.tensor([[0], [1]])], 1))  # one entry more
        for d in (a, a2, b):
            del d.edge_index
        fa = R.fingerprint(a, KEY)
        assert R.fingerprint(a2, KEY) == fa
        variants += [fa, R.fingerprint(b, KEY)]
    assert len(set(variants)) == 4  # one entry changes it; COO and CSR layouts differ
    try:
        from torch_sparse import SparseTensor
    except ImportError:
        return
    a, b = _graph(), _graph()
    a.adj_t = SparseTensor.from_edge_index(a.edge_index, sparse_sizes=(n, n))
    b.adj_t = SparseTensor.from_edge_index(b.edge_index[:, 1:], sparse_sizes=(n, n))
    del a.edge_index, b.edge_index
    assert R.fingerprint(a, KEY) != R.fingerprint(b, KEY)


def test_neighbouring_graphs_get_independent_identities():
    from ldpfast.privacy.users import context

    a, b = _graph(), _graph()
    b.edge_index[0, 3] = (b.edge_index[0, 3] + 1) % 30
    sa, sb = R.graph_identity(7, a), R.graph_identity(7, b)
    assert sa != sb
    assert R.graph_identity(7, _graph()) == sa  # re-access: same identity, same reports
    assert R.graph_identity(8, a) != sa  # keyed by the secret
    # another transform (mechanism name in the derivation): other keys for the same graph
    assert context(7, "default", "dprr", {}, sa).k_a != context(7, "default", "rr_edges", {}, sa).k_a


def test_identity_attribute_tensor_is_keyed_and_mixed_with_the_content():
    a = _graph()
    a.graph_id = torch.tensor([5])
    same = _graph()
    same.graph_id = torch.tensor([5])
    assert R.graph_identity(3, a, "graph_id") == R.graph_identity(3, same, "graph_id")
    same.graph_id = torch.tensor([6])  # identical content, another graph: independent bits
    assert R.graph_identity(3, a, "graph_id") != R.graph_identity(3, same, "graph_id")
    # same graph_id, content changed (rows shifted after a user left): fresh bits, never the
    # old ones by row (issue 37, finding 14)
    b = _graph(seed=1)
    b.graph_id = torch.tensor([5])
    assert R.graph_identity(3, a, "graph_id") != R.graph_identity(3, b, "graph_id")


def test_identity_attribute_rows_shifting_gives_independent_labels():
    """Finding 14 as an attacker measures it: with identity='graph_id', after user 0 leaves,
    is user i+1 truthful now when user i was truthful before?  Independent bits: P = p."""
    from ldpfast.transforms import RRLabels

    g = torch.Generator().manual_seed(0)
    n, c, eps = 4000, 4, 0.5
    y = torch.randint(0, c, (n,), generator=g)
    d1 = Data(y=y, num_nodes=n, graph_id=torch.tensor([1]))
    d2 = Data(y=y[1:].clone(), num_nodes=n - 1, graph_id=torch.tensor([1]))
    t = RRLabels(eps, mask="all", seed=5, identity="graph_id")
    with pytest.warns(UserWarning, match="second, different graph"):
        r1, r2 = t(d1).y, t(d2).y
    before = r1[:-1] == y[:-1]  # user i truthful in release 1 (rows 0..n-2)
    after = r2 == y[1:]  # row i of release 2 is user i + 1
    both = float((before & after).sum()) / float(before.sum())
    p = math.exp(eps) / (math.exp(eps) + c - 1)
    assert abs(both - p) < 4.5 * math.sqrt(p * (1 - p) / float(before.sum())), (both, p)


def test_no_secret_or_fingerprint_is_stored():
    from ldpfast.transforms import GRRFS

    d = _graph()
    t = GRRFS(1.0, 2, seed=99)
    out = t(d)
    blob = repr(out.ldp_ledger) + repr(t) + repr(vars(out.ldp_ledger))
    assert "99" not in repr(t)
    for secret in (R.fingerprint(d, R.fingerprint_key(99)).hex(), R.fingerprint_key(99).hex()):
        assert secret not in blob
    # nothing derived from the input is kept (the secret itself is held in memory, as given)
    assert not any(isinstance(v, bytes) for k, v in vars(t).items() if k != "_seed")


# --- on a GPU (pytest -m cuda) -----------------------------------------------------------------
def _gpu_ready():
    return _backend.available()["cuda"] is None


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu_ready(), reason="needs a CUDA device and CuPy")
def test_cuda_kernel_equals_cpp_and_the_reference():
    from ldpfast import _cuda

    rng = np.random.default_rng(4)
    keys = (0x0123456789ABCDEF, 0xFEDCBA9876543210, 2**64 - 1)
    C = _backend.get("cpu", None)
    for n in LENGTHS + [3 * 2**20 + 5]:
        data = rng.integers(0, 256, n + 3, dtype=np.uint8)
        for off in (0, 1, 3):  # misaligned views take the copy
            view = torch.from_numpy(data[off:off + n]).cuda() if off == 0 else \
                torch.from_numpy(data).cuda()[off:off + n]
            out = torch.zeros(2, dtype=torch.int64, device="cuda")
            _cuda.fingerprint(view, *keys, out)
            got = tuple(int(v) % 2**64 for v in out.tolist())
            assert got == _run(C, data[off:off + n].copy(), keys), (n, off)
            if n <= 1000:
                assert got == ref_fingerprint(data[off:off + n].tobytes(), *keys)


@pytest.mark.cuda
@pytest.mark.skipif(not _gpu_ready(), reason="needs a CUDA device and CuPy")
def test_cuda_data_has_the_cpu_fingerprint():
    d = _graph()
    d.w = torch.rand(80, dtype=torch.float64)
    d.flag = torch.tensor([True, False, True])
    d.half = torch.rand(7).to(torch.bfloat16)
    want = R.fingerprint(d, KEY)
    assert R.fingerprint(d.to("cuda"), KEY) == want
    assert R.graph_identity(5, d.to("cuda")) == R.graph_identity(5, d)


def test_empty_tensor_from_numpy_is_fingerprinted():
    # torch.from_numpy of an empty array has stride 0 and cannot be viewed as bytes; a graph
    # with no edges built that way must still get a fingerprint (and differ from none).
    import numpy as np
    from torch_geometric.data import Data

    from ldpfast.privacy.report_once import fingerprint, fingerprint_key

    key = fingerprint_key(1)
    ei = torch.zeros(2, 0, dtype=torch.int64)
    empty = torch.from_numpy(np.array([], dtype=np.float32))  # 1-D: stride (0,)
    a = fingerprint(Data(edge_index=ei, edge_weight=empty, num_nodes=3), key)
    b = fingerprint(Data(edge_index=ei, edge_weight=torch.zeros(0), num_nodes=3), key)
    assert a == b
    assert a != fingerprint(Data(num_nodes=3), key)
