"""Metrics against hand-computed values (Rasmussen & Williams §2.5; POAM paper 000 §V-A)."""

import math

import numpy as np
import pytest
import torch

from onlinegp import metrics


def test_hand_computed_values():
    y = np.array([1.0, 2.0, 4.0])
    mean = np.array([1.0, 3.0, 2.0])
    var = np.array([1.0, 4.0, 0.5])
    assert metrics.rmse(y, mean) == pytest.approx(math.sqrt(5 / 3))
    assert metrics.mae(y, mean) == pytest.approx(1.0)
    assert metrics.smse(y, mean) == pytest.approx((5 / 3) / np.var([1.0, 2.0, 4.0]))
    nlpd = np.mean([0.5 * math.log(2 * math.pi * v) + 0.5 * (a - m) ** 2 / v for a, m, v in zip(y, mean, var)])
    assert metrics.nlpd(y, mean, var) == pytest.approx(nlpd)
    naive = np.mean([0.5 * math.log(2 * math.pi * 4.0) + 0.5 * (a - 2.0) ** 2 / 4.0 for a in y])
    assert metrics.msll(y, mean, var, 2.0, 2.0) == pytest.approx(nlpd - naive)
    allm = metrics.all_metrics(torch.tensor(y), torch.tensor(mean), torch.tensor(var), 2.0, 2.0)
    assert set(allm) == {"smse", "msll", "rmse", "nlpd", "mae"}
    assert allm["msll"] == pytest.approx(nlpd - naive)


def test_smse_of_mean_predictors():
    rng = np.random.default_rng(0)
    y_test = rng.normal(5.0, 3.0, 20_000)
    assert metrics.smse(y_test, np.full_like(y_test, y_test.mean())) == pytest.approx(1.0, abs=1e-12)
    y_train = rng.normal(5.0, 3.0, 20_000)  # same distribution: the training mean predicts SMSE ≈ 1
    assert metrics.smse(y_test, np.full_like(y_test, y_train.mean())) == pytest.approx(1.0, abs=0.01)
    assert metrics.smse(y_test, y_test) == 0.0


def test_msll_of_naive_model_is_zero():
    rng = np.random.default_rng(1)
    y_train = rng.normal(-2.0, 0.7, 500)
    y = rng.normal(0.0, 2.0, 300)
    m, s = float(y_train.mean()), float(y_train.std())
    assert metrics.msll(y, np.full(300, m), np.full(300, s**2), m, s) == pytest.approx(0.0, abs=1e-12)
    # a model that knows the truth exactly (tiny variance around it) beats the naive one
    assert metrics.msll(y, y, np.full(300, 1e-4), m, s) < -1


def test_calibration_and_errors():
    rng = np.random.default_rng(2)
    y = rng.normal(size=50_000)
    cal = metrics.calibration(y, np.zeros_like(y), np.ones_like(y))
    for level, frac in cal.items():
        assert frac == pytest.approx(level, abs=0.01)
    with pytest.raises(ValueError, match="same length"):
        metrics.rmse(np.ones(3), np.ones(4))


def test_msll_without_a_naive_model_is_nan_without_warnings():
    """One training point has no spread: the naive N(mean, var) is undefined, and no NumPy warning is printed."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.isnan(metrics.msll(np.array([1.0, 2.0]), np.array([1.0, 1.5]), np.array([0.1, 0.1]), 3.0, 0.0))
