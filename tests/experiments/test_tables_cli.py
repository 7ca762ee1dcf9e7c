"""One CSV reader for ``stream`` and ``replay`` (issue 36): roles said before a run, an ambiguous target refused,
missing values by line, range checks and option errors before any output, no run overwritten without ``--force``."""

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from onlinegp.experiments.cli import app
from onlinegp.tables import read_table

runner = CliRunner()


@pytest.fixture
def survey(tmp_path):
    """A log with columns x, y (northing), value (the target), time: the issue's layout."""
    rng = np.random.default_rng(0)
    t = np.arange(0, 60, 0.5)
    x = rng.uniform(0, 50, (t.size, 2))
    v = np.sin(x[:, 0] / 9) + 0.1 * rng.standard_normal(t.size)
    path = tmp_path / "s.csv"
    np.savetxt(path, np.column_stack([x, v, t]), delimiter=",", header="x,y,value,time", comments="")
    return path


def invoke(*args: str):
    return runner.invoke(app, [str(a) for a in args])


def test_reader_header_optional_and_missing_values_by_line(tmp_path):
    (tmp_path / "n.csv").write_text("1,2,3\n4,,6\n7,8,9\n")
    with pytest.raises(ValueError, match=r"1 line\(s\) \(2\).*--dropna"):
        read_table(tmp_path / "n.csv")
    table = read_table(tmp_path / "n.csv", dropna=True)
    assert table.y.tolist() == [3, 9] and table.roles().startswith("inputs column 0, column 1; target column 2")


def test_replay_asks_for_the_target_then_prints_the_roles(survey, tmp_path):
    common = ("replay", survey, "--period", 10, "--holdout", 0.2, "--model", "osgpr", "-q")
    result = invoke(*common, "--out", tmp_path / "a")
    assert result.exit_code == 2 and "--target value" in result.output and not (tmp_path / "a").exists()
    result = invoke(*common, "--target", "value", "--out", tmp_path / "a")
    assert result.exit_code == 0, result.output
    assert "inputs x, y; target value; time column time" in result.output


def test_stream_reads_a_header_and_named_columns(survey, tmp_path):
    result = invoke(
        "stream",
        "--dataset",
        survey,
        "--model",
        "osgpr",
        "--batches",
        2,
        "--target",
        "value",
        "--inputs",
        "0,y",
        "--out",
        tmp_path / "s",
        "-q",
    )
    assert result.exit_code == 0, result.output
    assert "inputs x, y; target value" in result.output


def test_stream_reads_longitude_latitude_and_records_the_frame(tmp_path):
    """``stream --lonlat --coord-scale --time-unit``: degrees x 1e7 projected to metres, the frame in config.json."""
    rng = np.random.default_rng(0)
    lon, lat = 11.5 + rng.uniform(0, 1e-3, 80), 48.1 + rng.uniform(0, 1e-3, 80)
    rows = np.column_stack([np.arange(80) * 100, np.round(lon * 1e7), np.round(lat * 1e7), np.sin(lon * 5e3)])
    path = tmp_path / "log.csv"
    np.savetxt(path, rows, delimiter=",", header="ms,Lng,Lat,depth", comments="", fmt=["%d", "%d", "%d", "%.6f"])
    args = ("--lonlat", "Lng,Lat", "--coord-scale", "1e-7", "--time-unit", "ms", "--target", "depth")
    result = invoke("stream", "--dataset", path, "--model", "osgpr", "--batches", 2, *args, "--out", tmp_path / "s")
    assert result.exit_code == 0, result.output
    config = json.loads((tmp_path / "s" / "config.json").read_text())
    assert config["frame"]["crs"] == "EPSG:32632" and config["dataset_options"]["coord_scale"] == 1e-7
    bundled = invoke("stream", "--dataset", "concrete", "--lonlat", "a,b")
    assert bundled.exit_code == 2 and "for a CSV --dataset" in bundled.output


@pytest.mark.parametrize(
    "args, message",
    [
        (("--holdout", 1.5), "--holdout"),
        (("--period", 0), "--period"),
        (("--option", "num_inducing=abc"), "--option num_inducing=abc: num_inducing must be a positive integer"),
    ],
)
def test_replay_checks_options_before_any_output(survey, tmp_path, args, message):
    base = {"--period": 10, "--holdout": 0.2}
    base.update({k: v for k, v in zip(args[::2], args[1::2]) if k in base})
    extra = [a for k, v in zip(args[::2], args[1::2]) if k not in base for a in (k, v)]
    flat = [a for kv in base.items() for a in kv]
    result = invoke("replay", survey, "--target", "value", "--model", "osgpr", *flat, *extra, "--out", tmp_path / "o")
    assert result.exit_code == 2 and message in " ".join(result.output.split()).replace("│ ", "").replace(" │", "")
    assert "output directory" not in result.output and not (tmp_path / "o").exists()


def test_replay_scales_inputs_on_the_whole_log(survey):
    from onlinegp.experiments.replay import load_survey

    whole = read_table(survey, target="value").x
    loaded = load_survey(survey, holdout=0.2, period=10, columns={"target": "value"})
    assert np.array_equal(loaded.meta["x_bounds"], [whole.min(0), whole.max(0)])


def test_no_command_overwrites_another_run_without_force(survey, tmp_path):
    out = tmp_path / "run"
    stream = ("stream", "--dataset", survey, "--model", "osgpr", "--batches", 2, "--target", "value", "-q")
    replay = ("replay", survey, "--period", 10, "--holdout", 0.2, "--model", "osgpr", "--target", "value", "-q")
    assert invoke(*stream, "--out", out).exit_code == 0
    for command in (stream, replay, ("mission", "--budget", 50, "-q"), ("bench", "vips-synthetic", "-q")):
        result = invoke(*command, "--out", out)
        assert result.exit_code == 2 and "--force" in result.output, command
    (out / "stale").mkdir()
    result = invoke(*replay, "--out", out, "--force")
    assert result.exit_code == 0, result.output
    assert not (out / "stale").exists() and not (out / "metrics.json").exists() and (out / "comparison.md").exists()
    assert invoke(*replay, "--out", out).exit_code == 2  # another replay is another run
