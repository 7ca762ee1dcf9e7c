"""``onlinegp serve demo``: simulated vehicles that plan with, and post to, the service."""

import threading

import numpy as np
import pytest
from typer.testing import CliRunner

from onlinegp.experiments.cli import app
from onlinegp.experiments.service import cli as serve_cli
from onlinegp.experiments.service.demo import SAMPLES_PER_POST, drive
from onlinegp.experiments.service.store import Store
from onlinegp.experiments.simulator.fields import bundled

from .helpers import AREA

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


class FakeService:
    """Goals in turn at two corners; records posts; stops the vehicle after ``posts`` of them."""

    def __init__(self, stop: threading.Event, posts: int):
        self.stop, self.posts, self.rows, self.asked = stop, posts, [], []

    def next(self, vehicle, position):
        self.asked.append(position)
        return [1.0, 1.0] if len(self.asked) % 2 else [9.0, 9.0]

    def post(self, vehicle, x, y, values):
        assert len(x) == len(y) == len(values) <= SAMPLES_PER_POST and np.isfinite(values).all()
        self.rows += list(zip(x, y, values))
        if len(self.rows) >= self.posts * SAMPLES_PER_POST:
            self.stop.set()


def test_a_vehicle_plans_with_the_service_and_posts_what_it_sensed():
    stop = threading.Event()
    service = FakeService(stop, posts=2)
    posted = drive(service, "boat", bundled("valley-ridges"), AREA, stop, seed=1, speedup=1e6)
    assert posted == len(service.rows) >= 2 * SAMPLES_PER_POST and len(service.asked) >= 2
    xy = np.array(service.rows)[:, :2]
    assert (xy >= -1).all() and (xy <= 11).all()  # between its start and the goals, inside the area


def test_demo_serves_a_bundled_terrain_with_tokens_for_its_vehicles(tmp_path, monkeypatch):
    import uvicorn

    served, started = [], []
    monkeypatch.setattr(uvicorn, "run", lambda app, **how: served.append((app, how)))
    monkeypatch.setattr(serve_cli, "start_vehicles", lambda *args: started.append(args))
    result = CliRunner().invoke(app, ["serve", "demo", str(tmp_path / "demo"), "--vehicles", "3", "--port", "8123"])
    assert result.exit_code == 0, result.output
    ((url, tokens, field, area, speedup),) = started
    assert url == "http://127.0.0.1:8123" and sorted(tokens) == ["vehicle1", "vehicle2", "vehicle3"]
    store = Store(tmp_path / "demo")
    assert all(store.vehicle_of(token) == name for name, token in tokens.items())
    state = served[0][0].state.service.state
    assert state.config.area == area and field.name == "valley-ridges"
    assert served[0][1]["host"] == "127.0.0.1"
