"""A boat's own ROS 2 bag to a depth map: its GPS fixes (sensor_msgs/NavSatFix, degrees) and its echo sounder
(sensor_msgs/Range), matched in time, projected to metres in the UTM zone and replayed through an online GP, one
update per 10 s of the log, as the boat would have updated its map.

Without arguments it first writes a small bag of a boat surveying a lake (4 minutes: a fix at 5 Hz, a sounding
every 0.8 s) in MCAP with rosbags' own writer; with arguments it maps your bag:

    python examples/vehicle_log.py BAG VALUE_TOPIC POSITION_TOPIC      # e.g. my_bag /sonar/range /gps/fix

The same from the shell: onlinegp replay BAG --value-topic /depth --position-topic /fix --period 10 --holdout 0.1
(an ArduPilot log: onlinegp replay LOG.bin --value DPTH.Depth). Needs the logs extra: pip install "onlinegp[logs]".

Run: python examples/vehicle_log.py  (about 15 s; writes the bag and the replay to a temporary directory)
"""

import sys
import tempfile
from pathlib import Path

import numpy as np
from rosbags.rosbag2 import StoragePlugin, Writer
from rosbags.typesys import Stores, get_typestore

from onlinegp.experiments.replay import load_survey, run_replay

STORE = get_typestore(Stores.ROS2_HUMBLE)
T = STORE.types


def stamped(t: float, frame: str):
    sec = int(t)
    stamp = T["builtin_interfaces/msg/Time"](sec=sec, nanosec=int(round((t - sec) * 1e9)))
    return T["std_msgs/msg/Header"](stamp=stamp, frame_id=frame)


def write_demo_bag(path: Path) -> Path:
    """A boat zig-zagging over a 100 m x 60 m patch of a lake near Seattle, at 1.5 m/s."""
    rng = np.random.default_rng(0)
    start = 1_700_000_000.0  # ROS time of the first message
    fixes, soundings = np.arange(0, 240, 0.2), np.arange(0.1, 240, 0.8)
    east = lambda t: 50 + 50 * np.sin(t / 40)
    north = lambda t: 30 * np.sin(t / 11.3) + 30
    lon = -122.3 + east(fixes) / (111_320 * np.cos(np.radians(47.6)))
    lat = 47.6 + north(fixes) / 111_132
    depth = 12 + 4 * np.sin(east(soundings) / 25) + 3 * np.cos(north(soundings) / 15)
    depth += 0.1 * rng.standard_normal(len(soundings))
    with Writer(path, version=9, storage_plugin=StoragePlugin.MCAP) as bag:
        fix_topic = bag.add_connection("/fix", "sensor_msgs/msg/NavSatFix", typestore=STORE)
        sonar_topic = bag.add_connection("/depth", "sensor_msgs/msg/Range", typestore=STORE)
        messages = []
        for t, x, y in zip(fixes, lon, lat):
            fix = T["sensor_msgs/msg/NavSatFix"](
                header=stamped(start + t, "gps"),
                status=T["sensor_msgs/msg/NavSatStatus"](status=0, service=1),
                latitude=y,
                longitude=x,
                altitude=0.0,
                position_covariance=np.zeros(9),
                position_covariance_type=0,
            )
            messages.append((start + t, fix_topic, fix))
        for t, d in zip(soundings, depth):
            ping = T["sensor_msgs/msg/Range"](
                header=stamped(start + t, "sonar"),
                radiation_type=0,
                field_of_view=0.2,
                min_range=0.5,
                max_range=60.0,
                range=d,
            )
            messages.append((start + t, sonar_topic, ping))
        for t, topic, message in sorted(messages, key=lambda m: m[0]):
            bag.write(topic, int(t * 1e9), STORE.serialize_cdr(message, topic.msgtype))
    return path


work = Path(tempfile.mkdtemp(prefix="vehicle_log-"))  # the bag and the replay's outputs go here
if len(sys.argv) == 4:
    bag, value_topic, position_topic = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
else:
    bag, value_topic, position_topic = write_demo_bag(work / "boat_bag"), "/depth", "/fix"

# 1. the bag as a survey: each sounding at the boat's position interpolated between fixes, in metres
columns = {"value_topic": value_topic, "position_topic": position_topic, "dropna": True}
survey = load_survey(bag, period=10.0, holdout=0.1, columns=columns)
print(f"{bag.name}: {survey.meta['roles']}")
print(
    f"{len(survey.y)} samples in {len(survey.batch_end)} updates; frame {survey.meta.get('frame', 'of the odometry')}"
)

# 2. replayed through POAM: its map after every update, scored on the held-out soundings
results = run_replay(bag, ["poam"], work / "replay", {"num_inducing": 40, "num_steps": 10}, survey=survey)
print((work / "replay" / "comparison.md").read_text())
print(f"final RMSE {results['poam'][-1]['rmse']:.3f} m; bag and replay in {work}")
