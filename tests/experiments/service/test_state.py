"""Exact resume: a service killed between a batch's commit and its checkpoint, resumed, holds the model, bit for bit,
of a service that never stopped and saw the same batches."""

import shutil
import time
import warnings

import numpy as np
import pytest
import torch

from onlinegp.experiments.service.state import CHECKPOINT, MapState
from onlinegp.experiments.service.store import Store

from .helpers import BATCH, grid_points, rows, small_config, uninterrupted

pytest.importorskip("fastapi")
pytest.importorskip("httpx")
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from onlinegp.experiments.service.app import create_app  # noqa: E402


def wait_for(client, updates: int, timeout: float = 30.0) -> dict:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        status = client.get("/status").json()
        if status["updates"] >= updates:
            return status
        time.sleep(0.02)
    raise AssertionError(f"no update {updates} within {timeout} s: {status}")


def predictions(model) -> tuple[torch.Tensor, torch.Tensor]:
    with torch.no_grad():
        p = model.predict(grid_points())
    return p.mean, p.var_f


def test_resume_one_batch_behind_reaches_the_uninterrupted_model(tmp_path):
    a_dir, b_dir = tmp_path / "a", tmp_path / "b"
    token = Store(a_dir).add_token("boat")
    headers = {"Authorization": f"Bearer {token}"}
    batches = [rows(10 + k) for k in range(4)]
    app = create_app(a_dir, small_config())
    state = app.state.service.state
    # keep the checkpoint of batch 3 aside: the state a kill after batch 4's commit, before its checkpoint, leaves
    state.listeners.append(
        lambda s: s["batch_id"] == 3 and shutil.copy(a_dir / CHECKPOINT, tmp_path / "checkpoint-3.pt")
    )
    with TestClient(app) as client:
        for k, batch in enumerate(batches):  # the worker closes each as it fills: batch k is the k-th post
            assert client.post("/observations", json={"vehicle": "boat", "rows": batch}, headers=headers).is_success
            wait_for(client, k + 1)
        # rows still open when the service stops: the resumed one closes them into its next batch
        half = rows(20, BATCH // 2)
        assert client.post("/observations", json={"vehicle": "boat", "rows": half}, headers=headers).is_success
    a_model = state.model
    assert a_model.num_updates == 4 and torch.equal(predictions(a_model)[0], predictions(uninterrupted(batches))[0])

    shutil.copytree(a_dir, b_dir, ignore=shutil.ignore_patterns(".onlinegp-lock"))
    shutil.copy(tmp_path / "checkpoint-3.pt", b_dir / CHECKPOINT)
    assert torch.load(b_dir / CHECKPOINT, weights_only=False)["batch_id"] == 3
    resumed = create_app(b_dir, resume=True)
    b_state = resumed.state.service.state
    assert b_state.batch_id == 4 and b_state.store.backlog()[0] == BATCH // 2
    for x, y in zip(predictions(b_state.model), predictions(a_model)):
        assert torch.equal(x, y)
    with TestClient(resumed) as client:
        rest = rows(21, BATCH - BATCH // 2)
        assert client.post("/observations", json={"vehicle": "boat", "rows": rest}, headers=headers).is_success
        assert wait_for(client, 5)["N"] == 5 * BATCH
    reference = uninterrupted(batches + [half + rest])
    for x, y in zip(predictions(b_state.model), predictions(reference)):
        assert torch.equal(x, y)


def test_a_new_service_refuses_a_directory_with_observations(tmp_path):
    state = MapState.open(tmp_path, small_config())
    state.store.add("boat", np.array(rows(1, 3)))
    with pytest.raises(ValueError, match="--resume"):
        MapState.open(tmp_path, small_config())
    with pytest.raises(ValueError, match="no service"):
        MapState.open(tmp_path / "elsewhere", resume=True)


def test_batches_close_on_size_or_age(tmp_path):
    state = MapState.open(tmp_path, small_config(batch_size=5, batch_seconds=0.2))
    state.store.add("boat", np.array(rows(2, 7)))
    assert state.step() and not state.step()  # one full batch; 2 rows wait
    assert state.store.backlog()[0] == 2
    time.sleep(0.25)
    assert state.step() and state.model.num_data == 7
    state.store.add("boat", np.array(rows(3, 23)))  # fallen behind: one larger batch takes all
    assert state.step() and not state.step() and state.model.num_data == 30
    state.store.add("boat", np.array(rows(4, 60)))  # ... up to CATCH_UP batch sizes
    assert state.step() and state.step() and state.model.num_data == 90
    sizes = [len(r) for _, r in state.store.batches_after(0)]
    assert sizes == [5, 2, 23, 50, 10]
