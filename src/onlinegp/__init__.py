"""onlinegp: online Gaussian-process mapping.

Every method implements one interface (:class:`onlinegp.OnlineGP`): ``update(x, y)``, ``predict(x)``,
``state_dict()``/``load_state_dict()``. Build one by class (``onlinegp.POAM()``) or by name
(``onlinegp.make_model("poam")``); ``onlinegp.MODELS`` lists them all.
"""

from . import threads  # noqa: F401 - first: chooses OpenMP's threads before torch loads (see threads.py)
from .base import OnlineGP, Prediction, UpdateReport
from .kernels import AttentiveKernel
from .models import (
    FULL,
    LGPR,
    MODELS,
    OIPSGP,
    OSGPR,
    OSVGP,
    OVC,
    PAM,
    POAM,
    SOLARGP,
    SSGP,
    VIPS,
    WGPR,
    WISKI,
    ConditionalVarianceGP,
    ExactGP,
    LocalEnsemble,
    ModelEntry,
    OnlineELBO,
    OVCpp,
    SSGPpp,
    VarSSGP,
    WISKIClassifier,
    make_model,
    register,
)

__all__ = [
    "OnlineGP",
    "Prediction",
    "UpdateReport",
    "AttentiveKernel",
    "MODELS",
    "ModelEntry",
    "make_model",
    "register",
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
]
__version__ = "0.1.0"
