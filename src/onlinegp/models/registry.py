"""Models by name, so every experiment (mission, stream, bench) can use every method.

``make_model(name, input_dim, **options)`` builds one; ``MODELS`` maps a lower-case name to a constructor and a
one-line description. Methods register here with one line each.
"""

from __future__ import annotations

from typing import Any, Callable

from ..base import OnlineGP
from .exact import ExactGP
from .ovc import OVC, OVCpp
from .osgpr import OSGPR, SSGP, SSGPpp
from .osvgp import OSVGP
from .poam import FULL, PAM, POAM
from .solar import LGPR, SOLARGP
from .wgpr import WGPR
from .poam_ablations import OnlineELBO, VarSSGP
from .wiski import WISKI
from .vips import VIPS, ConditionalVarianceGP, OIPSGP

MODELS: dict[str, tuple[Callable[..., OnlineGP], str]] = {
    "poam": (POAM, "POAM: pivoted-Cholesky Z, projected terms, analytic q(u), Adam M-step (paper 000)"),
    "pam": (PAM, "PAM: POAM's E/M steps recomputed from all data (offline)"),
    "full": (FULL, "FULL: POAM with the terms recomputed from all data"),
    "ovc": (OVC, "OVC: noise-weighted projected terms, Z refined by gradient (paper 000 app. A3)"),
    "ovc++": (OVCpp, "OVC++: OVC without gradient steps on Z"),
    "z-opt": (lambda d, **o: POAM(d, optimize_inducing=True, **o), "POAM ablation: Z by gradient"),
    "z-rand": (lambda d, **o: POAM(d, inducing="random", **o), "POAM ablation: random Z"),
    "z-kmeans": (lambda d, **o: POAM(d, inducing="kmeans", **o), "POAM ablation: k-means Z"),
    "var-opt": (lambda d, **o: POAM(d, variational="gradient", **o), "POAM ablation: q(u) by gradient"),
    "ssgp": (SSGP, "SSGP: streaming sparse GP, resampled Z, Z and θ by L-BFGS on the online bound (Bui et al. 2017)"),
    "ssgp++": (SSGPpp, "SSGP++: streaming sparse GP, pivoted-Cholesky Z, Adam on the online bound (paper 000 app. A4)"),
    "osgpr": (OSGPR, "O-SGPR: streaming sparse GP, RBF, pivoted-Cholesky Z, L-BFGS on θ (paper 002 baseline)"),
    "osvgp": (OSVGP, "O-SVGP: uncollapsed streaming SVGP, β-tempered KL terms, mini-batch Adam (paper 002 app. B)"),
    "var-ssgp": (VarSSGP, "POAM ablation: SSGP's variational update"),
    "online-elbo": (OnlineELBO, "POAM ablation: M-step on SSGP's online bound"),
    "vips": (VIPS, "VIPS: OSGPR that sizes itself by the online upper/lower bound gap, L-BFGS on θ (paper 001)"),
    "conditional-variance": (ConditionalVarianceGP, "OSGPR with Conditional Variance Z: greedy until tr(K − Q) ≤ η (paper 001)"),
    "oips": (OIPSGP, "OSGPR with OIPS Z: add x when max_z k(x, z) < ρ (paper 001 baseline)"),
    "wiski": (WISKI, "WISKI: SKI grid + Woodbury caches, constant-time updates, one Adam step per point (paper 002)"),
    "exact": (ExactGP, "exact GP refit on all data (O(N³) baseline)"),
    "wgpr": (WGPR, "WGPR: ensemble of OSGPR members split by the 2-Wasserstein distance, nearest-model prediction (paper 004)"),
    "solar-gp": (SOLARGP, "SOLAR-GP-style ensemble of OSGPR members split by input distance, weighted prediction (paper 004 baseline)"),
    "lgpr": (LGPR, "LGPR: exact local GPs with offline global hyper-parameters, weighted prediction (paper 004 baseline)"),
}


def make_model(name: str, input_dim: int, **options: Any) -> OnlineGP:
    """Build the model registered as ``name`` (case-insensitive) for ``input_dim`` inputs."""
    key = name.lower()
    if key not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(sorted(MODELS))}")
    return MODELS[key][0](input_dim, **options)
