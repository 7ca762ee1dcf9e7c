"""One module per method; every model implements :class:`~onlinegp.base.OnlineGP` and registers itself by name."""

from .ensemble import LocalEnsemble
from .exact import ExactGP
from .osgpr import OSGPR, SSGP, SSGPpp
from .osvgp import OSVGP
from .ovc import OVC, OVCpp
from .poam import FULL, PAM, POAM
from .poam_ablations import OnlineELBO, VarSSGP
from .registry import MODELS, ModelEntry, make_model, register
from .solar import LGPR, SOLARGP
from .vips import OIPSGP, VIPS, ConditionalVarianceGP
from .wgpr import WGPR
from .wiski import WISKI, WISKIClassifier

__all__ = [
    "POAM",
    "PAM",
    "FULL",
    "OVC",
    "OVCpp",
    "VarSSGP",
    "OnlineELBO",
    "OSGPR",
    "SSGP",
    "SSGPpp",
    "OSVGP",
    "VIPS",
    "ConditionalVarianceGP",
    "OIPSGP",
    "WISKI",
    "WISKIClassifier",
    "ExactGP",
    "WGPR",
    "SOLARGP",
    "LGPR",
    "LocalEnsemble",
    "MODELS",
    "ModelEntry",
    "make_model",
    "register",
]
