"""The command line never loses a result: fresh default run directories, refusals before overwriting a run,
--resume/--force, the pilot-only warning, --option errors that name the option, resolved settings in config.json."""

import json
import os
import shutil

import numpy as np
import pytest
from typer.testing import CliRunner

import onlinegp
from onlinegp.experiments.cli import app
from onlinegp.experiments.simulator import run as mission_run
from onlinegp.experiments.simulator.mission import Mission, MissionConfig
from onlinegp.experiments.simulator.run import run_state
from onlinegp.io import RUN_LOCK, fcntl, fresh_directory

runner = CliRunner()
SMALL = ["--budget", "650", "--num-inducing", "20", "--num-steps", "1", "--seed", "3", "--quiet"]
NAME = "poam-valley-ridges-seed3"


def _text(result) -> str:
    """The output with rich's box drawing and line wrapping removed."""
    return " ".join(result.output.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """A finished mission written to the default directory (under a scratch working directory)."""
    root = tmp_path_factory.mktemp("cli")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(root)
        result = runner.invoke(app, ["mission", *SMALL])
    return root, result


def test_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0 and onlinegp.__version__ in result.output


def test_fresh_directory_never_reuses_one(tmp_path):
    assert fresh_directory(tmp_path / "runs", "a") == tmp_path / "runs" / "a"
    assert fresh_directory(tmp_path / "runs", "a") == tmp_path / "runs" / "a-2"
    (tmp_path / "runs" / "a-3").mkdir()
    assert fresh_directory(tmp_path / "runs", "a") == tmp_path / "runs" / "a-4"


def test_mission_writes_to_a_fresh_default_directory(finished, monkeypatch):
    root, result = finished
    assert result.exit_code == 0, result.output
    run = root / "runs" / "mission" / NAME
    assert f"run directory: runs/mission/{NAME}" in result.output and "warning" not in result.output
    assert run_state(run) == "finished"
    monkeypatch.chdir(root)
    (root / "runs" / "mission" / f"{NAME}-2").mkdir()  # taken, even empty
    again = runner.invoke(app, ["mission", *SMALL, "--stop-after-epochs", "1"])
    assert again.exit_code == 0, again.output
    assert f"run directory: runs/mission/{NAME}-3" in again.output
    assert run_state(root / "runs" / "mission" / f"{NAME}-3") == "checkpoint"
    assert run_state(run) == "finished"


def test_a_finished_mission_writes_its_map_as_a_geotiff(finished):
    """map.tif: mean and field std over the task extent at the cell centres, in local metres (no CRS)."""
    rasterio = pytest.importorskip("rasterio")
    root, result = finished
    run = root / "runs" / "mission" / NAME
    model = onlinegp.make_model("poam").load(str(run / "model.pt"))
    with rasterio.open(run / "map.tif") as tif:
        bands, transform, crs = tif.read(), tif.transform, tif.crs
    rows, cols = np.array([0, 7, bands.shape[1] - 1]), np.array([3, 0, bands.shape[2] - 1])
    east, north = rasterio.transform.xy(transform, rows, cols)  # cell centres
    prediction = model.predict(np.column_stack([east, north]))
    assert crs is None and bands.shape[0] == 2
    np.testing.assert_allclose(bands[0, rows, cols], prediction.mean.numpy(), rtol=1e-12)
    np.testing.assert_allclose(bands[1, rows, cols], prediction.var_f.sqrt().numpy(), rtol=1e-12)


def test_a_finished_run_is_refused_unless_forced_or_resumed(finished, tmp_path):
    root, _ = finished
    run = root / "runs" / "mission" / NAME
    stamp = (run / "metrics.json").stat().st_mtime_ns
    refused = runner.invoke(app, ["mission", *SMALL, "--out", str(run)])
    assert refused.exit_code == 2 and "finished mission" in _text(refused) and "--force" in _text(refused)
    resumed = runner.invoke(app, ["mission", *SMALL, "--out", str(run), "--resume"])
    assert resumed.exit_code == 0 and "already complete" in _text(resumed), resumed.output
    assert (run / "metrics.json").stat().st_mtime_ns == stamp  # not recomputed
    both = runner.invoke(app, ["mission", *SMALL, "--out", str(run), "--resume", "--force"])
    assert both.exit_code == 2 and (run / "metrics.json").stat().st_mtime_ns == stamp
    # --force starts over, and a forced run that stops early leaves no outputs of the old one behind
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    forced = runner.invoke(app, ["mission", *SMALL, "--out", str(copy), "--force", "--stop-after-epochs", "1"])
    assert forced.exit_code == 0, forced.output
    assert run_state(copy) == "checkpoint" and not (copy / "model.pt").exists()


def test_resume_writes_the_final_files_a_killed_mission_left_unwritten(finished, tmp_path):
    """Issue 35, item 5: a mission killed after model.pt but before metrics.json was "already complete"."""
    root, _ = finished
    run = root / "runs" / "mission" / NAME
    files = ("metrics.json", "survey.npz", "figures/ground_truth.png")
    assert all((run / name).is_file() for name in files)
    killed = tmp_path / "killed"
    shutil.copytree(run, killed)
    (killed / "metrics.json").unlink()
    (killed / "survey.npz").unlink()
    shutil.rmtree(killed / "figures")
    (killed / ".survey.npz.3hx8_q0w.tmp").write_bytes(b"")
    assert run_state(killed) == "checkpoint"
    refused = runner.invoke(app, ["mission", *SMALL, "--out", str(killed)])
    assert refused.exit_code == 2 and "unfinished mission" in _text(refused)
    resumed = runner.invoke(app, ["mission", *SMALL, "--out", str(killed), "--resume"])
    assert resumed.exit_code == 0 and "already complete" not in _text(resumed), resumed.output
    assert run_state(killed) == "finished" and all((killed / name).is_file() for name in files)
    assert json.loads((killed / "metrics.json").read_text()) == json.loads((run / "metrics.json").read_text())
    assert not list(killed.glob(".*.tmp"))


@pytest.mark.skipif(fcntl is None, reason="run directories are locked on POSIX only")
def test_a_mission_into_a_directory_another_run_is_writing_to_is_refused(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    fd = os.open(out / RUN_LOCK, os.O_RDWR | os.O_CREAT)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # as the other run's process holds it
        result = runner.invoke(app, ["mission", *SMALL, "--out", str(out)])
    finally:
        os.close(fd)
    assert result.exit_code == 2 and "in use by another run" in _text(result), result.output
    assert [p.name for p in out.iterdir()] == [RUN_LOCK]


def test_an_unfinished_run_needs_resume_or_force(tmp_path):
    out = tmp_path / "run"
    stopped = runner.invoke(app, ["mission", *SMALL, "--out", str(out), "--stop-after-epochs", "1"])
    assert stopped.exit_code == 0 and run_state(out) == "checkpoint", stopped.output
    refused = runner.invoke(app, ["mission", *SMALL, "--out", str(out)])
    assert refused.exit_code == 2
    assert "unfinished mission" in _text(refused) and "--resume" in _text(refused) and "--force" in _text(refused)


def test_nothing_to_resume_is_a_usage_error(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    for out in (empty, tmp_path / "missing"):
        result = runner.invoke(app, ["mission", *SMALL, "--out", str(out), "--resume"])
        compact = "".join(_text(result).split())  # rich may wrap a long path anywhere
        assert result.exit_code == 2 and f"nothingtoresumein{out}" in compact, result.output
    assert not (tmp_path / "missing").exists() and not any(empty.iterdir())
    no_out = runner.invoke(app, ["mission", *SMALL, "--resume"])
    assert no_out.exit_code == 2 and "--out" in _text(no_out)


def test_pilot_size_is_computed_from_the_mission(finished):
    root, _ = finished
    rows = json.loads((root / "runs" / "mission" / NAME / "metrics.json").read_text())["rows"]
    mission = Mission(MissionConfig(budget=650, num_inducing=20, num_steps=1))
    assert mission.pilot_size() == rows[0]["num_samples"] == 597
    assert mission.num_samples == 0 and mission.vehicle is None  # nothing driven
    assert Mission(MissionConfig(budget=650, num_inducing=20, init="random")).pilot_size() == 600


@pytest.mark.parametrize("budget, warned", [("597", True), ("400", True), ("598", False)])
def test_a_pilot_only_budget_is_a_warning(budget, warned, tmp_path, monkeypatch):
    def fake_run_mission(mission, out, **kwargs):
        return mission_run.MissionResult([{"epoch": 0}], out, {}, completed=False)

    monkeypatch.setattr(mission_run, "run_mission", fake_run_mission)
    args = [*SMALL, "--budget", budget, "--out", str(tmp_path / "run")]
    result = runner.invoke(app, ["mission", *args])
    assert result.exit_code == 0, result.output
    assert ("pilot survey only" in _text(result)) == warned


@pytest.mark.parametrize(
    "options, messages",
    [
        (["sketch=foo"], ["--option sketch=foo: invalid literal"]),
        (["lr=0.01", "sketch=foo"], ["--option sketch=foo:"]),
        (["sketch=foo", "bar=2"], ["--option sketch=foo: invalid literal", "--option bar=2: model 'poam' does not"]),
    ],
)
def test_option_errors_name_the_option(options, messages, tmp_path):
    out = tmp_path / "run"
    args = [arg for item in options for arg in ("--option", item)]
    result = runner.invoke(app, ["mission", *SMALL, "--out", str(out), *args])
    assert result.exit_code == 2, result.output
    for message in messages:
        assert message in _text(result)
    assert "lr=0.01" not in _text(result)
    assert not out.exists()


def test_config_records_the_resolved_model(finished):
    root, _ = finished
    info = json.loads((root / "runs" / "mission" / NAME / "config.json").read_text())
    model = info["model"]
    assert model["class"] == "POAM" and model["num_inducing"] == 20 and model["num_steps"] == 1
    assert model["kernel"] == "AttentiveKernel"
    options = model["options"]
    assert options["num_inducing"] == 20 and options["training"]["steps"] == 1 and options["kernel"] == "ak"
    assert options["noise"] == 1.0 and options["sketch"] == 64 and options["seed"] == 3
    assert info["config"]["num_inducing"] == 20 and info["config"]["kernel"] == "ak"  # the model's default, used
    assert info["model_defaults"] == ["kernel"]


def test_replay_writes_to_a_fresh_default_directory(finished, monkeypatch):
    root, _ = finished
    monkeypatch.chdir(root)
    result = runner.invoke(app, ["replay", f"runs/mission/{NAME}/survey.npz", "--quiet"])
    assert result.exit_code == 0, result.output
    assert f"runs/replay/{NAME}" in result.output and (root / "runs" / "replay" / NAME / "comparison.md").is_file()


def test_stream_writes_to_a_fresh_default_directory(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = ["stream", "--dataset", "synthetic2", "--model", "oips", "--quiet", "-o", "num_steps=2"]
    for name in ("oips-synthetic2-seed0", "oips-synthetic2-seed0-2"):
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        assert f"runs/stream/{name}" in result.output
        assert (tmp_path / "runs" / "stream" / name / "metrics.json").is_file()
    bad = runner.invoke(app, ["stream", "--dataset", "nope", "--quiet"])
    assert bad.exit_code == 2 and sorted(p.name for p in (tmp_path / "runs" / "stream").iterdir()) == [
        "oips-synthetic2-seed0",
        "oips-synthetic2-seed0-2",
    ]


def test_mission_help_states_the_dem_conventions():
    result = runner.invoke(app, ["mission", "--help"], terminal_width=200)
    text = _text(result)
    assert "columns are x" in text and "row 0 is the south edge" in text
    for flag in ("--extent", "--cell-size", "--array", "--first-row", "--nodata", "--values", "--noise-std", "--speed"):
        assert flag in text, flag


def test_dem_file_options_on_the_command_line(tmp_path):
    yy, xx = np.mgrid[0:40, 0:60]
    dem = 300.0 + 20.0 * np.sin(xx / 7.0) + 0.8 * yy
    dem[3, 4] = -9999.0
    np.savez(tmp_path / "two.npz", elev=dem, slope=np.gradient(dem)[0])
    out = tmp_path / "run"
    args = ["mission", "--env", str(tmp_path / "two.npz"), "--budget", "100", "--num-inducing", "10"]
    ambiguous = runner.invoke(app, [*args, "--out", str(out)])
    assert ambiguous.exit_code == 2 and "several 2-D arrays" in _text(ambiguous) and "--array" in _text(ambiguous)
    assert "elev" in _text(ambiguous) and "slope" in _text(ambiguous) and not out.exists()
    native = ["--array", "elev", "--extent", "native", "--cell-size", "0.5", "--nodata", "-9999", "--out", str(out)]
    result = runner.invoke(app, [*args, "--num-steps", "0", *native])
    assert result.exit_code == 0, result.output
    text = _text(result)
    assert "warning: field 'two': filled 1 no-data cell(s)" in text and "nearest valid cell" in text
    assert "field two: loaded from" in text and "row 0 = south edge" in text and "x [0, 30] m, y [0, 20] m" in text
    info = json.loads((out / "config.json").read_text())
    assert info["field"]["extent"] == [0.0, 30.0, 0.0, 20.0] and info["field"]["unit"] == "m"
    assert info["config"]["field_options"] == {"extent": "native", "cell_size": "0.5", "array": "elev", "nodata": -9999}
    bundled = runner.invoke(app, ["mission", "--extent", "native", "--out", str(tmp_path / "b")])
    assert bundled.exit_code == 2 and "applies to DEM files" in _text(bundled)


def test_a_deprecated_option_warns_when_given_and_its_record_reads_silently():
    """``--option pretrain_steps=20`` warns (FutureWarning) with the spelling that replaces it; the mission's config,
    its record, keeps what was given and builds its model without another warning."""
    import warnings

    from onlinegp.experiments.cli import parse_model_options
    from onlinegp.experiments.simulator.mission import build_model
    from onlinegp.experiments.simulator.mission_settings import mission_config

    with pytest.warns(
        FutureWarning, match=r"pretrain_steps=20 is deprecated.*training=\{'pretrain': \{'steps': 20\}\}"
    ):
        options = parse_model_options(["pretrain_steps=20"])
    config = mission_config(model_options=options, budget=100)
    assert config.model_options == {"pretrain_steps": 20}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        record = MissionConfig.from_record(config.resolved().to_dict())
        assert build_model(record.resolved()).options()["training"].pretrain.steps == 20
