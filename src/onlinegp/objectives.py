"""Objectives: the collapsed SGPR bound, the mini-batch uncollapsed SVGP ELBO, the exact marginal likelihood,
the online (streaming) collapsed bound of Bui et al. (2017), and the online upper bound of
Pescador-Barrios et al. (2024), with the lower bound for every prefix of a nested inducing set, as VIPS needs.

All are differentiable in the kernel and likelihood parameters and return the total (not per-datum) value
unless stated otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import gpytorch
import torch
from torch import Tensor

from .kernels import dense, diagonal
from .kernels.rbf import rbf_parameters, scaled_rbf
from .linalg import JitterLog, cholesky, trisolve
from .posterior import KUU_JITTER, InducingPosterior, VariationalQ, kuu, kuv, with_jitter

LOG2PI = math.log(2 * math.pi)


def log_prior(module: torch.nn.Module) -> Tensor | float:
    """Σ log p(θ) over the priors registered on a gpytorch module and its children (gpytorch's ``named_priors``;
    e.g. :func:`~onlinegp.kernels.default_lengthscale_prior`); 0 when there are none. Each method adds it once to
    the objective of each hyper-parameter fit, whose data term approximates log p(y_1:t | θ) of all data seen."""
    total: Tensor | float = 0.0
    for _, owner, prior, closure, _ in module.named_priors():
        total = total + prior.log_prob(closure(owner)).sum()
    return total


def sgpr_bound(
    kernel: gpytorch.kernels.Kernel, noise: Tensor, Z: Tensor, X: Tensor, y: Tensor, jitter_log: JitterLog | None = None
) -> Tensor:
    """Titsias (2009) collapsed bound log N(y | 0, Q_ff + σ²I) − tr(K_ff − Q_ff) / 2σ²."""
    n = X.shape[0]
    Lu = cholesky(kuu(kernel, Z), jitter_log)
    A = trisolve(Lu, dense(kernel, Z, X)) / noise.sqrt()
    LB = cholesky(torch.eye(Z.shape[0], dtype=X.dtype) + A @ A.mT, jitter_log)
    c = trisolve(LB, A @ y) / noise.sqrt()
    trace = diagonal(kernel, X).sum() / noise - A.pow(2).sum()
    return (
        -0.5 * n * (LOG2PI + noise.log())
        - LB.diagonal().log().sum()
        - 0.5 * (y @ y) / noise
        + 0.5 * (c @ c)
        - 0.5 * trace
    )


def gaussian_kl(mean: Tensor, root: Tensor, logdet_cov: Tensor, L_prior: Tensor) -> Tensor:
    """KL(N(m, R Rᵀ) || N(0, L Lᵀ)) with the prior given by its Cholesky root."""
    a = trisolve(L_prior, root)
    b = trisolve(L_prior, mean)
    logdet_prior = 2 * L_prior.diagonal().log().sum()
    return 0.5 * (a.pow(2).sum() + b @ b - mean.shape[0] + logdet_prior - logdet_cov)


def expected_log_lik(y: Tensor, f_mean: Tensor, f_var: Tensor, noise: Tensor) -> Tensor:
    """Σ_n E_{N(f; μ_n, v_n)} log N(y_n | f, σ²)."""
    return (-0.5 * (LOG2PI + noise.log()) - 0.5 * ((y - f_mean).pow(2) + f_var) / noise).sum()


def svgp_elbo(
    kernel: gpytorch.kernels.Kernel,
    noise: Tensor,
    Z: Tensor,
    q_mean: Tensor,
    q_root: Tensor,
    q_logdet: Tensor,
    xb: Tensor,
    yb: Tensor,
    num_data: int,
    jitter_log: JitterLog | None = None,
    Lu: Tensor | None = None,
) -> Tensor:
    """Uncollapsed ELBO (Chen et al. 2024, Eq. 10; Hensman et al. 2013), unwhitened, per datum.

    (N/B) Σ_b E_q[log p(y_b | f_b)] − KL(q(u) || p(u)), divided by N (as gpytorch's VariationalELBO).
    ``q(u) = N(q_mean, q_root q_rootᵀ)`` is held fixed; gradients reach the kernel, the noise and (if it
    requires grad) Z.
    """
    if Lu is None:
        Lu = cholesky(kuu(kernel, Z), jitter_log)
    return svgp_elbo_terms(
        Lu, dense(kernel, Z, xb), diagonal(kernel, xb), noise, q_mean, q_root, q_logdet, yb, num_data
    )


def svgp_elbo_terms(
    Lu: Tensor,
    Kub: Tensor,
    kbb: Tensor,
    noise: Tensor,
    q_mean: Tensor,
    q_root: Tensor,
    q_logdet: Tensor,
    yb: Tensor,
    num_data: int,
) -> Tensor:
    """:func:`svgp_elbo` from L_u = chol(K_uu), K_ub and diag K_bb (for callers that already have them); the pieces
    are those of :func:`_q_terms`."""
    _, _, f_mean, f_var, kl = _q_terms(Lu, Kub, kbb, q_mean, q_root, q_logdet)
    ell = expected_log_lik(yb, f_mean, f_var.clamp_min(1e-12), noise) * (num_data / Kub.shape[1])
    return (ell - kl) / num_data


def _q_terms(
    L: Tensor, Kub: Tensor, kbb: Tensor, q_mean: Tensor, q_root: Tensor, q_logdet: Tensor
) -> tuple[Tensor, Tensor, Tensor, Tensor, Tensor]:
    """What q(u) = N(m, R Rᵀ) gives the uncollapsed ELBO on a batch, from L = chol(K_uu), K_ub and diag K_bb.

    One triangular solve gives T = [C | v | A] = L⁻¹ [R | m | K_ub]; returns T, Γ = CᵀA, the predictive means Aᵀv
    and variances k_bb − ‖A‖² + ‖Γ‖² (column-wise, not clamped) and KL = ½(‖C‖² + ‖v‖² − M + log|K_uu| − log|S|).
    """
    M, r = Kub.shape[0], q_root.shape[-1]
    T = trisolve(L, torch.cat([q_root, q_mean.unsqueeze(-1), Kub], -1))
    C, v, A = T[:, :r], T[:, r], T[:, r + 1 :]
    Gamma = C.mT @ A
    kl = 0.5 * (C.pow(2).sum() + v @ v - M + 2 * L.diagonal().log().sum() - q_logdet)
    return T, Gamma, A.mT @ v, kbb - A.pow(2).sum(0) + Gamma.pow(2).sum(0), kl


def svgp_elbo_cov(
    Kuu: Tensor,
    Kub: Tensor,
    kbb: Tensor,
    noise: Tensor,
    q_mean: Tensor,
    q_root: Tensor,
    q_logdet: Tensor,
    yb: Tensor,
    num_data: int,
    jitter_log: JitterLog | None = None,
) -> Tensor:
    """:func:`svgp_elbo` from K_uu (jitter included), K_ub and diag K_bb, with a closed-form gradient.

    When q(u) is fixed (POAM's M-step) the gradient with respect to K_uu, K_ub, k_bb and σ² is written out
    (:class:`_FixedQELBO`) instead of back-propagating through the Cholesky factor and the solves: about a third
    less dense linear algebra per step, same value and gradient to round-off. If q's parameters require grad
    (VAR-OPT) it back-propagates through :func:`svgp_elbo_terms`.
    """
    if q_mean.requires_grad or q_root.requires_grad:
        return svgp_elbo_terms(cholesky(Kuu, jitter_log), Kub, kbb, noise, q_mean, q_root, q_logdet, yb, num_data)
    return _FixedQELBO.apply(Kuu, Kub, kbb, noise, q_mean, q_root, q_logdet, yb, num_data, jitter_log)


class _FixedQELBO(torch.autograd.Function):
    """Value and hand-derived gradient of the uncollapsed ELBO for a fixed q(u) = N(m, R Rᵀ).

    With L = chol(K_uu), [C | v | A] = L⁻¹[R | m | K_ub], Γ = CᵀA and [E | α | W] = L⁻ᵀ[C | v | A]
    (= K_uu⁻¹[R | m | K_ub]), per-datum derivatives g_μ, h of the value with respect to the predictive means and
    variances, and Y = W diag(h) Γᵀ:
        ∂/∂K_ub = α g_μᵀ + 2 (E Γ − W) diag(h),
        ∂/∂K_uu = W diag(h) Wᵀ − 2 E Yᵀ − α (W g_μ)ᵀ + (E Eᵀ + α αᵀ − K_uu⁻¹) / 2N,
        ∂/∂k_bb = h.
    K_uu is symmetric, so any matrix with the right symmetric part is its gradient (the kernel's symmetric backward
    and the output scale read only that): the backward returns [c E − 2Y | c α − W g_μ] [E | α]ᵀ − c K_uu⁻¹
    (c = 1/2N) plus the block-lower half of the symmetric W diag(h) Wᵀ, with the strictly lower blocks doubled (three
    quarters of the product's work). Every solve has the r + 1 + B columns of the forward (never M); K_uu⁻¹ comes
    from L (``torch.cholesky_inverse``). The value is linear in S = R Rᵀ, so an unbiased sketch R Ω/√p of the root
    gives an unbiased gradient.
    """

    @staticmethod
    def forward(ctx, Kuu, Kub, kbb, noise, q_mean, q_root, q_logdet, yb, num_data, jitter_log):
        L = cholesky(Kuu, jitter_log)
        T, Gamma, f_mean, var_raw, kl = _q_terms(L, Kub, kbb, q_mean, q_root, q_logdet)
        r, B = q_root.shape[-1], Kub.shape[1]
        resid = yb - f_mean
        var = var_raw.clamp_min(1e-12)
        ell = (-0.5 * (LOG2PI + noise.log()) - 0.5 * (resid.pow(2) + var) / noise).sum() / B
        ctx.save_for_backward(L, T, Gamma, resid, var, var_raw > 1e-12, noise)
        ctx.sizes = (r, B, num_data)
        return ell - kl / num_data

    @staticmethod
    def backward(ctx, grad):
        L, T, Gamma, resid, var, active, noise = ctx.saved_tensors
        r, B, num_data = ctx.sizes
        g_mean = grad * resid / (noise * B)
        h = (-0.5 * grad / (noise * B)) * active
        g_noise = grad * (-0.5 / noise + 0.5 * (resid.pow(2) + var) / noise.pow(2)).sum() / B
        U = trisolve(L, T, transpose=True)  # K_uu⁻¹ [R | m | K_ub]
        Ea, alpha, W = U[:, : r + 1], U[:, r], U[:, r + 1 :]
        Wh = W * h
        G_ub = torch.addmm(Wh, Ea[:, :r], Gamma * h, beta=-2, alpha=2).addr_(alpha, g_mean)
        c = float(grad) / (2 * num_data)
        left = torch.addmm(
            Ea, W, torch.cat([2 * h.unsqueeze(-1) * Gamma.mT, g_mean.unsqueeze(-1)], -1), beta=c, alpha=-1
        )
        G_uu = torch.cholesky_inverse(L).addmm_(left, Ea.mT, beta=-c)
        return _add_symmetric_product(G_uu, Wh, W), G_ub, h, g_noise.reshape(noise.shape), *[None] * 6


def _add_symmetric_product(G: Tensor, X: Tensor, Y: Tensor) -> Tensor:
    """G plus a matrix whose symmetric part is X Yᵀ, for a symmetric X Yᵀ (such as W diag(h) Wᵀ): its block-lower
    half, the off-diagonal block doubled, in three quarters of the product's work. In place; returns G."""
    k = G.shape[0] // 2
    G[:k, :k].addmm_(X[:k], Y[:k].mT)
    G[k:, :k].addmm_(X[k:], Y[:k].mT, alpha=2)
    G[k:, k:].addmm_(X[k:], Y[k:].mT)
    return G


def exact_mll(
    kernel: gpytorch.kernels.Kernel, noise: Tensor, X: Tensor, y: Tensor, jitter_log: JitterLog | None = None
) -> Tensor:
    """log N(y | 0, K + σ²I), differentiated by :class:`GaussianLogDensity`'s closed-form gradient."""
    K = dense(kernel, X) + noise * torch.eye(X.shape[0], dtype=X.dtype)
    return GaussianLogDensity.apply(K, y, jitter_log)


class GaussianLogDensity(torch.autograd.Function):
    """log N(y | 0, K) with the closed-form gradients ∂/∂K = ½(ααᵀ − K⁻¹), ∂/∂y = −α, α = K⁻¹y (Rasmussen and
    Williams 2006, Eq. 5.9): one ``cholesky_inverse`` instead of autograd through the factorisation, which
    costs several times the forward pass at N in the thousands. First derivatives only."""

    @staticmethod
    def forward(ctx, K: Tensor, y: Tensor, jitter_log: JitterLog | None = None) -> Tensor:
        L = cholesky(K, jitter_log)
        a = trisolve(L, y)
        ctx.save_for_backward(L, a)
        return -0.5 * (a @ a) - L.diagonal().log().sum() - 0.5 * K.shape[0] * LOG2PI

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad: Tensor) -> tuple[Tensor | None, Tensor | None, None]:
        L, a = ctx.saved_tensors
        alpha = trisolve(L, a, transpose=True)
        grad_K = grad_y = None
        if ctx.needs_input_grad[0]:
            grad_K = (0.5 * grad) * (torch.outer(alpha, alpha) - torch.cholesky_inverse(L))
        if ctx.needs_input_grad[1]:
            grad_y = -grad * alpha
        return grad_K, grad_y, None


@dataclass
class OnlineTerms:
    """The online collapsed bound of Bui et al. (2017) at new inducing inputs Z, and the pieces it is made of.

    Notation of the stable form of Bui et al. (2017): v = f(Z) with L_v = chol(K_vv); the old batches are
    summarised by q(u) = N(m, S) at Z_old with S = R Rᵀ, R = L_u L_Dₒ⁻ᵀ, m = R βₒ, where L_u = chol(K_uu^old)
    under the old θ (an :class:`~onlinegp.posterior.InducingPosterior`). Then R⁻¹ = L_Dₒᵀ L_u⁻¹ applies S⁻¹
    without factorising S, and with W = L_u⁻¹ K_uv L_v⁻ᵀ, A = L_v⁻¹ K_vf:

        D = I + σ⁻² A Aᵀ + (L_DₒᵀW)ᵀ(L_DₒᵀW) − WᵀW                (D₁ + D₂ − D₃)
        c = σ⁻² K_vf y + (L_u⁻¹K_uv)ᵀ L_Dₒ βₒ                      (c₁ + c₂),   β = L_D⁻¹ L_v⁻¹ c
        constant  = −N/2 log 2πσ²
        quadratic = −yᵀy/2σ² + ½‖β‖² − ½‖βₒ‖²                        (‖βₒ‖² = mᵀS⁻¹m)
        logdet    = −½ log|D| − ½ log|S| + ½ log|K_uu^old| = −log|L_D| + log|L_Dₒ|
        trace     = −½ tr(C⁻¹E_uu) − tr(K_ff − Q_ff)/2σ²,  C⁻¹ = S⁻¹ − (K_uu^old)⁻¹,  E_uu = K_uu − K_uv K_vv⁻¹ K_vu

    K_uu, K_uv (new θ) and K_vv carry the ε of :func:`~onlinegp.posterior.kuu` consistently (``kuv``), so with
    θ and Z unchanged E_uu = 0 and the bounds of consecutive batches sum to the batch SGPR bound. Without an old
    summary every old-batch term vanishes and the bound is :func:`sgpr_bound`. ``posterior()`` is the new
    summary: q(v) with mean L_v L_D⁻ᵀ β and root L_v L_D⁻ᵀ.
    """

    Z: Tensor
    Lv: Tensor
    LD: Tensor
    c: Tensor
    beta: Tensor
    Avf: Tensor
    constant: Tensor
    quadratic: Tensor
    logdet: Tensor
    trace: Tensor

    @property
    def value(self) -> Tensor:
        return self.constant + self.quadratic + self.logdet + self.trace

    def posterior(self) -> InducingPosterior:
        return InducingPosterior(Z=self.Z, Lu=self.Lv, LW=self.LD, beta=self.beta)


def online_terms(
    kernel: gpytorch.kernels.Kernel,
    noise: Tensor,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: InducingPosterior | None = None,
    jitter_log: JitterLog | None = None,
    Lv: Tensor | None = None,
) -> OnlineTerms:
    """The online bound's components (see :class:`OnlineTerms`); differentiable in θ, σ² and Z, not in ``old``.

    Cost O(N M² + M³). Pass ``Lv`` to reuse a root of K_vv at the current θ.
    """
    if Lv is None:
        Lv = cholesky(kuu(kernel, Z), jitter_log)
    eye = torch.eye(Z.shape[0], dtype=Z.dtype, device=Z.device)
    Kvf = dense(kernel, Z, X)
    Avf = trisolve(Lv, Kvf)
    D = eye + Avf @ Avf.mT / noise
    c = Kvf @ y / noise
    quadratic = -0.5 * (y @ y) / noise
    logdet = torch.zeros((), dtype=Z.dtype)
    trace = -0.5 * (diagonal(kernel, X).sum() - Avf.pow(2).sum()) / noise
    if old is not None:
        Lu, LDo, beta_o = old.Lu.detach(), old.LW.detach(), old.beta.detach()
        Auv = trisolve(Lu, kuv(kernel, old.Z, Z))  # L_u⁻¹ K_uv
        W = trisolve(Lv, Auv.mT).mT  # L_u⁻¹ K_uv L_v⁻ᵀ
        T = LDo.mT @ W  # R⁻¹ K_uv L_v⁻ᵀ
        D = D + T.mT @ T - W.mT @ W
        c = c + Auv.mT @ (LDo @ beta_o)
        quadratic = quadratic - 0.5 * (beta_o @ beta_o)
        logdet = logdet + LDo.diagonal().log().sum()
        Au = trisolve(Lu, kuu(kernel, old.Z))
        G = trisolve(Lu, Au.mT) - W @ W.mT  # L_u⁻¹ E_uu L_u⁻ᵀ
        trace = trace - 0.5 * ((LDo * (G @ LDo)).sum() - G.diagonal().sum())
    LD = cholesky(0.5 * (D + D.mT), jitter_log)
    beta = trisolve(LD, trisolve(Lv, c))
    n = X.shape[0]
    return OnlineTerms(
        Z=Z,
        Lv=Lv,
        LD=LD,
        c=c,
        beta=beta,
        Avf=Avf,
        constant=-0.5 * n * (LOG2PI + noise.log()),
        quadratic=quadratic + 0.5 * (beta @ beta),
        logdet=logdet - LD.diagonal().log().sum(),
        trace=trace,
    )


def online_bound(
    kernel: gpytorch.kernels.Kernel,
    noise: Tensor,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: InducingPosterior | None = None,
    jitter_log: JitterLog | None = None,
) -> Tensor:
    """Bui et al. (2017) online collapsed bound on the batch (X, y) given the old summary (total, not per datum)."""
    return online_terms(kernel, noise, Z, X, y, old, jitter_log).value


@dataclass
class DataStatistics:
    """All data seen so far as sufficient statistics at the inducing inputs Z, free of σ² (``old_noise='current'``).

    In the whitened basis of the inducing outputs, u = f(Z) = L_u w with L_u = chol K_uu under the θ of the last batch,
    the data are modelled as y = Φ w + ε, ε ~ N(0, σ²I) (Φ = K_fu K_uu⁻¹ L_u for a batch absorbed at Z; older data
    carried over by the projection below), and kept as P = ΦᵀΦ, r = Φᵀy, yy = yᵀy, their number n and ``trace``:
    the accumulated Σ tr(K_ff − Q_ff) and projection losses tr(P E), each under the θ of its batch. ``value`` is the
    bound on all of them at that θ and σ² (see :func:`statistics_bound`).
    """

    Z: Tensor
    Lu: Tensor
    P: Tensor
    r: Tensor
    yy: Tensor
    n: int
    trace: Tensor
    value: Tensor


@dataclass
class StatisticsBound:
    """The bound of :func:`statistics_bound` (total over all data seen), the new statistics and the posterior."""

    value: Tensor
    data: DataStatistics
    posterior: InducingPosterior


def statistics_bound(
    kernel: gpytorch.kernels.Kernel,
    noise: Tensor,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: DataStatistics | None = None,
    jitter_log: JitterLog | None = None,
) -> StatisticsBound:
    """Collapsed bound on the batch (X, y) and the old data's statistics at new inducing inputs Z (ours; OSGPR's
    ``old_noise='current'``).

    With L_v = chol K_vv, A = L_v⁻¹K_vf and, for the old statistics at Z_old, W = L_u⁻¹K_uv L_v⁻ᵀ (as in
    :class:`~onlinegp.objectives.OnlineTerms`; u = K_uv K_vv⁻¹ v + e, e ~ N(0, E_uu) under the current θ):

        P' = A Aᵀ + Wᵀ P W,   r' = A y + Wᵀ r,   yy' = yᵀy + yy,   n' = N + n
        trace' = tr(K_ff − Q_ff) + trace + tr(P G),   G = L_u⁻¹ E_uu L_u⁻ᵀ = L_u⁻¹K_uu L_u⁻ᵀ − W Wᵀ
        D = I + P'/σ² = L_D L_Dᵀ,   β = L_D⁻¹ r'/σ²
        F = −n'/2 log 2πσ² − yy'/2σ² + ½‖β‖² − log|L_D| − trace'/2σ²

    F is the SGPR bound (Titsias 2009) of y' = Φ'w + ε with the old data's rows of Φ' projected onto v, so the
    expected misfit of that projection is charged (tr(P G)/2σ², Bui et al.'s −½ tr(C⁻¹E_uu) with C⁻¹ = P/σ²) and
    every datum pays for σ². It equals Bui et al.'s (2017) online bound, plus the old data's batch bound at the
    same σ², whenever the old summary was fitted at that σ² (then S⁻¹ − K_uu⁻¹ = L_u⁻ᵀ P L_u⁻¹/σ²); with θ and Z
    fixed it is the batch SGPR bound on all data. The posterior at Z is q(v) with v = L_v L_D⁻ᵀ (β + ξ), ξ ~ N(0, I).
    Cost O(N M² + M³); differentiable in θ, σ² and Z, not in ``old``.
    """
    Lv = cholesky(kuu(kernel, Z), jitter_log)
    Kvf = dense(kernel, Z, X)
    A = trisolve(Lv, Kvf)
    P = A @ A.mT
    r = A @ y
    yy = y @ y
    n = X.shape[0]
    trace = diagonal(kernel, X).sum() - A.pow(2).sum()
    if old is not None:
        Lu = old.Lu
        Auv = trisolve(Lu, kuv(kernel, old.Z, Z))  # L_u⁻¹ K_uv
        W = trisolve(Lv, Auv.mT).mT  # L_u⁻¹ K_uv L_v⁻ᵀ
        P = P + W.mT @ (old.P @ W)
        r = r + W.mT @ old.r
        yy, n = yy + old.yy, n + old.n
        G = trisolve(Lu, trisolve(Lu, kuu(kernel, old.Z)).mT) - W @ W.mT  # L_u⁻¹ E_uu L_u⁻ᵀ
        trace = trace + old.trace + (old.P * G).sum()
    P = 0.5 * (P + P.mT)
    eye = torch.eye(Z.shape[0], dtype=Z.dtype, device=Z.device)
    LD = cholesky(eye + P / noise, jitter_log)
    beta = trisolve(LD, r) / noise
    value = (
        -0.5 * n * (LOG2PI + noise.log()) - 0.5 * (yy + trace) / noise + 0.5 * (beta @ beta) - LD.diagonal().log().sum()
    )
    data = DataStatistics(
        Z=Z.detach(),
        Lu=Lv.detach(),
        P=P.detach(),
        r=r.detach(),
        yy=yy.detach(),
        n=n,
        trace=trace.detach(),
        value=value.detach(),
    )
    return StatisticsBound(value=value, data=data, posterior=InducingPosterior(Z=Z, Lu=Lv, LW=LD, beta=beta))


class StatisticsFit:
    """The value of :func:`statistics_bound` for an optimiser's repeated evaluations under changing θ, σ² and
    inducing inputs (OSGPR's fits with ``old_noise='current'``), with a closed-form gradient.

    Once per batch: the old statistics' θ-independent pieces (Λ = L_u⁻ᵀ P L_u⁻¹). Per call: one kernel matrix
    k([Z; Z_old], [Z; X; Z_old]) (instead of K_vv, K_vf, K_uv and K_uu separately; autograd carries its gradient to
    θ and Z; an ARD RBF kernel as one node, :func:`~onlinegp.kernels.rbf.scaled_rbf`) and the bound with the
    hand-derived gradient of :class:`_StatisticsBoundFunction`, whose graph is one node instead of the stable form's
    hundreds of small operations. Values and gradients equal
    :func:`statistics_bound`'s to round-off (tests/library/test_fast_paths.py), which stays the plain computation and
    the posterior's.
    """

    def __init__(
        self,
        kernel: gpytorch.kernels.Kernel,
        X: Tensor,
        y: Tensor,
        old: DataStatistics | None = None,
        jitter_log: JitterLog | None = None,
    ):
        self.kernel, self.X, self.y, self.old, self.jitter_log = kernel, X, y, old, jitter_log
        self.Lam = None
        if old is not None:
            Lam = trisolve(old.Lu, trisolve(old.Lu, old.P, transpose=True).mT, transpose=True)
            self.Lam = 0.5 * (Lam + Lam.mT)

    def __call__(self, noise: Tensor, Z: Tensor) -> Tensor:
        """The bound on all data seen (total) at inducing inputs Z under the kernel's current parameters and σ²."""
        old, N = self.old, self.X.shape[0]
        rows = Z if old is None else torch.cat([Z, old.Z])
        cols = torch.cat([Z, self.X] if old is None else [Z, self.X, old.Z])
        rbf = rbf_parameters(self.kernel)
        if rbf is None:
            K, kff = dense(self.kernel, rows, cols), diagonal(self.kernel, self.X)
        else:  # ARD RBF: one autograd node for the kernel too
            K, kff = scaled_rbf(rows, cols, *rbf), rbf[1].expand(N)
        if old is None:
            return _StatisticsBoundFunction.apply(K, kff, noise, None, self.y, None, self)
        same = (old.Z.unsqueeze(1) == Z.unsqueeze(0)).all(-1)
        same = same.to(K.dtype) if bool(same.any()) else None
        return _StatisticsBoundFunction.apply(K, kff, noise, same, self.y, old, self)


class _StatisticsBoundFunction(torch.autograd.Function):
    """Value and hand-derived gradient of :func:`statistics_bound` in the kernel matrix K = k([Z; Z_old], [Z; X; Z_old])
    and σ² = s. K_vv, K_vf, K_uv and K_uu are its blocks (K_vv and K_uu with :func:`with_jitter`'s ε, K_uv with K_vv's
    ε where Z and Z_old share an input, as :func:`~onlinegp.posterior.kuv`; ``same`` marks those), so the gradient
    reaches K as one matrix.

    Forward, as :func:`statistics_bound`: A = L_v⁻¹K_vf, W = L_u⁻¹K_uvL_v⁻ᵀ, P' = AAᵀ + WᵀPW, r' = Ay + Wᵀr,
    t' = Σk_ff − ‖A‖² + t + ⟨Λ, K_uu⟩ − ⟨PW, W⟩ (Λ = L_u⁻ᵀPL_u⁻¹), D = I + P'/s and
    F = −n'/2 log 2πs − (yy' + t')/2s + ½ r'ᵀD⁻¹r'/s² − ½ log|D|. With γ = D⁻¹r'/s and H = I − D⁻¹ − γγᵀ:

        ∂F/∂A = (HA + γyᵀ)/s,   ∂F/∂W = (PWH + rγᵀ)/s,
        ∂F/∂K_vf = L_v⁻ᵀ ∂F/∂A,   ∂F/∂K_uv = L_u⁻ᵀ (∂F/∂W) L_v⁻¹,   ∂F/∂K_uu = −Λ/2s,   ∂F/∂k_ff = −1/2s,
        ∂F/∂K_vv = −½ L_v⁻ᵀ (∂F/∂A Aᵀ + (∂F/∂W)ᵀW) L_v⁻¹ (F depends on L_v only through K_vv = L_vL_vᵀ),
        ∂F/∂s = −n'/2s + (yy' + t')/2s² − ½‖γ‖²/s − ½ r'ᵀγ/s² + ½ (M − tr D⁻¹)/s.
    """

    @staticmethod
    def forward(ctx, K, kff, noise, same, y, old, fit):
        N = y.shape[0]
        M = K.shape[0] - (0 if old is None else old.Z.shape[0])
        Kvv, Kvf = with_jitter(K[:M, :M]), K[:M, M : M + N]
        eye = torch.eye(M, dtype=K.dtype, device=K.device)
        Lv = cholesky(Kvv, fit.jitter_log)
        A = trisolve(Lv, Kvf)
        P, r, yy, n = A @ A.mT, A @ y, y @ y, Kvf.shape[1]
        trace = kff.sum() - A.pow(2).sum()
        W = PW = None
        if old is not None:
            Kuv, Kuu = K[M:, :M], with_jitter(K[M:, M + N :])
            if same is not None:
                Kuv = Kuv + KUU_JITTER.get(K.dtype, 1e-6) * K[:M, :M].diagonal().mean() * same
            W = trisolve(Lv, trisolve(old.Lu, Kuv).mT).mT
            PW = old.P @ W
            P, r = P + W.mT @ PW, r + W.mT @ old.r
            yy, n = yy + old.yy, n + old.n
            trace = trace + old.trace + (fit.Lam * Kuu).sum() - (PW * W).sum()
        P = 0.5 * (P + P.mT)
        LD = cholesky(eye + P / noise, fit.jitter_log)
        beta = trisolve(LD, r) / noise
        ctx.save_for_backward(Lv, A, W, PW, LD, beta, r, noise, y)
        ctx.old, ctx.fit, ctx.n, ctx.rest, ctx.shape = old, fit, n, yy + trace, K.shape
        return (
            -0.5 * n * (LOG2PI + noise.log())
            - 0.5 * (yy + trace) / noise
            + 0.5 * (beta @ beta)
            - (LD.diagonal().log().sum())
        )

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        Lv, A, W, PW, LD, beta, r, noise, y = ctx.saved_tensors
        old, M = ctx.old, A.shape[0]
        eye = torch.eye(M, dtype=A.dtype, device=A.device)
        gamma = trisolve(LD, beta, transpose=True)
        Dinv = torch.cholesky_inverse(LD)
        H = eye - Dinv - torch.outer(gamma, gamma)
        g_A = (H @ A + torch.outer(gamma, y)) / noise
        inner = g_A @ A.mT
        g_uv = None
        if old is not None:
            g_W = (PW @ H + torch.outer(old.r, gamma)) / noise
            inner = inner + g_W.mT @ W
            g_uv = grad * trisolve(Lv, trisolve(old.Lu, g_W, transpose=True).mT, transpose=True).mT
        outer = trisolve(Lv, trisolve(Lv, inner, transpose=True).mT, transpose=True)  # (L_v⁻ᵀ inner L_v⁻¹)ᵀ
        g_vv = -0.25 * grad * (outer + outer.mT)
        g_vf = grad * trisolve(Lv, g_A, transpose=True)
        g_ff = (-0.5 * grad / noise) * torch.ones(A.shape[1], dtype=A.dtype, device=A.device)
        g_noise = grad * (
            -0.5 * ctx.n / noise
            + 0.5 * ctx.rest / noise**2
            - 0.5 * (gamma @ gamma) / noise
            - 0.5 * (r @ gamma) / noise**2
            + 0.5 * (M - Dinv.diagonal().sum()) / noise
        )
        g_K = torch.zeros(ctx.shape, dtype=A.dtype, device=A.device)
        N = A.shape[1]
        g_K[:M, :M], g_K[:M, M : M + N] = g_vv, g_vf
        if old is not None:
            g_K[M:, :M], g_K[M:, M + N :] = g_uv, (-0.5 * grad / noise) * ctx.fit.Lam
        return g_K, g_ff, g_noise.reshape(noise.shape), None, None, None, None


@dataclass
class _OldSummary:
    """What the online bound needs of the old summary, θ-independent: L_u, Γ = L_Dₒ L_Dₒᵀ − I,
    Λ = L_u⁻ᵀ Γ L_u⁻¹ (= S⁻¹ − K_uu^old⁻¹), L_Dₒβₒ, b = L_u⁻ᵀ L_Dₒ βₒ and the constant log|L_Dₒ| − ½‖βₒ‖²."""

    Lu: Tensor
    Gamma: Tensor
    Lam: Tensor
    LDb: Tensor
    b: Tensor
    constant: Tensor

    @classmethod
    def of(cls, old: InducingPosterior) -> "_OldSummary":
        Lu, LDo, beta_o = old.Lu.detach(), old.LW.detach(), old.beta.detach()
        Gamma = LDo @ LDo.mT - torch.eye(LDo.shape[0], dtype=LDo.dtype, device=LDo.device)
        Lam = trisolve(Lu, trisolve(Lu, Gamma, transpose=True).mT, transpose=True)
        LDb = LDo @ beta_o
        constant = LDo.diagonal().log().sum() - 0.5 * (beta_o @ beta_o)
        return cls(Lu, Gamma, 0.5 * (Lam + Lam.mT), LDb, trisolve(Lu, LDb, transpose=True), constant)


class OnlineBound:
    """The online collapsed bound of Bui et al. (2017) (:func:`online_bound`) at fixed inducing inputs, for an
    optimiser's repeated evaluations under changing θ and σ² (SSGP++'s Adam steps; Chen et al. 2024, app. A4).

    Once per batch: the θ-independent pieces of the old summary (:class:`_OldSummary`) and the union of the
    inputs [Z_old; X_n] (plus any inducing input in neither), of which Z, Z_old and X_n are index sets. Per call:
    one symmetric kernel matrix on the union (instead of K_vv, K_vf, K_uv and K_uu^new separately) and the bound
    with its closed-form gradient (:class:`_OnlineBoundFunction`). Values and gradients equal :func:`online_bound`'s
    to round-off (tests/library/test_fast_paths.py).
    """

    def __init__(
        self,
        kernel: gpytorch.kernels.Kernel,
        Z: Tensor,
        X: Tensor,
        y: Tensor,
        old: InducingPosterior | None = None,
        jitter_log: JitterLog | None = None,
    ):
        self.kernel, self.y, self.jitter_log = kernel, y, jitter_log
        Zo = X[:0] if old is None else old.Z.detach()
        base = torch.cat([Zo, X])
        match = (Z.unsqueeze(1) == base.unsqueeze(0)).all(-1)
        found = match.any(1)
        self.iv = match.to(torch.uint8).argmax(1)
        self.iv[~found] = base.shape[0] + torch.arange(int((~found).sum()), device=Z.device)
        self.U = torch.cat([base, Z[~found]])
        self.Mo, self.N = Zo.shape[0], X.shape[0]
        self.X = X
        self.Z = Z
        self.old = None if old is None else _OldSummary.of(old)
        self.same = (Zo.unsqueeze(1) == Z.unsqueeze(0)).all(-1).to(Z.dtype)  # where kuv adds ε

    def __call__(self, noise: Tensor) -> Tensor:
        """The bound (total over the batch) under the kernel's current parameters and noise σ²."""
        K = dense(self.kernel, self.U)
        Mo, N, iv = self.Mo, self.N, self.iv
        Kvv = with_jitter(K[iv][:, iv])
        Kvf = K[iv, Mo : Mo + N]
        kff = diagonal(self.kernel, self.X)
        if self.old is None:
            return _OnlineBoundFunction.apply(Kvv, Kvf, kff, noise, None, None, self.y, None, self.jitter_log)
        eps = KUU_JITTER.get(K.dtype, 1e-6) * diagonal(self.kernel, self.Z).mean().detach()
        Kuv = K[:Mo, iv] + eps * self.same
        Kuu = with_jitter(K[:Mo, :Mo])
        return _OnlineBoundFunction.apply(Kvv, Kvf, kff, noise, Kuv, Kuu, self.y, self.old, self.jitter_log)


class _OnlineBoundFunction(torch.autograd.Function):
    """Value and hand-derived gradient of the online bound (Bui et al. 2017) in the kernel matrices and σ².

    In unwhitened form, with Λ = L_u⁻ᵀ Γ L_u⁻¹, b = L_u⁻ᵀ L_Dₒ βₒ (fixed), P = σ⁻² K_vf K_fv + K_vu Λ K_uv,
    c = σ⁻² K_vf y + K_vu b and Σ = K_vv + P = L_v D L_vᵀ:

        F = −N/2 log 2πσ² − (yᵀy + Σ k_ff)/2σ² − ½⟨K_uu, Λ⟩ + ½ log|K_vv| − ½ log|Σ| + ½ cᵀΣ⁻¹c
            + ½ tr(K_vv⁻¹P) + log|L_Dₒ| − ½‖βₒ‖²,

    which is :class:`OnlineTerms`' value (its trace term −½ tr(Γ L_u⁻¹E_uuL_u⁻ᵀ) split into the last two
    θ-dependent pieces). With γ = L_D⁻ᵀβ (so Σ⁻¹c = L_v⁻ᵀγ) and H = I − D⁻¹ − γγᵀ:
        ∂F/∂P = ½ L_v⁻ᵀ H L_v⁻¹,      ∂F/∂K_vv = ½ L_v⁻ᵀ (H + I − D) L_v⁻¹,
        ∂F/∂K_vf = σ⁻² L_v⁻ᵀ (H A_vf + γ yᵀ),   ∂F/∂K_uv = L_u⁻ᵀ (Γ W H + L_Dₒβₒ γᵀ) L_v⁻¹,   ∂F/∂K_uu = −½Λ,
        ∂F/∂k_ff = −1/2σ²,   ∂F/∂σ² = −N/2σ² + (yᵀy + Σ k_ff)/2σ⁴ − (½⟨H A_vf, A_vf⟩ + γᵀA_vf y)/σ⁴,
    where A_vf = L_v⁻¹K_vf and W = L_u⁻¹K_uvL_v⁻ᵀ. The forward is the stable form of :func:`online_terms` (D from
    triangular solves, never Σ); the backward needs D⁻¹ (``torch.cholesky_inverse``) and three triangular solves.
    """

    @staticmethod
    def forward(ctx, Kvv, Kvf, kff, noise, Kuv, Kuu, y, old, jitter_log):
        M, N = Kvf.shape
        eye = torch.eye(M, dtype=Kvf.dtype, device=Kvf.device)
        Lv = cholesky(Kvv, jitter_log)
        Avf = trisolve(Lv, Kvf)
        D = eye + Avf @ Avf.mT / noise
        c = Kvf @ y / noise
        value = -0.5 * N * (LOG2PI + noise.log()) - 0.5 * (y @ y + kff.sum() - Avf.pow(2).sum()) / noise
        GW = None
        if old is not None:
            W = trisolve(Lv, trisolve(old.Lu, Kuv).mT).mT  # L_u⁻¹ K_uv L_v⁻ᵀ
            GW = old.Gamma @ W
            WGW = W.mT @ GW  # D₂ − D₃ = Wᵀ Γ W
            D = D + WGW
            c = c + Kuv.mT @ old.b
            value = value + old.constant - 0.5 * (Kuu * old.Lam).sum() + 0.5 * WGW.diagonal().sum()
        D = 0.5 * (D + D.mT)
        LD = cholesky(D, jitter_log)
        beta = trisolve(LD, trisolve(Lv, c))
        ctx.save_for_backward(Lv, Avf, D, LD, beta, GW, noise, y, kff)
        ctx.old = old
        return value + 0.5 * (beta @ beta) - LD.diagonal().log().sum()

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        Lv, Avf, D, LD, beta, GW, noise, y, kff = ctx.saved_tensors
        old = ctx.old
        M, N = Avf.shape
        eye = torch.eye(M, dtype=D.dtype, device=D.device)
        gamma = trisolve(LD, beta, transpose=True)
        H = eye - torch.cholesky_inverse(LD) - torch.outer(gamma, gamma)
        HA = H @ Avf
        left = trisolve(Lv, torch.cat([H + eye - D, HA + torch.outer(gamma, y)], -1), transpose=True)
        rhs = left[:, :M].mT  # (H + I − D) L_v⁻¹
        if old is not None:
            Y = GW @ H + torch.outer(old.LDb, gamma)
            rhs = torch.cat([rhs, Y.mT], -1)
        right = trisolve(Lv, rhs, transpose=True)
        g_vv = (0.5 * grad) * right[:, :M]
        g_vf = (grad / noise) * left[:, M:]
        g_ff = (-0.5 * grad / noise) * torch.ones_like(kff)
        g_noise = grad * (
            -0.5 * N / noise
            + 0.5 * (y @ y + kff.sum()) / noise**2
            - (0.5 * (HA * Avf).sum() + gamma @ (Avf @ y)) / noise**2
        )
        g_uv = g_uu = None
        if old is not None:
            g_uv = grad * trisolve(old.Lu, right[:, M:].mT, transpose=True)
            g_uu = (-0.5 * grad) * old.Lam
        return g_vv, g_vf, g_ff, g_noise.reshape(noise.shape), g_uv, g_uu, None, None, None


def online_svgp_elbo(
    kernel: gpytorch.kernels.Kernel,
    noise: Tensor,
    q: VariationalQ,
    xb: Tensor,
    yb: Tensor,
    num_data: int,
    old: VariationalQ | None = None,
    L_old: Tensor | None = None,
    beta: float = 1.0,
    jitter_log: JitterLog | None = None,
) -> Tensor:
    """Bui et al. (2017) uncollapsed online ELBO with the KL terms tempered by β
    (generalised VI; Stanton et al. 2021, eq. A.8).

    With q(b) = N(m, R Rᵀ) at the new Z, the old summary q_old(a) = N(mₒ, Rₒ Rₒᵀ) at Z_old (``old``, lower-triangular
    root) and K_aa^old = L_old L_oldᵀ its prior under the old θ (the total over the batch, mini-batch scaled by N/B):

        (N/B) Σ_b E_q[log p(y_b | f_b)] − β KL(q(b) ‖ p(b|θ)) − β KL(q(a) ‖ q_old(a)) + β KL(q(a) ‖ p(a|θ_old)).

    The last two share q(a)'s entropy, so they are evaluated as β E_q(a)[log q_old(a) − log p(a|θ_old)] with
    q(a) = N(K_ab K_bb⁻¹ m, K_aa − Q_aa + K_ab K_bb⁻¹ S K_bb⁻¹ K_ba) under the new θ (no log-determinant of q(a)).
    With β = 1 and an exact old posterior the optimum over q(b) is the batch posterior of all data so far.
    """
    Lb = cholesky(kuu(kernel, q.Z), jitter_log)
    value = svgp_elbo(kernel, noise, q.Z, q.mean, q.root, q.logdet, xb, yb, num_data, jitter_log, Lb) * num_data
    value = value + (1.0 - beta) * gaussian_kl(q.mean, q.root, q.logdet, Lb)
    if old is None:
        return value
    P = trisolve(Lb, kuv(kernel, q.Z, old.Z))  # L_b⁻¹ K_ba
    alpha = trisolve(Lb, P, transpose=True)  # K_bb⁻¹ K_ba
    mean_a = alpha.mT @ q.mean
    Ra = q.root.mT @ alpha
    cov_a = kuu(kernel, old.Z) - P.mT @ P + Ra.mT @ Ra

    def expected_log_density(mean: Tensor, L: Tensor, logdet: Tensor) -> Tensor:
        """E_q(a) log N(a; mean, L Lᵀ) without the 2π constant."""
        tr = trisolve(L, trisolve(L, cov_a).mT).diagonal().sum()
        r = trisolve(L, mean_a - mean)
        return -0.5 * (logdet + tr + r @ r)

    Ro, Lo = old.root.detach(), L_old.detach()
    logdet_old_prior = 2 * Lo.diagonal().log().sum()
    return value + beta * (
        expected_log_density(old.mean.detach(), Ro, old.logdet.detach())
        - expected_log_density(torch.zeros_like(mean_a), Lo, logdet_old_prior)
    )


@dataclass
class VIPSBounds:
    """The online bounds of Pescador-Barrios et al. (2024) on one batch, for every prefix of the inducing inputs Z
    (nested sets).

    ``lower[m-1]`` is the online lower bound L̂ (eq. 8, :func:`online_bound`) with the first m rows of Z as
    inducing inputs; ``upper`` is the online upper bound Û (the bound after eq. 17) with all of Z:

        L* ≤ Û = −N/2 log 2πσ² − ½ log|D| − yᵀy / 2(σ²+t) + ½‖L_D̂⁻¹ ĉ‖² + ½ t ηᵀ(I + tΛ)⁻¹η
                 − ½ log|S|/|K'ₐₐ| − ½ mᵀS⁻¹m,

    with t = tr(K̂ − Q̂) (``trace_f + trace_a``), Λ = S⁻¹ − K'ₐₐ⁻¹ = D_a⁻¹, η = S⁻¹m, and D̂, ĉ the D, c of the
    lower bound with σ² → σ² + t and D_a → D_a + tI (appendix H). L* = L̂ when Z holds the old inducing inputs and
    every new input. The old summary enters in whitened form: Γ = L_Dₒ L_Dₒᵀ − I = L_uᵀ Λ L_u (eigen-root Γ = G Gᵀ)
    and pseudo-targets r with η = L_u⁻ᵀ G r, so Λ = H Hᵀ with H = L_u⁻ᵀ G and every t-term goes through
    M_t = I + t HᵀH (eigenvalues ≥ 1): (D_a + tI)⁻¹ = H M_t⁻¹ Hᵀ, (I + tΛ)⁻¹η = H M_t⁻¹ r. Nothing needs D_a
    itself, which is infinite in directions the old data never constrained.
    """

    lower: Tensor
    upper: Tensor
    trace_f: Tensor
    trace_a: Tensor

    @property
    def t(self) -> Tensor:
        return (self.trace_f[-1] + self.trace_a[-1]).clamp_min(0.0)


def _whitened_summary(old: InducingPosterior) -> tuple[Tensor, Tensor]:
    """Root G of Γ = L_D L_Dᵀ − I (Ma × r, from its eigen-decomposition) and pseudo-targets r with G r = L_D β."""
    LD = old.LW.detach()
    Gamma = LD @ LD.mT - torch.eye(LD.shape[0], dtype=LD.dtype, device=LD.device)
    evals, V = torch.linalg.eigh(0.5 * (Gamma + Gamma.mT))
    keep = evals > evals.abs().max().clamp_min(1.0) * torch.finfo(LD.dtype).eps * LD.shape[0]
    V, root = V[:, keep], evals[keep].sqrt()
    G = V * root
    r = (V.mT @ (LD @ old.beta.detach())) / root
    return G, r


def online_bounds(
    kernel: gpytorch.kernels.Kernel,
    noise: Tensor,
    Z: Tensor,
    X: Tensor,
    y: Tensor,
    old: InducingPosterior | None = None,
    jitter_log: JitterLog | None = None,
) -> VIPSBounds:
    """L̂ for every prefix of ``Z`` and Û for all of ``Z``
    (Pescador-Barrios et al. 2024, eqs. 8 and after 17, appendix H).

    One Cholesky of K_ZZ and of D serves all prefixes: the first m rows of L_Z⁻¹ K_Z· and the leading m×m
    block of chol(D) are those of the m-point problem. Cost O((N + Ma) M² + M³). ``old`` is the summary q(u)
    of the previous batches (an :class:`~onlinegp.posterior.InducingPosterior` with L_u under the old θ).
    """
    n, M = X.shape[0], Z.shape[0]
    dtype = Z.dtype
    eye = torch.eye(M, dtype=dtype, device=Z.device)
    Lb = cholesky(kuu(kernel, Z), jitter_log)
    Af = trisolve(Lb, dense(kernel, Z, X))  # L_b⁻¹ K_bf
    D = eye + Af @ Af.mT / noise
    c = Af @ y / noise
    trace_f = diagonal(kernel, X).sum() - Af.pow(2).sum(1).cumsum(0)
    zero = torch.zeros((), dtype=dtype)
    const = -0.5 * n * (LOG2PI + noise.log()) - 0.5 * (y @ y) / noise
    weighted_a, trace_a = zero.expand(M), zero.expand(M)
    J = r = None
    if old is not None:
        Lu = old.Lu.detach()
        G, r = _whitened_summary(old)
        Kub = kuv(kernel, old.Z, Z)
        W = trisolve(Lu, Kub)  # L_u⁻¹ K_ub
        Ab = trisolve(Lb, Kub.mT)  # L_b⁻¹ K_ba (rows: prefixes)
        J = G.mT @ trisolve(Lb, W.mT).mT  # Gᵀ L_u⁻¹ K_ab L_b⁻ᵀ
        D = D + J.mT @ J
        c = c + J.mT @ r
        Kaa = kuu(kernel, old.Z)
        Ga = trisolve(Lu, trisolve(Lu, Kaa).mT)  # L_u⁻¹ K_aa L_u⁻ᵀ
        weighted_a = (G * (Ga @ G)).sum() - J.pow(2).sum(0).cumsum(0)  # tr(Λ (K_aa − Q_aa))
        trace_a = Kaa.diagonal().sum() - Ab.pow(2).sum(1).cumsum(0)
        const = const + old.LW.detach().diagonal().log().sum() - 0.5 * old.beta.detach().pow(2).sum()
    LD = cholesky(0.5 * (D + D.mT), jitter_log)
    v = trisolve(LD, c)
    logdet = LD.diagonal().log().cumsum(0)
    lower = const - logdet + 0.5 * v.pow(2).cumsum(0) - 0.5 * weighted_a - 0.5 * trace_f / noise

    t = (trace_f[-1] + trace_a[-1]).clamp_min(0.0)
    s = noise + t
    Dh = eye + Af @ Af.mT / s
    ch = Af @ y / s
    upper = -0.5 * n * (LOG2PI + noise.log()) - 0.5 * (y @ y) / s - logdet[-1]
    if old is not None:
        H = trisolve(Lu, G, transpose=True)  # L_u⁻ᵀ G
        Lt = cholesky(torch.eye(H.shape[1], dtype=dtype) + t * H.mT @ H, jitter_log)
        Jt, rt = trisolve(Lt, J), trisolve(Lt, r)
        Dh = Dh + Jt.mT @ Jt
        ch = ch + Jt.mT @ rt
        upper = (
            upper
            + 0.5 * (r @ r - rt @ rt)
            + old.LW.detach().diagonal().log().sum()
            - 0.5 * old.beta.detach().pow(2).sum()
        )
    vh = trisolve(cholesky(0.5 * (Dh + Dh.mT), jitter_log), ch)
    upper = upper + 0.5 * (vh @ vh)
    return VIPSBounds(lower=lower, upper=upper, trace_f=trace_f, trace_a=trace_a)


def noise_log_lik(y: Tensor, mean: float, var: float) -> Tensor:
    """L_noise = Σ log N(y_n; ȳ, s²) (Pescador-Barrios et al. 2024, eq. 20): the code length of the batch under
    independent noise."""
    return -0.5 * (y.shape[0] * (LOG2PI + math.log(var)) + (y - mean).pow(2).sum() / var)
