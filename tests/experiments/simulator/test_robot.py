"""Vehicle kinematics (speed limits, reaching goals) and the point sensor (rate, noise statistics)."""

import math

import numpy as np
import pytest

from onlinegp.experiments.simulator.fields import Field, bundled
from onlinegp.experiments.simulator.robot import DiffDrive, PointSensor


def _trace(robot: DiffDrive, goal, steps: int) -> np.ndarray:
    states = [(robot.x, robot.y, robot.yaw)]
    for _ in range(steps):
        robot.step(*robot.control(*goal))
        states.append((robot.x, robot.y, robot.yaw))
    return np.array(states)


def test_speed_limits_respected():
    rng = np.random.default_rng(0)
    for _ in range(20):
        robot = DiffDrive(*rng.uniform(-20, 20, 2), yaw=rng.uniform(-math.pi, math.pi))
        s = _trace(robot, rng.uniform(-30, 30, 2), 300)
        step = np.hypot(*np.diff(s[:, :2], axis=0).T)
        turn = np.abs((np.diff(s[:, 2]) + math.pi) % (2 * math.pi) - math.pi)
        assert step.max() <= 1.0 * 0.1 + 1e-12  # 1 m/s at 10 Hz
        assert turn.max() <= 1.0 * 0.1 + 1e-12  # 1 rad/s at 10 Hz
        assert np.all(np.abs(s[:, 2]) <= math.pi)
    # far from the goal and facing it, it goes at (nearly) full speed
    robot = DiffDrive(0.0, 0.0, 0.0)
    s = _trace(robot, (50.0, 0.0), 10)
    assert np.hypot(*(s[-1, :2] - s[0, :2])) == pytest.approx(1.0, rel=1e-6)


def test_reaches_goals_in_every_direction():
    rng = np.random.default_rng(1)
    robot = DiffDrive(0.0, 0.0, 0.0)
    goals = rng.uniform(-30, 30, (25, 2))
    goals[:4] = [[0.05, -0.3], [-0.5, -0.3], [-0.5, 0.0], [10.0, 0.0]]  # just behind, beside, then far
    for g in goals:
        t0 = robot.tick
        dist = math.hypot(g[0] - robot.x, g[1] - robot.y)
        robot.drive(g[None], max_samples=10**9)
        assert math.hypot(g[0] - robot.x, g[1] - robot.y) <= 0.1
        # no slower than straight-line driving plus turning on the spot, with slack for the smooth controller
        assert robot.tick - t0 <= 10 * (dist / 1.0 + math.pi / 1.0) * 1.6 + 20


def test_sampling_clock_is_exactly_three_hertz():
    robot = DiffDrive(0.0, 0.0, 0.0)
    xy = robot.drive(np.array([[25.0, 0.0], [25.0, 25.0], [-5.0, 3.0]]), max_samples=10**9)
    assert len(xy) == math.floor(robot.tick * 3 / 10 + 1e-9)
    # sample spacing along a straight leg at full speed: 1/3 m between some, never more than 0.4 m
    gaps = np.hypot(*np.diff(xy, axis=0).T)
    assert gaps.max() <= 0.4 + 1e-9
    # the budget stops driving at exactly max_samples
    robot = DiffDrive(0.0, 0.0, 0.0)
    xy = robot.drive(np.array([[20.0, 0.0]]), max_samples=7)
    assert len(xy) == 7 and robot.x < 20


def test_unreachable_within_ticks_raises():
    robot = DiffDrive(0.0, 0.0, 0.0)
    with pytest.raises(RuntimeError, match="did not reach"):
        robot.drive(np.array([[20.0, 0.0]]), max_samples=10**9, max_ticks=5)


def test_state_round_trip_continues_identically():
    a = DiffDrive(1.0, 2.0, 0.3)
    a.drive(np.array([[5.0, 5.0]]), 10**9)
    b = DiffDrive.from_state(a.state())
    goal = np.array([[-7.0, 4.0]])
    np.testing.assert_array_equal(a.drive(goal, 10**9), b.drive(goal, 10**9))


def test_invalid_vehicle_settings():
    with pytest.raises(ValueError, match="max_lin_vel"):
        DiffDrive(max_lin_vel=0.0)
    with pytest.raises(ValueError, match="sensing_rate"):
        DiffDrive(sensing_rate=20.0)


def test_sensor_noise_statistics():
    f = bundled("valley-ridges")
    sensor = PointSensor()
    rng = np.random.default_rng(3)
    xy = np.tile([[3.0, -4.0]], (40_000, 1))
    y = sensor.measure(f, xy, rng)
    truth = float(f(np.array([3.0, -4.0])))
    assert abs(y.mean() - truth) < 4 / math.sqrt(40_000)
    assert y.std() == pytest.approx(1.0, abs=0.02)
    # the noise is independent of the location and drawn from the given generator only
    flat = Field(np.zeros((4, 4)) + np.arange(4.0))
    a = sensor.measure(flat, np.zeros((5, 2)), np.random.default_rng(9))
    b = sensor.measure(flat, np.ones((5, 2)), np.random.default_rng(9))
    np.testing.assert_allclose(a - flat(np.zeros((5, 2))), b - flat(np.ones((5, 2))))
