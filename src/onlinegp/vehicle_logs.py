"""The logs vehicles write, as the samples of a map: where the vehicle was when it measured a value, and when.

Each format is read by its own library, imported only when a log is read (``pip install "onlinegp[logs]"``):

- ArduPilot DataFlash ``.bin`` (pymavlink): positions from a message's ``Lat``/``Lng`` (``GPS`` by default, or
  ``POS``, or the value's own message such as ``DPTH``; degrees, as pymavlink scales them), the value from one
  ``MSG.Field`` (``DPTH.Depth``, ``RFND.Dist``), times from each message's ``TimeUS`` (microseconds since boot). A
  GPS message without a 3-D fix (``Status`` < 3) and a position of exactly (0, 0) are no positions. A message with
  instances (two GPS, two rangefinders) takes one: ``GPS[1]``, ``RFND[0].Dist``.
- ROS 1 ``.bag`` files and ROS 2 bags, sqlite3 or MCAP (a directory with ``metadata.yaml``, or one ``.db3`` or
  ``.mcap`` file), read by rosbags: positions from a ``sensor_msgs/NavSatFix`` topic (longitude, latitude in
  degrees; NO_FIX and NaN skipped) or a ``nav_msgs/Odometry``, ``geometry_msgs/PoseStamped`` or
  ``PoseWithCovarianceStamped`` topic (x, y in metres in the message's frame), values from a
  ``sensor_msgs/Range``, ``Temperature``, ``FluidPressure`` or ``std_msgs/Float32``/``Float64`` topic; a message's
  time is its header stamp when it has one that is set, else the bag's receive time.

Matching: a value's position is the linear interpolation in time between the positions just before and just after
it (not the nearest position: at 2 m/s and a 5 Hz fix, that can be 20 cm off). A value before the first position,
after the last, or between two positions more than ``max_gap`` seconds apart has no position and is dropped, and
:meth:`Track.table` says how many; a log with no position before its values, or none at all, is an error.

:meth:`Track.table` turns a track into the :class:`onlinegp.tables.Table` a CSV with ``--lonlat`` and ``--time``
gives: longitudes and latitudes projected to metres in a :class:`onlinegp.geo.LocalFrame`, times in seconds.
"""

from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .tables import Table, to_metres

INSTALL = 'pip install "onlinegp[logs]" (in make\'s .venv: make extras EXTRAS=logs)'
#: how long (seconds) two positions may lie apart for a value between them to take a position interpolated
MAX_GAP = 5.0
#: a ROS position message type: its x and y, and whether they are longitude and latitude (degrees) or metres
POSITION_TYPES = {
    "sensor_msgs/msg/NavSatFix": (lambda m: _fix(m), True),
    "nav_msgs/msg/Odometry": (lambda m: (m.pose.pose.position.x, m.pose.pose.position.y), False),
    "geometry_msgs/msg/PoseStamped": (lambda m: (m.pose.position.x, m.pose.position.y), False),
    "geometry_msgs/msg/PoseWithCovarianceStamped": (lambda m: (m.pose.pose.position.x, m.pose.pose.position.y), False),
}
#: a ROS value message type: the field holding its value
VALUE_TYPES = {
    "sensor_msgs/msg/Range": "range",
    "std_msgs/msg/Float32": "data",
    "std_msgs/msg/Float64": "data",
    "sensor_msgs/msg/FluidPressure": "fluid_pressure",
    "sensor_msgs/msg/Temperature": "temperature",
}
#: the names a DataFlash message's instance column goes by when the log's FMTU does not say
INSTANCE_COLUMNS = ("I", "Inst", "Instance")
SPEC = re.compile(r"^(?P<msg>[A-Za-z0-9_]+)(?:\[(?P<inst>\d+)\])?(?:\.(?P<field>[A-Za-z0-9_]+))?$")


@dataclass
class Track:
    """A log's values with the positions matched to them: ``time`` (N,) seconds, ``position`` (N, 2) longitude and
    latitude in degrees when ``geographic`` (else x, y metres in the log's frame), ``value`` (N,); the names of the
    position's columns and of the value, and one line on how they were matched."""

    time: np.ndarray
    position: np.ndarray
    value: np.ndarray
    position_names: tuple[str, str]
    value_name: str
    geographic: bool
    matched: str
    #: what the times are, e.g. ``TimeUS``
    clock: str = "time"

    def table(self, dropna: bool = False, where: str = "log") -> Table:
        """The track as a CSV with ``--lonlat`` and ``--time`` reads: positions in metres (a local UTM frame when
        geographic), times in seconds; NaN or infinite values are an error unless ``dropna`` drops them."""
        bad = ~np.isfinite(self.value)
        if bad.any() and not dropna:
            raise ValueError(
                f"{where}: {int(bad.sum())} of {len(bad)} values of {self.value_name} are NaN or infinite (out of "
                "range?): pass --dropna to drop them"
            )
        keep = ~bad
        if not keep.any():
            raise ValueError(f"{where}: no finite value of {self.value_name} is left")
        x, frame = self.position[keep], None
        if self.geographic:
            x, frame = to_metres(x, f"{where}, positions {', '.join(self.position_names)}")
        return Table(
            x=x,
            y=self.value[keep],
            inputs=list(self.position_names),
            target=self.value_name,
            key=self.time[keep],
            key_role="time",
            key_name=self.clock,
            dropped=[int(k) for k in np.flatnonzero(bad)],
            frame=frame,
            source=self.matched,
        )


def log_kind(path: str | Path) -> str | None:
    """``"dataflash"``, ``"ros1"`` or ``"ros2"`` for the vehicle log at ``path`` (by its name, or a directory's
    ``metadata.yaml``), None for any other path."""
    path = Path(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        return "ros2" if (path / "metadata.yaml").is_file() else None
    if not path.is_file():
        return None
    return {".bin": "dataflash", ".bag": "ros1", ".mcap": "ros2", ".db3": "ros2"}.get(suffix)


def read_log(
    path: str | Path,
    value: str | None = None,
    position: str | None = None,
    value_topic: str | None = None,
    position_topic: str | None = None,
    max_gap: float = MAX_GAP,
) -> Track:
    """The track of the vehicle log at ``path`` (:func:`log_kind`): a DataFlash log's ``value`` (``MSG.Field``) at
    its ``position`` message's positions (default ``GPS``), or a bag's ``value_topic`` at its ``position_topic``."""
    path, kind = Path(path), log_kind(path)
    if kind is None:
        raise ValueError(
            f"{str(path)!r} is no vehicle log: a DataFlash .bin, a ROS 1 .bag, or a ROS 2 bag (a directory with "
            "metadata.yaml, or a .db3 or .mcap file)"
        )
    if kind == "dataflash":
        if value is None or value_topic is not None or position_topic is not None:
            raise ValueError(
                f"{path.name} is a DataFlash log: name its value as --value MSG.Field (e.g. DPTH.Depth) and, when "
                "not GPS, its position message as --position MSG (not --value-topic/--position-topic)"
            )
        return read_dataflash(path, value, position or "GPS", max_gap)
    if value_topic is None or position_topic is None or value is not None or position is not None:
        raise ValueError(
            f"{path.name} is a ROS bag: name its topics, --value-topic TOPIC and --position-topic TOPIC (not "
            "--value/--position, which are a DataFlash log's)"
        )
    return read_bag(path, value_topic, position_topic, max_gap)


def _need(module: str, what: str):
    try:
        return importlib.import_module(module)
    except ImportError as err:
        raise ImportError(f"reading {what} needs {module.partition('.')[0]}: {INSTALL}") from err


# ------------------------------------------------------------------------------------------------ ArduPilot DataFlash
def read_dataflash(path: str | Path, value: str, position: str = "GPS", max_gap: float = MAX_GAP) -> Track:
    """The track of an ArduPilot DataFlash log: ``value`` (``MSG.Field`` or ``MSG[instance].Field``) at the
    positions of the ``position`` message's ``Lat``/``Lng`` (see the module docstring)."""
    mavutil = _need("pymavlink.mavutil", "DataFlash logs")
    path = Path(path)
    try:
        reader = mavutil.mavlink_connection(str(path))
    except Exception as err:  # whatever pymavlink raises for a file it cannot parse (an empty one: mmap's ValueError)
        raise ValueError(f"cannot read {path.name} as a DataFlash log ({type(err).__name__}: {err})") from err
    try:
        formats = {f.name: f for t, f in reader.formats.items() if reader.counts[t]}
        vmsg, vinst, field = _spec(value, formats, path, "--value", need_field=True)
        pmsg, pinst, _ = _spec(position, formats, path, "--position", need_field=False)
        for name, column in ((pmsg, "Lat"), (pmsg, "Lng"), (vmsg, field)):
            if column not in formats[name].columns:
                raise ValueError(
                    f"{path.name}: {name} has no field {column}; its fields are {', '.join(formats[name].columns)}"
                )
        rows = _dataflash_rows(reader, {pmsg, vmsg}, field)
    finally:
        reader.close()
    positions = _one_instance(rows[pmsg], pinst, position, path)
    values = _one_instance(rows[vmsg], vinst, value, path)
    if "Status" in formats[pmsg].columns:
        positions = positions[positions[:, 2] >= 3]  # a GPS message's fix: 3 is a 3-D fix
    positions = positions[~(positions[:, 3:5] == 0).all(1)]  # (0, 0): logged before any fix
    names = (f"{position}.Lng", f"{position}.Lat")
    lng_lat = positions[:, [4, 3]]
    track = _match(positions[:, 0], lng_lat, values[:, 0], values[:, 5], names, value, True, max_gap, path)
    track.clock = "TimeUS (s since boot)"
    return track


def _spec(text: str, formats: dict, path: Path, flag: str, need_field: bool) -> tuple[str, int | None, str | None]:
    """``MSG``, ``MSG[i]``, ``MSG.Field`` or ``MSG[i].Field`` as (message, instance or None, field or None)."""
    found = SPEC.match(text or "")
    if found is None or need_field != (found["field"] is not None):
        shape = "MSG.Field (e.g. DPTH.Depth, RFND[0].Dist)" if need_field else "MSG (e.g. GPS, POS, GPS[1])"
        raise ValueError(f"{flag} {text!r}: expected {shape}")
    if found["msg"] not in formats:
        held = ", ".join(f"{n} ({', '.join(f.columns)})" for n, f in sorted(formats.items()) if n != "FMT")
        held = held or "no message at all: is it a DataFlash log?"
        raise ValueError(f"{path.name} holds no {found['msg']} message ({flag}); it holds {held}")
    return found["msg"], None if found["inst"] is None else int(found["inst"]), found["field"]


def _instance_column(fmt) -> str | None:
    if fmt.instance_field is not None:
        return fmt.instance_field
    return next((c for c in INSTANCE_COLUMNS if c in fmt.columns), None)


def _dataflash_rows(reader, names: set[str], field: str) -> dict[str, list[tuple]]:
    """For each message of ``names``, in log order: (time s, instance or -1, Status or -1, Lat, Lng, ``field``), NaN
    for a field the message lacks."""
    rows: dict[str, list[tuple]] = {name: [] for name in names}
    while (m := reader.recv_match(type=sorted(names))) is not None:
        columns = m.fmt.columns
        clock = "TimeUS" if "TimeUS" in columns else "TimeMS"
        time = getattr(m, clock) * (1e-6 if clock == "TimeUS" else 1e-3)
        instance = _instance_column(m.fmt)
        head = (time, -1 if instance is None else int(getattr(m, instance)), getattr(m, "Status", -1))
        rows[m.get_type()].append(
            head + tuple(float(getattr(m, f)) if f in columns else math.nan for f in ("Lat", "Lng", field))
        )
    return rows


def _one_instance(rows: list[tuple], instance: int | None, spec: str, path: Path) -> np.ndarray:
    """The rows of one instance, (time, instance, status, ...) as an array: the instance named, or the only one."""
    table = np.array(rows, dtype=np.float64).reshape(len(rows), -1)
    instances = sorted({int(i) for i in table[:, 1]}) if len(table) else []
    if instance is not None:
        if instance not in instances:
            raise ValueError(f"{path.name}: {spec} names instance {instance}; the log has {instances or 'none'}")
        return table[table[:, 1] == instance]
    if len(instances) > 1:
        message, _, field = spec.partition(".")
        named = ", ".join(f"{message}[{i}]" + (f".{field}" if field else "") for i in instances)
        raise ValueError(f"{path.name}: {message} is logged by {len(instances)} instances; name one: {named}")
    return table


# ------------------------------------------------------------------------------------------------ ROS 1 and ROS 2 bags
def read_bag(path: str | Path, value_topic: str, position_topic: str, max_gap: float = MAX_GAP) -> Track:
    """The track of a ROS 1 or ROS 2 bag: ``value_topic``'s values at ``position_topic``'s positions (see the module
    docstring)."""
    highlevel = _need("rosbags.highlevel", "ROS bags")
    typesys = _need("rosbags.typesys", "ROS bags")
    path = Path(path)
    try:
        with highlevel.AnyReader([path], default_typestore=typesys.get_typestore(typesys.Stores.LATEST)) as reader:
            types = {c.topic: c.msgtype for c in reader.connections}
            position_type = _topic(types, position_topic, POSITION_TYPES, "--position-topic", path)
            value_type = _topic(types, value_topic, VALUE_TYPES, "--value-topic", path)
            read, geographic = POSITION_TYPES[position_type]
            field = VALUE_TYPES[value_type]
            position_rows = _bag_rows(reader, position_topic, read)
            value_rows = _bag_rows(reader, value_topic, lambda m: (getattr(m, field),))
    except highlevel.AnyReaderError as err:
        raise ValueError(f"cannot read the bag {str(path)!r}: {err}") from err
    ok = np.isfinite(position_rows).all(1)
    t_pos, xy = position_rows[ok, 0], position_rows[ok, 1:]
    axes = ("longitude", "latitude") if geographic else ("x", "y")
    names = (f"{position_topic} {axes[0]}", f"{position_topic} {axes[1]}")
    y_name = f"{value_topic} {field}"
    track = _match(t_pos, xy, value_rows[:, 0], value_rows[:, 1], names, y_name, geographic, max_gap, path)
    track.clock = "header stamps, else receive times (s)"
    return track


def _topic(types: dict[str, str], topic: str, known: dict, flag: str, path: Path) -> str:
    """The message type of ``topic``, which must be one of ``known``; an error listing the bag's topics otherwise."""
    if topic not in types:
        held = ", ".join(f"{t} ({m})" for t, m in sorted(types.items()))
        raise ValueError(f"{path.name} has no topic {topic!r} ({flag}); its topics are {held or 'none'}")
    if types[topic] not in known:
        raise ValueError(
            f"{path.name}: {flag} {topic} carries {types[topic]}; this option reads {', '.join(sorted(known))}"
        )
    return types[topic]


def _bag_rows(reader, topic: str, read) -> np.ndarray:
    """(time s, *``read(message)``) of each message on ``topic``, in the bag's order."""
    rows = []
    for connection, received, raw in reader.messages(connections=[c for c in reader.connections if c.topic == topic]):
        message = reader.deserialize(raw, connection.msgtype)
        stamp = getattr(getattr(message, "header", None), "stamp", None)
        if stamp is not None and (stamp.sec or stamp.nanosec):
            time = stamp.sec + stamp.nanosec * 1e-9
        else:
            time = received * 1e-9
        rows.append((time, *read(message)))
    return np.array(rows, dtype=np.float64).reshape(len(rows), -1)


def _fix(message) -> tuple[float, float]:
    """A NavSatFix's (longitude, latitude), NaN without a fix (status NO_FIX, -1)."""
    if message.status.status < 0:
        return math.nan, math.nan
    return message.longitude, message.latitude


# ------------------------------------------------------------------------------------------------ matching in time
def interpolate(
    t_pos: np.ndarray, position: np.ndarray, t_val: np.ndarray, max_gap: float = MAX_GAP
) -> tuple[np.ndarray, np.ndarray]:
    """Positions (N, 2) at the times ``t_val`` (N,), each linearly interpolated between the position just before and
    just after it, and which of them have such positions no more than ``max_gap`` seconds apart."""
    t_pos, first = np.unique(t_pos, return_index=True)  # sorted; a repeated time keeps its first position
    position = position[first]
    before = np.clip(np.searchsorted(t_pos, t_val, side="right") - 1, 0, len(t_pos) - 1)
    after = np.clip(np.searchsorted(t_pos, t_val, side="left"), 0, len(t_pos) - 1)
    ok = (t_val >= t_pos[0]) & (t_val <= t_pos[-1]) & (t_pos[after] - t_pos[before] <= max_gap)
    at = np.column_stack([np.interp(t_val, t_pos, position[:, k]) for k in range(2)])
    return at, ok


def _match(t_pos, position, t_val, value, position_names, value_name, geographic, max_gap, path) -> Track:
    """The track of ``value`` at ``position`` interpolated to its times (:func:`interpolate`)."""
    if not len(t_pos) or not len(t_val) or t_pos.min() > t_val.max():
        first = f"the first at {t_pos.min():.3f} s" if len(t_pos) else "none"
        raise ValueError(
            f"{path.name}: no position ({' '.join(position_names)}: {len(t_pos)}, {first}) before the last of the "
            f"{len(t_val)} values of {value_name}: is the position the vehicle's fix, logged in the same run?"
        )
    order = np.argsort(t_val, kind="stable")
    t_val, value = t_val[order], value[order]
    at, ok = interpolate(t_pos, position, t_val, max_gap)
    if not ok.any():
        raise ValueError(
            f"{path.name}: no value of {value_name} lies between two positions less than {max_gap:g} s apart"
        )
    matched = f"values at positions interpolated in time ({len(t_pos)} positions)"
    if (~ok).any():
        matched += f"; {int((~ok).sum())} value(s) without a position within {max_gap:g} s dropped"
    return Track(t_val[ok], at[ok], value[ok], position_names, value_name, geographic, matched)
