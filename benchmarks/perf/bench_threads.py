"""OpenMP thread count and wait policy: a short mission and a POAM decision epoch at 1 and 2 threads.

Each measurement runs in a fresh process with ``OMP_NUM_THREADS`` (and ``OMP_WAIT_POLICY``) set before torch
starts its OpenMP pool, once on the machine as it is ("quiet") and once beside a CPU-bound job spinning on one core
("loaded"). Measured: (a) ``onlinegp mission --budget 800 --quiet`` end to end, wall and CPU time of the process;
(b) a POAM epoch as in ``bench_poam_epoch.py`` (M = 500, pilot of 1000, batches of 60, the library's default
``POAM``), after one warm-up epoch. The load average (1 min) is recorded at the start and end of each measurement.

    python benchmarks/perf/bench_threads.py [--budget 800] [--repeats 3] [--timeout 120]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import BOUNDS, median, stream, timed_cpu, write  # noqa: E402

CONFIGS = {
    "1 thread": {"OMP_NUM_THREADS": "1"},
    "2 threads": {"OMP_NUM_THREADS": "2"},
    "2 threads, passive": {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"},
}
CONDITIONS = ("quiet", "loaded")
SPIN = "import sys, time\nend = time.time() + float(sys.argv[1])\nwhile time.time() < end:\n    pass"


def epochs_child(epochs: int, num_inducing: int = 500, pilot: int = 1000, batch: int = 60, seed: int = 0) -> dict:
    """Wall and CPU seconds of ``epochs`` POAM updates of ``batch`` points after a pilot and one warm-up epoch."""
    from onlinegp import POAM

    torch.manual_seed(seed)
    X, y = stream(pilot + (epochs + 1) * batch, seed=seed)
    model = POAM(2, num_inducing=num_inducing, x_bounds=BOUNDS, seed=seed)
    for lo in range(0, pilot, 250):
        model.update(X[lo : lo + 250], y[lo : lo + 250])
    times = [
        timed_cpu(lambda: model.update(X[lo : lo + batch], y[lo : lo + batch]))[:2]
        for lo in range(pilot, pilot + (epochs + 1) * batch, batch)
    ][1:]
    return {
        "epoch_s": [t[0] for t in times],
        "epoch_cpu_s": [t[1] for t in times],
        "torch_threads": torch.get_num_threads(),
    }


def measure(cmd: list[str], config: dict, loaded: bool, timeout: float) -> dict:
    """Run ``cmd`` with the OpenMP settings ``config`` (beside a spinning process if ``loaded``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "GOMP_"))}
    env.update(config, MPLBACKEND="Agg")
    spinner = subprocess.Popen([sys.executable, "-c", SPIN, str(timeout + 10)]) if loaded else None
    load_start = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
        row = {"wall_s": time.perf_counter() - t0, "returncode": proc.returncode}
        if proc.returncode:
            row["error"] = proc.stderr[-2000:]
        elif "--child" in cmd:
            row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    except subprocess.TimeoutExpired:
        row = {"wall_s": None, "timed_out": True}
    after = resource.getrusage(resource.RUSAGE_CHILDREN)  # before the spinner is reaped: its CPU is not counted
    row["process_cpu_s"] = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    row.update(load_start=load_start, load_end=os.getloadavg()[0])
    if spinner is not None:
        spinner.kill()
        spinner.wait()
    return row


def summarize(rows: list[dict]) -> dict:
    """Median wall and CPU seconds per workload, condition and thread setting."""
    out: dict = {}
    for row in rows:
        key = (
            out.setdefault(row["workload"], {})
            .setdefault(row["condition"], {})
            .setdefault(row["config"], {"wall": [], "cpu": [], "timed_out": 0})
        )
        if row.get("timed_out") or row.get("returncode"):
            key["timed_out"] += 1
        elif row["workload"] == "mission":
            key["wall"].append(row["wall_s"])
            key["cpu"].append(row["process_cpu_s"])
        else:
            key["wall"] += row["epoch_s"]
            key["cpu"] += row["epoch_cpu_s"]
    return {
        w: {
            c: {
                k: {
                    "median_wall_s": median(v["wall"]),
                    "median_cpu_s": median(v["cpu"]),
                    "n": len(v["wall"]),
                    "failed": v["timed_out"],
                }
                for k, v in per.items()
            }
            for c, per in cond.items()
        }
        for w, cond in out.items()
    }


def run(budget: int = 800, repeats: int = 3, timeout: float = 120.0) -> dict:
    exe = Path(sys.executable).with_name("onlinegp")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        mission = [str(exe), "mission", "--budget", str(budget), "--quiet", "--out", tmp]
        epochs = [sys.executable, __file__, "--child", "--repeats", str(repeats)]
        plan = [("mission", mission, r) for r in range(repeats)] + [("epoch", epochs, 0)]
        for workload, cmd, rep in plan:  # interleaved, so that a change of the background load hits every setting
            for condition in CONDITIONS:
                for name, config in CONFIGS.items():
                    row = measure(cmd, config, condition == "loaded", timeout)
                    rows.append({"workload": workload, "condition": condition, "config": name, "repeat": rep, **row})
                    epoch = f" epoch {median(row['epoch_s']):.3f}s" if "epoch_s" in row else ""
                    print(
                        f"{workload:7s} {condition:6s} {name:18s} wall {row['wall_s'] or float('nan'):7.2f}s{epoch} "
                        f"load {row['load_start']:.1f}->{row['load_end']:.1f}",
                        flush=True,
                    )
    return {
        "config": {
            "budget": budget,
            "repeats": repeats,
            "timeout_s": timeout,
            "configs": CONFIGS,
            "conditions": {"quiet": "the machine as it is", "loaded": "beside one process spinning on a core"},
            "epoch": "bench_poam_epoch setting, default POAM (sketch=64)",
        },
        "summary": summarize(rows),
        "runs": rows,
    }


def table(summary: dict) -> str:
    lines = [f"{'workload':8s} {'condition':9s} {'setting':19s} {'wall s':>8s} {'CPU s':>8s} {'n':>3s}"]
    for workload, cond in summary.items():
        for condition, per in cond.items():
            for name, s in per.items():
                lines.append(
                    f"{workload:8s} {condition:9s} {name:19s} {s['median_wall_s']:8.3f} "
                    f"{s['median_cpu_s']:8.3f} {s['n']:3d}" + (f" ({s['failed']} failed)" if s["failed"] else "")
                )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per measured process")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        out = epochs_child(args.repeats)
        print(json.dumps(out))
        return out
    out = run(args.budget, args.repeats, args.timeout)
    path = write("threads", out)
    print(table(out["summary"]), "\n->", path)
    return out


if __name__ == "__main__":
    main()
