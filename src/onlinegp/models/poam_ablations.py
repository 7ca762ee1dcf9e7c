"""POAM's two SSGP ablations (paper 000, §V-C and Fig. 8), as small overrides of POAM's E-step / M-step.

* VAR-SSGP: POAM with SSGP's variational update. Instead of projecting stored data terms, q(u) at the new Z
  comes from the old q(u) and the new batch through D and c of the online bound (Bui et al. 2017; notes 003).
  The M-step is POAM's (Adam on the uncollapsed ELBO over mini-batches of all data).
* ONLINE-ELBO: POAM's E-step, but the M-step trains θ on SSGP's online collapsed bound of the new batch given the
  previous q(u) (at the previous Z and the prior under which it was formed), instead of the uncollapsed ELBO on all
  data.

Both keep the summary InducingPosterior(Z, L_u, L_D, β) of the last E-step, the form the online bound needs.
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..objectives import online_bound, online_terms
from ..posterior import InducingPosterior
from .poam import POAM

_FIXED_OPTIONS = ("terms", "inducing_from", "optimize_inducing", "variational", "noise_weighted")


def _reject(name: str, kwargs: dict) -> None:
    bad = sorted(set(kwargs) & set(_FIXED_OPTIONS))
    if bad:
        raise ValueError(f"{name} is POAM with one step replaced; it does not take {', '.join(bad)} "
                         "(use POAM for the other ablations)")


class VarSSGP(POAM):
    """POAM-VAR-SSGP: pivoted-Cholesky Z, SSGP's variational update, POAM's M-step. Options as for POAM."""

    _dynamic = POAM._dynamic + ("summary",)

    def __init__(self, input_dim: int, **kwargs):
        _reject("VAR-SSGP", kwargs)
        super().__init__(input_dim, **kwargs)
        self.summary: InducingPosterior | None = None

    @torch.no_grad()
    def _e_step(self, xs: Tensor, ys: Tensor) -> None:
        Z_new = self.selector(self.kernel, self.Z, xs, generator=self.generator, model=self)
        self.summary = online_terms(self.kernel, self.noise, Z_new, xs, ys, self.summary, self.jitter).posterior()
        self.Z, self.q = Z_new, self.summary.q()


class OnlineELBO(POAM):
    """POAM-ONLINE-ELBO: POAM's E-step; M-step = ``num_steps`` Adam steps on the online bound of the new batch."""

    _dynamic = POAM._dynamic + ("summary",)

    def __init__(self, input_dim: int, **kwargs):
        _reject("ONLINE-ELBO", kwargs)
        super().__init__(input_dim, **kwargs)
        self.summary: InducingPosterior | None = None
        self._previous: InducingPosterior | None = None
        self._batch: tuple[Tensor, Tensor] | None = None

    @torch.no_grad()
    def _e_step(self, xs: Tensor, ys: Tensor) -> None:
        self._previous, self._batch = self.summary, (xs, ys)
        super()._e_step(xs, ys)
        self.summary = InducingPosterior.from_terms(self.kernel, self.Z, self.a / self.noise, self.B / self.noise,
                                                    self.jitter, Lu=self.Lu_terms)

    def _m_step(self) -> float | None:
        if self.num_steps == 0:
            return None
        xs, ys = self._batch
        value = None
        for _ in range(self.num_steps):
            self.optimizer.zero_grad(set_to_none=True)
            bound = online_bound(self.kernel, self.noise, self.Z, xs, ys, self._previous, self.jitter)
            (-bound / xs.shape[0]).backward()
            self.optimizer.step()
            value = float(bound.detach())
        return value
