"""Sweeps killed at seeded random points (a worker, the parent, a summary being copied, a Ray worker) leave no
half-written summary in the results tree, and their rerun gives the files of an uninterrupted sweep."""

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from onlinegp.experiments.bench.runner import MARKER, is_finished
from tests.e2e import runner_kill_job as kj

SEED = 20240519


def start(root: Path, results: Path, workers: int, *die_at: int, delay: float = 0.0) -> subprocess.Popen:
    """The sweep of runner_kill_job in a new process (``die_at``: kill itself before that file copy)."""
    command = "from tests.e2e import runner_kill_job as k; k.main()"
    return subprocess.Popen(
        [sys.executable, "-c", command, str(root), str(results), str(workers), *(str(n) for n in die_at)],
        cwd=Path(kj.__file__).resolve().parents[2],  # the repository root: the job's name is the one imported here
        env={**os.environ, kj.DELAY_ENV: str(delay), "OMP_NUM_THREADS": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def summaries(results: Path) -> dict[str, dict]:
    """The visible summaries of the tree (hidden ones are a killed writer's scratch): each file's text, the marker
    without its timings."""
    out = {}
    for path in sorted((results / kj.BENCH).glob("*")):
        if not path.name.startswith("."):
            files = {p.relative_to(path).as_posix(): p.read_text() for p in sorted(path.rglob("*")) if p.is_file()}
            marker = json.loads(files.pop(MARKER, "{}"))
            files[MARKER] = {k: marker.get(k) for k in ("run_id", "config_hash", "value")}
            out[path.name] = files
    return out


def outputs(root: Path) -> dict[str, tuple[str, str] | None]:
    """Per run: its metrics and final JSON if the run is finished, else None."""
    return {
        s.run_id: (
            ((root / s.run_id / "metrics.csv").read_text(), (root / s.run_id / "extra/final.json").read_text())
            if is_finished(root / s.run_id, s)
            else None
        )
        for s in kj.specs()
    }


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """An uninterrupted sweep's summaries and run outputs."""
    base = tmp_path_factory.mktemp("reference")
    assert kj.sweep(base / "out", base / "results").ok
    return {"summaries": summaries(base / "results"), "outputs": outputs(base / "out")}


def check_partial(root: Path, results: Path, reference: dict) -> None:
    """(a) after a kill: every visible summary is complete and right; every finished run holds the right files."""
    for name, files in summaries(results).items():
        assert files == reference["summaries"][name], f"summary {name} is incomplete or wrong"
    for run_id, files in outputs(root).items():
        assert files is None or files == reference["outputs"][run_id], run_id


def check_complete(root: Path, results: Path, reference: dict) -> None:
    """(b) after the rerun: the uninterrupted sweep's summaries and outputs, and no scratch left."""
    assert summaries(results) == reference["summaries"]
    assert outputs(root) == reference["outputs"]
    assert not [p.name for p in (results / kj.BENCH).iterdir() if p.name.startswith(".")]


def first_worker_pid(root: Path, proc: subprocess.Popen | None = None) -> int:
    """Wait until a job has started (in ``proc``'s sweep while it runs); its worker's pid."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        assert proc is None or proc.poll() is None, proc.communicate()
        for path in root.rglob("worker.pid"):
            text = path.read_text()
            if text:
                return int(text)
        time.sleep(0.01)
    raise AssertionError("no job started within 120 s")


def alive(pid: int) -> bool:
    """Linux: the process exists and is no zombie."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_killed_worker_then_rerun(tmp_path, reference, monkeypatch):
    root, results = tmp_path / "out", tmp_path / "results"
    monkeypatch.setenv(kj.DELAY_ENV, "0.03")

    def kill_a_worker() -> None:
        pid = first_worker_pid(root)
        time.sleep(random.Random(SEED).uniform(0.0, 0.2))
        os.kill(pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_a_worker)
    killer.start()
    first = kj.sweep(root, results, workers=2, threads=1)
    killer.join()
    assert first.failed and "worker process died" in first.failed[0].error
    check_partial(root, results, reference)
    monkeypatch.delenv(kj.DELAY_ENV)
    assert kj.sweep(root, results).ok
    check_complete(root, results, reference)


@pytest.mark.skipif(sys.platform != "linux", reason="workers die with the sweep's process on Linux only")
def test_killed_parent_takes_its_workers_then_rerun(tmp_path, reference):
    root, results = tmp_path / "out", tmp_path / "results"
    proc = start(root, results, 2, delay=0.1)  # a job takes 0.8 s: workers are mid-job when the parent dies
    first_worker_pid(root, proc)
    time.sleep(random.Random(SEED + 1).uniform(0.05, 0.6))
    assert proc.poll() is None
    workers = {int(p.read_text()) for p in root.rglob("worker.pid") if p.read_text()}
    proc.kill()
    proc.wait(timeout=60)  # not communicate(): orphaned workers would hold its output pipes open
    proc.stdout.close()
    proc.stderr.close()
    deadline = time.monotonic() + 0.5
    while any(alive(pid) for pid in workers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not any(alive(pid) for pid in workers), "worker processes outlived the sweep's process"
    check_partial(root, results, reference)
    assert kj.sweep(root, results).ok
    check_complete(root, results, reference)


def test_killed_while_saving_or_restoring_summaries(tmp_path, reference):
    rng = random.Random(SEED + 2)
    root, results = tmp_path / "out", tmp_path / "results"
    proc = start(root, results, 1, rng.randint(1, 8 * 3))  # saving: two summary files and the marker per run
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    check_partial(root, results, reference)
    assert kj.sweep(root, results).ok
    check_complete(root, results, reference)

    clone = tmp_path / "clone"  # a fresh checkout: the tree, an empty sweep root
    proc = start(clone, results, 1, rng.randint(1, 8 * 2))  # restoring: two summary files per run
    proc.communicate(timeout=120)
    assert proc.returncode == -signal.SIGKILL
    check_partial(clone, results, reference)
    rerun = kj.sweep(clone, results)
    assert [r.status for r in rerun.runs] == ["skipped"] * 8 and any(r.restored for r in rerun.runs)
    assert not list(clone.rglob("worker.pid"))  # nothing was run
    check_complete(clone, results, reference)


@pytest.mark.slow  # starting Ray takes most of half a minute on a small machine
def test_lost_ray_worker_then_rerun(tmp_path, reference, monkeypatch):
    ray = pytest.importorskip("ray")
    ray.cloudpickle.register_pickle_by_value(kj)  # Ray workers cannot import the test helper by name
    root, results = tmp_path / "out", tmp_path / "results"
    die = tmp_path / "die"
    die.write_text(str(random.Random(SEED + 3).randrange(8)))
    monkeypatch.setenv(kj.DIE_ENV, str(die))
    try:
        first = kj.sweep(root, results, workers=2, backend="ray")
    finally:
        ray.shutdown()
    assert not die.exists() and len(first.failed) == 1 and "Ray task failed" in first.failed[0].error
    check_partial(root, results, reference)
    assert kj.sweep(root, results).ok
    check_complete(root, results, reference)
