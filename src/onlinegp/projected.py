"""POAM's data-dependent terms, projected onto each new set of inducing inputs (Chen et al. 2024, Eqs. 16-21).

All data seen so far enter POAM's variational E-step only through a = Σ K_zX y and B = Σ K_zX K_Xz at the inducing
inputs Z. When Z changes to Z', the terms are re-expressed through P = K'_zz⁻¹ K_zz' (K' under the θ the terms
were formed with, K_zz' under the current θ): a ← Pᵀa, B ← PᵀBP. With ``noise_weighted`` (OVC; Maddox et al.
2021) every batch's terms carry the σ⁻² of their batch, otherwise the current σ⁻² weights them all.
"""

from __future__ import annotations

from dataclasses import dataclass

import gpytorch
import torch
from torch import Tensor

from .kernels import dense
from .linalg import JitterLog, trisolve
from .posterior import InducingPosterior, kuv, project_terms


def kernel_theta(kernel: gpytorch.kernels.Kernel) -> Tensor:
    """All of a kernel's raw parameters as one vector (to tell whether θ moved)."""
    return torch.cat([p.detach().reshape(-1) for p in kernel.parameters()])


def batch_terms(
    kernel: gpytorch.kernels.Kernel, Z: Tensor, X: Tensor, y: Tensor, weight: Tensor | float = 1.0
) -> tuple[Tensor, Tensor]:
    """(weight · K_zX y, weight · K_zX K_Xz) of one batch."""
    Kzx = dense(kernel, Z, X)
    return weight * (Kzx @ y), weight * (Kzx @ Kzx.mT)


@dataclass
class ProjectedTerms:
    """a (M,) and B (M, M) at inducing inputs ``Z``, formed under kernel parameters ``theta`` with ``Lu`` =
    chol K_zz(θ). ``noise_weighted``: the terms already carry σ⁻² (OVC), else the current σ⁻² applies."""

    Z: Tensor
    a: Tensor
    B: Tensor
    Lu: Tensor
    theta: Tensor
    noise_weighted: bool = False

    @torch.no_grad()
    def project(self, kernel: gpytorch.kernels.Kernel, Z_new: Tensor) -> tuple[Tensor, Tensor]:
        """(Pᵀa, PᵀBP) at ``Z_new``. While θ has not moved since the terms were formed, kept inducing inputs carry
        their terms over exactly (:func:`~onlinegp.posterior.project_terms`)."""
        if torch.equal(self.theta, kernel_theta(kernel)):
            return project_terms(kernel, self.Z, Z_new, self.Lu, self.a, self.B)
        P = trisolve(self.Lu, trisolve(self.Lu, kuv(kernel, self.Z, Z_new)), transpose=True)
        B = P.mT @ self.B @ P
        return P.mT @ self.a, 0.5 * (B + B.mT)

    def precision_weight(self, noise: Tensor) -> Tensor | float:
        """The factor that turns the stored terms into precision-weighted ones (σ⁻², or 1 when already weighted)."""
        return 1.0 if self.noise_weighted else 1.0 / noise

    @torch.no_grad()
    def posterior(
        self, kernel: gpytorch.kernels.Kernel, noise: Tensor, jitter_log: JitterLog | None = None
    ) -> InducingPosterior:
        """The optimal q(u) the terms define (Chen et al. 2024, Eqs. 7-8), in root form."""
        prec = self.precision_weight(noise)
        return InducingPosterior.from_terms(kernel, self.Z, prec * self.a, prec * self.B, jitter_log, Lu=self.Lu)
