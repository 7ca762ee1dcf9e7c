"""End-to-end missions through the CLI: determinism, resume after interruption, outputs, validation before work."""

import csv
import json
import math
import warnings

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from onlinegp import metrics
from onlinegp.experiments.cli import app
from onlinegp.experiments.simulator.mission import Mission, MissionConfig, build_model
from onlinegp.experiments.simulator.run import open_mission, run_mission

runner = CliRunner()
BASE = ["mission", "--budget", "700", "--num-inducing", "60", "--num-steps", "2", "--seed", "3"]
METRIC_COLUMNS = ("epoch", "num_samples", "num_inducing", "smse", "msll", "rmse", "nlpd", "mae")


def _invoke(*args):
    result = runner.invoke(app, [*BASE, *args])
    return result


def _text(result) -> str:
    """The output with rich's box drawing and line wrapping removed."""
    return " ".join(result.output.replace("│", " ").replace("╭", " ").replace("╰", " ").split())


def _rows(out):
    with open(out / "metrics.csv") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("missions")
    a, b, c = root / "a", root / "b", root / "c"
    first = _invoke("--out", str(a), "--quiet")
    stopped = _invoke("--out", str(b), "--quiet", "--stop-after-epochs", "2")
    stopped_rows = _rows(b)
    stopped_files = sorted(p.name for p in b.iterdir())
    resumed = _invoke("--out", str(b), "--resume")
    again = _invoke("--out", str(c), "--quiet", "--animate")
    return {
        "a": a,
        "b": b,
        "c": c,
        "first": first,
        "stopped": stopped,
        "stopped_rows": stopped_rows,
        "stopped_files": stopped_files,
        "resumed": resumed,
        "again": again,
    }


def test_runs_succeed_and_write_outputs(runs):
    for key in ("first", "stopped", "resumed", "again"):
        assert runs[key].exit_code == 0, runs[key].output
    a = runs["a"]
    for name in ("config.json", "metrics.csv", "metrics.json", "model.pt", "checkpoint.pt"):
        assert (a / name).is_file(), name
    for name in ("ground_truth", "mean", "std", "abs_error", "lengthscale", "inducing", "metrics"):
        assert (a / "figures" / f"{name}.png").stat().st_size > 1000, name
    assert (runs["c"] / "mission.gif").stat().st_size > 1000
    config = json.loads((a / "config.json").read_text())
    assert config["config"]["env"] == "valley-ridges" and config["config"]["budget"] == 700
    summary = json.loads((a / "metrics.json").read_text())["summary"]
    assert summary["final"]["num_samples"] == 700
    assert "figures" in runs["resumed"].output and "SMSE" in runs["resumed"].output


def test_same_seed_gives_identical_metrics(runs):
    ra, rc = _rows(runs["a"]), _rows(runs["c"])
    assert len(ra) >= 3
    assert [[r[k] for k in METRIC_COLUMNS] for r in ra] == [[r[k] for k in METRIC_COLUMNS] for r in rc]
    assert int(ra[-1]["num_samples"]) == 700 and float(ra[-1]["smse"]) < 1.0


def test_resume_after_interruption_matches_uninterrupted(runs):
    assert len(runs["stopped_rows"]) == 2 and "model.pt" not in runs["stopped_files"]
    assert "checkpoint.pt" in runs["stopped_files"]
    assert "resuming" in runs["resumed"].output
    ra, rb = _rows(runs["a"]), _rows(runs["b"])
    assert [[r[k] for k in METRIC_COLUMNS] for r in ra] == [[r[k] for k in METRIC_COLUMNS] for r in rb]


def test_no_sample_lost_and_final_metrics_reproducible_from_files(runs):
    a = runs["a"]
    ckpt = torch.load(a / "checkpoint.pt", weights_only=False)
    assert ckpt["X"].shape == (700, 2) and ckpt["y"].shape == (700,)
    config = MissionConfig.from_record(ckpt["config"])
    model = build_model(config)
    model.load_state_dict(torch.load(a / "model.pt", weights_only=False))
    assert model.num_data == 700
    mission = Mission(config)
    pred = model.predict(torch.from_numpy(mission.eval_x))
    m = metrics.all_metrics(mission.eval_y, pred.mean, pred.var_y, ckpt["y"].mean(), ckpt["y"].std())
    final = _rows(a)[-1]
    for k, v in m.items():
        assert float(final[k]) == pytest.approx(v, rel=1e-12, abs=1e-12)
    # the samples are noisy readings of the field at the visited locations (std 1)
    resid = ckpt["y"] - mission.field(ckpt["X"])
    assert abs(resid.mean()) < 0.2 and resid.std() == pytest.approx(1.0, abs=0.1)


def test_different_seed_differs():
    one = Mission(MissionConfig(budget=700, num_inducing=30, num_steps=1, seed=3))
    two = Mission(MissionConfig(budget=700, num_inducing=30, num_steps=1, seed=4))
    r1, r2 = one.step(), two.step()
    assert r1["num_samples"] == r2["num_samples"]  # same Bézier survey
    assert r1["smse"] != r2["smse"]  # different noise and model initialisation


@pytest.mark.parametrize("every", [0.0, math.inf])
def test_checkpoints_every_interval_and_at_the_last_epoch_resume_exactly(tmp_path, monkeypatch, every):
    """Checkpoints (with metrics.csv) after every epoch with a zero interval, else only at the last epoch of a
    call; a mission resumed from the checkpoint of a stopped call ends with the uninterrupted metrics."""
    saves = []
    save = Mission.save
    monkeypatch.setattr(Mission, "save", lambda self, path: saves.append(self.epoch) or save(self, path))
    config = dict(budget=700, num_inducing=30, num_steps=1, seed=3)
    whole = run_mission(MissionConfig(**config), tmp_path / "whole", quiet=True, checkpoint_every=every)
    epochs = len(whole.rows)
    assert saves == (list(range(epochs)) if every == 0 else [epochs - 1])
    saves.clear()
    out = tmp_path / "parts"
    run_mission(MissionConfig(**config), out, quiet=True, stop_after_epochs=2, checkpoint_every=every)
    assert saves == ([0, 1] if every == 0 else [1]) and len(_rows(out)) == 2
    resumed = run_mission(open_mission(MissionConfig(**config), out, resume=True), out, quiet=True)
    assert [[r[k] for k in METRIC_COLUMNS] for r in resumed.rows] == [
        [r[k] for k in METRIC_COLUMNS] for r in whole.rows
    ]


def test_resume_with_other_options_is_refused(runs):
    result = runner.invoke(app, [*BASE[:-2], "--seed", "5", "--out", str(runs["a"]), "--resume"])
    assert result.exit_code == 2 and "different settings" in _text(result)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--budget", "0"], "budget"),
        (["--budget", "-5"], "budget"),
        (["--env", "atlantis"], "unknown environment"),
        (["--model", "nope"], "unknown model"),
        (["--planner", "greedy"], "unknown planner"),
        (["--kernel", "nope"], "unknown kernel"),
        (["--init", "spiral"], "init"),
        (["--model", "exact", "--num-inducing", "5"], "does not accept"),
        (["--option", "foo=1"], "does not accept"),
        (["--option", "sketch"], "KEY=VALUE"),
        (["--option", "sketch=0"], "sketch"),
    ],
)
def test_bad_options_fail_before_work(tmp_path, args, message):
    out = tmp_path / "run"
    result = runner.invoke(app, ["mission", "--out", str(out), "--quiet", *args])
    assert result.exit_code == 2, result.output
    assert message in _text(result)
    assert not out.exists()


def test_bad_field_files_fail_before_work(tmp_path):
    (tmp_path / "text.npy").write_text("hello")
    np.save(tmp_path / "vec.npy", np.arange(10.0))
    np.save(tmp_path / "flat.npy", np.ones((8, 8)))
    for name, message in (
        ("text.npy", "cannot read"),
        ("vec.npy", "2-D"),
        ("flat.npy", "constant"),
        ("missing.npz", "does not exist"),
    ):
        out = tmp_path / f"run-{name}"
        result = runner.invoke(app, ["mission", "--env", str(tmp_path / name), "--out", str(out)])
        assert result.exit_code == 2 and message in _text(result), result.output
        assert not out.exists()


def test_custom_field_file_runs(tmp_path):
    yy, xx = np.mgrid[0:64, 0:64]
    np.save(tmp_path / "bumps.npy", np.sin(xx / 6.0) * np.cos(yy / 9.0))
    out = tmp_path / "run"
    result = runner.invoke(
        app,
        [
            "mission",
            "--env",
            str(tmp_path / "bumps.npy"),
            "--budget",
            "650",
            "--quiet",
            "--model",
            "ovc++",
            "--num-inducing",
            "40",
            "--num-steps",
            "1",
            "--planner",
            "lawnmower",
            "--init",
            "random",
            "--out",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    rows = _rows(out)
    assert rows[0]["num_samples"] == "600" and rows[-1]["num_samples"] == "650"


def test_listings():
    envs = runner.invoke(app, ["mission", "--list-envs"])
    assert envs.exit_code == 0 and "valley-ridges" in envs.output and "seafloor" in envs.output
    models = runner.invoke(app, ["mission", "--list-models"])
    assert models.exit_code == 0 and "poam" in models.output


def test_model_options_from_the_command_line():
    from onlinegp.experiments.cli import parse_model_options

    assert parse_model_options(["sketch=None", "lr=0.005", "inducing=vips", "batch_size = 128"]) == {
        "sketch": None,
        "lr": 0.005,
        "inducing": "vips",
        "batch_size": 128,
    }
    assert parse_model_options(None) == {}


def _tilted_dem(path):
    yy, xx = np.mgrid[0:40, 0:60]
    np.save(path, 300.0 + 20.0 * np.sin(xx / 7.0) + 0.8 * yy)  # metres; rises northwards
    return path


def test_mission_over_a_dem_in_its_own_extent_and_units(tmp_path):
    config = MissionConfig(
        env=str(_tilted_dem(tmp_path / "dem.npy")),
        field_options={"extent": "native", "cell_size": 0.5},
        budget=120,
        num_inducing=10,
        num_steps=0,
        noise_std=0.1,
        speed=2.0,
    ).resolved()
    assert config.task_extent == pytest.approx((20 / 62, 30 - 20 / 62, 20 / 62, 20 - 20 / 62))
    mission = Mission(config)
    assert mission.field.extent == (0.0, 30.0, 0.0, 20.0) and mission.field.unit == "m"
    mission.step()
    xmin, xmax, ymin, ymax = config.task_extent
    assert mission.X[:, 0].min() > xmin - 0.5 and mission.X[:, 0].max() < xmax + 0.5
    assert mission.X[:, 1].min() > ymin - 0.5 and mission.X[:, 1].max() < ymax + 0.5
    assert np.std(mission.y - mission.field(mission.X)) == pytest.approx(0.1, rel=0.3)  # noise in metres
    step = np.hypot(*np.diff(mission.X, axis=0).T)
    assert step.max() == pytest.approx(0.8, abs=0.01)  # 2 m/s over 4 control ticks (3 Hz on a 10 Hz clock)
    assert 300 < mission.y.mean() < 340  # elevation kept in metres, not scaled to 0-255
    saved = config.to_dict()
    assert saved["field_options"] == {"extent": "native", "cell_size": 0.5} and saved["speed"] == 2.0


def test_settings_added_later_stay_out_of_default_configs():
    """Sweep hashes and checkpoints of missions recorded before field options, noise and speed existed still match."""
    saved = MissionConfig().resolved().to_dict()
    assert not {"field_options", "noise_std", "speed"} & set(saved)
    assert saved["task_extent"] == [-30.0, 30.0, -30.0, 30.0]


def test_a_config_reads_no_file_and_records_only_when_resolved(monkeypatch):
    from onlinegp.experiments.simulator import mission as mission_module

    def no_file(*args, **kwargs):
        raise AssertionError("a config read its field")

    monkeypatch.setattr(mission_module, "load_field", no_file)
    config = MissionConfig(env="/nowhere/dem.tif", robots=2, fleet="decentralised")
    assert config.task_extent is None and config.comm_radius is None
    with pytest.raises(ValueError, match="resolved"):
        config.to_dict()
    monkeypatch.undo()
    given = MissionConfig(task_extent=(0, 10, 0, 20), robots=2, fleet="decentralised").resolved()
    assert given.task_extent == (0.0, 10.0, 0.0, 20.0) and given.comm_radius == 5.0  # half the shorter side


def test_records_of_every_schema_are_read_back():
    from onlinegp.experiments.simulator.mission import ADDED_IN, SCHEMA

    fleet = MissionConfig(robots=3, fleet="decentralised", noise_std=0.5).resolved()
    assert MissionConfig.from_record(fleet.to_dict()) == fleet
    first = MissionConfig().resolved().to_dict()  # a default mission's record is the same under every schema
    assert not set(first) & set(ADDED_IN)
    assert MissionConfig.from_record(first, schema=1) == MissionConfig().resolved()
    with pytest.raises(ValueError, match=r"schema 1.*noise_std"):
        MissionConfig.from_record({**first, "noise_std": 0.5}, schema=1)
    with pytest.raises(ValueError, match="upgrade"):
        MissionConfig.from_record(first, schema=SCHEMA + 1)
    with pytest.raises(ValueError, match="warp"):
        MissionConfig.from_record({**first, "warp": 9})


def test_figures_name_model_environment_and_units(tmp_path, monkeypatch):
    from onlinegp.experiments import plots
    from onlinegp.experiments.simulator.run import write_figures

    figures = {}

    def record(fig, path, title, dpi):
        figures[path.name] = (
            fig._suptitle.get_text() if fig._suptitle else title or "",
            [ax.get_title() for ax in fig.axes],
            [ax.get_ylabel() for ax in fig.axes],
        )
        plots.plt.close(fig)
        return path

    monkeypatch.setattr(plots, "_finish", record)
    mission = Mission(MissionConfig(env="seafloor", budget=100, num_inducing=10, num_steps=0))
    mission.step()
    write_figures(mission, tmp_path)
    assert {"ground_truth.png", "mean.png", "std.png", "abs_error.png", "metrics.png"} <= set(figures)
    for name, (suptitle, _, _) in figures.items():
        assert "poam" in suptitle and "seafloor" in suptitle, name
    assert "elevation (scaled 0-255)" in figures["ground_truth.png"][2]
    assert "predictive std (scaled 0-255)" in figures["std.png"][2]
    if "lengthscale.png" in figures:
        assert "length-scale (m)" in figures["lengthscale.png"][2]
    titles = figures["metrics.png"][1]
    assert {"SMSE", "MSLL", "update time (s)", "prediction time (s)"} <= set(titles)


def test_config_json_records_the_model_defaults_it_used():
    from onlinegp.experiments.simulator.run import _recorded_config

    config = MissionConfig(budget=100, num_steps=1).resolved()
    recorded = _recorded_config(config, build_model(config))
    assert recorded["config"]["num_inducing"] == 500 and recorded["config"]["kernel"] == "ak"
    assert recorded["config"]["num_steps"] == 1 and recorded["model_defaults"] == ["num_inducing", "kernel"]
    assert config.num_inducing is None  # the mission itself still leaves them to the model


def test_a_vehicle_too_fast_to_turn_onto_its_waypoints_is_a_clear_error(tmp_path):
    dem = str(_tilted_dem(tmp_path / "dem.npy"))
    fast = MissionConfig(env=dem, field_options={"extent": "native", "cell_size": 25}, speed=60.0, budget=100)
    with pytest.raises(ValueError, match="circle of 60 m radius.*lower --speed or raise --max-turn-rate"):
        Mission(fast).pilot_size()
    assert Mission(MissionConfig(env=dem, field_options=fast.field_options, speed=10.0, budget=100)).pilot_size() > 0


def test_missions_run_poam_without_pretraining_unless_asked():
    """The pilot survey is not a batch to pre-train on (benchmarks/studies/results/poam_pretrain_study.json): POAM's family
    runs the paper's Algorithm 1 in a mission, other models keep their defaults, and an explicit option wins. A
    mission's config is its record: the flat keywords of earlier versions in it are read without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert build_model(MissionConfig(budget=100).resolved()).options()["training"].pretrain.steps == 0
        ovc = build_model(MissionConfig(budget=100, model="ovc++").resolved())
        assert ovc.options()["training"].pretrain.steps == 0
        assert "pretrain_steps" not in MissionConfig(budget=100, model="ssgp++").resolved().model_kwargs()
        asked = MissionConfig(budget=100, model_options={"pretrain_steps": 20}).resolved()
        assert build_model(asked).options()["training"].pretrain.steps == 20
        spelled = MissionConfig(budget=100, model_options={"training": {"pretrain": {"steps": 20}}}).resolved()
        assert build_model(spelled).options() == build_model(asked).options()
