"""OpenMP thread count and wait policy, chosen before torch starts its OpenMP pool, or applied to torch's pool when
torch was imported first.

Importing this module calls :func:`configure_threads`; ``onlinegp/__init__.py`` imports it before any module that
imports torch. It imports nothing but the standard library (and, when torch is already loaded, threadpoolctl).
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

log = logging.getLogger("onlinegp")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the platform has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def default_threads(cpus: int | None = None) -> int:
    """onlinegp's thread count on a machine with ``cpus`` usable CPUs: 1 up to 2 CPUs, else half of them, at most 4."""
    cpus = usable_cpus() if cpus is None else cpus
    return 1 if cpus <= 2 else min(cpus // 2, 4)


def torch_default_threads() -> set[int]:
    """The thread counts torch picks by itself here: one per physical core, or per CPU where a build counts those
    (both among the CPUs this process may run on, and on the whole machine)."""
    cpus = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else set(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(tuple((topology / f).read_text().strip() for f in ("physical_package_id", "core_id")))
        except OSError:
            cores.add(("cpu", str(cpu)))
    return {len(cpus), len(cores), os.cpu_count() or 1}


def configure_threads() -> dict[str, str]:
    """Choose :func:`default_threads` OpenMP threads with ``OMP_WAIT_POLICY=PASSIVE`` for this process, unless the
    user chose: nothing is changed when ``OMP_NUM_THREADS`` or ``MKL_NUM_THREADS`` is set. Returns what it set.

    Before torch is imported it sets the two environment variables (``OMP_WAIT_POLICY`` only if unset), which torch's
    pool then reads. Once torch is imported (``import torch`` before ``import onlinegp``) it calls
    ``torch.set_num_threads`` instead, when torch still runs its own default count (:func:`torch_default_threads`;
    another count means ``torch.set_num_threads`` was called, and it wins; a call with the default count itself cannot
    be told apart, so make it after importing onlinegp). The wait policy cannot change then: with more than one thread
    and no ``OMP_WAIT_POLICY``, a warning on the ``onlinegp`` logger says how to set it. Either way the variables are
    set in the environment too, so processes started from this one inherit the choice.

    Why (``benchmarks/perf/bench_threads.py``, ``results/threads.json``: 2 CPUs shared with other jobs, load average
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
    CPUs the count is a cap, not measured: POAM's 500 x 500 matrices gain little from many threads. Imported after
    torch, onlinegp's quick start took 93.7 s instead of 7.4 s beside a busy core before this applied to a loaded
    torch (``benchmarks/perf/results/import-order.md`` has the numbers since).
    """
    if os.environ.get("OMP_NUM_THREADS") or os.environ.get("MKL_NUM_THREADS"):
        return {}
    torch = sys.modules.get("torch")
    if torch is not None and not hasattr(torch, "set_num_threads"):
        return {}  # torch is part-way through its own import (it imported onlinegp): too early and too late
    if torch is not None and torch.get_num_threads() not in torch_default_threads():
        return {}
    chosen = {"OMP_NUM_THREADS": str(default_threads())}
    if "OMP_WAIT_POLICY" not in os.environ:
        chosen["OMP_WAIT_POLICY"] = "PASSIVE"
    if torch is not None:
        torch.set_num_threads(default_threads())
        _limit_loaded_blas(default_threads())
        if default_threads() > 1 and "OMP_WAIT_POLICY" in chosen:
            log.warning(
                "torch was imported before onlinegp, so its %d OpenMP threads keep the default spin-waiting "
                "(slow beside other jobs); import onlinegp first, or set OMP_WAIT_POLICY=PASSIVE in the environment",
                default_threads(),
            )
    os.environ.update(chosen)
    return chosen


def _limit_loaded_blas(threads: int) -> None:
    """Limit the BLAS libraries loaded before onlinegp (numpy's OpenBLAS, loaded with torch) to ``threads``: they read
    ``OMP_NUM_THREADS`` only when loaded, and OpenBLAS's idle threads spin too (botorch_loop.py took 9.0 s instead of
    5.3 s beside a busy core with numpy's two threads; ``benchmarks/perf/results/import-order.md``)."""
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=threads, user_api="blas")


configure_threads()
