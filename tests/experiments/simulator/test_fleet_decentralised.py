"""The decentralised fleet (onlinegp.experiments.simulator.merge): exact merges where theory says so, no sample
counted twice, exact resume, recorded settings; the shared fleet is unchanged (test_fleet.py)."""

import csv
import json

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from onlinegp.experiments.bench import fleet as bench_fleet
from onlinegp.experiments.bench.runner import RunnerOptions
from onlinegp.experiments.cli import app
from onlinegp.experiments.simulator.merge import VehicleMap, exchange
from onlinegp.experiments.simulator.mission import MissionConfig
from onlinegp.experiments.simulator.run import make_mission, run_mission
from onlinegp.kernels import dense
from onlinegp.models.registry import make_model
from onlinegp.posterior import kuu

runner = CliRunner()
TOL = 1e-8
#: fixed inducing inputs (scaled units: the box [-30, 30]² maps to [-1, 1]²)
GRID = torch.stack(torch.meshgrid(*[torch.linspace(-0.8, 0.8, 5, dtype=torch.float64)] * 2, indexing="ij"), -1)


class FixedZ:
    """A selector that always returns the same inducing inputs: Z agrees across models."""

    def __call__(self, kernel, Z, X, *, generator=None, context=None):
        return GRID.reshape(-1, 2).clone()


def _model():
    """POAM with θ frozen (no gradient steps), fixed Z and a fixed scaling: θ, Z and the scaling agree."""
    torch.manual_seed(0)
    box = [[-30.0, -30.0], [30.0, 30.0]]
    return make_model("poam", 2, inducing=FixedZ(), num_steps=0, seed=0, x_bounds=box, y_stats=(0.5, 2.0))


def _data(seed, n, x_range):
    rng = np.random.default_rng(seed)
    x = rng.uniform(*x_range, (n, 2))
    return x, np.sin(x[:, 0] / 6) * np.cos(x[:, 1] / 9) + 0.1 * rng.standard_normal(n)


SETS = [_data(1, 120, (-30, 0)), _data(2, 90, (0, 30)), _data(3, 60, (-30, 30)), _data(4, 50, (-10, 20))]
TEST_X = np.random.default_rng(9).uniform(-30, 30, (200, 2))


def _one_model(sets):
    model = _model()
    for x, y in sets:
        model.update(torch.from_numpy(x), torch.from_numpy(y))
    return model


def _assert_same(model, reference):
    p, q = model.predict(torch.from_numpy(TEST_X)), reference.predict(torch.from_numpy(TEST_X))
    torch.testing.assert_close(p.mean, q.mean, rtol=TOL, atol=TOL)
    torch.testing.assert_close(p.var_f, q.var_f, rtol=TOL, atol=TOL)


def _maps(count):
    maps = [VehicleMap(_model(), k, count) for k in range(count)]
    for m, (x, y) in zip(maps, SETS):
        m.absorb(x, y)
    return maps


def test_merging_equals_one_model_of_both_sets_and_the_dense_posterior():
    first, second = _maps(2)
    assert exchange(first, second)
    reference = _one_model(SETS[:2])
    for m in (first, second):
        _assert_same(m.model, reference)
        assert m.held.tolist() == [120, 90]
    # against the collapsed sparse posterior computed densely (Titsias 2009): mean σ⁻² k*ᵀ A⁻¹ K_zX y and
    # var k** − k*ᵀ K_zz⁻¹ k* + k*ᵀ A⁻¹ k*, A = K_zz + σ⁻² K_zX K_Xz, in scaled units
    model = first.model
    X = model.scaler.x(torch.from_numpy(np.vstack([SETS[0][0], SETS[1][0]])))
    y = model.scaler.y(torch.from_numpy(np.concatenate([SETS[0][1], SETS[1][1]])))
    Xs = model.scaler.x(torch.from_numpy(TEST_X))
    with torch.no_grad():
        Z, noise = GRID.reshape(-1, 2), model.noise
        Kzz, Kzx, Kzs = kuu(model.kernel, Z), dense(model.kernel, Z, X), dense(model.kernel, Z, Xs)
        A = Kzz + Kzx @ Kzx.mT / noise
        mean = Kzs.mT @ torch.linalg.solve(A, Kzx @ y) / noise
        kss = torch.diagonal(dense(model.kernel, Xs, Xs))
        var = kss - (Kzs * torch.linalg.solve(Kzz, Kzs)).sum(0) + (Kzs * torch.linalg.solve(A, Kzs)).sum(0)
    pred = model.predict(torch.from_numpy(TEST_X))
    std = model.scaler.y_std
    torch.testing.assert_close(pred.mean, mean * std + model.scaler.y_mean, rtol=TOL, atol=TOL)
    torch.testing.assert_close(pred.var_f, var * std**2, rtol=TOL, atol=TOL)


def test_no_sample_is_counted_twice():
    a, b, c = _maps(3)
    assert exchange(a, b)
    terms = a.model.projected.a.clone()
    assert not exchange(a, b)  # nothing new: a second meeting changes nothing
    assert torch.equal(a.model.projected.a, terms)
    assert exchange(b, c) and exchange(c, a)  # a learns of c through b and c, its own samples come back once
    everything = _one_model(SETS[:3])
    for m in (a, b, c):
        assert m.held.tolist() == [120, 90, 60]
        _assert_same(m.model, everything)
    # a's next samples: b takes only them (its part of a is replaced by a's longer one), a takes nothing
    a.absorb(*SETS[3])
    assert exchange(a, b) and b.held.tolist() == [170, 90, 60]
    _assert_same(b.model, _one_model([SETS[0], SETS[3], SETS[1], SETS[2]]))
    _assert_same(a.model, b.model)


@pytest.mark.parametrize("theta", ["richer", "average"])
def test_merged_theta(theta):
    first, second = (VehicleMap(make_model("poam", 2, num_inducing=20, num_steps=3, seed=0), k, 2) for k in (0, 1))
    first.absorb(*SETS[0])
    second.absorb(*SETS[2])
    ours, theirs = (torch.cat([p.detach().reshape(-1) for p in m.model.kernel.parameters()]) for m in (first, second))
    assert not torch.equal(ours, theirs)
    second.receive(first.message(), theta)
    merged = torch.cat([p.detach().reshape(-1) for p in second.model.kernel.parameters()])
    expected = ours if theta == "richer" else (120 * ours + 60 * theirs) / 180  # first holds more
    torch.testing.assert_close(merged, expected, rtol=1e-12, atol=1e-12)
    assert second.held.tolist() == [120, 60]


SMALL = ["--budget", "900", "--num-inducing", "40", "--num-steps", "2", "--seed", "1"]


def _rows(out):
    timing = ("update_time", "update_cpu_time", "prediction_time", "plan_drive_time", "wall_time")
    with open(out / "metrics.csv") as fh:
        return [{k: v for k, v in r.items() if k not in timing} for r in csv.DictReader(fh)]


@pytest.mark.parametrize("schedule", ["sync", "async"])
def test_a_killed_decentralised_mission_resumes_exactly(tmp_path, schedule):
    base = ["mission", *SMALL, "--robots", "3", "--fleet", "decentralised", "--schedule", schedule]
    base += ["--comm-radius", "25"]
    first = runner.invoke(app, [*base, "--out", str(tmp_path / "a"), "--quiet"])
    stopped = runner.invoke(app, [*base, "--out", str(tmp_path / "b"), "--quiet", "--stop-after-epochs", "2"])
    resumed = runner.invoke(app, [*base, "--out", str(tmp_path / "b"), "--quiet", "--resume"])
    for r in (first, stopped, resumed):
        assert r.exit_code == 0, r.output
    a, b = _rows(tmp_path / "a"), _rows(tmp_path / "b")
    assert len(a) >= 3 and a == b
    assert int(a[-1]["merges"]) > 0 and int(a[0]["samples_held"]) < 900 <= int(a[-1]["num_samples"])
    config = json.loads((tmp_path / "a" / "config.json").read_text())["config"]
    assert (config["fleet"], config["comm_radius"], config["merge_theta"]) == ("decentralised", 25.0, "richer")
    default = MissionConfig(robots=2, fleet="decentralised").resolved()  # so recorded: half the 60 m task
    assert (default.comm_radius, default.merge_theta) == (30.0, "richer")
    assert "comm_radius" not in MissionConfig(robots=2).resolved().to_dict()


def test_one_decentralised_vehicle_is_the_shared_one_bit_for_bit(tmp_path):
    small = {"budget": 900, "num_inducing": 40, "num_steps": 2, "seed": 3, "num_candidates": 300, "robots": 1}
    shared = run_mission(MissionConfig(**small), tmp_path / "shared", quiet=True)
    alone = run_mission(MissionConfig(**small, fleet="decentralised"), tmp_path / "alone", quiet=True)
    keys = ("num_samples", "smse", "msll", "mission_clock")
    assert [[r[k] for k in keys] for r in alone.rows] == [[r[k] for k in keys] for r in shared.rows]
    assert alone.rows[-1]["samples_held"] == 900


def test_a_mission_never_in_range_keeps_every_map_apart(tmp_path):
    config = MissionConfig(budget=800, num_inducing=40, num_steps=2, seed=1, robots=2, fleet="decentralised")
    config.comm_radius = 0.0
    result = run_mission(config, tmp_path, quiet=True)
    assert result.rows[-1]["merges"] == 0
    mission = make_mission(config)
    mission.load(tmp_path / "checkpoint.pt")
    own = np.bincount(mission.owner)
    assert result.rows[-1]["samples_held"] == own[0] < 800  # vehicle 0's own samples only, all of them at the end
    assert [m.held.tolist() for m in mission.maps] == [[own[0], 0], [0, own[1]]]


@pytest.mark.parametrize(
    "args, message",
    [
        (["--robots", "2", "--comm-radius", "10"], "settings of the decentralised fleet"),
        (["--robots", "2", "--fleet", "decentralised", "--comm-radius", "-1"], "finite distance >= 0"),
        (["--robots", "2", "--fleet", "decentralised", "--merge-theta", "mine"], "unknown merge_theta"),
        (["--robots", "2", "--fleet", "mesh"], "unknown fleet"),
        (["--robots", "2", "--fleet", "decentralised", "--model", "full"], "merges POAM's projected terms"),
        (["--robots", "2", "--fleet", "decentralised", "--init", "random"], "Bézier pilot survey"),
    ],
)
def test_bad_decentralised_options_are_usage_errors(tmp_path, args, message):
    result = runner.invoke(app, ["mission", "--budget", "700", "--out", str(tmp_path / "x"), *args])
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.replace("│", " ").split())


def test_bench_fleet_runs_decentralised_fleets_beside_shared_ones(tmp_path):
    options = bench_fleet.FleetOptions(
        envs=["valley-ridges"],
        robots=[2],
        coordinations=["joint"],
        fleets=["shared", "decentralised"],
        seeds="0",
        budget=650,
        num_inducing=20,
        num_steps=1,
    )
    files = bench_fleet.BENCHES["fleet"].start(options, tmp_path, RunnerOptions(quiet=True))
    with open(files["runs_csv"]) as fh:
        rows = {r["group"]: r for r in csv.DictReader(fh)}
    assert set(rows) == {"k2-joint-async", "k2-joint-async-decentralised"}
    assert rows["k2-joint-async-decentralised"]["fleet"] == "decentralised"
    assert rows["k2-joint-async-decentralised"]["schedule"] == "async"
    assert "decentralised vs shared (joint, async)" in files["summary_md"].read_text()
    specs = bench_fleet.fleet_specs(["valley-ridges"], [2], ["joint"], [0], {}, ["async"], ["shared"])
    assert "fleet" not in specs[0].config  # shared runs keep their keys
    specs = bench_fleet.fleet_specs(
        ["valley-ridges"], [2], ["joint"], [0], {}, ["async"], ["decentralised"], {"comm_radius": 20.0}
    )
    assert (specs[0].config["fleet"], specs[0].config["comm_radius"]) == ("decentralised", 20.0)
