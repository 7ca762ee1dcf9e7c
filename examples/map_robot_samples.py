"""Map a field from a robot's own samples: stream (position, measurement) batches through POAM, as a robot would.

Replace `read_batch` with your robot's log or sensor callback: each call returns the positions visited since the
last update, shape (n, 2) in your units (metres here), and the measurements there, shape (n,). The model fixes its
input scaling on `x_bounds` (the survey area) and updates in constant time per batch; after each batch it predicts
a map with its uncertainty, and the most uncertain candidate is where the robot would go next.

Run: python examples/map_robot_samples.py  (about 10 s)
"""

import math
import tempfile
from pathlib import Path

import torch

import onlinegp

torch.manual_seed(0)
AREA = [[-30.0, -30.0], [30.0, 30.0]]  # the survey area: [[x_min, y_min], [x_max, y_max]], metres


def field(xy: torch.Tensor) -> torch.Tensor:
    """The unknown quantity (here a synthetic one: smooth hills with a sharper ridge)."""
    x, y = xy[:, 0], xy[:, 1]
    return 10 * torch.sin(x / 8) * torch.cos(y / 10) + 15 * torch.exp(-((x - y) ** 2) / 20)


def read_batch(step: int, n: int = 60) -> tuple[torch.Tensor, torch.Tensor]:
    """The samples of one leg of a lawnmower path across the area, with sensor noise."""
    t = torch.linspace(0, 1, n, dtype=torch.float64)
    row = -27.0 + 6.0 * step
    x = (-27.0 + 54.0 * t) if step % 2 == 0 else (27.0 - 54.0 * t)
    xy = torch.stack([x, torch.full_like(x, row) + 2 * torch.sin(8 * math.pi * t)], dim=1)
    return xy, field(xy) + 0.5 * torch.randn(n, dtype=torch.float64)


# POAM with the Attentive Kernel; a smaller model than the default 500 inducing points keeps this example fast
model = onlinegp.POAM(num_inducing=120, training=onlinegp.Training(steps=30), x_bounds=AREA)
grid = torch.stack(torch.meshgrid(*[torch.linspace(-30, 30, 40, dtype=torch.float64)] * 2, indexing="xy"), -1)
grid = grid.reshape(-1, 2)
truth = field(grid)

for step in range(10):
    xy, z = read_batch(step)
    report = model.update(xy, z)  # positions in metres, measurements in their own units
    pred = model.predict(grid)  # mean and variance in the same units
    rmse = float((pred.mean - truth).pow(2).mean().sqrt())
    target = grid[pred.var_f.argmax()]  # where the map is least certain: the next waypoint of an explorer
    print(
        f"batch {step}: {report.num_data:4d} samples, M = {report.num_inducing}, update {report.total_time:.2f} s, "
        f"map RMSE {rmse:.2f}, most uncertain at ({target[0]:.0f}, {target[1]:.0f}) m"
    )

checkpoint = Path(tempfile.mkdtemp()) / "robot_map.pt"  # your own run directory in practice
model.save(checkpoint)  # an exact checkpoint: the state, not the options, so give the non-default ones to load it
again = onlinegp.POAM.load(checkpoint, num_inducing=120, training=onlinegp.Training(steps=30), x_bounds=AREA)
assert torch.equal(again.predict(grid[:5]).mean, model.predict(grid[:5]).mean)
print("learnt hyper-parameters:", {k: round(v, 3) for k, v in model.hyperparameters(grid).items()})
