"""A full default mission (5000 samples, POAM + Attentive Kernel) end to end: wall time, peak memory and where the
time goes.

Runs ``onlinegp mission`` in a child process (so its peak resident memory and its start-up are its own) through a
small driver that times, without changing what runs: the mission's start-up (interpreter, imports, model
construction: everything before ``run_mission``; ``startup_s`` splits it into imports, model construction, the
rest of the CLI, and interpreter launch and exit), the checkpoints (``Mission.save`` and the metrics.csv
rewrites), the planner's candidate predictions (``MaxEntropyPlanner.scores``) and the figures; the metric rows
give the model updates, the evaluation-grid predictions and planning + driving. Each phase is reported in seconds
and as a fraction of the child's wall time; ``non_update_fraction`` is everything but the model updates.

``--compare SRC`` runs the same mission with another source tree first (``PYTHONPATH=SRC``, e.g. a copy of ``src``
before a change), then this one, alternating ``--repeats`` times: before/after fractions in the same run conditions.
The load average is recorded around every run (the machine may be shared). Opt-in from run_all (``--mission``):
it takes minutes.

    python benchmarks/bench_mission.py [--seed 0] [--budget 5000] [--threads 1] [--compare /tmp/old/src]
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

#: the child: times phases by wrapping functions the mission calls through module attributes, then runs the CLI
DRIVER = r"""
import json, sys, time
t0 = time.perf_counter()
from onlinegp.experiments.cli import app
import onlinegp.experiments.simulator.mission as mm
import onlinegp.experiments.simulator.planners as planners
try:
    import onlinegp.experiments.simulator.run as mr
except ImportError:  # a --compare tree from before run.py, whose mission.py held run_mission
    mr = mm
acc = {"checkpoint": 0.0, "figures": 0.0, "candidates": 0.0, "model_build": 0.0}
marks = {"imported": time.perf_counter() - t0}
def timed(key, fn):
    def inner(*args, **kwargs):
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            acc[key] += time.perf_counter() - t
    return inner
def run_mission(*args, _run=mr.run_mission, **kwargs):
    marks["run_start"] = time.perf_counter() - t0
    try:
        return _run(*args, **kwargs)
    finally:
        marks["run_end"] = time.perf_counter() - t0
mm.Mission.save = timed("checkpoint", mm.Mission.save)
mr.write_csv = timed("checkpoint", mr.write_csv)
mr.write_figures = timed("figures", mr.write_figures)
mm.build_model = timed("model_build", mm.build_model)
planners.MaxEntropyPlanner.scores = timed("candidates", planners.MaxEntropyPlanner.scores)
mr.run_mission = run_mission
try:
    app(sys.argv[2:], standalone_mode=False)
finally:
    marks["end"] = time.perf_counter() - t0
    with open(sys.argv[1], "w") as fh:
        json.dump({**acc, **marks}, fh)
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
    run_s = t["run_end"] - t["run_start"]
    phases = {
        "update": update,
        "eval_prediction": predict,
        "planner_prediction": t["candidates"],
        "plan_drive_other": plan_drive - t["candidates"],
        "epoch_other": step_s - update - predict - plan_drive,  # metrics, learnt hyper-parameters
        "checkpoints": t["checkpoint"],
        "figures": t["figures"],
        "outputs_other": run_s - step_s - t["checkpoint"] - t["figures"],  # model.pt, survey, metrics.json
        "startup_exit": wall - run_s,  # interpreter, imports, model construction; interpreter exit
    }
    startup = {
        "imports": t["imported"],  # the CLI and the mission's modules, torch and gpytorch among them
        "model_build": t["model_build"],  # with what its first optimiser imports (torch._dynamo)
        "cli_other": t["run_start"] - t["imported"] - t["model_build"] + t["end"] - t["run_end"],
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
        "fractions": {k: v / wall for k, v in phases.items()},
        "non_update_fraction": 1.0 - update / wall,
        "total_update_s": update,
        "final": {k: rows[-1][k] for k in ("smse", "msll", "rmse", "nlpd") if k in rows[-1]},
    }


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
                "fractions": {k: statistics.median(r["fractions"][k] for r in rs) for k in rs[0]["fractions"]},
                "startup_s": {k: statistics.median(r["startup_s"][k] for r in rs) for k in rs[0]["startup_s"]},
            }
        out["same_final_metrics"] = all(a["final"] == b["final"] for a, b in zip(runs["before"], runs["after"]))
    name = "bench_mission" + ("_compare" if args.compare else "") + (f"_{args.tag}" if args.tag else "")
    path = write(name, out)
    print(json.dumps({k: v for k, v in out.items() if k != "runs"}, indent=1, default=float), "->", path)
    return out


if __name__ == "__main__":
    main()
