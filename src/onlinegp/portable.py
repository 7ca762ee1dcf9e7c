"""The portable numeric mode: the same numbers, bit for bit, on any x86-64 CPU.

Without it every library picks its code path by CPU: MKL's BLAS/LAPACK kernels (torch), ATen's vector width,
OpenBLAS's kernels (numpy, SciPy's LAPACK), numpy's SIMD loops, glibc's ``exp``/``log`` (an FMA variant where the
CPU has FMA), the Attentive Kernel's C routine (``-march=native``), and the thread count splits reductions. Each
moves the last bits, and an active-sampling mission (an argmax over candidates) then takes another path.

``ONLINEGP_PORTABLE=1`` in the environment (``onlinegp --portable`` on the command line) pins them all to code
paths every x86-64 CPU since 2009 (x86-64-v2, numpy's own baseline) runs, and to one thread:

- :data:`PINS`, read by the libraries when they load (glibc's when the process starts);
- the Attentive Kernel's routine built for plain x86-64 without FMA contraction or SIMD reductions
  (:mod:`onlinegp.kernels.native`), or its PyTorch path where no C compiler exists (a build without a compiler
  gives other digits: :func:`onlinegp.kernels.native.numerics` records which ran).

The variables must be in place before the process starts, so importing onlinegp with ``ONLINEGP_PORTABLE=1`` in
a process that started without them runs the same command again at once with them (``os.execve``); an interactive
session cannot be restarted and is refused with the line to export. Changing ``ONLINEGP_PORTABLE`` after onlinegp was imported is refused at the next use (:func:`active`).

Cost: ``benchmarks/perf/bench_portable.py`` (README, "Reproducible numbers").
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

#: the environment variable that asks for the mode
VARIABLE = "ONLINEGP_PORTABLE"
#: glibc's libm picks an FMA variant of exp, log, pow, sin... where the CPU has FMA (their last bits differ)
GLIBC_HWCAPS = "glibc.cpu.hwcaps=-AVX2,-FMA,-FMA4,-AVX"
#: what the mode sets, read by each library when it loads
PINS = {
    "MKL_CBWR": "COMPATIBLE",  # MKL's conditional numerical reproducibility: its SSE2 code path on every CPU
    "ATEN_CPU_CAPABILITY": "default",  # ATen's kernels without AVX2/AVX-512
    "OPENBLAS_CORETYPE": "Nehalem",  # OpenBLAS's SSE4.2 kernels (numpy's baseline needs SSE4.2 anyway)
    "NPY_DISABLE_CPU_FEATURES": "X86_V3 X86_V4 AVX512_ICL AVX512_SPR",  # numpy 2.4's loops above its baseline
    "OMP_NUM_THREADS": "1",  # reductions split by thread count differ in their last bits
    "MKL_NUM_THREADS": "1",
    "OPENBLAS_NUM_THREADS": "1",
}
#: libraries that read PINS when they load: once one is loaded the mode can no longer be set in this process
LIBRARIES = ("torch", "numpy", "scipy")

_ACTIVE = False  # whether this process runs in the mode (set by configure, at import)


class PortableModeError(RuntimeError):
    """The portable mode was asked for too late: a library had loaded, or the process cannot be restarted."""


def requested() -> bool:
    """Whether ``ONLINEGP_PORTABLE`` asks for the mode (any value but empty or 0)."""
    return os.environ.get(VARIABLE, "0").strip() not in ("", "0")


def environment(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with the mode's variables set, glibc's tunable added to any
    others already there."""
    env = dict(os.environ if base is None else base)
    tunables = [t for t in env.get("GLIBC_TUNABLES", "").split(":") if t and not t.startswith("glibc.cpu.hwcaps=")]
    env.update(PINS, GLIBC_TUNABLES=":".join([*tunables, GLIBC_HWCAPS]))
    env[VARIABLE] = "1"
    return env


def _started_with() -> dict[str, str]:
    """The environment this process started with (os.environ may have changed since; glibc read this one)."""
    try:
        raw = Path("/proc/self/environ").read_bytes()
    except OSError:
        return dict(os.environ)
    pairs = (item.decode(errors="replace").partition("=") for item in raw.split(b"\0") if item)
    return {key: value for key, _, value in pairs}


def _missing(env: dict[str, str]) -> list[str]:
    """The mode's variables that ``env`` lacks or sets otherwise."""
    wanted = environment(env)
    return [key for key in (*PINS, "GLIBC_TUNABLES") if env.get(key) != wanted[key]]


def _interactive() -> bool:
    return bool(sys.flags.interactive) or hasattr(sys, "ps1") or "ipykernel" in sys.modules or not sys.orig_argv[1:]


def export_line() -> str:
    """The shell line that sets the mode for the processes started from that shell."""
    env = environment({})
    return "export " + " ".join(f"{key}='{value}'" for key, value in env.items())


def configure() -> None:
    """Called when this module is imported (first thing of ``import onlinegp``): under ``ONLINEGP_PORTABLE`` make sure this process runs with :data:`PINS`,
    restarting it with them when it started without; else nothing."""
    global _ACTIVE
    if not requested():
        return
    if _missing(_started_with()):
        restart()
    _ACTIVE = True


def restart() -> None:
    """Run this process's command again with the mode's environment (never returns); refused in an interactive
    session, which would lose its state."""
    if _interactive():
        raise PortableModeError(
            f"{VARIABLE}=1 must be in place before Python starts (the libraries read it when they load), and this "
            f"interactive session cannot be restarted; quit, then in the shell run:\n    {export_line()}"
        )
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, environment())


def active() -> bool:
    """Whether this process runs in the portable mode; a change of ``ONLINEGP_PORTABLE`` since onlinegp was
    imported is refused (the mode cannot change in a running process)."""
    if requested() != _ACTIVE:
        raise PortableModeError(
            f"{VARIABLE} changed after onlinegp was imported ({'on' if requested() else 'off'} now, "
            f"{'on' if _ACTIVE else 'off'} at import): set it in the environment before starting Python, or run "
            "`onlinegp --portable ...`"
        )
    return _ACTIVE


def threads(count: int | None) -> int | None:
    """The thread count to use when ``count`` is asked for: 1 in the portable mode."""
    return 1 if active() else count


configure()
