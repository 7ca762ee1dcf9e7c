"""``onlinegp serve demo``: the service on a bundled terrain with simulated vehicles posting to it over HTTP.

Each vehicle (:func:`drive`) is the simulator's :class:`~onlinegp.experiments.simulator.robot.DiffDrive` with its
point sensor: it asks the service for its next waypoint, drives towards it, posts the samples it took on the way
through :class:`~onlinegp.client.MapClient`, and waits as long as the drive took (divided by ``speedup``).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import numpy as np

from ...client import MapClient, ServiceError
from ..simulator.fields import Field
from ..simulator.mission import MISSION_MODEL_OPTIONS, task_extent
from ..simulator.robot import DiffDrive, PointSensor
from .state import ServiceConfig

log = logging.getLogger("onlinegp.service")

#: samples a vehicle posts at most per leg (a leg ends at the goal or here, then it asks again)
SAMPLES_PER_POST = 30


def demo_config(field: Field) -> ServiceConfig:
    """The demo's service over ``field``: the mission's model on its task area, small batches closed each second."""
    how = {"batch_size": 30, "batch_seconds": 1.0, "unit": field.unit}
    return ServiceConfig(options=dict(MISSION_MODEL_OPTIONS), area=task_extent(field.extent), **how)


def drive(
    client: Any,
    name: str,
    field: Field,
    area: tuple[float, float, float, float],
    stop: threading.Event,
    seed: int = 0,
    speedup: float = 5.0,
) -> int:
    """Run vehicle ``name`` until ``stop`` is set: plan with the service, drive, sense, post. ``client`` is a
    :class:`MapClient` (or anything with its ``next`` and ``post``). Returns the number of rows it posted."""
    rng = np.random.default_rng(seed)
    xmin, xmax, ymin, ymax = area
    vehicle = DiffDrive(x=rng.uniform(xmin, xmax), y=rng.uniform(ymin, ymax), yaw=rng.uniform(-np.pi, np.pi))
    sensor, posted = PointSensor(), 0
    while not stop.is_set():
        try:
            goal = client.next(name, vehicle.position.tolist())
            xy = vehicle.drive(np.array([goal]), max_samples=SAMPLES_PER_POST)
            if len(xy):
                client.post(name, xy[:, 0], xy[:, 1], sensor.measure(field, xy, rng))
                posted += len(xy)
        except (OSError, ServiceError, RuntimeError) as error:  # the service is down, refused, or a goal unreachable
            log.log(logging.WARNING if posted else logging.DEBUG, "vehicle %s: %s", name, error)  # quiet at start
            stop.wait(1.0)
            continue
        stop.wait(max(0.1, len(xy) / vehicle.sensing_rate / speedup))
    return posted


def start_vehicles(
    url: str, tokens: dict[str, str], field: Field, area: tuple[float, float, float, float], speedup: float = 5.0
) -> threading.Event:
    """One daemon thread per vehicle of ``tokens`` driving against the service at ``url``; set the returned event
    to stop them."""
    stop = threading.Event()
    for seed, (name, token) in enumerate(sorted(tokens.items())):
        client = MapClient(url, token)
        arguments = (client, name, field, area, stop, seed, speedup)
        threading.Thread(target=drive, args=arguments, name=f"demo-{name}", daemon=True).start()
    return stop
