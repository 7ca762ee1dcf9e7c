"""``onlinegp bench defaults``: the protocol, the table's arithmetic, and a small end-to-end sweep."""

import json
from dataclasses import replace

import numpy as np
import pytest
from typer.testing import CliRunner

from onlinegp.experiments.bench.defaults import (
    BENCHES,
    EXACT_STARTS,
    METHODS,
    TARGETS,
    DefaultsOptions,
    defaults_job,
    summarise,
)
from onlinegp.experiments.bench.runner import RunnerOptions
from onlinegp.experiments.cli import app
from onlinegp.experiments.protocols import split_data


def test_split_is_standardised_with_the_training_statistics():
    X, y, X_test, y_test = split_data("concrete", 0, 500, 300)
    assert (len(X), len(X_test)) == (500, 300)
    np.testing.assert_allclose(X.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(X.std(0), 1, atol=1e-12)
    assert abs(y.mean()) < 1e-12 and abs(y.std() - 1) < 1e-12
    assert abs(y_test.mean()) > 1e-6  # the test points are scaled with the training statistics, not their own
    X2, *_ = split_data("concrete", 1, 500, 300)
    assert not np.allclose(X, X2)  # splits differ


def test_small_sets_keep_most_points_for_training():
    X, _, X_test, _ = split_data("concrete", 0, 2000, 1000)  # 1030 points
    assert (len(X), len(X_test)) == (1030 - 412, 412)


def test_summary_ratios_and_targets():
    exact = {"rmse": 0.5, "nlpd": 0.2, "worst_nlpd": 0.2, "update_time": 1.0}
    good = {"rmse": 0.6, "nlpd": 0.4, "worst_nlpd": 3.0, "update_time": 2.0, "num_inducing": 100}
    spiky = {**good, "worst_nlpd": 11.0}  # fine at the end, but an NLPD above 10 on the way
    results = {
        ("d", "exact", 0): exact,
        ("d", "osgpr", 0): good,
        ("d", "vips", 0): spiky,
        ("d", "osvgp", 0): {**good, "rmse": 0.7},  # ratio 1.4 > 1.25
        ("d", "poam", 0): {**good, "rmse": 0.7},  # ratio 1.4 <= 1.5
        ("d", "wgpr", 1): good,  # no exact GP for this split: left out
    }
    table = {r["method"]: r for r in summarise(results)}
    assert set(table) == {"osgpr", "vips", "osvgp", "poam"}
    assert table["osgpr"]["rmse_ratio"] == pytest.approx(1.2)
    assert table["osgpr"]["nlpd_diff"] == pytest.approx(0.2)
    assert table["osgpr"]["meets_target"] and table["poam"]["meets_target"]
    assert not table["vips"]["meets_target"] and not table["osvgp"]["meets_target"]
    assert TARGETS["poam"] == (1.5, 0.5) and TARGETS["osgpr"] == (1.25, 0.3)
    assert set(TARGETS) == set(METHODS)


def test_small_sweep_end_to_end_and_resume(tmp_path):
    out = tmp_path / "runs"
    options = DefaultsOptions(
        datasets=["concrete"],
        methods=["osgpr"],
        splits=1,
        train_size=150,
        test_size=80,
        batch_size=50,
        exact_iterations=5,
    )
    table = BENCHES["defaults"].start(options, out, RunnerOptions(quiet=True))
    assert [r["method"] for r in table] == ["osgpr"]
    row = table[0]
    assert row["splits"] == 1 and np.isfinite(row["rmse_ratio"]) and row["exact_rmse"] < 1.0
    metrics = (out / "concrete/osgpr/split0/metrics.csv").read_text().splitlines()
    assert len(metrics) == 1 + 3  # header + one row per batch of 50
    assert "osgpr" in (out / "table.md").read_text()
    first = json.loads((out / "results.json").read_text())
    assert BENCHES["defaults"].start(options, out, RunnerOptions(quiet=True)) == first  # resumed: same table


def test_cli_rejects_an_unknown_method(tmp_path):
    result = CliRunner().invoke(
        app, ["bench", "defaults", "--methods", "nope", "--out", str(tmp_path / "o"), "--no-results", "--quiet"]
    )
    assert result.exit_code != 0
    assert "unknown method" in result.output


def test_the_batch_sparse_reference_has_a_row_but_no_target(tmp_path):
    out = tmp_path / "runs"
    options = DefaultsOptions(["concrete"], ["osgpr", "sgpr"], 1, train_size=150, test_size=80, batch_size=50)
    table = BENCHES["defaults"].start(replace(options, exact_iterations=5), out, RunnerOptions(quiet=True))
    rows = {r["method"]: r for r in table}
    assert set(rows) == {"osgpr", "sgpr"} and rows["sgpr"]["meets_target"]
    # one batch of all 150 points: the whole training set absorbed at once
    metrics = (out / "concrete/sgpr/split0/metrics.csv").read_text().splitlines()
    assert len(metrics) == 2 and metrics[1].split(",")[1] == "150"
    assert "batch SGPR" in (out / "table.md").read_text()


def test_the_exact_reference_keeps_the_better_of_its_starts(tmp_path):
    config = dict(dataset="concrete", split=0, train_size=150, test_size=80, batch_size=50, exact_iterations=5)
    fits = {}
    for starts in (["default"], ["sgpr"], list(EXACT_STARTS)):
        run_dir = tmp_path / "+".join(starts)
        run_dir.mkdir()
        fits["+".join(starts)] = defaults_job(config | {"method": "exact", "exact_starts": starts}, run_dir)
    both = fits["default+sgpr"]
    assert both["objective"] == max(fits["default"]["objective"], fits["sgpr"]["objective"])
    assert both["rmse"] == fits[both["start"]]["rmse"]
