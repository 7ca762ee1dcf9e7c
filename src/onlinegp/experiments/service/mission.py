"""``onlinegp mission --via URL``: the simulator's mission with its map kept by a running service.

Each decision epoch the vehicle posts its samples (``POST /observations``), closes them into one batch
(``POST /batches``; the service's batches close on request only) and reads the updated model back (``GET /model``,
through the weights-only :func:`~onlinegp.base.read_state`); the planner and the evaluation use that copy. A service
that keeps the model the mission would build (:func:`service_config`) applies the same batches to the same model, so
the mission's samples, draws and metrics are the in-process mission's, to the bit. An epoch's ``update_time`` is the
whole round trip: post, update in the service, read back.
"""

from __future__ import annotations

import io
import json
import shlex
from typing import Any

import numpy as np

from ...base import read_state
from ...client import MapClient
from ..simulator.fields import Field
from ..simulator.mission import Mission, MissionConfig
from .state import ServiceConfig

#: rows per POST (well under the service's default limits of rows and bytes per request)
POST_ROWS = 1000
#: what must agree between the service and the mission (``GET /status``'s keys)
MATCHED = ("model", "options", "area", "seed", "close_on")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value))


def service_config(config: MissionConfig) -> ServiceConfig:
    """The service a mission of (resolved) ``config`` maps through: its model and options, its task extent as the
    area, its seed, batches closed on request."""
    options = {k: v for k, v in config.model_kwargs().items() if k != "x_bounds"}
    return ServiceConfig(
        model=config.model.lower(),
        options=_jsonable(options),
        area=tuple(config.resolved_extent()),
        seed=int(config.seed),
        close_on="request",
    )


def serve_command(config: ServiceConfig, run_dir: str = "DIR") -> str:
    """The ``onlinegp serve`` command line that starts a new service of ``config`` over ``run_dir``."""
    words = ["onlinegp", "serve", run_dir, "--model", config.model, "--area", ",".join(map(repr, config.area))]
    words += ["--seed", str(config.seed), "--close-on", config.close_on]
    words += [w for k, v in config.options.items() for w in ("-o", f"{k}={json.dumps(v)}")]
    return shlex.join(words)


class ServiceMission(Mission):
    """A single-vehicle :class:`~onlinegp.experiments.simulator.mission.Mission` whose model is kept by the service
    that ``client`` talks to, posting as ``vehicle`` (``client``'s token must be that vehicle's). The service must be
    new (no observations yet) and keep the model of :func:`service_config`: else a ValueError says how to start one."""

    def __init__(self, config: MissionConfig, client: MapClient, vehicle: str, field: Field | None = None):
        if config.is_fleet:
            raise ValueError("a mission through a service drives one vehicle: drop the fleet settings")
        super().__init__(config, field)
        if self.config.input_scaling != "task":
            raise ValueError("a service scales its inputs to its area: a mission through it needs input_scaling task")
        self.client, self.vehicle_name = client, vehicle
        self.service = self._check(client.status())

    def _check(self, status: dict) -> dict:
        """``status``'s settings, when they are those of :func:`service_config` and the map is empty."""
        wanted = service_config(self.config)
        mine = _jsonable({k: getattr(wanted, k) for k in MATCHED})
        theirs = _jsonable({k: status.get(k) for k in MATCHED})
        differ = [f"{k}: {theirs[k]!r} there, {mine[k]!r} here" for k in MATCHED if theirs[k] != mine[k]]
        if differ:
            raise ValueError(
                f"the service at {self.client.url} does not keep this mission's model ({'; '.join(differ)}); "
                f"start one that does: {serve_command(wanted)}"
            )
        if status.get("N") or status.get("backlog") or status.get("pending"):
            raise ValueError(
                f"the service at {self.client.url} already holds observations: a mission starts on a new service "
                f"(a new run directory): {serve_command(wanted)}"
            )
        return theirs

    def _absorb(self, xy: np.ndarray, y: np.ndarray) -> int | None:
        """Post the epoch's samples, close them into one batch and load the service's updated model."""
        for start in range(0, len(y), POST_ROWS):
            part = slice(start, start + POST_ROWS)
            self.client.post(self.vehicle_name, xy[part, 0], xy[part, 1], y[part])
        answer = self.client.close_batch()
        if answer["refused"]:
            raise RuntimeError(
                f"the service's model refused epoch {self.epoch + 1}'s batch (batch {answer['batch_id']}): see the "
                "service's log"
            )
        self.model.load_state_dict(read_state(io.BytesIO(self.client.model_state())))
        return self.model.num_inducing

    def provenance(self) -> dict:
        return {"via": {"url": self.client.url, "vehicle": self.vehicle_name, "service": self.service}}
