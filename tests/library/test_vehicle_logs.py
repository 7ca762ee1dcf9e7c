"""Vehicles' own logs, written here in their real formats by the formats' own libraries (pymavlink's DataFlash
struct definitions; rosbags' ROS 1 and ROS 2 writers and serialisers), read back: times, values and positions
against what was written, the matching in time, and the errors that say what to do."""

import math
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from onlinegp import vehicle_logs
from onlinegp.geo import LocalFrame

#: where the boat is: UTM zone 10 north (EPSG:32610)
LON0, LAT0 = -122.3, 47.5
M_PER_DEG_LAT = 111_132.0
M_PER_DEG_LON = 111_320.0 * math.cos(math.radians(LAT0))
#: a lawnmower over an 80 m x 60 m box at 2 m/s: 380 m in 190 s
CORNERS = np.array([[0, 0], [0, 60], [20, 60], [20, 0], [40, 0], [40, 60], [60, 60], [60, 0], [80, 0], [80, 60]])
SPEED = 2.0
#: the fixes' clock (5 Hz) and the values' (every 0.6 s, each midway between two fixes)
FIX_TIMES = np.arange(950) * 0.2
VALUE_TIMES = 0.1 + np.arange(316) * 0.6


def boat(t: np.ndarray) -> np.ndarray:
    """(east, north) metres of the boat at times ``t`` seconds."""
    legs = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(CORNERS, axis=0), axis=1))])
    s = np.minimum(SPEED * np.asarray(t), legs[-1])
    return np.column_stack([np.interp(s, legs, CORNERS[:, 0]), np.interp(s, legs, CORNERS[:, 1])])


def lonlat(en: np.ndarray) -> np.ndarray:
    return np.column_stack([LON0 + en[:, 0] / M_PER_DEG_LON, LAT0 + en[:, 1] / M_PER_DEG_LAT])


def depth(en: np.ndarray) -> np.ndarray:
    """The lake's depth (metres) under (east, north)."""
    return 6 + 2 * np.sin(en[:, 0] / 15) + 1.5 * np.cos(en[:, 1] / 12)


#: what the sounder logs: the depth under the boat with 5 cm of noise
SOUNDINGS = depth(boat(VALUE_TIMES)) + np.random.default_rng(0).normal(0.0, 0.05, len(VALUE_TIMES))


# ------------------------------------------------------------------------------------------------ DataFlash writer
#: ArduPilot's own message layouts (libraries/AP_Logger, Rover's DPTH), in pymavlink's format characters
GPS_LAYOUT = ("GPS", "QBBIHBcLLeffffB", "TimeUS,I,Status,GMS,GWk,NSats,HDop,Lat,Lng,Alt,Spd,GCrs,VZ,Yaw,U")
DPTH_LAYOUT = ("DPTH", "QBLLff", "TimeUS,Inst,Lat,Lng,Depth,Temp")
BOOT_US = 5_000_000  # TimeUS counts from boot: the log starts 5 s in


def write_dataflash(path: Path, gps: list[tuple], dpth: list[tuple]) -> Path:
    """A DataFlash .bin as ArduPilot writes it: the FMT message of FMT, then one FMT per message type, then the
    messages (each: 0xA3 0x95, its type, its fields packed by pymavlink's own ``DFFormat.msg_struct``), in time
    order. ``gps`` rows are (TimeUS, I, Status, Lat, Lng) with Lat/Lng in degrees; ``dpth`` rows (TimeUS, Depth)."""
    from pymavlink.DFReader import DFFormat

    fmt = DFFormat(0x80, "FMT", 89, "BBnNZ", "Type,Length,Name,Format,Columns")
    layouts = {name: DFFormat(t, name, 0, f, c) for t, (name, f, c) in enumerate([GPS_LAYOUT, DPTH_LAYOUT], 130)}

    def message(f, *values) -> tuple[int, bytes]:
        return values[0] if f.name != "FMT" else -1, struct.pack("<BBB", 0xA3, 0x95, f.type) + struct.pack(
            f.msg_struct, *values
        )

    def fmt_of(f) -> tuple[int, bytes]:
        size = struct.calcsize(f.msg_struct) + 3
        return message(fmt, f.type, size, f.name.encode(), f.format.encode(), ",".join(f.columns).encode())

    head = [fmt_of(f) for f in (fmt, *layouts.values())]
    body = [
        message(layouts["GPS"], t, i, status, 1000, 2300, 12, 80, round(lat * 1e7), round(lng * 1e7), 20, 2, 0, 0, 0, 1)
        for t, i, status, lat, lng in gps
    ]
    body += [message(layouts["DPTH"], t, 0, 0, 0, d, 15.0) for t, d in dpth]
    body.sort(key=lambda m: m[0])
    path.write_bytes(b"".join(m for _, m in head + body))
    return path


def boat_dataflash(path: Path, no_fix_until: float = 0.0, second_gps: bool = False) -> Path:
    """The boat's log: GPS at 5 Hz (no fix, Lat = Lng = 0, before ``no_fix_until`` s) and DPTH.Depth every 0.6 s."""
    ll = lonlat(boat(FIX_TIMES))
    gps = [
        (BOOT_US + round(t * 1e6), 0, 3, lat, lng) if t >= no_fix_until else (BOOT_US + round(t * 1e6), 0, 1, 0, 0)
        for t, (lng, lat) in zip(FIX_TIMES, ll)
    ]
    if second_gps:
        gps += [(us + 50_000, 1, 3, lat, lng) for us, _, _, lat, lng in gps]
    dpth = [(BOOT_US + round(t * 1e6), d) for t, d in zip(VALUE_TIMES, SOUNDINGS)]
    return write_dataflash(path, gps, dpth)


def metres(position: np.ndarray) -> np.ndarray:
    """Longitude, latitude degrees back to the boat's (east, north) metres."""
    return np.column_stack([(position[:, 0] - LON0) * M_PER_DEG_LON, (position[:, 1] - LAT0) * M_PER_DEG_LAT])


def test_a_dataflash_log_reads_back_as_written(tmp_path):
    pytest.importorskip("pymavlink")
    log = boat_dataflash(tmp_path / "00000042.BIN")
    assert vehicle_logs.log_kind(log) == "dataflash"
    track = vehicle_logs.read_log(log, value="DPTH.Depth")
    # every value (0.1 s to 189.1 s) lies midway between two fixes (0 s to 189.8 s, 5 Hz)
    assert len(track.value) == len(VALUE_TIMES) and track.geographic
    np.testing.assert_allclose(track.time, (BOOT_US + np.round(VALUE_TIMES * 1e6)) * 1e-6, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(track.value, SOUNDINGS.astype(np.float32))  # the 'f' field
    # pymavlink gives Lat/Lng in degrees (the 'L' field's 1e-7 applied): interpolated between the fixes written
    written = lonlat(boat(FIX_TIMES))
    expected = np.column_stack([np.interp(VALUE_TIMES, FIX_TIMES, written[:, k]) for k in range(2)])
    np.testing.assert_allclose(track.position, expected, rtol=0, atol=2e-7)
    error = np.linalg.norm(metres(track.position) - boat(VALUE_TIMES), axis=1)
    nearest = np.linalg.norm(boat(np.round(VALUE_TIMES / 0.2) * 0.2) - boat(VALUE_TIMES), axis=1)
    assert np.median(error) < 0.02 and np.median(nearest) > 0.15  # interpolated, not the nearest fix (0.2 m off)
    assert track.position_names == ("GPS.Lng", "GPS.Lat") and track.value_name == "DPTH.Depth"


def test_dataflash_fixes_instances_and_the_values_own_message(tmp_path):
    pytest.importorskip("pymavlink")
    log = boat_dataflash(tmp_path / "nofix.bin", no_fix_until=2.0)
    track = vehicle_logs.read_log(log, value="DPTH.Depth")
    # GPS without a 3-D fix (Status 1, Lat = Lng = 0) is no position: the 4 values before 2.0 s have none
    assert len(track.value) == len(VALUE_TIMES) - 4 and track.time[0] == pytest.approx(BOOT_US * 1e-6 + 2.5)
    assert "4 value(s) without a position" in track.matched
    assert np.abs(metres(track.position)).max() < 100  # no (0, 0) among the positions
    two = boat_dataflash(tmp_path / "two.bin", second_gps=True)
    with pytest.raises(ValueError, match=r"GPS is logged by 2 instances; name one: GPS\[0\], GPS\[1\]"):
        vehicle_logs.read_log(two, value="DPTH.Depth")
    first = vehicle_logs.read_log(two, value="DPTH.Depth", position="GPS[0]")
    second = vehicle_logs.read_log(two, value="DPTH.Depth", position="GPS[1]")  # 50 ms later: 0.1 m behind
    assert np.median(np.linalg.norm(metres(first.position) - boat(VALUE_TIMES), axis=1)) < 0.02
    shift = np.linalg.norm(metres(first.position) - metres(second.position), axis=1)
    assert 0.05 < np.median(shift) < 0.15
    # DPTH carries no Lat/Lng of its own here (zeros): as the position message, it has no position at all
    with pytest.raises(ValueError, match="no position"):
        vehicle_logs.read_log(log, value="DPTH.Depth", position="DPTH")


def test_dataflash_errors_name_what_the_log_holds(tmp_path):
    pytest.importorskip("pymavlink")
    log = boat_dataflash(tmp_path / "boat.bin")
    with pytest.raises(ValueError, match=r"holds no RFND message \(--value\); it holds DPTH \(TimeUS, Inst, .*\), GPS"):
        vehicle_logs.read_log(log, value="RFND.Dist")
    with pytest.raises(ValueError, match="DPTH has no field Dist; its fields are TimeUS, Inst, Lat, Lng, Depth, Temp"):
        vehicle_logs.read_log(log, value="DPTH.Dist")
    with pytest.raises(ValueError, match=r"--value 'DPTH': expected MSG.Field"):
        vehicle_logs.read_log(log, value="DPTH")
    with pytest.raises(ValueError, match="holds no POS message"):
        vehicle_logs.read_log(log, value="DPTH.Depth", position="POS")
    with pytest.raises(ValueError, match="instance 3; the log has \\[0\\]"):
        vehicle_logs.read_log(log, value="DPTH.Depth", position="GPS[3]")
    with pytest.raises(ValueError, match="DataFlash log: name its value as --value MSG.Field"):
        vehicle_logs.read_log(log, value_topic="/depth", position_topic="/fix")
    (tmp_path / "empty.bin").write_bytes(b"")
    with pytest.raises(ValueError, match="cannot read empty.bin as a DataFlash log"):
        vehicle_logs.read_log(tmp_path / "empty.bin", value="DPTH.Depth")
    (tmp_path / "text.bin").write_bytes(b"not a log\n" * 100)
    with pytest.raises(ValueError, match="holds no DPTH message .* no message at all: is it a DataFlash log"):
        vehicle_logs.read_log(tmp_path / "text.bin", value="DPTH.Depth")
    late = write_dataflash(tmp_path / "late.bin", [(9_000_000, 0, 3, LAT0, LON0)], [(1_000_000, 5.0)])
    with pytest.raises(ValueError, match=r"no position \(GPS.Lng GPS.Lat: 1, the first at 9.000 s\) before the last"):
        vehicle_logs.read_log(late, value="DPTH.Depth")


# ------------------------------------------------------------------------------------------------ ROS bags
STAMP0 = 1_700_000_000  # the boat's clock: ROS time, seconds since 1970
FIX_LATENCY = 0.3  # each fix reaches the bag 0.3 s after its header stamp: 0.6 m of travel


def ros_time(store, t: float):
    sec = math.floor(t)
    return store.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=round((t - sec) * 1e9))


def header(store, t: float, frame: str):
    fields = {"seq": 0} if "seq" in store.types["std_msgs/msg/Header"].__dataclass_fields__ else {}
    return store.types["std_msgs/msg/Header"](stamp=ros_time(store, t), frame_id=frame, **fields)


def fix_message(store, t: float, lon: float, lat: float):
    types = store.types
    status = types["sensor_msgs/msg/NavSatStatus"](status=0, service=1)
    return types["sensor_msgs/msg/NavSatFix"](
        header=header(store, t, "gps"),
        status=status,
        latitude=lat,
        longitude=lon,
        altitude=0.0,
        position_covariance=np.zeros(9),
        position_covariance_type=0,
    )


def odometry_message(store, t: float, x: float, y: float):
    types = store.types
    point = types["geometry_msgs/msg/Point"](x=x, y=y, z=0.0)
    pose = types["geometry_msgs/msg/Pose"](
        position=point, orientation=types["geometry_msgs/msg/Quaternion"](x=0.0, y=0.0, z=0.0, w=1.0)
    )
    twist = types["geometry_msgs/msg/Twist"](
        linear=types["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
        angular=types["geometry_msgs/msg/Vector3"](x=0.0, y=0.0, z=0.0),
    )
    return types["nav_msgs/msg/Odometry"](
        header=header(store, t, "odom"),
        child_frame_id="base_link",
        pose=types["geometry_msgs/msg/PoseWithCovariance"](pose=pose, covariance=np.zeros(36)),
        twist=types["geometry_msgs/msg/TwistWithCovariance"](twist=twist, covariance=np.zeros(36)),
    )


def range_message(store, t: float, value: float):
    return store.types["sensor_msgs/msg/Range"](
        header=header(store, t, "sonar"),
        radiation_type=0,
        field_of_view=0.1,
        min_range=0.3,
        max_range=50.0,
        range=value,
    )


def write_bag(path: Path, kind: str, odometry: bool = False, values: np.ndarray | None = None) -> Path:
    """The boat's bag, written by rosbags: ``kind`` is ros1 (a .bag), ros2 (sqlite3) or mcap (ROS 2 in MCAP).
    Positions: /fix NavSatFix (received FIX_LATENCY after their stamps), or /odom Odometry (metres, no latency);
    values: /depth Range (stamped), or with ``odometry`` /depth Float64 (no header: its receive time)."""
    from rosbags import rosbag1, rosbag2
    from rosbags.typesys import Stores, get_typestore

    store = get_typestore(Stores.ROS1_NOETIC if kind == "ros1" else Stores.ROS2_HUMBLE)
    values = SOUNDINGS if values is None else values
    messages = []  # (receive time, topic, message type, message)
    for t, (e, n), (lon, lat) in zip(FIX_TIMES, boat(FIX_TIMES), lonlat(boat(FIX_TIMES))):
        if odometry:
            messages.append((STAMP0 + t, "/odom", "nav_msgs/msg/Odometry", odometry_message(store, STAMP0 + t, e, n)))
        else:
            fix = fix_message(store, STAMP0 + t, lon, lat)
            messages.append((STAMP0 + t + FIX_LATENCY, "/fix", "sensor_msgs/msg/NavSatFix", fix))
    for t, d in zip(VALUE_TIMES, values):
        if odometry:
            messages.append((STAMP0 + t, "/depth", "std_msgs/msg/Float64", store.types["std_msgs/msg/Float64"](data=d)))
        else:
            messages.append((STAMP0 + t, "/depth", "sensor_msgs/msg/Range", range_message(store, STAMP0 + t, d)))
    messages.sort(key=lambda m: m[0])
    if kind == "ros1":
        writer, serialise = rosbag1.Writer(path), store.serialize_ros1
    else:
        plugin = rosbag2.StoragePlugin.MCAP if kind == "mcap" else rosbag2.StoragePlugin.SQLITE3
        writer, serialise = rosbag2.Writer(path, version=9, storage_plugin=plugin), store.serialize_cdr
    with writer:
        connections = {}
        for received, topic, msgtype, message in messages:
            if topic not in connections:
                connections[topic] = writer.add_connection(topic, msgtype, typestore=store)
            writer.write(connections[topic], round(received * 1e9), serialise(message, msgtype))
    return path


BAGS = {"ros2": "boat_ros2", "mcap": "boat_mcap", "ros1": "boat.bag"}


@pytest.mark.parametrize("kind", BAGS)
def test_a_bag_reads_back_as_written(tmp_path, kind):
    pytest.importorskip("rosbags")
    bag = write_bag(tmp_path / BAGS[kind], kind)
    assert vehicle_logs.log_kind(bag) == ("ros1" if kind == "ros1" else "ros2")
    track = vehicle_logs.read_log(bag, value_topic="/depth", position_topic="/fix")
    assert len(track.value) == len(VALUE_TIMES) and track.geographic
    np.testing.assert_allclose(track.time, STAMP0 + VALUE_TIMES, rtol=0, atol=1e-6)  # the Range's header stamps
    np.testing.assert_array_equal(track.value, SOUNDINGS.astype(np.float32))  # Range.range: float32
    # positions by the fixes' header stamps, not their receive times (0.3 s, 0.6 m later)
    error = np.linalg.norm(metres(track.position) - boat(VALUE_TIMES), axis=1)
    assert np.median(error) < 0.01, np.median(error)
    assert track.position_names == ("/fix longitude", "/fix latitude") and track.value_name == "/depth range"
    if kind == "mcap":  # the bag's one storage file reads the same as its directory
        (storage,) = bag.glob("*.mcap")
        alone = vehicle_logs.read_log(storage, value_topic="/depth", position_topic="/fix")
        np.testing.assert_array_equal(alone.position, track.position)


def test_a_bag_with_odometry_and_unstamped_values(tmp_path):
    pytest.importorskip("rosbags")
    bag = write_bag(tmp_path / "odom", "ros2", odometry=True)
    track = vehicle_logs.read_log(bag, value_topic="/depth", position_topic="/odom")
    assert not track.geographic and track.position_names == ("/odom x", "/odom y")
    np.testing.assert_allclose(track.time, STAMP0 + VALUE_TIMES, rtol=0, atol=1e-6)  # Float64: its receive time
    np.testing.assert_array_equal(track.value, SOUNDINGS)  # float64 as written
    written = boat(FIX_TIMES)
    expected = np.column_stack([np.interp(VALUE_TIMES, FIX_TIMES, written[:, k]) for k in range(2)])
    np.testing.assert_allclose(track.position, expected, rtol=0, atol=1e-6)
    table = track.table()
    assert table.frame is None and table.x is not None
    np.testing.assert_allclose(table.x, expected, atol=1e-6)  # metres in the odometry frame, as they are


def test_bag_errors_list_the_topics(tmp_path):
    pytest.importorskip("rosbags")
    bag = write_bag(tmp_path / "boat", "ros2")
    with pytest.raises(ValueError, match=r"no topic '/sonar' \(--value-topic\); its topics are /depth "):
        vehicle_logs.read_log(bag, value_topic="/sonar", position_topic="/fix")
    with pytest.raises(ValueError, match="--position-topic /depth carries sensor_msgs/msg/Range; this option reads"):
        vehicle_logs.read_log(bag, value_topic="/depth", position_topic="/depth")
    with pytest.raises(ValueError, match="a ROS bag: name its topics"):
        vehicle_logs.read_log(bag, value="DPTH.Depth")
    with pytest.raises(ValueError, match="is no vehicle log"):
        vehicle_logs.read_log(tmp_path, value_topic="/depth", position_topic="/fix")


def test_missing_libraries_say_what_to_install(tmp_path, monkeypatch):
    (tmp_path / "a.bin").write_bytes(b"")
    (tmp_path / "a.bag").write_bytes(b"")
    monkeypatch.setitem(sys.modules, "pymavlink.mavutil", None)
    monkeypatch.setitem(sys.modules, "rosbags.highlevel", None)
    for path, how in ((tmp_path / "a.bin", {"value": "DPTH.Depth"}), (tmp_path / "a.bag", {"value_topic": "/d"})):
        how = {"position_topic": "/fix", **how} if "value_topic" in how else how
        with pytest.raises(ImportError, match=r'pip install "onlinegp\[logs\]".*make extras EXTRAS=logs'):
            vehicle_logs.read_log(path, **how)


# ------------------------------------------------------------------------------------------------ matching, table
def test_interpolation_is_linear_in_time_and_drops_values_without_positions():
    t_pos = np.array([0.0, 1.0, 2.0, 10.0, 11.0])
    position = np.column_stack([t_pos * 2, -t_pos])
    at, ok = vehicle_logs.interpolate(t_pos, position, np.array([-0.5, 0.25, 1.0, 1.5, 5.0, 10.5, 11.0, 12.0]), 5.0)
    np.testing.assert_array_equal(ok, [False, True, True, True, False, True, True, False])  # 2 -> 10: a gap of 8 s
    np.testing.assert_allclose(at[ok], [[0.5, -0.25], [2.0, -1.0], [3.0, -1.5], [21.0, -10.5], [22.0, -11.0]])
    _, ok = vehicle_logs.interpolate(t_pos, position, np.array([5.0]), max_gap=10.0)
    assert ok.all()


def test_a_track_is_the_table_a_lonlat_csv_gives():
    pytest.importorskip("pyproj")
    en = boat(VALUE_TIMES)
    values = depth(en)
    values[[3, 7]] = np.nan
    track = vehicle_logs.Track(VALUE_TIMES, lonlat(en), values, ("Lng", "Lat"), "depth", True, "matched", "TimeUS")
    with pytest.raises(ValueError, match="2 of 316 values of depth are NaN or infinite .*--dropna"):
        track.table()
    table = track.table(dropna=True)
    frame = LocalFrame.around(*lonlat(en)[0])
    keep = np.isfinite(values)
    np.testing.assert_allclose(table.x, frame.to_local(*lonlat(en)[keep].T))
    assert table.frame == frame.to_dict() and table.dropped == [3, 7] and table.key_role == "time"
    np.testing.assert_array_equal(table.key, VALUE_TIMES[keep])
    assert "target depth" in table.roles() and "time column TimeUS" in table.roles()
