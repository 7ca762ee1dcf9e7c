"""OVC and OVC++: Online Variational Conditioning (Maddox et al. 2021) as configured in Chen et al. 2024, appendix A3.

Both store noise-weighted terms σ⁻² K_uf y and σ⁻² K_uf K_fu with the σ² of the batch they came from, project them
onto new inducing inputs like POAM, and train hyper-parameters with POAM's M-step. OVC also moves Z by gradient
after its pivoted-Cholesky start; OVC++ does not.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..base import preset
from ..posterior import VariationalQ
from .poam import POAM
from .registry import register

Z_STEPS = ("separate", "shared")


@register("ovc", "OVC: noise-weighted projected terms, Z refined by gradient (Chen et al. 2024, app. A3)")
class OVC(POAM):
    """OVC: noise-weighted projected terms, pivoted-Cholesky Z refined by gradient.

    Chen et al. 2024 say only that OVC "still optimizes the inducing inputs after initializing them with PCD"
    (app. A4), jointly with the hyper-parameters (§V-B). ``z_steps`` says how:

    - ``'separate'`` (default, our reading of the text): each update's T steps move Z with an Adam of its own,
      started afresh; the stored terms are then projected onto the moved Z (Eqs. 35-36) and q(u) recomputed there.
    - ``'shared'`` (what the paper's public implementation does): Z is one more parameter of the persistent
      hyper-parameter Adam (at ``training.lr_variational``, None: at ``training.lr``), whose moments stay with Z's
      rows across updates; the terms stay at the Z of the E-step (the next E-step projects them from there) and q(u)
      keeps its mean and covariance, read at the moved Z. The moments damp Z's steps once its early gradients have
      passed, so Z settles; a fresh Adam's first steps are the rate per coordinate whatever the gradient, and every
      re-projection loses information.
      Pre-training steps (not in the paper's code) leave Z in place. On the paper's Env2 (five missions) it takes
      the averaged SMSE / MSLL from 0.118 / -0.905 to 0.106 / -1.056; the paper's code gives 0.103 / -1.085
      (``benchmarks/perf/results/ovc_reference.md``).
    """

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        optimize_inducing: bool = True,
        z_steps: str = "separate",
        **kwargs: Any,
    ):
        if z_steps not in Z_STEPS:
            raise ValueError(f"z_steps must be one of {Z_STEPS}, got {z_steps!r}")
        super().__init__(
            input_dim, **preset(type(self).__name__, kwargs, noise_weighted=True), optimize_inducing=optimize_inducing
        )
        if z_steps == "shared" and self.variational != "analytic":
            raise ValueError("z_steps='shared' keeps the analytic q(u) at the moved Z: use variational='analytic'")
        self.z_steps = z_steps

    def options(self) -> dict[str, Any]:
        return {**super().options(), "z_steps": self.z_steps}

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        if self.z_steps == "shared":  # Z's slot in the hyper-parameter Adam, resized to M at each M-step
            slot = torch.zeros(0, input_dim, dtype=self.dtype, requires_grad=True)
            self.optimizer.add_param_group({"params": [slot], "lr": self.training.rate("variational")})

    def _shared_z(self) -> Tensor:
        """Z's slot in ``self.optimizer``, holding the current Z. When M changed, the Adam moments of the first
        rows are kept and new rows start at zero (the paper's code keeps M rows throughout)."""
        group = self.optimizer.param_groups[-1]
        slot = group["params"][0]
        if slot.shape == self.Z.shape:
            with torch.no_grad():
                slot.copy_(self.Z)
            return slot
        new = self.Z.clone().requires_grad_(True)
        state = self.optimizer.state.pop(slot, None)
        if state:
            for key, moments in state.items():
                if moments.dim() == 2:
                    kept = torch.zeros_like(new)
                    rows = min(new.shape[0], moments.shape[0])
                    kept[:rows] = moments[:rows]
                    state[key] = kept
            self.optimizer.state[new] = state
        group["params"] = [new]
        return new

    def _m_step(self, optimizer: torch.optim.Optimizer, num_steps: int, schedules: tuple = ()) -> float | None:
        if self.z_steps == "separate" or not self.optimize_inducing or num_steps == 0:
            return super()._m_step(optimizer, num_steps, schedules)
        q, Z = self.q, self._shared_z()
        # POAM's M-step on a Z that requires grad and is stepped by ``self.optimizer``, without a copy of its own
        self.Z, self.optimize_inducing = Z, False
        try:
            value = super()._m_step(optimizer, num_steps, schedules)
        finally:
            self.Z, self.optimize_inducing = Z.detach().clone(), True
        self.q = VariationalQ(self.Z, q.mean, q.root, q.logdet)
        return value


@register("ovc++", "OVC++: OVC without gradient steps on Z")
class OVCpp(OVC):
    """OVC++: OVC without the gradient steps on Z."""

    def __init__(self, input_dim: int | None = None, **kwargs: Any):
        super().__init__(input_dim, **preset("OVCpp", kwargs, optimize_inducing=False))
