"""The statistics of an empirical privacy audit: Clopper-Pearson bounds on a test's error rates,
the eps they refute, and the choice of a test on one half of the canaries.

An ``(eps, delta)``-DP mechanism ``M`` and any event ``S`` of its output satisfy, for the two
neighbouring inputs ``x0, x1`` of a canary, ``P[M(x1) in S] <= e^eps P[M(x0) in S] + delta`` and
the same with ``x0, x1`` swapped.  A test that says "world 1" on ``S`` has a false-positive rate
``FPR = P[M(x0) in S]`` and a false-negative rate ``FNR = P[M(x1) not in S]``, so

    eps >= log((1 - delta - FNR) / FPR)   and   eps >= log((1 - delta - FPR) / FNR).

With one-sided Clopper-Pearson upper bounds ``FPR_up``, ``FNR_up`` at confidence ``1 - alpha/2``
each (Bonferroni over the two), ``eps_lb = max(0, both logs with FPR_up, FNR_up)`` is a lower
bound on every eps the mechanism can satisfy for this canary pair, with probability at least
``1 - alpha`` over the canaries' randomness (Jagielski, Ullman and Oprea 2020, section 3; Nasr
et al. 2021).  The test (the set ``S``) must be fixed before the counts are taken: it is chosen
on a disjoint selection half of the canaries (:func:`choose_region`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..._checks import check_real

__all__ = ["Region", "choose_region", "clopper_pearson_upper", "eps_from_counts", "eps_from_rates"]


def clopper_pearson_upper(k, n, confidence: float):
    """One-sided Clopper-Pearson upper bound on a rate seen ``k`` times in ``n`` trials.

    Parameters
    ----------
    k, n : int or int array
        Successes and trials (``0 <= k <= n``); arrays are broadcast.
    confidence : float
        One-sided confidence in (0, 1): ``P[rate <= bound] >= confidence``.

    Returns
    -------
    float or numpy array
        The bound; 1 where ``k >= n`` or ``n == 0`` (no information).
    """
    k = np.asarray(k, dtype=np.float64)
    n = np.asarray(n, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        b = stats.beta.ppf(confidence, k + 1, np.maximum(n - k, 1e-300))
    out = np.where((n <= 0) | (k >= n), 1.0, b)
    return float(out) if out.ndim == 0 else out


def eps_from_rates(fpr, fnr, delta: float = 0.0):
    """``max(0, log((1 - delta - fnr) / fpr), log((1 - delta - fpr) / fnr))`` (arrays broadcast):
    the smallest eps that an ``(eps, delta)``-DP mechanism needs for a test with these error rates
    (the module docstring)."""
    fpr = np.asarray(fpr, dtype=np.float64)
    fnr = np.asarray(fnr, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        a = np.log(np.maximum(1.0 - delta - fnr, 0.0) / fpr)
        b = np.log(np.maximum(1.0 - delta - fpr, 0.0) / fnr)
    out = np.maximum(0.0, np.fmax(np.nan_to_num(a, nan=0.0, posinf=np.inf, neginf=0.0),
                                np.nan_to_num(b, nan=0.0, posinf=np.inf, neginf=0.0)))
    return float(out) if out.ndim == 0 else out


def eps_from_counts(fp, n0, fn, n1, *, delta: float = 0.0, confidence: float = 0.95):
    """The audit's lower bound from a test's error counts.

    Parameters
    ----------
    fp, n0 : int (or int arrays)
        False positives among ``n0`` world-0 canaries (the test said "world 1").
    fn, n1 : int (or int arrays)
        False negatives among ``n1`` world-1 canaries.
    delta : float
        The delta of the claim being tested (0 for pure LDP).
    confidence : float
        Confidence of the bound, in (0.5, 1): each rate's Clopper-Pearson bound is taken at
        ``1 - (1 - confidence) / 2`` (Bonferroni over the two).

    Returns
    -------
    (eps_lb, fpr_upper, fnr_upper)
        floats (or arrays): ``eps_lb = eps_from_rates(fpr_upper, fnr_upper, delta)``.
    """
    conf = check_real("confidence", confidence, 0.5, 1 - 1e-12)
    c2 = 1.0 - (1.0 - conf) / 2.0
    fpr_u = clopper_pearson_upper(fp, n0, c2)
    fnr_u = clopper_pearson_upper(fn, n1, c2)
    return eps_from_rates(fpr_u, fnr_u, delta), fpr_u, fnr_u


@dataclass(frozen=True)
class Region:
    """A test "world 1 iff the canary's statistic is in the region", fixed on the selection half.

    Attributes
    ----------
    statistic : str
        Name of the statistic (see :func:`ldpfast.privacy.audit.audit_mechanism`).
    kind : {"values", "at_least", "at_most"}
        ``values``: the statistic's value is one of ``values`` (a likelihood-ratio region:
        Neyman-Pearson on the selection half's frequencies); ``at_least`` / ``at_most``: a
        threshold on a numeric statistic.
    values : tuple
        The region's values (``kind="values"``) or the one threshold.
    eps_select : float
        The bound the region gave on the selection half (what it was chosen by; not a result).
    """

    statistic: str
    kind: str
    values: tuple
    eps_select: float

    def contains(self, codes: np.ndarray) -> np.ndarray:
        """Bool mask: which statistics fall in the region."""
        if self.kind == "values":
            return np.isin(codes, np.asarray(self.values, dtype=codes.dtype))
        t = self.values[0]
        return codes >= t if self.kind == "at_least" else codes <= t

    def describe(self) -> str:
        if self.kind == "values":
            v = ", ".join(str(x) for x in self.values[:6]) + (", ..." if len(self.values) > 6 else "")
            return f"{self.statistic} in {{{v}}}"
        return f"{self.statistic} {'>=' if self.kind == 'at_least' else '<='} {self.values[0]:g}"


def _best_prefix(c0: np.ndarray, c1: np.ndarray, n0: int, n1: int, delta: float, confidence: float):
    """Best prefix (in the given order of values) as a region: ``(eps, j)`` with the region the
    first ``j`` values (``j`` in 1..len)."""
    fp = np.cumsum(c0)
    tp = np.cumsum(c1)
    e, _, _ = eps_from_counts(fp, n0, n1 - tp, n1, delta=delta, confidence=confidence)
    e = np.atleast_1d(e)
    j = int(np.argmax(e))
    return float(e[j]), j + 1


def choose_region(name: str, codes0: np.ndarray, codes1: np.ndarray, *, numeric: bool, delta: float = 0.0,
                  confidence: float = 0.95) -> Region | None:
    """The best region of one statistic on the selection half (``codes0`` of world-0 canaries,
    ``codes1`` of world-1 canaries), judged by the bound it would give there.

    Candidates: the likelihood-ratio prefixes (the values ordered by ``(c1 + 1/2) n0 / ((c0 +
    1/2) n1)``, the Neyman-Pearson order on the selection counts) and, for a ``numeric``
    statistic, every threshold in both orientations (which covers majority votes and counts
    of flips).  Returns None when the statistic takes one value only.
    """
    n0, n1 = codes0.shape[0], codes1.shape[0]
    vals, inv = np.unique(np.concatenate([codes0, codes1]), return_inverse=True)
    if vals.shape[0] < 2 or n0 == 0 or n1 == 0:
        return None
    c0 = np.bincount(inv[:n0], minlength=vals.shape[0]).astype(np.float64)
    c1 = np.bincount(inv[n0:], minlength=vals.shape[0]).astype(np.float64)
    best: tuple[float, str, tuple] = (-math.inf, "values", ())
    order = np.argsort(-((c1 + 0.5) * n0) / ((c0 + 0.5) * n1), kind="stable")
    e, j = _best_prefix(c0[order], c1[order], n0, n1, delta, confidence)
    if j < vals.shape[0]:  # the whole domain is no test
        best = (e, "values", tuple(vals[order[:j]].tolist()))
    if numeric:
        up = np.arange(vals.shape[0])[::-1]  # values >= v: prefixes from the top
        e, j = _best_prefix(c0[up], c1[up], n0, n1, delta, confidence)
        if j < vals.shape[0] and e > best[0]:
            best = (e, "at_least", (vals[up[j - 1]].item(),))
        down = np.arange(vals.shape[0])
        e, j = _best_prefix(c0[down], c1[down], n0, n1, delta, confidence)
        if j < vals.shape[0] and e > best[0]:
            best = (e, "at_most", (vals[down[j - 1]].item(),))
    if best[0] == -math.inf:
        return None
    return Region(name, best[1], best[2], best[0])
