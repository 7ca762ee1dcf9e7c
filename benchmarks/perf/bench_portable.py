"""The portable numeric mode's cost (onlinegp.portable): a POAM epoch and a short mission, default against portable.

Each measurement runs in a fresh process, with one thread in both modes (the library's default on a 2-CPU machine;
the portable mode always uses one), interleaved so that a change of background load hits both: (a) POAM epochs as
in ``bench_poam_epoch.py`` (M = 500, pilot of 1000, batches of 60, the library's default ``POAM``), after one
warm-up epoch; (b) ``onlinegp mission --budget 800 --quiet`` end to end. Take it on a quiet machine.

    python benchmarks/perf/bench_portable.py [--budget 800] [--repeats 2] [--epochs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_threads import epochs_child  # noqa: E402
from common import median, write  # noqa: E402

MODES = {"default": {}, "portable": {"ONLINEGP_PORTABLE": "1"}}


def measure(cmd: list[str], mode: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "ONLINEGP_PORTABLE"}
    env.update(MODES[mode], OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    load_start, t0 = os.getloadavg()[0], time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    row = {"mode": mode, "wall_s": time.perf_counter() - t0, "load_start": load_start, "load_end": os.getloadavg()[0]}
    if "--child" in cmd:
        row.update(json.loads(proc.stdout.strip().splitlines()[-1]))
    return row


def run(budget: int, repeats: int, epochs: int) -> dict:
    exe = Path(sys.executable).with_name("onlinegp")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        plan = {
            "epoch": [sys.executable, __file__, "--child", "--epochs", str(epochs)],
            "mission": [str(exe), "mission", "--budget", str(budget), "--quiet", "--out", tmp, "--force"],
        }
        for repeat in range(repeats):
            for workload, cmd in plan.items():
                for mode in MODES:
                    row = {"workload": workload, "repeat": repeat, **measure(cmd, mode)}
                    rows.append(row)
                    epoch = f" epoch {median(row['epoch_s']):.3f} s" if "epoch_s" in row else ""
                    print(f"{workload:7s} {mode:8s} wall {row['wall_s']:7.2f} s{epoch}", flush=True)
    summary = {}
    for workload in ("epoch", "mission"):
        for mode in MODES:
            mine = [r for r in rows if r["workload"] == workload and r["mode"] == mode]
            values = [t for r in mine for t in r["epoch_s"]] if workload == "epoch" else [r["wall_s"] for r in mine]
            summary.setdefault(workload, {})[mode] = {"median_s": median(values), "n": len(values)}
        summary[workload]["portable_over_default"] = (
            summary[workload]["portable"]["median_s"] / summary[workload]["default"]["median_s"]
        )
    config = {"budget": budget, "repeats": repeats, "epochs": epochs, "threads": 1, "modes": MODES}
    return {"config": config, "summary": summary, "runs": rows}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--budget", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        out = epochs_child(args.epochs)
        print(json.dumps(out))
        return out
    out = run(args.budget, args.repeats, args.epochs)
    path = write("portable", out)
    for workload, s in out["summary"].items():
        print(
            f"{workload:7s} default {s['default']['median_s']:.3f} s, portable {s['portable']['median_s']:.3f} s: "
            f"x{s['portable_over_default']:.2f}"
        )
    print("->", path)
    return out


if __name__ == "__main__":
    main()
