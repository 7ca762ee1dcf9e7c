"""The integrated-variance (NIPV) planner: its scores against a dense exact-GP oracle, its choice, and a mission."""

import csv

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from onlinegp.experiments.cli import app
from onlinegp.experiments.simulator.planners import NIPVPlanner, _uniform, make_planner
from onlinegp.models import make_model

pytest.importorskip("botorch")
EXTENT = (-30.0, 30.0, -30.0, 30.0)
runner = CliRunner()


@pytest.fixture(scope="module")
def exact_model():
    """An exact RBF GP on 40 noisy samples of a smooth field over the extent (hyper-parameters learnt)."""
    rng = np.random.default_rng(0)
    X = torch.from_numpy(_uniform(EXTENT, 40, rng))
    y = torch.sin(X[:, 0] / 8) * torch.cos(X[:, 1] / 11) * 3 + 0.1 * torch.from_numpy(rng.standard_normal(40))
    model = make_model("exact", kernel="rbf", x_bounds=[[-30.0, -30.0], [30.0, 30.0]], seed=0)
    model.update(X, y)
    return model


def _rbf(model, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """k(a, b) of the model's ARD RBF kernel, written out: s² exp(-½ Σ_d ((a_d − b_d) / ℓ_d)²), scaled inputs."""
    lengthscale = model.kernel.base_kernel.lengthscale.detach().reshape(-1)
    diff = (a[:, None, :] - b[None, :, :]) / lengthscale
    return model.kernel.outputscale.detach() * torch.exp(-0.5 * diff.pow(2).sum(-1))


def _integrated_variance(model, X: torch.Tensor, mc: torch.Tensor) -> float:
    """Mean over ``mc`` of the exact GP's posterior variance of f given noisy observations at ``X`` (user units)."""
    Xs, Ms = model.scaler.x(X), model.scaler.x(mc)
    K = _rbf(model, Xs, Xs) + model.noise.detach() * torch.eye(Xs.shape[0], dtype=Xs.dtype)
    L = torch.linalg.cholesky(K)
    W = torch.linalg.solve_triangular(L, _rbf(model, Xs, Ms), upper=False)
    var = model.kernel.outputscale.detach() - W.pow(2).sum(0)
    return float(var.mean() * model.scaler.y_std**2)


def _dense_reductions(model, planner: NIPVPlanner, candidates: np.ndarray) -> np.ndarray:
    X = model.scaler.x_inverse(model.data.data[0])  # the buffer holds scaled inputs
    mc = torch.from_numpy(planner.mc_points)
    before = _integrated_variance(model, X, mc)
    return np.array(
        [before - _integrated_variance(model, torch.cat([X, torch.from_numpy(c)[None]]), mc) for c in candidates]
    )


def test_reductions_equal_a_dense_exact_gp_computation(exact_model):
    planner = NIPVPlanner(EXTENT, num_candidates=10, num_mc_points=300, seed=4, chunk_size=3)
    candidates = _uniform(EXTENT, 10, np.random.default_rng(1))
    got = planner.variance_reductions(exact_model, candidates)
    want = _dense_reductions(exact_model, planner, candidates)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-12)
    assert want.min() > 0 and np.ptp(want) > 1e-3 * want.max()  # informative: positive and not all alike
    # the model the planner scored is left as it was
    assert exact_model.num_data == 40


def test_picks_the_largest_reduction_without_distance_and_the_nearest_with_a_huge_weight(exact_model):
    pos = np.array([0.0, 0.0])
    far = NIPVPlanner(EXTENT, num_candidates=12, distance_weight=0.0, num_mc_points=200)
    goal = far.plan(exact_model, pos, np.random.default_rng(7))
    candidates = _uniform(EXTENT, 12, np.random.default_rng(7))  # the planner's draw
    np.testing.assert_array_equal(goal, candidates[np.argmax(_dense_reductions(exact_model, far, candidates))])
    near = NIPVPlanner(EXTENT, num_candidates=12, distance_weight=1e6, num_mc_points=200)
    nearest = candidates[np.argmin(np.hypot(*candidates.T))]
    np.testing.assert_array_equal(near.plan(exact_model, pos, np.random.default_rng(7)), nearest)


def test_deterministic_leaves_torch_generator_and_restores_state(exact_model):
    state = torch.get_rng_state()
    one = NIPVPlanner(EXTENT, num_candidates=6, num_mc_points=50, seed=2)
    goal = one.plan(exact_model, np.zeros(2), np.random.default_rng(3))
    assert torch.equal(torch.get_rng_state(), state)
    other = NIPVPlanner(EXTENT, num_candidates=6, num_mc_points=50, seed=9)
    assert not np.array_equal(other.mc_points, one.mc_points)
    other.load_state(one.state())
    np.testing.assert_array_equal(other.plan(exact_model, np.zeros(2), np.random.default_rng(3)), goal)
    with pytest.raises(ValueError, match="mc_points"):
        other.load_state({"mc_points": np.zeros((4, 3))})
    with pytest.raises(ValueError, match="num_mc_points"):
        NIPVPlanner(EXTENT, num_mc_points=0)


def test_make_planner_keeps_its_own_candidate_count():
    planner = make_planner("NIPV", EXTENT, num_candidates=2000, distance_weight=0.25)
    assert isinstance(planner, NIPVPlanner) and planner.num_candidates == 64 and planner.distance_weight == 0.25


def _rows(out):
    with open(out / "metrics.csv") as fh:
        return [{k: r[k] for k in ("epoch", "num_samples", "smse", "msll")} for r in csv.DictReader(fh)]


def test_mission_with_nipv_runs_and_resumes_exactly(tmp_path):
    base = ["mission", "--planner", "nipv", "--budget", "700", "--num-inducing", "30", "--num-steps", "1"]
    base += ["--seed", "3", "--quiet"]
    whole = runner.invoke(app, [*base, "--out", str(tmp_path / "whole")])
    assert whole.exit_code == 0, whole.output
    rows = _rows(tmp_path / "whole")
    assert len(rows) >= 3 and int(rows[-1]["num_samples"]) == 700 and float(rows[-1]["smse"]) < 1.0
    parts = tmp_path / "parts"
    stopped = runner.invoke(app, [*base, "--out", str(parts), "--stop-after-epochs", "2"])
    assert stopped.exit_code == 0, stopped.output
    resumed = runner.invoke(app, [*base, "--out", str(parts), "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert _rows(parts) == rows
