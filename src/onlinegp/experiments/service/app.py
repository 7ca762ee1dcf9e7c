"""The HTTP service (FastAPI): :func:`create_app` over one run directory.

Writes (``POST /observations``, ``POST /vehicles/{id}/next``, ``POST /batches``) need a vehicle's token
(``Authorization: Bearer TOKEN``, made by ``onlinegp serve token add``); reads are open unless ``protect_reads``, and
then take a vehicle's or a watcher's token (``token add --reads-only``). A token may expire (``--expires-in``); an
expired one gets a 401 that says so. A posted batch is answered
only after its rows are committed to the log; a refused one (401, 413, 422, 429) leaves the log and the map as they
were. The interactive API docs are at ``/docs``.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import datetime
import io
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from fastapi import APIRouter, FastAPI, HTTPException, Request, WebSocket, WebSocketDisconnect
from fastapi.responses import HTMLResponse, Response
from starlette.requests import HTTPConnection

from .state import MapState, ServiceConfig, Worker
from .store import Holder
from .validation import BadRequest, parse_observations

PAGE = Path(__file__).parent / "static" / "index.html"


@dataclasses.dataclass(frozen=True)
class Limits:
    """Request limits: rows and bytes per request, requests per second per vehicle, map cells per side."""

    max_rows: int = 10_000
    max_bytes: int = 2_000_000
    requests_per_second: float = 50.0
    max_cells: int = 200

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ValueError(f"the limit {field.name} must be a positive number, got {value!r}")

    @classmethod
    def of(cls, items: dict) -> Limits:
        """The limits ``items`` change (``{"max_rows": 5000}``); a ValueError naming an unknown one."""
        names = [field.name for field in dataclasses.fields(cls)]
        unknown = sorted(set(items) - set(names))
        if unknown:
            raise ValueError(f"unknown limit {', '.join(unknown)}; the limits are {', '.join(names)}")
        return cls(**items)


@dataclasses.dataclass
class Service:
    """What the endpoints share: the map, its worker, the limits and the open WebSockets."""

    state: MapState
    limits: Limits
    protect_reads: bool
    worker: Worker | None = None
    loop: asyncio.AbstractEventLoop | None = None
    sockets: set = dataclasses.field(default_factory=set)
    recent: dict = dataclasses.field(default_factory=lambda: collections.defaultdict(collections.deque))

    def broadcast(self, summary: dict) -> None:
        """From the worker's thread: hand ``summary`` to every open WebSocket's queue on the event loop."""
        if self.loop is not None and not self.loop.is_closed():
            for queue in list(self.sockets):
                self.loop.call_soon_threadsafe(queue.put_nowait, summary)

    def throttle(self, vehicle: str) -> None:
        """A 429 when ``vehicle`` made more than the limit's requests in the last second."""
        now, recent = time.monotonic(), self.recent[vehicle]
        while recent and now - recent[0] > 1.0:
            recent.popleft()
        if len(recent) >= self.limits.requests_per_second:
            raise HTTPException(429, f"more than {self.limits.requests_per_second:g} requests a second from {vehicle}")
        recent.append(now)


router = APIRouter()
BEARER = {"WWW-Authenticate": "Bearer"}


def _service(connection: HTTPConnection) -> Service:
    return connection.app.state.service


def _holder(connection: HTTPConnection) -> Holder | None:
    """Whose token the request carries (``Authorization: Bearer TOKEN``, or a ``token`` query parameter, which is
    how the page's WebSocket sends it), or None; a 401 when it has expired."""
    scheme, _, token = connection.headers.get("authorization", "").partition(" ")
    token = token.strip() if scheme.lower() == "bearer" else connection.query_params.get("token", "")
    holder = _service(connection).state.store.holder(token) if token else None
    if holder is not None and holder.expired():
        when = datetime.datetime.fromtimestamp(holder.expires, datetime.UTC).isoformat(timespec="seconds")
        raise HTTPException(
            401, f"{holder.name}'s token expired at {when}: make a new one (onlinegp serve token add {holder.name} DIR)"
        )
    return holder


def _sender(request: Request) -> str:
    """The vehicle whose token the request carries; a 401 without one (or with a watcher's, which only reads)."""
    holder = _holder(request)
    if holder is None or holder.reads_only:
        whose = "" if holder is None else f" ({holder.name}'s token only reads)"
        raise HTTPException(401, f"a write needs a vehicle's token (Authorization: Bearer TOKEN){whose}", BEARER)
    return holder.name


def _writer(request: Request, vehicle: str) -> None:
    """A 401 unless the request carries ``vehicle``'s token."""
    if _sender(request) != vehicle:
        raise HTTPException(401, f"a write needs the token of vehicle {vehicle!r}", BEARER)


def _reader(connection: HTTPConnection) -> None:
    if _service(connection).protect_reads and _holder(connection) is None:
        raise HTTPException(401, "reads need a token on this service (a vehicle's or a watcher's)", BEARER)


async def _body(request: Request, limit: int) -> bytes:
    """The request's body, refused with a 413 past ``limit`` bytes (by its Content-Length or as it arrives)."""
    if int(request.headers.get("content-length") or 0) > limit:
        raise HTTPException(413, f"the body is over {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the body is over {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def _json_body(schema: dict, example: dict) -> dict:
    """An OpenAPI request body of JSON: ``schema`` and one ``example``."""
    content = {"application/json": {"schema": schema, "example": example}}
    return {"requestBody": {"required": True, "content": content}}


#: the request bodies the app reads itself (to name bad rows), described for the OpenAPI docs at /docs
OBSERVATIONS_BODY = _json_body(
    {
        "type": "object",
        "required": ["vehicle", "rows"],
        "properties": {
            "vehicle": {"type": "string", "description": "the vehicle whose token the request carries"},
            "rows": {
                "type": "array",
                "description": "[x, y, value] or [x, y, value, time], all rows the same width",
                "items": {"type": "array", "items": {"type": "number"}, "minItems": 3, "maxItems": 4},
            },
        },
    },
    {"vehicle": "boat1", "rows": [[10.0, 20.0, 3.1], [11.0, 20.5, 3.3]]},
)
POSITION_BODY = _json_body(
    {
        "type": "object",
        "required": ["position"],
        "properties": {"position": {"type": "array", "items": {"type": "number"}, "minItems": 2}},
    },
    {"position": [11.0, 20.5]},
)


@router.post("/observations", openapi_extra=OBSERVATIONS_BODY)
async def post_observations(request: Request) -> dict[str, Any]:
    """Log rows ``[x, y, value]`` or ``[x, y, value, time]`` of one vehicle; answered once they are committed."""
    service, sender = _service(request), _sender(request)
    body = await _body(request, service.limits.max_bytes)
    try:
        vehicle, rows = parse_observations(body, service.limits.max_rows, service.state.config.area)
    except BadRequest as error:
        raise HTTPException(error.status, str(error)) from None
    if vehicle != sender:
        raise HTTPException(401, f"this token is vehicle {sender!r}'s, not {vehicle!r}'s", BEARER)
    service.throttle(vehicle)
    first, last = await asyncio.to_thread(service.state.store.add, vehicle, rows)
    if service.worker is not None:
        service.worker.poke()
    return {"vehicle": vehicle, "rows": len(rows), "first_seq": first, "last_seq": last}


@router.post("/vehicles/{vehicle}/next", openapi_extra=POSITION_BODY)
async def next_waypoint(vehicle: str, request: Request) -> dict[str, Any]:
    """The next waypoint for ``vehicle`` given ``{"position": [x, y]}``: the library's max-entropy planner."""
    _writer(request, vehicle)
    try:
        position = np.asarray((await request.json())["position"], dtype=np.float64).reshape(2)
    except (ValueError, KeyError, TypeError) as error:
        raise HTTPException(422, f'the body is {{"position": [x, y]}}: {error}') from None
    if not np.isfinite(position).all():
        raise HTTPException(422, "the position must be finite")
    goal = await asyncio.to_thread(_service(request).state.next_goal, vehicle, position)
    return {"vehicle": vehicle, "goal": goal.tolist()}


@router.post("/batches")
async def close_batch(request: Request) -> dict[str, Any]:
    """Close every open row into one batch now; answered once the map covers it. For a client that keeps its own
    batch boundaries (``onlinegp mission --via``, on a service whose batches close on request)."""
    service, sender = _service(request), _sender(request)
    service.throttle(sender)
    closed = await asyncio.to_thread(service.state.flush)
    summary = service.state.summary()
    return summary | {"closed": closed, "refused": closed and summary["batch_id"] in service.state.failed}


@router.get("/model")
async def model_state(request: Request) -> Response:
    """The model's exact checkpoint (``OnlineGP.save``'s format: load it with ``OnlineGP.load`` or
    :func:`onlinegp.base.read_state`), as of the last update."""
    _reader(request)
    return Response(await asyncio.to_thread(_service(request).state.state_bytes), media_type="application/octet-stream")


@router.get("/status")
def status(request: Request) -> dict[str, Any]:
    """N, M, updates, the last update's time and seconds, vehicles seen, backlog (rows in no closed batch) and
    pending (closed batches the map does not hold yet): the map holds every row received before the call once both
    are 0."""
    _reader(request)
    state = _service(request).state
    summary = state.summary()  # read first: pending may count a batch applied meanwhile, never miss one
    backlog, oldest, last_closed = state.store.waiting()
    return summary | {
        "vehicles": state.store.vehicles(),
        "backlog": backlog,
        "pending": last_closed - summary["batch_id"],
        "backlog_age": None if oldest is None else time.time() - oldest,
        "area": list(state.config.area),
        "model": state.config.model,
        "options": state.config.options,
        "seed": state.config.seed,
        "close_on": state.config.close_on,
        "frame": state.config.frame,
        "unit": state.config.unit,
    }


@router.get("/vehicles")
def vehicles(request: Request) -> dict[str, Any]:
    """Each vehicle's recent track and its last goal."""
    _reader(request)
    state = _service(request).state
    goal = lambda name: None if name not in state.goals else state.goals[name].tolist()
    return {
        name: {"rows": n, "track": state.store.track(name).tolist(), "goal": goal(name)}
        for name, n in state.store.vehicles().items()
    }


def _plain(array: np.ndarray) -> list:
    return [[None if math.isnan(v) else v for v in row] for row in array.tolist()]


@router.get("/map")
async def get_map(request: Request, cells: int = 50, format: str = "json") -> Any:  # noqa: A002 - the query's name
    """Mean and std of the field on ``cells`` x ``cells`` cells over the area: JSON, ``png`` or ``geotiff``."""
    _reader(request)
    service = _service(request)
    if not 2 <= cells <= service.limits.max_cells:
        raise HTTPException(422, f"cells must be in 2..{service.limits.max_cells}")
    if format == "geotiff":
        return Response(await asyncio.to_thread(_geotiff, service.state, cells), media_type="image/tiff")
    grid = await asyncio.to_thread(service.state.grid, cells)
    if format == "png":
        png = await asyncio.to_thread(_png, grid, service.state.config.area, service.state.config.unit)
        return Response(png, media_type="image/png")
    if format != "json":
        raise HTTPException(422, "format is json, png or geotiff")
    summary = service.state.summary()
    return {
        "x": grid["x"].tolist(),
        "y": grid["y"].tolist(),
        "mean": _plain(grid["mean"]),
        "std": _plain(grid["std"]),
        "area": list(service.state.config.area),
        "unit": service.state.config.unit,
        **summary,
    }


def _png(grid: dict, area: tuple, unit: str = "") -> bytes:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(10, 4.2))
    for axes, key in zip(figure.subplots(1, 2), ("mean", "std")):
        image = axes.imshow(grid[key], origin="lower", extent=area, cmap="viridis" if key == "mean" else "magma")
        axes.set_title(f"{key} of the field" + (f" ({unit})" if unit else ""))
        figure.colorbar(image, ax=axes)
    out = io.BytesIO()
    figure.savefig(out, format="png", dpi=80)
    return out.getvalue()


def _geotiff(state: MapState, cells: int) -> bytes:
    from ...maps import write_geotiff

    xmin, xmax, ymin, ymax = state.config.area
    if state.model.num_data == 0:
        raise HTTPException(409, "the map has no data yet")
    try:
        with tempfile.TemporaryDirectory() as folder, state.lock:
            path = write_geotiff(
                Path(folder) / "map.tif",
                state.model,
                (xmin, ymin),
                (xmax, ymax),
                cell_size=max(xmax - xmin, ymax - ymin) / cells,
                frame=state.config.frame,
            )
            return path.read_bytes()
    except ImportError as error:
        raise HTTPException(501, str(error)) from None


@router.get("/", response_class=HTMLResponse)
def page() -> str:
    """The live page: mean and std maps, the vehicles' tracks and goals, N, M and the update time."""
    return PAGE.read_text()


async def _push(socket: WebSocket, queue: asyncio.Queue) -> None:
    while True:
        await socket.send_json(await queue.get())


async def _closed(socket: WebSocket) -> None:
    """Returns when the page goes away or the server shuts down (the page sends nothing)."""
    while (await socket.receive())["type"] != "websocket.disconnect":
        pass


@router.websocket("/ws")
async def live(socket: WebSocket) -> None:
    """A summary (N, M, updates, last update) now and after each update, until the page goes away or the server
    shuts down (watching for both: a handler waiting only for the next update would hold a shutdown until then)."""
    service: Service = socket.app.state.service
    try:
        _reader(socket)
    except HTTPException:
        await socket.close(code=1008)  # policy violation: no (valid) token where reads are protected
        return
    await socket.accept()
    queue: asyncio.Queue = asyncio.Queue()
    service.sockets.add(queue)
    tasks: set[asyncio.Task] = set()
    try:
        await socket.send_json(service.state.summary())
        tasks = {asyncio.create_task(_push(socket, queue)), asyncio.create_task(_closed(socket))}
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()
    except (WebSocketDisconnect, RuntimeError):
        pass
    finally:
        for task in tasks:
            task.cancel()
        service.sockets.discard(queue)


def create_app(
    run_dir: str | Path,
    config: ServiceConfig | None = None,
    resume: bool = False,
    worker: bool = True,
    limits: Limits = Limits(),
    protect_reads: bool = False,
) -> FastAPI:
    """The service over ``run_dir``: a new map made with ``config``, or with ``resume`` the one recorded there,
    restored exactly (:meth:`MapState.open`). ``worker`` False leaves batches to the caller's
    ``app.state.service.state.step()`` (for tests)."""
    state = MapState.open(run_dir, config, resume=resume)
    service = Service(state, limits, protect_reads)
    state.listeners.append(service.broadcast)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        service.loop = asyncio.get_running_loop()
        if worker:
            service.worker = Worker(state)
            service.worker.start()
        try:
            yield
        finally:
            if service.worker is not None:
                await asyncio.to_thread(service.worker.stop)
                service.worker = None

    app = FastAPI(title="onlinegp live map", lifespan=lifespan)
    app.state.service = service
    app.include_router(router)
    return app
