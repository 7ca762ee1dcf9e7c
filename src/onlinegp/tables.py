"""The CSV reader of ``onlinegp stream`` and ``onlinegp replay``: which column is an input, the target, the batch or
the time, with the roles said before a run.

A header is optional: the first line is one when any of its cells is not a number. Columns are chosen by header name
or 0-based index. The rule without ``target``: the last column that is neither ``batch`` nor ``time``; when a header
also names another column ``y`` or ``target``, the target is ambiguous and must be given. The inputs are by default
every other column but ``batch`` and ``time``. Empty cells and ``nan``/``NA`` are missing values: an error naming
their rows, unless ``dropna`` drops those rows.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

KEYS = ("batch", "time")
#: seconds per unit of a time column
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
TARGET_NAMES = ("y", "target")
MISSING = ("", "nan", "na", "n/a", "null", "none")


@dataclass
class Table:
    """Inputs ``x`` (N, D) and target ``y`` (N,) of a CSV, its ``key`` column (batch or time: ``key_role``) when
    asked for, the column names of each role and the data rows dropped for missing values."""

    x: np.ndarray
    y: np.ndarray
    inputs: list[str]
    target: str
    key: np.ndarray | None = None
    key_role: str | None = None
    key_name: str | None = None
    dropped: list[int] | None = None
    #: longitude/latitude inputs: the frame they were projected to (:meth:`onlinegp.geo.LocalFrame.to_dict`)
    frame: dict | None = None
    #: how the rows were made, when not read as they are (a vehicle log's values matched to its positions)
    source: str | None = None

    def roles(self) -> str:
        """One line naming the columns of each role, e.g. ``inputs x, y; target value; time: time``."""
        text = f"inputs {', '.join(self.inputs)}; target {self.target}"
        if self.frame is not None:
            text += f" (longitude, latitude in metres east, north of {self.frame['origin']} in {self.frame['crs']})"
        if self.key_name is not None:
            text += f"; {self.key_role} column {self.key_name}"
        if self.dropped:
            text += f"; dropped {len(self.dropped)} row(s) with missing values"
        if self.source is not None:
            text += f"; {self.source}"
        return text


def _cells(path: Path) -> list[list[str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        return [[c.strip() for c in row] for row in csv.reader(fh) if any(c.strip() for c in row)]


def _number(cell: str) -> bool:
    try:
        float(cell)
    except ValueError:
        return cell.lower() in MISSING
    return True


def _column(spec: str | int, names: list[str], what: str, path: Path) -> int:
    """The index of column ``spec`` (a header name or a 0-based index)."""
    if isinstance(spec, str) and spec in names:
        return names.index(spec)
    try:
        index = int(spec)
    except ValueError:
        index = -1
    if not 0 <= index < len(names):
        raise ValueError(
            f"{path.name}: no column {spec!r} for {what}; its columns are {', '.join(names)} (names or 0-based indices)"
        )
    return index


def read_table(  # noqa: PLR0912, PLR0915 - one check per column rule, each with its error
    path: str | Path,
    target: str | int | None = None,
    inputs: list[str | int] | None = None,
    batch: str | int | None = None,
    time: str | int | None = None,
    dropna: bool = False,
    time_unit: str = "s",
    lonlat: list[str | int] | None = None,
    coord_scale: float = 1.0,
) -> Table:
    """Read the CSV (optionally .gz) at ``path`` (see the module docstring). The ``key`` column is ``batch`` (batch
    index of each row) or ``time`` (in ``time_unit``: s, ms, us or ns, or ISO 8601 times; returned in seconds) when
    given, else a header's ``batch`` or ``time`` column, if any. ``lonlat`` names a longitude and a latitude column in degrees
    (times ``coord_scale``, e.g. 1e-7 for ArduPilot's integers): they are the inputs, projected to metres in a
    :class:`onlinegp.geo.LocalFrame` around the first row (recorded in ``frame``)."""
    _check_units(time_unit, lonlat, inputs, coord_scale)
    inputs = lonlat if lonlat is not None else inputs
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"no CSV file at {str(path)!r}")
    rows = _cells(path)
    if not rows:
        raise ValueError(f"{path.name} is empty")
    header = not all(_number(c) for c in rows[0])
    names = rows[0] if header else [f"column {i}" for i in range(len(rows[0]))]
    data, first_line = (rows[1:], 2) if header else (rows, 1)
    if len(names) < 2 or not data:
        raise ValueError(f"{path.name} needs at least two columns (inputs, then the target) and one row of data")
    for k, row in enumerate(data):
        if len(row) != len(names):
            raise ValueError(
                f"{path.name}, line {first_line + k}: {len(row)} cells where the first line has {len(names)}"
            )
    given = [(role, spec) for role, spec in (("batch", batch), ("time", time)) if spec is not None]
    if len(given) > 1:
        raise ValueError("give a batch column or a time column, not both")
    if given:
        key_role, spec = given[0]
        key_col = _column(spec, names, f"the {key_role} column (--{key_role})", path)
    else:
        key_role = next((n for n in KEYS if header and n in names), None)
        key_col = None if key_role is None else names.index(key_role)
    others = [i for i, n in enumerate(names) if i != key_col and not (header and n in KEYS)]
    if target is not None:
        target_col = _column(target, names, "the target (--target)", path)
    else:
        target_col = others[-1] if others else len(names) - 1
        named = [i for i in others if header and names[i].lower() in TARGET_NAMES and i != target_col]
        if named:
            raise ValueError(
                f"{path.name}: which column is the target? By default the last one, {names[target_col]!r}, but "
                f"{names[named[0]]!r} is named like a target: pass --target {names[target_col]} or --target "
                f"{names[named[0]]} (and --inputs COLS if not all the others are inputs)"
            )
    if inputs:
        input_cols = [_column(c, names, "an input (--inputs)", path) for c in inputs]
    else:
        input_cols = [i for i in others if i != target_col]
    if target_col in input_cols or key_col in (target_col, *input_cols):
        raise ValueError(f"{path.name}: a column cannot play two roles (inputs, target, batch or time)")
    if not input_cols:
        raise ValueError(f"{path.name}: no input columns left; pass --inputs COLS")
    used = [*input_cols, target_col, *([] if key_col is None else [key_col])]
    clock = key_col if key_role == "time" else None
    values, missing, lines = _numbers(data, used, names, first_line, path, dropna, clock)
    values = values[~missing]
    if not len(values):
        raise ValueError(f"{path.name}: no rows left after dropping those with missing values")
    x, frame = values[:, input_cols], None
    if lonlat is not None:
        x, frame = to_metres(x * coord_scale, f"{path.name}, --lonlat {names[input_cols[0]]},{names[input_cols[1]]}")
    if clock is not None and not _iso(next((r[clock] for r in data if r[clock].lower() not in MISSING), "")):
        values[:, clock] *= TIME_UNITS[time_unit]
    return Table(
        x=x,
        y=values[:, target_col],
        inputs=[names[i] for i in input_cols],
        target=names[target_col],
        key=None if key_col is None else values[:, key_col],
        key_role=key_role,
        key_name=None if key_col is None else names[key_col],
        dropped=lines,
        frame=frame,
    )


def _check_units(time_unit: str, lonlat: list | None, inputs: list | None, coord_scale: float) -> None:
    if time_unit not in TIME_UNITS:
        raise ValueError(f"--time-unit is one of {', '.join(TIME_UNITS)}, got {time_unit!r}")
    if lonlat is not None and (len(lonlat) != 2 or inputs):
        raise ValueError("--lonlat names two columns, longitude then latitude, and replaces --inputs")
    if not coord_scale > 0:
        raise ValueError(f"--coord-scale must be positive, got {coord_scale}")


def to_metres(lonlat: np.ndarray, where: str) -> tuple[np.ndarray, dict]:
    """Longitudes and latitudes (N, 2) in degrees as metres in the local frame of the first row, and that frame."""
    from .geo import LocalFrame

    try:
        frame = LocalFrame.around(float(lonlat[0, 0]), float(lonlat[0, 1]))
        return frame.to_local(lonlat[:, 0], lonlat[:, 1]), frame.to_dict()
    except ValueError as err:
        raise ValueError(f"{where}: {err}") from None


def _iso(cell: str) -> float | None:
    """An ISO 8601 time (``2026-11-29T06:18:28.250Z``; without a zone: UTC) as POSIX seconds, else None."""
    try:
        stamp = datetime.fromisoformat(cell)
    except ValueError:
        return None
    return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()


def _numbers(
    data: list[list[str]],
    used: list[int],
    names: list[str],
    first_line: int,
    path: Path,
    dropna: bool,
    clock: int | None = None,
):
    """The used columns of the data rows as floats (NaN elsewhere), which rows miss a value, and their line numbers;
    an error naming the lines when any does and not ``dropna``. The ``clock`` column's cells may also be ISO 8601
    times (as POSIX seconds)."""
    values = np.full((len(data), len(names)), np.nan)
    for k, row in enumerate(data):
        for i in used:
            if row[i].lower() in MISSING:
                continue
            try:
                values[k, i] = float(row[i])
            except ValueError:
                stamp = _iso(row[i]) if i == clock else None
                if stamp is None:
                    kind = "a number or an ISO 8601 time" if i == clock else "a number"
                    raise ValueError(
                        f"{path.name}, line {first_line + k}, column {names[i]!r}: {row[i]!r} is not {kind}"
                    ) from None
                values[k, i] = stamp
    missing = ~np.isfinite(values[:, used]).all(1)
    lines = [first_line + int(k) for k in np.flatnonzero(missing)]
    if lines and not dropna:
        shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
        raise ValueError(
            f"{path.name}: missing or non-finite values on {len(lines)} line(s) ({shown}); fill them, or pass "
            "--dropna to drop those rows"
        )
    return values, missing, lines
