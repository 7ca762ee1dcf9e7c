"""VIPS: an online sparse GP that decides its own size (Pescador-Barrios et al. 2024, "How big is big enough?").

VIPS is OSGPR (Bui et al. 2017; :class:`~onlinegp.models.osgpr.OSGPR`) with the VIPS selector
(:class:`~onlinegp.inducing.VIPSSelector`): per batch, keep the old inducing inputs, add new inputs by greedy variance
until Û(M) − L̂(M_b) ≤ δ |Û(M) − L_noise|, then fit θ by L-BFGS on the online lower bound L̂ (eq. 8) with the
locations fixed. The baselines in their Table 1 differ only in the selector: Conditional Variance
(tr(K − Q) ≤ η over [Z; X]) and OIPS (add x when max_z k(x, z) < ρ).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from torch import Tensor

from ..base import PhaseTimer
from ..inducing import OIPS, ConditionalVariance, SelectionContext, VIPSSelector
from ..posterior import InducingPosterior
from .osgpr import OSGPR
from .registry import register


@register(
    "vips",
    "VIPS: OSGPR that sizes itself by the online upper/lower bound gap, L-BFGS on θ (Pescador-Barrios et al. 2024)",
)
class VIPS(OSGPR):
    """OSGPR + VIPS inducing-point selection (Pescador-Barrios et al. 2024, Algorithm 1), θ by L-BFGS on the online
    bound.

    Args:
        input_dim: D.
        delta: δ, the fraction of the batch's information (relative to a noise code) the model may leave
            uncaptured (default 0.05).
        max_new: at most this many greedy picks of each batch enter Û(M) (all of the batch when smaller).
        kernel: 'rbf' (default, squared exponential with ARD), or any name/kernel OSGPR accepts.
        **kwargs: training (L-BFGS by default, as Pescador-Barrios et al. 2024), noise, x_bounds, y_stats, seed,
            dtype, kernel_options, as :class:`OSGPR`.

    ``update`` reports the selection in ``extra``: points added, Û, L̂ at the chosen size, L_noise and α.
    """

    _dynamic = OSGPR._dynamic + ("target_moments",)

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        delta: float = 0.05,
        max_new: int = 2000,
        kernel: Any = "rbf",
        **kwargs: Any,
    ):
        if "inducing" in kwargs:
            raise ValueError("VIPS chooses its own inducing inputs; use OSGPR(inducing=...) for another selector")
        kwargs.setdefault("old_noise", "fixed")  # Pescador-Barrios et al.'s bounds are Bui et al.'s
        super().__init__(input_dim, kernel=kernel, inducing=VIPSSelector(delta, max_new), **kwargs)
        self.target_moments = torch.zeros(3, dtype=self.dtype)  # count, sum, sum of squares (scaled targets)

    def options(self) -> dict[str, Any]:
        options = {k: v for k, v in super().options().items() if k not in ("inducing", "num_inducing")}
        return {**options, "delta": self.selector.delta, "max_new": self.selector.max_new}

    def _selection_context(self, ys: Tensor, old: InducingPosterior | None) -> SelectionContext:
        """OSGPR's context (the targets being absorbed, a held batch's too, the summary q(u) they are absorbed into,
        σ²) with ȳ, s² over all targets so far, which the VIPS selector needs for L_noise."""
        return dataclasses.replace(super()._selection_context(ys, old), target_moments=self._mean_and_variance)

    def _mean_and_variance(self) -> tuple[float, float]:
        """ȳ, s² over all targets so far (scaled; s² = 1 when undefined)."""
        n, s, ss = (float(v) for v in self.target_moments)
        mean = s / n
        var = (ss - n * mean**2) / (n - 1) if n > 1 else 1.0
        return mean, var if var > 0 else 1.0

    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict:
        self.target_moments = self.target_moments + torch.stack(
            [torch.tensor(float(ys.shape[0]), dtype=ys.dtype), ys.sum(), ys.pow(2).sum()]
        )
        info = super()._update(xs, ys, timer)
        step = self.selector.last
        info.update(
            num_added=step.num_added,
            upper_bound=step.upper,
            reference_bound=step.reference,
            lower_bound_at_selection=step.lower,
            noise_log_lik=step.noise_log_lik,
            alpha=step.alpha,
        )
        return info


@register(
    "conditional-variance",
    "OSGPR with Conditional Variance Z: greedy until tr(K − Q) ≤ η (Pescador-Barrios et al. 2024 baseline)",
)
class ConditionalVarianceGP(OSGPR):
    """OSGPR whose inducing inputs come from Conditional Variance (greedy variance until tr(K − Q) ≤ η)."""

    def __init__(self, input_dim: int | None = None, *, eta: float = 0.1, kernel: Any = "rbf", **kwargs: Any):
        kwargs.setdefault("old_noise", "fixed")  # as Pescador-Barrios et al. run it (Bui et al.'s bound)
        super().__init__(input_dim, kernel=kernel, inducing=ConditionalVariance(eta), **kwargs)

    def options(self) -> dict[str, Any]:
        options = {k: v for k, v in super().options().items() if k not in ("inducing", "num_inducing")}
        return {**options, "eta": self.selector.eta}


@register("oips", "OSGPR with OIPS Z: add x when max_z k(x, z) < ρ (Pescador-Barrios et al. 2024 baseline)")
class OIPSGP(OSGPR):
    """OSGPR whose inducing inputs come from OIPS (add x when max_z k(x, z) < ρ)."""

    def __init__(self, input_dim: int | None = None, *, rho: float = 0.8, kernel: Any = "rbf", **kwargs: Any):
        kwargs.setdefault("old_noise", "fixed")  # as Pescador-Barrios et al. run it (Bui et al.'s bound)
        super().__init__(input_dim, kernel=kernel, inducing=OIPS(rho), **kwargs)

    def options(self) -> dict[str, Any]:
        options = {k: v for k, v in super().options().items() if k not in ("inducing", "num_inducing")}
        return {**options, "rho": self.selector.rho}
