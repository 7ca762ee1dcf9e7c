"""Kronecker-structured grid algebra for SKI (Saatçi 2012, §5.2; Wilson & Nickisch 2015, §3.1).

On a product grid a separable kernel's K_UU is ⊗_d K_d, one small g_d × g_d matrix per dimension, in the row-major
order of the flattened grid (last dimension fastest, as ``torch.kron``). A product with ⊗_d F_d is a sequence of
mode products, O(k m Σ_d g_d) for k columns instead of O(k m²); the two-sided product Fᵀ A F of a dense m × m A costs
O(m² Σ_d g_d) instead of the 2m³ of two dense products. linear_operator's ``KroneckerProductLinearOperator`` does the
one-sided product the same way; the two-sided one, and the log-determinant gradient below, it does not offer.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .linalg import JitterLog, cholesky


def _row_modes(X: Tensor, mats: list[Tensor]) -> Tensor:
    """(⊗_d M_d) X for X (m, k): for each grid mode d, X viewed as (g_1 ⋯ g_{d-1}, g_d, g_{d+1} ⋯ g_D k) is multiplied
    by M_d batch by batch (``bmm``: contiguous views, no transposed copy; a 2-D ``matmul`` would fold them into one
    tall-and-skinny product of copied data, several times slower)."""
    sizes = [M.shape[-1] for M in mats]
    shape = X.shape
    for d, M in enumerate(mats):
        batch = math.prod(sizes[:d])
        X = torch.bmm(M.expand(batch, -1, -1), X.reshape(batch, sizes[d], -1))
    return X.reshape(shape)


def kron_matmul(factors: list[Tensor], B: Tensor, transpose: bool = False) -> Tensor:
    """(⊗_d F_d) B, or (⊗_d F_d)ᵀ B with ``transpose``, for B (m, k) or (m,): one mode product per dimension."""
    return _row_modes(B, [F.mT if transpose else F for F in factors])


def kron_congruence(factors: list[Tensor], A: Tensor) -> Tensor:
    """Fᵀ A F for F = ⊗_d F_d and a symmetric (m, m) A, in O(m² Σ_d g_d): Fᵀ(FᵀA)ᵀ, i.e. the row modes of A, one
    transposed copy, the row modes again (equal to Fᵀ A F to round-off, as Aᵀ = A).

    For a constant A the gradient in the factors is taken through the second application alone and doubled: with G
    the symmetric gradient of a symmetric function of Fᵀ A F, both applications contribute the same, A F G. That halves
    the backward pass. Only differentiate symmetric functions of the result (the log-determinant and quadratic forms
    of :func:`logdet_quad` are) when A is constant."""
    Ft = [F.mT for F in factors]
    if A.requires_grad:
        return _row_modes(_row_modes(A, Ft).mT.contiguous(), Ft)
    with torch.no_grad():
        AF = _row_modes(A, Ft).mT.contiguous()
    return _row_modes(AF, [_DoubleGrad.apply(F) for F in Ft])


class _DoubleGrad(torch.autograd.Function):
    """The identity, with twice the gradient (one application of a factor standing for two equal ones)."""

    @staticmethod
    def forward(ctx, x: Tensor) -> Tensor:
        return x.clone()

    @staticmethod
    def backward(ctx, g: Tensor) -> Tensor:
        return 2 * g


def kron_dense(factors: list[Tensor]) -> Tensor:
    """⊗_d F_d as a dense matrix (for prediction caches and tests)."""
    out = factors[0]
    for F in factors[1:]:
        out = torch.kron(out, F)
    return out


class _LogdetQuad(torch.autograd.Function):
    """(log|I + S|, bᵀ(I + S)⁻¹b) from a given Cholesky factor L_Q of Q = I + S; the backward pass is
    ∂/∂S = g₁ Q⁻¹ − g₂ z zᵀ with z = Q⁻¹b and Q⁻¹ from L_Q (LAPACK potri, 2/3 m³), instead of back-propagating
    through the factorisation (about 2 m³) and the identity's addition (two more passes over m × m)."""

    @staticmethod
    def forward(ctx, S: Tensor, b: Tensor, LQ: Tensor) -> tuple[Tensor, Tensor]:
        z = torch.cholesky_solve(b.unsqueeze(-1), LQ).squeeze(-1)
        ctx.save_for_backward(LQ, z)
        return 2 * LQ.diagonal().log().sum(), b @ z

    @staticmethod
    def backward(ctx, g_logdet: Tensor, g_quad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        LQ, z = ctx.saved_tensors
        gS = gb = None
        if ctx.needs_input_grad[0]:
            gS = torch.cholesky_inverse(LQ).mul_(g_logdet).addr_(z, z, alpha=-g_quad)
        if ctx.needs_input_grad[1]:
            gb = 2 * g_quad * z
        return gS, gb, None


def logdet_quad(S: Tensor, b: Tensor, jitter_log: JitterLog | None = None) -> tuple[Tensor, Tensor, Tensor]:
    """log|Q|, bᵀQ⁻¹b (differentiable in S and b) and the lower Cholesky factor L_Q of Q = I + S for a symmetric PSD
    ``S`` (only its lower triangle is read; jitter escalated and recorded as in :func:`~onlinegp.linalg.cholesky`,
    the results are then those of Q + jI)."""
    Q = S.detach().clone()
    Q.diagonal().add_(1.0)
    LQ = cholesky(Q, jitter_log)
    logdet, quad = _LogdetQuad.apply(S, b, LQ)
    return logdet, quad, LQ
