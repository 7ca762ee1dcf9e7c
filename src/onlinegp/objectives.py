"""Objectives: the collapsed SGPR bound, the mini-batch uncollapsed SVGP ELBO, the exact marginal likelihood.

All are differentiable in the kernel and likelihood parameters and return the total (not per-datum) value
unless stated otherwise.
"""

from __future__ import annotations

import math

import gpytorch
import torch
from torch import Tensor

from .kernels import dense, diagonal
from .linalg import JitterLog, cholesky, trisolve
from .posterior import kuu

LOG2PI = math.log(2 * math.pi)


def sgpr_bound(kernel: gpytorch.kernels.Kernel, noise: Tensor, Z: Tensor, X: Tensor, y: Tensor,
               jitter_log: JitterLog | None = None) -> Tensor:
    """Titsias (2009) collapsed bound log N(y | 0, Q_ff + σ²I) − tr(K_ff − Q_ff) / 2σ²."""
    n = X.shape[0]
    Lu = cholesky(kuu(kernel, Z), jitter_log)
    A = trisolve(Lu, dense(kernel, Z, X)) / noise.sqrt()
    LB = cholesky(torch.eye(Z.shape[0], dtype=X.dtype) + A @ A.mT, jitter_log)
    c = trisolve(LB, A @ y) / noise.sqrt()
    trace = diagonal(kernel, X).sum() / noise - A.pow(2).sum()
    return (-0.5 * n * (LOG2PI + noise.log()) - LB.diagonal().log().sum() - 0.5 * (y @ y) / noise
            + 0.5 * (c @ c) - 0.5 * trace)


def gaussian_kl(mean: Tensor, root: Tensor, logdet_cov: Tensor, L_prior: Tensor) -> Tensor:
    """KL(N(m, R Rᵀ) || N(0, L Lᵀ)) with the prior given by its Cholesky root."""
    a = trisolve(L_prior, root)
    b = trisolve(L_prior, mean)
    logdet_prior = 2 * L_prior.diagonal().log().sum()
    return 0.5 * (a.pow(2).sum() + b @ b - mean.shape[0] + logdet_prior - logdet_cov)


def expected_log_lik(y: Tensor, f_mean: Tensor, f_var: Tensor, noise: Tensor) -> Tensor:
    """Σ_n E_{N(f; μ_n, v_n)} log N(y_n | f, σ²)."""
    return (-0.5 * (LOG2PI + noise.log()) - 0.5 * ((y - f_mean).pow(2) + f_var) / noise).sum()


def svgp_elbo(kernel: gpytorch.kernels.Kernel, noise: Tensor, Z: Tensor, q_mean: Tensor, q_root: Tensor,
              q_logdet: Tensor, xb: Tensor, yb: Tensor, num_data: int, jitter_log: JitterLog | None = None,
              Lu: Tensor | None = None) -> Tensor:
    """Uncollapsed ELBO (POAM paper Eq. 10; Hensman et al. 2013), unwhitened, per datum.

    (N/B) Σ_b E_q[log p(y_b | f_b)] − KL(q(u) || p(u)), divided by N (as gpytorch's VariationalELBO).
    ``q(u) = N(q_mean, q_root q_rootᵀ)`` is held fixed; gradients reach the kernel, the noise and (if it
    requires grad) Z.
    """
    if Lu is None:
        Lu = cholesky(kuu(kernel, Z), jitter_log)
    Kub = dense(kernel, Z, xb)
    w = trisolve(Lu, Kub)                          # L_u⁻¹ K_ub
    alpha = trisolve(Lu, w, transpose=True)        # K_uu⁻¹ K_ub
    f_mean = alpha.mT @ q_mean
    f_var = diagonal(kernel, xb) - w.pow(2).sum(0) + (q_root.mT @ alpha).pow(2).sum(0)
    ell = expected_log_lik(yb, f_mean, f_var.clamp_min(1e-12), noise) * (num_data / xb.shape[0])
    return (ell - gaussian_kl(q_mean, q_root, q_logdet, Lu)) / num_data


def exact_mll(kernel: gpytorch.kernels.Kernel, noise: Tensor, X: Tensor, y: Tensor,
              jitter_log: JitterLog | None = None) -> Tensor:
    """log N(y | 0, K + σ²I)."""
    K = dense(kernel, X) + noise * torch.eye(X.shape[0], dtype=X.dtype)
    L = cholesky(K, jitter_log)
    a = trisolve(L, y)
    return -0.5 * (a @ a) - L.diagonal().log().sum() - 0.5 * X.shape[0] * LOG2PI
