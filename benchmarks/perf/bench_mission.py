"""A full default mission (5000 samples, POAM + Attentive Kernel) end to end: wall time, peak memory and where the
time goes.

Runs ``onlinegp mission`` in a child process (so its peak resident memory and its start-up are its own) under a
:class:`~onlinegp.experiments.simulator.phases.PhaseTimer`, the hook that ``open_mission``, ``run_mission`` and the
planner report their phases into (nothing is patched: the mission runs as the command runs it): the mission's
start-up (interpreter, imports, mission construction: everything before ``run_mission``; ``startup_s`` splits it
into imports, mission construction (``open_mission``: the field, the model, the planner), the rest of the CLI, and
interpreter launch and exit), the checkpoints (``Mission.save`` and the metrics.csv rewrites), the planner's
candidate predictions and the figures; the metric rows give the model updates, the evaluation-grid predictions and
planning + driving. Each phase is reported in seconds and as a fraction of the child's wall time;
``non_update_fraction`` is everything but the model updates. (Results written before the hook, which wrapped module
functions instead, have ``startup_s.model_build``, ``build_model`` alone, where the hook's has ``mission_build``.)

``--compare SRC`` runs the same mission with another source tree first (``PYTHONPATH=SRC``, e.g. a copy of ``src``
before a change), then this one, alternating ``--repeats`` times: before/after fractions in the same run conditions
(a tree from before the phase timer gives the wall time and the metric rows' phases; the others are None).
The load average is recorded around every run (the machine may be shared). Opt-in in the perf suite
(``benchmarks/perf/run.py --mission`` or ``--only bench_mission``): it takes minutes.

    python benchmarks/perf/bench_mission.py [--seed 0] [--budget 5000] [--threads 1] [--compare /tmp/old/src]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import write  # noqa: E402

PAPER_MISSION_S = 6.5 * 60

#: the child: runs the CLI under a PhaseTimer (onlinegp.experiments.simulator.phases), which open_mission, run_mission
#: and the planner report into; a --compare tree from before the timer runs untimed (its phases are None)
DRIVER = r"""
import json, sys, time
t0 = time.perf_counter()
from onlinegp.experiments.cli import app
try:
    from onlinegp.experiments.simulator.phases import PhaseTimer
except ImportError:
    PhaseTimer = None
import contextlib
timer = PhaseTimer() if PhaseTimer else None
marks = {"imported": time.perf_counter() - t0}
try:
    with timer or contextlib.nullcontext():
        app(sys.argv[2:], standalone_mode=False)
finally:
    marks["end"] = time.perf_counter() - t0
    with open(sys.argv[1], "w") as fh:
        json.dump({"phases": timer.seconds if timer else None, **marks}, fh)
"""


def run(seed: int = 0, budget: int | None = None, threads: int | None = None, src: str | None = None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out, timings = Path(tmp) / "run", Path(tmp) / "timings.json"
        cmd = [sys.executable, "-c", DRIVER, str(timings), "mission", "--out", str(out), "--seed", str(seed), "-q"]
        if budget:
            cmd += ["--budget", str(budget)]
        env = dict(os.environ, MPLBACKEND="Agg")
        if threads:
            env["OMP_NUM_THREADS"] = str(threads)
        if src:
            env["PYTHONPATH"] = os.pathsep.join([src, *filter(None, [env.get("PYTHONPATH")])])
        load_before = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        wall = time.perf_counter() - t0
        usage = resource.getrusage(resource.RUSAGE_CHILDREN)
        t = json.loads(timings.read_text())
        metrics = json.loads((out / "metrics.json").read_text())
    rows = metrics["rows"]
    step_s = float(metrics["summary"]["wall_time"])
    update = sum(r["update_time"] for r in rows)
    predict = sum(r["prediction_time"] for r in rows)
    plan_drive = sum(r["plan_drive_time"] for r in rows)
    timed = t["phases"]  # None: a tree without the phase timer
    run_s = timed["run"] if timed else None
    phases = {
        "update": update,
        "eval_prediction": predict,
        "planner_prediction": timed and timed.get("candidates", 0.0),
        "plan_drive_other": timed and plan_drive - timed.get("candidates", 0.0),
        "epoch_other": step_s - update - predict - plan_drive,  # metrics, learnt hyper-parameters
        "checkpoints": timed and timed.get("checkpoints", 0.0),
        "figures": timed and timed.get("figures", 0.0),
        # model.pt, survey, metrics.json, config.json, the epochs' progress bar
        "outputs_other": timed and run_s - step_s - timed.get("checkpoints", 0.0) - timed.get("figures", 0.0),
        "startup_exit": timed and wall - run_s,  # interpreter, imports, mission construction; interpreter exit
    }
    startup = {
        "imports": t["imported"],  # the CLI and the mission's modules, torch and gpytorch among them
        # open_mission: the field, the model (with what its first optimiser imports: torch._dynamo), the planner
        "mission_build": timed and timed.get("mission_build", 0.0),
        "cli_other": timed and t["end"] - t["imported"] - timed.get("mission_build", 0.0) - run_s,
        "launch_exit": wall - t["end"],  # interpreter start before the driver's first line, and exit
    }
    return {
        "config": {
            "seed": seed,
            "budget": budget or 5000,
            "threads": threads or os.environ.get("OMP_NUM_THREADS", "torch default"),
            "src": src or "this checkout",
        },
        "wall_s": wall,
        "cpu_s": (usage.ru_utime + usage.ru_stime) - (before.ru_utime + before.ru_stime),
        "loadavg_before_after": [load_before, os.getloadavg()[0]],
        "peak_rss_mib": usage.ru_maxrss / 1024,
        "paper_mission_s": PAPER_MISSION_S,
        "speedup_vs_paper": PAPER_MISSION_S / wall,
        "epochs": len(rows),
        "phases_s": phases,
        "startup_s": startup,
        "fractions": {k: None if v is None else v / wall for k, v in phases.items()},
        "non_update_fraction": 1.0 - update / wall,
        "total_update_s": update,
        "final": {k: rows[-1][k] for k in ("smse", "msll", "rmse", "nlpd") if k in rows[-1]},
    }


def _median(values) -> float | None:
    """The median, None when a run lacks the value (a tree without the phase timer)."""
    values = list(values)
    return None if any(v is None for v in values) else statistics.median(values)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget", type=int, default=None)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument(
        "--compare", default=None, help="another source tree to run first (PYTHONPATH); writes bench_mission_compare"
    )
    parser.add_argument("--repeats", type=int, default=1, help="runs of each tree (alternating) with --compare")
    parser.add_argument("--tag", default="", help="suffix of the result file (e.g. a thread setting)")
    args = parser.parse_args(argv)
    if args.compare is None:
        out = run(args.seed, args.budget, args.threads)
    else:
        runs: dict[str, list[dict]] = {"before": [], "after": []}
        for _ in range(args.repeats):
            for name, src in (("before", args.compare), ("after", None)):
                runs[name].append(run(args.seed, args.budget, args.threads, src))
                r = runs[name][-1]
                print(name, round(r["wall_s"], 1), "s, non-update", round(r["non_update_fraction"], 3), flush=True)
        out = {"runs": runs}
        for name, rs in runs.items():
            out[name] = {
                "wall_s": statistics.median(r["wall_s"] for r in rs),
                "non_update_fraction": statistics.median(r["non_update_fraction"] for r in rs),
                "fractions": {k: _median(r["fractions"][k] for r in rs) for k in rs[0]["fractions"]},
                "startup_s": {k: _median(r["startup_s"][k] for r in rs) for k in rs[0]["startup_s"]},
            }
        out["same_final_metrics"] = all(a["final"] == b["final"] for a, b in zip(runs["before"], runs["after"]))
    name = "bench_mission" + ("_compare" if args.compare else "") + (f"_{args.tag}" if args.tag else "")
    path = write(name, out)
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1, default=float), "->", path)
    return out


if __name__ == "__main__":
    main()
