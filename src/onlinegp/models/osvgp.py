"""O-SVGP: the uncollapsed streaming sparse variational GP (Bui et al. 2017) with β-tempered KL terms.

Generalised variational inference as in Stanton et al. 2021 (appendix B, eq. A.8): per batch, maximise

    (N/B) Σ_b E_q[log p(y_b|f_b)] − β KL(q(b)‖p(b|θ)) − β KL(q(a)‖q_old(a)) + β KL(q(a)‖p(a|θ_old))

(:func:`~onlinegp.objectives.online_svgp_elbo`) over q(b) = N(m, L Lᵀ) (free mean, lower-triangular root),
the hyper-parameters θ and, optionally, the new inducing inputs Z, by ``num_steps`` Adam steps on mini-batches of
the new batch. β = 1 is Bui et al.'s streaming VI; β ≪ 1 (default 1e-3, the choice of Stanton et al. 2021) down-weights
the prior and the memory of old batches so that few gradient steps per batch suffice. Only q(u), Z and the prior root
of the last batch are kept: memory does not grow with the data.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..base import KernelGP, PhaseTimer
from ..inducing import Selector, make_selector
from ..linalg import cholesky
from ..objectives import online_svgp_elbo
from ..posterior import Predictor, VariationalQ, kuu
from ..training import gradient_steps, hyperparameter_optimizer
from .registry import register


@register(
    "osvgp", "O-SVGP: uncollapsed streaming SVGP, β-tempered KL terms, mini-batch Adam (Stanton et al. 2021, app. B)"
)
class OSVGP(KernelGP):
    """Streaming SVGP on the β-tempered online ELBO, mini-batch Adam (the O-SVGP baseline of Stanton et al. 2021).

    Args:
        input_dim: number of input dimensions D.
        num_inducing: M for the named selectors (default 256, as Stanton et al. 2021).
        kernel: 'rbf' (default), 'ak', 'matern32', ... or any gpytorch Kernel.
        inducing: selector name or instance choosing the new Z from [Z; X_new] (default 'pivoted').
        beta: KL tempering β (default 1e-3; 1 is plain streaming VI).
        num_steps: Adam steps per batch (default 1, as in the streaming comparisons of Stanton et al. 2021).
        batch_size: mini-batch size drawn from the new batch (default 256).
        lr: Adam learning rate for q(u) and Z (5e-3); ``lr_hyper`` for θ and the noise (5e-3).
        learn_hyperparameters: train θ and σ² (default True); optimize_inducing: move Z by gradient (True).
        **options: kernel_options, noise, x_bounds, y_stats, seed, dtype, as for every :class:`~onlinegp.base.KernelGP`.
    """

    _dynamic = ("q", "L_prior", "predictor")

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        num_inducing: int = 256,
        kernel: Any = "rbf",
        inducing: str | Selector = "pivoted",
        beta: float = 1e-3,
        num_steps: int = 1,
        batch_size: int = 256,
        lr: float = 5e-3,
        lr_hyper: float = 5e-3,
        learn_hyperparameters: bool = True,
        optimize_inducing: bool = True,
        **options: Any,
    ):
        super().__init__(input_dim, kernel=kernel, **options)
        if not beta > 0 or num_steps < 0 or batch_size < 1:
            raise ValueError(
                f"need beta > 0, num_steps >= 0 and batch_size >= 1, got {beta}, {num_steps}, {batch_size}"
            )
        self.lr_hyper = lr_hyper
        self.selector = make_selector(inducing, num_inducing)
        self.beta, self.num_steps, self.batch_size, self.lr = float(beta), int(num_steps), int(batch_size), lr
        self.learn_hyperparameters, self.optimize_inducing = learn_hyperparameters, optimize_inducing
        self.q: VariationalQ | None = None
        self.L_prior: Tensor | None = None
        self.predictor: Predictor | None = None

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        self.optimizer = hyperparameter_optimizer(self.kernel, self.likelihood, self.lr_hyper, self.lr_hyper)

    @property
    def Z(self) -> Tensor | None:
        return None if self.q is None else self.q.Z

    @torch.no_grad()
    def _initial_q(self, Z: Tensor) -> tuple[Tensor, Tensor]:
        """Start q(b) at the old posterior's predictive at Z (the prior on the first batch)."""
        if self.predictor is None:
            return torch.zeros_like(Z[:, 0]), cholesky(kuu(self.kernel, Z), self.jitter)
        mean, _, cov = self.predictor.predict(self.kernel, Z, full_cov=True)
        return mean, cholesky(0.5 * (cov + cov.mT), self.jitter)

    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict:
        with timer("inducing"), torch.no_grad():
            Z0 = self.selector(self.kernel, self.Z, xs, generator=self.generator, model=self)
        old, L_old = self.q, self.L_prior
        with timer("optimise"):
            mean0, root0 = self._initial_q(Z0)
            mean, root = torch.nn.Parameter(mean0.clone()), torch.nn.Parameter(root0.clone())
            Z = torch.nn.Parameter(Z0.clone()) if self.optimize_inducing else Z0
            variational = torch.optim.Adam([mean, root] + ([Z] if self.optimize_inducing else []), lr=self.lr)
            n = xs.shape[0]

            def elbo() -> Tensor:
                idx = (
                    torch.randperm(n, generator=self.generator)[: self.batch_size]
                    if n > self.batch_size
                    else torch.arange(n)
                )
                return online_svgp_elbo(
                    self.kernel,
                    self.noise,
                    self._q(Z, mean, root),
                    xs[idx],
                    ys[idx],
                    n,
                    old,
                    L_old,
                    self.beta,
                    self.jitter,
                )

            optimizers = [variational, self.optimizer]
            value = gradient_steps(
                optimizers,
                elbo,
                self.num_steps,
                scale=n,
                stepped=optimizers if self.learn_hyperparameters else [variational],
            )
        with timer("predictor"), torch.no_grad():
            self.q = self._q(Z, mean, root).detach()
            self.L_prior = cholesky(kuu(self.kernel, self.q.Z), self.jitter)
            self.predictor = Predictor.from_q(self.kernel, self.q, Lu=self.L_prior)
        return {"objective": value, "noise": float(self.noise.detach())}

    @staticmethod
    def _q(Z: Tensor, mean: Tensor, root: Tensor) -> VariationalQ:
        L = root.tril()
        return VariationalQ(Z, mean, L, 2 * L.diagonal().abs().clamp_min(1e-300).log().sum())

    def _predict(self, xs: Tensor, full_cov: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        return self.predictor.predict(self.kernel, xs, full_cov)
