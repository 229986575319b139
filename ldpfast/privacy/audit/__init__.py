"""Empirical privacy audits: lower bounds on eps, measured against what ldpfast charged.

An audit runs a mechanism on inputs it controls (canaries), attacks the outputs, and turns the
attack's error rates into ``eps_lb``, a lower bound on eps that holds with a stated confidence.
``eps_lb`` above the charge (the report store's total, the ledger's, or the DP-SGD
accountant's) refutes the charge; ``eps_lb`` below it proves nothing: it is not an upper bound.
docs/privacy_audit.md says what the bound means, how tight it is, and how to read a report.

* :func:`audit_mechanism`, :func:`audit_pipeline` (:mod:`.releases`): the local randomisers
  (features, labels, edges; transforms or functions) over ``k`` releases under a change model
  (:data:`CHANGE_MODELS`), with or without user keys and a report store; ``ldpfast audit`` on
  the command line.
* :func:`audit_heterpoisson` (:mod:`.heterpoisson`): node-level DP-SGD with gradient canaries
  (paper 003, Algorithm 4); ``AuditResult.to_report()`` gives it the same shape.
* :func:`audit`: one entry point for both.
* :mod:`.stats`: Clopper-Pearson bounds and the eps they refute; :mod:`.report`:
  :class:`AuditReport` (JSON, plot).

``python -m ldpfast.privacy.audit`` runs the DP-SGD audit on a real dataset (:func:`main`).
"""
from __future__ import annotations

from .heterpoisson import AuditResult, audit_heterpoisson, eps_lower_bound, main
from .releases import CHANGE_MODELS, MECHANISMS, audit_mechanism, audit_pipeline
from .report import AuditPoint, AuditReport, plot_reports
from .stats import Region, choose_region, clopper_pearson_upper, eps_from_counts, eps_from_rates

__all__ = ["CHANGE_MODELS", "MECHANISMS", "AuditPoint", "AuditReport", "AuditResult", "Region", "audit",
           "audit_heterpoisson", "audit_mechanism", "audit_pipeline", "choose_region", "clopper_pearson_upper",
           "eps_from_counts", "eps_from_rates", "eps_lower_bound", "main", "plot_reports"]

_DPSGD = ("heterpoisson", "dpsgd")


def audit(target, /, **kwargs):
    """One entry point for every audit.

    Parameters
    ----------
    target : str, transform class, function, or list of stages
        ``"heterpoisson"`` (or ``"dpsgd"``): :func:`audit_heterpoisson` (give ``data=`` and its
        arguments), returned as an :class:`AuditReport` (``AuditResult.to_report``); a list of
        stages: :func:`audit_pipeline`; else one mechanism: :func:`audit_mechanism`.
    **kwargs
        The chosen function's arguments.

    Returns
    -------
    AuditReport, or dict of AuditReport
        One report (a mechanism, DP-SGD), or ``{relation: report}`` (a pipeline).
    """
    if isinstance(target, str) and target in _DPSGD:
        if "data" not in kwargs:
            raise TypeError(f"audit({target!r}): give the graph as data=")
        data = kwargs.pop("data")
        return audit_heterpoisson(data, **kwargs).to_report()
    if isinstance(target, (list, tuple)):
        return audit_pipeline(list(target), **kwargs)
    return audit_mechanism(target, **kwargs)
