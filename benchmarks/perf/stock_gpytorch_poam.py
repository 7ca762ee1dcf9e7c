"""The baseline: one POAM decision epoch done the way the paper's open-source implementation does it.

Stock GPyTorch machinery throughout (paper 000's code): an ``ApproximateGP`` with ``UnwhitenedVariationalStrategy``
and ``CholeskyVariationalDistribution``, the Attentive Kernel in a ``ScaleKernel`` computed as the paper's code does
(:class:`PaperAttentiveKernel`: a per-length-scale autograd loop; ``paper_ak=False`` uses onlinegp's fused one),
float64. Per epoch:

1. inducing: the first M pivots of a pivoted Cholesky of k([Z; X_new]) (same LAPACK routine as onlinegp);
2. variational: the stored terms (a, B) projected onto the new Z (Eqs. 16-21: P = K'⁻¹ K_zz' with K' the K_zz
   the terms were formed under, as onlinegp's POAM does) with dense solves, then
   m = σ⁻² K_uu Σ a and S = K_uu Σ K_uu with Σ = (K_uu + σ⁻² B)⁻¹ (Eqs. 7-8), written into the variational
   distribution (its Cholesky factor of S);
3. hyper-parameters: T Adam steps of ``VariationalELBO`` on mini-batches of all data with Z, m, S frozen.

This module is benchmark code, not library code: the library never imports it. :func:`reference_path` runs
onlinegp's POAM with the arithmetic it had before the speed work (for before/after accuracy). ``from_poam`` copies an onlinegp
POAM's state (kernel, noise, Z, terms, Adam moments, random generator) so both do exactly the same epoch, and the
hyper-parameters after it can be compared.
"""

from __future__ import annotations

import contextlib
import copy
import time

import gpytorch
import torch
from gpytorch.variational import CholeskyVariationalDistribution, UnwhitenedVariationalStrategy
from torch import Tensor

from onlinegp.kernels import AttentiveKernel
from onlinegp.linalg import pivoted_cholesky_dense


class PaperAttentiveKernel(AttentiveKernel):
    """The Attentive Kernel evaluated the way the paper's code does: a Python loop over the base length-scales,
    each term a fresh autograd node (same parameters and values as onlinegp's fused kernel)."""

    def forward(self, x1: Tensor, x2: Tensor, diag: bool = False, **params) -> Tensor:
        if diag:
            return torch.ones(x1.shape[:-1], dtype=x1.dtype, device=x1.device)
        w1 = self.weights(x1)
        w2 = w1 if x2 is x1 else self.weights(x2)
        sq = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).pow(2).sum(-1)
        ls = self.lengthscales.to(x1)
        mixture = torch.zeros_like(sq)
        for m in range(ls.shape[0]):
            mixture = mixture + (w1[..., :, m : m + 1] * w2[..., None, :, m]) * torch.exp(sq * (-0.5 / ls[m] ** 2))
        return (w1 @ w2.mT) * mixture


def paper_kernel(kernel: gpytorch.kernels.ScaleKernel) -> gpytorch.kernels.ScaleKernel:
    """A copy of an onlinegp ScaleKernel(AttentiveKernel) whose base kernel computes like the paper's code."""
    kernel = copy.deepcopy(kernel)
    if isinstance(kernel.base_kernel, AttentiveKernel):
        kernel.base_kernel.__class__ = PaperAttentiveKernel
    return kernel


class StockSVGP(gpytorch.models.ApproximateGP):
    def __init__(self, Z: Tensor, kernel: gpytorch.kernels.Kernel, jitter: float | None = None):
        dist = CholeskyVariationalDistribution(Z.shape[0]).to(Z.dtype)
        strategy = UnwhitenedVariationalStrategy(self, Z, dist, learn_inducing_locations=False, jitter_val=jitter)
        super().__init__(strategy)
        self.mean_module = gpytorch.means.ZeroMean()
        self.covar_module = kernel

    def forward(self, x: Tensor) -> gpytorch.distributions.MultivariateNormal:
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


class StockPOAM:
    """POAM's epoch in stock GPyTorch (scaled units), started from an onlinegp POAM's state."""

    def __init__(
        self,
        kernel,
        likelihood,
        Z,
        a,
        B,
        X,
        y,
        optimizer_state,
        generator_state,
        num_inducing=500,
        num_steps=10,
        batch_size=256,
        lr=1e-2,
        lr_attention=1e-3,
        L_terms=None,
    ):
        self.kernel, self.likelihood = kernel, likelihood
        self.Z, self.a, self.B, self.X, self.y = Z, a, B, X, y
        self.num_inducing, self.num_steps, self.batch_size = num_inducing, num_steps, batch_size
        self.generator = torch.Generator().manual_seed(0)
        self.generator.set_state(generator_state)
        attention = [p for n, p in kernel.named_parameters() if ".attention." in f".{n}"]
        others = [p for p in kernel.parameters() if all(p is not q for q in attention)]
        self.optimizer = torch.optim.Adam(
            [{"params": others + list(likelihood.parameters()), "lr": lr}, {"params": attention, "lr": lr_attention}]
        )
        if optimizer_state is not None:
            self.optimizer.load_state_dict(optimizer_state)
        self.model: StockSVGP | None = None
        self.L_terms: Tensor | None = L_terms

    @classmethod
    def from_poam(cls, poam, paper_ak: bool = True) -> "StockPOAM":
        """The baseline in ``poam``'s state; ``paper_ak=False`` uses onlinegp's fused Attentive Kernel instead."""
        X, y = poam.data.data
        kernel = paper_kernel(poam.kernel) if paper_ak else copy.deepcopy(poam.kernel)
        return cls(
            kernel,
            copy.deepcopy(poam.likelihood),
            poam.Z.clone(),
            poam.a.clone(),
            poam.B.clone(),
            X.clone(),
            y.clone(),
            copy.deepcopy(poam.optimizer.state_dict()),
            poam.generator.get_state(),
            num_inducing=poam.selector.num_inducing,
            num_steps=poam.num_steps,
            batch_size=poam.training.batch_size,
            L_terms=getattr(poam, "Lu_terms", None),
        )

    def _kuu(self, Z: Tensor) -> Tensor:
        K = self.kernel(Z).to_dense()
        return K + 1e-8 * K.diagonal().mean() * torch.eye(Z.shape[0], dtype=Z.dtype)

    def epoch(self, xs: Tensor, ys: Tensor) -> dict[str, float]:
        """Absorb a batch (scaled units); returns seconds per phase."""
        t: dict[str, float] = {}
        t0 = time.perf_counter()
        self.X, self.y = torch.cat([self.X, xs]), torch.cat([self.y, ys])
        with torch.no_grad():
            C = torch.cat([self.Z, xs])
            K = self.kernel(C).to_dense()
            idx = pivoted_cholesky_dense(K, self.num_inducing, 1e-8 * float(K.diagonal().max()))
            Z_new = C[idx].clone()
        t["inducing"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        with torch.no_grad():
            # P = K'⁻¹ K_zz' with K' the K_zz the stored terms were formed under (previous θ; Eqs. 16-19)
            L_old = self.L_terms if self.L_terms is not None else torch.linalg.cholesky(self._kuu(self.Z))
            K_cross = self.kernel(self.Z, Z_new).to_dense()
            same = (self.Z.unsqueeze(1) == Z_new.unsqueeze(0)).all(-1)
            K_cross = K_cross + 1e-8 * float(self.kernel.outputscale.detach()) * same.to(K_cross.dtype)
            P = torch.cholesky_solve(K_cross, L_old)
            Kzx = self.kernel(Z_new, xs).to_dense()
            self.a = P.T @ self.a + Kzx @ ys
            self.B = P.T @ self.B @ P + Kzx @ Kzx.T
            self.B = 0.5 * (self.B + self.B.T)
            self.Z = Z_new
            noise = self.likelihood.noise.reshape(())
            Kuu = self._kuu(Z_new)
            self.L_terms = torch.linalg.cholesky(Kuu)
            L_sigma = torch.linalg.cholesky(Kuu + self.B / noise)
            m = Kuu @ torch.cholesky_solve((self.a / noise).unsqueeze(-1), L_sigma).squeeze(-1)
            S = Kuu @ torch.cholesky_solve(Kuu, L_sigma)
            L_S = gpytorch.utils.cholesky.psd_safe_cholesky(0.5 * (S + S.T))
            jitter = 1e-8 * float(Kuu.diagonal().mean())
            self.model = StockSVGP(Z_new, self.kernel, jitter=jitter)
            dist = self.model.variational_strategy._variational_distribution
            dist.variational_mean.copy_(m)
            dist.chol_variational_covar.copy_(L_S)
            dist.requires_grad_(False)
            self.model.variational_strategy.variational_params_initialized.fill_(1)  # keep m, S as set
        t["variational"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        self.model.train()
        self.likelihood.train()
        n = self.X.shape[0]
        mll = gpytorch.mlls.VariationalELBO(self.likelihood, self.model, num_data=n)
        self.elbo = None
        for _ in range(self.num_steps):
            idx = (
                torch.randint(n, (min(self.batch_size, n),), generator=self.generator)
                if n > self.batch_size
                else torch.arange(n)
            )
            self.optimizer.zero_grad(set_to_none=True)
            loss = -mll(self.model(self.X[idx]), self.y[idx])
            loss.backward()
            self.optimizer.step()
            self.elbo = -float(loss.detach())
        t["hyperparameters"] = time.perf_counter() - t0
        return t

    @torch.no_grad()
    def predict(self, xs: Tensor) -> tuple[Tensor, Tensor]:
        """Predictive mean and variance of y at scaled inputs (gpytorch's eval-mode path)."""
        self.model.eval()
        self.likelihood.eval()
        out = self.likelihood(self.model(xs))
        return out.mean, out.variance


@contextlib.contextmanager
def reference_path():
    """Run onlinegp's POAM the way it computed before the speed work (for before/after accuracy): the Attentive
    Kernel as a per-length-scale autograd loop, k(Z, Z) and k(Z, X_b) evaluated afresh each step, and the ELBO
    differentiated by autograd through the Cholesky factor and the solves. Same algorithm, slower arithmetic."""
    from onlinegp.kernels import AttentiveKernel, dense
    from onlinegp.linalg import cholesky
    from onlinegp.models import poam
    from onlinegp.objectives import svgp_elbo_terms

    class DenseCross:
        def __init__(self, kernel, Z):
            self.kernel, self.Z = kernel, Z

        def __call__(self, X):
            return dense(self.kernel, self.Z), dense(self.kernel, self.Z, X)

    def autograd_elbo(Kuu, Kub, kbb, noise, q_mean, q_root, q_logdet, yb, num_data, jitter_log=None):
        return svgp_elbo_terms(cholesky(Kuu, jitter_log), Kub, kbb, noise, q_mean, q_root, q_logdet, yb, num_data)

    saved = AttentiveKernel.forward, poam.CrossCovariance, poam.svgp_elbo_cov
    AttentiveKernel.forward = PaperAttentiveKernel.forward
    poam.CrossCovariance, poam.svgp_elbo_cov = DenseCross, autograd_elbo
    try:
        yield
    finally:
        AttentiveKernel.forward, poam.CrossCovariance, poam.svgp_elbo_cov = saved
