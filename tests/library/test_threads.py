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


def test_torch_imported_first_gets_the_same_threads():
    """``import torch; import onlinegp`` (the README's order) ends with onlinegp's thread count, and sets the variables
    for child processes, as the other order does."""
    assert child("import torch; import onlinegp; " + REPORT) == [default_threads(), "PASSIVE"]


def test_explicit_choices_win_at_either_import_order():
    explicit = 1 if default_threads() > 1 else min(2, usable_cpus())
    for first, then in (("import torch", "import onlinegp"), ("import onlinegp", "import torch")):
        assert child(f"{first}; {then}; " + REPORT)[0] == default_threads(), first
        assert child(f"{first}; {then}; " + REPORT, OMP_NUM_THREADS=str(explicit))[0] == explicit, first
    assert child("import torch; torch.set_num_threads(3); import onlinegp; " + REPORT)[0] == 3


def test_torch_imported_first_warns_that_the_wait_policy_is_too_late(monkeypatch, caplog):
    """With more than one thread, a loaded torch keeps spin-waiting: the warning says what to do."""
    import torch

    from onlinegp import threads

    before = torch.get_num_threads()
    monkeypatch.setattr(os, "environ", {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "MKL_"))})
    monkeypatch.setattr(threads, "default_threads", lambda cpus=None: 2)
    monkeypatch.setattr(threads, "torch_default_threads", lambda: {before})
    try:
        assert configure_threads() == {"OMP_NUM_THREADS": "2", "OMP_WAIT_POLICY": "PASSIVE"}
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
    assert "OMP_WAIT_POLICY=PASSIVE" in caplog.text and "import onlinegp first" in caplog.text


def test_nothing_changes_when_the_user_set_the_variable(monkeypatch):
    monkeypatch.setattr(os, "environ", {**os.environ, "OMP_NUM_THREADS": "1"})
    assert configure_threads() == {}


def test_torch_imported_first_also_limits_numpys_blas():
    """numpy's OpenBLAS is loaded with torch and read OMP_NUM_THREADS then: onlinegp limits it too (its idle threads
    spin: botorch_loop.py 9.0 s against 5.3 s beside a busy core, benchmarks/perf/results/import-order.md)."""
    code = (
        "import torch; import onlinegp; import json; from threadpoolctl import threadpool_info; "
        "print(json.dumps(sorted({i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'})))"
    )
    assert child(code) == [default_threads()]
