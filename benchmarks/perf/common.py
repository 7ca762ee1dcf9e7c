"""Shared helpers of the benchmarks (the timing suite here, and the studies of ``benchmarks/studies/``): a smooth
non-stationary test field, streams, robust timing, and the result files' one schema (:data:`ENVELOPE`).

Benchmarks are scripts, not tests: each ``bench_*.py`` (declared in ``registry.py``) writes
``benchmarks/perf/results/<name>.json`` through :func:`write`; ``run.py`` runs them and writes ``results/SUMMARY.md``.
A study writes ``benchmarks/studies/results/<name>.json`` the same way (``write(name, result, STUDY_RESULTS)``).
"""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from onlinegp.experiments.bench.runner import code_version

RESULTS = Path(__file__).resolve().parent / "results"
#: the studies' result files (benchmarks/studies/results): a study passes it to :func:`write`
STUDY_RESULTS = Path(__file__).resolve().parents[1] / "studies" / "results"
EXTENT = 30.0  # task extent [-30, 30]^2 m, as the POAM simulator


def field(xy: np.ndarray) -> np.ndarray:
    """A bundled-like elevation field on [-30, 30]^2 scaled to about [0, 255]: a smooth valley and ridge on one
    side, short-scale ripples on the other (non-stationary, like the paper's SRTM crops)."""
    x, y = xy[..., 0] / EXTENT, xy[..., 1] / EXTENT
    smooth = np.exp(-((x - 0.3) ** 2 + (y + 0.2) ** 2) / 0.25) + 0.6 * np.exp(-((x + 0.5) ** 2 + (y - 0.6) ** 2) / 0.1)
    ripples = 0.25 * np.sin(9 * x) * np.cos(7 * y) * (1 / (1 + np.exp(-8 * x)))
    ridge = 0.2 * np.exp(-((y + 0.6 + 0.2 * np.sin(5 * x)) ** 2) / 0.005)
    return 255.0 * (smooth + ripples + ridge + 0.3) / 1.9


def stream(
    n: int, seed: int = 0, noise_std: float = 1.0, dtype: torch.dtype = torch.float64
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` noisy samples (sensor noise std 1 in field units) at uniform random positions in the task extent."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-EXTENT, EXTENT, size=(n, 2))
    y = field(X) + noise_std * rng.standard_normal(n)
    return torch.as_tensor(X, dtype=dtype), torch.as_tensor(y, dtype=dtype)


def grid(n: int = 50, dtype: torch.dtype = torch.float64) -> tuple[torch.Tensor, torch.Tensor]:
    """An n x n evaluation grid over the task extent and the noise-free field on it."""
    g = np.linspace(-EXTENT, EXTENT, n)
    X = np.stack(np.meshgrid(g, g), -1).reshape(-1, 2)
    return torch.as_tensor(X, dtype=dtype), torch.as_tensor(field(X), dtype=dtype)


BOUNDS = [[-EXTENT, -EXTENT], [EXTENT, EXTENT]]


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    """(wall-clock seconds, result) of ``fn()``."""
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def timed_cpu(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    """(wall-clock seconds, CPU seconds of this process, result): on a shared machine the CPU time is the
    steadier measure of work; with one thread and an idle machine the two agree."""
    t0, c0 = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - t0, time.process_time() - c0, out


def median(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def machine() -> dict:
    """What the numbers were measured on."""
    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "code": code_version(),
    }


#: the envelope of every result file: what :func:`write` puts around a benchmark's own keys (its ``config`` and results)
ENVELOPE = {
    "benchmark": "the result's name (the file's stem)",
    "machine": "what it ran on (:func:`machine`): platform, processor, cpus, torch, torch_threads, load_average, code",
    "config": "the benchmark's settings (optional; older files call it args or settings)",
}
#: older files' spellings of the envelope, read by :func:`read_result`: machine keys, and top-level keys
OLD_MACHINE_KEYS = {"threads": "torch_threads"}
OLD_CONFIG_KEYS = ("args", "settings")


def read_result(path: Path) -> dict:
    """A result file's envelope, normalised: ``benchmark``, ``machine`` (with ``code``, ``torch_threads`` and
    ``load_average`` wherever the file has them: older files hold some at the top level or under other names),
    ``config`` (or None) and ``path``. The file is read as it is; nothing is rewritten."""
    data = json.loads(Path(path).read_text())
    machine = dict(data.get("machine") or {})
    for old, new in OLD_MACHINE_KEYS.items():
        if old in machine and new not in machine:
            machine[new] = machine.pop(old)
    for key in ("code", "torch_threads"):
        if key not in machine and key in data:
            machine[key] = data[key]
    config = data.get("config", next((data[k] for k in OLD_CONFIG_KEYS if k in data), None))
    return {"benchmark": data.get("benchmark", Path(path).stem), "machine": machine, "config": config, "path": path}


def write(name: str, result: dict, results: Path = RESULTS) -> Path:
    """Write ``result`` as ``results/<name>.json`` in the :data:`ENVELOPE` (``benchmark``, ``machine``, then its keys)."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{name}.json"
    result = {"benchmark": name, "machine": machine(), **result}
    path.write_text(json.dumps(result, indent=2, default=float))
    return path
