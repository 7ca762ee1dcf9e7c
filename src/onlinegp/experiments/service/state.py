"""The map the service keeps: a registered model over the survey area, fed batch by batch from the log.

One worker closes batches (:meth:`MapState.step`: on size, or when the oldest open row is ``batch_seconds`` old; or
only when a client asks, :meth:`MapState.flush`, with ``close_on="request"``), applies each to the model and then
checkpoints the model atomically with the id of the last batch it covers.
:meth:`MapState.open` restores that checkpoint and replays the batches closed after it, by the boundaries the log
recorded: the model it reaches is the one, bit for bit, that a service never stopped would hold after the same
batches. Rows still open are closed into batches by the worker, as new ones are.
"""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ...base import OnlineGP
from ...io import atomic_write
from ...models.registry import make_recorded_model
from ..simulator.fleet import joint_goals
from ..simulator.planners import MaxEntropyPlanner, RandomPlanner
from .store import Store

log = logging.getLogger("onlinegp.service")

CONFIG = "service.json"
CHECKPOINT = "checkpoint.pt"
#: when a batch closes: on its size or its oldest row's age (the worker), or only when a client asks (POST /batches)
CLOSE_ON = ("size-or-age", "request")
#: a worker that has fallen behind closes batches of up to this many batch sizes (:meth:`MapState.batch_limit`)
CATCH_UP = 10


@dataclasses.dataclass(frozen=True)
class ServiceConfig:
    """What a run directory's service is: its model (a registered name and options, built under ``torch`` seeded
    with ``seed``, which also seeds the planner), the survey area (xmin, xmax, ymin, ymax) the model is scaled to and
    the planner draws goals in, when a batch closes (:data:`CLOSE_ON`), and the unit of the field's values (for the
    page and the figures). ``frame`` (:meth:`onlinegp.geo.LocalFrame.to_dict`: a CRS and an origin) places the area's
    metres on the Earth, for the GeoTIFF map and for clients that project their fixes as the service does."""

    model: str = "poam"
    options: dict = dataclasses.field(default_factory=dict)
    area: tuple[float, float, float, float] = (0.0, 100.0, 0.0, 100.0)
    batch_size: int = 50
    batch_seconds: float = 2.0
    num_candidates: int = 2000
    seed: int = 0
    unit: str = ""
    close_on: str = "size-or-age"
    frame: dict | None = None

    def __post_init__(self) -> None:
        xmin, xmax, ymin, ymax = self.area
        if not (xmin < xmax and ymin < ymax):
            raise ValueError(f"the area needs XMIN < XMAX and YMIN < YMAX, got {self.area}")
        if self.batch_size < 1 or not self.batch_seconds > 0:
            raise ValueError(f"batch size and seconds must be positive, got {self.batch_size}, {self.batch_seconds}")
        if self.frame is not None and not ({"crs", "origin"} <= set(self.frame) and len(self.frame["origin"]) == 2):
            raise ValueError(f"a frame is LocalFrame.to_dict()'s crs and origin (easting, northing), got {self.frame}")
        if self.close_on not in CLOSE_ON:
            raise ValueError(f"a batch closes on {' or '.join(CLOSE_ON)}, got {self.close_on!r}")

    @property
    def x_bounds(self) -> list[list[float]]:
        xmin, xmax, ymin, ymax = self.area
        return [[xmin, ymin], [xmax, ymax]]

    def save(self, run_dir: Path) -> None:
        atomic_write(run_dir / CONFIG, json.dumps(dataclasses.asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, run_dir: Path) -> ServiceConfig:
        record = json.loads((run_dir / CONFIG).read_text())
        return cls(**record | {"area": tuple(record["area"])})


def build_model(config: ServiceConfig) -> OnlineGP:
    """The service's model, new: the registered ``model`` for 2-D inputs scaled to the area, with its ``options``,
    built under ``torch`` seeded with ``seed`` (a network's initial weights too), as a mission builds its own."""
    with torch.random.fork_rng():
        torch.manual_seed(config.seed)
        return make_recorded_model(config.model, 2, x_bounds=config.x_bounds, **config.options)


class MapState:
    """The model, the log and the worker's step; every use of the model holds :attr:`lock`."""

    def __init__(self, run_dir: str | Path, config: ServiceConfig, store: Store | None = None):
        self.run_dir, self.config = Path(run_dir), config
        self.store = store or Store(self.run_dir)
        self.lock = threading.RLock()
        self.closing = threading.Lock()  # one batch closed and applied at a time, by the worker or a flush
        self.model = build_model(config)
        self.batch_id = 0  # the last batch the model covers
        self.last_update: float | None = None
        self.last_seconds: float | None = None
        self.failed: list[int] = []
        self.goals: dict[str, np.ndarray] = {}
        self.rng = np.random.default_rng(config.seed)
        self.listeners: list[Callable[[dict], None]] = []
        self.latest = self._summarise()

    @classmethod
    def open(cls, run_dir: str | Path, config: ServiceConfig | None = None, resume: bool = False) -> MapState:
        """The map of ``run_dir``: new (``config`` recorded there) or, with ``resume``, as recorded and restored
        from its checkpoint and log. A new map refuses a directory whose log already holds observations."""
        run_dir = Path(run_dir)
        if resume:
            if not (run_dir / CONFIG).is_file():
                raise ValueError(f"{run_dir} holds no service to resume (no {CONFIG})")
            state = cls(run_dir, ServiceConfig.load(run_dir))
            state.restore()
            return state
        state = cls(run_dir, config or ServiceConfig())
        if state.store.count() or (run_dir / CHECKPOINT).exists():
            state.store.close()
            raise ValueError(f"{run_dir} already holds a service's observations: resume it (--resume)")
        state.config.save(run_dir)
        return state

    # ------------------------------------------------------------------ updates
    def restore(self) -> None:
        """Load the checkpoint (if any) and replay the batches closed after it."""
        path = self.run_dir / CHECKPOINT
        if path.is_file():
            saved = torch.load(path, weights_only=False)
            self.model.load_state_dict(saved["model"])
            self.batch_id, self.failed = saved["batch_id"], list(saved.get("failed", []))
            self.latest = self._summarise()
        replay = self.store.batches_after(self.batch_id)
        for batch_id, rows in replay:
            self.apply(batch_id, rows)
        if replay:
            log.info("replayed %d batches after the checkpoint", len(replay))

    def apply(self, batch_id: int, rows: np.ndarray) -> None:
        """Update the model with one closed batch, then checkpoint it. A batch the model refuses leaves it as it
        was (its update is a transaction); it is logged and remembered, and a replay refuses it the same way."""
        start = time.perf_counter()
        with self.lock:
            try:
                x, y = np.ascontiguousarray(rows[:, :2]), np.ascontiguousarray(rows[:, 2])  # as a caller's arrays
                self.model.update(torch.from_numpy(x), torch.from_numpy(y))
            except Exception as error:  # the model refused it: recorded, as a replay would find too
                log.warning("batch %d (%d rows) refused by the model: %s", batch_id, len(rows), error)
                self.failed.append(batch_id)
            self.batch_id = batch_id
            self.checkpoint()
            self.last_update, self.last_seconds = time.time(), time.perf_counter() - start
            self.latest = self._summarise()
        for listener in list(self.listeners):
            listener(self.summary())

    def checkpoint(self) -> None:
        state = {"model": self.model.state_dict(), "batch_id": self.batch_id, "failed": self.failed}
        atomic_write(self.run_dir / CHECKPOINT, lambda fh: torch.save(state, fh))

    def due(self, now: float | None = None) -> bool:
        """Whether a batch should close now: a full batch is open, or the oldest open row is old enough (never when
        batches close on request)."""
        if self.config.close_on == "request":
            return False
        n, oldest = self.store.backlog()
        now = time.time() if now is None else now
        return n >= self.config.batch_size or (n > 0 and now - oldest >= self.config.batch_seconds)

    def batch_limit(self, backlog: int) -> int:
        """The most rows the next batch takes: ``batch_size``, or, when the worker has fallen behind (two batches or
        more waiting), all that wait up to :data:`CATCH_UP` batch sizes: it batches larger rather than falling
        behind without bound. The boundaries are recorded, so a replay does not depend on this choice."""
        size = self.config.batch_size
        return size if backlog < 2 * size else min(backlog, CATCH_UP * size)

    def step(self) -> bool:
        """Close and apply one batch if one is due; whether it did."""
        with self.closing:
            if not self.due():
                return False
            closed = self.store.close_batch(self.batch_limit(self.store.backlog()[0]))
            if closed is not None:
                self.apply(*closed)
            return closed is not None

    def flush(self) -> bool:
        """Close every open row into one batch now and apply it (after any batch the worker has in hand): when it
        returns, the map covers every row committed before the call. Whether there were open rows."""
        with self.closing:
            backlog = self.store.backlog()[0]
            closed = self.store.close_batch(backlog) if backlog else None
            if closed is not None:
                self.apply(*closed)
            return closed is not None

    def state_bytes(self) -> bytes:
        """The model's exact checkpoint (:meth:`~onlinegp.base.OnlineGP.save`'s format) as bytes."""
        out = io.BytesIO()
        with self.lock:
            torch.save(self.model.state_dict(), out)
        return out.getvalue()

    # ------------------------------------------------------------------ reads
    def summary(self) -> dict[str, Any]:
        """N, M, the number of updates and the last one's time (a small JSON-able dict): as of the last update, so
        that it is answered at once while the next update holds the model."""
        return dict(self.latest)

    def _summarise(self) -> dict[str, Any]:
        with self.lock:
            return {
                "N": int(self.model.num_data),
                "M": self.model.num_inducing,
                "updates": int(self.model.num_updates),
                "batch_id": self.batch_id,
                "last_update": self.last_update,
                "last_update_seconds": self.last_seconds,
            }

    def grid(self, cells: int) -> dict[str, Any]:
        """Mean and field standard deviation on ``cells`` x ``cells`` cell centres over the area (rows along y)."""
        xmin, xmax, ymin, ymax = self.config.area
        xs = xmin + (np.arange(cells) + 0.5) * (xmax - xmin) / cells
        ys = ymin + (np.arange(cells) + 0.5) * (ymax - ymin) / cells
        points = torch.as_tensor(np.stack(np.meshgrid(xs, ys), axis=-1).reshape(-1, 2))
        with self.lock:
            if self.model.num_data == 0:
                mean, std = np.full(cells * cells, np.nan), np.full(cells * cells, np.nan)
            else:
                with torch.no_grad():
                    pred = self.model.predict(points)
                mean, std = pred.mean.numpy(), pred.var_f.sqrt().numpy()
        return {"x": xs, "y": ys, "mean": mean.reshape(cells, cells), "std": std.reshape(cells, cells)}

    def next_goal(self, vehicle: str, position: np.ndarray) -> np.ndarray:
        """The next waypoint for ``vehicle`` at ``position``: the simulator's max-entropy planner on this map, with
        the goals other vehicles are still driving to taken into account as the fleet's joint assignment does (a
        uniform random goal before the first update)."""
        extent = tuple(self.config.area)
        with self.lock:
            pending = [goal for name, goal in self.goals.items() if name != vehicle]
            if self.model.num_data == 0:
                goal = RandomPlanner(extent).plan(None, position, self.rng)
            else:
                planner = MaxEntropyPlanner(extent, num_candidates=self.config.num_candidates)
                with torch.no_grad():
                    goal = joint_goals(planner, self.model, [position], self.rng, "joint", np.array(pending))[0]
            self.goals[vehicle] = np.asarray(goal, dtype=np.float64)
        return self.goals[vehicle]


class Worker:
    """The one thread that closes and applies batches: it wakes when rows arrive (:meth:`poke`) or every
    ``interval`` seconds, and on :meth:`stop` finishes the batch in hand."""

    def __init__(self, state: MapState, interval: float = 0.1):
        self.state, self.interval = state, interval
        self.wake, self.stopping = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.run, name="onlinegp-map-worker", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def poke(self) -> None:
        self.wake.set()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.wake.wait(self.interval)
            self.wake.clear()
            try:
                while not self.stopping.is_set() and self.state.step():
                    pass
            except Exception:  # a worker that died would leave the map stale without a word
                log.exception("the map's worker failed to apply a batch")

    def stop(self) -> None:
        self.stopping.set()
        self.wake.set()
        self.thread.join()
