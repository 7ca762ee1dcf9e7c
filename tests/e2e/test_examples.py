"""Every script in examples/ runs to the end (exit status 0) from a fresh working directory, and leaves it empty
(outputs go to a temporary directory, not into a user's checkout)."""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.py"))
NEEDS = {"botorch_loop.py": "botorch", "vehicle_log.py": "rosbags"}  # scripts that need an optional extra


def test_there_are_examples():
    assert len(EXAMPLES) >= 3, EXAMPLES


@pytest.mark.slow
@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(script, tmp_path):
    extra = NEEDS.get(script.name)
    if extra and importlib.util.find_spec(extra) is None:
        pytest.skip(f"{script.name} needs {extra}")
    env = {**os.environ, "MPLBACKEND": "Agg", "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    done = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{script.name} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    assert done.stdout.strip(), f"{script.name} printed nothing"
    assert not list(tmp_path.iterdir()), f"{script.name} wrote into the working directory: write to a temporary one"
    if script.name == "botorch_loop.py":  # the loop shows BO at work: the best value improves after the first batch
        best = [float(v) for v in re.findall(r"best\s+([-+][\d.]+)", done.stdout)]
        assert len(best) > 3 and best[-1] > best[1], done.stdout
