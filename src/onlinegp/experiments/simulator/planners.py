"""Where the vehicle goes (POAM, Chen et al. 2024, §V-A and appendix B).

* :func:`bezier_pilot`: the pilot survey, a Bézier curve over 15 control points spanning the task extent (a
  spiral from the lower-right corner, Chen et al. 2024, Fig. 4), followed through 50 waypoints.
* :func:`random_pilot`: the random initialisation of appendix B (start and first samples uniform in the extent).
* :class:`MaxEntropyPlanner`: 2000 uniform candidates scored by normalised predictive entropy minus 0.5 ×
  normalised distance from the vehicle; the best one is the next goal.
* :class:`NIPVPlanner`: uniform candidates scored by the reduction of the integrated posterior variance over the
  extent (BoTorch's ``qNegIntegratedPosteriorVariance``), traded off against distance as above.
* :class:`RandomPlanner`: a uniform random goal (appendix B); :class:`LawnmowerPlanner`: a boustrophedon sweep.

Every planner has ``plan(model, position, rng) -> goal (2,)`` and ``state()``/``load_state()`` for checkpoints.
"""

from __future__ import annotations

import importlib.util
import math
from typing import Any

import numpy as np
import torch
from scipy.special import comb

from .phases import phase

TASK_EXTENT = (-30.0, 30.0, -30.0, 30.0)


def _uniform(extent: tuple[float, float, float, float], n: int, rng: np.random.Generator) -> np.ndarray:
    xmin, xmax, ymin, ymax = extent
    return np.column_stack([rng.uniform(xmin, xmax, n), rng.uniform(ymin, ymax, n)])


def bezier_control_points(extent: tuple[float, float, float, float] = TASK_EXTENT) -> np.ndarray:
    """The 15 control points (15, 2): lower-right corner, around the border anticlockwise-from-left, to the centre."""
    xmin, xmax, ymin, ymax = extent
    fx = lambda f: xmin + f * (xmax - xmin)  # noqa: E731
    fy = lambda f: ymin + f * (ymax - ymin)  # noqa: E731
    pts = [
        (1, 0),
        (0, 0),
        (0, 0.25),
        (0, 0.5),
        (0, 0.75),
        (0, 1),
        (0.25, 1),
        (0.5, 1),
        (0.75, 1),
        (1, 1),
        (1, 0.75),
        (1, 0.5),
        (1, 0.25),
        (0.5, 0.25),
        (0.5, 0.5),
    ]
    return np.array([(fx(a), fy(b)) for a, b in pts])


def bezier_curve(control_points: np.ndarray, num_points: int) -> np.ndarray:
    """Points (num_points, 2) of the Bézier curve, evaluated in the Bernstein basis at uniform parameters."""
    P = np.asarray(control_points, dtype=np.float64)
    n = P.shape[0] - 1
    t = np.linspace(0.0, 1.0, num_points)[:, None]
    i = np.arange(n + 1)[None, :]
    basis = comb(n, i) * t**i * (1 - t) ** (n - i)
    return basis @ P


def bezier_pilot(extent: tuple[float, float, float, float] = TASK_EXTENT, num_waypoints: int = 50) -> np.ndarray:
    """Pilot-survey waypoints (num_waypoints, 2) following the 15-point Bézier curve."""
    return bezier_curve(bezier_control_points(extent), num_waypoints)


def random_pilot(
    extent: tuple[float, float, float, float], num_samples: int, rng: np.random.Generator
) -> tuple[np.ndarray, np.ndarray]:
    """Random initialisation (appendix B): a uniform start pose (x, y, yaw) and ``num_samples`` uniform locations."""
    start = np.append(_uniform(extent, 1, rng)[0], rng.uniform(-math.pi, math.pi))
    return start, _uniform(extent, num_samples, rng)


def _normalise(v: np.ndarray) -> np.ndarray:
    span = float(v.max() - v.min())
    return (v - v.min()) / span if span > 0 else np.zeros_like(v)


class MaxEntropyPlanner:
    """Go to the candidate maximising normalised entropy − ``distance_weight`` × normalised distance."""

    def __init__(
        self,
        extent: tuple[float, float, float, float] = TASK_EXTENT,
        num_candidates: int = 2000,
        distance_weight: float = 0.5,
    ):
        if num_candidates < 1:
            raise ValueError(f"num_candidates must be >= 1, got {num_candidates}")
        self.extent, self.num_candidates, self.distance_weight = extent, int(num_candidates), float(distance_weight)

    def scores(self, model: Any, candidates: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Score of each candidate; entropy 0.5·log(2πe·var_y) of the model's predictive distribution."""
        var = model.predict(candidates).var_y.detach().cpu().numpy().astype(np.float64)
        entropy = 0.5 * np.log(2 * math.pi * math.e * np.maximum(var, 1e-300))
        dist = np.hypot(*(candidates - np.asarray(position)[None, :2]).T)
        return _normalise(entropy) - self.distance_weight * _normalise(dist)

    def plan(self, model: Any, position: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        candidates = _uniform(self.extent, self.num_candidates, rng)
        with phase("candidates"):  # the model's predictions at the candidates (onlinegp.experiments.simulator.phases)
            scores = self.scores(model, candidates, position)
        return candidates[int(np.argmax(scores))]

    def state(self) -> dict:
        return {}

    def load_state(self, state: dict) -> None:
        pass


class NIPVPlanner(MaxEntropyPlanner):
    """Go to the candidate maximising normalised integrated-variance reduction − ``distance_weight`` × normalised
    distance.

    The reduction of a candidate x is mean_m var[f(m)] − mean_m var[f(m) | y(x)] over ``num_mc_points`` fixed
    uniform integration points m: the negative integrated posterior variance (NIPV) of Seo et al. 2000 as BoTorch's
    ``qNegIntegratedPosteriorVariance`` computes it, through :class:`~onlinegp.botorch.OnlineGPModel` (the model
    conditioned on one noisy observation at x without hyper-parameter steps). Each candidate costs a copy and an
    update of the model (0.13-0.16 s for POAM at M = 450-500 on a loaded 2-core machine), hence far fewer
    candidates than the max-entropy planner's 2000: the default 64 took 5-15 s (median 10.5 s) per epoch of a
    1500-sample valley-ridges mission, and its best candidate reaches 91% of the reduction of the best of 256
    (32: 83%; measured on the same mission at 900 samples).

    Args:
        extent: the task extent (xmin, xmax, ymin, ymax). num_candidates: uniform candidates per epoch (default 64).
        distance_weight: weight of the normalised distance (default 0.5, as for max-entropy).
        num_mc_points: integration points, uniform over the extent (default 256). seed: their seed (default 0).
        chunk_size: candidates conditioned at once (copies of the model held in memory together; default 16).
    """

    def __init__(
        self,
        extent: tuple[float, float, float, float] = TASK_EXTENT,
        num_candidates: int = 64,
        distance_weight: float = 0.5,
        num_mc_points: int = 256,
        seed: int = 0,
        chunk_size: int = 16,
    ):
        super().__init__(extent, num_candidates, distance_weight)
        if importlib.util.find_spec("botorch") is None:
            raise ValueError("the nipv planner needs BoTorch: pip install 'onlinegp[bo]'")
        if num_mc_points < 1 or chunk_size < 1:
            raise ValueError(f"num_mc_points and chunk_size must be >= 1, got {num_mc_points} and {chunk_size}")
        self.chunk_size = int(chunk_size)
        self.mc_points = _uniform(extent, int(num_mc_points), np.random.default_rng(seed))

    def variance_reductions(self, model: Any, candidates: np.ndarray) -> np.ndarray:
        """Integrated variance of f over the mc points now minus after one noisy observation at each candidate.

        For POAM, whose q(u) lags the hyper-parameters of its last M-step, every conditioned copy also rebuilds q
        at the current ones: a nearly constant offset (14 of a median 15 at 900 samples on valley-ridges) that the
        normalised score, and so the choice, does not see."""
        from botorch.acquisition.active_learning import qNegIntegratedPosteriorVariance
        from botorch.sampling.normal import SobolQMCNormalSampler

        from ...botorch import OnlineGPModel

        mc_points = torch.as_tensor(self.mc_points, dtype=model.dtype)
        # one fixed fantasy: the conditioned variance does not depend on its value, and a seeded sampler leaves
        # torch's global generator (and so the mission's determinism) untouched
        nipv = qNegIntegratedPosteriorVariance(
            OnlineGPModel(model), mc_points, sampler=SobolQMCNormalSampler(torch.Size([1]), seed=0)
        )
        X = torch.as_tensor(candidates, dtype=model.dtype)[:, None, :]
        with torch.no_grad():
            now = model.predict(mc_points).var_f.mean()
            after = torch.cat([-nipv(X[i : i + self.chunk_size]) for i in range(0, X.shape[0], self.chunk_size)])
        return (now - after).cpu().numpy().astype(np.float64)

    def scores(self, model: Any, candidates: np.ndarray, position: np.ndarray) -> np.ndarray:
        """Score of each candidate: normalised variance reduction − ``distance_weight`` × normalised distance."""
        dist = np.hypot(*(candidates - np.asarray(position)[None, :2]).T)
        return _normalise(self.variance_reductions(model, candidates)) - self.distance_weight * _normalise(dist)

    def state(self) -> dict:
        return {"mc_points": self.mc_points.copy()}

    def load_state(self, state: dict) -> None:
        mc_points = np.asarray(state["mc_points"], dtype=np.float64)
        if mc_points.ndim != 2 or mc_points.shape[1] != 2:
            raise ValueError(f"mc_points must be an (n, 2) array, got shape {mc_points.shape}")
        self.mc_points = mc_points


class RandomPlanner(MaxEntropyPlanner):
    """A uniformly random goal in the extent, ignoring the model (appendix B's uninformed planner)."""

    def plan(self, model: Any, position: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        return _uniform(self.extent, 1, rng)[0]


class LawnmowerPlanner:
    """A boustrophedon sweep over ``num_lanes`` vertical lanes; one waypoint per decision epoch, then repeats."""

    def __init__(self, extent: tuple[float, float, float, float] = TASK_EXTENT, num_lanes: int = 10):
        if num_lanes < 1:
            raise ValueError(f"num_lanes must be >= 1, got {num_lanes}")
        xmin, xmax, ymin, ymax = extent
        rows = []
        for k, x in enumerate(np.linspace(xmin, xmax, num_lanes)):
            ends = (ymin, ymax) if k % 2 == 0 else (ymax, ymin)
            rows += [(x, ends[0]), (x, ends[1])]
        self.waypoints = np.array(rows)
        self.index = 0

    def plan(self, model: Any, position: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        goal = self.waypoints[self.index % len(self.waypoints)]
        self.index += 1
        return goal

    def state(self) -> dict:
        return {"index": self.index}

    def load_state(self, state: dict) -> None:
        self.index = int(state["index"])


PLANNERS = {
    "max-entropy": (MaxEntropyPlanner, "2000 uniform candidates, normalised entropy − 0.5 × normalised distance"),
    "nipv": (
        NIPVPlanner,
        "64 uniform candidates, normalised integrated-variance reduction − 0.5 × normalised distance",
    ),
    "random": (RandomPlanner, "a uniformly random goal each epoch (model-independent path)"),
    "lawnmower": (LawnmowerPlanner, "boustrophedon sweep over 10 lanes"),
}


def make_planner(name: str, extent: tuple[float, float, float, float] = TASK_EXTENT, **options: Any):
    """The planner registered as ``name`` over ``extent``. A mission passes every planner its ``num_candidates``
    (the max-entropy planner's 2000) and ``distance_weight``: the lawnmower takes neither, and NIPV keeps its own,
    much smaller, candidate count (build :class:`NIPVPlanner` directly to change it)."""
    key = name.lower()
    if key not in PLANNERS:
        raise ValueError(f"unknown planner {name!r}; available: {', '.join(PLANNERS)}")
    if key == "lawnmower":
        options = {k: v for k, v in options.items() if k == "num_lanes"}
    if key == "nipv":
        options = {k: v for k, v in options.items() if k != "num_candidates"}
    return PLANNERS[key][0](extent, **options)
