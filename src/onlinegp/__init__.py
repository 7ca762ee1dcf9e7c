"""onlinegp: online Gaussian-process mapping.

Every method implements one interface (:class:`onlinegp.base.OnlineGP`): ``update(x, y)``, ``predict(x)``,
``state_dict()``/``load_state_dict()``.
"""

from .base import OnlineGP, Prediction, UpdateReport
from .kernels import AttentiveKernel
from .models import FULL, OVC, PAM, POAM, ExactGP, OVCpp

__all__ = ["OnlineGP", "Prediction", "UpdateReport", "AttentiveKernel", "POAM", "PAM", "FULL", "OVC", "OVCpp",
           "ExactGP"]
__version__ = "0.1.0"
