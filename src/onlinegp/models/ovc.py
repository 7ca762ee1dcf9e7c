"""OVC and OVC++: Online Variational Conditioning (Maddox et al. 2021) as configured in Chen et al. 2024, appendix A3.

Both store noise-weighted terms σ⁻² K_uf y and σ⁻² K_uf K_fu with the σ² of the batch they came from, project them
onto new inducing inputs like POAM, and train hyper-parameters with POAM's M-step. OVC also moves Z by gradient
after its pivoted-Cholesky start; OVC++ does not.
"""

from __future__ import annotations

from typing import Any

from ..base import preset
from .poam import POAM
from .registry import register


@register("ovc", "OVC: noise-weighted projected terms, Z refined by gradient (Chen et al. 2024, app. A3)")
class OVC(POAM):
    """OVC: noise-weighted projected terms, pivoted-Cholesky Z refined by gradient."""

    def __init__(self, input_dim: int | None = None, *, optimize_inducing: bool = True, **kwargs: Any):
        super().__init__(
            input_dim, **preset(type(self).__name__, kwargs, noise_weighted=True), optimize_inducing=optimize_inducing
        )


@register("ovc++", "OVC++: OVC without gradient steps on Z")
class OVCpp(OVC):
    """OVC++: OVC without the gradient steps on Z."""

    def __init__(self, input_dim: int | None = None, **kwargs: Any):
        super().__init__(input_dim, **preset("OVCpp", kwargs, optimize_inducing=False))
