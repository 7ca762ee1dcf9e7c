"""The Attentive Kernel (Chen et al., RSS 2022; Chen et al. 2024, §III-B).

k(x, x') = (w̄ᵀ w̄') · Σ_m w̄_m w̄'_m exp(-‖x - x'‖² / 2ℓ_m²), with fixed length-scales ℓ_m spaced linearly in
[ℓ_min, ℓ_max] and w̄ = w_θ(x) / ‖w_θ(x)‖ the normalised output of a small MLP (D→10→10→10, tanh, softmax).
The amplitude α comes from wrapping it in ``gpytorch.kernels.ScaleKernel``. Since ‖w̄‖ = 1, k(x, x) = 1.
"""

from __future__ import annotations

import numpy as np
import torch
from gpytorch.kernels import Kernel
from torch import Tensor, nn

from . import native


class AttentiveKernel(Kernel):
    """Non-stationary kernel mixing fixed-length-scale RBFs with input-dependent attention weights.

    Args:
        input_dim: D, number of input dimensions (inputs are expected scaled to about [-1, 1]).
        num_lengthscales: M, number of base RBF length-scales (default 10).
        lengthscale_bounds: (ℓ_min, ℓ_max) in scaled units (default (0.05, 0.5)).
        hidden: width of the attention network's hidden layers (default 10).
    """

    has_lengthscale = False

    def __init__(
        self,
        input_dim: int,
        num_lengthscales: int = 10,
        lengthscale_bounds: tuple[float, float] = (0.05, 0.5),
        hidden: int = 10,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.input_dim = input_dim
        self.register_buffer("lengthscales", torch.linspace(*lengthscale_bounds, num_lengthscales))
        self.attention = nn.Sequential(
            nn.Linear(input_dim, hidden),
            nn.Tanh(),
            nn.Linear(hidden, hidden),
            nn.Tanh(),
            nn.Linear(hidden, num_lengthscales),
            nn.Softmax(dim=-1),
        )

    def weights(self, x: Tensor) -> Tensor:
        """Normalised attention weights w̄(x), shape (..., N, M), unit Euclidean norm per row."""
        w = self.attention(x)
        return w / w.norm(dim=-1, keepdim=True)

    def lengthscale_at(self, x: Tensor) -> Tensor:
        """Attention-weighted length-scale Σ_m w̄_m ℓ_m / Σ_m w̄_m at each input (what length-scale maps show)."""
        w = self.weights(x)
        return (w * self.lengthscales.to(w)).sum(-1) / w.sum(-1)

    def coefficients(self, dtype: torch.dtype) -> Tensor:
        """-1 / 2ℓ_m² for each base length-scale (what the squared distance is multiplied by)."""
        return (-0.5 / self.lengthscales.pow(2)).to(dtype)

    def exponentials(self, sq: Tensor) -> Tensor:
        """The base kernels exp(-d² / 2ℓ_m²) for squared distances ``sq`` (N, N'), shape (M, N, N')."""
        return _exp_(sq.unsqueeze(-3) * self.coefficients(sq.dtype)[:, None, None])

    def combine(
        self,
        w1: Tensor,
        w2: Tensor,
        sq: Tensor,
        exps: Tensor | None = None,
        scale: Tensor | None = None,
        jitter: float = 0.0,
    ) -> Tensor:
        """s·k + εI from normalised weights and squared distances; ``exps`` = :meth:`exponentials` of ``sq`` if cached.

        Callers that evaluate the kernel repeatedly on the same inputs (an optimiser's steps at fixed inducing
        inputs) pass the weights and the distances or exponentials they already have. ``w1 is w2`` means k(x, x)
        (``sq`` symmetric). ``scale`` s is an output scale (None: 1); ``jitter`` (k(x, x) only) sets ε = jitter times
        the mean diagonal of s·k, not differentiated, as :func:`~onlinegp.posterior.with_jitter`. Float64 CPU
        matrices go through the compiled routine (:mod:`.native`), which needs no cached exponentials and applies s
        and ε in place; anything else through PyTorch.
        """
        if jitter and w1 is not w2:
            raise ValueError("combine: jitter is only added to k(x, x) (w1 is w2)")
        coef = self.coefficients(sq.dtype)
        if native.usable(w1, w2, sq):
            return _NativeAttentive.apply(w1, w2, sq, coef, scale, jitter)
        k = (w1 @ w2.mT) * _Mixture.apply(w1, w2, sq, coef, exps)
        return plus_jitter(k if scale is None else k * scale, jitter)

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        if diag:
            return torch.ones(x1.shape[:-1], dtype=x1.dtype, device=x1.device)
        w1 = self.weights(x1)
        w2 = w1 if x2 is x1 else self.weights(x2)
        return self.combine(w1, w2, sqdist(x1, x2))


def plus_jitter(K: Tensor, jitter: float) -> Tensor:
    """K + εI with ε = ``jitter`` times the mean diagonal of K, not differentiated (posterior.with_jitter's ε)."""
    if not jitter:
        return K
    eps = jitter * K.diagonal().mean().detach()
    return K + eps * torch.eye(K.shape[-1], dtype=K.dtype, device=K.device)


def sqdist(x1: Tensor, x2: Tensor) -> Tensor:
    """Squared Euclidean distances (..., N, N'), exact (differences, not the expanded form) for D <= 3, or any D
    by the compiled routine (inputs that need no gradient)."""
    if not (x1.requires_grad or x2.requires_grad) and native.usable(x1, x2):
        return native.sq_distances(x1, x2)
    if x1.shape[-1] > 3:
        return torch.cdist(x1, x2).pow(2)
    sq = None
    for d in range(x1.shape[-1]):
        diff = x1[..., :, d, None] - x2[..., None, :, d]
        sq = diff * diff if sq is None else sq.addcmul_(diff, diff)
    return sq


#: largest number of base-kernel values the forward keeps for the backward (else they are recomputed)
KEEP_LIMIT = 2**22


class _NativeAttentive(torch.autograd.Function):
    """s·k + εI, k = (w1 w2ᵀ) ⊙ Σ_m (w1_m w2_mᵀ) ⊙ exp(c_m · sq), and its gradient by the compiled routine
    (:mod:`.native`). The scale s (None: 1) and the jitter (ε = jitter · mean diag s·k, not differentiated) are
    applied in place, and the backward never forms s·G for an upstream gradient G: it scales the routine's
    gradients (N × M) by s, and ∂/∂s = ⟨G, k⟩ = (⟨G, s·k + εI⟩ − ε tr G) / s reads the output. Five N × N' passes
    and allocations fewer per evaluation and gradient than scaling and jittering separately (with_jitter)."""

    @staticmethod
    def forward(
        ctx, w1: Tensor, w2: Tensor, sq: Tensor, coef: Tensor, scale: Tensor | None = None, jitter: float = 0.0
    ) -> Tensor:
        ctx.symmetric = w1 is w2 and not ctx.needs_input_grad[2]  # reads one triangle of sq: no gradient for it
        out = native.attentive(w1, w2, sq, coef, ctx.symmetric)
        if scale is not None:
            out.mul_(scale)
        ctx.eps = jitter * float(out.diagonal().mean()) if jitter else 0.0
        if ctx.eps:
            out.diagonal().add_(ctx.eps)
        scale_grad = scale is not None and ctx.needs_input_grad[4]
        ctx.save_for_backward(w1, w2, sq, coef, scale, out if scale_grad else None)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        w1, w2, sq, coef, scale, out = ctx.saved_tensors
        g1, g2, gsq = native.attentive_backward(w1, w2, sq, coef, grad, ctx.symmetric, ctx.needs_input_grad[2])
        g_scale = None
        if scale is not None:
            for g in (g1, g2, gsq):
                if g is not None:
                    g.mul_(scale)
            if ctx.needs_input_grad[4]:
                # out is contiguous and, when symmetric, equals its transpose: read grad in its own memory order
                g_scale = torch.vdot(
                    (grad.mT if ctx.symmetric and grad.mT.is_contiguous() else grad).reshape(-1), out.view(-1)
                )
                if ctx.eps:
                    g_scale = g_scale - ctx.eps * grad.diagonal().sum()
                g_scale = g_scale / scale
        return g1, g2, gsq, None, g_scale, None


class _Mixture(torch.autograd.Function):
    """Σ_m (w1_m w2_mᵀ) ⊙ exp(c_m · sq), fused: one base kernel at a time, never an (M, N, N') graph.

    The backward recomputes each exponential (or reads the cached ``exps``) instead of storing ten
    intermediate products, and skips the distance gradient unless the inputs require grad (moving Z).
    """

    @staticmethod
    def forward(ctx, w1: Tensor, w2: Tensor, sq: Tensor, coef: Tensor, exps: Tensor | None) -> Tensor:
        shape = torch.broadcast_shapes(sq.shape, w1.shape[:-1] + w2.shape[-2:-1])
        out = torch.zeros(shape, dtype=sq.dtype, device=sq.device)
        keep = exps is None and any(ctx.needs_input_grad[:3]) and coef.numel() * out.numel() <= KEEP_LIMIT
        if keep:  # the backward reads the exponentials instead of recomputing them
            exps = torch.empty((*shape[:-2], coef.shape[0], *shape[-2:]), dtype=sq.dtype, device=sq.device)
        e = torch.empty_like(out)  # one reused scratch buffer: fresh memory is slow
        c1, r2 = _columns(w1), _columns(w2)  # w[..., :, m] as contiguous vectors (strided broadcasts are slow)
        for m in range(coef.shape[0]):
            col, row = c1[..., m, :, None], r2[..., m, None, :]
            if exps is None:  # exponential into the scratch buffer, scaled there: fewest passes over memory
                _exp(sq, coef, m, None, e).mul_(row)
                out.addcmul_(e, col)
                continue
            if keep:
                _exp(sq, coef, m, None, exps[..., m, :, :])
            torch.mul(col, row, out=e)
            out.addcmul_(e, exps[..., m, :, :])
        ctx.save_for_backward(w1, w2, sq, coef, exps)
        return out

    @staticmethod
    def backward(ctx, grad: Tensor):
        w1, w2, sq, coef, exps = ctx.saved_tensors
        need_w1, need_w2, need_sq = ctx.needs_input_grad[:3]
        g1 = torch.empty_like(w1) if need_w1 else None
        g2 = torch.empty_like(w2) if need_w2 else None
        gsq = torch.zeros_like(grad) if need_sq else None
        e, P = torch.empty_like(grad), torch.empty_like(grad)
        c1, c2 = _columns(w1), _columns(w2)
        if w1 is w2 and not need_sq:  # k(x, x): symmetric exponentials, one matvec per base kernel
            grad = grad + grad.mT
            for m in range(coef.shape[0]):
                torch.mul(grad, _exp(sq, coef, m, exps, e), out=P)
                g1[..., :, m] = (P @ c1[..., m, :, None]).squeeze(-1)
            return g1, None, None, None, None
        for m in range(coef.shape[0]):
            torch.mul(grad, _exp(sq, coef, m, exps, e), out=P)
            if need_w1:
                g1[..., :, m] = (P @ c2[..., m, :, None]).squeeze(-1)
            if need_w2:
                g2[..., :, m] = (P.mT @ c1[..., m, :, None]).squeeze(-1)
            if need_sq:
                P.mul_(c1[..., m, :, None]).mul_(c2[..., m, None, :])
                gsq.add_(P, alpha=float(coef[m]))
        return g1, g2, gsq, None, None


def _columns(w: Tensor) -> Tensor:
    """The columns of ``w`` (..., N, M) as contiguous rows (..., M, N)."""
    return w.mT.contiguous()


def _exp(sq: Tensor, coef: Tensor, m: int, exps: Tensor | None, buffer: Tensor) -> Tensor:
    """exp(c_m · sq), from the cache if given, else computed into ``buffer``."""
    if exps is not None:
        return exps[..., m, :, :]
    return _exp_(torch.mul(sq, coef[m], out=buffer))


def _exp_(x: Tensor) -> Tensor:
    """In-place exp of a tensor that needs no gradient. With one torch thread on the CPU it is NumPy's, whose
    vectorised float64 exp is about twice as fast as torch 2.13's on this machine kind; with more threads torch's
    (parallel) exp is faster."""
    if x.device.type == "cpu" and x.is_contiguous() and not x.requires_grad and torch.get_num_threads() == 1:
        array = x.numpy()
        np.exp(array, out=array)
        return x
    return x.exp_()
