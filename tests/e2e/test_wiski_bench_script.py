"""benchmarks/perf/bench_wiski.py at toy sizes: its interleaved timing loop, and ``--compare``'s worker process driven over
JSON lines (here running this same source tree, so both trees must report the same model)."""

import importlib.util
import math
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_wiski", ROOT / "benchmarks" / "perf" / "bench_wiski.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_measure_with_a_compare_worker():
    bench = load_bench()
    worker = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "perf" / "bench_wiski.py"), "--worker", "--threads", "1"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
    )
    try:
        rows = bench.measure(2, 5, [30, 60], 3, {"kronecker": [30, 60], "dense": [30]}, worker=worker)
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
    assert worker.returncode == 0
    keys = {(r["tree"], r["algebra"], r["num_data"]) for r in rows}
    assert keys == {
        ("this", "kronecker", 30),
        ("this", "kronecker", 60),
        ("this", "dense", 30),
        ("compare", "kronecker", 30),
        ("compare", "kronecker", 60),
    }
    for row in rows:
        assert row["m"] == 25 and 0 < row["update_min_s"] <= row["update_median_s"] <= row["update_max_s"]
        assert row["update_cpu_median_s"] > 0 and row["cholesky_median_s"] > 0 and row["scipy_cholesky_median_s"] > 0
        assert set(row["phases_median_s"]) >= {"hyperparameters", "caches"}
    by_key = {(r["tree"], r["algebra"], r["num_data"]): r for r in rows}
    for n in (30, 60):  # the worker ran the same tree on the same data: the same WᵀW and checkpoint
        this, other = by_key[("this", "kronecker", n)], by_key[("compare", "kronecker", n)]
        assert this["rank_WtW"] == other["rank_WtW"] and this["checkpoint_bytes"] == other["checkpoint_bytes"]
    assert by_key[("this", "kronecker", 30)]["rank_WtW"] == by_key[("this", "dense", 30)]["rank_WtW"] <= 25


def test_batch_rules_take_their_steps():
    """``--batch``: the models of each step rule take at most B (the default, stopping once settled), B, ⌈√B⌉ and 1
    steps on a batch of B after the first."""
    bench = load_bench()
    X, y = (t.numpy() for t in bench.data(100, 2, 0))
    runs = bench.stream_rules(X, y, [40, 60], 0, (X[:10], y[:10]))
    steps = {name: run["online_steps"] for name, run in runs.items()}
    assert 0 < steps.pop("settled (default)") <= 60
    assert steps == {"per point": 60, "root": 8, "one per batch": 1}
    for run in runs.values():
        assert len(run["seconds"]) == 2 and run["update_s"] > 0 and run["rmse"] > 0 and math.isfinite(run["nlpd"])
