"""GraphDataset's processed-file cache: keyed by every parameter of the pre_transform.

The folder used to be named by ``sha256(repr(pre_transform))``, and the reprs omit GRRFS's
``accounting``, DPRR's ``public`` and the contents of masks, so one root returned a graph
randomised under other settings.  These tests ask for such pairs in one root, check the
stored secret-free description and its keyed digests, and the mismatch handling.
"""
from __future__ import annotations

import hashlib
import json
import os
import stat
import warnings
from pathlib import Path

import pytest
import torch
import torch_geometric.transforms as T

from ldpfast.datasets import GraphDataset, load
from ldpfast.datasets._cache_key import KEY_FILE, describe, dumps
from ldpfast.privacy import Ledger
from ldpfast.transforms import DPRR, GRRFS, MultiBit, RRLabels

N = 2708  # Cora


def _ds(root, pre, **kw) -> GraphDataset:
    return GraphDataset(root, "cora", pre_transform=pre, log=False, **kw)


def _folder(ds: GraphDataset) -> Path:
    return Path(ds.processed_dir)


def _params(ds: GraphDataset) -> Path:
    return _folder(ds) / "cache_params.json"


def _edge_set(ei: torch.Tensor) -> torch.Tensor:
    return torch.unique(ei[0] * N + ei[1])


def _middle_flipped(mask: torch.Tensor) -> torch.Tensor:
    # Same first and last three entries: the tensors' reprs ("tensor([..., ...])") agree.
    out = mask.clone()
    out[3:-3] = ~out[3:-3]
    return out


def test_grrfs_accounting_gets_its_own_folder(tmp_path):
    theorem1 = _ds(tmp_path, GRRFS(eps_x=1.0, m=10, accounting="rgnn_theorem1"))[0]
    exact = _ds(tmp_path, GRRFS(eps_x=1.0, m=10, accounting="exact"))[0]
    assert Ledger.of(theorem1).eps < 10.0
    assert Ledger.of(exact).eps == 10.0  # m * eps_x, not the stored Theorem-1 ledger


def test_dprr_public_set_gets_its_own_folder(tmp_path):
    true = _edge_set(load("cora").edge_index)
    everyone = torch.ones(N, dtype=torch.bool)
    stored = _ds(tmp_path, DPRR(eps=8.0, public=everyone))[0]
    assert torch.equal(_edge_set(stored.edge_index), true)  # public users report their lists
    private = _ds(tmp_path, DPRR(eps=8.0, public=None))[0]
    assert not torch.equal(_edge_set(private.edge_index), true)
    assert Ledger.of(private).eps == pytest.approx(8.0)


def test_rr_labels_mask_contents_get_their_own_folder(tmp_path):
    y = load("cora").y
    a = torch.arange(N) % 3 == 0
    b = _middle_flipped(a)
    assert repr(a) == repr(b)  # what the old key saw
    _ds(tmp_path, RRLabels(eps=1.0, mask=a))
    data = _ds(tmp_path, RRLabels(eps=1.0, mask=b))[0]
    assert torch.equal(data.y_rr_mask, b)
    assert torch.equal(data.y[~b], y[~b])  # only mask B's nodes report
    assert not torch.equal(data.y[b], y[b])


def test_seed_is_not_part_of_the_key(tmp_path):
    # seed=None draws a new secret each time: the stored report must still be found.
    first = _ds(tmp_path, MultiBit(eps=1.0))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no mismatch warning, no re-processing
        again = _ds(tmp_path, MultiBit(eps=1.0))
        fixed = _ds(tmp_path, MultiBit(eps=1.0, seed=123456789))
    assert _folder(first) == _folder(again) == _folder(fixed)
    assert torch.equal(first[0].x, again[0].x) and torch.equal(first[0].x, fixed[0].x)
    text = _params(first).read_text()
    assert json.loads(text)["pre_transform"]["attrs"]["eps"] == {"float": "1.0"}
    assert "123456789" not in text and "seed" not in text


def test_mask_contents_enter_only_keyed(tmp_path):
    mask = torch.arange(N) % 5 == 0
    ds = _ds(tmp_path / "r1", RRLabels(eps=1.0, mask=mask))
    key = tmp_path / "r1" / KEY_FILE
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and len(key.read_bytes()) == 32
    raw = mask.numpy().tobytes()
    unkeyed = [hashlib.new(h, raw).hexdigest() for h in ("sha256", "sha1", "md5", "blake2b")]
    folder = _folder(ds).name
    text = _params(ds).read_text()
    for d in unkeyed:
        for shown in (folder, text):
            assert d[:12] not in shown
    assert raw.hex()[:64] not in text
    digest = json.loads(text)["pre_transform"]["attrs"]["mask"]["tensor"]
    assert digest["dtype"] == "torch.bool" and digest["shape"] == [N]
    # another root, another key: the same mask is not recognisable across roots
    other = _ds(tmp_path / "r2", RRLabels(eps=1.0, mask=mask))
    text2 = _params(other).read_text()
    assert json.loads(text2)["pre_transform"]["attrs"]["mask"]["tensor"]["hmac"] != digest["hmac"]


def test_stale_or_colliding_folder_is_reprocessed_or_refused(tmp_path):
    pre = MultiBit(eps=1.0)
    ds = _ds(tmp_path, pre)
    params = _params(ds)
    good = params.read_text()
    # a folder whose stored parameters differ (a collision), then one with none (old file)
    params.write_text(good.replace('"1.0"', '"2.0"'))
    with pytest.raises(RuntimeError, match="other parameters"):
        _ds(tmp_path, pre, on_mismatch="raise")
    params.unlink()
    with pytest.warns(UserWarning, match="no readable cache_params.json"):
        again = _ds(tmp_path, pre)
    assert params.read_text() == good
    assert torch.equal(again[0].x, ds[0].x)  # re-processed by the same transform: same report
    with pytest.raises(ValueError, match="on_mismatch"):
        _ds(tmp_path, pre, on_mismatch="ignore")


def test_folder_keyed_by_the_old_repr_is_not_read(tmp_path):
    pre = GRRFS(eps_x=1.0, m=10, accounting="exact")
    # what the old version stored for a Theorem-1 run of the same repr
    old = tmp_path / "cora" / "processed" / hashlib.sha256(repr(pre).encode()).hexdigest()[:12]
    _ds(tmp_path / "old", GRRFS(eps_x=1.0, m=10, accounting="rgnn_theorem1"))
    os.makedirs(old.parent, exist_ok=True)
    src = tmp_path / "old" / "cora" / "processed"
    os.rename(src / next(iter(os.listdir(src))), old)
    assert Ledger.of(_ds(tmp_path, pre)[0]).eps == 10.0


def test_describe_is_generic():
    key = bytes(32)
    t = DPRR(eps=1.0, public=torch.ones(4, dtype=torch.bool), n_max=70)  # (n_max=7: eps1 >= eps, refused)
    d = describe(T.Compose([T.NormalizeFeatures(), t]), key)
    attrs = d["attrs"]["transforms"]["list"][1]["attrs"]
    assert attrs["n_max"] == 70 and attrs["alpha"] == {"float": "0.9"}
    assert "_seed" not in attrs and "last_result" not in attrs
    # floats exactly; order of a Compose matters; bool != int
    assert dumps(describe(1.0, key)) != dumps(describe(1.0000000000000002, key))
    assert dumps(describe([True], key)) != dumps(describe([1], key))
    assert describe(T.Compose([t, T.NormalizeFeatures()]), key) != d

    class Store:
        def __init__(self):
            self._rows = [1, 2]

    class WithParams:
        def __init__(self):
            self._p = 3

        def cache_params(self) -> dict:
            return {"p": self._p}

    class Secretive:
        def __init__(self):
            self.user_key = 987654321

    # a function's key covers the module globals it reads
    scope = {"t": GRRFS(eps_x=1.0, m=2)}
    f = eval("lambda d: t(d)", scope)
    before = dumps(describe(f, key))
    scope["t"] = GRRFS(eps_x=1.0, m=2, accounting="rgnn_theorem1")
    assert dumps(describe(f, key)) != before
    with pytest.raises(TypeError, match="cache_params"):
        describe(T.Compose([Store()]), key)
    assert describe(WithParams(), key)["params"] == {"p": 3}
    assert "987654321" not in dumps(describe(Secretive(), key))
    assert describe(Secretive(), key) != describe(Secretive(), bytes(31) + b"\1")
