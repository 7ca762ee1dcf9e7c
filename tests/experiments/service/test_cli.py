"""``onlinegp serve`` and ``onlinegp serve token add``, in-process, the server itself replaced (test_faults.py runs
a real one)."""

import importlib.util
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

import onlinegp
from onlinegp.experiments.cli import app
from onlinegp.experiments.service.state import ServiceConfig
from onlinegp.experiments.service.store import DATABASE, Store, token_hash

from .helpers import AREA, OPTIONS

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

runner = CliRunner()
AREA_TEXT = ",".join(str(v) for v in AREA)
OPTION_ARGS = [item for k, v in OPTIONS.items() for item in ("-o", f"{k}={v}")]


def test_token_add_prints_the_token_once_and_stores_its_hash(tmp_path):
    result = runner.invoke(app, ["serve", "token", "add", "boat", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    token = result.output.strip()
    store = Store(tmp_path / "run")
    assert store.vehicle_of(token) == "boat" and store.vehicle_of(token + "x") is None
    with sqlite3.connect(tmp_path / "run" / DATABASE) as db:
        assert db.execute("SELECT name, hash FROM tokens").fetchall() == [("boat", token_hash(token))]
    assert token.encode() not in (tmp_path / "run" / DATABASE).read_bytes()
    assert runner.invoke(app, ["serve", "token", "add", "bad name!", str(tmp_path / "run")]).exit_code != 0
    listed = runner.invoke(app, ["serve", "token", "list", str(tmp_path / "run")])
    assert listed.exit_code == 0 and listed.output.startswith("boat\t") and token not in listed.output
    assert runner.invoke(app, ["serve", "token", "remove", "boat", str(tmp_path / "run")]).exit_code == 0
    assert store.vehicle_of(token) is None
    assert runner.invoke(app, ["serve", "token", "remove", "boat", str(tmp_path / "run")]).exit_code != 0


def test_tokens_that_expire_or_only_read(tmp_path):
    run = str(tmp_path / "run")
    made = runner.invoke(app, ["serve", "token", "add", "screen", run, "--expires-in", "12h", "--reads-only"])
    assert made.exit_code == 0, made.output
    holder = Store(run).holder(made.output.strip())
    assert holder.reads_only and 12 * 3600 - 60 < holder.expires - time.time() <= 12 * 3600
    assert Store(run).vehicle_of(made.output.strip()) is None  # a watcher's token never writes
    listed = runner.invoke(app, ["serve", "token", "list", run]).output
    assert "reads only" in listed and "expires 2" in listed
    for bad in ("0", "-3h", "soon", "infd"):
        refused = runner.invoke(app, ["serve", "token", "add", "boat", run, "--expires-in", bad])
        assert refused.exit_code != 0 and "--expires-in" in refused.output, bad


def test_serve_checks_its_options_and_warns_off_loopback(tmp_path, monkeypatch):
    import uvicorn

    calls = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **how: calls.append(how))
    run = str(tmp_path / "run")
    assert "--area" in runner.invoke(app, ["serve", run]).output
    how = ["--host", "0.0.0.0", "--port", "9", "--unit", "mg/L", *OPTION_ARGS]
    result = runner.invoke(app, ["serve", run, "--area", AREA_TEXT, *how])
    assert result.exit_code == 0, result.output
    assert "TLS" in result.output and calls == [{"host": "0.0.0.0", "port": 9, "log_level": "warning"}]
    assert ServiceConfig.load(tmp_path / "run").unit == "mg/L"
    assert "TLS" not in runner.invoke(app, ["serve", "--resume", run]).output
    refused = runner.invoke(app, ["serve", run, "--resume", "--area", AREA_TEXT])
    assert refused.exit_code != 0 and "--area" in refused.output
    assert len(calls) == 2
    assert ServiceConfig.load(tmp_path / "run").frame is None
    if importlib.util.find_spec("pyproj") is not None:
        placed = runner.invoke(app, ["serve", str(tmp_path / "placed"), "--area", AREA_TEXT, "--origin", "10.75,59.9"])
        assert placed.exit_code == 0, placed.output
        assert ServiceConfig.load(tmp_path / "placed").frame["crs"] == "EPSG:32632"
    for bad in ("10.75", "200,59.9", "east,north"):
        refused = runner.invoke(app, ["serve", str(tmp_path / "bad"), "--area", AREA_TEXT, "--origin", bad])
        assert refused.exit_code != 0 and "--origin" in refused.output, bad
    bad = runner.invoke(app, ["serve", str(tmp_path / "other"), "--area", AREA_TEXT, "-o", "no_such_option=1"])
    assert bad.exit_code != 0 and "no_such_option" in bad.output


def test_the_command_imports_the_web_stack_only_to_serve():
    probe = (
        "import sys, onlinegp.experiments.cli; print(sorted({'fastapi', 'uvicorn', 'starlette'} & set(sys.modules)))"
    )
    env = os.environ | {"PYTHONPATH": str(Path(onlinegp.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr


def test_request_limits_from_the_command_line(tmp_path, monkeypatch):
    import uvicorn

    apps = []
    monkeypatch.setattr(uvicorn, "run", lambda app, **how: apps.append(app))
    run = str(tmp_path / "run")
    limits = ["--limit", "requests_per_second=3", "--limit", "max_rows=500"]
    result = runner.invoke(app, ["serve", run, "--area", AREA_TEXT, *limits])
    assert result.exit_code == 0, result.output
    chosen = apps[0].state.service.limits
    assert (chosen.requests_per_second, chosen.max_rows, chosen.max_bytes) == (3, 500, 2_000_000)
    for bad, said in (("bogus=1", "unknown limit bogus"), ("max_rows=0", "positive"), ("max_rows", "KEY=VALUE")):
        refused = runner.invoke(app, ["serve", "--resume", run, "--limit", bad])
        assert refused.exit_code != 0 and said in refused.output, (bad, refused.output)
