"""What a posted batch must be before anything of it is stored: JSON ``{"vehicle": NAME, "rows": [[x, y, value],
...]}`` (each row may add a time: ``[x, y, value, t]``), every number finite, every row the same width, at most
``max_rows`` rows, every position inside the survey area widened by ``margin`` of its size on each side.

:func:`parse_observations` returns the rows as an array or raises :class:`BadRequest` naming the bad rows.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

#: rows named in a message at most (then "and N more")
SHOWN = 10


class BadRequest(ValueError):
    """A request refused before anything was stored: ``status`` (413 or 422) and a message for the client."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


def _named(bad: list[int], why: str) -> str:
    more = f" and {len(bad) - SHOWN} more" if len(bad) > SHOWN else ""
    return f"rows {', '.join(map(str, bad[:SHOWN]))}{more} (counted from 0): {why}"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def parse_observations(
    body: bytes, max_rows: int, area: tuple[float, ...], margin: float = 0.5
) -> tuple[str, np.ndarray]:
    """The vehicle and rows (n, 3) or (n, 4) of a posted body; a :class:`BadRequest` for anything else."""
    try:
        payload = json.loads(body)  # NaN and Infinity parse as floats: refused below
    except (ValueError, UnicodeDecodeError) as error:
        raise BadRequest(422, f"the body is not JSON: {error}") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("rows"), list):
        raise BadRequest(422, 'the body is {"vehicle": NAME, "rows": [[x, y, value] or [x, y, value, time], ...]}')
    vehicle, rows = payload.get("vehicle"), payload["rows"]
    if not isinstance(vehicle, str) or not vehicle:
        raise BadRequest(422, '"vehicle" must be the name of the posting vehicle')
    if not rows:
        raise BadRequest(422, '"rows" is empty')
    if len(rows) > max_rows:
        raise BadRequest(413, f"{len(rows)} rows in one request; at most {max_rows}: post them in several")
    widths = [len(r) if isinstance(r, list) else -1 for r in rows]
    width = widths[0] if widths[0] in (3, 4) else 3
    bad = [i for i, w in enumerate(widths) if w != width]
    if bad:
        raise BadRequest(422, _named(bad, f"each row is [x, y, value] or [x, y, value, time], all {width} wide"))
    bad = [i for i, r in enumerate(rows) if not all(_number(v) for v in r)]
    if bad:
        raise BadRequest(422, _named(bad, "every entry must be a finite number (no NaN, inf, null or text)"))
    array = np.asarray(rows, dtype=np.float64).reshape(-1, width)
    xmin, xmax, ymin, ymax = area
    dx, dy = margin * (xmax - xmin), margin * (ymax - ymin)
    outside = (
        (array[:, 0] < xmin - dx) | (array[:, 0] > xmax + dx) | (array[:, 1] < ymin - dy) | (array[:, 1] > ymax + dy)
    )
    if outside.any():
        raise BadRequest(422, _named(np.flatnonzero(outside).tolist(), f"the position is far outside the area {area}"))
    return vehicle, array
