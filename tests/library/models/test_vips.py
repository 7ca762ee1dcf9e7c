"""The VIPS model (paper 001): size follows the data, matches the exact GP as δ → 0, streams (the shared
protocol, checkpoints among it: test_conformance.py)."""

import json

import numpy as np
import pytest

from onlinegp.data import batch_indices, synthetic
from onlinegp.experiments.stream import StreamConfig, run_stream
from onlinegp.models import ExactGP
from onlinegp.models.registry import make_model
from onlinegp.models.vips import OIPSGP, VIPS, ConditionalVarianceGP
from onlinegp.training import Training

# paper 001 appendix F.1: SE kernel, length-scale 0.5 and variance 1 on x ∈ [0, 10] (0.1 once scaled to [-1, 1])
SYNTH = dict(kernel_options={"lengthscale": 0.1}, noise=0.5, x_bounds=[[0.0], [10.0]], training=Training(steps=40))


def sizes(model, ds):
    return [model.update(ds.X[b], ds.y[b]).num_inducing for b in batch_indices(ds)]


def test_expanding_domain_grows_linearly():
    """Synthetic dataset 1 (sorted inputs): every batch is new territory, M grows about linearly."""
    m = np.array(sizes(VIPS(1, **SYNTH), synthetic(1, seed=0)), dtype=float)
    steps = np.diff(m)
    assert (steps > 0).all()
    fit = np.polyfit(np.arange(10), m, 1)
    resid = m - np.polyval(fit, np.arange(10))
    assert 1 - resid.var() / m.var() > 0.95  # close to a straight line
    assert m[-1] > 4 * m[0]


def test_same_distribution_levels_off():
    """Synthetic dataset 2 (shuffled): after a few batches there is nothing new to learn, M stops growing."""
    m = np.array(sizes(VIPS(1, **SYNTH), synthetic(2, seed=0)), dtype=float)
    assert m[-1] - m[5] <= 0.15 * m[-1]  # the last five batches add little
    assert m[5] - m[0] > m[-1] - m[5]


def test_identical_batch_twice_adds_far_fewer_points():
    ds = synthetic(2, seed=1)
    for steps in (0, 40):  # fixed θ, and θ refitted by L-BFGS
        model = VIPS(1, **{**SYNTH, "training": Training(steps=steps)})
        first = model.update(ds.X, ds.y)
        second = model.update(ds.X, ds.y)
        assert first.extra["num_added"] >= 10
        assert second.extra["num_added"] <= 0.2 * first.extra["num_added"]


def test_tiny_delta_matches_the_exact_gp():
    g = np.random.default_rng(0)
    X = g.uniform(-3, 3, (120, 1))
    y = np.sin(2 * X[:, 0]) + 0.1 * g.standard_normal(120)
    Xs = np.linspace(-3, 3, 200)[:, None]
    common = dict(kernel_options={"lengthscale": 0.3}, noise=0.05, x_bounds=[[-3.0], [3.0]], y_stats=(0.0, 1.0))
    vips = VIPS(1, delta=1e-9, training=Training(steps=0), **common)
    exact = ExactGP(1, kernel="rbf", training=Training(steps=0), **common)
    for b in np.array_split(np.argsort(X[:, 0]), 6):
        vips.update(X[b], y[b])
        exact.update(X[b], y[b])
    pv, pe = vips.predict(Xs), exact.predict(Xs)
    assert float((pv.mean - pe.mean).abs().max()) < 1e-3
    assert float((pv.var_y - pe.var_y).abs().max()) < 1e-3
    truth = np.sin(2 * Xs[:, 0])
    rv, re = (float(np.sqrt(np.mean((p.mean.numpy() - truth) ** 2))) for p in (pv, pe))
    assert rv == pytest.approx(re, rel=0.01)
    coarse = VIPS(1, delta=0.05, training=Training(steps=0), **common)
    for b in np.array_split(np.argsort(X[:, 0]), 6):
        coarse.update(X[b], y[b])
    assert coarse.num_inducing < vips.num_inducing


def test_report_and_options():
    ds = synthetic(3, seed=0)
    parts = batch_indices(ds)
    model = VIPS(1, **SYNTH)
    for b in parts[:3]:
        report = model.update(ds.X[b], ds.y[b])
    for key in ("num_added", "upper_bound", "reference_bound", "lower_bound_at_selection", "noise_log_lik", "alpha"):
        assert key in report.extra
    assert report.extra["reference_bound"] - report.extra["lower_bound_at_selection"] <= report.extra["alpha"] + 1e-9
    assert report.extra["reference_bound"] <= report.extra["upper_bound"] + 1e-9
    assert float(model.target_moments[0]) == sum(len(b) for b in parts[:3])
    with pytest.raises(ValueError, match="chooses its own"):
        VIPS(1, inducing="pivoted")


def test_registered_models_and_baselines_run():
    ds = synthetic(2, seed=2)
    for name, cls in (("vips", VIPS), ("conditional-variance", ConditionalVarianceGP), ("oips", OIPSGP)):
        model = make_model(name, 1, **{**SYNTH, "training": Training(steps=5)})
        assert isinstance(model, cls)
        ms = sizes(model, ds)
        assert ms[-1] >= ms[0] >= 1


def test_stream_run_writes_rows_and_files(tmp_path):
    config = StreamConfig(
        "concrete",
        "vips",
        batches=4,
        max_size=240,
        seed=1,
        options={"kernel_options": {"lengthscale": 1.0, "ard": False}, "num_steps": 40},
    )
    rows = run_stream(config, tmp_path / "run")
    assert [r["batch"] for r in rows] == [1, 2, 3, 4]
    assert rows[-1]["num_data"] == 192
    assert all(r["num_inducing"] >= 1 and np.isfinite(r["rmse"]) and np.isfinite(r["nlpd"]) for r in rows)
    assert rows[-1]["rmse"] < 1.0  # better than predicting the mean
    for f in ("config.json", "metrics.csv", "metrics.json", "metrics.png"):
        assert (tmp_path / "run" / f).is_file()
    assert json.loads((tmp_path / "run" / "config.json").read_text())["model"] == "vips"
    exact = run_stream(
        StreamConfig(
            "concrete",
            "exact",
            batches=4,
            max_size=240,
            seed=1,
            eval_batches=[4],
            options={"kernel_options": {"lengthscale": 1.0, "ard": False}},
        )
    )
    assert len(exact) == 1 and exact[0]["num_inducing"] == 192
    assert rows[-1]["rmse"] < 1.3 * exact[0]["rmse"]


def test_stream_keeps_the_finished_batches_of_an_interrupted_run(tmp_path):
    config = StreamConfig("concrete", "osgpr", batches=4, max_size=200, seed=0, options={"num_steps": 5})

    def interrupt(row, model, x):
        if row["batch"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_stream(config, tmp_path / "run", on_batch=interrupt)
    lines = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert len(lines) == 1 + 2 and lines[2].startswith("2,")
