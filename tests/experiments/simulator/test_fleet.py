"""A fleet maps one field (onlinegp.experiments.simulator.fleet): one vehicle as before, joint goals, budgets, exact resume, CLI."""

import csv
import math

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

import onlinegp
from onlinegp.experiments.bench import fleet as bench_fleet
from onlinegp.experiments.bench.runner import RunnerOptions, RunSpec
from onlinegp.experiments.cli import app
from onlinegp.experiments.simulator.fleet import (
    FleetMission,
    conditioned_variances,
    drive_fleet,
    drive_until_arrival,
    joint_goals,
    leg_limit,
    pilot_pieces,
)
from onlinegp.experiments.simulator.mission import MissionConfig
from onlinegp.experiments.simulator.planners import MaxEntropyPlanner, bezier_pilot
from onlinegp.experiments.simulator.robot import DiffDrive
from onlinegp.experiments.simulator.run import make_mission, run_mission
from onlinegp.models.registry import make_model
from tests.library.portable_probe import SMALL

runner = CliRunner()
#: RunSpec("x", MissionConfig().to_dict()).config_hash on that commit (onlinegp 0.2.0; the key includes the version):
#: the config of a default mission is unchanged
DEFAULT_HASH = "d1a7ec50bff01cfd"
TIMING = ("update_time", "update_cpu_time", "prediction_time", "plan_drive_time", "wall_time")


def _numbers(rows):
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_one_vehicle_is_the_single_vehicle_mission_bit_for_bit(tmp_path, monkeypatch):
    """The fleet simulator with one vehicle is the single-vehicle mission, in one process. The mission's own digits
    are pinned under the portable mode, where every CPU must give them (tests/library/test_portable.py)."""
    assert "robots" not in MissionConfig().resolved().to_dict()
    monkeypatch.setattr(onlinegp, "__version__", "0.2.0")
    assert RunSpec("x", MissionConfig().resolved().to_dict()).config_hash == DEFAULT_HASH
    monkeypatch.undo()
    single = run_mission(MissionConfig(**SMALL), tmp_path / "single", quiet=True)
    fleet = run_mission(MissionConfig(**SMALL, robots=1), tmp_path / "fleet", quiet=True)
    assert single.rows[-1]["num_samples"] == 900
    # the fleet simulator with one vehicle: the same samples and numbers, exactly, plus its own columns
    numbers = _numbers(single.rows)
    assert numbers == [{k: f[k] for k in n} for f, n in zip(fleet.rows, numbers)]
    assert fleet.rows[-1]["mission_clock"] == pytest.approx(900 / 3.0, abs=1.0)  # 3 Hz
    # asynchronous replanning with one vehicle: the same again, and the same clock
    alone = run_mission(MissionConfig(**SMALL, robots=1, schedule="async"), tmp_path / "async", quiet=True)
    assert _numbers(alone.rows) == _numbers(fleet.rows)
    assert "schedule" not in MissionConfig(robots=2).resolved().to_dict()


def test_one_vehicle_drives_in_lock_step_as_alone():
    route = np.array([[5.0, 5.0], [-3.0, 8.0], [0.0, -4.0]])
    alone, together = DiffDrive(), DiffDrive()
    xy = alone.drive(route, 40)
    xy2, owner, ticks = drive_fleet([together], [route], 40, np.zeros(1))
    assert np.array_equal(xy, xy2) and (owner == 0).all() and together == alone and ticks == alone.tick


def test_one_vehicle_drives_until_arrival_as_alone():
    alone, together = DiffDrive(), DiffDrive()
    goal = np.array([5.0, -7.0])
    xy = alone.drive(goal[None], 1000)
    legs = np.array([[0, leg_limit(together, goal)]])
    xy2, owner, ticks = drive_until_arrival([together], goal[None], 1000, np.zeros(1), np.inf, legs)
    assert np.array_equal(xy, xy2) and (owner == 0).all() and together == alone and ticks == alone.tick == legs[0, 0]


def test_drive_until_arrival_stops_at_the_first_arrival():
    near, far = DiffDrive(), DiffDrive()
    goals = np.array([[3.0, 0.0], [20.0, 0.0]])
    legs = np.array([[0, leg_limit(near, goals[0])], [0, leg_limit(far, goals[1])]])
    odometer = np.zeros(2)
    xy, owner, ticks = drive_until_arrival([near, far], goals, 1000, odometer, np.inf, legs)
    assert np.hypot(*(near.position - goals[0])) <= near.goal_radius < np.hypot(*(far.position - goals[1]))
    assert ticks == near.tick == far.tick and (legs[:, 0] == ticks).all()
    assert np.bincount(owner).tolist() == [len(xy) // 2, len(xy) - len(xy) // 2]  # side by side, both sampling
    assert odometer[1] > odometer[0] > 2.5
    # the far one goes on from where it is, with its leg's count, until it arrives too
    goals[0] = np.nan
    drive_until_arrival([near, far], goals, 1000, odometer, np.inf, legs)
    assert np.hypot(*(far.position - goals[1])) <= far.goal_radius and legs[0, 0] == ticks


def test_pilot_is_shared_along_the_survey_path():
    waypoints = bezier_pilot((-30, 30, -30, 30), 50)
    pieces = pilot_pieces(waypoints, 4)
    assert np.array_equal(np.vstack([pieces[0], *(p[1:] for p in pieces[1:])]), waypoints)
    starts = np.array([p[0] for p in pieces])
    assert len({tuple(s) for s in starts}) == 4
    with pytest.raises(ValueError, match="pilot waypoints"):
        pilot_pieces(waypoints[:3], 3)


@pytest.fixture(scope="module")
def fitted():
    torch.manual_seed(0)
    model = make_model("poam", 2, num_inducing=30, num_steps=0, seed=0, x_bounds=[[-30, -30], [30, 30]])
    rng = np.random.default_rng(0)
    x = rng.uniform(-30, -10, (200, 2))  # data in one corner only: the rest is uncertain
    model.update(torch.from_numpy(x), torch.from_numpy(np.sin(x[:, 0] / 5) + 0.1 * rng.standard_normal(200)))
    return model


def test_joint_goals_are_distinct_and_the_first_is_the_single_planners(fitted):
    planner = MaxEntropyPlanner((-30, 30, -30, 30), num_candidates=400, distance_weight=0.0)
    here = [np.zeros(2)] * 4
    joint = joint_goals(planner, fitted, here, np.random.default_rng(1))
    alone = planner.plan(fitted, here[0], np.random.default_rng(1))
    assert np.array_equal(joint[0], alone)
    gaps = [np.hypot(*(joint[i] - joint[j])) for i in range(4) for j in range(i)]
    assert min(gaps) > 5.0, gaps  # conditioned on the goals before, the next one goes elsewhere
    independent = joint_goals(planner, fitted, here, np.random.default_rng(1), "independent")
    assert np.array_equal(independent[0], alone)


def test_async_goals_avoid_the_goals_still_driven_to(fitted):
    planner = MaxEntropyPlanner((-30, 30, -30, 30), num_candidates=400, distance_weight=0.0)
    here = np.zeros(2)
    alone = planner.plan(fitted, here, np.random.default_rng(1))
    pending = np.array([alone])  # another vehicle is driving to the single planner's choice
    goal = joint_goals(planner, fitted, [here], np.random.default_rng(1), pending=pending)
    assert goal.shape == (1, 2) and np.hypot(*(goal[0] - alone)) > 5.0
    # conditioning on a pending goal is conditioning on a chosen one: the same as the joint second goal
    both = joint_goals(planner, fitted, [here, here], np.random.default_rng(1))
    assert np.array_equal(both[0], alone) and np.hypot(*(both[1] - goal[0])) < 1e-9


def test_the_downdate_is_gaussian_conditioning():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    cov, noise = A @ A.T, 0.3
    joint = cov + noise * np.eye(6)
    expected = cov - np.outer(cov[:, 2], cov[2]) / joint[2, 2]
    assert np.allclose(conditioned_variances(cov, noise, 2), expected, atol=1e-12)


def test_budget_counts_every_vehicles_samples(tmp_path):
    config = MissionConfig(**{**SMALL, "budget": 700}, robots=3, schedule="sync")
    result = run_mission(config, tmp_path, quiet=True)
    mission = make_mission(config)
    mission.load(tmp_path / "checkpoint.pt")
    assert isinstance(mission, FleetMission) and result.rows[-1]["num_samples"] == 700 == len(mission.X)
    assert np.bincount(mission.owner, minlength=3).sum() == 700 and (np.bincount(mission.owner) > 50).all()
    assert [len(p) for p in mission.paths()] == list(np.bincount(mission.owner))
    clocks = [r["mission_clock"] for r in result.rows]
    assert clocks == sorted(clocks) and clocks[-1] < 700 / 3.0 / 2  # three vehicles sample three times as fast


def test_async_budget_counts_every_vehicles_samples(tmp_path):
    config = MissionConfig(**{**SMALL, "budget": 800}, robots=3, schedule="async")
    result = run_mission(config, tmp_path, quiet=True)
    mission = make_mission(config)
    mission.load(tmp_path / "checkpoint.pt")
    assert result.rows[-1]["num_samples"] == 800 == len(mission.X) == len(mission.owner)
    assert (np.bincount(mission.owner, minlength=3) > 30).all()
    clocks = [r["mission_clock"] for r in result.rows]
    assert clocks == sorted(clocks) and clocks[-1] < 800 / 3.0 / 2
    # one vehicle replans per epoch: about as many epochs as one vehicle's, more than the lock-step fleet's
    sync = run_mission(
        MissionConfig(**{**SMALL, "budget": 800}, robots=3, schedule="sync"), tmp_path / "sync", quiet=True
    )
    assert mission.schedule == "async" == make_mission(MissionConfig(robots=2)).schedule  # the default
    assert len(result.rows) > len(sync.rows)
    live = mission.goals[~np.isnan(mission.goals[:, 0])]
    assert len(live) == 3 and min(np.hypot(*(live[i] - live[j])) for i in range(3) for j in range(i)) > 1.0


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_distance_budget_stops_every_vehicle(tmp_path, schedule):
    config = MissionConfig(**{**SMALL, "budget": 100000}, robots=2, budget_distance=120.0, schedule=schedule)
    result = run_mission(config, tmp_path, quiet=True)
    mission = make_mission(config)
    mission.load(tmp_path / "checkpoint.pt")
    assert mission.done and result.completed
    assert np.all(mission.odometer >= 120.0) and np.all(mission.odometer < 120.0 + 0.11)
    assert result.rows[-1]["odometry"] == pytest.approx(mission.odometer.max())
    assert result.rows[-1]["num_samples"] < 100000


def _rows(out):
    with open(out / "metrics.csv") as fh:
        return [{k: v for k, v in r.items() if k not in TIMING} for r in csv.DictReader(fh)]


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_a_killed_fleet_mission_resumes_exactly(tmp_path, schedule):
    base = ["mission", "--budget", "800", "--num-inducing", "40", "--num-steps", "2", "--seed", "1", "--robots", "2"]
    base += ["--schedule", schedule]
    first = runner.invoke(app, [*base, "--out", str(tmp_path / "a"), "--quiet"])
    stopped = runner.invoke(app, [*base, "--out", str(tmp_path / "b"), "--quiet", "--stop-after-epochs", "2"])
    resumed = runner.invoke(app, [*base, "--out", str(tmp_path / "b"), "--quiet", "--resume"])
    for r in (first, stopped, resumed):
        assert r.exit_code == 0, r.output
    a, b = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    assert len(a) >= 4 and a == b and "mission_clock" in a[0]
    assert (tmp_path / "b" / "figures" / "inducing.png").stat().st_size > 1000


@pytest.mark.parametrize(
    "args, message",
    [
        (["--robots", "0"], "robots must be a positive number"),
        (["--robots", "-2"], "robots must be a positive number"),
        (["--robots", "2", "--planner", "nipv"], "plans for one vehicle"),
        (["--robots", "2", "--coordination", "greedy"], "unknown coordination"),
        (["--budget-distance", "0"], "budget_distance must be a positive"),
        (["--robots", "2", "--schedule", "later"], "unknown schedule"),
        (["--robots", "60"], "pilot waypoints"),
    ],
)
def test_bad_fleet_options_are_usage_errors(tmp_path, args, message):
    result = runner.invoke(app, ["mission", "--budget", "700", "--out", str(tmp_path / "x"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())
    assert not (tmp_path / "x" / "metrics.csv").exists()


def test_bench_fleet_end_to_end_at_a_tiny_budget(tmp_path):
    options = bench_fleet.FleetOptions(
        envs=["valley-ridges"],
        robots=[1, 2],
        seeds="0",
        budget=650,
        num_inducing=20,
        num_steps=1,
        schedules=["sync", "sync-ksteps"],
    )
    files = bench_fleet.BENCHES["fleet"].start(options, tmp_path, RunnerOptions(quiet=True))
    with open(files["runs_csv"]) as fh:
        rows = {r["group"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"k1", *(f"k2-{c}-{s}" for c in ("joint", "independent") for s in ("sync", "sync-ksteps"))}
    assert all(int(r["num_samples"]) == 650 for r in rows.values())
    assert float(rows["k1"]["time_ratio_to_k1"]) == 1.0
    assert float(rows["k2-joint-sync"]["mission_clock"]) < float(rows["k1"]["mission_clock"])
    text = files["summary_md"].read_text()
    assert "k2-joint-sync-ksteps" in text and "sync-ksteps vs sync (joint)" in text
    assert files["curves_mission_clock"].stat().st_size > 1000
    specs = bench_fleet.fleet_specs(["valley-ridges"], [4], ["joint"], [0], {"num_steps": 10}, ["sync-ksteps", "async"])
    assert [(s.config["schedule"], s.config["num_steps"]) for s in specs] == [("sync", 40), ("async", 10)]
    with pytest.raises(ValueError, match="unknown schedule"):
        bench_fleet.fleet_specs(["valley-ridges"], [2], ["joint"], [0], {}, ["later"])
    bad = runner.invoke(app, ["bench", "fleet", "--robots", "0", "--out", str(tmp_path / "x"), "--no-results"])
    assert bad.exit_code == 2 and "positive numbers of vehicles" in bad.output


def test_fleet_summary_tells_a_run_without_a_target_from_one_that_never_reached_it():
    nan = math.nan

    def row(seed, target, time):
        values = dict.fromkeys(bench_fleet.SUMMARY_COLUMNS, 1.0)
        values.update(time_to_target=time, time_ratio_to_k1=nan if math.isnan(time) else 0.25)
        return {"env": "e", "group": "k4-joint-async", "seed": seed, "target_smse": target, **values}

    rows = [row(0, 0.1, 400.0), row(1, 0.1, nan), row(2, nan, nan)]
    (summary,) = bench_fleet.summarise(rows)
    assert summary["time_to_target_runs"] == 1 and summary["time_to_target_targets"] == 2
    assert summary["final_smse_targets"] == 3
    assert bench_fleet._fmt(summary, "time_to_target") == "400 ± 0 (1 never, 1 without K = 1)"
    assert bench_fleet._fmt(summary, "final_smse") == "1 ± 0"
    (untargeted,) = bench_fleet.summarise([row(2, nan, nan)])
    assert bench_fleet._fmt(untargeted, "time_ratio_to_k1") == "– (1 without K = 1)"
