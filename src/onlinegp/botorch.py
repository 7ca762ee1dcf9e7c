"""BoTorch adapter: any :class:`~onlinegp.base.OnlineGP` as a single-output BoTorch ``Model``.

``OnlineGPModel(gp).posterior(X)`` is the joint Gaussian over each ``q``-point set of a ``(batch, q, D)`` input:
a ``GPyTorchPosterior`` over a ``MultivariateNormal`` with the model's full covariance of f (plus the noise when
``observation_noise=True``), in user units. It is differentiable in ``X`` whenever the model's ``posterior`` is
(WISKI, the exact GP and the inducing-point models are), so acquisition functions optimise by L-BFGS as usual;
model parameters are held out of the graph. Batches are evaluated in chunks of about ``chunk_size`` points, one
full-covariance prediction per chunk, keeping the diagonal (q, q) blocks.

``condition_on_observations`` (and hence ``fantasize``) deep-copies the model and updates the copy with its
hyper-parameter steps switched off (``num_steps = 0``): exact conditioning for WISKI and the exact GP. Batched
observations give a batch of conditioned copies (the adapter's ``batch_shape``), e.g. one per fantasy.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import torch
from botorch.models.model import FantasizeMixin, Model
from botorch.posteriors.gpytorch import GPyTorchPosterior
from gpytorch.distributions import MultivariateNormal
from linear_operator.operators import DenseLinearOperator
from torch import Tensor

from .base import OnlineGP


@contextmanager
def _frozen(gp: OnlineGP) -> Iterator[None]:
    """Keep the model's parameters out of the autograd graph (only X gets gradients)."""
    params = [p for p in gp.parameters() if p.requires_grad]
    for p in params:
        p.requires_grad_(False)
    try:
        yield
    finally:
        for p in params:
            p.requires_grad_(True)


def joint_blocks(gp: OnlineGP, X: Tensor, chunk_size: int = 256) -> tuple[Tensor, Tensor, Tensor]:
    """Means (batch, q), covariances of f (batch, q, q) and noise variances (batch, q) of each q-set in ``X``
    (batch, q, D), user units.

    Differentiable in ``X`` when the model's ``posterior`` is; ``chunk_size`` points go through each call.
    """
    if gp.num_updates == 0:
        raise ValueError("the model has seen no data yet: call update(x, y) before building a posterior")
    B, q, d = X.shape
    per = max(1, chunk_size // max(q, 1))
    means, covs, noises = [], [], []
    with _frozen(gp):
        for i in range(0, B, per):
            Xc = X[i : i + per]
            c = Xc.shape[0]
            p = gp.posterior(Xc.reshape(c * q, d), full_cov=True)
            covs.append(torch.diagonal(p.cov_f.reshape(c, q, c, q), dim1=0, dim2=2).permute(2, 0, 1))
            means.append(p.mean.reshape(c, q))
            noises.append((p.var_y - p.var_f).detach().reshape(c, q))
    return torch.cat(means), torch.cat(covs), torch.cat(noises)


class OnlineGPModel(Model, FantasizeMixin):
    """A BoTorch ``Model`` (one output) around an OnlineGP, or a batch of conditioned copies of one.

    Args:
        gp: the fitted online model (it must have absorbed at least one batch).
        chunk_size: points per prediction call when evaluating many q-sets (default 256).
    """

    def __init__(self, gp: OnlineGP | list[OnlineGP], chunk_size: int = 256, batch_shape: torch.Size = torch.Size()):
        super().__init__()
        models = list(gp) if isinstance(gp, (list, tuple)) else [gp]
        if not models or not all(isinstance(m, OnlineGP) for m in models):
            raise ValueError("OnlineGPModel wraps an onlinegp OnlineGP model (or a list of them)")
        if math.prod(batch_shape) != len(models):
            raise ValueError(f"batch_shape {tuple(batch_shape)} does not hold {len(models)} models")
        self.models = torch.nn.ModuleList(models)
        self._batch = torch.Size(batch_shape)
        self.chunk_size = int(chunk_size)

    @property
    def gp(self) -> OnlineGP:
        return self.models[0]

    @property
    def likelihood(self) -> Any:
        return self.gp.likelihood

    @property
    def num_outputs(self) -> int:
        return 1

    @property
    def batch_shape(self) -> torch.Size:
        return self._batch

    def _check(self, X: Tensor) -> Tensor:
        if not isinstance(X, Tensor) or X.dim() < 2:
            raise ValueError(f"X must be a tensor of shape (batch) x q x d, got {getattr(X, 'shape', type(X))}")
        if X.shape[-1] != self.gp.input_dim:
            raise ValueError(f"X has {X.shape[-1]} features but the model was built for input_dim={self.gp.input_dim}")
        if not bool(torch.isfinite(X).all()):
            raise ValueError("X contains NaN or inf")
        return X.to(self.gp.dtype)

    def posterior(
        self,
        X: Tensor,
        output_indices: list[int] | None = None,
        observation_noise: bool | Tensor = False,
        posterior_transform: Any = None,
        **kwargs: Any,
    ) -> GPyTorchPosterior:
        """Joint posterior over the q points of each batch of ``X`` (``(batch, q, D)``)."""
        if output_indices is not None and list(output_indices) != [0]:
            raise ValueError(f"the model has a single output; output_indices={output_indices} is not available")
        X = self._check(X)
        q, d = X.shape[-2:]
        out_batch = torch.broadcast_shapes(X.shape[:-2], self._batch)
        Xf = X.expand(*out_batch, q, d).reshape(-1, q, d)
        owner = torch.arange(len(self.models)).reshape(self._batch).expand(out_batch).reshape(-1)
        mean = Xf.new_zeros(Xf.shape[0], q)
        cov = Xf.new_zeros(Xf.shape[0], q, q)
        for j, gp in enumerate(self.models):
            rows = (owner == j).nonzero(as_tuple=True)[0]
            if rows.numel():
                m, c, noise = joint_blocks(gp, Xf[rows], self.chunk_size)
                mean, cov = mean.index_copy(0, rows, m), cov.index_copy(0, rows, c)
                if observation_noise is True:
                    cov = cov.index_add(0, rows, torch.diag_embed(noise))
        mean, cov = mean.reshape(*out_batch, q), cov.reshape(*out_batch, q, q)
        if isinstance(observation_noise, Tensor):
            cov = cov + torch.diag_embed(observation_noise.to(cov).expand(*out_batch, q, 1)[..., 0])
        # a lazy covariance: factorised on demand with gpytorch's PSD-safe (jittered) Cholesky, since q-sets with
        # (near-)duplicate points have singular joint covariances
        posterior = GPyTorchPosterior(MultivariateNormal(mean, DenseLinearOperator(cov)))
        return posterior if posterior_transform is None else posterior_transform(posterior)

    def condition_on_observations(
        self, X: Tensor, Y: Tensor, noise: Tensor | None = None, **kwargs: Any
    ) -> "OnlineGPModel":
        """A new adapter over copies of the model(s) updated on (X, Y) without hyper-parameter steps."""
        X = self._check(X)
        if not isinstance(Y, Tensor) or Y.dim() < 2 or Y.shape[-1] != 1:
            raise ValueError(f"Y must be a tensor of shape (batch) x n x 1, got {getattr(Y, 'shape', type(Y))}")
        n, d = X.shape[-2:]
        out_batch = torch.broadcast_shapes(X.shape[:-2], Y.shape[:-2], self._batch)
        Xf = X.expand(*out_batch, n, d).reshape(-1, n, d)
        Yf = Y.to(X).expand(*out_batch, n, 1).reshape(-1, n)
        Nf = None if noise is None else noise.to(X).expand(*out_batch, n, 1).reshape(-1, n)
        owner = torch.arange(len(self.models)).reshape(self._batch).expand(out_batch).reshape(-1)
        copies = []
        for i in range(Xf.shape[0]):
            gp = copy.deepcopy(self.models[int(owner[i])])
            if not hasattr(gp, "num_steps"):
                raise ValueError(
                    f"{type(gp).__name__} has no num_steps switch, so it cannot be conditioned without "
                    "changing its hyper-parameters"
                )
            gp.num_steps = 0
            kw = {"noise": Nf[i].detach()} if Nf is not None and gp.takes_noise else {}
            gp.update(Xf[i].detach(), Yf[i].detach(), **kw)
            copies.append(gp)
        return OnlineGPModel(copies, self.chunk_size, out_batch)
