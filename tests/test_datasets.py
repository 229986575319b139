"""Dataset loaders: the embedded Cora, real-data statistics, where datasets are searched,
the (mocked) PyG download, offline errors, GraphDataset, TU format.

Real datasets other than Cora are read from ../shared/datasets (or LDPFAST_DATA) when present
and skipped, with the reason, otherwise.  The download path cannot run here (no network):
it is tested with stand-ins for PyG's dataset classes.
"""
from __future__ import annotations

import os
import shutil
import urllib.error
import warnings
from typing import ClassVar

import numpy as np
import pytest
import torch
from conftest import load_or_skip
from torch_geometric.utils import is_undirected

from ldpfast.datasets import (
    GraphDataset,
    cache_root,
    default_root,
    load,
    load_tu,
    loaders,
    locate,
    search_roots,
)
from ldpfast.datasets.embedded import CORA_PATH, load_cora

ROOT = default_root()

# name -> (nodes, directed edges after cleaning, raw feature columns, classes)
STATS = {
    "cora": (2708, 10556, 1433, 7),
    "citeseer": (3327, 9104, 3703, 6),
    "facebook": (22470, 341646, 4714, 4),
    "twitch-de": (9498, 306276, 3170, 2),
}
CORA_RAW = [f"ind.cora.{p}" for p in loaders._PLANETOID_PARTS]


def _assert_clean(ei: torch.Tensor, n: int):
    assert ei.dtype == torch.int64 and ei.dim() == 2 and ei.size(0) == 2
    assert is_undirected(ei, num_nodes=n)
    assert not bool((ei[0] == ei[1]).any()), "self loops"
    key = ei[0] * n + ei[1]
    assert torch.unique(key).numel() == key.numel(), "duplicate edges"


# found before any test patches the search roots
_CORA_RAW_ROOT = next((r for r, _ in search_roots()
                       if all((r / "planetoid" / "Cora" / "raw" / f).is_file() for f in CORA_RAW)),
                      None)


def _cora_raw_root():
    """A data root holding Cora's raw Planetoid files, or skip."""
    if _CORA_RAW_ROOT is not None:
        return _CORA_RAW_ROOT
    pytest.skip("Cora's raw Planetoid files are not on this machine (LDPFAST_DATA or "
                "../shared/datasets/planetoid/Cora/raw): cannot compare the embedded copy")


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No LDPFAST_DATA, no ../shared/datasets, an empty user cache under tmp_path."""
    monkeypatch.delenv("LDPFAST_DATA", raising=False)
    monkeypatch.setattr(loaders, "_shared_candidates", lambda: ())
    monkeypatch.setenv("LDPFAST_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("LDPFAST_OFFLINE", "1")
    return tmp_path


@pytest.fixture(scope="module", params=sorted(STATS))
def real(request):
    return request.param, load_or_skip(request.param)


def test_real_statistics(real):
    name, data = real
    n, m, f, c = STATS[name]
    assert data.name == name
    assert data.num_nodes == n
    assert data.edge_index.size(1) == m
    assert tuple(data.x.shape) == (n, f) and data.x.dtype == torch.float32
    assert data.y.dtype == torch.int64 and data.y.shape == (n,)
    assert int(data.y.max()) + 1 == c and int(data.y.min()) == 0
    _assert_clean(data.edge_index, n)
    data.validate(raise_on_error=True)
    if name in ("cora", "citeseer"):
        assert int(data.train_mask.sum()) == 20 * c
        assert int(data.val_mask.sum()) == 500 and int(data.test_mask.sum()) == 1000
    else:  # multi-hot: entries in {0, 1}; number of (node, feature) pairs in the JSON
        nnz = int(torch.count_nonzero(data.x))
        assert float(data.x.max()) == 1.0 and float(data.x.sum()) == nnz
        assert nnz == {"facebook": 314583, "twitch-de": 193132}[name]
    if name == "facebook":
        assert data.class_names == ["company", "government", "politician", "tvshow"]


# ----------------------------------------------------------------------------- embedded Cora

def _assert_same_data(a, b):
    assert sorted(a.keys()) == sorted(b.keys())
    for k in a.keys():  # noqa: SIM118 - iterating a Data yields (key, value) pairs
        va, vb = a[k], b[k]
        if torch.is_tensor(va):
            assert torch.is_tensor(vb) and va.dtype == vb.dtype and va.shape == vb.shape, k
            assert torch.equal(va, vb), k
        else:
            assert va == vb, k


def test_embedded_cora_equals_raw_files():
    """The shipped file gives exactly the Data read from the Planetoid raw files."""
    raw = load("cora", root=_cora_raw_root())
    _assert_same_data(load("cora"), raw)
    _assert_same_data(load_cora(), raw)


def test_embedded_cora_rebuilds_identically(tmp_path):
    from ldpfast.datasets.embedded import build_cora

    out = build_cora(_cora_raw_root(), tmp_path / "c.npz")
    assert out == tmp_path / "c.npz"
    _assert_same_data(load_cora(out), load_cora())


def test_embedded_cora_needs_no_data_folder(isolated):
    assert locate("cora") == "embedded"
    data = load("cora")
    assert data.num_nodes == 2708 and data.name == "cora"
    assert CORA_PATH.is_file() and CORA_PATH.stat().st_size < 200_000
    assert not (isolated / "cache").exists(), "loading the embedded Cora must write nothing"
    # root= asks for the raw files in that folder: nothing there, offline -> error
    with pytest.raises(FileNotFoundError, match="ind.cora.graph"):
        load("cora", root=isolated)


def test_embedded_file_is_package_data():
    from importlib import resources

    assert resources.files("ldpfast.datasets").joinpath("data/cora.npz").is_file()
    assert "MIT" in resources.files("ldpfast.datasets").joinpath("data/README.md").read_text()


# ----------------------------------------------------------------------------- misc

def test_aliases_and_no_writes():
    a = load_or_skip("CiteSeer")
    before = sorted(os.walk(ROOT))
    b = load(" cite_seer ")
    assert torch.equal(a.edge_index, b.edge_index) and a.name == b.name == "citeseer"
    assert load_or_skip("Twitch_DE").num_nodes == 9498
    assert sorted(os.walk(ROOT)) == before, "load() must not write under the data root"


def test_feature_dim_svd_deterministic():
    a = load("cora", feature_dim=16)
    b = load("cora", feature_dim=16)
    assert tuple(a.x.shape) == (2708, 16) and a.x.dtype == torch.float32
    assert torch.equal(a.x, b.x)
    # columns are U_k S_k: orthogonal, with norms = leading singular values (decreasing)
    s_exact = torch.linalg.svdvals(load("cora").x.double())[:16]
    s = a.x.double().norm(dim=0)
    assert torch.allclose(s, s_exact, rtol=0.02)
    gram = a.x.double().T @ a.x.double()
    off = gram - torch.diag(torch.diag(gram))
    assert float(off.abs().max()) < 1e-3 * float(gram.diag().max())


@pytest.mark.parametrize("bad", [0, -3, 1434, 10**9])
def test_bad_feature_dim(bad):
    with pytest.raises(ValueError, match="feature_dim"):
        load("cora", feature_dim=bad)


def test_bad_feature_dim_type_before_io(tmp_path):
    with pytest.raises(TypeError, match="feature_dim"):
        load("cora", tmp_path, feature_dim=16.0)
    with pytest.raises(ValueError, match="feature_dim"):
        load("cora", tmp_path, feature_dim=0)
    with pytest.raises(TypeError, match="download"):
        load("citeseer", tmp_path, download="yes")


def test_unknown_name():
    with pytest.raises(ValueError, match="known names") as e:
        load("reddit")
    for k in STATS:
        assert k in str(e.value)


# ----------------------------------------------------------------------------- roots

def test_root_env_beats_default(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPFAST_DATA", str(tmp_path))
    assert default_root() == tmp_path


def test_root_default_from_cwd(tmp_path, monkeypatch):
    monkeypatch.delenv("LDPFAST_DATA", raising=False)
    (tmp_path / "shared" / "datasets").mkdir(parents=True)
    (tmp_path / "work").mkdir()
    monkeypatch.chdir(tmp_path / "work")
    assert default_root() == (tmp_path / "shared" / "datasets").resolve()


def test_cache_dir_env(tmp_path, monkeypatch):
    from ldpfast._paths import cache_dir

    monkeypatch.setenv("LDPFAST_CACHE", str(tmp_path / "c"))
    assert cache_dir() == tmp_path / "c" and cache_root() == tmp_path / "c" / "datasets"
    monkeypatch.delenv("LDPFAST_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    if os.sys.platform.startswith("linux"):
        assert cache_dir() == tmp_path / "xdg" / "ldpfast"


def _write_facebook(root, types=("tvshow", "company", "tvshow")):
    """A hand-made Facebook-format folder (3 nodes) under a data root."""
    d = root / "musae" / "facebook"
    d.mkdir(parents=True)
    (d / "musae_facebook_edges.csv").write_text("id_1,id_2\n0,1\n1,0\n2,2\n1,2\n")
    (d / "musae_facebook_features.json").write_text('{"1": [0, 3, 3], "0": [2], "2": []}')
    (d / "musae_facebook_target.csv").write_text(
        "id,facebook_id,page_name,page_type\n"
        + "".join(f"{i},{5 + i},P{i},{t}\n" for i, t in enumerate(types)))
    return d


def test_search_order_env_shared_cache(isolated, monkeypatch):
    """LDPFAST_DATA, then ../shared/datasets, then the user cache."""
    env, shared, cache = isolated / "env", isolated / "shared", isolated / "cache" / "datasets"
    for r, t in ((env, "company"), (shared, "government"), (cache, "politician")):
        _write_facebook(r, types=(t, t, t))
    monkeypatch.setattr(loaders, "_shared_candidates", lambda: (shared,))
    monkeypatch.setenv("LDPFAST_DATA", str(env))
    assert [o for _, o in search_roots()] == ["LDPFAST_DATA", "../shared/datasets", "user cache"]
    assert load("facebook").class_names == ["company"]
    monkeypatch.delenv("LDPFAST_DATA")
    assert load("facebook").class_names == ["government"]
    assert locate("facebook") == str(shared.resolve() / "musae" / "facebook")
    monkeypatch.setattr(loaders, "_shared_candidates", lambda: ())
    assert load("facebook").class_names == ["politician"]
    # an explicit root is the only place searched
    _write_facebook(isolated / "mine", types=("tvshow",) * 3)
    assert load("facebook", root=isolated / "mine").class_names == ["tvshow"]


def test_missing_files_env_root(isolated, monkeypatch):
    monkeypatch.setenv("LDPFAST_DATA", str(isolated))
    with pytest.raises(FileNotFoundError) as e:
        load("citeseer")
    msg = str(e.value)
    assert "ind.citeseer.graph" in msg and "ind.citeseer.test.index" in msg
    assert f"{isolated} (LDPFAST_DATA)" in msg and "user cache" in msg
    assert "planetoid/CiteSeer/raw" in msg and "LDPFAST_OFFLINE" in msg
    assert "Planetoid(" in msg and "kimiyoung/planetoid" in msg  # how to fetch it


def test_explicit_root_beats_env(tmp_path, monkeypatch):
    env_root, explicit = tmp_path / "env", tmp_path / "explicit"
    env_root.mkdir()
    explicit.mkdir()
    monkeypatch.setenv("LDPFAST_DATA", str(env_root))
    with pytest.raises(FileNotFoundError) as e:
        load("facebook", root=explicit, download=False)
    msg = str(e.value)
    assert str(explicit) in msg and str(env_root) not in msg
    assert "musae_facebook_edges.csv" in msg and "musae_facebook_target.csv" in msg


def test_partially_missing_names_only_missing(tmp_path):
    d = tmp_path / "musae" / "twitch" / "DE"
    d.mkdir(parents=True)
    (d / "musae_DE_edges.csv").write_text("from,to\n0,1\n")
    with pytest.raises(FileNotFoundError) as e:
        load("twitch-de", tmp_path, download=False)
    missing_line = next(line for line in str(e.value).splitlines() if "missing" in line)
    assert "musae_DE_features.json" in missing_line and "musae_DE_target.csv" in missing_line
    assert "musae_DE_edges.csv" not in missing_line


def test_explicit_root_loads_despite_bad_env(tmp_path, monkeypatch):
    root = _cora_raw_root()
    monkeypatch.setenv("LDPFAST_DATA", str(tmp_path))
    assert load("cora", root=str(root)).num_nodes == 2708


def test_offline_error_says_what_to_fetch(isolated):
    assert locate("twitch-de") is None
    with pytest.raises(FileNotFoundError, match="LDPFAST_DATA") as e:
        load("twitch-de")
    msg = str(e.value)
    assert "root=" in msg and "Twitch(" in msg and "'DE'" in msg and "MUSAE" in msg
    assert "musae/twitch/DE/musae_DE_" in msg
    assert not (isolated / "cache").exists(), "nothing is written when nothing is downloaded"


# ----------------------------------------------------------------------------- downloads (mocked)

class _FakePyG:
    """Stands in for a torch_geometric.datasets class: 'downloads' a small npz into
    ``<root>/raw`` on first use (or raises ``fail``), and serves it afterwards."""

    calls: ClassVar[list] = []
    downloads: ClassVar[list] = []
    fail: ClassVar[Exception | None] = None

    def __init__(self, root):
        from torch_geometric.data import Data

        type(self).calls.append(root)
        raw = os.path.join(root, "raw", "facebook.npz")
        if not os.path.isfile(raw):
            if type(self).fail is not None:
                raise type(self).fail
            os.makedirs(os.path.dirname(raw), exist_ok=True)
            np.savez(raw, features=np.eye(3, 128), target=np.array([2, 0, 1]),
                     edges=np.array([[0, 1], [1, 2], [2, 2]]))
            type(self).downloads.append(root)
        z = np.load(raw)
        self.data = Data(x=torch.tensor(z["features"]), y=torch.tensor(z["target"]),
                         edge_index=torch.tensor(z["edges"]).t().contiguous())

    def __getitem__(self, i):
        return self.data


@pytest.fixture
def fake_facebook(monkeypatch):
    import torch_geometric.datasets as D

    class Fake(_FakePyG):
        calls, downloads, fail = [], [], None

    monkeypatch.setattr(D, "FacebookPagePage", Fake)
    return Fake


def test_download_through_pyg_into_user_cache(isolated, fake_facebook, monkeypatch, capsys):
    monkeypatch.setenv("LDPFAST_OFFLINE", "0")
    with pytest.warns(UserWarning, match="128-dimensional"):
        data = load("facebook")
    target = str(cache_root() / "pyg" / "facebook")
    assert fake_facebook.downloads == [target]
    assert "downloading it with torch_geometric.datasets.FacebookPagePage" in capsys.readouterr().err
    assert data.x.dtype == torch.float32 and tuple(data.x.shape) == (3, 128)
    assert data.y.tolist() == [2, 0, 1] and data.name == "facebook"
    assert data.edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]  # cleaned
    # found in the cache next time, offline too: no second download
    monkeypatch.setenv("LDPFAST_OFFLINE", "1")
    assert locate("facebook") == target
    with pytest.warns(UserWarning, match="128-dimensional"):
        assert torch.equal(load("facebook").x, data.x)
    assert fake_facebook.downloads == [target]


def test_download_into_explicit_root(isolated, fake_facebook):
    with pytest.warns(UserWarning):
        load("facebook", root=isolated / "mine", download=True)
    assert fake_facebook.downloads == [str(isolated / "mine" / "pyg" / "facebook")]
    assert not (isolated / "cache").exists()


def test_download_off_never_calls_pyg(isolated, fake_facebook, monkeypatch):
    with pytest.raises(FileNotFoundError, match="LDPFAST_OFFLINE=1"):
        load("facebook")
    monkeypatch.setenv("LDPFAST_OFFLINE", "0")
    with pytest.raises(FileNotFoundError, match="download=False"):
        load("facebook", download=False)
    assert fake_facebook.calls == []


def test_failed_download_is_a_clear_error(isolated, fake_facebook):
    fake_facebook.fail = urllib.error.URLError("[Errno -2] Name or service not known")
    with pytest.raises(FileNotFoundError) as e:
        load("facebook", download=True)
    msg = str(e.value)
    assert "the download failed: URLError" in msg and "Name or service not known" in msg
    assert "FacebookPagePage(" in msg and "musae/facebook/musae_facebook_" in msg
    assert isinstance(e.value.__cause__, urllib.error.URLError)


def test_planetoid_download_is_read_as_raw_files(isolated, monkeypatch):
    """A Planetoid download lands in our raw layout and gives the same Data as local files."""
    import torch_geometric.datasets as D

    src = _cora_raw_root() / "planetoid" / "Cora" / "raw"
    calls = []

    class FakePlanetoid:
        def __init__(self, root, name):
            calls.append((root, name))
            shutil.copytree(src, os.path.join(root, name, "raw"))

    monkeypatch.setattr(D, "Planetoid", FakePlanetoid)
    data = load("cora", root=isolated / "mine", download=True)
    assert calls == [(str(isolated / "mine" / "planetoid"), "Cora")]
    _assert_same_data(data, load("cora"))


# ----------------------------------------------------------------------------- GraphDataset

def test_graph_dataset_pre_transform_runs_once(tmp_path):
    from ldpfast.privacy import Ledger
    from ldpfast.transforms import MultiBit

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # e.g. PyG's weights_only fallback
        ds = GraphDataset(tmp_path, "cora", pre_transform=MultiBit(eps=1.0), log=False)
        again = GraphDataset(tmp_path, "cora", pre_transform=MultiBit(eps=1.0), log=False)
    assert len(ds) == 1 and ds[0].num_nodes == 2708
    # a fresh seed each time a MultiBit is made, yet the stored report is read back
    assert torch.equal(ds[0].x, again[0].x)
    assert Ledger.of(again[0]).eps == 1.0
    other = GraphDataset(tmp_path, "cora", pre_transform=MultiBit(eps=2.0), log=False)
    assert Ledger.of(other[0]).eps == 2.0 and not torch.equal(other[0].x, ds[0].x)
    plain = GraphDataset(tmp_path, "cora", transform=lambda d: d.clone(), log=False)
    assert torch.equal(plain[0].x, load("cora").x)
    assert Ledger.of(plain[0]).eps == 0.0


def test_graph_dataset_missing_data_is_the_loader_error(isolated):
    with pytest.raises(FileNotFoundError, match="citeseer"):
        GraphDataset(isolated / "p", "citeseer", log=False)


def test_small_musae_files(tmp_path):
    """A hand-made Facebook-format folder: label mapping, multi-hot, cleaning."""
    d = tmp_path / "musae" / "facebook"
    d.mkdir(parents=True)
    (d / "musae_facebook_edges.csv").write_text("id_1,id_2\n0,1\n1,0\n2,2\n1,2\n")
    (d / "musae_facebook_features.json").write_text('{"1": [0, 3, 3], "0": [2], "2": []}')
    (d / "musae_facebook_target.csv").write_text(
        'id,facebook_id,page_name,page_type\n2,7,"A, Inc.",tvshow\n0,5,B,company\n'
        "1,6,C,tvshow\n"
    )
    data = load("facebook", tmp_path)
    assert data.y.tolist() == [0, 1, 1] and data.class_names == ["company", "tvshow"]
    assert data.x.tolist() == [[0, 0, 1, 0], [1, 0, 0, 1], [0, 0, 0, 0]]
    assert data.edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    with pytest.raises(ValueError, match="feature_dim"):
        load("facebook", tmp_path, feature_dim=4)  # > min(num_nodes, features) = 3
    assert load("facebook", tmp_path, feature_dim=2).x.shape == (3, 2)


def test_user_supplied_pubmed_missing_names_layout(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"planetoid/PubMed/raw/ind\.pubmed"):
        load("pubmed", tmp_path)


def test_small_lastfm_files_and_top_classes(tmp_path):
    """A hand-made LastFM-Asia folder, then LPGNN's top-k class restriction."""
    from ldpfast.datasets import top_classes

    d = tmp_path / "lastfm_asia"
    d.mkdir()
    (d / "lastfm_asia_edges.csv").write_text("node_1,node_2\n0,1\n1,2\n2,3\n3,4\n0,4\n")
    (d / "lastfm_asia_features.json").write_text(
        '{"0": [1], "1": [0], "2": [2], "3": [], "4": [1, 2]}')
    (d / "lastfm_asia_target.csv").write_text("id,target\n0,5\n1,2\n2,5\n3,0\n4,2\n")
    data = load("lastfm-asia", tmp_path)
    assert data.name == "lastfm" and data.num_nodes == 5
    assert data.y.tolist() == [5, 2, 5, 0, 2]
    assert data.x.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 0, 0], [0, 1, 1]]
    top = top_classes(data, 2)  # classes 2 and 5 (two nodes each; tie -> smaller label first)
    assert top.num_nodes == 4 and top.y.tolist() == [1, 0, 1, 0]
    assert top.x.tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 1], [0, 1, 1]]
    assert sorted(map(tuple, top.edge_index.t().tolist())) == [
        (0, 1), (0, 3), (1, 0), (1, 2), (2, 1), (3, 0)]
    with pytest.raises(ValueError, match="k"):
        top_classes(data, 7)
    (d / "lastfm_asia_target.csv").write_text("id,label\n0,1\n")
    with pytest.raises(ValueError, match="id,target"):
        load("lastfm", tmp_path)


# ----------------------------------------------------------------------------- TU format

def _write_tu(folder, name, *, node_labels=True, attributes=False, indicator=None, edges=None):
    folder.mkdir(parents=True, exist_ok=True)
    # graph 1: nodes 1-3 (duplicate edge 1-2), graph 2: nodes 4-5 (self loop 4-4, one
    # direction only 4->5), graph 3: nodes 6-7, no edges.
    edges = edges or [(1, 2), (2, 1), (2, 3), (3, 2), (1, 2), (4, 4), (4, 5)]
    indicator = indicator or [1, 1, 1, 2, 2, 3, 3]
    (folder / f"{name}_A.txt").write_text("".join(f"{a}, {b}\n" for a, b in edges))
    (folder / f"{name}_graph_indicator.txt").write_text("".join(f"{g}\n" for g in indicator))
    (folder / f"{name}_graph_labels.txt").write_text("-1\n1\n-1\n")
    if node_labels:
        (folder / f"{name}_node_labels.txt").write_text("3\n1\n1\n3\n7\n1\n1\n")
    if attributes:
        (folder / f"{name}_node_attributes.txt").write_text(
            "".join(f"{i}.5, {-i}\n" for i in range(len(indicator))))


def test_load_tu_node_labels(tmp_path):
    _write_tu(tmp_path, "TOY")
    gs = load_tu(tmp_path, "TOY")
    assert len(gs) == 3
    assert [g.num_nodes for g in gs] == [3, 2, 2]
    assert [g.y.tolist() for g in gs] == [[0], [1], [0]]
    assert all(g.y.dtype == torch.int64 for g in gs)
    assert gs[0].edge_index.tolist() == [[0, 1, 1, 2], [1, 0, 2, 1]]
    assert gs[1].edge_index.tolist() == [[0, 1], [1, 0]]
    assert gs[2].edge_index.shape == (2, 0)
    # one-hot over the dataset-wide categories {1, 3, 7}
    assert gs[0].x.tolist() == [[0, 1, 0], [1, 0, 0], [1, 0, 0]]
    assert gs[1].x.tolist() == [[0, 1, 0], [0, 0, 1]]
    for g in gs:
        _assert_clean(g.edge_index, g.num_nodes)
        g.validate(raise_on_error=True)


def test_load_tu_no_features_and_attributes(tmp_path):
    _write_tu(tmp_path / "a", "T", node_labels=False)
    gs = load_tu(tmp_path / "a", "T")
    assert all(g.x is None for g in gs) and [g.num_nodes for g in gs] == [3, 2, 2]
    _write_tu(tmp_path / "b", "T", attributes=True)
    gs = load_tu(str(tmp_path / "b"), "T")
    assert gs[1].x.dtype == torch.float32
    assert gs[1].x.tolist() == [[3.5, -3.0], [4.5, -4.0]]


def test_load_tu_interleaved_indicator(tmp_path):
    # nodes 1,3 in graph 1; 2,4 in graph 2; 5 in graph 3
    _write_tu(tmp_path, "I", node_labels=False, indicator=[1, 2, 1, 2, 3],
              edges=[(1, 3), (2, 4), (4, 2), (5, 5)])
    gs = load_tu(tmp_path, "I")
    assert [g.num_nodes for g in gs] == [2, 2, 1]
    assert gs[0].edge_index.tolist() == [[0, 1], [1, 0]]
    assert gs[1].edge_index.tolist() == [[0, 1], [1, 0]]
    assert gs[2].edge_index.shape == (2, 0)


def test_load_tu_errors(tmp_path):
    _write_tu(tmp_path, "E")
    (tmp_path / "E_graph_labels.txt").unlink()
    with pytest.raises(FileNotFoundError, match="E_graph_labels.txt"):
        load_tu(tmp_path, "E")
    with pytest.raises(FileNotFoundError, match="MISSING_A.txt"):
        load_tu(tmp_path, "MISSING")
    _write_tu(tmp_path / "x", "X", edges=[(1, 4)])
    with pytest.raises(ValueError, match="different graphs"):
        load_tu(tmp_path / "x", "X")
