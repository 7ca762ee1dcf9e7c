"""What the service's tests share: a small, fast configuration, deterministic batches, a server in a thread."""

import contextlib
import socket
import threading
import time

import numpy as np
import torch

from onlinegp.experiments.service.state import ServiceConfig, build_model

AREA = (0.0, 10.0, 0.0, 10.0)
OPTIONS = {"num_inducing": 30, "num_steps": 2, "training": {"pretrain": {"steps": 0}}}
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
    model = build_model(config)
    for batch in batches:
        b = torch.as_tensor(batch, dtype=torch.float64)
        model.update(b[:, :2].contiguous(), b[:, 2].contiguous())
    return model


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(app, timeout: float = 30.0):
    """``app`` served by uvicorn on a free loopback port in a thread; yields its URL. The server must stop within
    10 s once the block ends (a page's WebSocket must not hold it)."""
    import uvicorn  # the serve extra: the tests using this skip without it

    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    end = time.monotonic() + timeout
    while not server.started:
        assert thread.is_alive() and time.monotonic() < end, "the server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10.0)
    assert not thread.is_alive(), "the server did not stop within 10 s"
