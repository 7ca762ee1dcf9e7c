"""A mission's start-up imports only what a default mission uses."""

import subprocess
import sys


def test_mission_start_leaves_scipy_ndimage_unimported():
    # scipy.ndimage fills no-data cells of user fields only (fields.fill_nodata imports it there)
    code = "import sys, onlinegp.experiments.cli, onlinegp.experiments.simulator.mission; print('scipy.ndimage' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
