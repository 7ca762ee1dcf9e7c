"""A fleet maps one field: K vehicles of the same dynamics and sensor feed one online model (``--robots K``).

* Start: the pilot survey is shared. Its Bézier path (Chen et al. 2024, Fig. 4) is cut into K consecutive pieces
  of waypoints; vehicle k starts at the first waypoint of piece k (vehicle 0 where the single vehicle starts, the
  others heading along the path), so the starts are spread along the survey path, which runs along the task
  boundary. With the random initialisation (appendix B) the samples are the single mission's and the other
  vehicles' starts are drawn after them.
* ``schedule="sync"``: decision epochs are synchronous: all vehicles drive in lock-step at the control rate, each
  to its own goal; a vehicle that has arrived holds its position (sampling nothing) until the last one arrives. All
  new samples of all vehicles then update the one model, in time order. The mission clock
  (:attr:`FleetMission.clock`, the ``mission_clock`` column in seconds) is the slowest vehicle's: the epochs'
  durations summed.
* ``schedule="async"``: simulated time advances event by event. All vehicles drive in lock-step, each to its own
  goal, until one of them arrives (:func:`drive_until_arrival`); the samples all vehicles took since the last
  update then update the model (one decision epoch), and the vehicle(s) that arrived replan, their goals
  conditioned on the goals the others are still driving to. No vehicle waits; the mission clock is the simulated
  time. The pilot survey is shared and driven in lock-step under both schedules.
* Goals are chosen jointly (:func:`joint_goals`): greedily, vehicle by vehicle, each maximising the max-entropy
  planner's score (normalised predictive entropy − ``distance_weight`` × normalised distance from itself) under the
  predictive variance conditioned on noisy pseudo-observations at the goals already chosen (and, asynchronously,
  at the goals other vehicles are still driving to), by rank-one Schur downdates of the candidates' posterior
  covariance: the greedy sequential choice of maximum conditional entropy (Krause, Singh and Guestrin 2008;
  Shewry and Wynn 1987). Conditioning on a noisy observation does not depend on
  its value, so the pseudo-observations need no value. ``coordination="independent"`` lets every vehicle run the
  single-vehicle planner on its own candidates instead (the baseline); random and lawnmower planners give each
  vehicle its next goal in turn.
* The sample budget counts all vehicles' samples; ``budget_distance`` (metres, per vehicle) stops each vehicle at
  the first control tick at or past that odometer reading, and the mission ends at whichever budget runs out first.

* ``fleet="decentralised"``: every vehicle keeps its own POAM (:mod:`onlinegp.experiments.simulator.merge`), built
  as the shared one, and with the target scaling of the whole pilot survey (two numbers the vehicles agree on once,
  as the shared model fits it on the same samples), so that terms in one scaling can be summed. A vehicle's model
  absorbs its own samples when the vehicle arrives at its goal (before it replans: at every epoch under ``sync``,
  at its own arrivals under ``async``), and every vehicle's at the mission's end. Contact is checked after every
  control tick: every pair of vehicles that came within ``comm_radius`` of each other during an epoch exchanges its
  terms once at the epoch's end (:func:`~onlinegp.experiments.simulator.merge.exchange`), in the order of first
  contact and before that epoch's updates, so each exchanges what its model held when they met (the models
  change only at epochs' ends). Each vehicle plans with its own model; goals (two
  numbers) are assumed to reach every vehicle, so joint goals are chosen as in the shared fleet, vehicle by
  vehicle, each conditioned on the goals the others drive to. The metrics are those of vehicle 0's model (a fixed
  choice made before the mission, neither the best nor the richest map of the fleet), with ``samples_held`` (its
  samples, own and merged) and ``merges`` (exchanges so far that moved any terms, by any pair) added.

With one vehicle the fleet simulator, under either schedule, collects the same samples in the same order as
:class:`~onlinegp.experiments.simulator.mission.Mission` and so ends with the same metrics, bit for bit; it adds the
``mission_clock`` and ``odometry`` columns.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from .merge import VehicleMap, exchange
from .mission import Mission, build_model
from .planners import MaxEntropyPlanner, _normalise, _uniform, bezier_pilot, random_pilot
from .robot import DiffDrive

#: the schedule of a fleet whose config leaves it unset: asynchronous, which kept one vehicle's number of decision
#: epochs and its final MSLL at K = 2 and 4 where lock-step epochs lost both (docs/results/fleet.md,
#: benchmarks/studies/results/fleet_schedule.md); one vehicle is the same under either
DEFAULT_SCHEDULE = "async"


def pilot_pieces(waypoints: np.ndarray, num_robots: int) -> list[np.ndarray]:
    """The pilot path's waypoints (n, 2) cut into ``num_robots`` consecutive pieces, each starting where the one
    before ends (piece k holds its start point first)."""
    n = len(waypoints)
    if num_robots > n - 1:
        raise ValueError(
            f"{num_robots} vehicles need at least {num_robots + 1} pilot waypoints to share the pilot survey, got {n}"
        )
    bounds = [round(k * (n - 1) / num_robots) for k in range(num_robots + 1)]
    return [waypoints[bounds[k] : bounds[k + 1] + 1] for k in range(num_robots)]


def drive_fleet(
    vehicles: list[DiffDrive],
    routes: list[np.ndarray],
    max_samples: float,
    odometer: np.ndarray,
    max_distance: float = math.inf,
    on_tick: Callable[[], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Drive every vehicle along its route (k_i, 2) in lock-step until all have arrived or the fleet has taken
    ``max_samples`` samples; a vehicle whose ``odometer`` (metres driven, increased in place) reaches
    ``max_distance`` stops there. ``on_tick`` is called after every control tick.

    Each control tick steps the vehicles in order as :meth:`DiffDrive.drive` steps one (so one vehicle drives
    exactly as it would alone). Returns the sample locations (n, 2) in time order, which vehicle took each, and the
    ticks the fleet drove. A vehicle that cannot reach a goal is a RuntimeError (as :meth:`DiffDrive.drive`)."""
    routes = [np.asarray(r, dtype=np.float64).reshape(-1, 2) for r in routes]
    limits = []
    for v, r in zip(vehicles, routes):  # DiffDrive.drive's guard against a goal it circles, per vehicle
        length = float(np.hypot(*np.diff(np.vstack([v.position, r]), axis=0).T).sum())
        limits.append(int(v.control_rate * (3 * length / v.max_lin_vel + 4 * math.pi / v.max_ang_vel)) + 100)
    goal = [0] * len(vehicles)
    ticks = [0] * len(vehicles)
    active = [len(r) > 0 and odometer[k] < max_distance for k, r in enumerate(routes)]
    out: list[tuple[float, float]] = []
    owner: list[int] = []
    clock = 0
    while any(active):
        stepped = False
        for k, v in enumerate(vehicles):
            if not active[k]:
                continue
            route = routes[k]
            while (
                goal[k] < len(route) and math.hypot(route[goal[k], 0] - v.x, route[goal[k], 1] - v.y) <= v.goal_radius
            ):
                goal[k] += 1
            if goal[k] == len(route):
                active[k] = False
                continue
            if len(out) >= max_samples:
                return _samples(out, owner, clock)
            if ticks[k] >= limits[k]:
                gx, gy = route[goal[k]]
                raise RuntimeError(f"vehicle {k} did not reach goal ({gx:.2f}, {gy:.2f}) in {limits[k]} ticks")
            speed, turn = v.control(*route[goal[k]].tolist())
            if v.step(speed, turn):
                out.append((v.x, v.y))
                owner.append(k)
            ticks[k] += 1
            odometer[k] += abs(speed) / v.control_rate
            active[k] = odometer[k] < max_distance
            stepped = True
        clock += stepped  # a tick in which every vehicle found itself arrived takes no time
        if on_tick is not None:
            on_tick()
    return _samples(out, owner, clock)


def _samples(out: list, owner: list, clock: int) -> tuple[np.ndarray, np.ndarray, int]:
    return np.asarray(out, dtype=np.float64).reshape(-1, 2), np.asarray(owner, dtype=np.int64), clock


def conditioned_variances(cov: np.ndarray, noise: float, chosen: int) -> np.ndarray:
    """The covariance ``cov`` (n, n) of f at the candidates after one observation of f + ε, ε ~ N(0, ``noise``), at
    candidate ``chosen``: a rank-one Schur downdate (returned as a new array)."""
    s = cov[:, chosen]
    return cov - np.outer(s, s) / (cov[chosen, chosen] + noise)


def joint_goals(
    planner: Any,
    model: Any,
    positions: list[np.ndarray],
    rng: np.random.Generator,
    coordination: str = "joint",
    pending: np.ndarray | None = None,
) -> np.ndarray:
    """One goal per vehicle at ``positions`` (k, 2), chosen as the module docstring says.

    ``pending`` (p, 2) are goals other vehicles are still driving to (asynchronous replanning): with the
    max-entropy planner and ``coordination="joint"`` the variance is conditioned on them first. Without them the
    first vehicle's goal is exactly the single-vehicle planner's (same candidates, same scores); each further
    vehicle scores the same candidates by the entropy of the variance conditioned on the goals chosen before it."""
    if coordination != "joint" or type(planner) is not MaxEntropyPlanner:
        return np.array([planner.plan(model, p, rng) for p in positions]).reshape(-1, 2)
    candidates = _uniform(planner.extent, planner.num_candidates, rng)
    pending = np.zeros((0, 2)) if pending is None else np.asarray(pending, dtype=np.float64).reshape(-1, 2)
    chosen = [] if len(pending) else [int(np.argmax(planner.scores(model, candidates, positions[0])))]
    if len(positions) > len(chosen):
        points = np.vstack([candidates, pending]) if len(pending) else candidates
        pred = model.predict(points, full_cov=True)
        cov = pred.cov_f.detach().cpu().numpy().astype(np.float64)
        noise = float((pred.var_y - pred.var_f).mean())
        for index in range(len(candidates), len(points)):  # the goals still being driven to
            cov = conditioned_variances(cov, noise, index)
        for position in positions[len(chosen) :]:
            if chosen:
                cov = conditioned_variances(cov, noise, chosen[-1])
            var = np.maximum(np.diag(cov)[: len(candidates)], 0.0) + noise
            entropy = 0.5 * np.log(2 * math.pi * math.e * np.maximum(var, 1e-300))
            dist = np.hypot(*(candidates - np.asarray(position)[None, :2]).T)
            chosen.append(int(np.argmax(_normalise(entropy) - planner.distance_weight * _normalise(dist))))
    return candidates[chosen].reshape(-1, 2)


def _at_goal(vehicle: DiffDrive, goal: Any) -> bool:
    """Whether ``vehicle`` is within its goal radius of ``goal`` (x, y); True for no goal (None or NaN)."""
    if goal is None or math.isnan(goal[0]):
        return True
    return math.hypot(float(goal[0]) - vehicle.x, float(goal[1]) - vehicle.y) <= vehicle.goal_radius


def leg_limit(vehicle: DiffDrive, goal: np.ndarray) -> int:
    """Control ticks a vehicle may take to reach ``goal`` from where it is (:meth:`DiffDrive.drive`'s guard)."""
    length = math.hypot(goal[0] - vehicle.x, goal[1] - vehicle.y)
    return int(vehicle.control_rate * (3 * length / vehicle.max_lin_vel + 4 * math.pi / vehicle.max_ang_vel)) + 100


def drive_until_arrival(
    vehicles: list[DiffDrive],
    goals: np.ndarray,
    max_samples: float,
    odometer: np.ndarray,
    max_distance: float,
    legs: np.ndarray,
    on_tick: Callable[[], None] | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """Drive every vehicle that has a goal (row of ``goals`` (K, 2); NaN: none) and distance left in lock-step
    until, at the start of a control tick, one of them is at its goal, or the fleet has taken ``max_samples``.

    Within a tick the vehicles step in order, as in :func:`drive_fleet`. ``odometer`` and ``legs`` (K, 2: control
    ticks driven on the current leg and the leg's limit, :func:`leg_limit`) are increased in place, so a leg may
    span several calls. ``on_tick`` is called after every control tick. Returns the sample locations in time order,
    which vehicle took each, and the ticks driven."""
    targets = [None if math.isnan(g[0]) else (float(g[0]), float(g[1])) for g in np.asarray(goals).tolist()]
    out: list[tuple[float, float]] = []
    owner: list[int] = []
    clock = 0
    while True:
        moving = [k for k, g in enumerate(targets) if g is not None and odometer[k] < max_distance]
        if not moving or any(_at_goal(vehicles[k], targets[k]) for k in moving):
            return _samples(out, owner, clock)
        for k in moving:
            v, (gx, gy) = vehicles[k], targets[k]
            if len(out) >= max_samples:
                return _samples(out, owner, clock)
            if legs[k, 0] >= legs[k, 1]:
                raise RuntimeError(f"vehicle {k} did not reach goal ({gx:.2f}, {gy:.2f}) in {legs[k, 1]} ticks")
            speed, turn = v.control(gx, gy)
            if v.step(speed, turn):
                out.append((v.x, v.y))
                owner.append(k)
            legs[k, 0] += 1
            odometer[k] += abs(speed) / v.control_rate
        clock += 1
        if on_tick is not None:
            on_tick()


class FleetMission(Mission):
    """A :class:`~onlinegp.experiments.simulator.mission.Mission` with ``config.robots`` vehicles (see the module docstring)."""

    def __init__(self, config: Any, field: Any = None):
        super().__init__(config, field)
        config = self.config  # resolved
        self.vehicles: list[DiffDrive] = []
        self.owner = np.zeros(0, dtype=np.int64)
        self.max_distance = math.inf if config.budget_distance is None else float(config.budget_distance)
        self.odometer = np.zeros(self.num_robots)
        self.clock = 0
        # asynchronous schedule: each vehicle's goal (NaN: none yet) and its leg's ticks driven and limit
        self.goals = np.full((self.num_robots, 2), np.nan)
        self.legs = np.zeros((self.num_robots, 2), dtype=np.int64)
        # decentralised: every vehicle's own map (vehicle 0's model is ``self.model``, the one evaluated)
        self.maps: list[VehicleMap] = []
        self.merges = 0
        self.contacts: list[tuple[int, int]] = []  # pairs that came in range this epoch, in order of first contact
        if config.fleet == "decentralised":
            if config.init != "bezier":
                raise ValueError(
                    "a decentralised fleet needs the Bézier pilot survey (--init bezier): its vehicles drive it"
                )
            models = [self.model, *(build_model(config) for _ in range(self.num_robots - 1))]
            self.maps = [VehicleMap(m, k, self.num_robots) for k, m in enumerate(models)]

    @property
    def num_robots(self) -> int:
        return int(self.config.robots or 1)

    @property
    def schedule(self) -> str:
        """``sync`` or ``async`` (:data:`DEFAULT_SCHEDULE` when the config leaves it unset)."""
        return self.config.schedule or DEFAULT_SCHEDULE

    @property
    def done(self) -> bool:
        return super().done or (bool(self.vehicles) and bool(np.all(self.odometer >= self.max_distance)))

    @property
    def mission_clock(self) -> float:
        """Seconds of simulated time so far: the slowest vehicle's clock."""
        return self.clock / (self.vehicles[0].control_rate if self.vehicles else 10.0)

    def _starts(self) -> tuple[list[DiffDrive], list[np.ndarray]]:
        """The vehicles at their starts and their pilot routes (Bézier pilot)."""
        c = self.config
        pieces = pilot_pieces(bezier_pilot(tuple(c.task_extent), c.num_pilot_waypoints), self.num_robots)
        vehicles = [self._bezier_start()]
        for piece in pieces[1:]:
            (x0, y0), (x1, y1) = piece[0], piece[1]
            vehicles.append(DiffDrive(x=x0, y=y0, yaw=math.atan2(y1 - y0, x1 - x0), **self._vehicle_limits()))
        return vehicles, [pieces[0], *(p[1:] for p in pieces[1:])]

    def _drive_all(self, routes: list[np.ndarray], max_samples: float) -> np.ndarray:
        try:
            xy, owner, ticks = drive_fleet(
                self.vehicles, routes, max_samples, self.odometer, self.max_distance, self._watch
            )
        except RuntimeError as err:
            raise ValueError(self._unreachable(self.vehicles[0], err)) from err
        self.owner = np.concatenate([self.owner, owner])
        self.clock += ticks
        return xy

    def _pilot(self) -> np.ndarray:
        c = self.config
        if c.init == "bezier":
            self.vehicles, routes = self._starts()
            self.vehicle = self.vehicles[0]
            return self._drive_all(routes, c.budget)
        start, xy = random_pilot(tuple(c.task_extent), min(c.num_random_init, c.budget), self.rng)
        others = [random_pilot(tuple(c.task_extent), 0, self.rng)[0] for _ in range(self.num_robots - 1)]
        self.vehicles = [
            DiffDrive(x=float(s[0]), y=float(s[1]), yaw=float(s[2]), **self._vehicle_limits()) for s in [start, *others]
        ]
        self.vehicle = self.vehicles[0]
        self.owner = np.concatenate([self.owner, np.full(len(xy), -1)])  # scattered, driven by no vehicle
        return xy

    def pilot_size(self) -> int:
        c = self.config
        if c.init != "bezier":
            return int(c.num_random_init)
        vehicles, routes = self._starts()
        try:
            return len(drive_fleet(vehicles, routes, math.inf, np.zeros(self.num_robots))[0])
        except RuntimeError as err:
            raise ValueError(self._unreachable(vehicles[0], err)) from err

    def _gather(self) -> np.ndarray:
        for _ in range(1000):
            xy = self._epoch_async() if self.schedule == "async" else self._epoch_sync()
            if len(xy) or self.done:
                return xy
        raise RuntimeError(
            "1000 planned waypoints in a row yielded no sample; the planner keeps choosing the vehicles' own positions"
        )

    def _epoch_sync(self) -> np.ndarray:
        """Goals for all vehicles with distance left, driven until the last arrives."""
        moving = [k for k in range(self.num_robots) if self.odometer[k] < self.max_distance]
        goals = self._plan(moving)
        routes = [np.zeros((0, 2))] * self.num_robots
        for k, goal in zip(moving, goals):
            routes[k] = goal[None]
        return self._drive_all(routes, self.config.budget - self.num_samples)

    def _epoch_async(self) -> np.ndarray:
        """Goals for the vehicles that have none or are at theirs, conditioned on the others' goals; all driven
        until the next arrival."""
        live = self.odometer < self.max_distance
        free = [k for k in range(self.num_robots) if live[k] and _at_goal(self.vehicles[k], self.goals[k])]
        busy = [k for k in range(self.num_robots) if live[k] and k not in free]
        if free:
            goals = self._plan(free, self.goals[busy])
            for k, goal in zip(free, goals):
                self.goals[k] = goal
                self.legs[k] = (0, leg_limit(self.vehicles[k], goal))
        try:
            xy, owner, ticks = drive_until_arrival(
                self.vehicles,
                self.goals,
                self.config.budget - self.num_samples,
                self.odometer,
                self.max_distance,
                self.legs,
                self._watch,
            )
        except RuntimeError as err:
            raise ValueError(self._unreachable(self.vehicles[0], err)) from err
        self.owner = np.concatenate([self.owner, owner])
        self.clock += ticks
        return xy

    def _plan(self, planning: list[int], pending: np.ndarray | None = None) -> np.ndarray:
        """Goals of the vehicles ``planning``, conditioned on the ``pending`` goals of the others (:func:`joint_goals`);
        decentralised, each vehicle plans on its own model, in turn, conditioned on the goals chosen before it."""
        coordination = self.config.coordination or "joint"
        positions = [self.vehicles[k].position for k in planning]
        if not self.maps:
            return joint_goals(self.planner, self.model, positions, self.rng, coordination, pending)
        goals = np.zeros((0, 2)) if pending is None else np.asarray(pending).reshape(-1, 2)
        for k, position in zip(planning, positions):
            mine = joint_goals(self.planner, self.maps[k].model, [position], self.rng, coordination, goals)
            goals = np.vstack([goals, mine])
        return goals[len(goals) - len(planning) :]

    def _watch(self) -> None:
        """After a control tick (decentralised): note the pairs of vehicles newly within the communication radius."""
        if not self.maps:
            return
        radius = float(self.config.comm_radius)
        for pair in itertools.combinations(range(len(self.vehicles)), 2):
            i, j = pair
            near = math.dist(self.vehicles[i].position[:2], self.vehicles[j].position[:2]) <= radius
            if near and pair not in self.contacts:
                self.contacts.append(pair)

    def _absorb(self, xy: np.ndarray, y: np.ndarray) -> int | None:
        """Decentralised: the pairs that met during the epoch merge, in order of first contact, the models as they
        were then (models change only here); then the arrived vehicles' models absorb their own samples."""
        if not self.maps:
            return super()._absorb(xy, y)
        for i, j in self.contacts:
            if self.maps[i].model.projected is not None and self.maps[j].model.projected is not None:
                self.merges += exchange(self.maps[i], self.maps[j], self.config.merge_theta)
        self.contacts = []
        if not self.rows:  # the pilot survey: the fleet's target scaling (the shared model's, fitted on it)
            for m in self.maps:
                m.model.scaler.fit(torch.from_numpy(xy), torch.from_numpy(y))
        for k, m in enumerate(self.maps):
            arrived = self.done or self.odometer[k] >= self.max_distance or _at_goal(self.vehicles[k], self.goals[k])
            own = self.owner == k
            if arrived and own.sum() > m.held[k]:  # under sync every vehicle has arrived (no goal is kept)
                m.absorb(self.X[own][m.held[k] :], self.y[own][m.held[k] :])
        return self.model.num_inducing

    def step(self) -> dict:
        row = super().step()
        # the mission clock (s) and the longest distance a vehicle has driven (m)
        row.update({"mission_clock": self.mission_clock, "odometry": float(self.odometer.max())})
        if self.maps:
            row.update({"samples_held": int(self.maps[0].held.sum()), "merges": self.merges})
        return row

    def paths(self) -> list[np.ndarray]:
        return [self.X[self.owner == k] for k in range(self.num_robots)]

    def state(self) -> dict:
        return {
            **super().state(),
            "fleet": {
                "vehicles": [v.state() for v in self.vehicles],
                "owner": self.owner.copy(),
                "odometer": self.odometer.copy(),
                "clock": self.clock,
                "goals": self.goals.copy(),
                "legs": self.legs.copy(),
                **(
                    {
                        "maps": [m.state() for m in self.maps],
                        "models": [m.model.state_dict() for m in self.maps[1:]],
                        "merges": self.merges,
                    }
                    if self.maps
                    else {}
                ),
            },
        }

    def load_state(self, state: dict) -> None:
        super().load_state(state)
        fleet = state["fleet"]
        self.vehicles = [DiffDrive.from_state(v) for v in fleet["vehicles"]]
        self.vehicle = self.vehicles[0] if self.vehicles else None
        self.owner = fleet["owner"].copy()
        self.odometer = fleet["odometer"].copy()
        self.clock = int(fleet["clock"])
        if "goals" in fleet:  # written since the asynchronous schedule
            self.goals, self.legs = fleet["goals"].copy(), fleet["legs"].copy()
        for m, saved in zip(self.maps, fleet.get("maps", [])):
            m.load_state(saved)
        if self.rows:
            for m, saved in zip(self.maps[1:], fleet.get("models", [])):
                m.model.load_state_dict(saved)
        self.merges = int(fleet.get("merges", 0))
