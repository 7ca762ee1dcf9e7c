"""The exact-GP reference that the streams and benches share: θ and σ² fitted to convergence by L-BFGS on log p(y),
then the data absorbed (Pescador-Barrios et al. 2024 fit every method so)."""

from __future__ import annotations

import numpy as np
import torch

from ...base import OnlineGP
from ...objectives import exact_mll, log_prior
from ...training import lbfgs_fit


def lbfgs_exact_gp(model: OnlineGP, X: np.ndarray, y: np.ndarray, max_iter: int = 200) -> float:
    """Fit an :class:`~onlinegp.models.exact.ExactGP`'s θ and σ² by L-BFGS on log p(y) of (X, y), then absorb
    the data with the fitted values (the exact-GP reference of Pescador-Barrios et al. 2024, which uses L-BFGS for every
    method). The model must have ``num_steps=0`` and fixed scaling (``x_bounds``, ``y_stats``). Returns the fitted
    objective, (log p(y) + log p(θ)) / n in scaled units, to compare fits from different starts."""
    xs = model.scaler.x(torch.as_tensor(X, dtype=model.dtype))
    ys = model.scaler.y(torch.as_tensor(y, dtype=model.dtype))
    params = list(model.kernel.parameters()) + list(model.likelihood.parameters())
    objective = lbfgs_fit(
        params,
        lambda: exact_mll(model.kernel, model.noise, xs, ys) + log_prior(model.kernel),
        model.kernel,
        max_iter,
        scale=xs.shape[0],
    )
    model.update(X, y)
    return objective / xs.shape[0]
