"""The exact GP, refit on all data seen so far: the gold-standard baseline and test oracle (O(N³) per update)."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from ..base import KernelGP, PhaseTimer
from ..buffer import GrowingBuffer
from ..kernels import dense, diagonal, follow_inputs
from ..linalg import cholesky, trisolve
from ..objectives import exact_mll, log_prior
from ..training import (
    LBFGS_ITERATIONS,
    OPTIMIZERS,
    Trained,
    Training,
    gradient_steps,
    hyperparameter_optimizer,
    lbfgs_fit,
    resolve_training,
)
from .registry import register


@register("exact", "exact GP refit on all data (O(N³) baseline)")
class ExactGP(Trained, KernelGP):
    """Exact GP regression; after each batch, ``training.steps`` Adam steps on the exact log marginal likelihood.

    Args:
        input_dim: D. kernel: 'rbf' (default), 'ak', ... or a gpytorch Kernel.
        training: a :class:`~onlinegp.training.Training` (or a dict of its fields) over :attr:`TRAINING`:
            ``optimizer`` 'adam' (default) or 'lbfgs' (θ and σ² fitted to convergence on all data after each update);
            ``steps``, Adam steps (None: 10; 0 keeps the hyper-parameters fixed) or L-BFGS iterations at most (None:
            ``LBFGS_ITERATIONS``) per update; ``lr``, Adam's rate (1e-2); ``lr_network``, an Attentive Kernel's
            network (None: at ``lr``).
        max_data: refuse to grow past this many points (default 20 000) rather than exhaust memory.
    """

    _dynamic = ("L", "alpha")
    #: the defaults of ``training`` (``steps`` None: 10 Adam steps, or L-BFGS to convergence)
    TRAINING = Training(optimizer="adam", lr=1e-2)
    TRAINING_FIELDS = ("optimizer", "steps", "lr", "lr_network")

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        kernel: Any = "rbf",
        training: Training | dict | None = None,
        max_data: int = 20_000,
        **options: Any,
    ):
        super().__init__(input_dim, kernel=kernel, **options)
        training = resolve_training(training, self.TRAINING, type(self).__name__, self.TRAINING_FIELDS, OPTIMIZERS)
        if training.steps is None:
            training = dataclasses.replace(training, steps=10 if training.optimizer == "adam" else LBFGS_ITERATIONS)
        self.training, self.max_data = training, int(max_data)
        self.L: Tensor | None = None
        self.alpha: Tensor | None = None

    def options(self) -> dict[str, Any]:
        return {
            **super().options(),
            "training": self.training,
            "max_data": self.max_data,
        }

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        rates = self.training.lr, self.training.rate("network")
        self.optimizer = hyperparameter_optimizer(self.kernel, self.likelihood, *rates)
        self.data = GrowingBuffer(input_dim, self.dtype)

    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict:
        if self.data.n + xs.shape[0] > self.max_data:
            raise ValueError(
                f"ExactGP would hold {self.data.n + xs.shape[0]} points, above max_data={self.max_data}; "
                "use a sparse online model (POAM, OSGPR) or raise max_data"
            )
        self.data.append(xs, ys)
        X, y = self.data.data

        def objective() -> Tensor:
            return exact_mll(self.kernel, self.noise, X, y, self.jitter) + log_prior(self.kernel)

        with timer("hyperparameters"):
            if self.training.optimizer == "lbfgs" and self.num_steps > 0:
                params = list(self.kernel.parameters()) + list(self.likelihood.parameters())
                value = lbfgs_fit(params, objective, self.kernel, self.num_steps, scale=X.shape[0])
            else:
                value = gradient_steps([self.optimizer], objective, self.num_steps, scale=X.shape[0])
        with timer("factorise"):
            self._factorise()
        return {"objective": value}

    @torch.no_grad()
    def _factorise(self) -> None:
        X, y = self.data.data
        K = dense(self.kernel, X) + self.noise * torch.eye(X.shape[0], dtype=X.dtype)
        self.L = cholesky(K, self.jitter)
        self.alpha = trisolve(self.L, y)

    @torch.no_grad()
    def _follow(self, scale: Tensor, shift: Tensor) -> bool:
        """Inputs in wider units: the kernel re-expressed (:func:`~onlinegp.kernels.follow_inputs`), the data
        moved and factorised again (the same predictions with a stationary kernel)."""
        if not follow_inputs(self.kernel, scale, shift):
            return False
        self.data.X = self.data.X * scale + shift
        self._factorise()
        return True

    def _predict(self, xs: Tensor, full_cov: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        X, _ = self.data.data
        w = trisolve(self.L, dense(self.kernel, X, xs))
        mean = w.mT @ self.alpha
        if full_cov:
            cov = dense(self.kernel, xs) - w.mT @ w
            return mean, cov.diagonal().clone(), cov
        return mean, diagonal(self.kernel, xs) - w.pow(2).sum(0), None
