"""PyG modules and losses: :class:`KProp` (LPGNN Algorithm 2) and LPGNN's label denoising
(:func:`denoise_labels`, eq. 12) and corrected loss (:func:`corrected_loss`, eqs. 13-14, with
:func:`rr_transition`)."""
from .kprop import KProp
from .lpgnn import corrected_loss, denoise_labels, rr_transition

__all__ = ["KProp", "corrected_loss", "denoise_labels", "rr_transition"]
