"""What the service's tests share: a small, fast configuration and deterministic batches."""

import numpy as np
import torch

from onlinegp.experiments.service.state import ServiceConfig
from onlinegp.models.registry import make_model

AREA = (0.0, 10.0, 0.0, 10.0)
OPTIONS = {"num_inducing": 30, "num_steps": 2, "pretrain_steps": 0}
BATCH = 20


def small_config(**changes) -> ServiceConfig:
    fields = dict(options=OPTIONS, area=AREA, batch_size=BATCH, batch_seconds=600.0, num_candidates=200)
    return ServiceConfig(**fields | changes)


def rows(seed: int, n: int = BATCH) -> list[list[float]]:
    """``n`` rows [x, y, value] inside AREA, a smooth field plus noise, from ``seed``."""
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, 10, (n, 2))
    value = np.sin(xy[:, 0] / 2) * np.cos(xy[:, 1] / 3) + 0.05 * rng.standard_normal(n)
    return np.column_stack([xy, value]).tolist()


def grid_points() -> torch.Tensor:
    g = torch.linspace(0.25, 9.75, 12, dtype=torch.float64)
    return torch.cartesian_prod(g, g)


def uninterrupted(batches: list[list[list[float]]]):
    """The model a service that never stopped holds after ``batches``: built as the service builds it."""
    config = small_config()
    model = make_model(config.model, x_bounds=config.x_bounds, **config.options)
    for batch in batches:
        b = torch.as_tensor(batch, dtype=torch.float64)
        model.update(b[:, :2], b[:, 2])
    return model
