"""Closed-form 2-Wasserstein distance between Gaussians (Kepler et al. 2021, §III-A; Panaretos & Zemel 2019).

    W₂²(N(μ₁, Σ₁), N(μ₂, Σ₂)) = ‖μ₁ − μ₂‖² + tr(Σ₁ + Σ₂ − 2 (Σ₂^½ Σ₁ Σ₂^½)^½)

computed with symmetric eigendecompositions only: Σ₂^½ = V diag(√λ) Vᵀ from ``eigh`` of Σ₂, then the trace of the
inner square root is Σ √λᵢ(Σ₂^½ Σ₁ Σ₂^½). Tiny negative eigenvalues from round-off are clamped to zero (nearly
singular covariances are the norm here: a sparse GP's covariance of f at N ≫ M inputs is close to rank M), and the
result is clamped at zero. Everything broadcasts over leading batch dimensions.
"""

from __future__ import annotations

import torch
from torch import Tensor


def _symmetrize(A: Tensor) -> Tensor:
    return 0.5 * (A + A.mT)


def psd_sqrt(A: Tensor) -> Tensor:
    """Symmetric square root of a (batch of) symmetric PSD matrix by ``eigh``, negative eigenvalues clamped to 0."""
    lam, V = torch.linalg.eigh(_symmetrize(A))
    return (V * lam.clamp_min(0.0).sqrt().unsqueeze(-2)) @ V.mT


def bures_trace(S1: Tensor, S2: Tensor) -> Tensor:
    """tr((S₂^½ S₁ S₂^½)^½), the cross term of the Bures metric (symmetric in S₁, S₂)."""
    R = psd_sqrt(S2)
    lam = torch.linalg.eigvalsh(_symmetrize(R @ S1 @ R))
    return lam.clamp_min(0.0).sqrt().sum(-1)


def w2_squared(mean1: Tensor, cov1: Tensor, mean2: Tensor, cov2: Tensor) -> Tensor:
    """Squared 2-Wasserstein distance between N(mean1, cov1) and N(mean2, cov2) (batched over leading dims).

    ``mean*``: (..., N); ``cov*``: (..., N, N), symmetric positive semi-definite.
    """
    if mean1.shape != mean2.shape or cov1.shape != cov2.shape or cov1.shape[-2:] != (mean1.shape[-1],) * 2:
        raise ValueError(
            f"w2_squared needs means (..., N) and covariances (..., N, N) of equal shapes, got "
            f"{tuple(mean1.shape)}, {tuple(cov1.shape)}, {tuple(mean2.shape)}, {tuple(cov2.shape)}"
        )
    trace = cov1.diagonal(dim1=-2, dim2=-1).sum(-1) + cov2.diagonal(dim1=-2, dim2=-1).sum(-1)
    value = (mean1 - mean2).pow(2).sum(-1) + trace - 2.0 * bures_trace(cov1, cov2)
    return value.clamp_min(0.0)
