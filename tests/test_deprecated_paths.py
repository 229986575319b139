"""Import paths moved by issue 12 keep working for one release, with a DeprecationWarning
naming the new path, and give the very same objects."""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import ldpfast
from ldpfast import transforms
from ldpfast.privacy import accountants, audit, dpsgd
from ldpfast.privacy.accountants import rdp
from ldpfast.privacy.dpsgd import clipping

# old module -> {name: (new module, the name's home in the warning)}; the public names are
# the old modules' __all__, plus private names that tests and benchmarks imported
OLD = {
    "ldpfast.dpsgd": {
        **{n: (dpsgd, "ldpfast.privacy.dpsgd") for n in (
            "ClipStats", "DPOptimizer", "SubgraphGradSampleModule", "clipped_sum_loop", "flat_grad",
            "gaussian_noise_std", "per_subgraph_gradients_loop", "subgraph_loss")},
        "CLIP_MARGIN": (dpsgd, "ldpfast.privacy.dpsgd"),
        "_weight_sq_norms": (clipping, "ldpfast.privacy.dpsgd.clipping"),
    },
    "ldpfast.audit": {n: (audit, "ldpfast.privacy.audit")
                      for n in ("AuditResult", "audit_heterpoisson", "eps_lower_bound", "main")},
    "ldpfast.privacy.accountant": {
        **{n: (accountants, "ldpfast.privacy.accountants") for n in (
            "DEFAULT_ORDERS", "DEGREE_MODELS", "HeterPoissonAccountant", "MixtureAccountant",
            "PrivacyReport", "gaussian_epsilon", "heterpoisson_mixture", "mog_rdp", "privacy_model",
            "rdp_to_epsilon", "tail_bound", "check_degree_model", "MoGRDP")},
        "_mog_rdp_lower": (rdp, "ldpfast.privacy.accountants.rdp"),
        "_mog_rdp_batch": (rdp, "ldpfast.privacy.accountants.rdp"),
    },
}
CASES = [(old, name) for old, names in OLD.items() for name in names]


@pytest.mark.parametrize("old,name", CASES)
def test_old_path_warns_and_gives_the_same_object(old, name):
    new_mod, home = OLD[old][name]
    mod = importlib.import_module(old)
    with pytest.warns(DeprecationWarning, match=rf"{old} is deprecated.*import {name} from {home}\b"):
        got = getattr(mod, name)
    assert got is getattr(new_mod, name)
    # it warns on every access, not only the first (``from old import name`` is a getattr)
    with pytest.warns(DeprecationWarning, match=rf"import {name} from {home}\b"):
        assert getattr(mod, name) is got


def test_from_import_statements():
    with pytest.warns(DeprecationWarning, match="import DPOptimizer from ldpfast.privacy.dpsgd"):
        from ldpfast.dpsgd import DPOptimizer
    with pytest.warns(DeprecationWarning, match="import audit_heterpoisson from ldpfast.privacy.audit"):
        from ldpfast.audit import audit_heterpoisson
    with pytest.warns(DeprecationWarning, match="import _mog_rdp_lower from ldpfast.privacy.accountants.rdp"):
        from ldpfast.privacy.accountant import _mog_rdp_lower
    assert DPOptimizer is dpsgd.DPOptimizer and audit_heterpoisson is audit.audit_heterpoisson
    assert _mog_rdp_lower is rdp._mog_rdp_lower


def test_old_paths_as_attributes_of_the_packages():
    with pytest.warns(DeprecationWarning, match="ldpfast.privacy.dpsgd"):
        assert ldpfast.dpsgd.DPOptimizer is dpsgd.DPOptimizer
    with pytest.warns(DeprecationWarning, match="ldpfast.privacy.audit"):
        assert ldpfast.audit.eps_lower_bound is audit.eps_lower_bound
    with pytest.warns(DeprecationWarning, match="ldpfast.privacy.accountants"):
        assert ldpfast.privacy.accountant.HeterPoissonAccountant is accountants.HeterPoissonAccountant
    assert ldpfast.privacy.dpsgd is dpsgd and ldpfast.privacy.audit is audit


@pytest.mark.parametrize("old", sorted(OLD))
def test_shims_are_not_packages_and_refuse_unknown_names(old):
    mod = importlib.import_module(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not hasattr(mod, "__path__")  # no warning: dunders are not forwarded
        with pytest.raises(AttributeError, match="no_such_name"):
            _ = mod.no_such_name
    assert set(OLD[old]) <= set(dir(mod))


def test_transforms_package_keeps_the_public_names():
    old_all = {"GRRFS", "RGNN_GROUP_SIZES", "Discretize", "GroupBinaryFeatures", "MultiBit", "OneBit",
               "RRLabels", "ReportOnce", "discretize", "group_binary_features", "quantile_boundaries"}
    edge = {"DPRR", "LocalLap", "RREdges"}  # were reached through a module __getattr__
    new = {"KPropFeatures", "NoisyGraphWarning", "expected_edges"}  # issue 33
    assert set(transforms.__all__) == old_all | edge | new
    from ldpfast.transforms import edges, features, labels
    assert transforms.DPRR is edges.DPRR and transforms.RRLabels is labels.RRLabels
    assert transforms.GRRFS is features.GRRFS
    assert all(issubclass(getattr(transforms, n), transforms.ReportOnce)
               for n in ("DPRR", "LocalLap", "RREdges", "GRRFS", "MultiBit", "OneBit", "RRLabels"))


def test_python_m_old_audit_still_runs():
    r = subprocess.run([sys.executable, "-W", "always::DeprecationWarning", "-m", "ldpfast.audit", "--help"],
                       capture_output=True, text=True, timeout=300, check=False)
    assert r.returncode == 0, r.stderr
    assert "python -m ldpfast.privacy.audit" in r.stdout
    assert "python -m ldpfast.audit is deprecated" in r.stderr
