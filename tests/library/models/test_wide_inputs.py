"""Defaults on wide inputs (32 columns, two of them relevant: pumadyn32nm): the streaming models must learn, not stay
at the mean predictor (test RMSE ≈ 1 in standardised units), as they did with the 2-D mapping length-scale start."""

import numpy as np
import pytest

from onlinegp import health, make_model
from onlinegp.experiments.protocols import scores, split_data
from onlinegp.training import WIDE_STEP_FACTOR, steps_for_width


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


@pytest.mark.pinned
def test_the_length_scale_prior_keeps_inputs_switchable(monkeypatch):
    """Fitted on a first batch of 100 points in 32 dimensions, an unpenalised length-scale ran off beyond 1e4, where
    its gradient vanishes and the input stayed switched off for the rest of the stream (OSGPR's RMSE then stayed at
    1.36x the exact GP's); the default log-normal prior keeps every length-scale where it can come back. The runaway
    was found before L-BFGS rejected trial length-scales below the usable floor; that check alone changes this
    batch's line searches enough to stop at 5.2, so the failure is reproduced with it switched off. How far it runs
    follows the CPU's last bits (1.6e6 with AVX2 kernels, 1.8e3 with ATen's default ones, 4.1e6 in the portable
    mode; the prior's 3.35 on all three), so the test asks for two orders of magnitude beyond the prior's."""
    with_prior = first_batch_lengthscales().max()
    assert with_prior < 10
    monkeypatch.setattr(health, "lengthscales_usable", lambda kernel: True)
    assert first_batch_lengthscales(lengthscale_prior=None).max() > 100 * with_prior
    assert first_batch_lengthscales().max() < 10


def bike_lengthscales_after_two_batches(**options):
    X, y, _, _ = split_data("bike", 0, 2000, 1000)  # `bench defaults`, split 0: 17 inputs, several discrete
    model = make_model("osgpr", seed=0, **options)
    for start in (0, 100):
        report = model.update(X[start : start + 100], y[start : start + 100])
    return model.kernel.base_kernel.lengthscale.detach().flatten(), report


@pytest.mark.parametrize("old_noise", ["fixed", "current"])
def test_lbfgs_never_accepts_a_length_scale_too_short_to_evaluate(old_noise):
    """On bike's second batch a line search tried length-scales of 1e-16 on two discrete columns: there the
    kernel's squared distances lose all precision (k(z, z) evaluated to 0), the bound was garbage that looked best,
    and the next update failed to factorise K_uu. Such trial points are now infeasible."""
    lengthscales, report = bike_lengthscales_after_two_batches(old_noise=old_noise)
    assert lengthscales.min() >= health.MIN_USABLE_LENGTHSCALE
    assert not report.warnings


def test_without_the_feasibility_check_bike_collapses(monkeypatch):
    """Found with the old data charged at the σ² of their batch (``old_noise='fixed'``, the default before
    0.4.0); under the current default this batch's line searches happen to stay clear of it."""
    monkeypatch.setattr(health, "lengthscales_usable", lambda kernel: True)
    lengthscales, report = bike_lengthscales_after_two_batches(old_noise="fixed")
    assert lengthscales.min() < 1e-10
    assert any("ran away" in w for w in report.warnings)


@pytest.mark.parametrize("name", ["ssgp++", "poam", "ovc++"])
def test_adam_stepped_methods_take_five_times_the_steps_above_three_inputs(name):
    assert make_model(name, input_dim=2).num_steps == 10  # the papers' mapping setting
    assert make_model(name, input_dim=8).num_steps == 10 * WIDE_STEP_FACTOR
    assert make_model(name, input_dim=8, num_steps=10).num_steps == 10  # an explicit value is kept
    lazy = make_model(name, seed=0)
    X, y, _, _ = split_data("concrete", 0, 100, 50)  # 8 inputs
    lazy.update(X[:20], y[:20])
    assert lazy.num_steps == 10 * WIDE_STEP_FACTOR


def test_steps_for_width_and_osvgp_keeps_its_per_point_rule(monkeypatch):
    import onlinegp.models.osvgp as osvgp

    assert steps_for_width(7, 3) == 7 and steps_for_width(7, 4) == 7 * WIDE_STEP_FACTOR
    taken = []
    real = osvgp.gradient_steps
    monkeypatch.setattr(
        osvgp, "gradient_steps", lambda opts, f, steps, **kw: taken.append(steps) or real(opts, f, 0, **kw)
    )
    X, y, _, _ = split_data("concrete", 0, 100, 50)
    make_model("osvgp", seed=0).update(X[:40], y[:40])
    assert taken == [4]  # one step per 10 points of the batch at any width (five times diverged on concrete)
