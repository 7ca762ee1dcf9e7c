"""Shared test oracles: batch SGPR (Titsias 2009) with explicit matrices, the Gaussian log density with autograd
through its Cholesky factor, and a Cholesky solve. (The seeded 2-D toy stream is :func:`onlinegp.testing.toy`.)"""

import torch
from torch import Tensor

from onlinegp.kernels import dense, diagonal
from onlinegp.linalg import JitterLog, cholesky, trisolve
from onlinegp.objectives import LOG2PI
from onlinegp.posterior import kuu

D = torch.float64


def dense_sgpr(kernel, noise, Z, X, y, Xs):
    """Σ = (K_uu + σ⁻² K_uf K_fu)⁻¹; returns q(u)'s mean and covariance and the predictive mean and variance at Xs."""
    Kuu, Kuf, Ksu = kuu(kernel, Z), dense(kernel, Z, X), dense(kernel, Xs, Z)
    Sigma = torch.linalg.inv(Kuu + Kuf @ Kuf.T / noise)
    mean = Ksu @ Sigma @ Kuf @ y / noise
    var = diagonal(kernel, Xs) - (Ksu @ torch.linalg.solve(Kuu, Ksu.T)).diagonal() + (Ksu @ Sigma @ Ksu.T).diagonal()
    return Kuu @ Sigma @ Kuf @ y / noise, Kuu @ Sigma @ Kuu, mean, var


def gaussian_log_density_autograd(K: Tensor, y: Tensor, jitter_log: JitterLog | None = None) -> Tensor:
    """log N(y | 0, K) with autograd through the Cholesky factorisation: the slow oracle of GaussianLogDensity."""
    L = cholesky(K, jitter_log)
    a = trisolve(L, y)
    return -0.5 * (a @ a) - L.diagonal().log().sum() - 0.5 * K.shape[0] * LOG2PI


def cho_solve(L: Tensor, B: Tensor) -> Tensor:
    """Solve ``(L L^T) X = B`` by two triangular solves."""
    return trisolve(L, trisolve(L, B), transpose=True)
