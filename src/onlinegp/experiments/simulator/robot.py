"""Vehicle and sensor of the active-mapping simulator (POAM, Chen et al. 2024, §V-A).

A differential-drive vehicle (1 m/s, 1 rad/s, 10 Hz control, goal radius 0.1 m) carries a point sensor that
samples the field at 3 Hz with Gaussian noise (std 1 in field units). Sensing times are counted in integer
control ticks (a sample at tick k when ⌊k·rate/control_rate⌋ increases), so the rate is exact and a resumed
mission continues on the same clock. The control loop uses plain floats; the field lookup and the noise are
vectorised over all samples of a leg.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

from .fields import Field


@dataclass
class PointSensor:
    """Point measurements of a field with additive Gaussian noise of standard deviation ``noise_std``."""

    noise_std: float = 1.0
    interpolation: str = "linear"

    def measure(self, field: Field, xy: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """Noisy field values at locations ``xy`` (n, 2)."""
        xy = np.asarray(xy, dtype=np.float64).reshape(-1, 2)
        return field(xy, self.interpolation) + self.noise_std * rng.standard_normal(xy.shape[0])


@dataclass
class DiffDrive:
    """Unicycle kinematics with a go-to-goal controller and a sampling clock.

    The controller drives forward or backward with v = v_max·tanh(3·x_r) and turns with
    ω = clip(atan2(y_r, x_r), ±ω_max), where (x_r, y_r) is the goal in the vehicle frame; ``max_ang_vel`` may be
    ``math.inf`` (no turn limit, as in the POAM paper's public code).
    """

    x: float = 0.0
    y: float = 0.0
    yaw: float = 0.0
    tick: int = 0
    max_lin_vel: float = 1.0
    max_ang_vel: float = 1.0
    control_rate: float = 10.0
    goal_radius: float = 0.1
    sensing_rate: float = 3.0

    def __post_init__(self) -> None:
        for name in ("max_lin_vel", "max_ang_vel", "control_rate", "goal_radius", "sensing_rate"):
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be positive, got {getattr(self, name)}")
        if self.sensing_rate > self.control_rate:
            raise ValueError("sensing_rate cannot exceed control_rate: samples are taken on control ticks")

    @property
    def position(self) -> np.ndarray:
        return np.array([self.x, self.y])

    def control(self, gx: float, gy: float) -> tuple[float, float]:
        """Linear and angular velocity commands towards the goal (gx, gy), within the limits."""
        dx, dy = gx - self.x, gy - self.y
        c, s = math.cos(self.yaw), math.sin(self.yaw)
        xr, yr = c * dx + s * dy, -s * dx + c * dy
        v = self.max_lin_vel * math.tanh(3.0 * xr)
        w = max(-self.max_ang_vel, min(self.max_ang_vel, math.atan2(yr, xr)))
        return v, w

    def step(self, v: float, w: float) -> bool:
        """Advance one control period; True when the sensor samples at this tick."""
        dt = 1.0 / self.control_rate
        self.x += v * math.cos(self.yaw) * dt
        self.y += v * math.sin(self.yaw) * dt
        self.yaw = (self.yaw + w * dt + math.pi) % (2 * math.pi) - math.pi
        self.tick += 1
        ratio = self.sensing_rate / self.control_rate
        return math.floor(self.tick * ratio + 1e-9) > math.floor((self.tick - 1) * ratio + 1e-9)

    def drive(self, goals: np.ndarray, max_samples: int, max_ticks: int | None = None) -> np.ndarray:
        """Follow ``goals`` (k, 2) in turn; return the sample locations (n, 2), stopping at ``max_samples``.

        ``max_ticks`` (default: generous, from the path length) guards against a goal that cannot be reached.
        """
        goals = np.asarray(goals, dtype=np.float64).reshape(-1, 2)
        if max_ticks is None:
            length = float(np.hypot(*np.diff(np.vstack([self.position, goals]), axis=0).T).sum())
            max_ticks = int(self.control_rate * (3 * length / self.max_lin_vel + 4 * math.pi / self.max_ang_vel)) + 100
        out: list[tuple[float, float]] = []
        ticks = 0
        for gx, gy in goals.tolist():
            while math.hypot(gx - self.x, gy - self.y) > self.goal_radius:
                if len(out) >= max_samples:
                    return np.asarray(out, dtype=np.float64).reshape(-1, 2)
                if ticks >= max_ticks:
                    raise RuntimeError(f"vehicle did not reach goal ({gx:.2f}, {gy:.2f}) in {max_ticks} ticks")
                if self.step(*self.control(gx, gy)):
                    out.append((self.x, self.y))
                ticks += 1
        return np.asarray(out, dtype=np.float64).reshape(-1, 2)

    def state(self) -> dict:
        return asdict(self)

    @classmethod
    def from_state(cls, state: dict) -> "DiffDrive":
        return cls(**state)
