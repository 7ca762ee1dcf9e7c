"""The checks every update runs (onlinegp.health): silent on a healthy stream, loud on each failure they name."""

import logging

import gpytorch
import numpy as np
import pytest
import torch

from onlinegp import health, make_model
from onlinegp.kernels import make_kernel
from onlinegp.linalg import JitterLog, cholesky


def sine_batches(n_batches=5, size=40, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n_batches):
        x = rng.uniform(-3, 3, (size, 2))
        yield x, np.sin(x[:, 0]) * np.cos(x[:, 1]) + 0.05 * rng.standard_normal(size)


def test_a_healthy_stream_warns_nothing(caplog):
    model = make_model("osgpr", num_inducing=50, num_steps=20)
    with caplog.at_level(logging.WARNING, logger="onlinegp"):
        reports = [model.update(x, y) for x, y in sine_batches()]
    assert all(r.warnings == [] for r in reports)
    assert not [r for r in caplog.records if r.name == "onlinegp"]
    assert 0 < reports[-1].extra["batch_z2"] < 5  # held-out calibration of a good model
    assert reports[-1].extra["max_scaled_input"] <= 1.5


def test_inputs_far_outside_the_given_range_are_reported(caplog):
    model = make_model("osgpr", num_inducing=20, num_steps=0, x_bounds=[[-3, -3], [3, 3]])
    x, y = next(sine_batches())
    model.update(x, y)
    far = x.copy()
    far[:, 1] *= 40.0
    with caplog.at_level(logging.WARNING, logger="onlinegp"):
        report = model.update(far, y)
    assert any("outside the frozen range: column 1" in w for w in report.warnings)
    assert report.extra["max_scaled_input"] > health.INPUT_RANGE
    assert any("outside the frozen range" in r.getMessage() for r in caplog.records)


def test_an_overconfident_prediction_is_reported():
    model = make_model("osgpr", num_inducing=20, num_steps=0, noise=1e-4)
    x, y = next(sine_batches())
    model.update(x, y)
    report = model.update(x, y + 50.0)  # same inputs, targets 50 standard deviations off
    assert any("overconfident predictions" in w for w in report.warnings)
    assert report.extra["batch_z2"] > health.MAX_Z2


def test_calibration_threshold():
    mean, ys = torch.zeros(20, dtype=torch.float64), torch.ones(20, dtype=torch.float64)
    assert health.calibration(mean, torch.full_like(ys, 1.0), ys)[0] == []
    found, numbers = health.calibration(mean, torch.full_like(ys, 1e-3), ys)
    assert numbers["batch_z2"] == pytest.approx(1e3) and "collapsed" in found[0]


def test_runaway_hyperparameters():
    kernel = make_kernel("rbf", 2)
    assert health.runaway(kernel) == []
    kernel.outputscale = 1e5
    assert any("output scale" in w for w in health.runaway(kernel))
    kernel = make_kernel("rbf", 2)
    kernel.base_kernel.lengthscale = torch.tensor([[0.5, 1e6]])  # one input switched off by ARD: fine
    assert health.runaway(kernel) == []
    kernel.base_kernel.lengthscale = torch.tensor([[1e5, 1e6]])  # every input switched off: a constant model
    assert any("length-scales" in w for w in health.runaway(kernel))
    kernel.base_kernel.lengthscale = torch.tensor([[3.3e3, 3.3e3]])  # 1e5 m on a survey of half-range 30 m
    assert any("length-scales" in w for w in health.runaway(kernel))
    kernel.base_kernel.lengthscale = torch.tensor([[20.0, 50.0]])  # long but not flat: a smooth trend
    assert health.runaway(kernel) == []
    kernel.base_kernel.lengthscale = torch.tensor([[1e-5, 1.0]])
    assert any("length-scales" in w for w in health.runaway(kernel))
    assert health.runaway(None) == []


def test_single_point_updates_skip_the_calibration_check():
    model = make_model("osgpr", num_inducing=20, num_steps=0)
    x, y = next(sine_batches())
    model.update(x, y)
    assert "batch_z2" not in model.update(x[:1], y[:1]).extra


def test_lengthscales_usable_marks_length_scales_below_the_floor():
    kernel = gpytorch.kernels.RBFKernel(ard_num_dims=3)
    kernel.lengthscale = torch.tensor([[1.0, 0.5, 2.0]])
    assert health.lengthscales_usable(kernel)
    kernel.lengthscale = torch.tensor([[1.0, health.MIN_USABLE_LENGTHSCALE / 2, 2.0]])
    assert not health.lengthscales_usable(kernel)
    assert health.lengthscales_usable(gpytorch.kernels.ScaleKernel(gpytorch.kernels.LinearKernel()))


class DentedRBF(gpytorch.kernels.RBFKernel):
    """An RBF kernel with 1e-3 taken off k(x, x): not positive semi-definite, so Choleskies need jitter."""

    def forward(self, x1, x2, diag=False, **params):
        K = super().forward(x1, x2, diag=diag, **params)
        same = (x1.unsqueeze(-2) - x2.unsqueeze(-3)).abs().sum(-1) == 0 if not diag else torch.ones_like(K, dtype=bool)
        return K - 1e-3 * same


def test_ill_conditioned_matrices_are_reported(caplog):
    x, y = next(sine_batches())
    healthy = make_model("exact", kernel=gpytorch.kernels.RBFKernel(), num_steps=0, noise=1e-6)
    assert healthy.update(x, y).warnings == []
    model = make_model("exact", kernel=DentedRBF(), num_steps=0, noise=1e-6)
    with caplog.at_level(logging.WARNING, logger="onlinegp"):
        report = model.update(x, y)
    found = [w for w in report.warnings if "ill-conditioned matrices" in w]
    assert found and model.jitter.max_relative > health.WARN_JITTER and report.jitter == model.jitter.max_jitter
    assert any("ill-conditioned matrices" in r.getMessage() for r in caplog.records)


def test_conditioning_threshold():
    log = JitterLog()
    log.record(1e-9, 1e-9)
    assert health.conditioning(log) == []
    cholesky(torch.ones(5, 5, dtype=torch.float64) - 1e-6 * torch.eye(5, dtype=torch.float64), log)
    assert log.count == 2 and log.max_relative == pytest.approx(1e-5)
    assert "up to 1.0e-05" in health.conditioning(log)[0]


def test_fit_thresholds():
    ys = torch.linspace(-1.0, 1.0, 50, dtype=torch.float64)
    assert health.fit(0.9 * ys, ys, absorbed=True)[0] == []
    found, numbers = health.fit(ys + 3.0, ys, absorbed=True)
    assert numbers["batch_error_after"] > health.MAX_ERROR_AFTER and "diverging fit: after absorbing" in found[0]
    assert health.fit(ys + 3.0, ys, absorbed=False)[0] == []  # held out: 26x the constant's error may be fair
    assert "before this batch" in health.fit(ys + 100.0, ys, absorbed=False)[0][0]
    assert health.fit(torch.full_like(ys, float("nan")), ys, absorbed=True)[0]  # NaN predictions too


def test_flagged_reads_the_checks_of_a_report_with_their_limits():
    ys = torch.linspace(-1.0, 1.0, 50, dtype=torch.float64)
    calm = health.fit(0.9 * ys, ys, absorbed=True)[1] | health.calibration(0.9 * ys, torch.ones_like(ys), ys)[1]
    assert not health.flagged(calm) and not health.flagged({})  # a first batch has no checks
    assert health.flagged(health.fit(ys + 3.0, ys, absorbed=True)[1])
    assert health.flagged(health.calibration(ys + 3.0, torch.full_like(ys, 1e-3), ys)[1])
    assert health.flagged({"batch_error_before": float("nan")})
    assert not health.flagged({"batch_error_before": health.MAX_ERROR_BEFORE, "other": 1e9})


def test_objective_threshold():
    assert health.objective(None, 10) == [] and health.objective(-30.0, 100) == []
    assert "absurd objective" in health.objective(-3e8, 100)[0]
    assert health.objective(float("nan"), 100) and health.objective(float("inf"), 100)


def test_a_diverging_model_warns_at_the_update_where_it_diverges():
    """Issue 35: O-SVGP's mean ran off at an update that no check reported (the batch's calibration was checked
    only before absorbing it). The fit to the very batch just absorbed is checked now."""
    model = make_model("osgpr", num_inducing=30, num_steps=5)
    batches = list(sine_batches(3))
    for x, y in batches[:2]:
        assert model.update(x, y).warnings == []
    predict = model._predict

    def running_away(xs, full_cov):  # the mean off by 1e3 (scaled units) once two batches are in
        mean, var, cov = predict(xs, full_cov)
        return mean + 1e3, var, cov

    model._predict = running_away
    report = model.update(*batches[2])
    assert any("diverging fit: after absorbing" in w for w in report.warnings)
    assert any("diverging fit: before" in w for w in report.warnings)


def test_a_first_batch_that_cannot_define_the_scaling_says_so():
    """Issue 35: a first batch of one point froze a unit half-range silently (on a 0.01-wide domain the exact GP
    then ends at RMSE 0.94 of the target's std instead of 0.024)."""
    x = np.random.default_rng(0).uniform(0.0, 0.01, (20, 2))
    y = np.sin(300 * x[:, 0])
    found = make_model("osgpr", num_inducing=10, num_steps=2).update(x[:1], y[:1]).warnings
    assert len(found) == 1 and "input column 0, input column 1, the targets" in found[0] and "x_bounds" in found[0]
    constant = x.copy()
    constant[:, 1] = 0.5
    found = make_model("osgpr", num_inducing=10, num_steps=2).update(constant, y).warnings
    assert len(found) == 1 and "input column 1 took a single value" in found[0]
    given = make_model("osgpr", num_inducing=10, num_steps=2, x_bounds=[[0, 0], [0.01, 0.01]], y_stats=(0.0, 1.0))
    assert given.update(x[:1], y[:1]).warnings == []


def test_size_threshold():
    assert health.size((None, 0), (None, 10**6)) == []  # no inducing inputs (the exact GP)
    assert health.size((400, 450), (450, 499)) == []  # too few points yet
    assert health.size((500, 500), (500, 1000)) == []  # a fixed size: sparse from here on
    assert health.size((240, 500), (300, 600)) == []  # dense, but no longer growing with the data
    assert health.size((400, 500), (490, 600), bound=500) == []  # a capped size (POAM's M) stops growing there
    (warning,) = health.size((400, 500), (490, 600))
    assert (
        "no longer sparse: 490 inducing inputs for the 600 points seen, 90 of them new in this batch of 100" in warning
    )


def test_a_model_growing_with_its_data_is_reported(monkeypatch):
    monkeypatch.setattr(health, "DENSE_AFTER", 60)
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, (100, 6))
    y = np.sin(3 * X).sum(1)
    bounds = np.stack([-np.ones(6), np.ones(6)])
    growing = make_model("oips", rho=0.99, x_bounds=bounds)
    fixed = make_model("poam", num_inducing=90, num_steps=1, x_bounds=bounds)  # grows as fast, up to its M
    for start in range(0, 100, 20):
        grown, kept = (m.update(X[start : start + 20], y[start : start + 20]) for m in (growing, fixed))
        assert any("no longer sparse" in w for w in grown.warnings) == (grown.num_data >= 60)
        assert not any("no longer sparse" in w for w in kept.warnings)
    assert kept.num_inducing == 90 and grown.num_inducing > 90
