"""The POAM paper's own model code (Chen et al. 2024; github.com/Weizhe-Chen/POAM), driven on a recorded stream.

The checkout is kept outside this repository and never committed; ``paper_code`` is its path. The calls are the ones
its benchmark script makes: min-max input and standard output scaling fitted on the pilot survey,
``AttentiveKernel(2, 10, 10, 0.05, 0.5)`` under a scale kernel, M = 500, initial noise 1.0, batches of 256, jitter
1e-6, one warm-up Adam step, then per update pivoted-Cholesky inducing inputs, the variational update and 10 Adam
steps. With seed 0 it reproduces the shared reference recordings exactly (``study_seed_spread.py`` checks this).
"""

from __future__ import annotations

import builtins
import sys
import time
import types
from pathlib import Path

import numpy as np
import torch

from onlinegp import metrics


def paper_code_replay(paper_code: Path, path: Path, seed: int, updates: int | None = None) -> list[dict]:
    """One replay of the stream at ``path`` (its first ``updates`` updates) through the paper's POAM model code,
    seeded with ``seed``: one metrics row per update, with the update's wall time (adding the batch, the inducing
    inputs, the variational update and the Adam steps; not the prediction)."""
    if "src.models" not in sys.modules:  # the checkout's package is called ``src``
        package = types.ModuleType("src")
        package.__path__ = [str(paper_code / "src")]
        sys.modules["src"] = package
    import gpytorch
    import src.kernels
    import src.models
    import src.scalers

    d = np.load(path)
    x, y, ends = d["x"], d["y"][:, None], d["batch_end"]
    eval_x, eval_y = d["eval_x"], d["eval_y"]
    torch.manual_seed(seed)
    x_scaler, y_scaler = src.scalers.MinMaxScaler(), src.scalers.StandardScaler()
    x_scaler.fit(x[: ends[0]])
    y_scaler.fit(y[: ends[0]])
    kernel = gpytorch.kernels.ScaleKernel(src.kernels.AttentiveKernel(2, 10, 10, 0.05, 0.5))
    model = src.models.POAMModel(
        num_inducing=500, learn_inducing=False, x_train=x[: ends[0]], y_train=y[: ends[0]], x_scaler=x_scaler,
        y_scaler=y_scaler, kernel=kernel, noise_variance=1.0, batch_size=256, jitter=1e-6,
    )  # fmt: skip
    rows, original_print = [], builtins.print
    builtins.print = lambda *a, **k: None  # the model code prints its optimiser's progress
    try:
        model.optimize(num_steps=1)
        for k, end in enumerate(ends[:updates]):
            start = time.perf_counter()
            if k > 0:
                model.add_data(x[ends[k - 1] : end], y[ends[k - 1] : end])
            model.update_inducing()
            model.update_variational()
            model.optimize(num_steps=10)
            seconds = time.perf_counter() - start
            mean, std = model.predict(eval_x)
            seen = y[:end, 0]
            m = metrics.all_metrics(eval_y, mean[:, 0], std[:, 0] ** 2, float(seen.mean()), float(seen.std()))
            rows.append({"smse": m["smse"], "msll": m["msll"], "update_time": seconds})
    finally:
        builtins.print = original_print
    return rows


def recorded_seed(stem: str) -> int:
    """The seed a reference stream ``<env>_seed<S>`` was recorded with (the paper code reproduces it with that seed)."""
    return int(stem.rsplit("seed", 1)[1])
