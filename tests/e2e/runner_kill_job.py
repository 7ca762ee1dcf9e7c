"""A cheap deterministic sweep job and its driver for the kill tests (tests/e2e/test_runner_kill.py).

Run as ``python -c "from tests.e2e import runner_kill_job as k; k.main()" ROOT RESULTS WORKERS [DIE_AT_COPY]`` from
the repository root (each run's spec.json names its job by module, so the tests import it by the same name): the
sweep of :func:`specs` into ROOT, summaries kept in RESULTS; with DIE_AT_COPY = n the process SIGKILLs itself before
its n-th file copy (saving or restoring summaries). Prints the runs' statuses as JSON.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path

from onlinegp.experiments.bench import runner
from onlinegp.experiments.bench.runner import RunnerOptions, RunSpec, run_sweep

BENCH = "kill-test"
SUMMARY = ("metrics.csv", "extra/*.json")
DELAY_ENV = "ONLINEGP_KILL_TEST_DELAY"  # seconds per epoch (not part of the config: it must not change the hash)
DIE_ENV = "ONLINEGP_KILL_TEST_DIE"  # a file: the job whose seed it names kills its worker once, deleting the file


def specs(n: int = 8) -> list[RunSpec]:
    return [RunSpec(f"m{k % 2}/seed-{k}", {"seed": k, "epochs": 8}) for k in range(n)]


def job(config: dict, run_dir: Path) -> dict:
    """Writes its pid, a per-epoch CSV line by line, a small JSON and a file left out of the summary."""
    (run_dir / "worker.pid").write_text(str(os.getpid()))
    delay = float(os.environ.get(DELAY_ENV, "0"))
    die = Path(os.environ.get(DIE_ENV, "/nonexistent"))
    with open(run_dir / "metrics.csv", "w") as fh:
        fh.write("epoch,value\n")
        for epoch in range(config["epochs"]):
            time.sleep(delay)
            value = (config["seed"] + 1) / (epoch + 1) ** 0.5
            fh.write(f"{epoch},{value!r}\n")
            fh.flush()
            if epoch == 3 and die.is_file() and int(die.read_text()) == config["seed"]:
                die.unlink()
                os.kill(os.getpid(), signal.SIGKILL)
    (run_dir / "extra").mkdir(exist_ok=True)
    (run_dir / "extra" / "final.json").write_text(json.dumps({"final": value}))
    (run_dir / "big.bin").write_bytes(b"\0" * 4096)
    return {"seed": config["seed"], "final": value}


def sweep(root: Path, results: Path, **options):
    runner.is_dirty = lambda code: False  # the suite runs in checkouts with uncommitted edits too (conftest.py)
    return run_sweep(
        specs(), job, root, RunnerOptions(quiet=True, results=results, **options), title=BENCH, summary=SUMMARY
    )


def main() -> None:
    root, results, workers = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    runner.is_dirty = lambda code: False  # the suite runs in checkouts with uncommitted edits too (as conftest.py)
    if len(sys.argv) > 4:
        die_at, copy, count = int(sys.argv[4]), shutil.copyfile, [0]

        def dying_copy(*args, **kwargs):
            count[0] += 1
            if count[0] == die_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return copy(*args, **kwargs)

        shutil.copyfile = dying_copy
    result = sweep(root, results, workers=workers, threads=1)
    print(json.dumps({r.run_id: r.status for r in result.runs}))
