"""A product of 1-D Matérn-5/2 kernels with one length-scale: what gpytorch's grid kernels (``GridKernel``,
``GridInterpolationKernel``) make of a Matérn base kernel, dimension by dimension, and so the kernel Stanton et al.
2021's released code ran for WISKI in Bayesian optimisation. Separable, so WISKI's Kronecker algebra applies
(:class:`onlinegp.kronecker.GridFactors`, kind 'matern52')."""

from __future__ import annotations

import math

import gpytorch
from torch import Tensor


class ProductMatern52Kernel(gpytorch.kernels.Kernel):
    """k(x, x') = ∏_d (1 + z_d + z_d²/3) e^{-z_d}, z_d = √5 |x_d − x'_d| / ℓ (not the isotropic Matérn, whose z is the
    Euclidean distance)."""

    has_lengthscale = True

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        diff = (x1 - x2) if diag else (x1.unsqueeze(-2) - x2.unsqueeze(-3))
        z = math.sqrt(5) * diff.abs() / self.lengthscale.reshape(-1)
        return ((1 + z + z * z / 3) * (-z).exp()).prod(-1)
