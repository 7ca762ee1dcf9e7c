"""OpenMP thread count and wait policy, chosen before torch starts its OpenMP pool.

Importing this module calls :func:`configure_threads`; ``onlinegp/__init__.py`` imports it before any module that
imports torch. It imports nothing but the standard library.
"""

from __future__ import annotations

import os
import sys


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_threads(cpus: int | None = None) -> int:
    """onlinegp's thread count on a machine with ``cpus`` usable CPUs: 1 up to 2 CPUs, else half of them, at most 4."""
    cpus = usable_cpus() if cpus is None else cpus
    return 1 if cpus <= 2 else min(cpus // 2, 4)


def configure_threads() -> dict[str, str]:
    """Set ``OMP_NUM_THREADS`` to :func:`default_threads` and ``OMP_WAIT_POLICY`` to ``PASSIVE`` (if unset) for
    this process, unless the user chose: nothing is changed once torch is imported (the pool is started; a
    ``torch.set_num_threads`` then wins) or when ``OMP_NUM_THREADS`` is set. Returns the variables it set; being
    environment variables, they are inherited by processes started from this one.

    Why (``benchmarks/bench_threads.py``, ``results/threads.json``: 2 CPUs shared with other jobs, load average
    2-6, torch 2.13; medians of 3, wall / CPU s; "busy": beside a process spinning on one core):

    ==================  =====================  =====================  ======================
    setting             mission, 800 samples   mission, busy          POAM epoch (busy)
    ==================  =====================  =====================  ======================
    1 thread            15.0 / 11.6            21.7 / 12.4            0.56 (1.25)
    2 threads           23.9 / 22.7            28.7 / 23.5            15.0 (over 120 s run)
    2 threads, PASSIVE  13.4 / 13.0            16.0 / 12.3            0.86 (1.49)
    ==================  =====================  =====================  ======================

    One thread does the least work and the fastest epochs; its mission wall times and those of 2 passive threads
    are within the noise. libgomp's default spin-waiting doubles the CPU time and can slow an epoch 27x. Above 2
    CPUs the count is a cap, not measured: POAM's 500 x 500 matrices gain little from many threads.
    """
    if "torch" in sys.modules or os.environ.get("OMP_NUM_THREADS"):
        return {}
    chosen = {"OMP_NUM_THREADS": str(default_threads())}
    if "OMP_WAIT_POLICY" not in os.environ:
        chosen["OMP_WAIT_POLICY"] = "PASSIVE"
    os.environ.update(chosen)
    return chosen


configure_threads()
