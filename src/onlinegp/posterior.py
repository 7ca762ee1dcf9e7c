"""The inducing-point posterior every sparse method ends in (the SGPR form of Titsias 2009, from stored terms).

Given precision-weighted data-dependent terms ``a = Σ⁻¹-weighted K_uf y`` and ``B = Σ⁻¹-weighted K_uf K_fu`` at
inducing inputs Z, with L_u = chol(K_uu):

    W = I + L_u⁻¹ B L_u⁻ᵀ,  L_W = chol(W),  β = L_W⁻¹ L_u⁻¹ a,  w* = L_u⁻¹ k_u(x*)
    mean(x*) = (L_W⁻¹ w*)ᵀ β,   var_f(x*) = k** − ‖w*‖² + ‖L_W⁻¹ w*‖²

and q(u) = N(m, R Rᵀ) with m = L_u L_W⁻ᵀ β and root R = L_u L_W⁻ᵀ (Titsias 2009; Chen et al. 2024, Eqs. 7-8). OSGPR's
posterior (Bui et al. 2017) has the same form with W = D and a = c, so it shares this class.
"""

from __future__ import annotations

from dataclasses import dataclass

import gpytorch
import torch
from torch import Tensor

from . import settings
from .kernels import dense, diagonal
from .kernels.attentive import plus_jitter
from .linalg import JitterLog, cholesky, condition_estimate, trisolve

#: relative jitter ε always added to K_uu (times its mean diagonal)
KUU_JITTER = {torch.float64: 1e-8, torch.float32: 1e-5}


def kuu(kernel: gpytorch.kernels.Kernel, Z: Tensor) -> Tensor:
    """K_uu = k(Z, Z) + εI."""
    return with_jitter(dense(kernel, Z))


def with_jitter(K: Tensor) -> Tensor:
    """K + εI with ε = KUU_JITTER[dtype] · mean diag K: the jitter :func:`kuu` adds, for a K computed elsewhere."""
    return plus_jitter(K, KUU_JITTER.get(K.dtype, 1e-6))


def kuv(kernel: gpytorch.kernels.Kernel, Z1: Tensor, Z2: Tensor) -> Tensor:
    """Cross-covariance k(Z1, Z2) consistent with :func:`kuu`: an input present in both sets carries the same ε.

    So K_uv equals K_uu exactly when the two sets coincide, and streaming updates that re-express old inducing
    outputs in a new basis (OSGPR, O-SVGP) are exact for kept points instead of off by ε K_uu⁻¹.
    """
    K = dense(kernel, Z1, Z2)
    same = (Z1.unsqueeze(1) == Z2.unsqueeze(0)).all(-1)
    if not bool(same.any()):
        return K
    eps = KUU_JITTER.get(K.dtype, 1e-6) * diagonal(kernel, Z2).mean().detach()
    return K + eps * same.to(K.dtype)


@dataclass
class InducingPosterior:
    """q(u) at ``Z`` in root form, and predictions from it. All tensors in scaled units."""

    Z: Tensor
    Lu: Tensor
    LW: Tensor
    beta: Tensor

    @classmethod
    def from_terms(
        cls,
        kernel: gpytorch.kernels.Kernel,
        Z: Tensor,
        a: Tensor,
        B: Tensor,
        jitter_log: JitterLog | None = None,
        Lu: Tensor | None = None,
    ) -> "InducingPosterior":
        """Posterior from precision-weighted terms (``a``: (M,), ``B``: (M, M)). Pass ``Lu`` to reuse a root of K_uu."""
        if Lu is None:
            Lu = cholesky(kuu(kernel, Z), jitter_log)
        LiB = trisolve(Lu, B)
        W = trisolve(Lu, LiB.mT)  # L_u⁻¹ B L_u⁻ᵀ (B symmetric)
        W = 0.5 * (W + W.mT) + torch.eye(W.shape[0], dtype=W.dtype, device=W.device)
        LW = cholesky(W, jitter_log)
        beta = trisolve(LW, trisolve(Lu, a))
        return cls(Z=Z, Lu=Lu, LW=LW, beta=beta)

    @property
    def root(self) -> Tensor:
        """R = L_u L_W⁻ᵀ, so that S = R Rᵀ (no Cholesky of S is ever needed)."""
        return trisolve(self.LW, self.Lu.mT).mT

    @property
    def mean(self) -> Tensor:
        """m = L_u L_W⁻ᵀ β."""
        return self.Lu @ trisolve(self.LW, self.beta, transpose=True)

    @property
    def logdet_cov(self) -> Tensor:
        """log |S| = 2 Σ log diag L_u − 2 Σ log diag L_W."""
        return 2 * (self.Lu.diagonal().log().sum() - self.LW.diagonal().log().sum())

    def q(self) -> "VariationalQ":
        """q(u) = N(m, R Rᵀ) in root form."""
        return VariationalQ(self.Z, self.mean, self.root, self.logdet_cov)


@dataclass
class VariationalQ:
    """q(u) = N(mean, root rootᵀ) at inducing inputs Z; ``logdet`` = log|root rootᵀ|."""

    Z: Tensor
    mean: Tensor
    root: Tensor
    logdet: Tensor

    def detach(self) -> "VariationalQ":
        return VariationalQ(*(t.detach() for t in (self.Z, self.mean, self.root, self.logdet)))


def sketch_root(root: Tensor, num_probes: int, generator: torch.Generator | None = None) -> Tensor:
    """A random root R Ω (M, p) with E[R Ω Ωᵀ Rᵀ] = R Rᵀ: a CountSketch Ω (each column of R goes, with a random
    sign, to one of p random buckets), so Ω Ωᵀ has an exact unit diagonal and zero-mean off-diagonal entries.

    Any quantity linear in S = R Rᵀ (the fixed-q ELBO and its gradient) computed from the sketch is unbiased; the
    sketch costs O(M r) (no product), and in the M-step its error is a few times smaller than a Gaussian sketch's.
    """
    r = root.shape[-1]
    bucket = torch.randint(num_probes, (r,), generator=generator, device="cpu").to(root.device)
    sign = torch.randint(2, (r,), generator=generator, device="cpu").to(root).mul_(2).sub_(1)
    out = torch.zeros(*root.shape[:-1], num_probes, dtype=root.dtype, device=root.device)
    return out.index_add_(-1, bucket, root * sign)


#: above this estimated cond(K_uu) marginal predictions use triangular solves (round-off ≈ cond·ε relative);
#: default of settings.quadratic_max_cond
QUADRATIC_MAX_COND = 1e8


@dataclass
class Predictor:
    """SVGP predictive from q(u) under the *current* kernel (Hensman et al. 2013; Chen et al. 2024, Eq. 4).

    With w = L_u⁻¹ k_u(x*), g = L_u⁻¹ m and G = L_u⁻¹ R:  mean = wᵀg,  var_f = k** − ‖w‖² + ‖Gᵀw‖².
    Built once per update (one Cholesky, two triangular solves). Marginal predictions use the equivalent
    mean = k_u(x*)ᵀα, var_f = k** − k_u(x*)ᵀ Q k_u(x*) with α = K_uu⁻¹m and Q = K_uu⁻¹ − K_uu⁻¹SK_uu⁻¹, formed on
    the first such call (one Cholesky inverse, one solve, one product) and kept: then each prediction is one matrix product
    and no triangular solve. Its round-off grows like cond(K_uu)·ε, so above ``QUADRATIC_MAX_COND`` (LAPACK's
    estimate) and for full covariances the solve form is used.
    """

    Z: Tensor
    Lu: Tensor
    g: Tensor
    G: Tensor

    def __post_init__(self):
        self._quadratic: tuple[Tensor, Tensor] | bool | None = None  # None: not yet decided; False: use solves

    def __getstate__(self) -> dict:  # the cached (α, Q) is not state: rebuilt on demand after a copy or load
        return {k: v for k, v in self.__dict__.items() if k != "_quadratic"}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._quadratic = None

    @classmethod
    def from_q(
        cls,
        kernel: gpytorch.kernels.Kernel,
        q: VariationalQ,
        jitter_log: JitterLog | None = None,
        Lu: Tensor | None = None,
    ) -> "Predictor":
        if Lu is None:
            Lu = cholesky(kuu(kernel, q.Z), jitter_log)
        return cls(Z=q.Z, Lu=Lu, g=trisolve(Lu, q.mean), G=trisolve(Lu, q.root))

    def quadratic(self) -> tuple[Tensor, Tensor] | bool:
        """(α, Q) = (K_uu⁻¹m, K_uu⁻¹ − K_uu⁻¹SK_uu⁻¹), computed once; False if K_uu is too ill-conditioned."""
        if self._quadratic is None and condition_estimate(self.Lu) > settings.quadratic_max_cond.value():
            self._quadratic = False
        if self._quadratic is None:
            E = trisolve(self.Lu, torch.cat([self.G, self.g.unsqueeze(-1)], -1), transpose=True)  # K⁻¹[R | m]
            Q = torch.cholesky_inverse(self.Lu) - E[:, :-1] @ E[:, :-1].mT
            self._quadratic = (E[:, -1], 0.5 * (Q + Q.mT))
        return self._quadratic

    def predict(
        self, kernel: gpytorch.kernels.Kernel, xs: Tensor, full_cov: bool = False
    ) -> tuple[Tensor, Tensor, Tensor | None]:
        """Mean, marginal variance of f, and (if asked) the full covariance of f at ``xs``."""
        Kux = dense(kernel, self.Z, xs)
        quadratic = None if full_cov else self.quadratic()
        if quadratic:
            alpha, Q = quadratic
            return Kux.mT @ alpha, diagonal(kernel, xs) - ((Q @ Kux) * Kux).sum(0), None
        w = trisolve(self.Lu, Kux)
        v = self.G.mT @ w
        mean = w.mT @ self.g
        if not full_cov:
            return mean, diagonal(kernel, xs) - w.pow(2).sum(0) + v.pow(2).sum(0), None
        cov = dense(kernel, xs) - w.mT @ w + v.mT @ v
        return mean, cov.diagonal().clone(), cov

    def sample(
        self,
        kernel: gpytorch.kernels.Kernel,
        xs: Tensor,
        num_samples: int = 1,
        generator: torch.Generator | None = None,
    ) -> Tensor:
        """Joint posterior samples of f at ``xs`` (num_samples × N)."""
        mean, _, cov = self.predict(kernel, xs, full_cov=True)
        L = cholesky(cov)
        eps = torch.randn(L.shape[0], num_samples, dtype=L.dtype, generator=generator, device="cpu").to(L.device)
        return (mean.unsqueeze(-1) + L @ eps).mT


def projection(kernel: gpytorch.kernels.Kernel, Z_old: Tensor, Z_new: Tensor, Lu_old: Tensor) -> Tensor:
    """P = K_zz⁻¹ K_zz' (Chen et al. 2024, Eqs. 18-21) mapping terms at Z_old onto Z_new.

    Columns of inducing inputs kept from Z_old are exact unit vectors (not a jittered solve), so terms of kept
    points are carried over without round-off; only genuinely new columns need the solve.
    """
    same = (Z_new.unsqueeze(1) == Z_old.unsqueeze(0)).all(-1)  # M' x M
    kept = same.any(1)
    P = torch.zeros(Z_old.shape[0], Z_new.shape[0], dtype=Z_old.dtype, device=Z_old.device)
    rows, cols = same.nonzero(as_tuple=True)
    first = torch.ones_like(rows, dtype=torch.bool)
    first[1:] = rows[1:] != rows[:-1]
    P[cols[first], rows[first]] = 1.0
    new = (~kept).nonzero(as_tuple=True)[0]
    if new.numel():
        Kzn = dense(kernel, Z_old, Z_new[new])
        P[:, new] = trisolve(Lu_old, trisolve(Lu_old, Kzn), transpose=True)
    return P


def project_terms(
    kernel: gpytorch.kernels.Kernel, Z_old: Tensor, Z_new: Tensor, Lu_old: Tensor, a: Tensor, B: Tensor
) -> tuple[Tensor, Tensor]:
    """(Pᵀa, PᵀBP) with P = :func:`projection` (Chen et al. 2024, Eqs. 18-21), without forming P.

    Kept inducing inputs select entries of ``a`` and ``B`` (exactly what their unit columns of P do); only the
    genuinely new inputs need solves and products, so the cost is O(M² M_new) instead of the O(M³) of PᵀBP.
    """
    same = (Z_new.unsqueeze(1) == Z_old.unsqueeze(0)).all(-1)  # M' x M
    kept = same.any(1)
    src = same.to(torch.uint8).argmax(1)  # first matching old input
    ik, inew = kept.nonzero(as_tuple=True)[0], (~kept).nonzero(as_tuple=True)[0]
    sk = src[ik]
    a_new = torch.empty(Z_new.shape[0], dtype=a.dtype, device=a.device)
    B_new = torch.empty(Z_new.shape[0], Z_new.shape[0], dtype=B.dtype, device=B.device)
    a_new[ik] = a[sk]
    B_new[ik[:, None], ik[None, :]] = B[sk[:, None], sk[None, :]]
    if inew.numel():
        Pn = trisolve(Lu_old, trisolve(Lu_old, dense(kernel, Z_old, Z_new[inew])), transpose=True)
        BPn = B @ Pn
        a_new[inew] = Pn.mT @ a
        B_new[ik[:, None], inew[None, :]] = BPn[sk]
        B_new[inew[:, None], ik[None, :]] = BPn[sk].mT
        B_new[inew[:, None], inew[None, :]] = Pn.mT @ BPn
    return a_new, 0.5 * (B_new + B_new.mT)
