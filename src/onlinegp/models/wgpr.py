"""WGPR: Wasserstein-splitting Gaussian process regression (Kepler et al. 2021, §III and Algorithm 1).

An ensemble of sparse GPs, each with its own hyper-parameters and updated online (OSGPR by default, the online VFE
of Bui et al. 2017). For a batch (X_new, y_new):

1. the J′ members whose centroid (mean of their pseudo-inputs) is nearest the batch's mean are updated on copies;
2. a fresh member is fitted on the batch alone (the batch VFE of Titsias 2009, i.e. OSGPR's first update);
3. each candidate j is scored (Eq. 6) by w_j = W₂²(GP_j, GP_j^upd at Z_j) + W₂²(GP_j^upd, GP_new at X_new), the
   closed-form 2-Wasserstein distance between the posteriors of f (:mod:`onlinegp.wasserstein`);
4. Eq. 7: if min_j w_j < ε the best update replaces its member, otherwise the fresh member joins the ensemble;
   all other copies are dropped, so the other members stay exactly as they were.

An update that fails numerically (Cholesky or other linear-algebra failure, non-finite predictions) scores +∞:
that member is "not similar", never a crash. Prediction (§III-B) uses, for each query, the one member whose
nearest pseudo-input is closest to it.

Scaling. The ensemble's own :class:`~onlinegp.scaling.Scaler` maps user units to the scaled space once (fitted on
the first batch or from ``x_bounds``/``y_stats``). Every member is built with the identity scaling
(``x_bounds`` = [−1, 1]^D, ``y_stats`` = (0, 1)), so the members live in the ensemble's scaled units: they never
refit a scaling of their own, their pseudo-inputs and centroids are directly comparable, and W₂² (hence ε) is
measured in standardised target units, summed over the M + N_new points of Eq. 6.

The machinery WGPR shares with the SOLAR-GP-style baseline is :class:`~onlinegp.models.ensemble.LocalEnsemble`.
"""

from __future__ import annotations

import copy
import math
from typing import Any

import torch
from torch import Tensor

from ..base import OnlineGP, PhaseTimer, Prediction
from ..validation import as_tensor_2d
from ..wasserstein import w2_squared
from .ensemble import NUMERICAL_FAILURES, LocalEnsemble
from .registry import register

#: rows of queries routed at once (bounds the query × pseudo-input distance matrix)
QUERY_CHUNK = 2048
#: the members' OSGPR options under the user's ``member_options``: Bui et al. 2017's fit (θ at the selected
#: pseudo-inputs, the old data at the noise of their summary), guarded by :data:`RUNAWAY_GROWTH`
MEMBER_DEFAULTS = {"fit_inducing": "selected", "old_noise": "fixed"}
#: a member's update whose noise variance or output scale grows more than this factor is redone the stable way
RUNAWAY_GROWTH = 10.0
#: the member warnings that also send its update to the stable refit (:mod:`onlinegp.health`)
RUNAWAY_WARNINGS = ("ran away", "diverging fit")


@register(
    "wgpr",
    "WGPR: ensemble of OSGPR members split by the 2-Wasserstein distance, nearest-model prediction "
    "(Kepler et al. 2021)",
)
class WGPR(LocalEnsemble):
    """Wasserstein-splitting ensemble of sparse GPs (Kepler et al. 2021, Algorithm 1).

    Args:
        input_dim: D.
        epsilon: ε, the instantiation threshold on w_j (Eq. 7), in standardised target units² summed over the
            M + N_new points, so it depends on the data (Kepler et al. 2021, §V): run once with ``math.inf`` and read
            the scores in ``report.extra['scores']`` to choose it. ``math.inf`` never splits (one OSGPR), 0 starts a
            member on every batch.
        num_nearest: J′, how many members (nearest by centroid) are candidates for each batch (default 5).
        early_accept: score the candidates nearest first and accept the first whose w_j < ε without updating the
            rest (ours, off by default): an approximation of Eq. 7, which takes the minimum over all J′ candidates, so
            it may keep another member than the minimum would; it saves the updates of the candidates not scored.
        stable_refit: redo a member's update that runs away the stable way (ours, on by default; see below).
        **kwargs: member, num_inducing, member_options, fresh_start, x_bounds, y_stats, seed, dtype, see
            :class:`LocalEnsemble`. The default members are OSGPR with RBF-ARD kernels, pivoted-Cholesky Z and L-BFGS
            on θ, fitted as Bui et al. 2017 fit them (:data:`MEMBER_DEFAULTS`: ``fit_inducing='selected'``,
            ``old_noise='fixed'``; ``member_options`` overrides them); the paper also moves Z by gradient
            (``member_options={"optimize_inducing": True}``).

    Stable members (``stable_refit``, ours). Bui et al.'s fit maps best where it is stable (the UCI defaults cells of
    0.1.0), but once a member's M is at its cap its θ can run away to explain the dropped pseudo-inputs (the lake
    stand-in's lanes: σ² 0.12 → 55 in one update; see :class:`~onlinegp.models.osgpr.OSGPR`). A candidate update
    (of a copy) whose member's noise variance or output scale grew more than :data:`RUNAWAY_GROWTH` times, or that
    warns of runaway hyper-parameters or a diverging fit, is redone from the member as it was with
    ``fit_inducing='union'`` (θ fitted at the selected and the dropped pseudo-inputs), the member's own options
    otherwise; the report's ``extra['refitted']`` counts them. A member built with ``fit_inducing='union'`` is never
    refitted.

    The report's ``extra`` holds ``scores`` (w_j of each candidate scored, +∞ for a failed update), ``candidates``
    (those scored, nearest first), ``chosen``, ``split``, ``failed`` and ``num_models``. A batch on which even the
    fresh member cannot be fitted (e.g. a non-positive-definite kernel matrix at every jitter) is rejected like any
    failed update: the ensemble stays as it was and the error is raised.
    """

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        epsilon: float = 10.0,
        num_nearest: int = 5,
        early_accept: bool = False,
        stable_refit: bool = True,
        **kwargs: Any,
    ):
        if kwargs.get("member", "osgpr") == "osgpr":
            kwargs["member_options"] = {**MEMBER_DEFAULTS, **(kwargs.get("member_options") or {})}
        super().__init__(input_dim, **kwargs)
        if not (isinstance(epsilon, (int, float)) and epsilon >= 0 and not math.isnan(epsilon)):
            raise ValueError(f"epsilon must be a number >= 0 (math.inf never splits), got {epsilon!r}")
        if not (isinstance(num_nearest, int) and num_nearest >= 1):
            raise ValueError(f"num_nearest (J') must be a positive integer, got {num_nearest!r}")
        if not isinstance(early_accept, bool):
            raise ValueError(f"early_accept must be True or False, got {early_accept!r}")
        if not isinstance(stable_refit, bool):
            raise ValueError(f"stable_refit must be True or False, got {stable_refit!r}")
        self.epsilon, self.num_nearest, self.early_accept = float(epsilon), num_nearest, early_accept
        self.stable_refit = stable_refit

    def options(self) -> dict[str, Any]:
        return {
            **super().options(),
            "epsilon": self.epsilon,
            "num_nearest": self.num_nearest,
            "early_accept": self.early_accept,
            "stable_refit": self.stable_refit,
        }

    def _candidate(
        self, j: int, xs: Tensor, ys: Tensor, fresh_mean: Tensor, fresh_cov: Tensor, timer: PhaseTimer
    ) -> tuple[float, OnlineGP | None, bool]:
        """Update a copy of member j (the stable way if it ran away: :func:`ran_away`) and score it by Eq. 6; a
        numerically failed update scores +∞. Whether it was refitted the stable way."""
        old = self.members[j]
        try:
            with timer("candidates"):
                cand = copy.deepcopy(old)
                report = cand.update(xs, ys)
                refitted = self.stable_refit and ran_away(old, cand, report.warnings)
                if refitted:
                    cand = stable_update(old, xs, ys)
            with timer("wasserstein"):
                Z = self.inducing_of(old)
                before, after = old.predict(Z, full_cov=True), cand.predict(Z, full_cov=True)
                at_new = cand.predict(xs, full_cov=True)
                w = w2_squared(before.mean, before.cov_f, after.mean, after.cov_f) + w2_squared(
                    at_new.mean, at_new.cov_f, fresh_mean, fresh_cov
                )
        except NUMERICAL_FAILURES:
            return math.inf, None, False
        w = float(w)
        if not math.isfinite(w):
            return math.inf, None, False
        self.jitter.merge(cand.jitter)
        return w, cand, refitted

    def _update(self, xs: Tensor, ys: Tensor, timer: PhaseTimer) -> dict:
        centre = xs.mean(0)
        with timer("fresh"):
            fresh, seed = self._fresh_member(xs, ys)
        if not self.members:
            self._add_member(fresh, seed, self.inducing_of(fresh).mean(0))
            return {"num_models": 1, "split": True, "scores": [], "candidates": [], "chosen": 0, "failed": 0}
        with timer("wasserstein"), torch.no_grad():
            ref = fresh.predict(xs, full_cov=True)
        near = torch.cdist(centre.reshape(1, -1), self.centroids)[0].argsort()[: self.num_nearest].tolist()
        scored = []
        for j in near:
            scored.append((self._candidate(j, xs, ys, ref.mean, ref.cov_f, timer), j))
            if self.early_accept and scored[-1][0][0] < self.epsilon:
                break
        (best, cand, _), j_best = min(scored, key=lambda s: s[0][0])
        failed = sum(1 for (w, _, _), _ in scored if w == math.inf)
        scores = [w for (w, _, _), _ in scored]
        if best < self.epsilon:
            self.members[j_best] = cand
            self.centroids[j_best] = self.inducing_of(cand).mean(0)
            chosen, split = j_best, False
        else:
            self._add_member(fresh, seed, self.inducing_of(fresh).mean(0))
            chosen, split = len(self.members) - 1, True
        return {
            "num_models": len(self.members),
            "split": split,
            "scores": scores,
            "candidates": [j for _, j in scored],
            "chosen": chosen,
            "failed": failed,
            "refitted": sum(refitted for (_, _, refitted), _ in scored),  # candidates refitted the stable way
        }

    # ------------------------------------------------------------------ prediction (§III-B)
    @torch.no_grad()
    def assign(self, xs: Tensor) -> Tensor:
        """Index of the member whose nearest pseudo-input is closest to each query (scaled units)."""
        Zs = [self.inducing_of(m) for m in self.members]
        Z_all = torch.cat(Zs)
        owner = torch.repeat_interleave(torch.arange(len(Zs)), torch.tensor([z.shape[0] for z in Zs]))
        return torch.cat([owner[torch.cdist(chunk, Z_all).argmin(1)] for chunk in xs.split(QUERY_CHUNK)])

    @torch.no_grad()
    def model_index(self, x: Any) -> Tensor:
        """Which member predicts at each input ``x`` (user units)."""
        return self.assign(self.scaler.x(as_tensor_2d(x, "x", self.dtype, self.input_dim)))

    def posterior_scaled(self, xs: Tensor, full_cov: bool = False) -> Prediction:
        who = self.assign(xs)
        n = xs.shape[0]
        mean, var_f, var_y = (torch.zeros(n, dtype=xs.dtype, device=xs.device) for _ in range(3))
        cov = torch.zeros(n, n, dtype=xs.dtype, device=xs.device) if full_cov else None
        for j in who.unique().tolist():
            rows = (who == j).nonzero(as_tuple=True)[0]
            p = self.members[j].posterior_scaled(xs[rows], full_cov)
            mean[rows], var_f[rows], var_y[rows] = p.mean, p.var_f, p.var_y
            if full_cov:  # different members are independent: the covariance is block-diagonal
                cov[rows.unsqueeze(1), rows.unsqueeze(0)] = p.cov_f
        return Prediction(mean=mean, var_f=var_f, var_y=var_y, cov_f=cov)


def _scales(member: OnlineGP) -> tuple[float, float]:
    """A member's noise variance and output scale (scaled units)."""
    outputscale = getattr(member.kernel, "outputscale", None)
    return float(member.noise.detach().max()), 1.0 if outputscale is None else float(outputscale.detach().max())


def ran_away(before: OnlineGP, after: OnlineGP, warnings: list[str]) -> bool:
    """Whether an update of a Bui et al.-fitted member (``fit_inducing='selected'``) ran away: its noise variance or
    output scale grew more than :data:`RUNAWAY_GROWTH` times, or it warned of :data:`RUNAWAY_WARNINGS`."""
    if getattr(before, "fit_inducing", None) != "selected" or before.num_updates == 0:
        return False
    grew = any(b > 0 and a > RUNAWAY_GROWTH * b for b, a in zip(_scales(before), _scales(after), strict=True))
    return grew or any(symptom in w for w in warnings for symptom in RUNAWAY_WARNINGS)


def stable_update(member: OnlineGP, xs: Tensor, ys: Tensor) -> OnlineGP:
    """A copy of ``member`` updated with θ fitted at its selected and dropped pseudo-inputs (``fit_inducing='union'``,
    see :class:`~onlinegp.models.osgpr.OSGPR`), then set back to its own fit for later updates."""
    stable = copy.deepcopy(member)
    stable.fit_inducing = "union"
    stable.update(xs, ys)
    stable.fit_inducing = member.fit_inducing
    return stable
