"""onlinegp: online Gaussian-process mapping.

Every method implements one interface (:class:`onlinegp.OnlineGP`): ``update(x, y)``, ``predict(x)``,
``state_dict()``/``load_state_dict()``. Build one by class (``onlinegp.POAM()``) or by name
(``onlinegp.make_model("poam")``); ``onlinegp.MODELS`` lists them all.
"""

#: the package's version, and the version of its numbers: a change that alters any result of a committed run
#: (results/) raises it, so that runs of older code are never served as current (see onlinegp.experiments.bench.runner)
__version__ = "0.7.8"

# the portable mode and threads before anything that imports torch: they set what the libraries read when they load
# (portable.py, threads.py); settings imports no torch either
from . import portable, settings, threads  # noqa: F401
from .base import KernelGP, OnlineGP, Prediction, UpdateReport
from .kernels import AttentiveKernel
from .models import *  # noqa: F403 - every model class, MODELS, make_model, register
from .models import __all__ as _models_all
from .training import Pretraining, Training

__all__ = [
    "OnlineGP",
    "KernelGP",
    "Prediction",
    "UpdateReport",
    "AttentiveKernel",
    "Training",
    "Pretraining",
    "settings",
    *_models_all,
]
