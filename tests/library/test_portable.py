"""The portable numeric mode (onlinegp.portable): bit-identical numbers under every CPU dispatch this machine can
force, a pinned mission that any x86-64 CPU must reproduce, and the mode refused where it cannot hold."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

import onlinegp
from onlinegp import portable
from onlinegp.experiments.cli import app

ROOT = Path(__file__).resolve().parents[2]
#: what a CPU or a user can change in how the libraries dispatch: issue 52's six rows, AVX-512 where the CPU has it,
#: and glibc's libm without FMA (an older CPU)
FORCED = [
    {},
    {"ATEN_CPU_CAPABILITY": "avx2"},
    {"ATEN_CPU_CAPABILITY": "default"},
    {"MKL_ENABLE_INSTRUCTIONS": "AVX2"},
    {"ONLINEGP_NATIVE": "0"},
    {"OPENBLAS_CORETYPE": "Haswell"},
    {"GLIBC_TUNABLES": "glibc.cpu.hwcaps=-AVX2,-FMA", "NPY_DISABLE_CPU_FEATURES": "X86_V3"},
]
if "avx512f" in Path("/proc/cpuinfo").read_text(errors="replace") if Path("/proc/cpuinfo").exists() else False:
    FORCED.append({"ATEN_CPU_CAPABILITY": "avx512"})
#: a foreign dispatch for this machine kind (and one that .ci/run runs the pinned tests under)
FOREIGN = {"ATEN_CPU_CAPABILITY": "default", "MKL_ENABLE_INSTRUCTIONS": "SSE4_2", "ONLINEGP_NATIVE": "0"}
#: the probe's mission (tests/library/portable_probe.py SMALL) under ONLINEGP_PORTABLE=1, recorded on 2026-11-29 (AMD EPYC,
#: AVX2, torch 2.13.0, numpy 2.4.6, SciPy 1.17.1, glibc 2.36): (samples, repr(SMSE), repr(MSLL)) per epoch. Any
#: x86-64 CPU must give these digits; a change of code, or of a pinned library, that moves them updates them here.
PORTABLE_MISSION = [
    [597, "0.22018039145287185", "-0.24826154273076587"],
    [631, "0.21418295323542055", "-0.2621092136918915"],
    [693, "0.2096073331368553", "-0.27607072640974284"],
    [720, "0.20296865842373202", "-0.28696338926452364"],
    [798, "0.1907504155763072", "-0.3309196133364522"],
    [900, "0.18969515600963965", "-0.3396340035213204"],
]


def _clean_env(**extra: str) -> dict[str, str]:
    """This environment without any dispatch setting (the test process may run under one), plus ``extra``."""
    drop = {*portable.PINS, "GLIBC_TUNABLES", "MKL_ENABLE_INSTRUCTIONS", "ONLINEGP_NATIVE", portable.VARIABLE}
    env = {k: v for k, v in os.environ.items() if k not in drop}
    return {**env, "OMP_NUM_THREADS": "1", **extra}


def probe(env: dict[str, str], *args: str) -> dict:
    run = subprocess.run(
        [sys.executable, "-m", "tests.library.portable_probe", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


@pytest.mark.pinned
def test_portable_mode_gives_the_same_bits_under_every_dispatch():
    """The small mission and a short run of every registered model, bit for bit under each forced dispatch, and the
    mission's rows those recorded on another day (PORTABLE_MISSION)."""
    runs = [probe(_clean_env(ONLINEGP_PORTABLE="1", **forced)) for forced in FORCED]
    assert runs[0]["numerics"] == "portable"
    assert runs[0]["mission"] == PORTABLE_MISSION
    for forced, run in zip(FORCED[1:], runs[1:]):
        assert run == runs[0], f"the portable mode's numbers moved under {forced}"


def test_default_mode_moves_under_a_foreign_dispatch():
    """Without the mode the same runs change digits under a foreign dispatch (so the test above can fail)."""
    args = ("--no-mission", "--models", "poam,osgpr,exact,wiski")
    default, foreign = probe(_clean_env(), *args), probe(_clean_env(**FOREIGN), *args)
    assert default["numerics"] == foreign["numerics"] == "default"
    assert default["models"] != foreign["models"]


def test_importing_onlinegp_restarts_a_process_that_started_without_the_pins():
    code = (
        "import os; print('started', os.environ.get('ATEN_CPU_CAPABILITY'), flush=True); import onlinegp, torch; "
        "print('ran', onlinegp.portable.active(), torch.backends.cpu.get_cpu_capability(), torch.get_num_threads())"
    )
    env = _clean_env(ONLINEGP_PORTABLE="1", ATEN_CPU_CAPABILITY="avx2", OMP_NUM_THREADS="2")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.splitlines() == ["started avx2", "started default", "ran True DEFAULT 1"]


def test_command_line_flag_restarts_the_command_in_the_mode():
    command = [sys.executable, "-m", "onlinegp", "--portable", "--version"]
    out = subprocess.run(command, env=_clean_env(), capture_output=True, text=True, check=True).stdout
    assert out.strip() == f"onlinegp {onlinegp.__version__} (portable numerics)"


def test_the_flag_is_refused_where_a_restart_would_run_another_program():
    """Inside another process (here pytest, through typer's runner) a restart would run that program again."""
    result = CliRunner().invoke(app, ["--portable", "models"], env={"COLUMNS": "300"})
    assert result.exit_code == 2 and "ONLINEGP_PORTABLE=1 in the environment" in result.output
    assert not portable.active()


def test_the_mode_changed_after_import_is_refused(monkeypatch):
    assert not portable.active()
    monkeypatch.setenv(portable.VARIABLE, "1")
    with pytest.raises(portable.PortableModeError, match="changed after onlinegp was imported"):
        portable.active()


def test_an_interactive_session_is_refused_with_the_line_to_export(monkeypatch):
    monkeypatch.setattr(portable, "_interactive", lambda: True)
    with pytest.raises(portable.PortableModeError, match="export MKL_CBWR='COMPATIBLE'.*ONLINEGP_PORTABLE='1'"):
        portable.restart()


def test_environment_keeps_other_glibc_tunables():
    env = portable.environment({"GLIBC_TUNABLES": "glibc.malloc.arena_max=2:glibc.cpu.hwcaps=-AVX512F"})
    assert env["GLIBC_TUNABLES"] == f"glibc.malloc.arena_max=2:{portable.GLIBC_HWCAPS}"
    assert all(env[k] == v for k, v in portable.PINS.items()) and env[portable.VARIABLE] == "1"
    assert portable._missing(env) == [] and portable._missing({}) == [*portable.PINS, "GLIBC_TUNABLES"]


def test_the_portable_routine_is_a_build_of_its_own():
    code = "from onlinegp.kernels import native; print(native.library()._name)"
    names = [
        subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
        for env in (_clean_env(), _clean_env(ONLINEGP_PORTABLE="1"))
    ]
    assert "portable-" not in names[0] and "attentive_mixture-portable-" in names[1]
