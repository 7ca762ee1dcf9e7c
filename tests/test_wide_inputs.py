"""Defaults on wide inputs (32 columns, two of them relevant: pumadyn32nm): the streaming models must learn, not stay
at the mean predictor (test RMSE ≈ 1 in standardised units), as they did with the 2-D mapping length-scale start."""

import numpy as np
import pytest

from onlinegp import health, make_model
from onlinegp.bench.defaults import scores, split_data


def stream(model, train_size=400, batch=200):
    X, y, X_test, y_test = split_data("pumadyn32nm", 0, train_size, 300)
    for start in range(0, len(X), batch):
        model.update(X[start : start + batch], y[start : start + batch])
    return scores(y_test, model.predict(X_test))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["osgpr", "vips"])
def test_defaults_learn_on_32_inputs(name):
    assert stream(make_model(name, seed=0))["rmse"] < 0.6


def test_the_old_length_scale_start_stays_at_the_mean_predictor():
    """The failure the default fixes (and so a check that the test above can fail): started at 0.3 in 32 dimensions
    every pair of points is ~10 length-scales apart and the length-scale gradients vanish."""
    model = make_model("osgpr", seed=0, kernel_options={"lengthscale": 0.3, "lengthscale_prior": None})
    assert stream(model)["rmse"] > 0.9
    np.testing.assert_allclose(model.kernel.base_kernel.lengthscale.detach().numpy(), 0.3, rtol=1e-3)


def first_batch_lengthscales(**kernel_options):
    X, y, _, _ = split_data("pumadyn32nm", 0, 2000, 1000)  # the first batch of `bench defaults`, split 0
    model = make_model("osgpr", seed=0, kernel_options=kernel_options)
    model.update(X[:100], y[:100])
    return model.kernel.base_kernel.lengthscale.detach().flatten()


def test_the_length_scale_prior_keeps_inputs_switchable():
    """Fitted on a first batch of 100 points in 32 dimensions, an unpenalised length-scale runs off beyond 1e4,
    where its gradient vanishes and the input stays switched off for the rest of the stream (OSGPR's RMSE then
    stayed at 1.36x the exact GP's); the default log-normal prior keeps every length-scale where it can come back."""
    assert first_batch_lengthscales(lengthscale_prior=None).max() > 1e4
    assert first_batch_lengthscales().max() < 1e3


def bike_lengthscales_after_two_batches():
    X, y, _, _ = split_data("bike", 0, 2000, 1000)  # `bench defaults`, split 0: 17 inputs, several discrete
    model = make_model("osgpr", seed=0)
    for start in (0, 100):
        report = model.update(X[start : start + 100], y[start : start + 100])
    return model.kernel.base_kernel.lengthscale.detach().flatten(), report


def test_lbfgs_never_accepts_a_length_scale_too_short_to_evaluate():
    """On bike's second batch a line search tried length-scales of 1e-16 on two discrete columns: there the
    kernel's squared distances lose all precision (k(z, z) evaluated to 0), the bound was garbage that looked best,
    and the next update failed to factorise K_uu. Such trial points are now infeasible."""
    lengthscales, report = bike_lengthscales_after_two_batches()
    assert lengthscales.min() >= health.LENGTHSCALE_RANGE[0]
    assert not report.warnings


def test_without_the_feasibility_check_bike_collapses(monkeypatch):
    monkeypatch.setattr(health, "lengthscales_usable", lambda kernel: True)
    lengthscales, report = bike_lengthscales_after_two_batches()
    assert lengthscales.min() < 1e-10
    assert any("ran away" in w for w in report.warnings)
