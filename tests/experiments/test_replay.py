"""Replay of recorded surveys: log formats, and a mission's own survey replayed reproduces its metrics exactly."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from onlinegp.experiments.cli import app
from onlinegp.experiments.replay import Survey, load_survey, run_replay
from onlinegp.experiments.simulator.mission import MissionConfig
from onlinegp.experiments.simulator.run import run_mission

REFERENCE = Path(__file__).resolve().parents[3] / "shared" / "reference" / "poam" / "valley-ridges_seed0.npz"


def toy_survey(n: int = 120) -> Survey:
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (n, 2))
    grid = rng.uniform(-1, 1, (50, 2))
    f = lambda z: np.sin(3 * z[:, 0]) + z[:, 1]
    return Survey(x, f(x) + 0.05 * rng.standard_normal(n), np.array([40, 80, n]), grid, f(grid))


def test_csv_with_batches_or_timestamps_and_a_holdout(tmp_path):
    s = toy_survey()
    batch = np.repeat([0, 1, 2], 40)
    np.savetxt(
        tmp_path / "b.csv", np.column_stack([s.x, s.y, batch]), delimiter=",", header="east,north,y,batch", comments=""
    )
    np.savetxt(
        tmp_path / "t.csv",
        np.column_stack([s.x, s.y, np.arange(120) * 0.5]),
        delimiter=",",
        header="east,north,y,time",
        comments="",
    )
    np.savez(tmp_path / "truth.npz", eval_x=s.eval_x, eval_y=s.eval_y)
    by_batch = load_survey(tmp_path / "b.csv", eval_path=tmp_path / "truth.npz")
    assert by_batch.batch_end.tolist() == [40, 80, 120] and np.allclose(by_batch.x, s.x)
    by_time = load_survey(tmp_path / "t.csv", eval_path=tmp_path / "truth.npz", period=10.0)
    assert by_time.batch_end.tolist() == [20, 40, 60, 80, 100, 120]
    held = load_survey(tmp_path / "b.csv", holdout=0.25, seed=1)
    assert len(held.y) + len(held.eval_y) == 120 and 10 < len(held.eval_y) < 50
    assert held.batch_end[-1] == len(held.y) and (np.diff(held.batch_end) > 0).all()


def test_bad_logs_are_clear_errors(tmp_path):
    s = toy_survey()
    with pytest.raises(ValueError, match="batch_end"):
        Survey(s.x, s.y, np.array([80, 40]), s.eval_x, s.eval_y)
    np.savetxt(tmp_path / "b.csv", np.column_stack([s.x, s.y]), delimiter=",", header="a,b,y", comments="")
    with pytest.raises(ValueError, match="'batch'"):
        load_survey(tmp_path / "b.csv")
    np.savez(tmp_path / "nobatch.npz", x=s.x, y=s.y)
    with pytest.raises(ValueError, match="batch_end"):
        load_survey(tmp_path / "nobatch.npz")
    s.save(tmp_path / "ok.npz")
    with pytest.raises(ValueError, match="name the model"):
        run_replay(tmp_path / "ok.npz", [], tmp_path / "out")


def test_damaged_logs_are_errors_naming_the_file_before_any_run_folder(tmp_path, monkeypatch):
    """Issue 35, item 6: a truncated .npz gave a BadZipFile traceback, an empty one only "Aborted."."""
    from typer.testing import CliRunner

    from onlinegp.experiments.cli import app

    toy_survey().save(tmp_path / "ok.npz")
    whole = (tmp_path / "ok.npz").read_bytes()
    (tmp_path / "truncated.npz").write_bytes(whole[: len(whole) // 2])
    (tmp_path / "cut.npz").write_bytes(whole[:-30])
    (tmp_path / "empty.npz").write_bytes(b"")
    np.save(tmp_path / "array.npy", np.ones(3))
    (tmp_path / "array.npy").rename(tmp_path / "array.npz")
    monkeypatch.chdir(tmp_path)
    for name, message in [
        ("truncated.npz", "truncated or not an .npz"),
        ("cut.npz", "truncated or not an .npz"),
        ("array.npz", "truncated or not an .npz"),
        ("empty.npz", "is empty"),
    ]:
        with pytest.raises(ValueError, match=message) as err:
            load_survey(tmp_path / name)
        assert str(tmp_path / name) in str(err.value)
        result = CliRunner().invoke(app, ["replay", name, "--model", "osgpr", "-q"])
        text = " ".join(result.output.replace("│", " ").split())
        assert result.exit_code == 2 and name in text and message in text, result.output
    with pytest.raises(ValueError, match="cannot read the ground truth .*truncated.npz"):
        load_survey(tmp_path / "ok.npz", eval_path=tmp_path / "truncated.npz")
    assert not (tmp_path / "runs").exists()


def test_a_missing_batch_id_in_a_csv_names_its_line(tmp_path):
    """Issue 35, item 6: a NaN batch id split the stream into extra updates."""
    s = toy_survey()
    batch = np.repeat(np.arange(6.0), 20)
    batch[15] = np.nan
    np.savetxt(tmp_path / "b.csv", np.column_stack([s.x, s.y, batch]), delimiter=",", header="a,b,y,batch", comments="")
    with pytest.raises(ValueError, match=r"b.csv: missing or non-finite values on 1 line\(s\) \(17\)"):
        load_survey(tmp_path / "b.csv", holdout=0.2)
    dropped = load_survey(tmp_path / "b.csv", holdout=0.2, columns={"dropna": True})
    assert len(dropped.batch_end) <= 6 and "dropped 1 row" in dropped.meta["roles"]


def test_replay_compares_models_on_identical_data(tmp_path):
    s = toy_survey()
    s.save(tmp_path / "s.npz")
    results = run_replay(
        tmp_path / "s.npz",
        ["poam", "osgpr"],
        tmp_path / "out",
        options={"num_inducing": 20, "kernel": "rbf", "num_steps": 2},
    )
    assert [r["num_samples"] for r in results["poam"]] == [40, 80, 120] == [r["num_samples"] for r in results["osgpr"]]
    for name in ("poam", "osgpr"):
        assert (tmp_path / "out" / name / "metrics.csv").is_file()
    assert "| poam |" in (tmp_path / "out" / "comparison.md").read_text()
    assert set(json.loads((tmp_path / "out" / "summary.json").read_text())) == {"poam", "osgpr"}
    assert (tmp_path / "out" / "replay.png").is_file()


@pytest.mark.parametrize("profile", ["paper", "reference-code"])
def test_a_missions_survey_replayed_reproduces_its_metrics(tmp_path, profile):
    config = MissionConfig(budget=700, num_inducing=40, num_steps=2, model_options={"sketch": None}, profile=profile)
    result = run_mission(config, tmp_path / "mission", quiet=True)
    replayed = run_replay(tmp_path / "mission" / "survey.npz", [], tmp_path / "replay")["poam"]
    assert len(replayed) == len(result.rows) > 1
    for mine, theirs in zip(replayed, result.rows):
        assert mine["num_samples"] == theirs["num_samples"]
        for key in ("smse", "msll", "rmse", "nlpd"):
            assert mine[key] == theirs[key], (key, mine["epoch"])
        assert mine["recorded_smse"] == theirs["smse"]
    learnt = result.rows[-1]
    assert learnt["noise"] > 0 and learnt["outputscale"] > 0  # logged per epoch, user units
    assert 0 < learnt["lengthscale_min"] <= learnt["lengthscale_max"] < 60


@pytest.mark.skipif(not REFERENCE.is_file(), reason="needs ../shared/reference/poam (not in a user's clone)")
def test_reference_stream_reads_as_recorded():
    s = load_survey(REFERENCE)
    assert s.x.shape[1] == 2 and s.batch_end[-1] == len(s.y) and len(s.recorded["smse"]) == len(s.batch_end)
    assert s.eval_x.shape == (2500, 2)


def ardupilot_depth_log(path: Path, seconds: int = 300, dropouts: int = 40) -> None:
    """A sonar depth log as ArduPilot's DataFlash DPTH messages export to CSV: a millisecond clock, depth in metres,
    longitude and latitude in degrees x 1e7, 10 Hz, empty cells where the sonar dropped out; a boat on a lake at
    47.6° N driving lawnmower legs over about 80 x 60 m."""
    rng = np.random.default_rng(5)
    t = np.arange(0, seconds * 1000, 100)
    leg = (t // 60000) % 2
    east = np.where(leg == 0, 1, -1) * (40 - ((t % 60000) / 60000) * 80) + 40
    north = (t / (seconds * 1000)) * 60
    depth = 5 + 2 * np.sin(east / 15) + north / 30 + 0.05 * rng.standard_normal(len(t))
    lon = -122.3 + east / (111320 * np.cos(np.radians(47.6)))
    lat = 47.6 + north / 111132
    rows = [f"{ms},{d:.3f},{round(x * 1e7)},{round(y * 1e7)}" for ms, d, x, y in zip(t, depth, lon, lat)]
    for k in rng.choice(len(rows), dropouts, replace=False):
        rows[k] = f"{t[k]},,{round(lon[k] * 1e7)},{round(lat[k] * 1e7)}"
    path.write_text("timestamp(ms),DPTH.Depth,DPTH.Lng,DPTH.Lat\n" + "\n".join(rows) + "\n")


def test_a_vehicle_log_in_degrees_with_a_millisecond_clock(tmp_path, recwarn):
    """issue 53's lake log, small: --time-unit ms cuts 10 s batches, --lonlat projects to metres in the UTM zone."""
    pytest.importorskip("pyproj")
    log = tmp_path / "dpth.csv"
    ardupilot_depth_log(log)
    columns = {"target": "DPTH.Depth", "time": "timestamp(ms)", "dropna": True}
    geo = {"lonlat": ["DPTH.Lng", "DPTH.Lat"], "coord_scale": 1e-7}
    survey = load_survey(log, period=10, holdout=0.1, columns={**columns, **geo, "time_unit": "ms"})
    assert not [w for w in recwarn if "single sample" in str(w.message)]
    assert 28 <= len(survey.batch_end) <= 30 and survey.x.shape[1] == 2  # 300 s in 10 s batches
    span = survey.x.max(0) - survey.x.min(0)
    np.testing.assert_allclose(span, [80, 60], rtol=0.02)  # metres, not degrees x 1e7
    assert survey.meta["frame"]["crs"] == "EPSG:32610" and "metres east, north" in survey.meta["roles"]
    with pytest.warns(UserWarning, match=r"batches of 10 s hold a single sample.*--time-unit ms"):
        load_survey(log, period=10, holdout=0.1, columns={**columns, **geo})  # milliseconds read as seconds
    with pytest.raises(ValueError, match="--coord-scale 1e-7"):
        load_survey(log, period=10, holdout=0.1, columns={**columns, "lonlat": geo["lonlat"], "time_unit": "ms"})
    command = f"replay {log} --model osgpr -o num_inducing=30 --target DPTH.Depth --time timestamp(ms) --time-unit ms"
    command += (
        " --period 10 --lonlat DPTH.Lng,DPTH.Lat --coord-scale 1e-7 --dropna --holdout 0.1 --geotiff --quiet --out"
    )
    result = CliRunner().invoke(app, [*command.split(), str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["osgpr"]
    assert summary["final_smse"] < 0.2
    record = json.loads((tmp_path / "out" / "osgpr" / "config.json").read_text())
    assert record["frame"] == survey.meta["frame"] and record["numerics"] == "default"
    if importlib.util.find_spec("rasterio"):  # the map on the Earth: the UTM zone, the boat's first position
        import rasterio

        with rasterio.open(tmp_path / "out" / "osgpr" / "map.tif") as src:
            assert src.crs.to_epsg() == 32610 and src.count == 2
            west, south, east, north = src.bounds
            origin = survey.meta["frame"]["origin"]
            assert west == pytest.approx(origin[0] + survey.x[:, 0].min()) and east - west >= 79
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]  # no raw NumPy warnings


def test_a_held_back_survey_in_the_logs_format_is_the_ground_truth(tmp_path):
    """``--truth`` a second log: read with the same column options, its positions in the survey's frame (here the
    same samples in reverse order, so its own frame's origin, the first position, is elsewhere)."""
    pytest.importorskip("pyproj")
    log, back = tmp_path / "dpth.csv", tmp_path / "back.csv"
    ardupilot_depth_log(log, dropouts=0)
    header, *rows = log.read_text().splitlines()
    back.write_text("\n".join([header, *rows[::-1]]) + "\n")
    columns = {"target": "DPTH.Depth", "time": "timestamp(ms)", "time_unit": "ms"}
    columns |= {"lonlat": ["DPTH.Lng", "DPTH.Lat"], "coord_scale": 1e-7}
    survey = load_survey(log, back, period=10, columns=columns)
    np.testing.assert_allclose(survey.eval_x[::-1], survey.x, atol=1e-6)
    np.testing.assert_array_equal(survey.eval_y[::-1], survey.y)


def vehicle_log(tmp_path: Path, kind: str) -> tuple[Path, list[str], dict]:
    """The boat's log of tests/library/test_vehicle_logs.py in format ``kind``, its options and load_survey's columns."""
    from tests.library.test_vehicle_logs import BAGS, boat_dataflash, write_bag

    pytest.importorskip("pymavlink" if kind == "dataflash" else "rosbags")
    pytest.importorskip("pyproj")
    if kind == "dataflash":
        return boat_dataflash(tmp_path / "boat.bin"), ["--value", "DPTH.Depth"], {"value": "DPTH.Depth"}
    topics = {"value_topic": "/depth", "position_topic": "/fix"}
    return write_bag(tmp_path / BAGS[kind], kind), ["--value-topic", "/depth", "--position-topic", "/fix"], topics


@pytest.mark.parametrize("kind", ["dataflash", "ros2", "mcap", "ros1"])
def test_a_vehicles_own_log_replays_as_its_lonlat_csv(tmp_path, kind):
    """issue 53: a DataFlash .bin, a ROS 2 bag (sqlite3, MCAP) or a ROS 1 bag replays as the CSV of its track with
    --lonlat and --time would: the same metres, batches and frame."""
    from onlinegp import vehicle_logs

    log, how, columns = vehicle_log(tmp_path, kind)
    survey = load_survey(log, period=10, holdout=0.1, columns=columns)
    track = vehicle_logs.read_log(log, **columns)
    csv = tmp_path / "track.csv"
    np.savetxt(
        csv,
        np.column_stack([track.time, track.position, track.value]),
        delimiter=",",
        fmt="%.10f",
        header="t,lon,lat,value",
        comments="",
    )
    as_csv = load_survey(
        csv, period=10, holdout=0.1, columns={"time": "t", "lonlat": ["lon", "lat"], "target": "value"}
    )
    np.testing.assert_allclose(survey.x, as_csv.x, atol=1e-3)  # metres (the CSV rounds degrees to 1e-10)
    np.testing.assert_allclose(survey.y, as_csv.y, atol=1e-9)
    np.testing.assert_array_equal(survey.batch_end, as_csv.batch_end)
    assert survey.meta["frame"] == as_csv.meta["frame"] and survey.meta["frame"]["crs"] == "EPSG:32610"
    assert len(survey.batch_end) == 19  # 190 s in 10 s batches
    np.testing.assert_allclose(np.ptp(np.vstack([survey.x, survey.eval_x]), axis=0), [80, 60], atol=1.5)
    geotiff = ["--geotiff"] if importlib.util.find_spec("rasterio") else []
    command = ["replay", str(log), *how, "--period", "10", "--holdout", "0.1", "--model", "osgpr"]
    command += ["-o", "num_inducing=20", "-o", "num_steps=10", *geotiff, "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(app, command)
    assert result.exit_code == 0, result.output
    assert "metres east, north" in result.output and "interpolated in time" in result.output
    assert "absurd" not in result.output
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())["osgpr"]
    assert summary["final_smse"] < 0.3, summary
    record = json.loads((tmp_path / "out" / "osgpr" / "config.json").read_text())
    assert record["frame"] == survey.meta["frame"]
    if geotiff:
        import rasterio

        with rasterio.open(tmp_path / "out" / "osgpr" / "map.tif") as src:
            assert src.crs.to_epsg() == 32610 and src.count == 2


def test_a_vehicle_logs_options_are_not_a_csvs(tmp_path):
    log, how, columns = vehicle_log(tmp_path, "dataflash")
    with pytest.raises(ValueError, match="--lonlat, --coord-scale: a CSV's columns; boat.bin is a vehicle log"):
        load_survey(log, period=10, holdout=0.1, columns={**columns, "lonlat": ["a", "b"], "coord_scale": 1e-7})
    csv = tmp_path / "b.csv"
    csv.write_text("t,x,y,v\n0,1,2,3\n1,2,3,4\n")
    with pytest.raises(ValueError, match="--value: a vehicle log's"):
        load_survey(csv, period=10, holdout=0.5, columns={"time": "t", "value": "DPTH.Depth"})
    with pytest.raises(
        ValueError, match="no column option valu: a CSV's are target, inputs, .*; a vehicle log's value"
    ):
        load_survey(log, period=10, holdout=0.1, columns={"valu": "DPTH.Depth"})
    result = CliRunner().invoke(app, ["replay", str(log), "--period", "10", "--holdout", "0.1", "--value", "DPTH.Deep"])
    assert result.exit_code != 0 and "DPTH has no field Deep" in result.output
