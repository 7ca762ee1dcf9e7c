"""A real ``onlinegp serve`` killed with SIGKILL at random moments while a client posts: nothing acknowledged is
lost, no post is half stored, and the resumed service holds, bit for bit, the model of an uninterrupted one that saw
the batches the log records. :data:`KILLS` kills, 20 by default (about 2.5 minutes on a busy 2-core machine: each
start costs the process's imports)."""

import http.client
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import onlinegp
from onlinegp.client import MapClient, ServiceError
from onlinegp.experiments.service.store import DATABASE, Store

from .helpers import AREA, OPTIONS, free_port, uninterrupted

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

#: kills per run of the test (about 7 s a kill); ONLINEGP_SERVE_KILLS changes it
KILLS = int(os.environ.get("ONLINEGP_SERVE_KILLS", "20"))
AREA_TEXT = ",".join(str(v) for v in AREA)
OPTION_ARGS = [item for k, v in OPTIONS.items() for item in ("-o", f"{k}={v}")]


def start(run: Path, port: int, resume: bool) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(Path(onlinegp.__file__).parents[1])}
    how = ["--resume"] if resume else ["--area", AREA_TEXT, "--batch-size", "8", "--batch-seconds", "0.3", *OPTION_ARGS]
    command = [sys.executable, "-m", "onlinegp", "serve", str(run), "--port", str(port), *how]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def wait_ready(client: MapClient, process: subprocess.Popen, timeout: float = 40.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if process.poll() is not None:
            raise AssertionError(f"the service ended: {process.stderr.read().decode()}")
        try:
            return client.status()
        except OSError:
            time.sleep(0.1)
    raise AssertionError("the service did not start")


def logged_rows(run: Path) -> list[tuple]:
    with sqlite3.connect(run / DATABASE) as db:
        return db.execute("SELECT x, y, value FROM observations ORDER BY seq").fetchall()


def logged_batches(run: Path) -> list[list[list[float]]]:
    with sqlite3.connect(run / DATABASE) as db:
        ids = [r[0] for r in db.execute("SELECT batch_id FROM batches ORDER BY batch_id")]
        query = "SELECT x, y, value FROM observations WHERE batch_id = ? ORDER BY seq"
        return [[list(r) for r in db.execute(query, (i,))] for i in ids]


def post_until_killed(client: MapClient, process: subprocess.Popen, rng: np.random.Generator) -> tuple[list, list]:
    """Post batches of 5 rows until the service dies (SIGKILL at a random moment): the rows acknowledged, and
    those of the post in flight when it died."""
    acked = []
    threading.Timer(random.Random(int(rng.integers(1 << 30))).uniform(0.1, 1.2), process.kill).start()
    while True:
        batch = np.column_stack([rng.uniform(0, 10, (5, 2)), rng.standard_normal(5)])
        try:
            client.post("boat", batch[:, 0], batch[:, 1], batch[:, 2])
        except (OSError, http.client.HTTPException):
            return acked, [tuple(r) for r in batch.tolist()]
        except ServiceError as error:  # over the rate limit: refused, nothing of it stored
            assert error.status == 429, error
            time.sleep(0.05)
            continue
        acked += [tuple(r) for r in batch.tolist()]


@pytest.mark.slow
def test_sigkill_loses_nothing_acknowledged_and_resume_is_exact(tmp_path):
    run, port = tmp_path / "run", free_port()
    client = MapClient(f"http://127.0.0.1:{port}", Store(run).add_token("boat"))
    rng, acked, unsure = np.random.default_rng(0), [], []  # unsure: rows of posts in flight at a kill
    for kill in range(KILLS):
        process = start(run, port, resume=kill > 0)
        wait_ready(client, process)
        mine, in_flight = post_until_killed(client, process, rng)
        process.wait(10)
        assert process.returncode == -signal.SIGKILL
        acked, unsure = acked + mine, unsure + in_flight
        log = logged_rows(run)
        assert set(acked) <= set(log), "an acknowledged row is missing from the log"
        assert set(log) <= set(acked) | set(unsure)
        assert set(in_flight) <= set(log) or not set(in_flight) & set(log), "a post was half stored"
    process = start(run, port, resume=True)
    try:
        wait_ready(client, process)
        with pytest.raises(ServiceError) as refused:
            client.post("boat", [1.0], [2.0], [float("nan")])
        assert refused.value.status == 422
        x, y = client.next("boat", (5.0, 5.0))
        assert AREA[0] <= x <= AREA[1] and AREA[2] <= y <= AREA[3]
        end = time.monotonic() + 30
        while ((status := client.status())["backlog"] or status["pending"]) and time.monotonic() < end:
            time.sleep(0.1)
        served = client.map(cells=8)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(20)
    batches = logged_batches(run)
    assert (
        status["backlog"] == status["pending"] == 0
        and status["updates"] == len(batches)
        and status["N"] == len(logged_rows(run))
    )
    reference = uninterrupted(batches)
    xs, ys = np.meshgrid(served["x"], served["y"])
    with torch.no_grad():
        mean = reference.predict(torch.as_tensor(np.column_stack([xs.ravel(), ys.ravel()]))).mean
    assert torch.equal(torch.tensor(served["mean"], dtype=torch.float64).ravel(), mean)
