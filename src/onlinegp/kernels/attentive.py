"""The Attentive Kernel (Chen et al., RSS 2022; POAM paper 000 §III-B).

k(x, x') = (w̄ᵀ w̄') · Σ_m w̄_m w̄'_m exp(-‖x - x'‖² / 2ℓ_m²), with fixed length-scales ℓ_m spaced linearly in
[ℓ_min, ℓ_max] and w̄ = w_θ(x) / ‖w_θ(x)‖ the normalised output of a small MLP (D→10→10→10, tanh, softmax).
The amplitude α comes from wrapping it in ``gpytorch.kernels.ScaleKernel``. Since ‖w̄‖ = 1, k(x, x) = 1.
"""

from __future__ import annotations

import torch
from gpytorch.kernels import Kernel
from torch import Tensor, nn


class AttentiveKernel(Kernel):
    """Non-stationary kernel mixing fixed-length-scale RBFs with input-dependent attention weights.

    Args:
        input_dim: D, number of input dimensions (inputs are expected scaled to about [-1, 1]).
        num_lengthscales: M, number of base RBF length-scales (default 10).
        lengthscale_bounds: (ℓ_min, ℓ_max) in scaled units (default (0.05, 0.5)).
        hidden: width of the attention network's hidden layers (default 10).
    """

    has_lengthscale = False

    def __init__(self, input_dim: int, num_lengthscales: int = 10, lengthscale_bounds: tuple[float, float] = (0.05, 0.5),
                 hidden: int = 10, **kwargs):
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.register_buffer("lengthscales", torch.linspace(*lengthscale_bounds, num_lengthscales))
        self.attention = nn.Sequential(
            nn.Linear(input_dim, hidden), nn.Tanh(),
            nn.Linear(hidden, hidden), nn.Tanh(),
            nn.Linear(hidden, num_lengthscales), nn.Softmax(dim=-1),
        )

    def weights(self, x: Tensor) -> Tensor:
        """Normalised attention weights w̄(x), shape (..., N, M), unit Euclidean norm per row."""
        w = self.attention(x)
        return w / w.norm(dim=-1, keepdim=True)

    def lengthscale_at(self, x: Tensor) -> Tensor:
        """Attention-weighted length-scale Σ_m w̄_m ℓ_m / Σ_m w̄_m at each input (what length-scale maps show)."""
        w = self.weights(x)
        return (w * self.lengthscales.to(w)).sum(-1) / w.sum(-1)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        w1 = self.weights(x1)
        if diag:
            return torch.ones(x1.shape[:-1], dtype=x1.dtype, device=x1.device)
        w2 = w1 if x2 is x1 else self.weights(x2)
        sq = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).pow(2).sum(-1) if x1.shape[-1] <= 3 else torch.cdist(x1, x2).pow(2)
        ls = self.lengthscales.to(x1)
        mixture = torch.zeros_like(sq)
        for m in range(ls.shape[0]):  # fused sum over the (few) base kernels: no N x N' x M tensor
            mixture = mixture + (w1[..., :, m : m + 1] * w2[..., None, :, m]) * torch.exp(sq * (-0.5 / ls[m] ** 2))
        return (w1 @ w2.mT) * mixture
