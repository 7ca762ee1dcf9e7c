"""The scaled ARD RBF kernel s·exp(−½‖(x − x')/ℓ‖²) as one autograd node, for the hot loops of hyper-parameter fits.

gpytorch's ``ScaleKernel(RBFKernel)`` evaluates it as a dozen small operations forward and as many backward; an
L-BFGS fit of a WGPR member at M = 50 spends about 40 % of each bound evaluation there. :func:`scaled_rbf` computes
the same matrix with the gradient in both inputs, the length-scales and the output scale written out:
with a = x/ℓ, b = x'/ℓ and E = G ⊙ K for the incoming gradient G,

    ∂/∂a = E b − diag(E 1) a,   ∂/∂b = Eᵀ a − diag(Eᵀ 1) b,   ∂/∂x = (∂/∂a)/ℓ,   ∂/∂ℓ = −Σ (a ⊙ ∂/∂a + b ⊙ ∂/∂b)/ℓ,
    ∂/∂s = Σ E / s.

Values and gradients equal gpytorch's to round-off (tests/library/kernels/test_rbf.py), which stays the oracle.
"""

from __future__ import annotations

import gpytorch
import torch
from torch import Tensor


def rbf_parameters(kernel: gpytorch.kernels.Kernel) -> tuple[Tensor, Tensor] | None:
    """(ℓ, s) of a plain ``ScaleKernel(RBFKernel)`` on all input columns, without batch shape; None for any other
    kernel (which is then evaluated by gpytorch)."""
    if type(kernel) is not gpytorch.kernels.ScaleKernel or type(kernel.base_kernel) is not gpytorch.kernels.RBFKernel:
        return None
    base = kernel.base_kernel
    if kernel.active_dims is not None or base.active_dims is not None or len(kernel.batch_shape) > 0:
        return None
    return base.lengthscale, kernel.outputscale


def scaled_rbf(x1: Tensor, x2: Tensor, lengthscale: Tensor, outputscale: Tensor) -> Tensor:
    """s·exp(−½‖(x1_i − x2_j)/ℓ‖²) for rows x1 (n × D) and x2 (m × D), ℓ of shape (1, D) or (1, 1), s scalar."""
    return _ScaledRBF.apply(x1, x2, lengthscale, outputscale)


class _ScaledRBF(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x1: Tensor, x2: Tensor, lengthscale: Tensor, outputscale: Tensor) -> Tensor:
        a, b = x1 / lengthscale, x2 / lengthscale
        shift = a.mean(0)  # centred, as gpytorch's distance, so the expanded square loses no digits
        a0, b0 = a - shift, b - shift
        sq = (a0.pow(2).sum(1, keepdim=True) + b0.pow(2).sum(1) - 2 * a0 @ b0.mT).clamp_min_(0)
        K = outputscale * torch.exp(-0.5 * sq)
        ctx.save_for_backward(a, b, K, lengthscale, outputscale)
        return K

    @staticmethod
    def backward(ctx, grad: Tensor):
        a, b, K, lengthscale, outputscale = ctx.saved_tensors
        E = grad * K
        g_a = E @ b - E.sum(1, keepdim=True) * a
        g_b = E.mT @ a - E.sum(0).unsqueeze(1) * b
        g_lengthscale = -((a * g_a).sum(0) + (b * g_b).sum(0)) / lengthscale.reshape(-1)
        if lengthscale.numel() == 1:
            g_lengthscale = g_lengthscale.sum()
        return (
            g_a / lengthscale,
            g_b / lengthscale,
            g_lengthscale.reshape(lengthscale.shape),
            (E.sum() / outputscale).reshape(outputscale.shape),
        )
