"""Privacy-loss-distribution (PLD) figure of a MoG mechanism, by Google's ``dp_accounting``.

:meth:`.HeterPoissonAccountant.pld_epsilon` (:mod:`.heterpoisson`) gives an independent, tighter figure with
Google's ``dp_accounting`` (0.6): ``pld.privacy_loss_distribution.
from_mixture_gaussian_mechanism`` (which wraps ``privacy_loss_mechanism.
MixtureGaussianPrivacyLoss``, both adjacency directions, pessimistic discretisation),
composed ``T`` times, at the worst ``D`` of the RDP scan, ``D = 1`` and the Poisson limit.  It
keeps components up to a cap whose tail is below ``1e-12 delta / T`` and charges
``e^eps T tail`` to ``delta`` by the same coupling as the RDP figure (:mod:`.heterpoisson`,
item 1).  Composing PLDs is exact up to
discretisation, RDP composition plus conversion is not, so ``eps_PLD <= eps_RDP`` up to the
discretisation error (``value_discretization_interval``, default ``1e-3``): the tests check
this relationship and both figures against the plain Gaussian mechanism where the mixture
degenerates (``q_b = 1``).
"""
from __future__ import annotations

from ..._checks import check_real

__all__: list[str] = []


def _pld_eps(c, p, sigma, T, delta, vdi) -> float:
    from dp_accounting.pld import privacy_loss_distribution as pld_mod

    vdi = check_real("value_discretization_interval", vdi, 1e-6, 1.0)
    pld = pld_mod.from_mixture_gaussian_mechanism(
        standard_deviation=float(sigma), sensitivities=[float(v) for v in c],
        sampling_probs=[float(v) for v in p], pessimistic_estimate=True,
        value_discretization_interval=vdi)
    return float(pld.self_compose(int(T)).get_epsilon_for_delta(float(delta)))
