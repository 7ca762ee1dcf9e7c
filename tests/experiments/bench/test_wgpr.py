"""Smoke test of ``onlinegp bench wgpr``: streams, tables, CSV and figures (tiny settings)."""

import csv
import json

import numpy as np
import pytest
import torch

from onlinegp.experiments.bench.runner import RunnerOptions
from onlinegp.experiments.bench.wgpr import (
    BENCHES,
    PAPER_TRAIN_TIME,
    SETTINGS,
    WgprOptions,
    phase_table,
    ratio_table,
    specs_for,
)
from onlinegp.experiments.protocols import two_regime_toy
from onlinegp.experiments.protocols import wgpr_model as build


def test_the_ratio_table_divides_by_lgprs_time_in_the_same_sweep_beside_the_papers():
    def run(seconds, cpu=None, load=None):
        return (
            {"train_time": seconds}
            | ({} if cpu is None else {"cpu_time": cpu})
            | ({} if load is None else {"load_average": load, "phase_time": {"health": seconds / 4}})
        )

    groups = {
        ("kin40k", "lgpr"): [run(10.0, 9.0, [0.2, 1.0]), run(30.0, 11.0, [1.0, 1.1])],
        ("kin40k", "wgpr"): [run(100.0, 150.0, [1.1, 1.3]), run(140.0, 50.0, [0.9, 1.0])],
        ("kin40k", "ovfe"): [run(40.0), run(40.0, 10.0)],  # kept runs without CPU time or load
        ("kin40k", "solar-gp"): [run(40.0), run(20.0, 10.0, [0.5, 0.5])],  # phases over the run that has them
    }
    rows = ratio_table(groups, ["kin40k"], ["lgpr", "wgpr", "solar-gp", "ovfe"]).splitlines()[2:5]
    paper = PAPER_TRAIN_TIME["kin40k"]
    assert rows[0] == f"| kin40k | WGPR | 6.0 | 10.0 | 6.0 | {paper['wgpr'] / paper['lgpr']:.1f} | 0.2-1.3 | 25%, 25% |"
    assert (
        rows[1] == f"| kin40k | SOLAR | 1.5 | - | 1.0 | {paper['solar-gp'] / paper['lgpr']:.1f} | 0.2-1.1 | 25%, 25% |"
    )
    assert rows[2] == f"| kin40k | OVFE | 2.0 | - | - | {paper['ovfe'] / paper['lgpr']:.1f} | 0.2-1.1 | -, 25% |"
    assert paper["wgpr"] / paper["lgpr"] == pytest.approx(6.48, abs=0.01)  # Kepler et al. 2021, Table II


def test_the_phase_table_averages_each_phase_over_the_runs_that_timed_them_and_names_the_rest():
    groups = {
        ("kin40k", "lgpr"): [{"train_time": 50.0, "phase_time": {"factorise": 20.0, "health": 20.0}}],
        ("kin40k", "wgpr"): [
            {"train_time": 100.0, "phase_time": {"candidates": 70.0, "fresh": 10.0}},
            {"train_time": 300.0, "phase_time": {"candidates": 250.0, "fresh": 30.0, "health": 10.0}},
            {"train_time": 999.0},  # kept before the phases were recorded: left out
        ],
        ("kin40k", "ovfe"): [{"train_time": 40.0}],
    }
    rows = phase_table(groups, ["kin40k"], ["lgpr", "wgpr", "ovfe"]).splitlines()[2:]
    assert rows[0] == "| kin40k | LGPR | 50.0 | factorise 20.0 (40%), health 20.0 (40%), rest 10.0 (20%) |"
    assert rows[1] == (
        "| kin40k | WGPR | 200.0 | candidates 160.0 (80%), fresh 20.0 (10%), rest 15.0 (8%), health 5.0 (2%) |"
    )
    assert rows[2] == ""  # OVFE recorded no phases: no row


def test_member_tolerance_reaches_every_member_and_leaves_other_keys_alone():
    assert "member_options" not in WgprOptions().base()  # the keys of kept runs stay as they were
    assert WgprOptions(member_tolerance=1e-5).base()["member_options"] == {"training": {"tolerance": 1e-5}}
    with pytest.raises(ValueError, match=">= 0"):
        WgprOptions(member_tolerance=-1e-3).base()
    train, _ = two_regime_toy(n_train=100, n_test=10)
    bounds, stats = np.array([[0.0], [300.0]]), (float(train.y.mean()), float(train.y.std()))
    members = WgprOptions(member_tolerance=1e-5).base()["member_options"]
    model = build("ovfe", 1, {}, bounds, stats, 0, None, False, members)
    assert model.training.tolerance == 1e-5
    # None: each model's own (WGPR's members settle at 1e-3); 0: the whole budget everywhere
    default = build(
        "wgpr", 1, {"epsilon": 5.0}, bounds, stats, 0, None, False, WgprOptions().base().get("member_options")
    )
    assert default.member_options["training"]["tolerance"] == 1e-3
    whole = WgprOptions(member_tolerance=0.0).base()["member_options"]
    assert build("wgpr", 1, {"epsilon": 5.0}, bounds, stats, 0, None, False, whole).member_options["training"] == {
        "tolerance": 0.0
    }


@pytest.mark.slow
def test_bench_writes_tables_and_figures(tmp_path):
    options = WgprOptions("toy,bathymetry", sweep="toy", max_points=200, max_test=50, seeds="0,1", member_steps=3)
    result = BENCHES["wgpr"].start(options, tmp_path, RunnerOptions(quiet=True))
    assert not result["failed"]
    for name in (
        "config.json",
        "runs.csv",
        "table_time.md",
        "table_ratio.md",
        "table_rmse.csv",
        "sweep.csv",
        "sweep_toy.png",
        "toy.png",
        "curves.png",
    ):
        assert (tmp_path / name).is_file(), name
    rows = list(csv.DictReader((tmp_path / "table_rmse.csv").open()))
    assert [r["method"] for r in rows] == ["LGPR", "WGPR", "SOLAR", "OVFE"]
    assert all(r["toy"] != "-" and r["bathymetry"] != "-" for r in rows)
    runs = list(csv.DictReader((tmp_path / "runs.csv").open()))
    for method in ("lgpr", "ovfe"):  # each cell is the mean ± std of its two trials (numpy's std, ddof = 0)
        values = [float(r["rmse"]) for r in runs if r["dataset"] == "toy" and r["method"] == method]
        cell = next(r["toy"] for r in rows if r["method"] == method.upper())
        assert len(values) == 2 and cell.split(" (")[0] == f"{np.mean(values):.3f} ± {np.std(values):.3f}"
    assert "over 2 trials" in (tmp_path / "table_rmse.md").read_text()
    sweep = list(csv.DictReader((tmp_path / "sweep.csv").open()))
    eps0 = [r for r in sweep if r["method"] == "wgpr" and "'epsilon': 0.0" in r["params"]]
    assert len(eps0) == 2 and all(int(r["num_models"]) == 2 for r in eps0)  # ε = 0: a model per batch
    table = (tmp_path / "sweep.md").read_text().splitlines()[2:]  # Fig. 2 in numbers: a row per threshold
    assert len(table) == len({(r["method"], r["params"]) for r in sweep})
    row = next(line for line in table if "WGPR | epsilon=0 |" in line)
    rmse = [float(r["rmse"]) for r in eps0]
    assert f"| 2 | 2.0 ± 0.0 | {np.mean(rmse):.3f} ± {np.std(rmse):.3f} |" in row
    assert json.loads((tmp_path / "config.json").read_text())["max_points"] == 200


@pytest.mark.parametrize("method", ["ovfe", "wgpr"])
def test_pseudo_inputs_move_with_theta_only_when_asked(method):
    """The paper's sparse models optimise Z with θ (the default of ``WgprOptions``); with ``optimize_inducing=False`` Z stays
    the pivoted-Cholesky selection, a subset of the batch's inputs."""
    train, _ = two_regime_toy(n_train=100, n_test=10)
    bounds, stats = np.array([[0.0], [300.0]]), (float(train.y.mean()), float(train.y.std()))
    for optimise in (False, True):
        model = build(method, 1, {"epsilon": 1.0} if method == "wgpr" else {}, bounds, stats, 0, 5, optimise)
        model.update(train.X, train.y)
        Z = model.inducing_inputs.numpy() if method == "ovfe" else model.inducing_of(model.members[0]).numpy()
        xs = model.scaler.x(torch.as_tensor(train.X)).numpy() if method == "wgpr" else train.X
        gap = np.abs(Z[:, None, 0] - xs[None, :, 0]).min(1).max()  # farthest pseudo-input from every input
        assert (gap > 1e-6) == optimise, (optimise, gap)


@pytest.mark.parametrize("method", ["ovfe", "wgpr", "solar-gp"])
def test_member_options_reach_every_osgpr(method):
    """A run's ``member_options`` are options of every OSGPR the bench builds: OVFE and the ensembles' members."""
    bounds, stats = np.array([[0.0], [300.0]]), (0.0, 1.0)

    def osgpr_of(options):
        model = build(method, 1, {}, bounds, stats, 0, None, True, options)
        return model if method == "ovfe" else model._build_member(0)

    tuned = osgpr_of({"training": {"tolerance": 1e-3}})
    assert tuned.training.tolerance == 1e-3 and tuned.optimize_inducing
    assert osgpr_of(None).training.tolerance == 1e-3  # LocalEnsemble.MEMBER_DEFAULTS, OVFE's too
    assert osgpr_of({"training": {"tolerance": 0.0}}).training.tolerance == 0.0  # the whole budget
    # the members keep their pseudo-inputs where those bound the batch better, the one global OSGPR re-selects
    assert osgpr_of(None).options()["inducing"] == ("pivoted" if method == "ovfe" else "pivoted-or-kept")
    assert osgpr_of({"inducing": "pivoted"}).options()["inducing"] == "pivoted"


def test_fixed_inducing_runs_keep_their_config():
    """Runs with Z fixed have no ``optimize_inducing`` key: their config is the one of the runs made before the
    option existed."""
    base = {"max_points": None, "max_test": 2000, "batch_size": 100, "member_steps": None}
    fixed = specs_for(["toy"], ["wgpr"], [], [4], base)[0]
    assert "optimize_inducing" not in fixed.config and "optimize_inducing" not in fixed.config.get("params", {})
    moved = specs_for(["toy"], ["wgpr"], [], [4], {**base, "optimize_inducing": True})[0]
    assert moved.config_hash != fixed.config_hash


def test_the_fig2_sweep_runs_the_grids_of_the_chosen_methods_only():
    base = {"max_points": None, "max_test": 2000, "batch_size": 100, "member_steps": None}
    both = specs_for(["kin40k"], ["wgpr", "solar-gp"], ["kin40k"], [0], base)
    solar = specs_for(["kin40k"], ["solar-gp"], ["kin40k"], [0], base)
    grid = SETTINGS["kin40k"]["wgen_grid"]
    assert [s.config["params"]["w_gen"] for s in solar] == [0.5, *[w for w in grid if w != 0.5]]
    assert {s.config["method"] for s in solar} == {"solar-gp"}
    assert {s.run_id for s in solar} < {s.run_id for s in both}
    assert len(both) == len(solar) + len(SETTINGS["kin40k"]["eps_grid"])
