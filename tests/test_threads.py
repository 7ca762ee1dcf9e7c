"""onlinegp chooses torch's OpenMP thread count and wait policy at import, unless the user already chose."""

import json
import os
import subprocess
import sys

from onlinegp.threads import configure_threads, default_threads, usable_cpus

REPORT = "import json, os, torch; print(json.dumps([torch.get_num_threads(), os.environ.get('OMP_WAIT_POLICY')]))"


def child(code: str, **env: str) -> list:
    """[torch threads, OMP_WAIT_POLICY] printed by ``code`` in a fresh interpreter with only ``env`` of OpenMP's."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_", "GOMP_"))}
    out = subprocess.run(
        [sys.executable, "-c", code], env={**base, **env}, capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_default_threads_is_one_on_small_machines_and_capped():
    assert [default_threads(n) for n in (1, 2, 4, 6, 8, 16, 64)] == [1, 1, 2, 3, 4, 4, 4]


def test_import_chooses_threads_and_passive_wait_policy():
    assert child("import onlinegp; " + REPORT) == [default_threads(), "PASSIVE"]


def test_explicit_omp_num_threads_wins():
    explicit = 1 if default_threads() > 1 else min(2, usable_cpus())  # torch caps the variable at the CPU count
    assert child("import onlinegp; " + REPORT, OMP_NUM_THREADS=str(explicit)) == [explicit, None]


def test_explicit_wait_policy_is_kept():
    assert child("import onlinegp; " + REPORT, OMP_WAIT_POLICY="ACTIVE") == [default_threads(), "ACTIVE"]


def test_torch_set_num_threads_before_import_wins():
    code = "import torch; torch.set_num_threads(3); import onlinegp; " + REPORT
    assert child(code) == [3, None]


def test_nothing_changes_once_torch_is_imported():
    assert "torch" in sys.modules and configure_threads() == {}
