"""Offline dataset loaders: real-data statistics, root resolution, errors, TU format."""
from __future__ import annotations

import os

import pytest
import torch
from torch_geometric.utils import is_undirected

from ldpfast.datasets import default_root, load, load_tu, loaders

ROOT = default_root()
needs_data = pytest.mark.skipif(ROOT is None, reason="no offline data root (../shared/datasets)")

# name -> (nodes, directed edges after cleaning, raw feature columns, classes)
STATS = {
    "cora": (2708, 10556, 1433, 7),
    "citeseer": (3327, 9104, 3703, 6),
    "facebook": (22470, 341646, 4714, 4),
    "twitch-de": (9498, 306276, 3170, 2),
}


def _assert_clean(ei: torch.Tensor, n: int):
    assert ei.dtype == torch.int64 and ei.dim() == 2 and ei.size(0) == 2
    assert is_undirected(ei, num_nodes=n)
    assert not bool((ei[0] == ei[1]).any()), "self loops"
    key = ei[0] * n + ei[1]
    assert torch.unique(key).numel() == key.numel(), "duplicate edges"


@pytest.fixture(scope="module", params=sorted(STATS))
def real(request):
    if ROOT is None:
        pytest.skip("no offline data root (../shared/datasets)")
    return request.param, load(request.param)


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


@needs_data
def test_aliases_and_no_writes():
    before = sorted(os.walk(ROOT))
    a = load("CiteSeer")
    b = load(" cite_seer ")
    assert torch.equal(a.edge_index, b.edge_index) and a.name == b.name == "citeseer"
    assert load("Twitch_DE").num_nodes == 9498
    assert sorted(os.walk(ROOT)) == before, "load() must not write under the data root"


@needs_data
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


@needs_data
@pytest.mark.parametrize("bad", [0, -3, 1434, 10**9])
def test_bad_feature_dim(bad):
    with pytest.raises(ValueError, match="feature_dim"):
        load("cora", feature_dim=bad)


def test_bad_feature_dim_type_before_io(tmp_path):
    with pytest.raises(TypeError, match="feature_dim"):
        load("cora", tmp_path, feature_dim=16.0)
    with pytest.raises(ValueError, match="feature_dim"):
        load("cora", tmp_path, feature_dim=0)


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


def test_missing_files_env_root(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPFAST_DATA", str(tmp_path))
    with pytest.raises(FileNotFoundError) as e:
        load("cora")
    msg = str(e.value)
    assert "ind.cora.graph" in msg and "ind.cora.test.index" in msg and str(tmp_path) in msg
    assert "planetoid/Cora/raw" in msg


def test_explicit_root_beats_env(tmp_path, monkeypatch):
    env_root, explicit = tmp_path / "env", tmp_path / "explicit"
    env_root.mkdir()
    explicit.mkdir()
    monkeypatch.setenv("LDPFAST_DATA", str(env_root))
    with pytest.raises(FileNotFoundError) as e:
        load("facebook", root=explicit)
    msg = str(e.value)
    assert str(explicit) in msg and str(env_root) not in msg
    assert "musae_facebook_edges.csv" in msg and "musae_facebook_target.csv" in msg


def test_partially_missing_names_only_missing(tmp_path):
    d = tmp_path / "musae" / "twitch" / "DE"
    d.mkdir(parents=True)
    (d / "musae_DE_edges.csv").write_text("from,to\n0,1\n")
    with pytest.raises(FileNotFoundError) as e:
        load("twitch-de", tmp_path)
    msg = str(e.value)
    assert "musae_DE_features.json" in msg and "musae_DE_target.csv" in msg
    assert "musae_DE_edges.csv\n" not in msg.split("expected layout")[0]


@needs_data
def test_explicit_root_loads_despite_bad_env(tmp_path, monkeypatch):
    monkeypatch.setenv("LDPFAST_DATA", str(tmp_path))
    assert load("cora", root=str(ROOT)).num_nodes == 2708


def test_no_root_found(monkeypatch):
    monkeypatch.setattr(loaders, "default_root", lambda: None)
    with pytest.raises(FileNotFoundError, match="LDPFAST_DATA") as e:
        load("cora")
    assert "root=" in str(e.value)


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
