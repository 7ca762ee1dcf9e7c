"""Input and output scaling, in one place, as part of every model's state.

Inputs are mapped min-max to [-1, 1] per dimension; targets are standardised. Both are fitted once (on the
first batch, or from explicit bounds such as a mission's task extent). Explicit bounds and the target scaling are
then frozen. A range fitted on the first batch may widen later, to cover inputs beyond it
(:meth:`Scaler.covering`), in models that re-express their state in the wider units
(:meth:`onlinegp.base.OnlineGP._follow`).
"""

from __future__ import annotations

import torch
from torch import Tensor, nn


class Scaler(nn.Module):
    """Affine maps ``x -> (x - center) / half_range`` and ``y -> (y - mean) / std``."""

    def __init__(
        self,
        input_dim: int,
        x_bounds: Tensor | None = None,
        y_stats: tuple[float, float] | None = None,
        dtype: torch.dtype = torch.float64,
    ):
        super().__init__()
        self.register_buffer("x_center", torch.zeros(input_dim, dtype=dtype))
        self.register_buffer("x_half_range", torch.ones(input_dim, dtype=dtype))
        self.register_buffer("y_mean", torch.zeros((), dtype=dtype))
        self.register_buffer("y_std", torch.ones((), dtype=dtype))
        self.register_buffer("x_fitted", torch.tensor(False))
        self.register_buffer("y_fitted", torch.tensor(False))
        if x_bounds is not None:
            self.set_x_bounds(torch.as_tensor(x_bounds, dtype=dtype))
        if y_stats is not None:
            self.y_mean.fill_(float(y_stats[0]))
            self.y_std.fill_(float(y_stats[1]))
            self.y_fitted.fill_(True)

    def set_x_bounds(self, bounds: Tensor) -> None:
        """``bounds`` is ``(2, D)``: row 0 the lower, row 1 the upper corner."""
        bounds = bounds.reshape(2, -1).to(self.x_center)
        half = (bounds[1] - bounds[0]) / 2
        self.x_center.copy_((bounds[1] + bounds[0]) / 2)
        self.x_half_range.copy_(torch.where(half > 0, half, torch.ones_like(half)))
        self.x_fitted.fill_(True)

    def fit(self, x: Tensor, y: Tensor) -> list[str]:
        """Fit whatever is not fitted yet on the first batch; returns what that batch could not define (a column with
        one value, targets with one value), which got a unit scale in user units and stays frozen with it."""
        degenerate = []
        if not bool(self.x_fitted):
            low, high = x.min(0).values, x.max(0).values
            degenerate += [f"input column {j}" for j in (high <= low).nonzero().flatten().tolist()]
            self.set_x_bounds(torch.stack([low, high]))
        if not bool(self.y_fitted):
            std = y.std() if y.numel() > 1 else torch.ones((), dtype=y.dtype)
            if not float(std) > 0 or y.numel() < 2:
                degenerate.append("the targets")
            self.y_mean.copy_(y.mean())
            self.y_std.copy_(std if float(std) > 0 else torch.ones_like(std))
            self.y_fitted.fill_(True)
        return degenerate

    def covering(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The smallest box holding the current range and the rows ``x``, as ``(bounds, scale, shift)``: the new
        ``(2, D)`` bounds and the per-column map of scaled inputs into them, ``xs_new = scale * xs + shift``."""
        low = torch.minimum(self.x_center - self.x_half_range, x.min(0).values)
        high = torch.maximum(self.x_center + self.x_half_range, x.max(0).values)
        center, half = (high + low) / 2, (high - low) / 2
        return torch.stack([low, high]), self.x_half_range / half, (self.x_center - center) / half

    def x(self, x: Tensor) -> Tensor:
        return (x - self.x_center) / self.x_half_range

    def x_inverse(self, xs: Tensor) -> Tensor:
        return xs * self.x_half_range + self.x_center

    def y(self, y: Tensor) -> Tensor:
        return (y - self.y_mean) / self.y_std

    def y_inverse_mean(self, mean: Tensor) -> Tensor:
        return mean * self.y_std + self.y_mean

    def y_inverse_var(self, var: Tensor) -> Tensor:
        return var * self.y_std**2
