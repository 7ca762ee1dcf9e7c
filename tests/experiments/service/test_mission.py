"""``onlinegp mission --via URL``: the simulator's vehicle maps through a real service (uvicorn in a thread) and ends
with the in-process mission's metrics, bit for bit; a service keeping another model is refused with the command that
starts the right one."""

import json
import shlex

import pytest
import torch
from typer.testing import CliRunner

from onlinegp.client import MapClient, ServiceError
from onlinegp.experiments.cli import app
from onlinegp.experiments.service.app import create_app
from onlinegp.experiments.service.mission import ServiceMission, serve_command, service_config
from onlinegp.experiments.service.state import ServiceConfig
from onlinegp.experiments.service.store import Store
from onlinegp.experiments.simulator.mission import MissionConfig
from onlinegp.experiments.simulator.run import run_mission

from .helpers import serving, small_config

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

#: a small mission (a pilot survey and a few epochs)
SMALL = {"budget": 900, "num_inducing": 40, "num_steps": 2, "seed": 3, "num_candidates": 300}
METRICS = ("num_samples", "num_inducing", "smse", "msll", "rmse", "nlpd", "mae")


def test_a_mission_through_the_service_is_the_in_process_mission(tmp_path):
    config = MissionConfig(**SMALL).resolved()
    alone = run_mission(config, tmp_path / "alone", quiet=True)
    token = Store(tmp_path / "service").add_token("mission")
    service = create_app(tmp_path / "service", service_config(config))
    with serving(service) as url:
        mission = ServiceMission(config, MapClient(url, token), "mission")
        through = run_mission(mission, tmp_path / "through", quiet=True)
        status = MapClient(url).status()
    assert len(through.rows) == len(alone.rows) > 2
    for ours, theirs in zip(through.rows, alone.rows):
        assert {k: ours[k] for k in METRICS} == {k: theirs[k] for k in METRICS}
    assert status["updates"] == len(alone.rows) and status["N"] == SMALL["budget"]
    model = service.state.service.state.model  # the app's service's map
    for key, value in alone_state(tmp_path / "alone").items():
        if isinstance(value, torch.Tensor):
            assert torch.equal(value, model.state_dict()[key]), key
    recorded = json.loads((tmp_path / "through" / "config.json").read_text())
    assert recorded["via"]["url"] == url and recorded["via"]["service"]["close_on"] == "request"


def alone_state(run):
    return torch.load(run / "model.pt", weights_only=False)


def test_another_models_service_is_refused_with_the_command_that_starts_the_right_one(tmp_path, monkeypatch):
    config = MissionConfig(**SMALL).resolved()
    token = Store(tmp_path / "other").add_token("mission")
    with serving(create_app(tmp_path / "other", small_config())) as url:
        with pytest.raises(ValueError, match="does not keep this mission's model") as refused:
            ServiceMission(config, MapClient(url, token), "mission")
        result = CliRunner().invoke(app, ["mission", "--budget", "900", "--seed", "3", "--via", url, "--token", token])
    assert result.exit_code != 0 and "onlinegp serve" in result.output
    command = str(refused.value).rsplit("start one that does: ", 1)[1]
    assert command == serve_command(service_config(config))
    # the command starts the service the mission needs (the server itself replaced)
    import uvicorn

    monkeypatch.setattr(uvicorn, "run", lambda app, **how: None)
    words = shlex.split(command.replace("DIR", str(tmp_path / "right")))
    assert CliRunner().invoke(app, words[1:]).exit_code == 0
    assert ServiceConfig.load(tmp_path / "right") == service_config(config)


def test_a_mission_via_a_service_needs_a_token_and_does_not_resume(tmp_path):
    runner = CliRunner()
    no_token = runner.invoke(app, ["mission", "--via", "http://127.0.0.1:9"], env={"ONLINEGP_TOKEN": ""})
    assert no_token.exit_code != 0 and "token" in no_token.output
    resumed = runner.invoke(app, ["mission", "--via", "http://127.0.0.1:9", "--resume", "--out", str(tmp_path)])
    assert resumed.exit_code != 0 and "does not resume" in resumed.output
    unreachable = runner.invoke(app, ["mission", "--via", "http://127.0.0.1:9", "--token", "t"])
    assert unreachable.exit_code != 0 and "cannot use the service" in unreachable.output


def test_a_service_failing_mid_mission_is_an_error_not_a_traceback(tmp_path, monkeypatch):
    def gone(self, xy, y):
        raise ServiceError(503, "the service is going down")

    monkeypatch.setattr(ServiceMission, "_check", lambda self, status: {"close_on": "request"})
    monkeypatch.setattr(ServiceMission, "_absorb", gone)
    monkeypatch.setattr(MapClient, "status", lambda self: {})
    out = tmp_path / "run"
    result = CliRunner().invoke(app, ["mission", "--via", "http://127.0.0.1:9", "--token", "t", "--out", str(out)])
    assert result.exit_code == 1 and "the service failed during the mission: 503" in result.output
