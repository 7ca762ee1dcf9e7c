"""Simulator profiles: the text of Chen et al. (2024) and what their public implementation does."""

import math

import numpy as np
import pytest

from onlinegp.experiments.simulator.fields import Field
from onlinegp.experiments.simulator.mission import PROFILES, Mission, MissionConfig
from onlinegp.experiments.simulator.robot import DiffDrive


def pilot(**config) -> np.ndarray:
    return Mission(MissionConfig(num_inducing=20, num_steps=0, **config))._pilot()


def test_pilot_sample_counts_of_both_profiles():
    # 3 Hz over the bezier pilot; the public code samples every 4th 10 Hz tick (2.5 Hz): 597 x 2.5 / 3, rounded.
    # (The streams that code recorded have 507 pilot samples over a path of the same length to 0.03 %: its
    # controller spends a little longer near the waypoints than this one.)
    assert len(pilot(profile="paper")) == 597
    assert len(pilot(profile="reference-code")) == 498
    steps = np.hypot(*np.diff(pilot(profile="reference-code")[:100], axis=0).T)
    assert np.allclose(np.median(steps), 0.4, atol=1e-3)  # 4 ticks at 1 m/s between samples


def test_profiles_resolve_into_the_config_and_explicit_values_win():
    c = MissionConfig(profile="reference-code", sensing_rate=5.0)
    assert (c.sensing_rate, c.max_turn_rate, c.interpolation, c.input_scaling) == (5.0, math.inf, "nearest", "pilot")
    assert c.resolved().model_kwargs()["x_bounds"] == "first-batch"  # fitted on the pilot survey, frozen
    assert MissionConfig().resolved().model_kwargs()["x_bounds"] == [[-30.0, -30.0], [30.0, 30.0]]
    assert MissionConfig().resolved().to_dict()["sensing_rate"] == PROFILES["paper"]["sensing_rate"] == 3.0
    with pytest.raises(ValueError, match="profile"):
        MissionConfig(profile="fast")
    with pytest.raises(ValueError, match="interpolation"):
        MissionConfig(interpolation="cubic").validate()


def test_unclipped_turns_reach_a_goal_behind_sooner():
    goal = np.array([[0.0, 3.0]])
    limited = DiffDrive(sensing_rate=10.0).drive(goal, 10_000)
    free = DiffDrive(sensing_rate=10.0, max_ang_vel=math.inf).drive(goal, 10_000)
    assert len(free) < len(limited)


def test_nearest_cell_reads_the_cell_value():
    values = np.arange(12.0).reshape(3, 4)
    f = Field(values, extent=(0.0, 4.0, 0.0, 3.0))
    pts = np.array([[0.1, 0.1], [3.9, 2.9], [1.5, 1.2], [-5.0, 9.0]])
    assert f(pts, "nearest").tolist() == [0.0, 11.0, 5.0, 8.0]
    assert f(np.array([[1.5, 1.5]]))[0] == 5.0  # bilinear at a cell centre: the cell value
    with pytest.raises(ValueError, match="interpolation"):
        f(pts, "cubic")
