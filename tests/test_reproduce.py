"""The reproduction harness, ``ldpfast.reproduce.<paper>``, apart from the methods (issue 12):
the names that moved out of ``ldpfast.methods.<paper>`` keep working there for one release,
with a DeprecationWarning naming the new path, and resolve to the very same objects; methods
never import the harness; the CLI dispatches to it; saved results hold no seed."""
from __future__ import annotations

import ast
import importlib
import warnings
from pathlib import Path

import pytest

MOVED = {
    "rgnn": ("EPS_Y", "PAPER_TABLE2", "PAPER_ABLATION", "DATASET_K", "METHODS", "reproduce_main",
             "_grouped"),
    "lpgnn": ("PAPER_TABLE2", "PAPER_TABLE4", "reproduce_main"),
    "dprr": ("LABELS", "synthetic_graph_classification", "degree_preservation",
             "plot_degree_preservation", "reproduce_main"),
    "heterpoisson": ("PAPER_TABLE2", "PAPER_TABLE4", "reproduce_main"),
}
CASES = [(paper, name) for paper, names in MOVED.items() for name in names]
PKG = Path(__file__).resolve().parents[1] / "ldpfast"


@pytest.mark.parametrize(("paper", "name"), CASES)
def test_old_name_warns_and_is_the_moved_object(paper, name):
    old = importlib.import_module(f"ldpfast.methods.{paper}")
    new = importlib.import_module(f"ldpfast.reproduce.{paper}")
    with pytest.warns(DeprecationWarning, match=rf"ldpfast\.reproduce\.{paper}\.{name}\b") as rec:
        got = getattr(old, name)
    assert got is getattr(new, name)
    # attributed to the caller (this file), not to the shim
    assert all(Path(w.filename).name == Path(__file__).name for w in rec
               if issubclass(w.category, DeprecationWarning))


@pytest.mark.parametrize("paper", sorted(MOVED))
def test_from_import_of_old_name_warns(paper):
    ns: dict = {}
    with pytest.warns(DeprecationWarning, match=rf"ldpfast\.reproduce\.{paper}\.reproduce_main"):
        exec(f"from ldpfast.methods.{paper} import reproduce_main", ns)  # noqa: S102
    new = importlib.import_module(f"ldpfast.reproduce.{paper}")
    assert ns["reproduce_main"] is new.reproduce_main


@pytest.mark.parametrize("paper", sorted(MOVED))
def test_unknown_names_still_raise_and_method_names_do_not_warn(paper):
    old = importlib.import_module(f"ldpfast.methods.{paper}")
    with pytest.raises(AttributeError, match="no_such_name"):
        old.no_such_name  # noqa: B018
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        assert callable(old.fit)  # the algorithm stays where it was


def test_new_modules_import_without_deprecation_warnings():
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        for paper in MOVED:
            importlib.reload(importlib.import_module(f"ldpfast.reproduce.{paper}"))
    ours = [w for w in rec if issubclass(w.category, DeprecationWarning)
            and "ldpfast" in str(w.filename)]
    assert not ours, [str(w.message) for w in ours]


def _imported_modules(path: Path, package: str) -> set[str]:
    """Absolute names of every module ``path`` imports (top level and inside functions)."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            out.add(mod)
            out.update(f"{mod}.{a.name}" for a in node.names)
    return out


def test_methods_never_import_the_reproduction_harness():
    """Data flow: methods -> reproduce, never back (the deprecation shims look the new
    module up by name, on first use of a moved name only)."""
    bad = {}
    for f in sorted((PKG / "methods").glob("*.py")):
        mods = _imported_modules(f, "ldpfast.methods")
        hits = sorted(m for m in mods if m == "ldpfast.reproduce" or m.startswith("ldpfast.reproduce."))
        if hits:
            bad[f.name] = hits
    assert not bad, bad


def test_fit_reports_share_one_dataclass():
    from ldpfast.methods._common import FitReport
    from ldpfast.methods.dprr import DPRRReport
    from ldpfast.methods.lpgnn import LPGNNReport
    from ldpfast.methods.rgnn import RGNNReport

    for cls in (DPRRReport, LPGNNReport, RGNNReport):
        assert issubclass(cls, FitReport)
        assert "to_dict" not in vars(cls)  # one implementation, FitReport's
    r = RGNNReport(accuracy=0.5, epoch=3, val_score=0.4, privacy={"eps": 1.0}, settings={})
    assert r.to_dict() == {"accuracy": 0.5, "privacy": {"eps": 1.0}, "settings": {}, "timings": {},
                           "epoch": 3, "val_score": 0.4, "reconstruction": {}}


def test_cli_reproduce_dispatches_to_the_reproduce_package(monkeypatch):
    from ldpfast import cli
    from ldpfast.reproduce import lpgnn

    calls = []
    monkeypatch.setattr(lpgnn, "reproduce_main", lambda argv: calls.append(argv) or 0)
    assert cli.main(["reproduce", "lpgnn", "--quick", "--runs", "1"]) == 0
    assert calls == [["--quick", "--runs", "1"]]


def test_dprr_reproduction_saves_no_seed(tmp_path):
    """The saved settings of ``ldpfast reproduce dprr`` never hold the secret --seed (they
    used to: ``settings = vars(args)``)."""
    import json

    from ldpfast.reproduce.dprr import reproduce_main

    seed = 0x5EC2E7_1234
    argv = ["--graphs", "8", "--nodes", "30", "40", "--runs", "1", "--epochs", "1", "--eps", "1",
            "--alphas", "0", "--no-facebook", "--degree-nodes", "200", "--rr-max-edges", "1",
            "--seed", str(seed), "--out", str(tmp_path)]
    assert reproduce_main(argv) == 0
    text = (tmp_path / "dprr.json").read_text()
    assert str(seed) not in text and "--seed <secret>" in text
    assert "seed" not in json.loads(text)["settings"]
