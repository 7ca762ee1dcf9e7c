"""A vehicle's client of ``onlinegp serve`` (the standard library's urllib only: nothing to install on the vehicle).

>>> client = MapClient("http://127.0.0.1:8000", token)          # doctest: +SKIP
>>> client.post("boat", x=[1.0, 2.0], y=[3.0, 4.0], values=[0.5, 0.7])  # doctest: +SKIP
>>> goal = client.next("boat", position=(2.0, 4.0))              # doctest: +SKIP
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any


class ServiceError(RuntimeError):
    """The service refused a request: ``status`` (401, 413, 422, 429, ...) and its message."""

    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status, self.message = status, message


class MapClient:
    """Post observations to, and ask for waypoints and maps from, the service at ``url`` with a vehicle's ``token``
    (``onlinegp serve token add NAME DIR``; None for reads only)."""

    def __init__(self, url: str, token: str | None = None, timeout: float = 30.0):
        self.url, self.token, self.timeout = url.rstrip("/"), token, timeout

    def _request(self, method: str, path: str, body: Any = None, raw: bool = False) -> Any:
        headers = {"Accept": "application/json"}
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        data = None
        if body is not None:
            data, headers["Content-Type"] = json.dumps(body, allow_nan=True).encode(), "application/json"
        request = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                content = response.read()
        except urllib.error.HTTPError as error:
            try:
                message = json.loads(error.read()).get("detail", error.reason)
            except ValueError:
                message = error.reason
            raise ServiceError(error.code, str(message)) from None
        return content if raw else json.loads(content)

    def post(
        self,
        vehicle: str,
        x: Sequence[float],
        y: Sequence[float],
        values: Sequence[float],
        times: Sequence[float] | None = None,
    ) -> dict:
        """Post rows (x[i], y[i], values[i][, times[i]]) of ``vehicle``; returns once the service has committed them
        (``{"rows": n, "first_seq": ..., "last_seq": ...}``), or raises :class:`ServiceError`."""
        columns = [x, y, values] if times is None else [x, y, values, times]
        if len({len(c) for c in columns}) != 1:
            raise ValueError(f"x, y, values (and times) need the same length, got {[len(c) for c in columns]}")
        rows = [[float(v) for v in row] for row in zip(*columns)]
        return self._request("POST", "/observations", {"vehicle": vehicle, "rows": rows})

    def next(self, vehicle: str, position: Sequence[float]) -> tuple[float, float]:
        """The next waypoint (x, y) for ``vehicle`` at ``position``, from the service's planner."""
        answer = self._request("POST", f"/vehicles/{urllib.parse.quote(vehicle)}/next", {"position": list(position)})
        return float(answer["goal"][0]), float(answer["goal"][1])

    def map(self, cells: int = 50) -> dict:
        """The map: ``x`` and ``y`` (cell centres), ``mean`` and ``std`` (rows along y; None before any data), N, M."""
        return self._request("GET", f"/map?cells={int(cells)}")

    def close_batch(self) -> dict:
        """Close every open row into one batch now; returns once the map covers it (N, M, ``closed``, ``refused``)."""
        return self._request("POST", "/batches", {})

    def model_state(self) -> bytes:
        """The model's exact checkpoint as bytes (read it with :func:`onlinegp.base.read_state`)."""
        return self._request("GET", "/model", raw=True)

    def status(self) -> dict:
        """N, M, updates, the last update's time, vehicles seen, backlog."""
        return self._request("GET", "/status")
