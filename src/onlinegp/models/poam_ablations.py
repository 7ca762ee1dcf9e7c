"""POAM's two SSGP ablations (Chen et al. 2024, §V-C and Fig. 8), as small overrides of POAM's E-step / M-step.

* VAR-SSGP: POAM with SSGP's variational update. Instead of projecting stored data terms, q(u) at the new Z
  comes from the old q(u) and the new batch through D and c of the online bound (Bui et al. 2017, stable form).
  The M-step is POAM's (Adam on the uncollapsed ELBO over mini-batches of all data).
* ONLINE-ELBO: POAM's E-step, but the M-step trains θ on SSGP's online collapsed bound of the new batch given the
  previous q(u) (at the previous Z and the prior under which it was formed), instead of the uncollapsed ELBO on all
  data.

Both keep the summary InducingPosterior(Z, L_u, L_D, β) of the last E-step, the form the online bound needs.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from ..base import preset
from ..objectives import log_prior, online_bound, online_terms
from ..posterior import InducingPosterior
from ..training import gradient_steps
from .poam import POAM
from .registry import register


class _SummaryAblation(POAM):
    """POAM with one step replaced by SSGP's, keeping the summary InducingPosterior of the last E-step."""

    _dynamic = POAM._dynamic + ("summary",)

    def __init__(self, input_dim: int | None = None, **kwargs: Any):
        fixed = dict(terms="online", inducing_from="online", optimize_inducing=False, variational="analytic")
        super().__init__(input_dim, **preset(type(self).__name__, kwargs, **fixed, noise_weighted=False))
        self.summary: InducingPosterior | None = None

    def _follow(self, scale: Tensor, shift: Tensor) -> bool:
        """SSGP's summary is tied to the units it was formed in (as :class:`~onlinegp.models.osgpr.OSGPR`'s)."""
        return False


@register("var-ssgp", "POAM ablation: SSGP's variational update")
class VarSSGP(_SummaryAblation):
    """POAM-VAR-SSGP: pivoted-Cholesky Z, SSGP's variational update, POAM's M-step. Options as for POAM."""

    @torch.no_grad()
    def _e_step(self, xs: Tensor, ys: Tensor) -> None:
        context = self._selection_context(xs.shape[0])
        Z_new = self.selector(self.kernel, self.Z, xs, generator=self.generator, context=context)
        self.summary = online_terms(self.kernel, self.noise, Z_new, xs, ys, self.summary, self.jitter).posterior()
        self.Z, self.q = Z_new, self.summary.q()


@register("online-elbo", "POAM ablation: M-step on SSGP's online bound")
class OnlineELBO(_SummaryAblation):
    """POAM-ONLINE-ELBO: POAM's E-step; M-step = ``training.steps`` Adam steps on the online bound of the new batch."""

    def __init__(self, input_dim: int | None = None, **kwargs: Any):
        super().__init__(input_dim, **kwargs)
        self._previous: InducingPosterior | None = None
        self._batch: tuple[Tensor, Tensor] | None = None

    @torch.no_grad()
    def _e_step(self, xs: Tensor, ys: Tensor) -> None:
        self._previous, self._batch = self.summary, (xs, ys)
        super()._e_step(xs, ys)
        self.summary = self.projected.posterior(self.kernel, self.noise, self.jitter)

    def _m_step(self, optimizer: torch.optim.Optimizer, num_steps: int, schedules: tuple = ()) -> float | None:
        if num_steps == 0:
            return None
        xs, ys = self._batch
        return gradient_steps(
            [optimizer],
            lambda: online_bound(self.kernel, self.noise, self.Z, xs, ys, self._previous, self.jitter)
            + log_prior(self.kernel),
            num_steps,
            scale=xs.shape[0],
            schedules=schedules,
        )
