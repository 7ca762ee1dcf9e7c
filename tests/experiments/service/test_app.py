"""The HTTP service through FastAPI's TestClient: who may write, what is refused (and leaves everything as it was),
what is durable, what the reads and the WebSocket give."""

import io
import json
import shutil
import sqlite3
import subprocess
import time
import warnings

import numpy as np
import pytest
import torch

pytest.importorskip("fastapi")
pytest.importorskip("httpx")

with warnings.catch_warnings():  # starlette's TestClient asks for httpx2 over httpx
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient  # noqa: E402
    from starlette.websockets import WebSocketDisconnect  # noqa: E402

from onlinegp.experiments.service.app import PAGE, Limits, create_app  # noqa: E402
from onlinegp.experiments.service.store import DATABASE, Store, token_hash  # noqa: E402

from .helpers import AREA, BATCH, grid_points, rows, small_config  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture
def service(tmp_path):
    """A service without its worker (batches are stepped by the test), a token for "boat" and one for "kayak"."""
    store = Store(tmp_path)
    tokens = {name: store.add_token(name) for name in ("boat", "kayak")}
    app = create_app(tmp_path, small_config(), worker=False, limits=Limits(max_rows=100, max_bytes=20_000))
    with TestClient(app) as client:
        yield client, app.state.service.state, tokens


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def post(client, token, vehicle="boat", batch=None, content=None):
    if content is not None:
        return client.post("/observations", content=content, headers=auth(token) | {"Content-Type": "application/json"})
    return client.post(
        "/observations", json={"vehicle": vehicle, "rows": rows(0) if batch is None else batch}, headers=auth(token)
    )


def snapshot(state) -> tuple:
    with torch.no_grad():
        mean = state.model.predict(grid_points()).mean.clone() if state.model.num_data else None
    return state.store.all_rows(), mean


def test_writes_need_the_vehicles_own_token(service):
    client, state, tokens = service
    before = snapshot(state)
    assert client.post("/observations", json={"vehicle": "boat", "rows": rows(0)}).status_code == 401
    assert post(client, "not-a-token").status_code == 401
    wrong = post(client, tokens["kayak"], vehicle="boat")
    assert wrong.status_code == 401 and "kayak" in wrong.json()["detail"]
    assert (
        client.post("/vehicles/boat/next", json={"position": [1, 1]}, headers=auth(tokens["kayak"])).status_code == 401
    )
    assert snapshot(state)[0] == before[0] == []
    assert post(client, tokens["boat"]).status_code == 200


def test_refused_batches_leave_the_log_and_the_model_as_they_were(service):
    client, state, tokens = service
    assert post(client, tokens["boat"]).status_code == 200
    state.flush()
    before = snapshot(state)
    good = rows(1, 5)
    bad = {
        "NaN": (422, json.dumps({"vehicle": "boat", "rows": good[:2] + [[1.0, 2.0, float("nan")]]}), "rows 2"),
        "inf": (422, json.dumps({"vehicle": "boat", "rows": [[1.0, float("inf"), 0.0]] + good}), "rows 0"),
        "width": (422, json.dumps({"vehicle": "boat", "rows": good[:3] + [[1.0, 2.0]] + good}), "rows 3"),
        "text": (422, json.dumps({"vehicle": "boat", "rows": good + [[1.0, "2", 3.0]]}), "rows 5"),
        "malformed": (422, '{"vehicle": "boat", "rows": [[1, 2, 3]', "not JSON"),
        "no rows": (422, json.dumps({"vehicle": "boat"}), "rows"),
        "far away": (422, json.dumps({"vehicle": "boat", "rows": good + [[1e6, 0.0, 1.0]]}), "rows 5"),
        "too many rows": (413, json.dumps({"vehicle": "boat", "rows": rows(2, 101)}), "at most 100"),
        "too large": (413, json.dumps({"vehicle": "boat", "rows": good, "pad": "x" * 30_000}), "bytes"),
    }
    for name, (code, body, named) in bad.items():
        answer = post(client, tokens["boat"], content=body)
        assert answer.status_code == code, (name, answer.text)
        assert named in answer.json()["detail"], (name, answer.text)
    assert not state.flush()  # nothing was left open to apply
    after = snapshot(state)
    assert after[0] == before[0]
    assert torch.equal(after[1], before[1])


def test_an_acknowledged_batch_is_in_the_database_file(service, tmp_path):
    client, state, tokens = service
    answer = post(client, tokens["boat"], batch=rows(3, 7))
    assert answer.status_code == 200 and answer.json()["rows"] == 7
    with sqlite3.connect(tmp_path / DATABASE) as other:  # another connection: what a restarted process reads
        logged = other.execute("SELECT x, y, value FROM observations WHERE vehicle = 'boat' ORDER BY seq").fetchall()
        assert other.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [list(r) for r in logged] == rows(3, 7)
    status = client.get("/status").json()
    assert status["backlog"] == 7 and status["vehicles"] == {"boat": 7} and status["N"] == 0


def test_status_map_and_png(service):
    client, state, tokens = service
    empty = client.get("/map", params={"cells": 4}).json()
    assert empty["N"] == 0 and empty["mean"][0] == [None] * 4
    post(client, tokens["boat"], batch=rows(4, BATCH))
    assert state.step()
    status = client.get("/status").json()
    assert status["N"] == BATCH and status["M"] > 0 and status["updates"] == 1 and status["backlog"] == 0
    assert status["pending"] == 0
    assert status["last_update"] <= time.time() and status["last_update_seconds"] > 0
    grid = client.get("/map", params={"cells": 6}).json()
    assert len(grid["x"]) == len(grid["y"]) == 6
    assert np.asarray(grid["mean"]).shape == np.asarray(grid["std"]).shape == (6, 6)
    assert np.isfinite(grid["mean"]).all() and (np.asarray(grid["std"]) > 0).all()
    png = client.get("/map", params={"format": "png", "cells": 10})
    assert png.status_code == 200 and png.headers["content-type"] == "image/png"
    import matplotlib.image

    image = matplotlib.image.imread(io.BytesIO(png.content), format="png")
    assert image.ndim == 3 and image.shape[0] > 100 and image.std() > 0
    assert client.get("/map", params={"cells": 1000}).status_code == 422
    api = client.get("/openapi.json").json()["paths"]
    assert "rows" in api["/observations"]["post"]["requestBody"]["content"]["application/json"]["schema"]["required"]
    page = client.get("/")
    assert page.status_code == 200 and "<canvas" in page.text and "/ws" in page.text
    assert "<script src" not in page.text and "<link" not in page.text  # nothing fetched from elsewhere


def test_next_waypoint_is_the_planners_in_the_area(service):
    client, state, tokens = service
    first = client.post("/vehicles/boat/next", json={"position": [1, 1]}, headers=auth(tokens["boat"]))
    assert first.status_code == 200  # before any update: a random goal
    post(client, tokens["boat"], batch=rows(5, BATCH))
    state.step()
    goals = {}
    for vehicle, position in (("boat", [1.0, 1.0]), ("kayak", [9.0, 9.0])):
        answer = client.post(f"/vehicles/{vehicle}/next", json={"position": position}, headers=auth(tokens[vehicle]))
        assert answer.status_code == 200, answer.text
        goals[vehicle] = answer.json()["goal"]
        x, y = goals[vehicle]
        assert AREA[0] <= x <= AREA[1] and AREA[2] <= y <= AREA[3]
    assert goals["boat"] != goals["kayak"]
    shown = client.get("/vehicles").json()
    assert shown["boat"]["goal"] == goals["boat"] and len(shown["boat"]["track"]) == BATCH
    bad = client.post("/vehicles/boat/next", json={"position": [1.0]}, headers=auth(tokens["boat"]))
    assert bad.status_code == 422


def test_the_websocket_pushes_a_summary_after_each_update(service):
    client, state, tokens = service
    with client.websocket_connect("/ws") as socket:
        assert socket.receive_json()["updates"] == 0
        post(client, tokens["boat"], batch=rows(6, BATCH))
        state.step()
        pushed = socket.receive_json()
    assert pushed["updates"] == 1 and pushed["N"] == BATCH and pushed["M"] > 0


def test_reads_can_be_protected_and_a_watchers_token_only_reads(tmp_path):
    store = Store(tmp_path)
    token, watcher = store.add_token("boat"), store.add_token("screen", reads_only=True)
    with TestClient(create_app(tmp_path, small_config(), worker=False, protect_reads=True)) as client:
        assert client.get("/status").status_code == 401
        assert client.get("/status", headers=auth(token)).status_code == 200
        assert client.get("/map", headers=auth(watcher)).status_code == 200
        refused = post(client, watcher, vehicle="screen")
        assert refused.status_code == 401 and "only reads" in refused.json()["detail"]
        with pytest.raises(WebSocketDisconnect) as closed, client.websocket_connect("/ws") as socket:
            socket.receive_json()
        assert closed.value.code == 1008
        with client.websocket_connect(f"/ws?token={watcher}") as socket:
            assert socket.receive_json()["N"] == 0
    assert store.all_rows() == []


def test_an_expired_token_is_refused_and_says_so(tmp_path):
    store = Store(tmp_path)
    late, fresh = store.add_token("boat", lifetime=0.05), store.add_token("kayak", lifetime=3600)
    time.sleep(0.1)
    with TestClient(create_app(tmp_path, small_config(), worker=False, protect_reads=True)) as client:
        refused = post(client, late)
        assert refused.status_code == 401 and "expired" in refused.json()["detail"]
        assert client.get("/status", headers=auth(late)).status_code == 401
        assert post(client, fresh, vehicle="kayak").status_code == 200
    assert [row[1] for row in store.all_rows()] == ["kayak"] * BATCH


def test_a_log_made_before_token_expiry_gains_it(tmp_path):
    with sqlite3.connect(tmp_path / DATABASE) as db:  # the tokens table of the first logs
        db.execute("CREATE TABLE tokens (name TEXT PRIMARY KEY, hash TEXT NOT NULL UNIQUE, created REAL NOT NULL)")
        db.execute("INSERT INTO tokens VALUES ('boat', ?, 0.0)", (token_hash("old-token"),))
    store = Store(tmp_path)
    assert store.vehicle_of("old-token") == "boat"
    assert store.token_names()[0][2].expires is None


def test_geotiff_and_the_rate_limit(tmp_path):
    pytest.importorskip("rasterio")
    token = Store(tmp_path).add_token("boat")
    limits = Limits(requests_per_second=3)
    with TestClient(create_app(tmp_path, small_config(), worker=False, limits=limits)) as client:
        assert client.get("/map", params={"format": "geotiff"}).status_code == 409  # no data yet
        codes = [post(client, token, batch=rows(k, 4)).status_code for k in range(4)]
        assert codes == [200, 200, 200, 429]
        client.app.state.service.state.flush()
        tiff = client.get("/map", params={"format": "geotiff", "cells": 8})
    assert tiff.status_code == 200 and tiff.content[:4] in (b"II*\x00", b"MM\x00*")


def test_the_geotiff_of_a_service_with_an_origin_is_placed_on_the_earth(tmp_path):
    rasterio = pytest.importorskip("rasterio")
    pytest.importorskip("pyproj")
    from onlinegp.geo import LocalFrame

    frame = LocalFrame.around(10.75, 59.9)  # Oslo: UTM zone 32 north
    token = Store(tmp_path).add_token("boat")
    with TestClient(create_app(tmp_path, small_config(frame=frame.to_dict()), worker=False)) as client:
        post(client, token)
        client.app.state.service.state.flush()
        assert client.get("/status").json()["frame"]["crs"] == "EPSG:32632"
        tiff = client.get("/map", params={"format": "geotiff", "cells": 10})
    with rasterio.MemoryFile(tiff.content) as memory, memory.open() as raster:
        assert raster.crs.to_string() == "EPSG:32632"
        left, bottom, right, top = raster.bounds
    east, north = frame.origin
    assert (left, bottom) == pytest.approx((east + AREA[0], north + AREA[2]))
    assert (right, top) == pytest.approx((east + AREA[1], north + AREA[3]))


def test_the_pages_script_parses(tmp_path):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    script = PAGE.read_text().split("<script>")[1].split("</script>")[0]
    (tmp_path / "page.js").write_text(script)
    done = subprocess.run([node, "--check", str(tmp_path / "page.js")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


def test_status_counts_a_closed_batch_the_map_does_not_hold_yet_as_pending(service):
    """Between a batch's closing and its update the backlog is already 0: only ``pending`` says the map is behind."""
    client, state, tokens = service
    post(client, tokens["boat"], batch=rows(4, BATCH))
    batch_id, closed = state.store.close_batch(BATCH)  # closed, as the worker does, not applied yet
    status = client.get("/status").json()
    assert (status["backlog"], status["pending"], status["N"]) == (0, 1, 0)
    state.apply(batch_id, closed)
    status = client.get("/status").json()
    assert (status["backlog"], status["pending"], status["N"]) == (0, 0, BATCH)
