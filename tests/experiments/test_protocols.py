"""The shared data protocols (onlinegp.experiments.protocols): the benches run them, the studies import them from there."""

import json

import numpy as np
import pytest

from onlinegp.experiments import protocols
from onlinegp.experiments.bench import defaults, fleet, poam, wgpr, wiski
from onlinegp.experiments.protocols import bathymetry_stream, defaults_stream, lawnmower_path, two_regime_toy


def test_the_benches_run_the_protocols_of_this_module():
    """One definition each: the benches hold the protocols' objects, not copies."""
    assert wgpr.SETTINGS is protocols.WGPR_SETTINGS and wgpr.MODEL_FILE == protocols.WGPR_MODEL_FILE
    assert (wgpr.BATCH_SIZE, wgpr.NUM_INDUCING) == (protocols.WGPR_BATCH_SIZE, protocols.WGPR_NUM_INDUCING)
    assert wiski.bo_problem is protocols.bo_problem and wiski.set_steps is protocols.set_steps
    assert poam.paper_model_options is protocols.paper_model_options and fleet.sign_test is protocols.sign_test
    assert defaults.defaults_stream is protocols.defaults_stream
    # the sweeps' jobs keep their names: a kept run's spec.json records module:function for `bench verify`
    assert (wgpr.run_job.__module__, defaults.defaults_job.__module__) == (wgpr.__name__, defaults.__name__)


def test_toy_and_bathymetry_streams():
    train, test = two_regime_toy(n_train=500, n_test=50, seed=3)
    assert train.X.shape == (500, 1) and np.all(np.diff(train.X[:, 0]) >= 0)
    assert test.meta["f"].shape == (50,)
    assert np.std(test.y - test.meta["f"]) == pytest.approx(0.25, rel=0.3)
    path = lawnmower_path((-30, 30, -30, 30), 4, 1000)
    steps = np.linalg.norm(np.diff(path, axis=0), axis=1)
    spacing = (4 * 60 + 3 * 20) / 999  # equally spaced in arc length (chords at the corners are shorter)
    assert np.median(steps) == pytest.approx(spacing, rel=1e-9) and steps.max() <= spacing * (1 + 1e-9)
    assert path[0].tolist() == [-30, -30] and path[-1].tolist() == [30, -30]
    survey, grid = bathymetry_stream(num_samples=400)
    assert survey.X.shape == (400, 2) and grid.X.shape == (2500, 2)


def test_defaults_stream_adds_a_studys_options_to_the_streamed_method_alone(tmp_path):
    config = dict(dataset="concrete", split=0, train_size=100, test_size=50, batch_size=50, method="osgpr")
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir(), (tmp_path / "c").mkdir()
    plain = defaults.defaults_job(config, tmp_path / "a")
    timeless = lambda row: {k: v for k, v in row.items() if k != "update_time"}  # noqa: E731
    assert timeless(defaults_stream(config, tmp_path / "b", {})) == timeless(plain)  # the same numbers
    varied = defaults_stream(config, tmp_path / "c", {"num_inducing": 7})
    assert json.loads((tmp_path / "c" / "model.json").read_text())["options"]["num_inducing"] == 7
    assert json.loads((tmp_path / "a" / "model.json").read_text())["options"]["num_inducing"] != 7
    assert varied["num_inducing"] <= 7 and np.isfinite(varied["rmse"])
