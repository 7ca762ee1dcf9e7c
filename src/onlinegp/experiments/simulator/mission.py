"""The active-mapping mission: POAM's Algorithm 1 (Chen et al. 2024, §IV-E and §V-A) for any OnlineGP model.

Pilot survey (Bézier curve, or random initialisation as in appendix B), the model built with the task extent as
its input bounds (so the input scaling is fixed; target statistics come from the pilot data), then decision
epochs until the sample budget: plan a waypoint, drive there while sampling, ``model.update`` with the new
samples, evaluate on a 50×50 grid. Every epoch records SMSE, MSLL (against a Gaussian with the training targets'
mean and std), RMSE, NLPD, MAE, sample and inducing counts, and update (wall and CPU), prediction, planning and
driving times.

Missions are deterministic for a seed (one NumPy generator drives the planner, the noise and the random start;
the model is built under ``torch`` seeded with the same seed and carries its own generator) and resumable: an
atomic checkpoint (at most :data:`~onlinegp.experiments.simulator.run.CHECKPOINT_EVERY_S` seconds apart, and after
the last epoch of a run) holds the model's ``state_dict``, the vehicle, planner and generator states, all collected
samples and the metric rows, so a mission resumed from it ends with exactly the metrics of an uninterrupted one (bit
for bit on the same machine and thread count; BLAS reductions may round differently elsewhere). Running one into a
run directory: :mod:`onlinegp.experiments.simulator.run`.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ... import metrics
from ...base import FIRST_BATCH, OnlineGP
from ...io import atomic_write
from ...models.poam import POAM
from ...models.registry import MODELS, make_recorded_model, model_class
from ..flags import gathered, option
from .fields import DEFAULT_ENV, Field, FieldOptions, FieldWarning, load_field
from .merge import DEFAULT_MERGE_THETA, MERGE_THETAS, default_comm_radius
from .planners import PLANNERS, bezier_pilot, make_planner, random_pilot
from .robot import DiffDrive, PointSensor

if TYPE_CHECKING:
    from ..replay import Survey

INITS = ("bezier", "random")
#: the schema of a mission's record (``config.json``, checkpoints, sweep keys): each version adds settings, and
#: :data:`ADDED_IN` says which version added which. A record lists every setting of schema 1 and a later one only
#: when it is set (not None), so a run recorded under an earlier schema keeps its record, and its sweep key, exactly;
#: :meth:`MissionConfig.from_record` reads a record of any version
SCHEMA = 3
ADDED_IN = {
    **dict.fromkeys(("field_options", "noise_std", "speed"), 2),
    **dict.fromkeys(
        ("robots", "fleet", "coordination", "budget_distance", "schedule", "comm_radius", "merge_theta"), 3
    ),
}
#: how a fleet keeps its map (:mod:`onlinegp.experiments.simulator.fleet`) and how it chooses its goals
FLEETS = ("shared", "decentralised")
COORDINATIONS = ("joint", "independent")
#: the settings that run the fleet simulator when any is given
FLEET_KEYS = tuple(k for k, schema in ADDED_IN.items() if schema == 3)
#: when a fleet's vehicles replan: all together once the slowest has arrived (``sync``), or each on its own arrival
SCHEDULES = ("sync", "async")


def task_extent(extent: tuple[float, float, float, float]) -> tuple[float, float, float, float]:
    """Where the vehicle may go in a field over ``extent``: inset by 1/62 of its shorter side (the paper: [-30, 30]²
    in a [-31, 31]² field)."""
    xmin, xmax, ymin, ymax = (float(e) for e in extent)
    margin = min(xmax - xmin, ymax - ymin) / 62.0
    return (xmin + margin, xmax - margin, ymin + margin, ymax - margin)


#: POAM's family in a mission: no pre-training on the pilot survey (the paper's Algorithm 1 moves θ only a few
#: steps per decision epoch, so that the robot explores first, Chen et al. 2024 §IV-D). Pre-training it, the library
#: default for other streams, raised the mission-averaged SMSE from 0.30 to 0.66 (1 of 10 pairs better, sign test
#: p = 0.02; benchmarks/studies/results/poam_pretrain_study.json). ``model_options`` may still set it (the flat keyword, which
#: :func:`~onlinegp.training.training_options` folds into the training spec, so that a later ``training`` option wins).
MISSION_MODEL_OPTIONS = {"pretrain_steps": 0}


@dataclass(frozen=True)
class ModelSettings:
    """The model's constructor options that a mission's command takes as its own (``--inducing``), gathered into
    :attr:`MissionConfig.model_options` (after ``--option``'s, so that they win)."""

    inducing: str | None = option(
        None,
        "inducing-point selector: vips, conditional-variance, oips (adaptive size, Pescador-Barrios et al. 2024), "
        "pivoted, random, kmeans (model default if unset)",
    )


#: simulator profiles: ``paper`` follows the text of Chen et al. 2024 (§V-A: 3 Hz sensing, 1 rad/s turn limit);
#: ``reference-code`` does what their public implementation does (a sample every 4th 10 Hz control tick, i.e.
#: 2.5 Hz; no turn limit; the field read at the nearest cell; the model's input scaling fitted on the pilot survey)
PROFILES: dict[str, dict[str, Any]] = {
    "paper": {"sensing_rate": 3.0, "max_turn_rate": 1.0, "interpolation": "linear", "input_scaling": "task"},
    "reference-code": {
        "sensing_rate": 2.5,
        "max_turn_rate": math.inf,
        "interpolation": "nearest",
        "input_scaling": "pilot",
    },
}


@dataclass
class MissionConfig:
    """Everything that defines a mission (and must match when it is resumed).

    ``num_inducing``, ``num_steps`` and ``kernel`` are passed to the model only when set (None: the model's own
    default); ``model_options`` adds any other constructor keyword. ``profile`` names the simulator's settings
    (:data:`PROFILES`); ``sensing_rate`` (Hz), ``max_turn_rate`` (rad/s), ``interpolation`` of the field
    (``linear`` or ``nearest``) and ``input_scaling`` (the model's input box: the ``task`` extent, or fitted on the
    ``pilot`` survey) override it one by one and hold the resolved values after construction.

    ``field_options`` are :func:`~onlinegp.experiments.simulator.fields.load_field`'s (``extent``, ``cell_size``, ``array``,
    ``first_row``, ``nodata``, ``values``) for a DEM file; ``noise_std`` is the sensor's noise in the field's units
    (default 1) and ``speed`` the vehicle's in m/s (default 1). ``task_extent`` (where the vehicle goes) defaults to
    the field's extent inset by 1/62 of its shorter side: [-30, 30]² for the bundled environments. A config reads no
    file: :meth:`resolved` fills in what it leaves to the field, and a mission runs and records the resolved config.

    ``robots`` (K), ``fleet`` (``shared`` or ``decentralised``), ``coordination``, ``budget_distance`` (metres per
    vehicle), ``schedule`` (``sync`` or ``async`` replanning; None:
    :data:`onlinegp.experiments.simulator.fleet.DEFAULT_SCHEDULE`) and ``comm_radius`` and ``merge_theta``
    (decentralised only; None: :func:`onlinegp.experiments.simulator.merge.default_comm_radius` and
    :data:`~onlinegp.experiments.simulator.merge.DEFAULT_MERGE_THETA`, filled in by :meth:`resolved`) run the fleet simulator
    (:mod:`onlinegp.experiments.simulator.fleet`) when any is set; left at None, the single-vehicle mission of before.

    Each setting of ``onlinegp mission`` is declared here once: a field made by
    :func:`~onlinegp.experiments.flags.option` is also an option of the command (its help, flag and default), and
    ``model_options`` and ``field_options`` gather the options of :class:`ModelSettings` and
    :class:`~onlinegp.experiments.simulator.fields.FieldOptions`
    (:func:`~onlinegp.experiments.simulator.mission_settings.mission_config`); the other fields are the Python API's.
    """

    env: str = option(
        DEFAULT_ENV,
        "bundled environment (see --list-envs) or a DEM file (.npy, .npz, .csv, .tif): columns are x (west to east), "
        f"row 0 is the south edge (see --first-row); default: {DEFAULT_ENV}, the most non-stationary",
        show_default=False,
    )
    model: str = option("poam", "registered model (see --list-models)")
    budget: int = option(5000, "number of samples to collect")
    seed: int = option(0, "seed of the planner, noise, start and model")
    planner: str = option(
        "max-entropy", "max-entropy, nipv (integrated-variance reduction, 64 candidates: slower), random or lawnmower"
    )
    init: str = option("bezier", "pilot survey: bezier, or random (Chen et al. 2024, app. B)")
    num_inducing: int | None = option(None, "model size M (model default if unset)")
    num_steps: int | None = option(None, "hyper-parameter steps per update (model default if unset)")
    kernel: str | None = option(None, "ak, rbf, matern12/32/52 (model default if unset)")
    model_options: dict = gathered(ModelSettings, default_factory=dict)
    num_candidates: int = 2000
    distance_weight: float = 0.5
    num_pilot_waypoints: int = 50
    num_random_init: int = 600
    eval_grid: int = 50
    task_extent: tuple[float, float, float, float] | None = None
    animate: bool = option(False, "also write mission.gif of the map being built")
    profile: str = option(
        "paper",
        "simulator settings: paper (the text of Chen et al. 2024: 3 Hz, 1 rad/s turns) or reference-code (their "
        "public code: 2.5 Hz, unclipped turns, nearest-cell field, input scaling fitted on the pilot survey)",
    )
    sensing_rate: float | None = option(None, "samples per second (overrides the profile)")
    max_turn_rate: float | None = option(None, "rad/s; inf for none (overrides the profile)")
    interpolation: str | None = option(None, "field between cells: linear or nearest (overrides the profile)")
    input_scaling: str | None = None
    field_options: dict | None = gathered(FieldOptions)
    noise_std: float | None = option(None, "sensor noise std in the field's units (default 1)")
    speed: float | None = option(None, "vehicle speed in m/s (default 1)")
    robots: int | None = option(
        None,
        "vehicles K mapping the field together into one model (default 1: the single-vehicle mission; --robots 1 "
        "runs the fleet simulator, with the same samples and numbers plus its mission-clock column)",
    )
    coordination: str | None = option(
        None, "a fleet's goals: joint (default: max-entropy conditioned on the goals already chosen) or independent"
    )
    budget_distance: float | None = option(
        None, "metres each vehicle may drive; the mission ends when every vehicle has (or at --budget samples)"
    )
    schedule: str | None = option(
        None,
        "when a fleet replans: sync (all vehicles once the slowest has arrived) or async (each vehicle on arrival, "
        "the model updated with every vehicle's new samples at each arrival; the default)",
    )
    fleet: str | None = option(
        None,
        "shared (default: one model of all samples) or decentralised (each vehicle its own POAM, merged with "
        "vehicles within --comm-radius; metrics of vehicle 0's model)",
    )
    comm_radius: float | None = option(
        None, "decentralised: metres within which two vehicles merge (default: half the task's shorter side)"
    )
    merge_theta: str | None = option(
        None, "decentralised: a merge's θ, richer (default: the model with more samples) or average"
    )

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown simulator profile {self.profile!r}; choose one of {', '.join(PROFILES)}")
        for key, value in PROFILES[self.profile].items():
            if getattr(self, key) is None:
                setattr(self, key, value)
        if isinstance(self.max_turn_rate, str):  # "inf", as :meth:`to_dict` records no turn limit
            self.max_turn_rate = float(self.max_turn_rate)
        if self.task_extent is not None:
            self.task_extent = tuple(self.task_extent)

    def resolved(self, field: Field | None = None) -> MissionConfig:
        """This mission with what it leaves to its field filled in, as it runs and is recorded: ``task_extent`` (the
        field's extent inset by :func:`task_extent`) and, for a decentralised fleet, ``comm_radius`` and
        ``merge_theta``. Loads the field (a file) only when ``task_extent`` is unset and ``field`` is not given."""
        extent = self.task_extent
        if extent is None:
            if field is None:
                with warnings.catch_warnings():  # the mission loads the field again and warns then
                    warnings.simplefilter("ignore", FieldWarning)
                    field = self.load_field()
            extent = task_extent(field.extent)
        fleet = {}
        if self.fleet == "decentralised":
            radius = default_comm_radius(extent) if self.comm_radius is None else self.comm_radius
            fleet = {"comm_radius": radius, "merge_theta": self.merge_theta or DEFAULT_MERGE_THETA}
        return replace(self, task_extent=extent, model_options=dict(self.model_options), **fleet)

    def resolved_extent(self) -> tuple[float, float, float, float]:
        """``task_extent``; a ValueError when it is unset (the config is not :meth:`resolved`)."""
        if self.task_extent is None:
            raise ValueError("task_extent is not set: use the resolved mission, config.resolved()")
        return self.task_extent

    @classmethod
    def from_record(cls, record: dict, schema: int = SCHEMA) -> MissionConfig:
        """The mission of a recorded ``config`` (:meth:`to_dict`) of schema ``schema``; settings it lacks, added by a
        later schema (:data:`ADDED_IN`), take their default."""
        if schema > SCHEMA:
            raise ValueError(f"the record is of mission schema {schema}; this onlinegp reads up to {SCHEMA}: upgrade")
        unknown = set(record) - {f.name for f in fields(cls)}
        late = {k for k in record if ADDED_IN.get(k, 1) > schema}
        if unknown or late:
            raise ValueError(f"not a mission record of schema {schema}: {sorted(unknown | late)}")
        return cls(**record)

    @property
    def is_fleet(self) -> bool:
        """Whether the mission runs on the fleet simulator (any fleet setting given)."""
        return any(getattr(self, k) is not None for k in FLEET_KEYS)

    def load_field(self) -> Field:
        """The mission's field: ``env`` with ``field_options``."""
        return load_field(self.env, **(self.field_options or {}))

    def validate(self) -> None:
        """A ValueError naming the first setting out of range (``task_extent`` when set)."""
        if isinstance(self.budget, bool) or not isinstance(self.budget, (int, np.integer)) or self.budget < 1:
            raise ValueError(f"budget must be a positive number of samples, got {self.budget!r}")
        if self.model.lower() not in MODELS:
            raise ValueError(f"unknown model {self.model!r}; available: {', '.join(sorted(MODELS))}")
        if self.planner.lower() not in PLANNERS:
            raise ValueError(f"unknown planner {self.planner!r}; available: {', '.join(PLANNERS)}")
        if self.init not in INITS:
            raise ValueError(f"unknown init {self.init!r}; choose {' or '.join(INITS)}")
        for name in ("num_inducing", "num_steps"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, (int, np.integer)) or value < (1 if name == "num_inducing" else 0)
            ):
                raise ValueError(
                    f"{name} must be a {'positive' if name == 'num_inducing' else 'non-negative'} integer, got {value!r}"
                )
        for name in ("num_candidates", "num_pilot_waypoints", "num_random_init", "eval_grid"):
            if int(getattr(self, name)) < (2 if name in ("num_pilot_waypoints", "eval_grid") else 1):
                raise ValueError(f"{name} is too small: {getattr(self, name)}")
        extent = self.task_extent
        if extent is not None and not (extent[1] > extent[0] and extent[3] > extent[2]):
            raise ValueError(f"task_extent must be (xmin, xmax, ymin, ymax) with min < max, got {self.task_extent}")
        if not (0 < self.sensing_rate <= 10.0 and self.max_turn_rate > 0):
            raise ValueError(
                f"need 0 < sensing_rate <= 10 Hz (the control rate) and max_turn_rate > 0, got "
                f"{self.sensing_rate}, {self.max_turn_rate}"
            )
        if not (self.noise_std is None or self.noise_std >= 0) or not (self.speed is None or self.speed > 0):
            raise ValueError(
                f"need noise_std >= 0 (field units) and speed > 0 (m/s), got {self.noise_std}, {self.speed}"
            )
        if self.interpolation not in ("linear", "nearest") or self.input_scaling not in ("task", "pilot"):
            raise ValueError(
                f"interpolation must be linear or nearest and input_scaling task or pilot, got "
                f"{self.interpolation!r}, {self.input_scaling!r}"
            )
        self._validate_fleet()

    def _validate_fleet(self) -> None:
        """:meth:`validate`'s checks of the fleet's settings."""
        robots = self.robots
        if robots is not None and (isinstance(robots, bool) or not isinstance(robots, (int, np.integer)) or robots < 1):
            raise ValueError(f"robots must be a positive number of vehicles, got {robots!r}")
        if robots is not None and self.init == "bezier" and robots >= self.num_pilot_waypoints:
            raise ValueError(
                f"{robots} vehicles need at least {robots + 1} pilot waypoints to share the pilot survey, got "
                f"{self.num_pilot_waypoints}"
            )
        if robots is not None and robots > 1 and self.planner.lower() == "nipv":
            raise ValueError("the nipv planner plans for one vehicle: use max-entropy, random or lawnmower for a fleet")
        if self.fleet is not None and self.fleet not in FLEETS:
            raise ValueError(f"unknown fleet {self.fleet!r}; choose {' or '.join(FLEETS)}")
        if self.coordination is not None and self.coordination not in COORDINATIONS:
            raise ValueError(f"unknown coordination {self.coordination!r}; choose {' or '.join(COORDINATIONS)}")
        if (self.comm_radius is not None or self.merge_theta is not None) and self.fleet != "decentralised":
            raise ValueError(
                "comm_radius and merge_theta are settings of the decentralised fleet (fleet='decentralised')"
            )
        if self.comm_radius is not None and not 0 <= self.comm_radius < math.inf:
            raise ValueError(f"comm_radius must be a finite distance >= 0 in metres, got {self.comm_radius!r}")
        if self.merge_theta is not None and self.merge_theta not in MERGE_THETAS:
            raise ValueError(f"unknown merge_theta {self.merge_theta!r}; choose {' or '.join(MERGE_THETAS)}")
        if self.schedule is not None and self.schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {self.schedule!r}; choose {' or '.join(SCHEDULES)}")
        if self.budget_distance is not None and not (
            isinstance(self.budget_distance, (int, float, np.number)) and self.budget_distance > 0
        ):
            raise ValueError(f"budget_distance must be a positive distance in metres, got {self.budget_distance!r}")

    def model_kwargs(self) -> dict:
        opts = {k: getattr(self, k) for k in ("num_inducing", "num_steps", "kernel") if getattr(self, k) is not None}
        xmin, xmax, ymin, ymax = self.resolved_extent()
        box = {"x_bounds": [[xmin, ymin], [xmax, ymax]] if self.input_scaling == "task" else FIRST_BATCH}
        cls = model_class(self.model)
        in_mission = MISSION_MODEL_OPTIONS if cls is not None and issubclass(cls, POAM) else {}
        return {**in_mission, **opts, **self.model_options, **box, "seed": int(self.seed)}

    def to_dict(self) -> dict:
        """The record of schema :data:`SCHEMA` (JSON): every setting of schema 1, a later one when it is set; of the
        resolved mission (:meth:`resolved`), as it runs."""
        d = asdict(self)
        d["task_extent"] = list(self.resolved_extent())
        if math.isinf(d["max_turn_rate"]):  # JSON has no infinity
            d["max_turn_rate"] = "inf"
        return {k: v for k, v in d.items() if not (ADDED_IN.get(k, 1) > 1 and v is None)}


class ModelOptionsError(ValueError):
    """The model refused its constructor options (raised by :func:`build_model`)."""


def build_model(config: MissionConfig) -> OnlineGP:
    """The mission's model, constructed under a fixed torch seed (network initialisation is seeded too).

    Raises :class:`ModelOptionsError` (a ValueError) when the model rejects its options."""
    kwargs = config.model_kwargs()
    with torch.random.fork_rng():
        torch.manual_seed(int(config.seed))
        try:
            return make_recorded_model(config.model, 2, **kwargs)
        except TypeError as err:
            raise ModelOptionsError(
                f"model {config.model!r} does not accept these options "
                f"{sorted(k for k in kwargs if k not in ('x_bounds', 'seed'))}: {err}"
            ) from err
        except ValueError as err:
            raise ModelOptionsError(str(err)) from err


def lengthscale_grid(model: Any, x: np.ndarray) -> np.ndarray | None:
    """The learnt length-scale at ``x`` in user units, or None for models without one."""
    try:
        return np.asarray(model.lengthscale_map(x), dtype=np.float64)
    except (ValueError, AttributeError, RuntimeError, TypeError):
        return None


class Mission:
    """One mission, advanced an epoch at a time; ``state()``/``load_state()`` are exact checkpoints."""

    def __init__(self, config: MissionConfig, field: Field | None = None):
        config.validate()
        self.field = config.load_field() if field is None else field
        self.config = config = config.resolved(self.field)
        config.validate()
        self.eval_x = self.field.grid(config.eval_grid, config.task_extent)
        self.eval_y = self.field(self.eval_x, config.interpolation)
        noise = 1.0 if config.noise_std is None else config.noise_std
        self.sensor = PointSensor(noise_std=noise, interpolation=config.interpolation)
        self.planner = make_planner(
            config.planner,
            tuple(config.task_extent),
            num_candidates=config.num_candidates,
            distance_weight=config.distance_weight,
        )
        self.model = build_model(config)
        self.rng = np.random.default_rng(int(config.seed))
        self.vehicle: DiffDrive | None = None
        self.X = np.zeros((0, 2))
        self.y = np.zeros(0)
        self.rows: list[dict] = []
        self.frames: list[dict] = []
        self.wall_time = 0.0

    @property
    def num_samples(self) -> int:
        return int(self.y.shape[0])

    @property
    def done(self) -> bool:
        return self.num_samples >= self.config.budget

    @property
    def epoch(self) -> int:
        """Index of the last completed epoch (0 is the pilot survey), -1 before it."""
        return len(self.rows) - 1

    # ------------------------------------------------------------------ one decision epoch
    def _pilot(self) -> np.ndarray:
        c = self.config
        if c.init == "bezier":
            self.vehicle = self._bezier_start()
            return self._drive(self.vehicle, bezier_pilot(tuple(c.task_extent), c.num_pilot_waypoints), c.budget)
        start, xy = random_pilot(tuple(c.task_extent), min(c.num_random_init, c.budget), self.rng)
        self.vehicle = DiffDrive(x=float(start[0]), y=float(start[1]), yaw=float(start[2]), **self._vehicle_limits())
        return xy

    def _bezier_start(self) -> DiffDrive:
        xmin, xmax, ymin, ymax = self.config.task_extent
        return DiffDrive(x=xmax, y=ymin, yaw=-math.pi, **self._vehicle_limits())

    def pilot_size(self) -> int:
        """Samples the whole pilot survey takes, whatever the budget (the Bézier path driven on a scratch vehicle;
        nothing of the mission changes): with a budget at or below it, the mission is the pilot survey alone."""
        c = self.config
        if c.init != "bezier":
            return int(c.num_random_init)
        return len(
            self._drive(self._bezier_start(), bezier_pilot(tuple(c.task_extent), c.num_pilot_waypoints), math.inf)
        )

    def _drive(self, vehicle: DiffDrive, goals: np.ndarray, max_samples: float) -> np.ndarray:
        """``vehicle.drive``; a goal it cannot reach (it circles it) is a ValueError naming the settings to change."""
        try:
            return vehicle.drive(goals, max_samples)
        except RuntimeError as err:
            raise ValueError(self._unreachable(vehicle, err)) from err

    @staticmethod
    def _unreachable(vehicle: DiffDrive, err: Exception) -> str:
        return (
            f"{err}: at {vehicle.max_lin_vel:g} m/s and {vehicle.max_ang_vel:g} rad/s it turns on a circle of "
            f"{vehicle.max_lin_vel / vehicle.max_ang_vel:.3g} m radius and circles goals closer than that; lower "
            "--speed or raise --max-turn-rate"
        )

    def paths(self, num_samples: int | None = None) -> list[np.ndarray]:
        """Each vehicle's sample locations in order, among the first ``num_samples`` (one vehicle here)."""
        return [self.X[:num_samples]]

    def _vehicle_limits(self) -> dict:
        # a goal counts as reached within 0.1 s of travel (0.1 m at 1 m/s): a fast vehicle would overshoot a
        # smaller one between 10 Hz control ticks and circle it
        speed = (
            {}
            if self.config.speed is None
            else {"max_lin_vel": self.config.speed, "goal_radius": 0.1 * self.config.speed}
        )
        return {"sensing_rate": self.config.sensing_rate, "max_ang_vel": self.config.max_turn_rate, **speed}

    def _gather(self) -> np.ndarray:
        for _ in range(1000):
            goal = self.planner.plan(self.model, self.vehicle.position, self.rng)
            xy = self._drive(self.vehicle, goal[None], self.config.budget - self.num_samples)
            if len(xy):
                return xy
        raise RuntimeError(
            "1000 planned waypoints in a row yielded no sample; the planner keeps choosing the vehicle's own position"
        )

    def step(self) -> dict:
        """Run one decision epoch (the first is the pilot survey) and return its metrics row."""
        if self.done:
            raise RuntimeError("the mission has already used its sample budget")
        t_start = time.perf_counter()
        xy = self._pilot() if self.vehicle is None else self._gather()
        t_plan = time.perf_counter() - t_start
        y = self.sensor.measure(self.field, xy, self.rng)
        self.X, self.y = np.vstack([self.X, xy]), np.concatenate([self.y, y])
        t0, c0 = time.perf_counter(), time.process_time()
        num_inducing = self._absorb(xy, y)
        t_update, c_update = time.perf_counter() - t0, time.process_time() - c0
        t0 = time.perf_counter()
        pred = self.model.predict(torch.from_numpy(self.eval_x))
        t_predict = time.perf_counter() - t0
        mean, var = pred.mean.numpy(), pred.var_y.numpy()
        m = metrics.all_metrics(self.eval_y, mean, var, float(self.y.mean()), float(self.y.std()))
        learnt = self.model.hyperparameters(self.eval_x)
        self.wall_time += time.perf_counter() - t_start
        row = {
            "epoch": self.epoch + 1,
            "num_samples": self.num_samples,
            "num_inducing": num_inducing,
            **m,
            "update_time": t_update,
            "update_cpu_time": c_update,
            "prediction_time": t_predict,
            "plan_drive_time": t_plan,
            "wall_time": self.wall_time,
            **learnt,
        }
        self.rows.append(row)
        if self.config.animate:
            n = self.config.eval_grid
            self.frames.append(
                {
                    "mean": mean.reshape(n, n).astype(np.float32),
                    "std": np.sqrt(var).reshape(n, n).astype(np.float32),
                    "num_samples": self.num_samples,
                }
            )
        return row

    def _absorb(self, xy: np.ndarray, y: np.ndarray) -> int | None:
        """Update the model with the epoch's samples; returns its number of inducing inputs."""
        return self.model.update(torch.from_numpy(xy), torch.from_numpy(y)).num_inducing

    def provenance(self) -> dict:
        """What config.json records beyond the config of where the model was kept: nothing for this process."""
        return {}

    # ------------------------------------------------------------------ checkpoints
    def state(self) -> dict:
        return {
            "format": 1,
            "config": self.config.to_dict(),
            "field_digest": self.field.digest(),
            "vehicle": None if self.vehicle is None else self.vehicle.state(),
            "rng": self.rng.bit_generator.state,
            "planner": self.planner.state(),
            "X": self.X.copy(),
            "y": self.y.copy(),
            "rows": [dict(r) for r in self.rows],
            "frames": list(self.frames),
            "wall_time": self.wall_time,
            "model": self.model.state_dict(),
        }

    def load_state(self, state: dict) -> None:
        stored = state["config"]
        mine = self.config.to_dict()
        diff = sorted(k for k in set(stored) | set(mine) if stored.get(k) != mine.get(k))
        if diff:
            raise ValueError(
                "the checkpoint was written by a mission with different settings ("
                + ", ".join(f"{k}: {stored.get(k)!r} there, {mine.get(k)!r} here" for k in diff)
                + "); resume with the same options or use another --out"
            )
        if state["field_digest"] != self.field.digest():
            raise ValueError("the checkpoint was written for a different field; resume with the same --env")
        self.vehicle = None if state["vehicle"] is None else DiffDrive.from_state(state["vehicle"])
        self.rng.bit_generator.state = state["rng"]
        self.planner.load_state(state["planner"])
        self.X, self.y = state["X"].copy(), state["y"].copy()
        self.rows = [dict(r) for r in state["rows"]]
        self.frames = list(state["frames"])
        self.wall_time = state["wall_time"]
        if self.rows:
            self.model.load_state_dict(state["model"])

    def survey(self) -> Survey:
        """The samples so far as a replayable survey log (batch boundaries, evaluation grid, per-epoch metrics and
        the model's settings), for ``onlinegp replay``."""
        from ..replay import Survey  # imports matplotlib: not needed before a mission's end

        xmin, xmax, ymin, ymax = self.config.task_extent
        rows = self.rows
        return Survey(
            self.X.copy(),
            self.y.copy(),
            np.array([r["num_samples"] for r in rows], dtype=int),
            self.eval_x,
            self.eval_y,
            recorded={
                "smse": np.array([r["smse"] for r in rows]),
                "msll": np.array([r["msll"] for r in rows]),
                "update_s": np.array([r["update_time"] for r in rows]),
            },
            meta={
                "model": self.config.model,
                "seed": int(self.config.seed),
                "model_options": {k: v for k, v in self.config.model_kwargs().items() if k not in ("x_bounds", "seed")},
                "x_bounds": [[xmin, ymin], [xmax, ymax]] if self.config.input_scaling == "task" else FIRST_BATCH,
                "env": self.config.env,
                "profile": self.config.profile,
            },
        )

    def save(self, path: str | Path) -> None:
        """Write the checkpoint atomically (:func:`onlinegp.io.atomic_write`)."""
        state = self.state()
        atomic_write(path, lambda fh: torch.save(state, fh))

    def load(self, path: str | Path) -> None:
        try:
            state = torch.load(path, weights_only=False)
        except Exception as err:
            raise ValueError(f"cannot read checkpoint {str(path)!r}: {err}; start afresh without --resume") from err
        self.load_state(state)
