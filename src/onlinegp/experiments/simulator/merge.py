"""The decentralised fleet's maps: every vehicle keeps its own POAM, and two vehicles within communication range merge.

POAM's data enter q(u) only through a = Σ K_zX y and B = Σ K_zX K_Xz at the inducing inputs Z (Chen et al. 2024,
Eqs. 7-8 and 16-21), sums over samples. At one Z, under one θ and one target scaling, the terms of two disjoint
sample sets therefore add up to exactly those of one model that saw both. A merge
(:meth:`VehicleMap.receive`):

1. **θ.** ``richer`` (the default): the receiver takes the sender's kernel and noise parameters if the sender holds
   more samples, else keeps its own. ``average``: the parameters (unconstrained) averaged, weighted by the samples
   each model holds (federated averaging, McMahan et al. 2017). Each model's θ is fitted to its own samples only
   (below), so neither is the θ of one model of all the data: this is the merge's first approximation.
2. **Z.** The receiver's selector picks the common inducing inputs from both models' (``[Z_mine; Z_theirs]``, as
   POAM's E-step picks from ``[Z; X_new]``), so both vehicles' regions keep inducing inputs.
3. **Terms.** Every part of the terms is projected onto the common Z under the merged θ (P = K_zz⁻¹ K_zz', Eqs.
   18-21, :meth:`~onlinegp.projected.ProjectedTerms.project`) and the parts are summed; q(u) and the predictor
   follow (Eqs. 7-8). A projection is exact only where Z and θ do not change: the second approximation.

**No sample is counted twice** (the channel-filter problem of decentralised data fusion, Grime and Durrant-Whyte
1994). Each vehicle's samples are a time-ordered stream, and every model holds a prefix of each vehicle's stream:
:attr:`VehicleMap.held` counts it per source vehicle, and the model's terms are kept split by source
(:attr:`VehicleMap.parts`; the own part is the total minus the others). A receiver replaces its part of source s by
the sender's only when the sender holds more of s (a longer prefix, which contains the receiver's); every other
part stays. So a sample enters a model once however often vehicles meet, and news passes on from vehicle to
vehicle. Only the terms travel: POAM's M-step draws its mini-batches from the model's own raw samples, so each
vehicle's θ learns from its own samples only.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from ...inducing import SelectionContext
from ...models.poam import POAM
from ...posterior import Predictor
from ...projected import ProjectedTerms

#: how a merge sets θ; the default, the richer model's, gave the better final MSLL in 5 of 6 missions and the lower
#: mean final SMSE at both radii tried (benchmarks/studies/results/fleet_decentralised.md)
MERGE_THETAS = ("richer", "average")
DEFAULT_MERGE_THETA = "richer"
#: the default communication radius as a fraction of the task extent's shorter side: 30 m on the bundled 60 m fields.
#: At 1/4 (15 m) four vehicles on valley-ridges never met in 2000 samples: joint goals kept every pair at least 16.8 m
#: apart (benchmarks/studies/results/fleet_decentralised.md)
COMM_RADIUS_FRACTION = 0.5


def default_comm_radius(task_extent: Sequence[float]) -> float:
    """The communication radius (m) of a decentralised fleet whose config leaves it unset."""
    xmin, xmax, ymin, ymax = (float(e) for e in task_extent)
    return COMM_RADIUS_FRACTION * min(xmax - xmin, ymax - ymin)


def check_mergeable(model: object) -> None:
    """A ValueError unless ``model`` is a POAM whose stored terms follow the E-step alone (what a merge sums)."""
    if not (
        isinstance(model, POAM)
        and model.terms == "online"
        and model.inducing_from == "online"
        and model.variational == "analytic"
        and not (model.optimize_inducing or model.noise_weighted)
    ):
        raise ValueError(
            "a decentralised fleet merges POAM's projected terms: use --model poam, z-rand or z-kmeans "
            f"(not {type(model).__name__} with these options)"
        )


def _parameters(model: POAM) -> list[torch.nn.Parameter]:
    """θ: the kernel's and the likelihood's raw parameters."""
    return [*model.kernel.parameters(), *model.likelihood.parameters()]


@dataclass
class Message:
    """What a vehicle sends at a meeting: its samples held per source, its terms per source (each at its Z, with
    its chol K_zz and θ) and θ itself."""

    held: np.ndarray
    parts: dict[int, ProjectedTerms]
    theta: list[Tensor]
    Z: Tensor


class VehicleMap:
    """Vehicle ``index``'s own POAM in a fleet of ``num_vehicles``, with its terms split by source (module docstring)."""

    def __init__(self, model: POAM, index: int, num_vehicles: int):
        check_mergeable(model)
        self.model, self.index = model, index
        self.held = np.zeros(num_vehicles, dtype=np.int64)
        #: the other sources' parts (a, B) of the model's terms, at its Z (own part: the rest)
        self.parts: dict[int, tuple[Tensor, Tensor]] = {}

    def absorb(self, x: np.ndarray, y: np.ndarray) -> None:
        """The model's update with the vehicle's own next samples (user units); the other sources' parts follow the
        E-step's projection onto the new Z."""
        model, before = self.model, self.model.projected
        kernel = copy.deepcopy(model.kernel) if self.parts else None  # θ at the E-step: the M-step moves it
        model.update(torch.from_numpy(x), torch.from_numpy(y))
        if kernel is not None:
            self.parts = {s: self._terms(before, *ab).project(kernel, model.Z) for s, ab in self.parts.items()}
        self.held[self.index] += len(y)

    @staticmethod
    def _terms(like: ProjectedTerms, a: Tensor, B: Tensor) -> ProjectedTerms:
        return ProjectedTerms(like.Z, a, B, like.Lu, like.theta, like.noise_weighted)

    def message(self) -> Message:
        """This vehicle's side of a meeting (nothing is shared with the live model)."""
        total = self.model.projected
        own = (total.a - sum(a for a, _ in self.parts.values()), total.B - sum(B for _, B in self.parts.values()))
        parts = {s: self._terms(total, *ab) for s, ab in {self.index: own, **self.parts}.items()}
        return Message(self.held.copy(), parts, [p.detach().clone() for p in _parameters(self.model)], total.Z)

    @torch.no_grad()
    def receive(self, message: Message, theta: str = DEFAULT_MERGE_THETA) -> bool:
        """Merge the sender's ``message`` into this model (module docstring); False if it held nothing newer."""
        newer = [int(s) for s in np.flatnonzero(message.held > self.held)]
        if not newer:
            return False
        model, mine = self.model, self.message()
        ours, theirs = int(self.held.sum()), int(message.held.sum())
        for p, q in zip(_parameters(model), message.theta):
            if theta == "average":
                p.copy_((ours * p + theirs * q) / (ours + theirs))
            elif theirs > ours:
                p.copy_(q)
        # no batch is being absorbed: the selector is told only the model's counts and σ²
        context = SelectionContext(noise=model.noise.detach(), num_data=model.num_data, num_updates=model.num_updates)
        Z = model.selector(model.kernel, mine.Z, message.Z, generator=model.generator, context=context)
        sources = {s: mine.parts[s] for s in mine.parts if s not in newer} | {s: message.parts[s] for s in newer}
        projected = {s: t.project(model.kernel, Z) for s, t in sources.items()}
        a, B = (sum(ab[i] for ab in projected.values()) for i in (0, 1))
        model._set_terms(Z, a, B)  # the rest of POAM's E-step (Eqs. 7-8) and its predictor, as POAM._update ends
        model.q = model.projected.posterior(model.kernel, model.noise, model.jitter).q()
        model.predictor = Predictor.from_q(model.kernel, model.q, model.jitter)
        model._remember_root(model.q.Z, model.predictor.Lu)
        self.parts = {s: ab for s, ab in projected.items() if s != self.index}
        self.held = np.maximum(self.held, message.held)
        return True

    def state(self) -> dict:
        return {"held": self.held.copy(), "parts": {s: (a.clone(), B.clone()) for s, (a, B) in self.parts.items()}}

    def load_state(self, state: dict) -> None:
        self.held = state["held"].copy()
        self.parts = {int(s): (a.clone(), B.clone()) for s, (a, B) in state["parts"].items()}


def exchange(first: VehicleMap, second: VehicleMap, theta: str = DEFAULT_MERGE_THETA) -> bool:
    """Two vehicles in range merge both ways, each from the other's state before the meeting; True if either
    learnt something."""
    to_second, to_first = first.message(), second.message()
    return first.receive(to_first, theta) | second.receive(to_second, theta)
