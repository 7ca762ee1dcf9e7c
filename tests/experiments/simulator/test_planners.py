"""Planners: the Bézier pilot survey, max-entropy choice of the best candidate, random and lawnmower planners."""

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from onlinegp.experiments.simulator.planners import (
    LawnmowerPlanner,
    MaxEntropyPlanner,
    RandomPlanner,
    bezier_control_points,
    bezier_curve,
    bezier_pilot,
    make_planner,
    random_pilot,
)

EXTENT = (-30.0, 30.0, -30.0, 30.0)


def _de_casteljau(P: np.ndarray, t: float) -> np.ndarray:
    P = P.copy()
    while len(P) > 1:
        P = (1 - t) * P[:-1] + t * P[1:]
    return P[0]


def test_bezier_pilot_within_extent_and_matches_de_casteljau():
    P = bezier_control_points(EXTENT)
    assert P.shape == (15, 2)
    assert P[:, 0].min() == -30 and P[:, 0].max() == 30 and P[:, 1].min() == -30 and P[:, 1].max() == 30
    w = bezier_pilot(EXTENT, 50)
    assert w.shape == (50, 2)
    assert np.all(w >= -30) and np.all(w <= 30)
    np.testing.assert_allclose(w[0], [30, -30])  # starts in the lower-right corner
    np.testing.assert_allclose(w[-1], [0, 0])  # ends in the centre
    for k in (0, 7, 31, 49):
        np.testing.assert_allclose(w[k], _de_casteljau(P, k / 49), atol=1e-9)
    # spans the extent: the survey reaches near every border
    assert w[:, 0].min() < -20 and w[:, 0].max() > 20 and w[:, 1].min() < -20 and w[:, 1].max() > 20
    small = bezier_curve(bezier_control_points((0.0, 2.0, 10.0, 11.0)), 200)
    assert small[:, 0].min() >= 0 and small[:, 0].max() <= 2 and small[:, 1].min() >= 10 and small[:, 1].max() <= 11


class _FakeModel:
    """predict() returns a variance that is a fixed function of the input."""

    def __init__(self, fn):
        self.fn = fn

    def predict(self, x):
        v = torch.as_tensor(self.fn(np.asarray(x)), dtype=torch.float64)
        return SimpleNamespace(mean=torch.zeros_like(v), var_y=v)


def test_max_entropy_returns_best_scoring_candidate():
    model = _FakeModel(lambda x: 1.0 + (x[:, 0] + 30) ** 2)  # uncertainty grows to the east
    planner = MaxEntropyPlanner(EXTENT, num_candidates=2000, distance_weight=0.5)
    pos = np.array([-25.0, 0.0])
    goal = planner.plan(model, pos, np.random.default_rng(0))
    r = np.random.default_rng(0)  # the candidates the planner drew: x then y, uniform over the extent
    xs, ys = r.uniform(-30, 30, 2000), r.uniform(-30, 30, 2000)
    C = np.column_stack([xs, ys])
    ent = 0.5 * np.log(2 * math.pi * math.e * (1.0 + (C[:, 0] + 30) ** 2))
    d = np.hypot(C[:, 0] - pos[0], C[:, 1] - pos[1])
    score = (ent - ent.min()) / np.ptp(ent) - 0.5 * (d - d.min()) / np.ptp(d)
    np.testing.assert_array_equal(goal, C[np.argmax(score)])
    np.testing.assert_allclose(planner.scores(model, C, pos), score, atol=1e-12)
    # with no distance penalty it goes to the most uncertain candidate; with a huge one to the nearest
    far = MaxEntropyPlanner(EXTENT, 2000, 0.0).plan(model, pos, np.random.default_rng(0))
    near = MaxEntropyPlanner(EXTENT, 2000, 1e6).plan(model, pos, np.random.default_rng(0))
    assert far[0] == C[:, 0].max()
    np.testing.assert_array_equal(near, C[np.argmin(d)])


def test_flat_uncertainty_picks_the_nearest():
    model = _FakeModel(lambda x: np.ones(len(x)))
    pos = np.array([3.0, 3.0])
    goal = MaxEntropyPlanner(EXTENT, 500).plan(model, pos, np.random.default_rng(1))
    r = np.random.default_rng(1)
    C = np.column_stack([r.uniform(-30, 30, 500), r.uniform(-30, 30, 500)])
    np.testing.assert_array_equal(goal, C[np.argmin(np.hypot(*(C - pos).T))])


def test_random_planner_and_random_pilot_in_extent():
    rng = np.random.default_rng(2)
    goals = np.array([RandomPlanner(EXTENT).plan(None, np.zeros(2), rng) for _ in range(500)])
    assert np.all(np.abs(goals) <= 30) and goals.std(0).min() > 15
    start, xy = random_pilot(EXTENT, 300, rng)
    assert start.shape == (3,) and np.all(np.abs(start[:2]) <= 30) and abs(start[2]) <= math.pi
    assert xy.shape == (300, 2) and np.all(np.abs(xy) <= 30)


def test_lawnmower_sweeps_and_checkpoints():
    p = LawnmowerPlanner(EXTENT, num_lanes=4)
    goals = np.array([p.plan(None, None, None) for _ in range(8)])
    np.testing.assert_allclose(goals[:, 0], np.repeat(np.linspace(-30, 30, 4), 2))
    np.testing.assert_allclose(goals[:4, 1], [-30, 30, 30, -30])
    q = LawnmowerPlanner(EXTENT, num_lanes=4)
    q.load_state(p.state())
    np.testing.assert_array_equal(p.plan(None, None, None), q.plan(None, None, None))
    np.testing.assert_array_equal(q.plan(None, None, None), goals[1])  # wraps around after the last lane


def test_make_planner_names():
    assert isinstance(make_planner("max-entropy"), MaxEntropyPlanner)
    assert isinstance(make_planner("Lawnmower", num_candidates=5), LawnmowerPlanner)
    with pytest.raises(ValueError, match="unknown planner"):
        make_planner("greedy")
