"""Load on ``onlinegp serve``: K simulated vehicles each posting one observation at R Hz for T seconds to
a real service (a subprocess on loopback, POAM with its defaults over [-30, 30]^2, batches of 50 rows or 2 s).

Per K: the acknowledgement latency of the posts (p50, p99, max: the row is committed to the log when it returns),
the updates per second, the largest backlog (rows in no closed batch) and the map's staleness (the age of the
oldest row the map does not yet hold, polled from /status every 0.5 s; median and max).

    .venv/bin/python benchmarks/perf/bench_serve_load.py                      # K = 1, 4, 16 at 10 Hz for 60 s each
    .venv/bin/python benchmarks/perf/bench_serve_load.py --vehicles 4 --seconds 20
    .venv/bin/python benchmarks/perf/bench_serve_load.py --render           # docs/results/serve-load.md from the JSON

Writes results/bench_serve_load.json (each run with the 1-minute load average before and after it). Opt-in in the perf suite (benchmarks/perf/run.py --only bench_serve_load): minutes, and it needs the
serve extra.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
from common import EXTENT, RESULTS, field, write

import onlinegp
from onlinegp.client import MapClient
from onlinegp.experiments.service.store import Store


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(run: Path, port: int, batch_size: int, batch_seconds: float) -> subprocess.Popen:
    env = os.environ | {"PYTHONPATH": str(Path(onlinegp.__file__).parents[1])}
    area = f"{-EXTENT},{EXTENT},{-EXTENT},{EXTENT}"
    command = [sys.executable, "-m", "onlinegp", "serve", str(run), "--port", str(port), "--area", area]
    command += ["--batch-size", str(batch_size), "--batch-seconds", str(batch_seconds)]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def wait_ready(client: MapClient, timeout: float = 60.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        try:
            client.status()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError("the service did not start")


def vehicle(client: MapClient, name: str, rate: float, until: float, seed: int, latencies: list, failures: list):
    """A random walk through the area, one sensed row per 1/rate s, each post timed."""
    rng = np.random.default_rng(seed)
    position = rng.uniform(-EXTENT, EXTENT, 2)
    next_at = time.monotonic()
    while next_at < until:
        position = np.clip(position + rng.normal(0, 0.3, 2), -EXTENT, EXTENT)
        value = float(field(position) + rng.standard_normal())
        t0 = time.perf_counter()
        try:
            client.post(name, [position[0]], [position[1]], [value])
            latencies.append(time.perf_counter() - t0)
        except Exception as error:  # a refusal or a dropped connection: counted
            failures.append(repr(error))
        next_at += 1.0 / rate
        time.sleep(max(0.0, next_at - time.monotonic()))


def monitor(client: MapClient, until: float, samples: list) -> None:
    while time.monotonic() < until:
        try:
            status = client.status()
            samples.append((time.monotonic(), status["updates"], status["backlog"], status["backlog_age"] or 0.0))
        except OSError:
            pass
        time.sleep(0.5)


def run_load(k: int, rate: float, seconds: float, batch_size: int, batch_seconds: float) -> dict:
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as folder:
        run, port = Path(folder) / "run", free_port()
        tokens = {f"v{i}": Store(run).add_token(f"v{i}") for i in range(k)}
        process = start(run, port, batch_size, batch_seconds)
        try:
            wait_ready(MapClient(f"http://127.0.0.1:{port}"))
            until = time.monotonic() + seconds
            latencies, failures, samples = [], [], []
            threads = [
                threading.Thread(
                    target=vehicle,
                    args=(MapClient(f"http://127.0.0.1:{port}", token), name, rate, until, i, latencies, failures),
                )
                for i, (name, token) in enumerate(tokens.items())
            ]
            threads.append(
                threading.Thread(target=monitor, args=(MapClient(f"http://127.0.0.1:{port}"), until, samples))
            )
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            final = MapClient(f"http://127.0.0.1:{port}").status()
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)
    lat = np.array(latencies) * 1000
    updates = [s[1] for s in samples]
    return {
        "vehicles": k,
        "rate_hz": rate,
        "seconds": seconds,
        "posts": len(latencies),
        "failures": len(failures),
        "failure_examples": failures[:3],
        "ack_ms_p50": float(np.percentile(lat, 50)) if len(lat) else None,
        "ack_ms_p99": float(np.percentile(lat, 99)) if len(lat) else None,
        "ack_ms_max": float(lat.max()) if len(lat) else None,
        "updates_per_s": (updates[-1] - updates[0]) / (samples[-1][0] - samples[0][0]) if len(samples) > 1 else None,
        "backlog_max": max((s[2] for s in samples), default=None),
        "staleness_s_median": float(np.median([s[3] for s in samples])) if samples else None,
        "staleness_s_max": max((s[3] for s in samples), default=None),
        "final_N": final["N"],
        "final_M": final["M"],
        "last_update_seconds": final["last_update_seconds"],
        "load_before": load_before,
        "load_after": os.getloadavg()[0],
    }


PAGE = Path(__file__).resolve().parents[2] / "docs" / "results" / "serve-load.md"


def render() -> str:
    """The results page of the committed JSON."""
    result = json.loads((RESULTS / "bench_serve_load.json").read_text())
    runs, machine = result["runs"], result["machine"]
    lines = [
        "# The live service under load",
        "",
        "<!-- generated by benchmarks/perf/bench_serve_load.py --render from benchmarks/perf/results/bench_serve_load.json -->",
        "",
        "A real `onlinegp serve` on loopback (POAM with its defaults over [-30, 30]², batches of 50 rows or 2 s) and K"
        " simulated vehicles, each posting one row at 10 Hz, on the same machine as the service. **ack**: how long a"
        " post took to be answered (the row committed to the log); **staleness**: the age of the oldest row the map"
        " does not hold yet (polled every 0.5 s); **backlog**: rows in no closed batch. A worker that falls behind"
        " closes batches of up to 10 batch sizes, so the backlog stays bounded.",
        "",
        f"Made by `python {result['command']}` and `python benchmarks/perf/bench_serve_load.py --render`; machine:"
        f" {machine['processor']}, {machine['cpus']} cores, torch {machine['torch']}, code {machine['code']}.",
        "",
        "| K | seconds | rows/s | ack p50 | ack p99 | failures | updates/s | largest backlog | staleness median / max"
        " | last update | final N, M | load before / after |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        load = f"{r['load_before']:.1f} / {r['load_after']:.1f}" if "load_before" in r else "not recorded"
        lines.append(
            f"| {r['vehicles']} | {r['seconds']:g} | {r['posts'] / r['seconds']:.0f} | {r['ack_ms_p50']:.0f} ms"
            f" | {r['ack_ms_p99']:.0f} ms | {r['failures']} | {r['updates_per_s']:.2f} | {r['backlog_max']}"
            f" | {r['staleness_s_median']:.1f} s / {r['staleness_s_max']:.1f} s | {r['last_update_seconds']:.2f} s"
            f" | {r['final_N']}, {r['final_M']} | {load} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vehicles", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--rate", type=float, default=10.0, help="posts per second per vehicle")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--batch-seconds", type=float, default=2.0)
    parser.add_argument("--render", action="store_true", help="write docs/results/serve-load.md from the JSON")
    args = parser.parse_args(argv)
    if args.render:
        PAGE.write_text(render())
        print(f"wrote {PAGE}")
        return {}
    rows = []
    for k in args.vehicles:
        row = run_load(k, args.rate, args.seconds, args.batch_size, args.batch_seconds)
        print({key: round(v, 3) if isinstance(v, float) else v for key, v in row.items()}, flush=True)
        rows.append(row)
    result = {"command": "benchmarks/perf/bench_serve_load.py " + " ".join(argv or sys.argv[1:]), "runs": rows}
    print(f"wrote {write('bench_serve_load', result)}")
    return result


if __name__ == "__main__":
    main()
