"""What the local-GP ensembles share (WGPR, Kepler et al. 2021; SOLAR-GP-style, Wilcox & Yip 2020).

:class:`LocalEnsemble` builds its members from the model registry, in the ensemble's scaled units, keeps their
checkpoints, and predicts through their ``posterior_scaled`` with each member's own noise.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any

import torch
from torch import Tensor

from ..base import OnlineGP, Prediction
from ..linalg import CholeskyError
from .registry import make_model


def over_defaults(defaults: dict[str, Any], given: dict[str, Any] | None) -> dict[str, Any]:
    """``given`` options over ``defaults``: a dict given for a dict default (e.g. ``training``) is merged into it key
    by key, anything else replaces the default."""
    given = dict(given or {})
    merged = {
        k: {**v, **given[k]} for k, v in defaults.items() if isinstance(v, dict) and isinstance(given.get(k), dict)
    }
    return {**defaults, **given, **merged}


#: failures of a member's update that make it "dissimilar" (WGPR) or start a new member (SOLAR-GP) rather than crash
NUMERICAL_FAILURES = (CholeskyError, torch.linalg.LinAlgError)


class LocalEnsemble(OnlineGP):
    """An ensemble of online sparse GPs ("members") in the ensemble's scaled units.

    Args:
        input_dim: D.
        member: registry name of the members' model (default 'osgpr') or a callable ``f(input_dim, **options)``.
        num_inducing: M per member (default 50).
        member_options: further keyword arguments for every member (kernel, optimiser settings, ...), over the
            class's ``MEMBER_DEFAULTS`` where the members are OSGPRs (a dict over a dict, e.g. ``training``, is merged
            into it key by key).
        fresh_start: where a fresh member's hyper-parameters θ (its kernel's and likelihood's) start before it is fitted
            to its batch: 'prior' (default: the members' initial θ) or 'nearest' (a warm start, ours: the θ of the
            member whose centroid is nearest the batch's mean; the first member starts at the prior).
        **options: x_bounds, y_stats, seed, dtype, as for every :class:`~onlinegp.base.OnlineGP`; the member created at
            update t gets seed ``seed + t``.
    """

    _dynamic = ("centroids",)
    #: options of OSGPR members that ``member_options`` overrides: their L-BFGS fits end once the bound per point has
    #: settled to 1e-3 per evaluation (``training.tolerance``, ours: WGPR's since 0.7.3, SOLAR-GP's since 0.7.4;
    #: ``{"training": {"tolerance": 0}}`` runs the whole budget, as before), and they keep their pseudo-inputs where
    #: those bound the batch better than a new pivoted-Cholesky selection (``inducing='pivoted-or-kept'``, ours:
    #: :class:`~onlinegp.inducing.KeptOrSelected`; WGPR's since 0.7.7, SOLAR-GP's since 0.7.8; a member maps its own
    #: region, the ensemble's other members the rest; ``{"inducing": "pivoted"}`` re-selects at every batch)
    MEMBER_DEFAULTS: dict[str, Any] = {"training": {"tolerance": 1e-3}, "inducing": "pivoted-or-kept"}
    #: where a fresh member's hyper-parameters may start (``fresh_start``)
    FRESH_STARTS: tuple[str, ...] = ("prior", "nearest")

    def __init__(
        self,
        input_dim: int | None = None,
        *,
        member: Any = "osgpr",
        num_inducing: int = 50,
        member_options: dict | None = None,
        fresh_start: str = "prior",
        **options: Any,
    ):
        super().__init__(input_dim, **options)
        if not (isinstance(num_inducing, int) and num_inducing >= 1):
            raise ValueError(f"num_inducing must be a positive integer, got {num_inducing!r}")
        if fresh_start not in self.FRESH_STARTS:
            raise ValueError(f"fresh_start must be one of {self.FRESH_STARTS}, got {fresh_start!r}")
        self.fresh_start = fresh_start
        self.member, self.num_inducing_per_member = member, num_inducing
        self.member_options = over_defaults(self.MEMBER_DEFAULTS if member == "osgpr" else {}, member_options)
        self.members: list[OnlineGP] = []
        self.member_seeds: list[int] = []

    def options(self) -> dict[str, Any]:
        return {
            **super().options(),
            "member": self.member,
            "num_inducing": self.num_inducing_per_member,
            "member_options": dict(self.member_options),
            "fresh_start": self.fresh_start,
        }

    def _build(self, input_dim: int) -> None:
        super()._build(input_dim)
        self.centroids = torch.zeros(0, input_dim, dtype=self.dtype)

    # ------------------------------------------------------------------ members
    def _build_member(self, seed: int) -> OnlineGP:
        """A member with identity scaling, so its units are the ensemble's scaled units."""
        identity = torch.stack([-torch.ones(self.input_dim), torch.ones(self.input_dim)]).to(self.dtype)
        options = dict(
            num_inducing=self.num_inducing_per_member,
            x_bounds=identity,
            y_stats=(0.0, 1.0),
            seed=seed,
            dtype=self.dtype,
            **self.member_options,
        )
        if callable(self.member):
            return self.member(self.input_dim, **options).to(self.device)
        return make_model(self.member, self.input_dim, **options).to(self.device)

    def _fresh_member(self, xs: Tensor, ys: Tensor, nearest: bool | None = None) -> tuple[OnlineGP, int, float]:
        """A new member fitted on the batch alone (seed ``seed + num_updates``), θ starting at the nearest member's
        (``nearest``; None: where ``fresh_start`` is 'nearest') or at the prior; returns it, its seed and its bound."""
        seed = self.seed + self.num_updates
        member = self._build_member(seed)
        if (self.fresh_start == "nearest" if nearest is None else nearest) and self.members:
            near = self.members[int(torch.cdist(xs.mean(0).reshape(1, -1), self.centroids)[0].argmin())]
            member.kernel.load_state_dict(near.kernel.state_dict())
            member.likelihood.load_state_dict(near.likelihood.state_dict())
        report = member.update(xs, ys)
        self.jitter.merge(member.jitter)
        return member, seed, report.objective

    def _add_member(self, member: OnlineGP, seed: int, centroid: Tensor) -> None:
        self.members.append(member)
        self.member_seeds.append(seed)
        self.centroids = torch.cat([self.centroids, centroid.reshape(1, -1)])

    @staticmethod
    def inducing_of(member: OnlineGP) -> Tensor:
        """A member's pseudo-inputs (scaled units)."""
        return member.Z

    @property
    def num_models(self) -> int:
        return len(self.members)

    @property
    def num_inducing(self) -> int | None:
        return sum(int(self.inducing_of(m).shape[0]) for m in self.members) if self.members else None

    @property
    def noise(self) -> Tensor:
        """The members' mean noise variance (scaled units), for code that needs one number; predictions use the
        noise of the member(s) that make them."""
        if not self.members:
            return super().noise
        return torch.stack([m.noise for m in self.members]).mean()

    # ------------------------------------------------------------------ prediction
    @abstractmethod
    def posterior_scaled(self, xs: Tensor, full_cov: bool = False) -> Prediction:
        """Prediction in scaled units from the members (their ``posterior_scaled``), ``var_y`` with each predicting
        member's own noise; differentiable in ``xs`` (for the BoTorch adapter)."""

    def _predict(self, xs: Tensor, full_cov: bool) -> tuple[Tensor, Tensor, Tensor | None]:
        p = self.posterior_scaled(xs, full_cov)
        return p.mean, p.var_f, p.cov_f

    # ------------------------------------------------------------------ checkpoints
    def _extra_state(self) -> dict:
        return {"members": [m.state_dict() for m in self.members], "member_seeds": list(self.member_seeds)}

    def _load_extra_state(self, state: dict) -> None:
        self.member_seeds = list(state["member_seeds"])
        self.members = []
        for seed, member_state in zip(self.member_seeds, state["members"]):
            member = self._build_member(seed)
            member.load_state_dict(member_state)
            self.members.append(member)
