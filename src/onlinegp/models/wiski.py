"""WISKI: Woodbury-inversion structured kernel interpolation (Stanton et al. 2021, §4 and appendix A).

SKI approximates K_XX ≈ W K_UU Wᵀ with U a product grid of m inducing points (≤ 3 dimensions) and W sparse
cubic (Keys) interpolation weights, 4^d non-zeros per row. With a root K_UU = L Lᵀ and the noise precision folded in
(A = WᵀD⁻¹W, c = WᵀD⁻¹y, D = σ²I or fixed noise), the Woodbury identity (Eqs. 5-15, appendix A.5) gives, with
Q' = I + Lᵀ A L = L_Q L_Qᵀ and β = L_Q⁻¹ Lᵀ c:

    log p(y) = −½ [yᵀD⁻¹y − ‖β‖² + log|Q'| + log|D| + n log 2π]
    mean(x*) = w*ᵀ L Q'⁻¹ Lᵀ c = w*ᵀ α,        α = R β,   R = L L_Q⁻ᵀ
    cov_f(x*, x') = w*ᵀ L Q'⁻¹ Lᵀ w' = (Rᵀw*)ᵀ(Rᵀw')

For D = σ²I this is the SGPR form of :mod:`onlinegp.posterior` with u = f(U), whose W is Q'. The only data-dependent
state is WᵀW, Wᵀy, yᵀy and n (precision-weighted for fixed noise): each observation adds a 4^d × 4^d block (Eqs. 16-17),
constant time. By default WᵀW is kept itself (O(16^d) per point, exact at every rank); ``wtw_rank=r`` keeps the
paper's rank-r root of it instead (§4.2; memory O(m r), :meth:`SKIPosterior.from_root`), updated by the paper's Gill
step or by truncation.

Two algebras compute Q' (``algebra``):

* ``'kronecker'`` (the default for the RBF kernel): K_UU = ⊗_d K_d on the product grid (Saatçi 2012; Wilson &
  Nickisch 2015), L = ⊗_d chol(K_d) from the small per-dimension matrices, Lᵀ A L by mode products in O(m² Σ_d g_d),
  one m × m Cholesky of Q' (m³/3) and, for the gradient, L_Q⁻¹ (m³/3) whose g_d × g_d partial traces give the
  gradient in each factor, and the gradient in θ written out in one autograd node
  (:func:`onlinegp.kronecker.grid_marginal`): no dense m × m kernel matrix is formed or factorised, Q'⁻¹ itself is not
  formed, and no m³ matrix product is taken.
* ``'dense'``: K_UU formed and factorised densely (Cholesky, or a rank-r Lanczos root), Lᵀ A L by dense products, the
  gradient by autograd through the factorisation: the slow reference the tests compare the fast path with.

The prediction caches R and α (an m³ triangular solve) are rebuilt lazily at the first prediction after an update or a
change of any parameter, not after every point. So one Adam step per observation (Algorithm 1) costs
O(m² Σ_d g_d + 2m³/3) whatever n is (about 5x one m × m Cholesky at m = 1000, ``benchmarks/perf/bench_wiski.py``), and
predictions O(4^d m) per point. Without a projection a new point's terms are added to WᵀW once, in place, before the
step (``KernelGP.update`` restores its copy of the state if the step fails). The steps, not absorbing the points
(O(16^d) each), are the whole cost of an update. A batch of B points takes up to B steps by default, one per
observation as Algorithm 1 streams them, and skips the rest once the objective has settled: once the marginal
likelihood per point has changed by less than ``training.tolerance`` (:data:`SETTLED`) per step over the last ten
steps, the remaining steps would barely move the objective (ours: Algorithm 1 takes one point at a time and
says nothing of batches; ``Training(tolerance=0)`` takes all B). ``training=Training(steps=k)`` takes k per update
instead (faster, and less accurate where the projection must still be learnt:
``benchmarks/studies/study_defaults_variants.py --method wiski``).

For D > 3 inputs a learnt feature map h(x) = tanh(BN(A x + b) / 2) to [-1, 1]² is used (§4.3, §5.1: "a linear
projection ... transformed via a batch-norm operation and the non-linear tanh"; the bias, the batch-norm without affine
parameters and the halved argument are the authors' released implementation's): past interpolation vectors are
frozen, so the projection's gradient only sees the newest points: the objective of each step is the marginal
likelihood of all data with the stored caches fixed and the new batch's w(h(x; φ)) differentiable, exactly Eq. 18
(A.5) for one point. θ and φ take their Adam step together on that objective, then the batch is absorbed with the
stepped φ (Algorithm 1 absorbs first, then steps φ and θ in turn; here θ's gradient is taken at the pre-step φ,
saving a second pass). Batch-norm uses the first batch's statistics (gradients through them on that batch, as in
batch training); they are then frozen, so that later single points are normalised by the same map as the stored ones.

The set-up defaults follow Stanton et al. 2021, Table C.1 (skillcraft and powerplant rows): the first batch is
pre-training, 200 full-batch Adam steps (epochs) at 5e-2 (θ) and 5e-3 (φ) with cosine annealing to zero, then one
step per update at 5e-3 (θ) and 5e-4 (φ); the RBF length-scale starts at 0.693 (gpytorch's default, softplus(0)).
Elevators and protein use 1e-2/1e-3 and 1e-3/1e-4 (:data:`onlinegp.experiments.bench.wiski.TABLE_C1`). Pre-training needs a batch
that can define θ: 200 steps on a single point drove the length-scales to 0.04 of the input half-range, and one small
step per later point had not recovered them 99 points on (RMSE 0.44 of the target's std after a stream of 100 single
points, 0.075 for the same points in one batch). So a first batch of fewer than ``MIN_FIT_POINTS`` points is
absorbed under the initial θ and held (``held_x``, ``held_y``, ``held_noise``); the update whose points, with the held
ones, reach ``MIN_FIT_POINTS`` empties the stored terms and absorbs them all as the first batch, pre-training on them.
A first batch of at least that many points is pre-trained on at once, as always.

``WISKIClassifier`` is Dirichlet-based classification (Milios et al. 2018; Stanton et al. 2021, §5.2, appendix A.5): one
fixed-noise WISKI regression per class on transformed one-hot targets, class probabilities by sampling.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass
from typing import Any

import gpytorch
import torch
from torch import Tensor, nn

from ..base import KernelGP, PhaseTimer
from ..inducing import Fixed
from ..kernels.product_matern import ProductMatern52Kernel
from ..kronecker import GridFactors, grid_marginal, kron_dense, kron_matmul
from ..linalg import JitterLog, cholesky, lanczos_basis, trisolve
from ..objectives import log_prior
from ..posterior import KUU_JITTER, kuu
from ..training import (
    LBFGS_ITERATIONS,
    OPTIMIZERS,
    Pretraining,
    Trained,
    Training,
    gradient_steps,
    lbfgs_fit,
    resolve_training,
)
from ..validation import as_tensor_2d
from .osgpr import MIN_FIT_POINTS
from .registry import register

LOG2PI = math.log(2 * math.pi)

#: default points per dimension: m = 256 in 1-D and 2-D (Stanton et al. 2021, Table C.1), 10³ = 1000 in 3-D (§5.3)
DEFAULT_GRID = {1: 256, 2: 16, 3: 10}
#: the jitter, relative to its mean diagonal, that the first batch's WᵀW's null eigenvalues are raised to for the Gill
#: update's root
GILL_JITTER = 1e-8
#: initial RBF length-scale (gpytorch's default, softplus(0), which the authors' runs kept; Stanton et al. 2021, App. C)
DEFAULT_LENGTHSCALE = 0.693
#: the default ``training.tolerance``: a batch's per-observation steps stop once the marginal likelihood per point
#: changes by less than this per step (over the last ten); level with every step on the defaults bench's sets
#: (``benchmarks/studies/results/study_wiski_defaults_060.json``), a settled 2-D batch of 1000 23x cheaper than all 1000 steps
#: (``benchmarks/perf/bench_wiski.py --batch``, ``benchmarks/perf/results/wiski-batch.json``)
SETTLED = 1e-6


class CubicGrid:
    """Product grid over [-1 - margin, 1 + margin]^d with Keys cubic-convolution interpolation (a = -1/2).

    Each dimension has ``g`` points spaced ``h`` apart with one extra point beyond each end of the interpolable
    range, so an input there uses grid points i-1..i+2 (4 per dimension, 4^d in all). Inputs beyond the range
    are clamped onto its edge (``clamped`` counts them). Weights are differentiable in the inputs.
    """

    def __init__(self, sizes: list[int], margin: float = 0.1, dtype: torch.dtype = torch.float64):
        if any(int(g) < 4 for g in sizes):
            raise ValueError(f"grid_size must be at least 4 points per dimension for cubic interpolation, got {sizes}")
        self.sizes = [int(g) for g in sizes]
        self.dim = len(self.sizes)
        self.lower = -1.0 - float(margin)
        self.spacing = [(2.0 + 2.0 * margin) / (g - 3) for g in self.sizes]
        self.dtype = dtype
        strides = [1] * self.dim
        for k in range(self.dim - 2, -1, -1):
            strides[k] = strides[k + 1] * self.sizes[k + 1]
        self.strides = strides
        # the per-dimension constants of :meth:`weights`, as tensors over the dimensions
        self._spacing = torch.tensor(self.spacing, dtype=dtype)
        self._one = torch.ones(self.dim, dtype=dtype)
        self._top = torch.tensor([g - 2.0 for g in self.sizes], dtype=dtype)
        self._first = torch.ones(self.dim, dtype=torch.long)
        self._last = torch.tensor([g - 3 for g in self.sizes])
        self._offsets = torch.arange(-1, 3)
        self._strides = torch.tensor(strides).unsqueeze(-1)
        # Keys' four cubics as [t³, t², t, 1] @ _keys
        self._powers = torch.tensor([3.0, 2.0, 1.0, 0.0], dtype=dtype)
        self._keys = torch.tensor(
            [[-0.5, 1.5, -1.5, 0.5], [1.0, -2.5, 2.0, -0.5], [-0.5, 0.0, 0.5, 0.0], [0.0, 1.0, 0.0, 0.0]], dtype=dtype
        )

    @property
    def size(self) -> int:
        return math.prod(self.sizes)

    def axes(self) -> list[Tensor]:
        """The grid's coordinates along each dimension (g_d,)."""
        return [self.lower - h + h * torch.arange(g, dtype=self.dtype) for g, h in zip(self.sizes, self.spacing)]

    def points(self) -> Tensor:
        """The (m, d) grid, in the row-major order of the flattened indices."""
        return torch.cartesian_prod(*self.axes()).reshape(self.size, self.dim)

    def weights(self, x: Tensor) -> tuple[Tensor, Tensor, int]:
        """Indices (n, 4^d) and cubic weights (n, 4^d) of each row of ``x`` (n, d), and how many were clamped: the
        per-dimension positions and weights of all dimensions at once, then their outer sums and products."""
        n = x.shape[0]
        s = (x - self.lower) / self._spacing + 1.0  # position in grid units; interpolable in [1, g - 2]
        clamped = int(((s < 1.0) | (s > self._top)).any(-1).sum())
        s = s.clamp(self._one, self._top)
        i = s.detach().floor().long().clamp(self._first, self._last)
        w = (s - i).unsqueeze(-1).pow(self._powers) @ self._keys  # (n, d, 4)
        j = (i.unsqueeze(-1) + self._offsets) * self._strides  # (n, d, 4): grid points i-1..i+2, flat
        idx, val = j[:, 0], w[:, 0]
        for k in range(1, self.dim):
            idx = (idx.unsqueeze(-1) + j[:, k].unsqueeze(1)).reshape(n, -1)
            val = (val.unsqueeze(-1) * w[:, k].unsqueeze(1)).reshape(n, -1)
        return idx, val, clamped

    def sparse(self, x: Tensor) -> Tensor:
        """W as a sparse COO (n, m) matrix (differentiable in its values)."""
        idx, val, _ = self.weights(x)
        rows = torch.arange(x.shape[0]).unsqueeze(-1).expand_as(idx)
        return torch.sparse_coo_tensor(
            torch.stack([rows.reshape(-1), idx.reshape(-1)]),
            val.reshape(-1),
            (x.shape[0], self.size),
            check_invariants=False,
        )

    def dense(self, x: Tensor) -> Tensor:
        """The dense (n, m) interpolation matrix W (for tests and small problems)."""
        idx, val, _ = self.weights(x)
        return torch.zeros(x.shape[0], self.size, dtype=val.dtype).scatter_add(1, idx, val)


def add_terms(
    WtW: Tensor,
    Wty: Tensor,
    idx: Tensor,
    val: Tensor,
    y: Tensor,
    prec: Tensor | None = None,
    in_place: bool = False,
) -> tuple[Tensor, Tensor]:
    """WᵀD⁻¹W + Σ_i p_i w_i w_iᵀ and WᵀD⁻¹y + Σ_i p_i y_i w_i (Eqs. 16-17), 4^d × 4^d per row: out of place, or
    ``in_place`` (no copy of the m × m WᵀD⁻¹W; the given tensors are returned)."""
    pv = val if prec is None else val * prec.unsqueeze(-1)
    rows = idx.unsqueeze(-1).expand(-1, -1, idx.shape[1])
    cols = idx.unsqueeze(1).expand(-1, idx.shape[1], -1)
    put, add = (WtW.index_put_, Wty.index_add_) if in_place else (WtW.index_put, Wty.index_add)
    WtW = put((rows.reshape(-1), cols.reshape(-1)), (pv.unsqueeze(-1) * val.unsqueeze(1)).reshape(-1), accumulate=True)
    Wty = add(0, idx.reshape(-1), (pv * y.unsqueeze(-1)).reshape(-1))
    return WtW, Wty


@torch.no_grad()
def leading_root(L: Tensor, rank: int) -> tuple[Tensor, Tensor]:
    """The best rank-``rank`` root of L Lᵀ (its leading eigenpairs U Λ Uᵀ, from the smaller of LᵀL and L Lᵀ) with
    orthogonal columns, L' = U Λ^½, and its pseudo-inverse root J' = U Λ^-½ (so J'J'ᵀ = (L'L'ᵀ)⁺). Eigenvalues at
    round-off level (below max(m, k) ε λ_max) are dropped, so L' has at most min(rank, rank(L)) columns and is exact
    when rank(L) ≤ ``rank``."""
    m, k = L.shape
    if k == 0:
        return L, L
    lam, E = torch.linalg.eigh(L.mT @ L if k <= m else L @ L.mT)
    keep = lam > max(m, k) * torch.finfo(L.dtype).eps * lam[-1].clamp_min(torch.finfo(L.dtype).tiny)
    lam, E = lam[keep][-rank:], E[:, keep][:, -rank:]
    root = L @ E if k <= m else E * lam.sqrt()
    return root, root / lam


@dataclass
class SKIPosterior:
    """The Woodbury SKI posterior: ``mll`` (differentiable), R (m, r) and α (m,) for predictions: mean(x*) = w*ᵀα and
    cov_f(x*, x') = (Rᵀw*)ᵀ(Rᵀw'), or, with ``prior`` (the roots C_d of K_UU = ⊗_d C_d C_dᵀ),
    cov_f(x*, x') = w*ᵀK_UU w' − (Rᵀw*)ᵀ(Rᵀw')."""

    mll: Tensor
    R: Tensor | None
    alpha: Tensor | None
    prior: list[Tensor] | None = None

    @classmethod
    def from_terms(
        cls,
        L: Tensor,
        A: Tensor,
        c: Tensor,
        yy: Tensor,
        logdet_noise: Tensor,
        n: int,
        jitter_log: JitterLog | None = None,
        predictive: bool = True,
    ) -> "SKIPosterior":
        """From a dense root L of K_UU and precision-weighted A = WᵀD⁻¹W, c = WᵀD⁻¹y, yy = yᵀD⁻¹y, log|D|: dense
        products and autograd through the Cholesky of Q' (the reference algebra).

        ``predictive=False`` skips R and α (an m²r solve the marginal likelihood alone does not need)."""
        LtA = L.mT @ A
        Qp = LtA @ L
        Qp = 0.5 * (Qp + Qp.mT) + torch.eye(Qp.shape[0], dtype=Qp.dtype)
        LQ = cholesky(Qp, jitter_log)
        beta = trisolve(LQ, L.mT @ c)
        mll = -0.5 * (yy - beta @ beta + 2 * LQ.diagonal().log().sum() + logdet_noise + n * LOG2PI)
        if not predictive:
            return cls(mll=mll, R=None, alpha=None)
        return cls.finish(mll, LQ, L.mT, beta)

    @classmethod
    def from_root(
        cls,
        C: list[Tensor],
        L: Tensor,
        c: Tensor,
        yy: Tensor,
        logdet_noise: Tensor,
        s: Tensor | float,
        n: int,
        jitter_log: JitterLog | None = None,
        predictive: bool = True,
    ) -> "SKIPosterior":
        """From a root WᵀD⁻¹W ≈ s L Lᵀ (m, k) instead of WᵀD⁻¹W itself (Stanton et al. 2021, Eqs. 11-15, §4.2): with
        K_UU = C Cᵀ (C = ⊗_d C_d), B = Cᵀ L, e = Cᵀ c and Q = I_k + s BᵀB = L_Q L_Qᵀ (k × k),

            log p(y) = −½ [s yy − s² eᵀe + s³ ‖L_Q⁻¹ Bᵀe‖² + log|Q| + log|D| + n log 2π]

        (c = Wᵀy, yy = yᵀy, s = 1/σ²; s = 1 for fixed noise folded into L, c and yy). O(k m Σ_d g_d + m k² + k³),
        differentiable through C (autograd); exact when L Lᵀ = WᵀW. The posterior of u = f(U) is C(I − s B Q⁻¹ Bᵀ)Cᵀ
        with mean s C(e − s B Q⁻¹ Bᵀe): ``alpha`` = that mean, R = √s C B L_Q⁻ᵀ and ``prior`` = C."""
        B = kron_matmul(C, L, transpose=True)
        e = kron_matmul(C, c, transpose=True)
        Q = torch.eye(B.shape[1], dtype=B.dtype) + s * (B.mT @ B)
        LQ = cholesky(0.5 * (Q + Q.mT), jitter_log)
        v = trisolve(LQ, B.mT @ e)
        quad = s * yy - s * s * (e @ e) + s**3 * (v @ v)
        mll = -0.5 * (quad + 2 * LQ.diagonal().log().sum() + logdet_noise + n * LOG2PI)
        if not predictive:
            return cls(mll=mll, R=None, alpha=None)
        G = trisolve(LQ, B.mT).mT  # B L_Q⁻ᵀ
        alpha = s * kron_matmul(C, e - s * (G @ v))
        return cls(mll=mll, R=s**0.5 * kron_matmul(C, G), alpha=alpha, prior=C)

    @classmethod
    def finish(cls, mll: Tensor, LQ: Tensor, Lt: Tensor, beta: Tensor) -> "SKIPosterior":
        """With the prediction caches R = L L_Q⁻ᵀ (from Lᵀ) and α = R β."""
        R = trisolve(LQ, Lt).mT
        return cls(mll=mll, R=R, alpha=R @ beta)


class InputProjection(nn.Module):
    """h(x) = tanh(BN(A x + b) / 2) to [-1, 1]^k (Stanton et al. 2021, §4.3, §5.1; the text says "a linear projection
    ... batch-norm ... tanh", the bias, the batch-norm without affine parameters and the halved argument are from the
    authors' released code). The batch-norm statistics are frozen after the first batch, so from then on the bias
    shifts the features and learns with A."""

    def __init__(self, input_dim: int, out_dim: int = 2, seed: int = 0, dtype: torch.dtype = torch.float64):
        super().__init__()
        gen = torch.Generator().manual_seed(int(seed))
        self.linear = nn.Linear(input_dim, out_dim).to(dtype)
        with torch.no_grad():
            self.linear.weight.copy_(
                torch.randn(out_dim, input_dim, generator=gen, dtype=dtype, device="cpu") / math.sqrt(input_dim)
            )
            self.linear.bias.zero_()
        self.norm = nn.BatchNorm1d(out_dim, affine=False).to(dtype)  # holds the frozen statistics

    def forward(self, x: Tensor, batch_stats: bool = False) -> Tensor:
        z = self.linear(x)
        if batch_stats:
            mu, var = z.mean(0), z.var(0, unbiased=False)
        else:
            mu, var = self.norm.running_mean, self.norm.running_var
        return torch.tanh((z - mu) / (var + self.norm.eps).sqrt() / 2)

    @torch.no_grad()
    def freeze_statistics(self, x: Tensor) -> None:
        """Set the batch-norm statistics to those of ``A x`` (the first batch), so eval mode equals batch mode."""
        z = self.linear(x)
        self.norm.running_mean.copy_(z.mean(0))
        self.norm.running_var.copy_(z.var(0, unbiased=False))


def grid_kind(kernel: Any) -> str | None:
    """The :class:`~onlinegp.kronecker.GridFactors` kind of a kernel that is a product over the grid's dimensions:
    'rbf' for ScaleKernel(RBFKernel), 'matern52' for ScaleKernel(ProductMatern52Kernel) (``kernel='matern52-product'``);
    None for any other kernel (the dense algebra)."""
    if not isinstance(kernel, gpytorch.kernels.ScaleKernel) or kernel.base_kernel.active_dims is not None:
        return None
    return {gpytorch.kernels.RBFKernel: "rbf", ProductMatern52Kernel: "matern52"}.get(type(kernel.base_kernel))


@register(
    "wiski", "WISKI: SKI grid + Woodbury caches, constant-time updates, one Adam step per point (Stanton et al. 2021)"
)
class WISKI(Trained, KernelGP):
    """WISKI regression (Stanton et al. 2021): constant-time exact SKI updates and one Adam step per observation
    (⌈√B⌉ per batch of B).

    Args:
        input_dim: D. Up to 3 the grid is over the (scaled) inputs; above, over a learnt 2-D projection.
        grid_size: points per grid dimension (int or list); default 256 (1-D), 16 (2-D), 10 (3-D).
        margin: the grid's interpolable range is [-1 - margin, 1 + margin] in scaled inputs (default 0.1).
        kernel: 'rbf' (default, ARD, length-scale starting at 0.693), 'matern52-product' (a product of 1-D
            Matérn-5/2 kernels, one length-scale: what the authors' gpytorch code ran for Bayesian optimisation),
            'matern52', ... or a gpytorch Kernel over the grid dimensions; priors registered on it join the objective.
        algebra: 'kronecker' (per-dimension factors; needs a product kernel: 'rbf', the default, or
            'matern52-product'), 'dense' (the reference: dense K_UU, autograd through its factorisations) or 'auto'
            (default: kronecker where it applies, i.e. a product kernel and the Cholesky root).
        training: a :class:`~onlinegp.training.Training` (or a dict of its fields) over :attr:`TRAINING`:
            ``optimizer`` 'adam' (default) or 'lbfgs' (after each update θ and the projection fitted to convergence
            on the marginal likelihood of all data so far: the Bayesian-optimisation set-up of Stanton et al. 2021,
            appendix C.2); ``steps``, Adam steps per update after the first (None: B for a batch of B points,
            Algorithm 1's one step per observation) or L-BFGS iterations at most (None: ``LBFGS_ITERATIONS``); 0 freezes the
            hyper-parameters; ``tolerance``, the Adam steps of an update stop once the objective settles
            (:data:`SETTLED`; 0: every step); ``lr``, kernel and noise online (5e-3) and ``lr_network``, the
            projection (5e-4); ``pretrain``, :class:`~onlinegp.training.Pretraining`: full-batch Adam steps on the first batch (200,
            Table C.1's T_batch) at ``lr`` (5e-2) and ``lr_network`` (5e-3), cosine-annealed to zero; 0 steps make the
            first update an ordinary one. The rates are Table C.1's (skillcraft and powerplant rows).
        root: 'cholesky' (r = m) or 'lanczos' (rank ``rank`` root of K_UU, dense algebra; basis held fixed in the
            gradient).
        wtw_rank: keep a rank-r root of WᵀW (m x r) instead of WᵀW itself (m x m; None, the default, exact at every
            rank): Stanton et al. 2021, §4.2, memory O(m r), O(m r²) per point. The root is of the first batch's WᵀW
            (its leading r eigenpairs), then updated as ``wtw_update`` says.
        wtw_update: with ``wtw_rank``, 'gill' (default; the paper's §4.2 and appendix A: L ← L B with B Bᵀ = I +
            p pᵀ, p = Jᵀw, Gill et al. 1974: exact only for new points whose w lies in the root's span, which the
            first batch fixes, its null directions raised to a 1e-8 relative jitter; the rest of w is dropped;
            r = m is exact to the jitter) or 'truncate' (ours: append w as a column and keep the
            leading r eigen-directions, :func:`leading_root`, and Wᵀy projected onto them, so that the stored
            terms stay those of a dataset and log p(y) a likelihood; exact while rank(WᵀW) ≤ r).
        fixed_noise: heteroscedastic fixed-noise likelihood (appendix A.5): ``update(x, y, noise=...)`` with each
            row's noise variance in user units (``takes_noise`` is then True; without it ``noise=`` is refused).
        projection_dim: grid dimensions of the learnt projection when D > 3 (default 2).
        **options: kernel_options, noise, x_bounds, y_stats, seed, dtype, as for every :class:`~onlinegp.base.KernelGP`.
    """

    _dynamic = ("WtW", "Wty", "yty", "logdet_noise", "wtw_root", "wtw_inv_root", "held_x", "held_y", "held_noise")
    #: the defaults of ``training`` (Stanton et al. 2021, Table C.1; ``steps`` None: up to B Adam steps for B points,
    #: stopping once the objective settles (``tolerance``), or L-BFGS to convergence)
    TRAINING = Training(
        optimizer="adam",
        lr=5e-3,
        lr_network=5e-4,
        tolerance=SETTLED,
        pretrain=Pretraining(steps=200, lr=5e-2, lr_network=5e-3),
    )
    TRAINING_FIELDS = ("optimizer", "steps", "lr", "lr_network", "tolerance", "pretrain")

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        grid_size: int | list[int] | None = None,
        margin: float = 0.1,
        kernel: Any = "rbf",
        algebra: str = "auto",
        training: Training | dict | None = None,
        root: str = "cholesky",
        rank: int | None = None,
        wtw_rank: int | None = None,
        wtw_update: str = "gill",
        fixed_noise: bool = False,
        projection_dim: int = 2,
        **options: Any,
    ):
        kernel_options = options.pop("kernel_options", None)
        if isinstance(kernel, str):
            kernel_options = {"lengthscale": DEFAULT_LENGTHSCALE, **(kernel_options or {})}
        super().__init__(input_dim, kernel=kernel, kernel_options=kernel_options, **options)
        if root not in ("cholesky", "lanczos"):
            raise ValueError(f"root must be 'cholesky' or 'lanczos', got {root!r}")
        if algebra not in ("auto", "kronecker", "dense"):
            raise ValueError(f"algebra must be 'auto', 'kronecker' or 'dense', got {algebra!r}")
        if algebra == "kronecker" and root != "cholesky":
            raise ValueError("the Lanczos root is only available with algebra='dense'")
        training = resolve_training(training, self.TRAINING, type(self).__name__, self.TRAINING_FIELDS, OPTIMIZERS)
        if training.steps is None and training.optimizer == "lbfgs":
            training = dataclasses.replace(training, steps=LBFGS_ITERATIONS)
        self.training = training
        if not 1 <= projection_dim <= 3:
            raise ValueError(f"projection_dim must be 1, 2 or 3 (the grid is exponential in it), got {projection_dim}")
        if wtw_update not in ("gill", "truncate"):
            raise ValueError(f"wtw_update must be 'gill' or 'truncate', got {wtw_update!r}")
        if wtw_rank is not None and root != "cholesky":
            raise ValueError("wtw_rank needs root='cholesky' (a square root of K_UU)")
        self.wtw_rank, self.wtw_update = None if wtw_rank is None else int(wtw_rank), wtw_update
        self._grid_size, self.margin, self.projection_dim, self._rank = (
            grid_size,
            float(margin),
            int(projection_dim),
            rank,
        )
        self.root, self._algebra = root, algebra
        self.fixed_noise = bool(fixed_noise)
        self._cache: tuple[Tensor, SKIPosterior] | None = None  # (parameters it was built under, the caches)
        # the points of a first batch too small to pre-train on, absorbed but not yet pre-trained on (scaled units;
        # the noise only with fixed_noise): see the class docstring
        self.held_x: Tensor | None = None
        self.held_y: Tensor | None = None
        self.held_noise: Tensor | None = None

    def options(self) -> dict[str, Any]:
        return {
            **super().options(),
            "grid_size": self._grid_size,
            "margin": self.margin,
            "algebra": self._algebra,
            "training": self.training,
            "root": self.root,
            "rank": self._rank,
            "wtw_rank": self.wtw_rank,
            "wtw_update": self.wtw_update,
            "fixed_noise": self.fixed_noise,
            "projection_dim": self.projection_dim,
        }

    def _kernel_dim(self, input_dim: int) -> int:
        """The kernel lives on the grid: over the inputs up to 3 of them, else over the learnt projection."""
        return input_dim if input_dim <= 3 else self.projection_dim

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        self.grid_dim = self._kernel_dim(input_dim)
        sizes = self._grid_size if self._grid_size is not None else DEFAULT_GRID[self.grid_dim]
        sizes = [int(sizes)] * self.grid_dim if isinstance(sizes, int) else [int(g) for g in sizes]
        if len(sizes) != self.grid_dim:
            raise ValueError(f"grid_size has {len(sizes)} entries but the grid has {self.grid_dim} dimensions")
        self.grid = CubicGrid(sizes, self.margin, self.dtype)
        m = self.grid.size
        if self._rank is not None and not 1 <= int(self._rank) <= m:
            raise ValueError(f"rank must be between 1 and the grid size m = {m}, got {self._rank}")
        self.rank = m if self._rank is None else int(self._rank)
        if self.wtw_rank is not None and not 1 <= self.wtw_rank <= m:
            raise ValueError(f"wtw_rank must be between 1 and the grid size m = {m}, got {self.wtw_rank}")
        kind = grid_kind(self.kernel)
        if self._algebra == "kronecker" and kind is None:
            raise ValueError(
                "algebra='kronecker' needs a product kernel over all grid dimensions: ScaleKernel(RBFKernel) or "
                "kernel='matern52-product' (no active_dims)"
            )
        on_host = self.device.type == "cpu"  # the Kronecker marginal runs SciPy's LAPACK on host memory
        if self._algebra == "kronecker" and not on_host:
            raise ValueError(
                f"algebra='kronecker' runs on the CPU only (SciPy's LAPACK); on {self.device} use algebra='dense' "
                "(or 'auto', which chooses it there)"
            )
        self.algebra = (
            "kronecker" if self._algebra != "dense" and kind and self.root == "cholesky" and on_host else "dense"
        )
        self.projection = InputProjection(input_dim, self.grid_dim, self.seed, self.dtype) if input_dim > 3 else None
        self.optimizer = self._adam(self.training.lr, self.training.lr_network)
        self.register_buffer("U", self.grid.points())
        self.grid_factors = GridFactors(self.grid.axes(), KUU_JITTER.get(self.dtype, 1e-6), kind or "rbf")
        self._empty_terms()

    def _empty_terms(self) -> None:
        """The stored terms of no data: WᵀW itself (m x m), or with ``wtw_rank`` its root (m x k, k ≤ r) and, for
        'gill', the pseudo-inverse root; Wᵀy, yᵀy, log|D|."""
        m = self.grid.size
        self.WtW = torch.zeros(m, m, dtype=self.dtype) if self.wtw_rank is None else None
        self.wtw_root = None if self.wtw_rank is None else torch.zeros(m, 0, dtype=self.dtype)
        self.wtw_inv_root = None if self.wtw_rank is None else torch.zeros(m, 0, dtype=self.dtype)
        self.Wty = torch.zeros(m, dtype=self.dtype)
        self.yty = torch.zeros((), dtype=self.dtype)
        self.logdet_noise = torch.zeros((), dtype=self.dtype)

    def _adam(self, lr: float, lr_projection: float) -> torch.optim.Adam:
        """Adam over θ (kernel, and noise unless fixed) at ``lr`` and the projection's φ at ``lr_projection``."""
        noise_params = [] if self.fixed_noise else list(self.likelihood.parameters())
        groups = [{"params": list(self.kernel.parameters()) + noise_params, "lr": lr}]
        if self.projection is not None:
            groups.append({"params": list(self.projection.parameters()), "lr": lr_projection})
        return torch.optim.Adam(groups, fused=True)  # one kernel for all parameters: half the time of the loop

    # ------------------------------------------------------------------ the public extras
    @property
    def takes_noise(self) -> bool:
        """With ``fixed_noise=True``, ``update(x, y, noise=...)`` takes (and needs) the per-point noise variances in
        user units (Stanton et al. 2021, appendix A.5); otherwise the noise is learnt and ``noise=`` is refused."""
        return self.fixed_noise

    @torch.no_grad()
    def log_marginal_likelihood(self) -> float:
        """log p(y) of all data under the current hyper-parameters (scaled units; Eq. 13)."""
        if self.num_updates == 0:
            raise RuntimeError("the model has seen no data yet")
        return float(self._posterior(self._stored, self.Wty, self.yty, self.logdet_noise, self.num_data, False).mll)

    @torch.no_grad()
    def predictive_caches(self) -> tuple[Tensor, Tensor]:
        """R (m, r) and α (m,) of the current data and parameters, rebuilt only when either changed since the last."""
        post = self._caches()
        return post.R, post.alpha

    def _caches(self) -> SKIPosterior:
        key = torch.cat([p.detach().reshape(-1) for p in self.parameters()])
        if self._cache is None or not torch.equal(self._cache[0], key):
            self._cache = (key, self._posterior(self._stored, self.Wty, self.yty, self.logdet_noise, self.num_data))
        return self._cache[1]

    @property
    def _stored(self) -> Tensor:
        """WᵀW (m, m), or with ``wtw_rank`` its root (m, k)."""
        return self.WtW if self.wtw_rank is None else self.wtw_root

    @property
    def num_inducing(self) -> int | None:
        return None if self.input_dim is None else self.grid.size

    @property
    def selector(self) -> Fixed | None:
        """The grid as a fixed inducing set (None before the first batch): its ``num_inducing``, m, bounds the
        model's size, so the size check (:func:`onlinegp.health.size`) does not take the grid for growth."""
        return None if self.input_dim is None else Fixed(self.U)

    @property
    def noise(self) -> Tensor:
        """Learnt noise variance; zero with fixed noise (noise at a new input is unknown there, var_y = var_f)."""
        if self.fixed_noise:
            return torch.zeros((), dtype=self.dtype)
        return self.likelihood.noise.reshape(())

    # ------------------------------------------------------------------ the math
    def features(self, xs: Tensor, batch_stats: bool = False) -> Tensor:
        """Grid coordinates of scaled inputs: the inputs themselves (D ≤ 3) or the learnt projection."""
        return xs if self.projection is None else self.projection(xs, batch_stats)

    def kuu_root(self) -> Tensor:
        """L with L Lᵀ = K_UU (Cholesky) or its rank-r Lanczos approximation Q_r chol(Q_rᵀ K_UU Q_r)."""
        K = kuu(self.kernel, self.U)
        if self.root == "cholesky":
            return cholesky(K, self.jitter)
        Kd = K.detach()
        start = torch.Generator().manual_seed(self.seed)  # a fixed start vector: the root is a function of θ
        Qb = lanczos_basis(lambda v: Kd @ v, K.shape[0], self.rank, K.dtype, start)
        T = Qb.mT @ K @ Qb
        return Qb @ cholesky(0.5 * (T + T.mT), self.jitter)

    def kuu_factors(self) -> list[Tensor]:
        """Per-dimension Cholesky roots C_d of K_d + ε_d I (ε_d as :func:`~onlinegp.posterior.kuu`'s), so that
        ⊗_d C_d C_dᵀ = K_UU up to the jitters; the outputscale is in the first factor (:class:`GridFactors`)."""
        return self.grid_factors.roots(self.kernel.base_kernel.lengthscale, self.kernel.outputscale, self.jitter)

    def _posterior(
        self,
        WtW: Tensor,
        Wty: Tensor,
        yty: Tensor,
        logdet_noise: Tensor,
        n: int,
        predictive: bool = True,
        support: Tensor | None = None,
    ) -> SKIPosterior:
        """The marginal likelihood (and with ``predictive`` the caches) of the given terms (``WtW``: with
        ``wtw_rank`` its root); ``support``: the only grid indices whose WᵀW entries depend on differentiable inputs
        (the new points', under a learnt projection)."""
        noise = None if self.fixed_noise else self.noise
        if self.wtw_rank is not None:
            roots = self.kuu_factors() if self.algebra == "kronecker" else [self.kuu_root()]
            s, logdet_noise = (1.0, logdet_noise) if noise is None else (1.0 / noise, n * noise.log())
            return SKIPosterior.from_root(roots, WtW, Wty, yty, logdet_noise, s, n, self.jitter, predictive)
        if self.algebra == "kronecker":
            mll, LQ, b, *roots = grid_marginal(
                self.grid_factors,
                self.kernel.base_kernel.lengthscale,
                self.kernel.outputscale,
                noise,
                WtW,
                Wty,
                yty,
                logdet_noise,
                n,
                self.jitter,
                support,
            )
            if not predictive:
                return SKIPosterior(mll=mll, R=None, alpha=None)
            return SKIPosterior.finish(mll, LQ, kron_dense([C.mT for C in roots]), trisolve(LQ, b))
        if noise is not None:
            prec = 1.0 / noise
            WtW, Wty, yty, logdet_noise = WtW * prec, Wty * prec, yty * prec, n * noise.log()
        return SKIPosterior.from_terms(self.kuu_root(), WtW, Wty, yty, logdet_noise, n, self.jitter, predictive)

    def _new_terms(self, xs: Tensor, ys: Tensor, prec: Tensor | None, batch_stats: bool, absorb: bool = False):
        """The stored terms with the batch's: (WᵀW or its root, Wᵀy, yᵀy, clamped, grid indices, inverse root).
        ``absorb``: as they will be stored (WᵀW in place, the root updated by ``wtw_update``); else exact and
        differentiable in the projection (the root gets the new points' columns √p w)."""
        idx, val, clamped = self.grid.weights(self.features(xs, batch_stats))
        p = torch.ones_like(ys) if prec is None else prec
        yty = self.yty + (p * ys * ys).sum()
        if self.wtw_rank is None:
            WtW, Wty = add_terms(self.WtW, self.Wty, idx, val, ys, prec, absorb)
            return WtW, Wty, yty, clamped, idx, None
        Wty = self.Wty.index_add(0, idx.reshape(-1), (val * (p * ys).unsqueeze(-1)).reshape(-1))
        columns = torch.zeros(xs.shape[0], self.grid.size, dtype=val.dtype).scatter_add(
            1, idx, val * p.sqrt().unsqueeze(-1)
        )
        if absorb:
            root, inv_root, Wty = self._absorb(columns.detach().mT, Wty)
            return root, Wty, yty, clamped, idx, inv_root
        return torch.cat([self.wtw_root, columns.mT], 1), Wty, yty, clamped, idx, None

    @torch.no_grad()
    def _absorb(self, columns: Tensor, Wty: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The root L (and pseudo-inverse root J) of WᵀW + V Vᵀ for new columns V (m, q), by ``wtw_update``, and Wᵀy.

        'gill' (Stanton et al. 2021, §4.2 and appendix A, after Gill et al. 1974): with p = JᵀV = U S Vᵀ (thin SVD),
        I + p pᵀ = B Bᵀ for B = I + U (diag(√(1 + S²)) − I) Uᵀ, and L ← L B, J ← J B⁻¹ (B⁻¹ the same with 1/√(1 + S²)):
        O(m k q) as rank-q corrections (the paper's B = U diag(√(1 + S²), 1, ...) with the full U, times Uᵀ, is the
        same root rotated, at O(m k²)). The root starts as the leading r eigenpairs of the first batch's WᵀW, its
        eigenvalues raised to at least ε (``GILL_JITTER`` times its mean diagonal; where the batch's rank is below r,
        which null directions fill the r is the eigensolver's choice), and keeps that span: the part of later V
        outside it is dropped. 'truncate' appends V and keeps the leading r eigen-directions (O(m r²) once the root has r
        columns), projecting Wᵀy onto them with the root (P Wᵀy, P = L Jᵀ the projection on the kept span): the stored
        terms are then those of the data with every w projected (W P), a model whose log p(y) is a true Gaussian
        likelihood, where truncating WᵀW alone can make yᵀ(W K Wᵀ + σ²I)⁻¹y negative and the fit diverge. Exact
        while rank(WᵀW) ≤ r (then P Wᵀy = Wᵀy)."""
        L, J = self.wtw_root, self.wtw_inv_root
        if self.wtw_update == "truncate":
            L = torch.cat([L, columns], 1)
            if L.shape[1] <= self.wtw_rank:
                return L, J, Wty
            L, kept = leading_root(L, self.wtw_rank)
            return L, J, L @ (kept.mT @ Wty)
        if L.shape[1] == 0:
            # the first batch's WᵀW with its null directions raised to a jitter (the authors' code takes a jittered
            # Cholesky of it), so that its leading r eigen-directions span r dimensions and r = m is exact to it
            A = columns @ columns.mT
            lam, U = torch.linalg.eigh(A)
            lam = lam[-self.wtw_rank :].clamp_min(GILL_JITTER * float(A.diagonal().mean()))
            root = U[:, -self.wtw_rank :] * lam.sqrt()
            return root, root / lam, Wty
        U, S, _ = torch.linalg.svd(J.mT @ columns, full_matrices=False)
        grow = (S * S + 1).sqrt()
        return L + (L @ U) * (grow - 1) @ U.mT, J + (J @ U) * (1 / grow - 1) @ U.mT, Wty

    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer, noise: Tensor | None = None) -> dict:
        """Absorb a batch (scaled units); ``noise``: its per-point noise variances, scaled (``fixed_noise`` only)."""
        if self.held_x is not None:  # the held first points and this batch, absorbed again as one first batch
            xs, ys = torch.cat([self.held_x, xs]), torch.cat([self.held_y, ys])
            noise = None if noise is None else torch.cat([self.held_noise, noise])
            self._empty_terms()
        first = self.num_data == 0 or self.held_x is not None
        pretrain = first and self.training.pretrain.steps > 0
        hold = pretrain and xs.shape[0] < MIN_FIT_POINTS
        n = (0 if first else self.num_data) + xs.shape[0]
        prec, logdet = None, self.logdet_noise
        if self.fixed_noise:
            prec, logdet = 1.0 / noise, self.logdet_noise + noise.log().sum()
        learn_proj = self.projection is not None
        first_stats = learn_proj and first and xs.shape[0] > 1 and not hold
        # without a projection the new terms are free of every parameter: added once, in place (the update restores
        # the state it copied if anything fails), for the steps and the caches
        fixed_terms = None if learn_proj else self._new_terms(xs, ys, prec, False, absorb=True)

        def mll() -> Tensor:
            if fixed_terms is not None:
                post = self._posterior(*fixed_terms[:3], logdet, n, predictive=False)
            else:
                terms = self._new_terms(xs, ys, prec, first_stats)  # W's new rows depend on the projection
                support = None if self.wtw_rank is not None else terms[4].unique()
                post = self._posterior(*terms[:3], logdet, n, predictive=False, support=support)
            return post.mll + log_prior(self.kernel)

        with timer("hyperparameters"):
            if hold:
                with torch.no_grad():
                    value = float(mll())
            elif pretrain:
                value = self._pretrain(mll, n)
            elif self.training.optimizer == "lbfgs" and self.num_steps > 0:
                params = [p for group in self.optimizer.param_groups for p in group["params"]]
                value = lbfgs_fit(params, mll, self.kernel, self.num_steps, scale=n)
            else:
                # one step per observation (Stanton et al. 2021, Algorithm 1) unless a count is given, the rest of
                # them skipped once the objective has settled
                steps = xs.shape[0] if self.num_steps is None else self.num_steps
                value = gradient_steps([self.optimizer], mll, steps, scale=n, tolerance=self.training.tolerance)
        self.held_x, self.held_y, self.held_noise = (xs, ys, noise) if hold else (None, None, None)
        with timer("caches"), torch.no_grad():
            if first_stats:
                self.projection.freeze_statistics(xs)
            stored, Wty, yty, clamped, _, inv_root = fixed_terms or self._new_terms(xs, ys, prec, False, absorb=True)
            if self.wtw_rank is None:
                self.WtW = stored
            else:
                self.wtw_root, self.wtw_inv_root = stored, inv_root
            self.Wty, self.yty, self.logdet_noise = Wty, yty, logdet
            self._cache = None
        return {"objective": value, "clamped": clamped, "noise": float(self.noise.detach())}

    def _pretrain(self, mll, n: int) -> float:
        """``training.pretrain.steps`` full-batch Adam steps at the pre-training rates, cosine-annealed to zero (Stanton
        et al. 2021, Table C.1); a fresh Adam, so the online optimiser starts from zero moments as after batch
        training."""
        online, pre = self.training, self.training.pretrain
        network = online.lr_network * pre.lr / online.lr if pre.lr_network is None else pre.lr_network
        adam = self._adam(pre.lr, network)
        schedule = torch.optim.lr_scheduler.CosineAnnealingLR(adam, T_max=pre.steps)
        return gradient_steps([adam], mll, pre.steps, scale=n, schedules=[schedule])

    def _predict(self, xs: Tensor, full_cov: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        post = self._caches()
        features = self.features(xs)
        Ws = self.grid.sparse(features)
        mean = torch.sparse.mm(Ws, post.alpha.unsqueeze(-1)).squeeze(-1)
        Rw = torch.sparse.mm(Ws, post.R)  # rows (Rᵀ w*)ᵀ: O(4^d r) per point
        if post.prior is None:
            if full_cov:
                cov = Rw @ Rw.mT
                return mean, cov.diagonal().clone(), cov
            return mean, Rw.pow(2).sum(-1), None
        # w*ᵀ K_UU w' − (Rᵀw*)ᵀ(Rᵀw'), with K_UU = C Cᵀ: O(m Σ_d g_d) per point, in chunks of dense w*
        Cw = torch.cat(
            [kron_matmul(post.prior, self.grid.dense(chunk).mT, transpose=True) for chunk in features.split(512)], 1
        )
        if full_cov:
            cov = Cw.mT @ Cw - Rw @ Rw.mT
            return mean, cov.diagonal().clamp_min(0.0), cov
        return mean, (Cw.pow(2).sum(0) - Rw.pow(2).sum(-1)).clamp_min(0.0), None

    # ------------------------------------------------------------------ checkpoints
    def _load_extra_state(self, state: dict) -> None:
        self._cache = None  # rebuilt from the loaded state at the next prediction


class WISKIClassifier(nn.Module):
    """Dirichlet-based GP classification with WISKI (Milios et al. 2018; Stanton et al. 2021, §5.2, appendix A.5).

    Labels c ∈ {0..C-1} become, per class, regression targets ỹ = log α - σ̃²/2 with fixed noise
    σ̃² = log(1 + 1/α), α = 1[label = c] + α_ε; each class is an independent fixed-noise WISKI. Class
    probabilities are E[softmax(f)] by sampling the per-class posteriors; predictions are the argmax of the means.

    Args: input_dim, num_classes, alpha_epsilon (default 0.01, the paper's), and WISKI options (grid_size, ...).
    """

    def __init__(self, input_dim: int, num_classes: int, alpha_epsilon: float = 0.01, seed: int = 0, **options: Any):
        super().__init__()
        if int(num_classes) < 2:
            raise ValueError(f"num_classes must be at least 2, got {num_classes}")
        if not alpha_epsilon > 0:
            raise ValueError(f"alpha_epsilon must be positive, got {alpha_epsilon}")
        self.num_classes, self.alpha_epsilon = int(num_classes), float(alpha_epsilon)
        self.models = nn.ModuleList(
            [
                WISKI(input_dim, fixed_noise=True, y_stats=(0.0, 1.0), seed=seed + c, **options)
                for c in range(self.num_classes)
            ]
        )
        self.generator = torch.Generator().manual_seed(int(seed))

    def targets(self, labels: Tensor) -> tuple[Tensor, Tensor]:
        """Transformed targets and fixed noise variances, both (C, n) (Milios et al. 2018, §4)."""
        onehot = torch.nn.functional.one_hot(labels, self.num_classes).mT.to(self.models[0].dtype)
        alpha = onehot + self.alpha_epsilon
        noise = torch.log1p(1.0 / alpha)
        return alpha.log() - noise / 2, noise

    def update(self, x: Any, labels: Any) -> list:
        """Absorb inputs ``x`` (N, D) with integer ``labels`` in {0..C-1}; all class models or none."""
        x = as_tensor_2d(x, "x", self.models[0].dtype, self.models[0].input_dim)
        lab = torch.as_tensor(labels)
        if lab.is_floating_point():
            if not bool((lab == lab.round()).all()):
                raise ValueError("labels must be integers in {0..num_classes-1}")
            lab = lab.long()
        lab = lab.reshape(-1)
        if lab.shape[0] != x.shape[0]:
            raise ValueError(f"x has {x.shape[0]} rows but labels has {lab.shape[0]} entries; they must match")
        if bool(((lab < 0) | (lab >= self.num_classes)).any()):
            raise ValueError(f"labels must lie in {{0..{self.num_classes - 1}}}; map other label values first")
        y, noise = self.targets(lab)
        snapshot = copy.deepcopy(self.state_dict())
        try:
            return [m.update(x, y[c], noise=noise[c]) for c, m in enumerate(self.models)]
        except BaseException:
            self.load_state_dict(snapshot)
            raise

    @torch.no_grad()
    def latent(self, x: Any) -> tuple[Tensor, Tensor]:
        """Per-class latent means and variances, (n, C) each."""
        preds = [m.predict(x) for m in self.models]
        return torch.stack([p.mean for p in preds], -1), torch.stack([p.var_f for p in preds], -1)

    @torch.no_grad()
    def predict_proba(self, x: Any, num_samples: int = 256) -> Tensor:
        """Class probabilities E[softmax(f)] (n, C) by Monte Carlo over the per-class posteriors (Milios Eq. 8)."""
        mean, var = self.latent(x)
        eps = torch.randn(num_samples, *mean.shape, dtype=mean.dtype, generator=self.generator, device="cpu").to(
            mean.device
        )
        return torch.softmax(mean + var.sqrt() * eps, -1).mean(0)

    @torch.no_grad()
    def predict(self, x: Any) -> Tensor:
        """Most probable class: argmax of the latent means."""
        return self.latent(x)[0].argmax(-1)

    def get_extra_state(self) -> dict:
        return {"generator": self.generator.get_state()}

    def set_extra_state(self, state: dict) -> None:
        self.generator.set_state(state["generator"])
