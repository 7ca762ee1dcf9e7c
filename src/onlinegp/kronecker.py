"""Kronecker-structured grid algebra for SKI (Saatçi 2012, §5.2; Wilson & Nickisch 2015, §3.1).

On a product grid a separable kernel's K_UU is ⊗_d K_d, one small g_d × g_d matrix per dimension, in the row-major
order of the flattened grid (last dimension fastest, as ``torch.kron``). A product with ⊗_d F_d is a sequence of
mode products, O(k m Σ_d g_d) for k columns instead of O(k m²); the two-sided product Fᵀ A F of a dense m × m A costs
O(m² Σ_d g_d) instead of the 2m³ of two dense products. linear_operator's ``KroneckerProductLinearOperator`` does the
one-sided product the same way; the two-sided one, and the log-determinant gradient of :func:`grid_marginal` (from
the mode-wise partial traces of L_Q⁻¹, m³/3, instead of Q⁻¹ and the adjoint of the two-sided product), it does not
offer.

:func:`grid_marginal` is SKI's log marginal likelihood (Stanton et al. 2021, Eq. 13) on such a grid with an RBF or a
product Matérn-5/2 kernel,
as one autograd node whose backward is written out (its gradient in the length-scales, output scale, noise, A and c):
WISKI takes one Adam step per observation, and at m = 256 the autograd bookkeeping of a graph through the factors, their
Choleskies and the likelihood's scalars (32 nodes) cost about as much as the m³/3 factorisations.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from scipy.linalg import get_lapack_funcs
from torch import Tensor

from .linalg import CholeskyError, JitterLog, cholesky

LOG2PI = math.log(2 * math.pi)


def _mode(X: Tensor, M: Tensor, batch: int) -> Tensor:
    """M (g, g) times each of the ``batch`` consecutive (g, rest) blocks of X's storage: one grid mode of X's rows
    (``bmm`` of contiguous views, no transposed copy; a 2-D ``matmul`` would fold them into one tall-and-skinny product
    of copied data, several times slower). M must be contiguous: an expanded transposed M sends MKL's batched product
    to a path three times slower."""
    g = M.shape[0]
    if batch == 1:
        return M @ X.reshape(g, -1)
    return torch.bmm(M.expand(batch, g, g), X.reshape(batch, g, -1))


def _row_modes(X: Tensor, mats: list[Tensor]) -> Tensor:
    """(⊗_d M_d) X for X (m, k) and contiguous M_d: for each grid mode d, X viewed as (g_1 ⋯ g_{d-1}, g_d,
    g_{d+1} ⋯ g_D k) is multiplied by M_d batch by batch."""
    sizes = [M.shape[-1] for M in mats]
    out = X
    for d, M in enumerate(mats):
        out = _mode(out, M, math.prod(sizes[:d]))
    return out.reshape(X.shape)


def _mode_gram(X: np.ndarray, Y: np.ndarray, sizes: list[int], d: int) -> np.ndarray:
    """Σ X[r, (…, i, …)] Y[r, (…, j, …)] over the rows r and every grid index but the d-th, (g_d, g_d), for X and Y
    (k, m) (or (m,)) whose columns are grid points: each unfolded to (g_d, k m / g_d) (a view for the last mode, else
    one copy) and one product, which NumPy takes as a symmetric rank-k update (BLAS syrk, half the work) when X is Y;
    faster than batched products over the other indices, O(k m g_d)."""

    def unfold(Z: np.ndarray) -> np.ndarray:
        return Z.reshape(-1, sizes[d], math.prod(sizes[d + 1 :])).transpose(1, 0, 2).reshape(sizes[d], -1)

    X_d = unfold(X)
    return X_d @ (X_d if Y is X else unfold(Y)).T


def kron_matmul(factors: list[Tensor], B: Tensor, transpose: bool = False) -> Tensor:
    """(⊗_d F_d) B, or (⊗_d F_d)ᵀ B with ``transpose``, for B (m, k) or (m,): one mode product per dimension."""
    return _row_modes(B, [(F.mT if transpose else F).contiguous() for F in factors])


def kron_congruence(factors: list[Tensor], A: Tensor) -> Tensor:
    """Fᵀ A F for F = ⊗_d F_d and a symmetric (m, m) A, in O(m² Σ_d g_d): Fᵀ(FᵀA)ᵀ, i.e. the row modes of A, one
    transposed copy, the row modes again (equal to Fᵀ A F to round-off, as Aᵀ = A)."""
    Ft = [F.mT.contiguous() for F in factors]
    return _row_modes(_row_modes(A, Ft).mT.contiguous(), Ft)


def kron_dense(factors: list[Tensor]) -> Tensor:
    """⊗_d F_d as a dense matrix (for prediction caches and tests)."""
    out = factors[0]
    for F in factors[1:]:
        out = torch.kron(out, F)
    return out


class GridFactors:
    """The per-dimension factors of a product kernel on a product grid, K_UU = ⊗_d K_d: ``kind`` 'rbf', K_d =
    exp(-(u_i - u_j)² / 2ℓ_d²) (separable: the RBF itself), or 'matern52', K_d = (1 + z + z²/3) e^{-z} with z = √5
    |u_i - u_j| / ℓ_d (a product of 1-D Matérn-5/2 kernels, :class:`~onlinegp.kernels.product_matern.ProductMatern52Kernel`,
    what gpytorch's ``GridKernel`` makes of a Matérn base kernel; not the isotropic Matérn). The output scale is
    in the first factor and each factor gets ``jitter`` times its mean diagonal (the jitter of
    :func:`~onlinegp.posterior.kuu`, not differentiated). All axes are held in one padded batch (the shorter ones
    completed by an identity block) for one batched Cholesky; squared differences are exact and precomputed. One
    length-scale for every dimension is broadcast."""

    KINDS = ("rbf", "matern52")

    def __init__(self, axes: list[Tensor], jitter: float, kind: str = "rbf"):
        if kind not in self.KINDS:
            raise ValueError(f"kind must be one of {self.KINDS}, got {kind!r}")
        self.sizes = [int(a.shape[0]) for a in axes]
        g, dtype = max(self.sizes), axes[0].dtype
        padded = torch.zeros(len(axes), g, dtype=dtype)
        block = torch.zeros(len(axes), g, g, dtype=torch.bool)
        for d, axis in enumerate(axes):
            padded[d, : axis.shape[0]] = axis
            block[d, : axis.shape[0], : axis.shape[0]] = True
        self.half_sqdist = -0.5 * (padded.unsqueeze(-1) - padded.unsqueeze(-2)).square()
        self.dist = (padded.unsqueeze(-1) - padded.unsqueeze(-2)).abs()
        self.block = None if bool(block.all()) else block
        self.eye = torch.eye(g, dtype=dtype)
        self.jitter, self.kind = jitter, kind

    def _lengthscales(self, lengthscale: Tensor) -> Tensor:
        return lengthscale.reshape(-1, 1, 1).expand(len(self.sizes), 1, 1)

    def unit(self, lengthscale: Tensor) -> Tensor:
        """The unit-scale factors K_d for every axis d, (D, g, g), identity outside each axis's block."""
        ls = self._lengthscales(lengthscale)
        if self.kind == "rbf":
            K = (self.half_sqdist / ls.square()).exp()
        else:
            z = math.sqrt(5) * self.dist / ls
            K = (1 + z + z * z / 3) * (-z).exp()
        return K if self.block is None else torch.where(self.block, K, self.eye)

    def unit_grad(self, lengthscale: Tensor) -> Tensor:
        """∂K_d/∂ℓ_d for every axis, (D, g, g), zero outside each axis's block: K_d ⊙ (u_i − u_j)²/ℓ_d³ (RBF), or
        z²(1 + z) e^{-z} / 3ℓ_d (Matérn-5/2)."""
        ls = self._lengthscales(lengthscale)
        if self.kind == "rbf":
            grad = (self.half_sqdist / ls.square()).exp() * (-2 * self.half_sqdist) / ls**3
        else:
            z = math.sqrt(5) * self.dist / ls
            grad = z * z * (1 + z) * (-z).exp() / (3 * ls)
        return grad if self.block is None else torch.where(self.block, grad, torch.zeros_like(grad))

    def roots(self, lengthscale: Tensor, outputscale: Tensor, jitter_log: JitterLog | None = None) -> list[Tensor]:
        """Lower Cholesky roots C_d of the jittered factors (the output scale in the first), so that ⊗_d C_d C_dᵀ is
        K_UU up to the jitters: one batched Cholesky, factor by factor with escalated jitter only where one needs it."""
        K = self.unit(lengthscale)
        scale = torch.ones(len(self.sizes), 1, 1, dtype=K.dtype)
        scale[0] = outputscale.detach()
        K = torch.cat([K[:1] * outputscale, K[1:]]) + self.jitter * self.eye * scale
        L, info = torch.linalg.cholesky_ex(K)
        if bool(info.any()):
            L = torch.stack([cholesky(Kd, jitter_log) for Kd in K])
        return [Ld if g == Ld.shape[-1] else Ld[:g, :g] for Ld, g in zip(L.unbind(), self.sizes)]


def grid_marginal(
    grid: GridFactors,
    lengthscale: Tensor,
    outputscale: Tensor,
    noise: Tensor | None,
    A: Tensor,
    c: Tensor,
    yy: Tensor,
    logdet_noise: Tensor,
    n: int,
    jitter_log: JitterLog | None = None,
    support: Tensor | None = None,
) -> tuple[Tensor, Tensor, Tensor, list[Tensor]]:
    """SKI's log marginal likelihood on the grid (Stanton et al. 2021, Eq. 13; the Woodbury form of
    :mod:`onlinegp.models.wiski`), with L = ⊗_d C_d the roots of :meth:`GridFactors.roots`:

        log p(y) = −½ [s yy − bᵀQ⁻¹b + log|Q| + log|D| + n log 2π],   Q = I + s Lᵀ A L,   b = s Lᵀ c

    for a learnt noise variance σ² (precision s = 1/σ², log|D| = n log σ², A = WᵀW, c = Wᵀy, yy = yᵀy), or, with
    ``noise`` None, for fixed per-point noise already folded into A, c, yy and ``logdet_noise`` (s = 1). Returns
    log p(y), differentiable in the length-scales, output scale, noise, A and c, and (not differentiable) the
    Cholesky factor L_Q of Q, b and the roots, for the prediction caches.

    Forward: b and Lᵀ A L by mode products (O(m² Σ_d g_d)), one m × m Cholesky (SciPy's LAPACK in place) and
    z = Q⁻¹b. Backward: log|Q| and bᵀQ⁻¹b depend on each factor only through S_d = F_d F_dᵀ (F_1 = √s C_1, F_d = C_d
    else; log|I + A S| and bᵀQ⁻¹b = c'ᵀ(S⁻¹ + A)⁻¹c' with c' = √s c), and with E_d = I ⊗ F_d⁻¹ dF_d ⊗ I,
    d log|Q| = 2 tr((I − Q⁻¹) E_d) and d(bᵀQ⁻¹b) = 2 zᵀ E_d z (c' held fixed). Both need only the g_d × g_d partial
    traces P_d of I − Q⁻¹ and Z_d of z zᵀ over every grid index but the d-th: from J = L_Q⁻¹ (LAPACK trtri, m³/3) by
    one pass over J per factor, instead of Q⁻¹ (potri, 2m³/3) and the adjoint of both mode-product passes. The
    gradient of log p(y) in S_d is then ½ F_d⁻ᵀ(Z_d − P_d)F_d⁻¹, from which the length-scale's (through
    :meth:`GridFactors.unit_grad`), the output scale's and the noise's follow in closed form (the noise also through c', yy and
    log|D|). The gradient in A, only formed when A requires one, is −½(F Q⁻¹ Fᵀ + (F z)(F z)ᵀ) (potri, 2m³/3). When
    only a few entries of A depend on differentiable inputs (a learnt projection: the new points' 4^d interpolation
    indices), pass their indices as ``support``: the gradient is then formed on support × support only, from V = L_Q⁻¹
    Fᵀ E_S (E_S the support's unit columns) as VᵀV, O(m² |S|), and is zero elsewhere."""
    return _GridMarginal.apply(lengthscale, outputscale, noise, A, c, yy, logdet_noise, grid, n, jitter_log, support)


def _lapack(array: np.ndarray, *names: str) -> list:
    """LAPACK routines of ``array``'s type (d- or s-prefixed), from SciPy."""
    return get_lapack_funcs(names, (array,))


class _GridMarginal(torch.autograd.Function):
    """:func:`grid_marginal`. L_Q lives in C order, i.e. Fortran order's upper triangle U = L_Qᵀ, where LAPACK reads
    it without a copy."""

    @staticmethod
    def forward(ctx, lengthscale, outputscale, noise, A, c, yy, logdet_noise, grid, n, jitter_log, support):
        roots = grid.roots(lengthscale, outputscale, jitter_log)
        s = None if noise is None else 1.0 / noise
        F = roots if s is None else [roots[0] * s.sqrt(), *roots[1:]]
        b = kron_matmul(F, c if s is None else c * s.sqrt(), transpose=True)
        LQ = kron_congruence(F, A)
        LQ.diagonal().add_(1.0)
        U = LQ.numpy().T  # Fortran order: its upper triangle is Q's lower one
        potrf, potrs = _lapack(U, "potrf", "potrs")
        _, info = potrf(U, lower=0, overwrite_a=1, clean=1)
        if info != 0:
            raise CholeskyError(
                f"I + Lᵀ A L is not positive definite (LAPACK potrf info {info}): A must be positive semi-definite"
            )
        z = torch.from_numpy(potrs(U, b.numpy(), lower=0)[0])
        logdet, quad = 2 * LQ.diagonal().log().sum(), b @ z
        if s is None:
            mll = -0.5 * (yy - quad + logdet + logdet_noise + n * LOG2PI)
        else:
            mll = -0.5 * (s * yy - quad + logdet - n * s.log() + n * LOG2PI)
        ctx.save_for_backward(lengthscale, outputscale, s, LQ, z, quad, yy, *F)
        ctx.grid, ctx.n, ctx.support = grid, n, support
        ctx.mark_non_differentiable(LQ, b, *roots)
        return mll, LQ, b, *roots

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g_mll, *_):  # noqa: PLR0915 - every input's gradient in one pass over shared solves
        lengthscale, outputscale, s, LQ, z, quad, yy, *F = ctx.saved_tensors
        grid, n, sizes, m = ctx.grid, ctx.n, ctx.grid.sizes, LQ.shape[0]
        need = ctx.needs_input_grad
        g = float(g_mll)
        g_ls = g_os = g_noise = g_A = g_c = g_yy = g_logdet_noise = None
        if need[0] or need[1] or need[2]:
            U = LQ.numpy().T
            (trtri,) = _lapack(U, "trtri")
            J = trtri(U, lower=0)[0].T  # U⁻¹ = (L_Q⁻¹)ᵀ in Fortran order: L_Q⁻¹ in C order
            z_ = z.numpy()
            unit, unit_grad = grid.unit(lengthscale.detach()), grid.unit_grad(lengthscale.detach())
            g_lengthscale = torch.zeros(len(sizes), dtype=LQ.dtype)
            for d, (Fd, gd) in enumerate(zip(F, sizes)):
                # Z_d − P_d, the partial traces of z zᵀ and of I − Q⁻¹ = I − JᵀJ
                R = torch.from_numpy(_mode_gram(z_, z_, sizes, d) + _mode_gram(J, J, sizes, d))
                R.diagonal().sub_(m // gd)
                half = torch.linalg.solve_triangular(Fd.mT, R, upper=True)  # F_d⁻ᵀ R, then (F_d⁻ᵀ R) F_d⁻¹ below
                G = 0.5 * torch.linalg.solve_triangular(Fd, half, upper=False, left=False)  # ∂ log p / ∂S_d
                K_unit = unit[d, :gd, :gd]
                weight = 1.0 if d else float(outputscale) * (1.0 if s is None else float(s))
                g_lengthscale[d] = weight * (G * unit_grad[d, :gd, :gd]).sum()
                if d == 0:
                    g_scale = (G * K_unit).sum() * (1.0 if s is None else float(s))
                    g_tr = 0.5 * R.diagonal().sum()  # tr(G S_1) = ½ tr(R): ∂ log p / ∂ log s through F_1
            if lengthscale.numel() == 1:  # one length-scale for every dimension
                g_lengthscale = g_lengthscale.sum()
            g_ls = (g * g_lengthscale).reshape(lengthscale.shape) if need[0] else None
            g_os = (g * g_scale).reshape(outputscale.shape) if need[1] else None
            if need[2]:  # s = 1/σ²: ∂/∂s through S_1, c' = √s c (∂(bᵀQ⁻¹b)/∂s = bᵀQ⁻¹b / s), s yy and −n log s
                g_s = (g_tr + 0.5 * quad) / s - 0.5 * yy + 0.5 * n / s
                g_noise = -g * g_s * s * s
        Fz = kron_matmul(F, z) if need[3] or need[4] else None
        if need[3] and ctx.support is not None and 2 * ctx.support.numel() < m:
            S = ctx.support
            E = torch.zeros(m, S.numel(), dtype=LQ.dtype)
            E[S, torch.arange(S.numel())] = 1.0
            V = torch.linalg.solve_triangular(LQ, kron_matmul(F, E, transpose=True), upper=False)
            block = (V.mT @ V).addr_(Fz[S], Fz[S]).mul_(-0.5 * g)
            g_A = torch.zeros(m, m, dtype=LQ.dtype)
            g_A[S.unsqueeze(-1), S] = block
        elif need[3]:
            U = LQ.numpy().T
            (potri,) = _lapack(U, "potri")
            half = torch.from_numpy(potri(U, lower=0)[0].T)  # Q⁻¹'s lower triangle, zeros above
            Qinv = half + half.mT
            Qinv.diagonal().mul_(0.5)
            g_A = kron_congruence([Fd.mT for Fd in F], Qinv).addr_(Fz, Fz).mul_(-0.5 * g)
        if need[4]:
            g_c = g * Fz if s is None else g * s.sqrt() * Fz
        if need[5]:
            g_yy = -0.5 * g * (1.0 if s is None else s)
        if need[6] and s is None:
            g_logdet_noise = torch.full_like(yy, -0.5 * g)
        return g_ls, g_os, g_noise, g_A, g_c, g_yy, g_logdet_noise, None, None, None, None
