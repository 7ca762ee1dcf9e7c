"""POAM paper experiments (onlinegp.experiments.bench.poam): tiny real mission sweeps, summaries checked by hand, resume,
failures, and the Ray backend against the local one."""

import csv
import json
import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from onlinegp.experiments.bench import parse, poam
from onlinegp.experiments.bench.runner import ERROR_FILE, RunnerOptions, RunSpec, is_finished, run_sweep

# cheap missions: random start with 60 pilot samples, 150-sample budget, M=30, one gradient step per epoch
TINY = dict(
    envs="valley-ridges",
    methods="poam,ovc++",
    seeds="0-1",
    budget=150,
    num_inducing=30,
    num_steps=1,
    init="random",
    num_random_init=60,
    num_candidates=100,
    eval_grid=20,
)
#: the Table I bench at the tiny settings above (the mission settings beyond the bench's own options go in ``mission``)
TINY_OPTIONS = poam.Table1Options(
    envs=TINY["envs"],
    methods=TINY["methods"],
    seeds=TINY["seeds"],
    budget=TINY["budget"],
    num_inducing=TINY["num_inducing"],
    num_steps=TINY["num_steps"],
    mission={k: TINY[k] for k in ("init", "num_random_init", "num_candidates", "eval_grid")},
)


def tiny_table1(out: Path, runner: RunnerOptions) -> poam.Report:
    return poam.BENCHES["poam-table1"].start(TINY_OPTIONS, out, runner)


RUN_IDS = [
    "valley-ridges/poam/seed-0",
    "valley-ridges/poam/seed-1",
    "valley-ridges/ovc++/seed-0",
    "valley-ridges/ovc++/seed-1",
]


def hand_summary(root: Path, run_ids, key: str) -> dict[str, float]:
    """Table I's cell by hand: the key averaged over a run's metrics.csv rows, then statistics over runs."""
    per_run = []
    for rid in run_ids:
        with open(root / rid / "metrics.csv") as fh:
            values = [float(row[key]) for row in csv.DictReader(fh)]
        per_run.append(sum(values) / len(values))
    return {
        "mean": statistics.fmean(per_run),
        "std": statistics.pstdev(per_run),
        "min": min(per_run),
        "max": max(per_run),
    }


def read_summary(path: Path) -> dict[str, dict]:
    with open(path) as fh:
        return {row["method"]: row for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def tiny_sweep(tmp_path_factory):
    out = tmp_path_factory.mktemp("table1")
    return out, tiny_table1(out, RunnerOptions(quiet=True, threads=1))


def test_tiny_table1_completes_with_outputs(tiny_sweep):
    out, report = tiny_sweep
    assert report.sweep.ok and [r.run_id for r in report.sweep.runs] == RUN_IDS
    for rid in RUN_IDS:
        run = out / rid
        assert is_finished(run)
        for name in ("config.json", "metrics.csv", "metrics.json", "model.pt"):
            assert (run / name).is_file(), f"{rid} lacks {name}"
        with open(run / "metrics.csv") as fh:
            rows = list(csv.DictReader(fh))
        assert len(rows) >= 2 and int(rows[-1]["num_samples"]) == 150
    for key in ("summary_csv", "summary_md", "per_run_csv", "poam-table1", "lengthscales"):
        assert report.files[key].is_file() and report.files[key].stat().st_size > 0
    md = report.files["summary_md"].read_text()
    assert "| valley-ridges | POAM | 2 |" in md and "| valley-ridges | OVC++ | 2 |" in md
    assert md.count("**") == 2 * 3  # one bold best mean per column


def test_summary_matches_hand_computation(tiny_sweep):
    out, report = tiny_sweep
    table = read_summary(report.files["summary_csv"])
    assert set(table) == {"poam", "ovc++"}
    for method in ("poam", "ovc++"):
        ids = [rid for rid in RUN_IDS if f"/{method}/" in rid]
        assert table[method]["seeds"] == "2"
        for key in ("smse", "msll", "update_time"):
            expected = hand_summary(out, ids, key)
            for stat, value in expected.items():
                assert math.isclose(float(table[method][f"{key}_{stat}"]), value, rel_tol=1e-12, abs_tol=1e-15), (
                    method,
                    key,
                    stat,
                )
    poam_row = table["poam"]
    assert float(poam_row["smse_min"]) <= float(poam_row["smse_mean"]) <= float(poam_row["smse_max"])
    assert float(poam_row["smse_std"]) > 0  # two different seeds give two different missions


def test_rerun_skips_finished_runs(tiny_sweep):
    out, first = tiny_sweep
    stamps = {rid: (out / rid / "metrics.csv").stat().st_mtime_ns for rid in RUN_IDS}
    again = tiny_table1(out, RunnerOptions(quiet=True, threads=1))
    assert [r.status for r in again.sweep.runs] == ["skipped"] * 4
    assert {rid: (out / rid / "metrics.csv").stat().st_mtime_ns for rid in RUN_IDS} == stamps
    assert again.files["summary_csv"].read_text() == first.files["summary_csv"].read_text()


def test_failing_mission_is_reported_and_others_complete(tmp_path):
    exp = poam.Experiment(
        "t",
        "t",
        ["valley-ridges"],
        ["poam", "ovc++"],
        [0, 1],
        {k: v for k, v in TINY.items() if k not in ("envs", "methods", "seeds")},
    )
    specs = exp.specs()
    bad = specs[1]
    specs[1] = RunSpec(bad.run_id, {**bad.config, "model_options": {"no_such_option": 1}})
    sweep = run_sweep(specs, poam.mission_job, tmp_path, RunnerOptions(quiet=True, threads=1))
    assert [r.status for r in sweep.runs] == ["done", "failed", "done", "done"]
    assert "no_such_option" in sweep.failed[0].error
    assert "Traceback" in (tmp_path / bad.run_id / ERROR_FILE).read_text()
    records = poam.collect(tmp_path, specs)
    assert sorted((r.method, r.seed) for r in records) == [("ovc++", 0), ("ovc++", 1), ("poam", 0)]
    table = {row["method"]: row for row in poam.summarise(records)}
    assert table["poam"]["seeds"] == 1 and table["poam"]["smse_std"] == 0.0
    assert table["poam"]["smse_mean"] == pytest.approx(hand_summary(tmp_path, [specs[0].run_id], "smse")["mean"])


def test_interrupted_mission_resumes_to_the_uninterrupted_result(tmp_path):
    from onlinegp.experiments.simulator.mission import MissionConfig
    from onlinegp.experiments.simulator.run import open_mission, run_mission

    exp = poam.Experiment(
        "t",
        "t",
        ["valley-ridges"],
        ["poam"],
        [0],
        {k: v for k, v in TINY.items() if k not in ("envs", "methods", "seeds")},
    )
    specs = exp.specs()
    run_sweep(specs, poam.mission_job, tmp_path / "whole", RunnerOptions(quiet=True, threads=1))
    cut = tmp_path / "cut" / specs[0].run_id  # a sweep killed after the first epoch of this mission
    partial = run_mission(open_mission(MissionConfig(**specs[0].config), cut), cut, quiet=True, stop_after_epochs=1)
    assert not partial.completed and not is_finished(cut)
    resumed = run_sweep(specs, poam.mission_job, tmp_path / "cut", RunnerOptions(quiet=True, threads=1))
    assert resumed.runs[0].status == "done"
    whole = poam.read_metrics_csv(tmp_path / "whole" / specs[0].run_id / "metrics.csv")
    again = poam.read_metrics_csv(cut / "metrics.csv")
    for key in ("num_samples", "smse", "msll", "rmse"):
        assert whole[key].tolist() == again[key].tolist(), key

    changed = [RunSpec(specs[0].run_id, {**specs[0].config, "budget": 130})]  # new settings, same directory
    rerun = run_sweep(changed, poam.mission_job, tmp_path / "cut", RunnerOptions(quiet=True, threads=1))
    assert rerun.runs[0].status == "done"
    assert poam.read_metrics_csv(cut / "metrics.csv")["num_samples"][-1] == 130


@pytest.mark.slow
def test_ray_backend_gives_the_same_summary(tiny_sweep, tmp_path):
    ray = pytest.importorskip("ray")
    out, local = tiny_sweep
    try:
        remote = tiny_table1(tmp_path, RunnerOptions(workers=2, backend="ray", quiet=True, threads=1))
    finally:
        ray.shutdown()
    assert remote.sweep.ok and [r.status for r in remote.sweep.runs] == ["done"] * 4
    a, b = read_summary(local.files["summary_csv"]), read_summary(remote.files["summary_csv"])
    for method in a:
        for key in ("smse", "msll"):
            for stat in ("mean", "std", "min", "max"):
                col = f"{key}_{stat}"
                assert math.isclose(float(a[method][col]), float(b[method][col]), rel_tol=1e-9, abs_tol=1e-12), (
                    method,
                    col,
                )
    assert (tmp_path / RUN_IDS[0] / "figures").is_dir()  # the run's files came back from the Ray worker


def test_cli_runs_a_sweep_and_rejects_bad_options(tmp_path):
    from typer.testing import CliRunner

    from onlinegp.experiments.cli import app

    args = [
        "bench",
        "poam-table1",
        "--envs",
        "seafloor",
        "--methods",
        "poam",
        "--seeds",
        "0",
        "--budget",
        "120",
        "--num-inducing",
        "20",
        "--num-steps",
        "1",
        "--out",
        str(tmp_path),
        "--quiet",
    ]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "seafloor/poam/seed-0/metrics.csv").is_file()
    assert "| seafloor | POAM | 1 |" in (tmp_path / "summary.md").read_text()
    wide = {"COLUMNS": "300"}
    bad = CliRunner().invoke(app, [*args[:6], "--seeds", "9-1"], env=wide)
    assert bad.exit_code == 2 and "cannot read seeds" in bad.output
    bad = CliRunner().invoke(app, [*args[:4], "--methods", "nope", "--out", str(tmp_path / "x"), "--quiet"], env=wide)
    assert bad.exit_code == 2 and "unknown model 'nope'" in bad.output


def test_parsing_and_validation():
    assert parse.parse_seeds("0-2,7") == [0, 1, 2, 7] and parse.parse_seeds([3, 1, 3]) == [1, 3]
    assert parse.parse_names("POAM, ovc++,poam", "method") == ["poam", "ovc++"]
    for bad in ("", "3-1", "a"):
        with pytest.raises(ValueError, match="seed"):
            parse.parse_seeds(bad)
    with pytest.raises(ValueError, match="unknown model"):
        poam.Experiment("t", "t", ["valley-ridges"], ["nope"], [0]).specs()
    with pytest.raises(ValueError, match="unknown environment"):
        poam.Experiment("t", "t", ["atlantis"], ["poam"], [0]).specs()
    with pytest.raises(ValueError, match="unknown mission option"):
        poam.Experiment("t", "t", ["valley-ridges"], ["poam"], [0], {"budjet": 10}).specs()
    environments = parse.parse_names("Coast,/data/MyField.npy", "environment", poam.ENVIRONMENTS)
    assert environments == ["coast", "/data/MyField.npy"]
    with pytest.raises(ValueError, match="robustness setting"):
        poam.specs(poam.RobustnessOptions(settings="sideways"))
    assert poam.label("z-opt") == "POAM-Z-OPT" and poam.label("ssgp++") == "SSGP++"


def test_reproduction_benches_pin_the_papers_model_settings():
    from onlinegp.experiments.bench.poam import Experiment

    exp = Experiment("t", "t", ["valley-ridges"], ["poam", "ssgp++", "z-opt"], [0], {"budget": 700})
    options = {spec.run_id.split("/")[1]: spec.config["model_options"] for spec in exp.specs()}
    assert options == {
        "poam": {"noise": 1.0, "sketch": None, "pretrain_steps": 0},
        "ssgp++": {"noise": 1.0},
        "z-opt": {"noise": 1.0, "sketch": None, "pretrain_steps": 0},
    }
    mine = Experiment("t", "t", ["valley-ridges"], ["poam"], [0], {"budget": 700, "model_options": {"noise": 0.3}})
    assert mine.specs()[0].config["model_options"] == {"noise": 0.3, "sketch": None, "pretrain_steps": 0}
    plain = Experiment("t", "t", ["valley-ridges"], ["poam"], [0], {"budget": 700}, paper_options=False)
    assert plain.specs()[0].config["model_options"] == {}


def test_paper_comparison_cells_and_tolerance(tmp_path):
    """paper.md puts each cell beside Chen et al. 2024's Table I: Δ in the paper's std and the tolerance 2σ + 3% of
    the mean (SMSE) or 2σ + 0.03 (MSLL); time as a ratio to POAM's."""
    paper = poam.PAPER_TABLE1["paper-env2"]
    mean, std = paper["poam"]["smse"]
    inside = mean + 2 * std + 0.029 * mean
    outside = 0.0840 + 2 * 0.0045 + 0.031 * 0.0840  # SSGP++'s cell: 0.0840 ± 0.0045
    table = [
        {"setting": "", "env": "paper-env2", "method": "poam", "seeds": 10, "smse_mean": inside, "smse_std": 0.0,
         "msll_mean": -1.46 - 0.08 - 0.031, "msll_std": 0.0, "update_time_mean": 2.0},
        {"setting": "", "env": "paper-env2", "method": "ssgp++", "seeds": 10, "smse_mean": outside,
         "smse_std": 0.0, "msll_mean": -1.34 + 0.08 + 0.029, "msll_std": 0.0, "update_time_mean": 3.0},
        {"setting": "", "env": "valley-ridges", "method": "poam", "seeds": 10, "smse_mean": 1.0, "smse_std": 0.0,
         "msll_mean": 0.0, "msll_std": 0.0, "update_time_mean": 1.0},
    ]  # fmt: skip
    files = poam.write_paper_comparison(table, tmp_path)
    rows = {r["method"]: r for r in csv.DictReader(open(files["paper_csv"]))}
    assert set(rows) == {"poam", "ssgp++"}  # no paper cell for valley-ridges
    assert rows["poam"]["smse_within"] == "True" and rows["poam"]["msll_within"] == "False"
    assert rows["ssgp++"]["msll_within"] == "True" and rows["ssgp++"]["smse_within"] == "False"
    assert float(rows["ssgp++"]["smse_sigmas"]) == pytest.approx((outside - 0.0840) / 0.0045)
    assert float(rows["ssgp++"]["time_ratio_ours"]) == pytest.approx(1.5)
    assert float(rows["ssgp++"]["time_ratio_paper"]) == pytest.approx(1.57 / 0.843)
    assert "| paper-env2 | POAM | 10 |" in files["paper_md"].read_text()
    lonely = [dict(table[1])]  # a sweep of one method has no POAM time to divide by
    text = poam.write_paper_comparison(lonely, tmp_path)["paper_md"].read_text()
    assert "| paper-env2 | SSGP++ | 10 |" in text and "| – | 1.86 |" in text and "nan" not in text


def test_paper_model_options_are_the_paper_implementations():
    """σ² starts at 1.0 for every method; POAM's family runs the exact M-step without pre-training; OVC moves Z with
    θ's persistent Adam as the paper's code does (benchmarks/perf/results/ovc_reference.md), OVC++ has no Z steps."""
    from onlinegp.experiments.protocols import paper_model_options
    from onlinegp.models.registry import make_recorded_model
    from onlinegp.training import Training, training_options

    assert paper_model_options("ssgp++") == {"noise": 1.0}
    assert paper_model_options("poam") == {"noise": 1.0, "sketch": None, "pretrain_steps": 0}
    assert paper_model_options("ovc") == {"noise": 1.0, "sketch": None, "pretrain_steps": 0, "z_steps": "shared"}
    assert "z_steps" not in paper_model_options("ovc++")
    for method in ("ssgp++", "ovc", "ovc++", "poam", "full"):
        options = make_recorded_model(method, 2, **paper_model_options(method)).options()  # the configs' flat names
        asked = training_options(paper_model_options(method), warn=False)  # pretrain_steps=0: the spec's pretrain.steps
        assert all(options[k] == v for k, v in asked.items() if k != "training")
        assert options["training"].updated(asked.get("training", Training())) == options["training"]


def test_time_curves_are_median_and_quartiles_never_below_zero(tmp_path):
    """Update times are positive and skewed (one loaded epoch of a seed takes 100 s): the curve is their median and
    interquartile band, which stays within the data, where mean - std fell below zero; other metrics stay mean ± std."""
    samples = np.array([10.0, 20.0, 30.0])
    times = [np.array([0.5, 0.6, 0.7]) * (1 + seed / 10) for seed in range(9)] + [np.array([0.5, 100.0, 0.7])]
    records = [
        poam.RunRecord("", "env", "poam", seed, tmp_path, {"num_samples": samples, "update_time": t, "smse": t})
        for seed, t in enumerate(times)
    ]
    values = np.stack(times)
    assert (values.mean(0) - values.std(0)).min() < 0  # what the ±std band drew
    (time,) = poam.curves(records, "update_time", num_points=3).values()
    assert time["band"] == "median, 25-75% of seeds" and time["seeds"] == 10
    np.testing.assert_allclose(time["centre"], np.median(values, 0))
    assert (time["low"] > 0).all() and (time["low"] <= time["centre"]).all() and (time["centre"] <= time["high"]).all()
    assert time["high"].max() < 100  # the one slow epoch does not stretch the band
    (smse,) = poam.curves(records, "smse", num_points=3).values()
    np.testing.assert_allclose(smse["mean"], values.mean(0))
    np.testing.assert_allclose(smse["std"], values.std(0))


#: the options each class fixes for its parent, which every kept mission record must state as they ran
FORCED_OPTIONS = {
    "SSGPpp": {"optimizer": "adam"},
    "OVC": {"noise_weighted": True},
    "OVCpp": {"noise_weighted": True, "optimize_inducing": False},
    "FULL": {"terms": "all"},
}


def test_kept_mission_records_state_the_options_their_class_fixed():
    """0.1.0 recorded each option's constructor default as found in the signatures, not the value a subclass passed
    to its parent (SSGP++ as L-BFGS, OVC++ moving Z, ...); the kept records were corrected to what ran."""
    results = Path(__file__).resolve().parents[3] / "results"
    checked = 0
    for path in sorted(results.glob("poam-*/*/config.json")):
        model = json.loads(path.read_text())["model"]
        options = model["options"]
        training = options.get("training") if isinstance(options.get("training"), dict) else {}
        for key, value in FORCED_OPTIONS.get(model["class"], {}).items():
            assert options.get(key, training.get(key)) == value, f"{path}: {key}"
            checked += 1
    assert checked >= 4 * 83
